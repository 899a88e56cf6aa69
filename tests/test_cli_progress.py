"""Every ``dkrr`` command finishes with progress on, off, and with stderr a terminal or not.

Real subprocesses on real Zarr stores and a real LocalCluster. Two hangs were found by a
new user, not by tests that always passed ``-q``: ``dkrr evaluate`` handed a plain integer
to the progress bar as a task key (it waited for it forever), and ``dkrr fit`` printed a
recorded warning into the list of recorded warnings it was reading (any warning other than
GridEdgeWarning). Each run here has a timeout, so a hang fails the test.
"""

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytestmark = pytest.mark.cluster

CLUSTER = ["--workers", 1, "--threads-per-worker", 1, "--memory-limit", "1GB"]


def _env():
    env = dict(os.environ)
    env.pop("DASK_LOGGING", None)
    return env


def dkrr(*args, timeout=180):
    """Run ``dkrr`` with stdout and stderr as pipes (not terminals), as in a batch job."""
    proc = subprocess.run([sys.executable, "-m", "dkrr.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=_env())
    assert proc.returncode == 0, f"dkrr {args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def dkrr_on_terminal(*args, timeout=180):
    """Run ``dkrr`` with stderr a pseudo-terminal; returns (stdout, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dkrr.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=slave, text=True, env=_env())
    os.close(slave)
    got = b""
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(f"dkrr {args} did not finish in {timeout} s; the terminal "
                                     f"showed:\n{got.decode(errors='replace')[-2000:]}")
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other end closed
                    break
                if not chunk:
                    break
                got += chunk
            elif proc.poll() is not None:
                break
        out = proc.stdout.read()
        assert proc.wait(timeout=30) == 0, f"dkrr {args} failed:\n{out}\n{got.decode(errors='replace')}"
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return out, got.decode(errors="replace")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A regression store (2,000 x 5) and a classification store (labels a / b)."""
    root = tmp_path_factory.mktemp("progress")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 5))
    y = X[:, 0] + 0.1 * rng.normal(size=2000)
    np.savetxt(root / "reg.csv", np.column_stack([X, y]), delimiter=",", fmt="%.8f")
    labels = np.where(X[:, 0] + X[:, 1] > 0, "a", "b")
    with open(root / "cls.csv", "w") as fh:
        for row, label in zip(X, labels):
            fh.write(",".join(f"{v:.8f}" for v in row) + f",{label}\n")
    dkrr("ingest", root / "reg.csv", "--out", root / "reg.zarr", "--chunk-rows", 500)
    dkrr("ingest", root / "cls.csv", "--out", root / "cls.zarr", "--chunk-rows", 500)
    return root


def _no_redraws(stderr: str) -> None:
    assert "\r" not in stderr, f"carriage-return redraws in a non-terminal stderr:\n{stderr!r}"


def test_ingest_progress_is_plain_lines_in_a_log(stores):
    proc = dkrr("ingest", stores / "reg.csv", "--out", stores / "reg2.zarr", "--chunk-rows", 500)
    _no_redraws(proc.stderr)
    assert "ingest: 2,000 rows (100.0%)" in proc.stderr


def test_fit_finishes_and_says_each_non_grid_warning_once(stores):
    # float32 statistics with a CV grid reaching alphas far below the rounding: a
    # SingularAlphaWarning and a PrecisionWarning (the command used to never return)
    proc = dkrr("fit", stores / "reg.zarr", "--out", stores / "m32", "--precision", "float32",
                "--cv", 3, "--alphas", "1e-9,1e-3,1", *CLUSTER)
    _no_redraws(proc.stderr)
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("dkrr fit: warning:")]
    assert any("precision='float32'" in w for w in warnings), proc.stderr
    assert any("not positive definite" in w for w in warnings), proc.stderr
    assert len(warnings) == len(set(warnings)), proc.stderr
    assert "Warning:" not in proc.stderr.replace("dkrr fit: warning:", ""), proc.stderr
    assert "wrote" in proc.stdout


