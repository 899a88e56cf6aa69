"""The ``dkrr`` command refuses what would lose data or mislead, before doing any work.

Most tests call :func:`dkrr.cli.main` in this process against the session's real
LocalCluster (``--scheduler``); the two that are about the process itself (SIGTERM,
what reaches stderr under ``-q``) run ``python -m dkrr.cli`` as a real subprocess with
its own LocalCluster, and SIGTERM at the moment distributed logs a traceback of its own
(a call cut short before its coroutine started) is reproduced deterministically in a
script.
"""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

import dkrr

from dkrr import RandomFeatureRidge
from dkrr.cli import main
from dkrr.io import open_dataset, write_dataset
from dkrr.io._model import save_model

pytestmark = pytest.mark.cluster

UNREACHABLE = "tcp://127.0.0.1:9"  # nothing listens: any attempt to use it fails


def _store(path, n=60, n_targets=1, nan=False, constant=False, chunks=15):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 3))
    y = X[:, 0] if n_targets == 1 else np.column_stack([X[:, j] for j in range(n_targets)])
    if constant:
        y = np.ones_like(y)
    if nan:
        X[-1, 1] = np.nan
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X, chunks=(chunks, 3)), da.from_array(y, chunks=chunks), path)
    return Path(path), X, y


def _model(path, X, y):
    est = RandomFeatureRidge(method="rff", n_components=8, gamma=0.5, random_state=0).fit(X, y)
    save_model(est, path)
    return Path(path)


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def addr(local_cluster):
    return local_cluster.scheduler_address


def _unchanged(store, X, y):
    data = open_dataset(store)
    with dask.config.set(scheduler="threads"):
        np.testing.assert_array_equal(data.X.compute(), X)
        np.testing.assert_array_equal(data.y.compute(), y)


# ----------------------------------------------------------------- --overwrite


def test_predict_never_overwrites_its_input_store(tmp_path, capsys):
    store, X, y = _store(tmp_path / "data.zarr")
    model = _model(tmp_path / "m", X, y)
    alias = tmp_path / "alias.zarr"
    alias.symlink_to(store)
    for out in (store, alias):
        code, _, err = _run(capsys, "predict", model, store, "--out", out, "--overwrite",
                            "--scheduler", UNREACHABLE, "-q")
        assert code == 1 and "it is an input of this command" in err, err
    _unchanged(store, X, y)


def test_ingest_never_writes_inside_another_dataset(tmp_path, capsys):
    store, X, y = _store(tmp_path / "other.zarr")
    csv = tmp_path / "new.csv"
    csv.write_text("a,b\n1,2\n3,4\n")
    code, _, err = _run(capsys, "ingest", csv, "--out", store / "X", "--overwrite", "-q")
    assert code == 1 and "inside the Zarr store" in err and "other.zarr" in err, err
    _unchanged(store, X, y)
    code, _, err = _run(capsys, "ingest", csv, "--out", tmp_path, "--overwrite", "-q")
    assert code == 1 and "contains the input" in err, err
    assert csv.read_text() == "a,b\n1,2\n3,4\n"


def test_a_memory_url_output_is_refused_before_any_work(tmp_path, capsys):
    """ingest and fit wrote to memory://, said "wrote memory://..." and exited 0: the store
    or model died with the process (found by a CLI probe). Every command that writes now
    refuses it first (the unreachable scheduler fails any work that ran)."""
    store, X, y = _store(tmp_path / "data.zarr")
    model = _model(tmp_path / "m", X, y)
    csv = tmp_path / "new.csv"
    csv.write_text("a,b\n1,2\n3,4\n")
    for args in (("ingest", csv, "--out", "memory://d.zarr"),
                 ("fit", store, "--out", "memory://m.model", "--scheduler", UNREACHABLE),
                 ("predict", model, store, "--out", "memory://p.zarr", "--scheduler", UNREACHABLE)):
        code, out, err = _run(capsys, *args, "-q")
        assert code == 1 and "wrote" not in out, (args, out, err)
        out_url = args[args.index("--out") + 1]
        assert f"error: --out {out_url}: a memory:// location lives in this command's process" in err, err