def test_fit_finishes_on_the_pcg_max_iter_warning(stores):
    proc = dkrr("fit", stores / "reg.zarr", "--out", stores / "mpcg", "--solver", "pcg",
                "--max-iter", 1, "--pcg-rank", 4, "--alpha", "1e-6", "--json", *CLUSTER)
    # dkrr's PcgConvergenceWarning (also scikit-learn's ConvergenceWarning): said as dkrr's own
    assert any(line.startswith("dkrr fit: warning: solver='pcg' stopped at max_iter=1")
               for line in proc.stderr.splitlines()), proc.stderr
    # and --json, which a script reads instead of stderr, says it too (it did not)
    pcg = json.loads(proc.stdout)["pcg"]
    assert pcg["converged"] is False and pcg["n_iter"] == 1 and pcg["passes"] == 2, pcg
    assert pcg["residual"] > pcg["tol"] == 1e-6 and pcg["rank"] == 4, pcg


#: a PCG solve's progress line: its iteration and its worst relative residual
_PCG_LINE = re.compile(r"pcg: iteration (\d+), residual (\S+)")
#: a fit whose CG never reaches its tol (1e-14): it makes all of its max_iter iterations
_PCG_FIT = ["--solver", "pcg", "--no-cv", "--alpha", 1e-6, "--tol", 1e-14, "--pcg-rank", 4, *CLUSTER]


def test_a_pcg_solve_in_a_log_is_a_few_lines_whatever_its_iterations(stores, tmp_path):
    """``dkrr fit --solver pcg`` with stderr to a file wrote two identical ``pcg:
    iteration`` lines per CG iteration (410 lines for 200 iterations), none with the
    iteration or the residual. The solve is now one progress line: in a log a first line,
    a line per 10% of the solve (DKRR_PROGRESS_INTERVAL=0: no time rule) and its last
    state, each with the iteration and the residual: 60 iterations, at most 11 lines."""
    log = tmp_path / "fit.log"
    with open(log, "w") as err:
        proc = subprocess.run([sys.executable, "-m", "dkrr.cli", "fit", stores / "reg.zarr", "--out", tmp_path / "m",
                               *map(str, [*_PCG_FIT, "--max-iter", 60])],
                              stdout=subprocess.PIPE, stderr=err, text=True, timeout=300,
                              env={**_env(), "DKRR_PROGRESS_INTERVAL": "0"})
    assert proc.returncode == 0, log.read_text()
    assert "60 CG iterations" in proc.stdout, proc.stdout
    lines = _log_lines(log)
    solve = [line for line in lines if line.startswith("pcg: ") and not line.startswith("pcg: statistics")]
    assert solve[0] == "pcg: at most 60 iterations to a relative residual of 1e-14", lines
    assert 2 <= len(solve) <= 11 and all(_PCG_LINE.fullmatch(line) for line in solve[1:]), lines
    iterations = [int(_PCG_LINE.fullmatch(line).group(1)) for line in solve[1:]]
    assert iterations == sorted(set(iterations)) and iterations[-1] == 60, lines
    assert all(float(_PCG_LINE.fullmatch(line).group(2)) > 1e-14 for line in solve[1:]), lines


def test_a_pcg_solve_on_a_terminal_is_one_line_redrawn_in_place(stores):
    """On a terminal each CG iteration's pass left a line of its own; the solve is now
    one line, redrawn with each iteration (and its pass's bar), its last state the end."""
    out, term = dkrr_on_terminal("fit", stores / "reg.zarr", "--out", stores / "mpcg_tty", *_PCG_FIT,
                                 "--max-iter", 20)
    assert "20 CG iterations" in out, out
    solve = [line for line in term.split("\n") if "pcg: iteration" in line]
    assert len(solve) == 1, term
    draws = [d.strip() for d in solve[0].split("\r") if d.strip()]
    assert _PCG_LINE.fullmatch(draws[-1]) and draws[-1].startswith("pcg: iteration 20, "), draws[-3:]
    assert {int(m.group(1)) for m in map(_PCG_LINE.match, draws) if m} == set(range(1, 21)), draws
    assert "pcg: at most" not in term  # a log's first line


@pytest.fixture(scope="module")
def models(stores):
    dkrr("fit", stores / "reg.zarr", "--out", stores / "reg.model", "-q", *CLUSTER)
    dkrr("fit", stores / "cls.zarr", "--out", stores / "cls.model", "--classifier", "-q", *CLUSTER)
    return stores