# ----------------------------------------------------------------- cannot be written


@pytest.mark.parametrize("where", ["through-a-file", "read-only"])
def test_unwritable_output_is_refused_before_the_fit(tmp_path, capsys, where):
    # the store holds a NaN: a fit that ran would fail with a NaN error, and the
    # unreachable scheduler would fail any work; the output error must come first
    store, _, _ = _store(tmp_path / "data.zarr", nan=True)
    blocker = tmp_path / "somefile.txt"
    blocker.write_text("x")
    out = blocker / "out.model" if where == "through-a-file" else Path("/proc/dkrr-out.model")
    code, _, err = _run(capsys, "fit", store, "--out", out, "--scheduler", UNREACHABLE, "-q")
    assert code == 1, err
    assert ("is not a directory" if where == "through-a-file" else "does not accept new files") in err
    assert "NaN" not in err and "scheduler" not in err.lower()
    for command in (["predict", tmp_path / "m", store], ["ingest", blocker]):
        code, _, err = _run(capsys, *command, "--out", out, "-q",
                            *(["--scheduler", UNREACHABLE] if command[0] == "predict" else []))
        assert code == 1 and "cannot write" in err, err


# ----------------------------------------------------------------- config files


@pytest.mark.parametrize("text, named", [
    ('n-components = "12"\n', "n-components"),
    ("alpha = true\n", "alpha"),
    ("[fit]\ngamma = [1, \"x\"]\n", "gamma"),  # a list is ARD widths (numbers only)
    ('alphas = [1, "x"]\n', "alphas"),
    ("cv = 2.5\n", "cv"),
    ("nonsense = 1\n", "nonsense"),
    ("method = \n", "not valid TOML"),
    ("fit = 3\n", "fit"),
])
def test_bad_config_values_name_the_key(tmp_path, capsys, text, named):
    cfg = tmp_path / "fit.toml"
    cfg.write_text(text)
    code, _, err = _run(capsys, "fit", tmp_path / "data.zarr", "--out", tmp_path / "m",
                        "--config", cfg, "--scheduler", UNREACHABLE, "-q")
    assert code == 1 and named in err and str(cfg) in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------- evaluate


def test_evaluate_multi_target_store(tmp_path, capsys, addr):
    store, X, Y = _store(tmp_path / "two.zarr", n_targets=2)
    model = _model(tmp_path / "m2", X, Y)
    code, out, err = _run(capsys, "evaluate", model, store, "--json", "--scheduler", addr, "-q")
    assert code == 0, err
    est = RandomFeatureRidge(method="rff", n_components=8, gamma=0.5, random_state=0).fit(X, Y)
    assert json.loads(out)["r2"] == pytest.approx(est.score(X, Y), rel=1e-9)
    one = _model(tmp_path / "m1", X, Y[:, 0])
    code, _, err = _run(capsys, "evaluate", one, store, "--json", "--scheduler", addr, "-q")
    assert code == 1 and "1 target" in err and "2 targets" in err, err


def _strict(text):
    def refuse(name):
        raise AssertionError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_evaluate_json_stays_valid_on_a_constant_target(tmp_path, capsys, addr):
    """A constant target's R^2 is undefined: it was NaN, written as null with a note; it is
    now scikit-learn's r2_score (0.0 unless exact), with a note, and the JSON strict."""
    store, X, y = _store(tmp_path / "const.zarr", constant=True)
    model = _model(tmp_path / "m", *_store(tmp_path / "train.zarr")[1:])
    code, out, err = _run(capsys, "evaluate", model, store, "--json", "--scheduler", addr, "-q")
    assert code == 0, err
    metrics = _strict(out)
    assert metrics["r2"] == 0.0 and metrics["rmse"] > 0
    assert "y is constant" in err and "R^2 is undefined" in err, err


# ----------------------------------------------------------------- stores that lie


def test_corrupted_or_absurd_store_is_one_clear_line(tmp_path, capsys, addr):
    store, X, y = _store(tmp_path / "data.zarr")
    model = _model(tmp_path / "m", X, y)
    (store / "X" / "c" / "1" / "0").write_bytes(b"garbage" * 10)
    code, _, err = _run(capsys, "evaluate", model, store, "--scheduler", addr, "-q")
    assert code == 1 and "array 'X'" in err and "corrupted" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    g = zarr.open_group(str(tmp_path / "huge.zarr"), mode="w", attributes={"dkrr_layout": 1})
    g.create_array("X", shape=(10**15, 3), chunks=(65536, 3), dtype="f4")
    g.create_array("y", shape=(10**15,), chunks=(65536,), dtype="f4")
    code, _, err = _run(capsys, "fit", tmp_path / "huge.zarr", "--out", tmp_path / "m2",
                        "--scheduler", UNREACHABLE, "-q")
    assert code == 1 and "1000000000000000 rows" in err and "blocks" in err, err


# ----------------------------------------------------------------- real processes


def _dkrr(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "dkrr.cli", *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _blocking_store(tmp_path):
    """``(store, model, chunk, content, out_dir)``: a store and its model, one chunk of X
    a FIFO (``content`` its bytes, fed by :func:`_feed_fifo`): the worker reading it blocks
    until the test feeds it, so a signal or a closed stream surely arrives while the
    prediction store is open."""
    store, X, y = _store(tmp_path / "data.zarr", n=80, chunks=20)
    model = _model(tmp_path / "m", X, y)
    chunk = store / "X" / "c" / "2" / "0"
    content = chunk.read_bytes()
    chunk.unlink()
    os.mkfifo(chunk)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    return store, model, chunk, content, out_dir


def _await_output(proc, out_dir) -> None:
    """Wait (120 s at most) until `proc` has its hidden temporary output in `out_dir`."""
    deadline = time.monotonic() + 120
    while not any(".tmp-" in n for n in _leftovers(out_dir)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the prediction store never appeared"
        time.sleep(0.05)


def _feed_fifo(proc, chunk, content) -> None:
    """Write `content` into the FIFO `chunk` once a reader has it open, while `proc` runs
    (a read blocked on it finishes; a process that never opens it is left to exit)."""
    while proc.poll() is None:
        try:
            fd = os.open(chunk, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            assert exc.errno == errno.ENXIO
            time.sleep(0.05)
            continue
        os.set_blocking(fd, True)
        os.write(fd, content)
        os.close(fd)
        return


def _leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_sigterm_cleans_up_like_ctrl_c(tmp_path):
    """SIGTERM while the blocks are being written: exit 143, no hidden .tmp- store."""
    store, model, chunk, content, out_dir = _blocking_store(tmp_path)
    proc = _dkrr("predict", model, store, "--out", out_dir / "pred.zarr", "--workers", 1,
                 "--memory-limit", "1GB", "-q")
    try:
        _await_output(proc, out_dir)
        proc.send_signal(signal.SIGTERM)
        _feed_fifo(proc, chunk, content)  # let the blocked read finish, if it started
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "terminated" in err and "Traceback" not in err
    assert _leftovers(out_dir) == [] and not (out_dir / "pred.zarr").exists()


def _stdout_closed(*args, unbuffered):
    """Run ``dkrr`` with stdout a pipe whose reader is gone before the command writes (as
    ``| head -1`` once head has its line, without the race); returns (status, stderr).
    ``unbuffered``: PYTHONUNBUFFERED=1, where the print itself fails; else the buffered
    text fails at its flush (at the interpreter's exit, before the fix: exit 120)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "dkrr.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    proc.stdout.close()  # the only reader: the command's writes to stdout now fail (EPIPE)
    proc.stdout = None
    try:
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


CLUSTER = ["--workers", 1, "--memory-limit", "1GB"]


@pytest.mark.parametrize("command, unbuffered", [("evaluate", False), ("evaluate --json", True),
                                                 ("predict", False), ("fit", True)])
def test_a_closed_stdout_ends_the_command_quietly(tmp_path, command, unbuffered):
    """``dkrr evaluate MODEL STORE -q | head -1`` ended in a BrokenPipeError traceback from
    the command's print (exit 1). Now every command whose stdout is closed by its reader
    ends quietly with 141 (128 + SIGPIPE, as a shell reports ``cat`` stopped by it), and an
    output written in full before its line was printed stays, complete."""
    store, X, y = _store(tmp_path / "data.zarr")
    model = _model(tmp_path / "m", X, y)
    name, *flags = command.split()
    out = tmp_path / "out"
    where = {"evaluate": [model, store], "predict": [model, store, "--out", out], "fit": [store, "--out", out]}[name]
    fit_options = ["--method", "rff", "--n-components", 8, "--gamma", 0.5, "--no-cv", "--alpha", 0.1]
    status, err = _stdout_closed(name, *where, *flags, *(fit_options if name == "fit" else []), *CLUSTER, "-q",
                                 unbuffered=unbuffered)
    assert status == 141 and err == "", (status, err)
    if name == "predict":
        assert zarr.open_group(str(out), mode="r")["y_pred"].shape == (60,)
    if name == "fit":
        from dkrr.io._model import load_model

        assert load_model(out).n_features_in_ == 3
    assert _leftovers(tmp_path) == []


def test_only_a_pipe_whose_reader_is_gone_counts_as_closed(tmp_path):
    """The quiet exit 141 is for the command's own stdout or stderr: a BrokenPipeError of
    another pipe (a connection's) stays the command's error. Real pipes and a file."""
    from dkrr.cli._main import _reader_gone

    read, write = os.pipe()
    with open(write, "w") as stream, open(tmp_path / "log", "w") as log:
        assert not _reader_gone(stream) and not _reader_gone(log)
        os.close(read)
        assert _reader_gone(stream) and not _reader_gone(log)
    assert not _reader_gone(io.StringIO())


def test_a_stderr_closed_while_predict_writes_leaves_no_output(tmp_path):
    """``dkrr predict ... 2>&1 | head``: the reader of stderr goes while the predictions
    are being written; the progress bar's next line fails (EPIPE), which unwinds the write
    as Ctrl-C does: exit 141, no traceback, nothing left behind. A chunk of X is a FIFO,
    so the write is surely under way when stderr is closed (as in the SIGTERM test)."""
    store, model, chunk, content, out_dir = _blocking_store(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "dkrr.cli", "predict", model, store, "--out",
                             out_dir / "pred.zarr", *map(str, CLUSTER)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _await_output(proc, out_dir)
        proc.stderr.close()  # its only reader: the next progress line fails
        proc.stderr = None
        _feed_fifo(proc, chunk, content)  # let the blocked read go on, if it started
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 141 and out == "", (proc.returncode, out)
    assert _leftovers(out_dir) == [] and not (out_dir / "pred.zarr").exists()


#: SIGTERM reaches the CLI's handler while distributed's event loop is busy, so that the
#: main thread's sync() call is cut short before its coroutine has started (what a loaded
#: machine does at random): distributed then logs a NameError from its cancel(). Done
#: twice, without and with the CLI's logging filters.
_SIGTERM_IN_SYNC = """\
import os, signal, sys, threading, time
from distributed import Client, LocalCluster
from dkrr.cli import _main
if __name__ == "__main__":
    with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \\
            Client(cluster) as client:
        for how in ("plain", "cli"):
            if how == "cli":
                _main._quiet_interrupted_distributed()
            print(f"--- {how}", file=sys.stderr, flush=True)
            signal.signal(signal.SIGTERM, _main._on_sigterm)
            client.loop.add_callback(time.sleep, 1.0)
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
            try:
                client.sync(client.scheduler.identity)
            except _main._Terminated:
                print("terminated", flush=True)
            time.sleep(1.5)  # the loop runs the scheduled cancel()
"""


def test_sigterm_before_a_distributed_call_starts_prints_no_traceback(tmp_path):
    """The flaky half of test_sigterm_cleans_up_like_ctrl_c, made deterministic."""
    script = tmp_path / "sigterm_in_sync.py"
    script.write_text(_SIGTERM_IN_SYNC)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "terminated\n" * 2, (proc.stdout, proc.stderr)
    plain, cli = proc.stderr.split("--- plain\n")[1].split("--- cli\n")
    if "NameError" not in plain:
        pytest.skip("this distributed no longer logs a NameError there: the CLI's filter can go")
    assert "Traceback" not in cli and "NameError" not in cli, cli


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"dkrr {dkrr.__version__}\n"


def test_failed_fit_is_one_line_under_quiet(tmp_path):
    store, _, _ = _store(tmp_path / "nan.zarr", nan=True)
    proc = _dkrr("fit", store, "--out", tmp_path / "m", "--method", "rff", "--n-components", 8,
                 "--workers", 1, "--memory-limit", "1GB", "-q")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dkrr fit: error:") and "NaN" in lines[0], err
    assert "Compute Failed" not in err and "Traceback" not in err
    assert not (tmp_path / "m").exists()


def test_a_failed_fit_with_progress_prints_the_error_once_and_no_worker_log(tmp_path):
    """Without ``-q`` (progress bars on, worker logs shown): the block with NaN fails a
    worker's task with dkrr's own error, which the command prints; the worker's "Compute
    Failed" record of it (the error again, with a traceback of dkrr's internals) and the
    closing worker's "ended with CancelledError" are not printed (dkrr._worker_setup)."""
    store, _, _ = _store(tmp_path / "nan.zarr", nan=True)
    proc = _dkrr("fit", store, "--out", tmp_path / "m", "--method", "rff", "--n-components", 8,
                 "--workers", 2, "--memory-limit", "1GB")
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    assert err.strip().splitlines()[-1].startswith("dkrr fit: error:") and "NaN" in err, err
    assert err.count("NaN") == 1, err
    for noise in ("Compute Failed", "Traceback", "CancelledError", " - ERROR - ", " - WARNING - "):
        assert noise not in err, err
    assert not (tmp_path / "m").exists()


def test_a_signal_after_the_output_is_in_place_names_it_as_written(tmp_path, capsys):
    """A SIGINT or SIGTERM that came after the commit (while the summary was printed) said
    "no partial output was left behind", and a user reran a command whose output was in
    place, complete. The line now names what was written in full; every command starts
    with none recorded."""
    from dkrr.cli import main
    from dkrr.cli._main import _stopped
    from dkrr.io import write_dataset
    from dkrr.io._paths import COMMITTED

    write_dataset(np.ones((4, 2)), np.ones(4), tmp_path / "before.zarr")  # an earlier output of this process
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,t\n1,2,3\n4,5,6\n")
    assert main(["ingest", str(csv), "--out", str(tmp_path / "d.zarr"), "-q"]) == 0
    capsys.readouterr()
    assert COMMITTED == [str(tmp_path / "d.zarr")]  # this command's output alone
    assert _stopped("terminated") == (f"dkrr: terminated after {tmp_path / 'd.zarr'} had been written in full; "
                                      "nothing partial was left behind")
    COMMITTED.clear()
    assert _stopped("interrupted") == "dkrr: interrupted; no partial output was left behind"
    # a refused command writes nothing and records nothing
    assert main(["ingest", str(csv), "--out", str(tmp_path / "d.zarr"), "-q"]) == 1
    assert COMMITTED == []