@pytest.mark.parametrize("kind, json_flag", [("reg", []), ("reg", ["--json"]), ("cls", [])])
def test_evaluate_finishes_with_progress_in_a_log(models, kind, json_flag):
    proc = dkrr("evaluate", models / f"{kind}.model", models / f"{kind}.zarr", *json_flag, *CLUSTER)
    _no_redraws(proc.stderr)
    assert "evaluating" in proc.stderr
    assert ("accuracy" if kind == "cls" else "rmse") in proc.stdout


def test_evaluate_quiet_prints_no_progress(models):
    proc = dkrr("evaluate", models / "reg.model", models / "reg.zarr", "-q", *CLUSTER)
    assert proc.stderr == ""
    assert "rmse" in proc.stdout


def test_evaluate_and_predict_on_a_terminal_draw_a_bar(models):
    out, term = dkrr_on_terminal("evaluate", models / "reg.model", models / "reg.zarr", *CLUSTER)
    assert "rmse" in out
    assert "evaluating" in term and "\r[" in term, term
    out, term = dkrr_on_terminal("predict", models / "cls.model", models / "cls.zarr",
                                 "--out", models / "pred_tty.zarr", *CLUSTER)
    assert "predicting" in term and "\r[" in term, term


def test_predict_progress_is_plain_lines_in_a_log(models):
    proc = dkrr("predict", models / "reg.model", models / "reg.zarr", "--out", models / "pred.zarr",
                *CLUSTER)
    _no_redraws(proc.stderr)
    assert "predicting" in proc.stderr


def test_the_command_called_in_python_leaves_the_callers_progress_setting(models, capsys):
    """``dkrr.cli.main`` in a notebook or a test turns the bars on or off for its command
    only: the caller's setting (and stream) is restored, so its later fits are not sent to
    the bar's path (which once ignored ``dask.config.set(scheduler=...)``)."""
    import io

    from dkrr._progress import _STATE, progress_enabled, set_progress
    from dkrr.cli._main import main

    stream = io.StringIO()
    for before, quiet in ((False, []), (True, ["-q"])):
        set_progress(before, stream if before else None)
        try:
            assert main(["evaluate", str(models / "reg.model"), str(models / "reg.zarr"), *quiet, *map(str, CLUSTER)]) == 0
            assert progress_enabled() is before and _STATE["stream"] is (stream if before else None)
        finally:
            set_progress(False)
    assert "rmse" in capsys.readouterr().out


def test_compute_takes_collections_only():
    import dask.array as da

    from dkrr._progress import compute, set_progress

    x = da.ones(10, chunks=5)
    for enabled in (False, True):
        set_progress(enabled)
        try:
            with pytest.raises(TypeError, match="argument 1 is a int"):
                compute(x.sum(), 10)
            assert compute(x.sum())[0] == 10
        finally:
            set_progress(False)


def test_line_log_turns_redraws_into_a_few_lines():
    import io

    from dkrr._progress import _LineLog

    out = io.StringIO()
    log = _LineLog(out, "working", interval=3600)
    for pct in range(0, 101):
        log.write(f"\r[{'#' * (pct // 10):<10}] | {pct}% Completed |  0.{pct}s")
    log.write("\x1b[2K\r")  # distributed's TextProgressBar clears its line at the end
    log.close()
    lines = out.getvalue().splitlines()
    assert lines == ["working: [##########] | 100% Completed |  0.100s"]

    out = io.StringIO()
    log = _LineLog(out, "working", interval=0.0)
    log.write("\r[#  ] | 10% Completed")
    log.write("\r[## ] | 20% Completed")
    log.close()
    assert out.getvalue().splitlines() == ["working: [#  ] | 10% Completed",
                                           "working: [## ] | 20% Completed"]


@pytest.mark.parametrize("max_iter, rate, lines_at", [
    (1000, 0.999, list(range(100, 1001, 100))),  # never at tol: a line per 10% of max_iter
    (1000, 0.9, None),  # at tol (1e-6) after 132 iterations: its residual's way is the progress
    (3, 0.5, [1, 2, 3]),
])
def test_a_solve_line_in_a_log_is_at_most_eleven_lines(monkeypatch, max_iter, rate, lines_at):
    """A solve's line in a log (no time rule): its first line, a line per 10 points of its
    progress and its last state, however many iterations it makes."""
    import io

    from dkrr._progress import INTERVAL_ENV, compute, progress_set, solve_progress

    monkeypatch.setenv(INTERVAL_ENV, "0")
    out = io.StringIO()
    with progress_set(True, out), solve_progress("pcg", tol=1e-6, max_iter=max_iter) as update:
        update(0, 1.0)
        k = 0
        while k < max_iter and rate**k > 1e-6:
            k += 1
            if k == 1:  # a pass's bar draws nothing of its own in a log
                import dask.array as da

                assert compute(da.ones(4, chunks=2).sum())[0] == 4
            update(k, rate**k)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"pcg: at most {max_iter} iterations to a relative residual of 1e-06"
    assert 2 <= len(lines) <= 11 and lines[-1] == f"pcg: iteration {k}, residual {rate**k:.2g}", lines
    iterations = [int(line.split()[2].rstrip(",")) for line in lines[1:]]
    assert iterations == sorted(set(iterations)), lines
    if lines_at is not None:
        assert iterations == lines_at, lines


class _TimedLines:
    """A stream that records when each line was written (time.monotonic())."""

    def __init__(self):
        self.lines = []

    def write(self, text):
        self.lines += [(time.monotonic(), line) for line in text.splitlines() if line]

    def flush(self):
        pass


def _percent(line):
    import re

    return int(re.search(r"(\d+)% Completed", line).group(1))


def test_line_log_writes_a_line_per_step_of_the_tasks_or_per_interval_whichever_is_rarer():
    """With no interval, a line per 10 percentage points (never per redraw); with an
    interval, a line only once both 10 points and the interval have passed; the last state
    always. 201 redraws 4 ms apart (0.8 s) against a 0.25 s interval."""
    from dkrr._progress import LOG_STEP, _LineLog

    def run(interval):
        out = _TimedLines()
        log = _LineLog(out, "working", interval=interval)
        for i in range(201):
            log.write(f"\r[{'#' * (i // 20):<10}] | {i // 2}% Completed | {i * 4} ms")
            time.sleep(0.004)
        log.close()
        return out.lines

    lines = run(0.0)
    assert [_percent(text) for _, text in lines] == list(range(10, 101, 10))
    lines = run(0.25)
    pcts, times = [_percent(text) for _, text in lines], [t for t, _ in lines]
    assert pcts[-1] == 100 and len(lines) <= 5  # 0.8 s / 0.25 s, and the last
    for k in range(1, len(lines) - 1):  # every line but the last: both rules hold
        assert pcts[k] - pcts[k - 1] >= LOG_STEP and times[k] - times[k - 1] >= 0.25, lines


def test_progress_interval_variable_is_checked(monkeypatch):
    from dkrr._progress import INTERVAL_ENV, LOG_INTERVAL, log_interval, set_progress
    from dkrr.errors import InvalidParameterError

    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert log_interval() == LOG_INTERVAL == 30.0
    monkeypatch.setenv(INTERVAL_ENV, "0.5")
    assert log_interval() == 0.5
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv(INTERVAL_ENV, bad)
        with pytest.raises(InvalidParameterError, match=rf"DKRR_PROGRESS_INTERVAL='{bad}'.*a number >= 0"):
            set_progress(True)
        set_progress(False)  # off: the variable is not read


def _log_lines(path):
    """The lines of a log file, which must be plain: no carriage return, no escape code."""
    raw = path.read_bytes().decode()
    assert "\r" not in raw and "\x1b" not in raw, raw
    return raw.splitlines()


def _bars(lines):
    """{label: [its progress lines]} of a log: a label line is followed by 'label: [...'."""
    bars = {}
    for line in lines:
        label, sep, rest = line.partition(": [")
        if sep and label in bars:
            bars[label].append(line)
        elif not sep and not line.startswith("dkrr") and ":" not in line:
            bars.setdefault(line, [])
    return bars


def _check_log(lines, dashboards=1):
    """Shape of a fit's log: the cluster and dashboard line once, and each bar a label,
    at most 10 lines more, percentages 10 points apart but the last, which is 100%."""
    import re

    cluster = [line for line in lines if line.startswith("dkrr: started a LocalCluster at ")]
    assert len(cluster) == 1 and re.search(r"\(1 worker\(s\), 1 thread\(s\) in all, memory limit \S+ \w+ per "
                                           r"worker\); Dask dashboard at http://127\.0\.0\.1:\d+/status$",
                                           cluster[0]), lines
    assert sum("Dask dashboard at" in line for line in lines) == dashboards, lines
    bars = _bars(lines)
    assert "accumulating ridge statistics" in bars, lines
    for label, progress in bars.items():
        assert 1 <= len(progress) <= 10, (label, progress)
        pcts = [_percent(line) for line in progress]
        assert pcts[-1] == 100 and all(b - a >= 10 for a, b in zip(pcts, pcts[1:-1])), progress
        for line in progress:
            assert re.fullmatch(rf"{re.escape(label)}: \[#* *\] \| \d+% Completed \| +(\d+ ?\w+ +)?[\d.]+ ?\w+", line), line
    return bars


def test_fit_log_in_a_file_is_a_few_plain_lines(stores, tmp_path):
    """A batch job's view: stderr is a file. With DKRR_PROGRESS_INTERVAL=0 only the 10%
    rule thins the bars' redraws (10 times a second): 40 blocks, each bar at most a label
    and 10 lines; the cluster and its dashboard named once."""
    log = tmp_path / "fit.log"
    with open(log, "w") as err:
        proc = subprocess.run([sys.executable, "-m", "dkrr.cli", "fit", stores / "reg.zarr", "--out", tmp_path / "m",
                               # one pass (float64): the default precision adds a bar per refinement pass
                               *map(str, ["--no-cv", "--alpha", 0.1, "--n-components", 256, "--chunk-rows", 50,
                                          "--precision", "float64", *CLUSTER])],
                              stdout=subprocess.PIPE, stderr=err, text=True, timeout=180,
                              env={**_env(), "DKRR_PROGRESS_INTERVAL": "0"})
    assert proc.returncode == 0, log.read_text()
    lines = _log_lines(log)
    bars = _check_log(lines)
    # the cluster line, and each bar's label and at most 10 lines: the column moments' short
    # pass draws a bar only when it outlasts a redraw (on a loaded machine), so count the bars
    assert len(bars) <= 3 and len(lines) <= 1 + 11 * len(bars) and log.stat().st_size < 4096, lines
    assert "solver='auto' chose 'cholesky': the Gram path (p = 512 features) needs about" in proc.stdout


def test_bad_progress_interval_is_refused_before_the_fit(stores, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dkrr.cli", "fit", stores / "reg.zarr", "--out", tmp_path / "m"],
                          capture_output=True, text=True, timeout=60,
                          env={**_env(), "DKRR_PROGRESS_INTERVAL": "often"})
    assert proc.returncode == 1 and not (tmp_path / "m").exists()
    assert proc.stderr.strip() == ("dkrr fit: error: DKRR_PROGRESS_INTERVAL='often': the seconds between two "
                                   "progress lines in a log must be a number >= 0 (unset: 30)"), proc.stderr


@pytest.mark.slow
def test_long_fit_log_has_a_line_per_ten_percent_or_thirty_seconds(tmp_path):
    """A fit whose pass runs for about a minute, stderr to a file, the default interval:
    each bar writes a line only when both 10% of its tasks and 30 s have passed since its
    previous line (checked as the lines appear), so the log stays a few hundred bytes."""
    rng = np.random.default_rng(0)
    n = 200_000
    X = rng.normal(size=(n, 5))
    np.savetxt(tmp_path / "big.csv", np.column_stack([X, X[:, 0]]), delimiter=",", fmt="%.6f")
    dkrr("ingest", tmp_path / "big.csv", "--out", tmp_path / "big.zarr", "--chunk-rows", 5000, "-q")
    log = tmp_path / "fit.log"
    seen, start = [], time.monotonic()  # (seconds since the start, line) as each line appears
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "dkrr.cli", "fit", tmp_path / "big.zarr", "--out",
                                 tmp_path / "m", *map(str, ["--no-cv", "--alpha", 1, "--n-components", 1024, *CLUSTER])],
                                stdout=subprocess.PIPE, stderr=err, text=True, env=_env())
        try:
            while proc.poll() is None and time.monotonic() - start < 900:
                time.sleep(0.2)
                now = log.read_text().splitlines()
                seen += [(time.monotonic() - start, line) for line in now[len(seen):]]
        finally:
            if proc.poll() is None:
                proc.kill()
    out = proc.stdout.read()
    assert proc.wait() == 0, log.read_text()
    lines = _log_lines(log)
    seen += [(time.monotonic() - start, line) for line in lines[len(seen):]]
    bars = _check_log(lines)
    elapsed = time.monotonic() - start
    for label, progress in bars.items():
        # every line but the last: 30 s (less the 0.2 s of polling) after the previous or the label
        when = [t for t, line in seen if line == label or line in progress[:-1]]
        assert all(b - a >= 29.5 for a, b in zip(when, when[1:])), (label, seen)
        assert len(progress) <= 1 + elapsed / 30, (label, progress, elapsed)
    assert log.stat().st_size < 2048, lines
    assert "wrote" in out
_START_THEN_INTERRUPT = """
import signal, sys, threading
from dkrr.cluster import local_cluster

if __name__ == "__main__":
    threading.Timer({delay}, lambda: signal.raise_signal(signal.SIGINT)).start()
    try:
        with local_cluster(n_workers=2, quiet=True) as client:
            client.submit(sum, [1, 2]).result()
            threading.Event().wait(30)  # the signal arrives during the start or here
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted")
"""


@pytest.mark.parametrize("delay", [0.05, 0.5, 1.5])
def test_ctrl_c_while_the_local_cluster_starts_is_clean(tmp_path, delay):
    """A Ctrl-C while the LocalCluster starts is held until the start is done, then raised;
    the cluster is closed and nothing is printed (distributed's exit handler used to fail
    on the half-started cluster: ``AssertionError: Status.init`` and nanny tracebacks)."""
    script = tmp_path / "start.py"
    script.write_text(_START_THEN_INTERRUPT.format(delay=delay))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=_env(), cwd=tmp_path)
    assert proc.stdout.strip() == "interrupted", proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr, proc.stderr


def test_ctrl_c_while_dkrr_imports_its_libraries(stores):
    """The command imports dask, scikit-learn and zarr inside its handler: a Ctrl-C while
    they load is reported as an interruption (exit 130), not an import traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "dkrr.cli", "fit", stores / "reg.zarr",
                             "--out", stores / "never"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # the command's code runs once `import dkrr.cli` is done (it imports no library)
    time.sleep(0.6)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    # 130, or killed by SIGINT (-2, which a shell also reports as 130): CPython ends a
    # process by the signal when the KeyboardInterrupt passed through code it ran with
    # PyRun_* during an import, even though dkrr caught it afterwards
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
    assert "dkrr: interrupted" in err, err
    assert "Traceback" not in err, err
    assert not (stores / "never").exists()


#: a Ctrl-C raised inside a weakref callback while the command imports its libraries: CPython
#: cannot raise out of such a callback ("Exception ignored in ..."), which is what a test of
#: a Ctrl-C during the imports met once (the command then ran to the end and exited 0)
_SWALLOWED_CTRL_C = """
import os, signal, sys, time, weakref
from importlib.abc import MetaPathFinder

class Obj:
    pass

class Hook(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "dkrr.cli._commands":
            sys.meta_path.remove(self)
            o = Obj()
            r = weakref.ref(o, lambda _: (os.kill(os.getpid(), signal.SIGINT), time.sleep(1)))
            del o  # the callback runs: its KeyboardInterrupt is swallowed by CPython
            print("callback done", file=sys.stderr)
        return None

sys.meta_path.insert(0, Hook())
from dkrr.cli._main import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_ctrl_c_that_cpython_swallows_during_the_imports_still_stops_the_command(stores, tmp_path):
    """The handler records the signal; the command checks the record after its imports,
    so a Ctrl-C whose exception CPython swallowed in a weakref callback stops it (exit 130,
    nothing written), and CPython's "Exception ignored" traceback is not printed."""
    out = tmp_path / "never"
    proc = subprocess.run([sys.executable, "-c", _SWALLOWED_CTRL_C, "fit", str(stores / "reg.zarr"), "--out",
                           str(out)], capture_output=True, text=True, env=_env(), timeout=120)
    assert "callback done" in proc.stderr, proc.stderr  # the signal did arrive inside the callback
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert "dkrr: interrupted" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not out.exists()


def test_import_dkrr_loads_no_library():
    code = ("import sys, dkrr, dkrr.cli; heavy = [m for m in ('dask', 'distributed', 'sklearn', "
            "'zarr', 'numba', 'scipy') if m in sys.modules]; print(heavy); "
            "from dkrr import RandomFeatureRidge, load_model, DkrrError; "
            "print(RandomFeatureRidge.__name__, dkrr.io.open_dataset.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]", "RandomFeatureRidge open_dataset"], proc.stdout


def test_local_cluster_workers_take_sigint_as_news():
    """The workers of dkrr's LocalCluster do not stop at SIGINT (a terminal's Ctrl-C signals
    the whole process group): the command that started them handles it and closes them. A
    worker records the signal (its log handlers then drop what it logs while the cluster
    closes: tests/test_worker_setup.py) and goes on."""
    from dkrr.cluster import local_cluster

    def interrupt():
        import os
        import time

        from dkrr import _worker_setup

        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs in the process's main thread
        return list(_worker_setup._INTERRUPTED)

    with local_cluster(n_workers=1, quiet=True, dashboard=False) as client:
        assert list(client.run(interrupt).values()) == [[signal.SIGINT]]
        assert client.submit(sum, [1, 2]).result() == 3  # the worker still works


def test_terminal_ctrl_c_during_a_fit_is_one_line(stores):
    """Ctrl-C at a terminal reaches the command and its worker processes (one process
    group): exit 130 with one line, no worker's KeyboardInterrupt or heartbeat traceback."""
    import threading

    args = ["fit", stores / "reg.zarr", "--out", stores / "never2", "--n-components", 2048, "--no-cv",
            "--workers", 2, "--memory-limit", "1GB"]
    proc = subprocess.Popen([sys.executable, "-m", "dkrr.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            start_new_session=True)
    lines, started = [], threading.Event()

    def read():
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("accumulating ridge statistics"):  # the pass has begun
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert started.wait(120), "".join(lines)
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    reader.join(timeout=30)
    err = "".join(lines)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err, err
    assert "dkrr: interrupted; no partial output was left behind" in err
    assert not (stores / "never2").exists()


def test_terminal_ctrl_c_while_the_worker_processes_start_is_one_line(stores):
    """Ctrl-C at a terminal while the LocalCluster's worker processes were still importing
    their libraries (before their preload ignores SIGINT) printed each one's
    KeyboardInterrupt traceback. The start now runs with SIGINT blocked, a mask the worker
    processes inherit: the signal is sent the moment the first worker process exists."""
    import psutil

    args = ["fit", stores / "reg.zarr", "--out", stores / "never3", "--no-cv", "--workers", 2,
            "--memory-limit", "1GB"]
    proc = subprocess.Popen([sys.executable, "-m", "dkrr.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                            start_new_session=True)
    try:
        parent, deadline = psutil.Process(proc.pid), time.monotonic() + 120
        while not any("spawn_main" in " ".join(c.cmdline()) for c in _children(parent)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        time.sleep(0.4)  # into its imports (Python's handler set: it failed at 0.2 to 1.2 s)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1] == "dkrr: interrupted; no partial output was left behind", err
    assert not (stores / "never3").exists()


def _children(parent):
    """The live child processes of `parent` (those gone while listed are left out)."""
    import psutil

    out = []
    for child in parent.children(recursive=True):
        try:
            child.cmdline()
            out.append(child)
        except psutil.Error:
            pass
    return out


def test_a_folds_ill_conditioned_system_prints_no_raw_warning_from_a_worker(stores):
    """A cross-validation fold solved on a worker process warned of its condition number on
    the worker's stderr, a raw Python warning with its file and line ("dkrr/linalg/_solve.py:
    308: IllConditionedWarning: ..."); the final model's is said as a line of dkrr's own."""
    proc = dkrr("fit", stores / "reg.zarr", "--out", stores / "m0", "--precision", "float64", "--cv", 3,
                "--alphas", 0, *CLUSTER)
    assert "wrote" in proc.stdout, proc.stderr
    assert "Warning:" not in proc.stderr.replace("dkrr fit: warning:", ""), proc.stderr
    assert "_solve.py" not in proc.stderr, proc.stderr
