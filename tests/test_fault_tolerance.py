"""Fault tolerance on real ``dask scheduler`` / ``dask worker`` processes.

* A worker process is killed (SIGKILL) in the middle of the streamed pass of
  ``dkrr fit --scheduler ...``: its nanny starts a fresh one, the scheduler reruns the
  tasks whose results were lost, and the saved model equals an in-process fit.
* A scheduler that cannot be reached (nothing listening, or a port that accepts but never
  answers) makes ``dkrr fit`` fail within ``--timeout`` with a message naming the address.
* Ctrl-C (SIGINT to the process group, as a terminal sends it) during ``dkrr fit`` or
  ``dkrr predict`` exits with status 130 and leaves neither the output nor a hidden
  temporary directory behind, and the interrupted work is released from the cluster.

The synthetic store is large enough (160 000 x 16, 40 row chunks, D = 256 SORF
frequencies) that the pass takes seconds, so the kill and the interrupts land mid-run;
the tests check from the scheduler's task states that they did.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest

from dkrr import RandomFeatureRidge
from dkrr.io import open_dataset, write_dataset
from dkrr.io._model import load_model, save_model

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_PY = ROOT / "cluster" / "local" / "cluster.py"

N_ROWS, N_COLS, CHUNK = 160_000, 16, 4_000
# standardize=True: `dkrr fit` standardizes by default (a cheap moments pass before the statistics)
FIT_PARAMS = dict(method="sorf", n_components=256, gamma=0.05, alpha=0.5, random_state=11, standardize=True)
FIT_FLAGS = ["--method", "sorf", "--n-components", 256, "--gamma", 0.05, "--alpha", 0.5,
             "--random-state", 11]


# --------------------------------------------------------------------------- helpers
def _cluster_cmd(*args, check=True):
    proc = subprocess.run([sys.executable, str(CLUSTER_PY), *map(str, args)],
                          capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"cluster.py {args} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _dkrr_cmd(*args):
    return [sys.executable, "-m", "dkrr.cli", *map(str, args)]


def _popen(*args):
    # Own session and process group, so that SIGINT to the group is what a terminal's
    # Ctrl-C does, and nothing reaches pytest.
    return subprocess.Popen(_dkrr_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, cwd=ROOT)


def _finish(proc, timeout=120):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"dkrr did not finish within {timeout} s:\n{out}\n{err}")
    return proc.returncode, out, err


def _task_states(client):
    """Counts of the scheduler's task states, and per worker the tasks only it holds that
    tasks not yet started still need."""

    def summary(dask_scheduler):
        states, only_on = {}, {}
        for ts in dask_scheduler.tasks.values():
            states[ts.state] = states.get(ts.state, 0) + 1
            # held by one worker, and no task that needs it has started: losing it forces a
            # recompute (a chain's sum whose next step is running may be fetched already)
            if (ts.state == "memory" and len(ts.who_has) == 1 and ts.dependents
                    and all(d.state in ("waiting", "queued", "no-worker") for d in ts.dependents)):
                (ws,) = ts.who_has
                only_on.setdefault(ws.address, []).append(ts.key)
        return states, only_on

    return client.run_on_scheduler(summary)


def _is_partial_sum(key) -> bool:
    """A running sum of the ridge statistics pass (``dkrr-<block fn>-<token>-<i>``)."""
    name = key[0] if isinstance(key, tuple) else key
    return name.startswith("dkrr-") and "read-" not in name and "moments" not in name


def _wait_for(predicate, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _leftovers(directory, name):
    return sorted(p.name for p in Path(directory).iterdir() if p.name.startswith(f".{name}."))


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def proc_cluster(tmp_path_factory):
    """A scheduler and two nanny-managed worker processes (1 thread each) on 127.0.0.1."""
    rundir = tmp_path_factory.mktemp("ft-cluster")
    try:
        _cluster_cmd("start", "--dir", rundir, "--workers", 2, "--threads-per-worker", 1,
                     "--memory-limit", "2GB", "--scheduler-port", 0, "--dashboard-port", -1, "--quiet")
        yield json.loads((rundir / "cluster.json").read_text())
    finally:
        _cluster_cmd("stop", "--dir", rundir, "--grace", 5, check=False)


@pytest.fixture(scope="module")
def monitor(proc_cluster):
    """A client of the test itself, used only to watch (and disturb) the cluster."""
    from distributed import Client

    with Client(proc_cluster["address"], timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("ft-data")
    rs = da.random.RandomState(0)
    X = rs.standard_normal((N_ROWS, N_COLS), chunks=(CHUNK, N_COLS))
    y = da.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rs.standard_normal(N_ROWS, chunks=CHUNK)
    with dask.config.set(scheduler="threads"):
        write_dataset(X, y, root / "store")
    return root / "store"


@pytest.fixture(scope="module")
def reference(big_store, tmp_path_factory):
    """The in-process fit (threaded scheduler) of the big store, and its saved model."""
    data = open_dataset(big_store)
    with dask.config.set(scheduler="threads"):
        est = RandomFeatureRidge(**FIT_PARAMS).fit(data.X, data.y)
    path = tmp_path_factory.mktemp("ft-model") / "model"
    save_model(est, path)
    return est, path


@pytest.mark.cluster
def test_a_scheduler_without_dashboard_gets_no_dashboard_link(proc_cluster):
    """The recipe's ``--dashboard-port -1`` (``dask scheduler --no-dashboard``): the
    scheduler still lists its HTTP server (/health, /metrics) as the dashboard service, and
    connect() printed its ``/status`` link, a 404. (A served one: test_cluster_deploy.)"""
    import io
    import urllib.error
    import urllib.request

    from dkrr.cluster import connect

    out = io.StringIO()
    with connect(proc_cluster["address"], timeout=30, stream=out) as client:
        assert "dashboard" in client.scheduler_info()["services"]  # what misled
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(client.dashboard_link, timeout=10)
    line = out.getvalue().strip()
    assert line.startswith(f"dkrr: connected to the scheduler at {proc_cluster['address']} (2 worker(s)"), line
    assert line.endswith("; no dashboard") and "http" not in line, line


# --------------------------------------------------------------------------- worker loss
@pytest.mark.cluster
def test_fit_survives_killed_worker(proc_cluster, monitor, big_store, reference, tmp_path):
    ref, _ = reference
    model = tmp_path / "model"
    proc = _popen("fit", big_store, "--out", model, "--scheduler", proc_cluster["address"],
                  "--timeout", 30, "-q", *FIT_FLAGS)
    try:
        pids = monitor.run(os.getpid)
        assert len(pids) == 2

        def victim_ready():
            if proc.poll() is not None:
                raise AssertionError(f"the fit ended before a worker could be killed:\n{proc.communicate()}")
            states, only_on = _task_states(monitor)
            unfinished = sum(n for s, n in states.items() if s not in ("memory", "forgotten", "erred"))
            # Kill mid-pass of the statistics: partial sums (not X blocks, which both passes
            # read, nor the moments pass's results) held by one worker only, work still left.
            only_on = {a: [k for k in keys if _is_partial_sum(k)] for a, keys in only_on.items()}
            best = max(only_on, key=lambda a: len(only_on[a]), default=None)
            # (a chain keeps one running sum per thread in memory: the one its next step needs)
            if best is not None and len(only_on[best]) >= 1 and unfinished >= 20:
                return best, list(only_on[best]), states
            return None

        victim, lost_keys, states_at_kill = _wait_for(victim_ready, 120, "the pass to be under way")
        os.kill(pids[victim], signal.SIGKILL)
        rc, out, err = _finish(proc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert rc == 0, f"fit failed after the worker was killed ({states_at_kill}):\n{out}\n{err}"

    # The scheduler recomputed the results that lived only on the killed worker.
    def memory_transitions(dask_scheduler, keys):
        counts = dict.fromkeys(keys, 0)
        for key, _start, finish, *_ in dask_scheduler.story(*keys):
            if key in counts and finish == "memory":
                counts[key] += 1
        return counts

    counts = monitor.run_on_scheduler(memory_transitions, keys=lost_keys)
    assert max(counts.values()) >= 2, counts
    # The nanny replaced the killed worker process.
    monitor.wait_for_workers(2, timeout=60)
    assert pids[victim] not in monitor.run(os.getpid).values()

    saved = load_model(model)
    scale = np.abs(ref.coef_).max()
    np.testing.assert_allclose(saved.coef_, ref.coef_, rtol=1e-10, atol=1e-12 * scale)
    np.testing.assert_allclose(saved.intercept_, ref.intercept_, rtol=1e-10, atol=1e-12 * scale)


@pytest.mark.cluster
def test_a_scheduler_lost_mid_fit_is_a_named_error(big_store, tmp_path):
    """The scheduler process is killed (SIGKILL) during the statistics pass of
    ``dkrr fit --scheduler``: distributed cancels the client's futures
    ("scheduler-connection-lost"), and the command says so in an error line and dkrr's note
    (the step, what to check), exits 1 and writes nothing: before, a traceback."""
    from distributed import Client

    rundir = tmp_path / "run"
    _cluster_cmd("start", "--dir", rundir, "--workers", 2, "--threads-per-worker", 1, "--memory-limit", "2GB",
                 "--scheduler-port", 0, "--dashboard-port", -1, "--quiet")
    try:
        info = json.loads((rundir / "cluster.json").read_text())
        proc = _popen("fit", big_store, "--out", tmp_path / "model", "--scheduler", info["scheduler_file"],
                      "--timeout", 10, "-q", *FIT_FLAGS)
        try:
            with Client(info["address"], timeout=30) as monitor:
                def pass_under_way():
                    if proc.poll() is not None:
                        raise AssertionError(f"the fit ended before the scheduler was killed:\n{proc.communicate()}")
                    states, _ = _task_states(monitor)
                    return states.get("memory", 0) >= 2 and sum(
                        n for s, n in states.items() if s not in ("memory", "forgotten", "erred")) >= 20
                _wait_for(pass_under_way, 120, "the pass to be under way")
                pid = monitor.run_on_scheduler(os.getpid)
            os.kill(pid, signal.SIGKILL)
            rc, out, err = _finish(proc, timeout=180)
            # the scheduler file now names a scheduler that is gone: said, not a bare 'connection refused'
            stale = subprocess.run(_dkrr_cmd("fit", big_store, "--out", tmp_path / "model2", "--scheduler",
                                             info["scheduler_file"], "--timeout", 3, "-q", *FIT_FLAGS),
                                   capture_output=True, text=True, cwd=ROOT, timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    finally:
        _cluster_cmd("stop", "--dir", rundir, "--grace", 5, check=False)
    assert rc == 1, err
    assert "dkrr fit: error: " in err and "scheduler-connection-lost" in err, err
    # the step the kill landed in (the moments pass or the statistics pass), named
    assert re.search(r"dkrr: this process lost its connection to the Dask scheduler while running "
                     r"'(column moments|accumulating ridge statistics)'", err), err
    assert "dkrr/cli/_main.py" not in err, err  # no traceback of the command
    assert "Failed to reconnect to scheduler" not in err, err  # distributed's log: the error line says it
    # cluster.py's workers stop with their scheduler: no promise that they reconnect by themselves
    assert "reconnect to a restarted scheduler" not in err and "may have stopped" in err, err
    assert not (tmp_path / "model").exists() and not _leftovers(tmp_path, "model")
    assert stale.returncode == 1, stale.stderr
    assert f"The scheduler file {str(info['scheduler_file'])!r} may be stale" in stale.stderr, stale.stderr


def test_every_way_distributed_says_the_scheduler_is_gone_gets_the_note():
    """A scheduler stopped mid-fit also surfaces as distributed's ClosedClientError (the
    client gave up reconnecting: 'Can't send update-graph message') or CommClosedError (a
    connection reset in a client call, raised through OSError and others): they printed a
    traceback of up to 118 lines (found by a cluster probe). They, and exceptions raised
    from them, now get the lost-scheduler note; other errors none."""
    import concurrent.futures

    import distributed.client
    from distributed.comm import CommClosedError

    ClosedClientError = getattr(distributed.client, "ClosedClientError", None)  # none in distributed 2024.9.1

    from dkrr._failures import _cluster_failure_note, _lost_scheduler

    def chained(outer, inner):
        try:
            try:
                raise inner
            except Exception as exc:
                raise outer from exc
        except Exception as exc:
            return exc

    lost = [CommClosedError("in <TCP ...>: Connection reset by peer"),
            chained(RuntimeError("gathering failed"), CommClosedError("reset")),
            concurrent.futures.CancelledError("scheduler-connection-lost")]
    if ClosedClientError is not None:
        lost += [ClosedClientError("Client is closed."), chained(ValueError("x"), ClosedClientError("closed"))]
    for exc in lost:
        assert _lost_scheduler(exc), exc
        assert _cluster_failure_note(exc, "sampling rows for the bandwidth").startswith(
            "dkrr: this process lost its connection to the Dask scheduler while running 'sampling rows"), exc
    for exc in (ValueError("x"), chained(RuntimeError("y"), OSError("disk full")), concurrent.futures.CancelledError()):
        assert not _lost_scheduler(exc) and _cluster_failure_note(exc, "step") is None, exc


# --------------------------------------------------------------------------- unreachable scheduler
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    X = da.random.RandomState(1).standard_normal((200, 3), chunks=(100, 3))
    path = tmp_path_factory.mktemp("ft-small") / "store"
    with dask.config.set(scheduler="threads"):
        write_dataset(X, X[:, 0], path)
    return path


def test_unreachable_scheduler_fails_within_timeout(small_store, tmp_path):
    """Nothing listening, and a port that accepts connections but never answers."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        addresses = {
            "closed": f"tcp://127.0.0.1:{_free_port()}",
            "silent": f"tcp://127.0.0.1:{silent.getsockname()[1]}",
        }
        procs = {
            kind: subprocess.Popen(
                _dkrr_cmd("fit", small_store, "--out", tmp_path / kind, "--scheduler", address,
                          "--timeout", 2, "-q"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                start_new_session=True,
            )
            for kind, address in addresses.items()
        }
        # A limit below the default --timeout (30 s): this passes only when --timeout 2
        # is honoured, also by a scheduler that accepts the connection and stays silent.
        results = {kind: _finish(proc, timeout=25) for kind, proc in procs.items()}
    for kind, (rc, _out, err) in results.items():
        assert rc == 1, (kind, err)
        assert f"Could not connect to the Dask scheduler at '{addresses[kind]}' (timeout 2 s)" in err, err
        assert "dask scheduler" in err  # the hint on what to check
        assert "Traceback" not in err
        assert not (tmp_path / kind).exists()


@pytest.mark.cluster
def test_a_memory_limit_below_what_a_worker_needs_is_refused_before_any_work(big_store, tmp_path):
    """``--memory-limit 150MB`` gives each worker 143 MiB, below the ~300 MiB a worker holds
    with dkrr's libraries loaded: the nannies restarted the workers at every task (a
    traceback of KilledWorker) or, with the oldest supported distributed, in a loop that the
    fit waited on forever. Refused once the cluster is up, before any work, naming the
    floor and the fix; nothing is written. ``local_cluster`` refuses it too, in Python."""
    from dkrr.cluster import local_cluster
    from dkrr.errors import InvalidParameterError

    proc = subprocess.run(_dkrr_cmd("fit", big_store, "--out", tmp_path / "model", "--memory-limit", "150MB",
                                    "--alpha", 1, "-q"),
                          capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("dkrr fit: error: the LocalCluster's workers have a memory limit of 143 MiB "
                                  "each (memory_limit='150MB', --memory-limit)"), proc.stderr
    assert "needs at least 375 MiB" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "model").exists() and not _leftovers(tmp_path, "model")
    with pytest.raises(InvalidParameterError, match=r"memory limit of 200 MiB each .* at least 375 MiB"):
        with local_cluster(n_workers=1, memory_limit="200MiB", dashboard=False, quiet=True):
            pass
    with local_cluster(n_workers=1, memory_limit="400MiB", dashboard=False, quiet=True) as client:
        assert client.submit(sum, [1, 2]).result() == 3  # above the floor: it runs


@pytest.mark.cluster
@pytest.mark.parametrize("by_address", [False, True])
def test_a_killed_worker_keeps_its_type_and_gains_dkrrs_note(tmp_path, by_address):
    """In Python the exception stays distributed's KilledWorker, which a Dask user catches;
    dkrr adds a note (PEP 678) naming its step and the workers' memory, and the estimator
    is left unfitted. Each input block of 640 MB is above the worker's 400 MiB limit (which
    is above what a worker needs to run dkrr's tasks at all: not refused before the fit).
    A client of an existing cluster (by its address) is told to raise the limit where the
    cluster is started: dkrr's --memory-limit shapes only the LocalCluster it starts."""
    from distributed import Client, KilledWorker, LocalCluster
    from sklearn.exceptions import NotFittedError

    X = da.random.RandomState(0).standard_normal((2_000_000, 40), chunks=(2_000_000, 40))
    est = RandomFeatureRidge(n_components=32, gamma=0.1, alpha=1.0)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="400MiB", dashboard_address=None,
                         processes=True) as cluster, Client(cluster.scheduler_address if by_address else cluster):
        with pytest.raises(KilledWorker) as info:
            est.fit(X, X[:, 0])
    notes = "\n".join(getattr(info.value, "__notes__", ()))
    assert "dkrr: the Dask workers died while running '" in notes, notes
    assert "memory limit is 400 MiB each" in notes and "--memory-limit" in notes, notes
    local_advice = "dkrr fit/predict/evaluate: --memory-limit"
    assert (local_advice not in notes and "where the cluster is started (`dask worker --memory-limit`" in notes
            if by_address else local_advice in notes), notes
    with pytest.raises(NotFittedError):
        est.predict(np.zeros((1, 40)))


def test_the_worker_memory_floor_follows_distributeds_pause_and_terminate_fractions():
    """375 MiB (300 MiB / 0.8) by default; 300 / 0.95 without pausing; none where the
    memory management is off (the limit is then only read: tests/test_cv_tasks.py runs a
    fit on such workers with a limit of a few MiB)."""
    from dkrr._system import WORKER_BASELINE_BYTES, worker_memory_floor

    assert worker_memory_floor() == pytest.approx(WORKER_BASELINE_BYTES / 0.8) == 375 * 2**20
    with dask.config.set({"distributed.worker.memory.pause": False}):
        assert worker_memory_floor() == pytest.approx(WORKER_BASELINE_BYTES / 0.95)
    with dask.config.set({"distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": False}):
        assert worker_memory_floor() == 0.0


def test_what_a_workers_tasks_can_hold_follows_the_same_fractions():
    """The limit at the pause (or, without pausing, at the restart) less the worker's own
    300 MiB; the whole limit where both are off; never negative. The floor is where it is 0."""
    from dkrr._system import WORKER_BASELINE_BYTES, worker_memory_floor, worker_task_memory

    GB = 10**9
    usable, words = worker_task_memory(GB)
    assert usable == int(0.8 * GB - WORKER_BASELINE_BYTES) and usable // 2**20 == 462
    assert words == ("what a Dask worker's tasks can hold, 80% of its 954 MiB memory limit (where distributed "
                     "pauses it) less about 300 MiB that the worker holds itself")
    assert worker_task_memory(int(worker_memory_floor()))[0] == 0 and worker_task_memory(10 * 2**20)[0] == 0
    with dask.config.set({"distributed.worker.memory.pause": False}):
        usable, words = worker_task_memory(GB)
        assert usable == int(0.95 * GB - WORKER_BASELINE_BYTES) and "95% of its 954 MiB" in words
        assert "(where distributed restarts it)" in words
    with dask.config.set({"distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": False}):
        assert worker_task_memory(GB) == (GB, "the memory limit of a Dask worker")


@pytest.mark.cluster
def test_a_gram_that_fits_the_limit_but_not_what_the_tasks_can_hold_goes_to_pcg():
    """p = 10,240 on a worker of 1 GB: the Gram path's worker part (811 MiB) is within the
    954 MiB limit, and solver="auto" took it; the nanny restarted the worker at each of 4
    tries (the worker's own ~300 MiB and distributed's pause at 80% leave its tasks 463
    MiB) and the fit ended in KilledWorker. It now runs matrix-free, and says why."""
    from distributed import Client, LocalCluster

    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 5))
    y = np.sin(X[:, 0])
    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="1GB", dashboard_address=None,
                      processes=True) as cluster, Client(cluster):
        est = RandomFeatureRidge(method="rff", n_components=5120, gamma=0.1, alpha=1.0, random_state=0,
                                 precision="float64").fit(da.from_array(X, chunks=1000), y)
    assert est.solver_ == "pcg", est.solver_reason_
    # CG iterated (rank 256 < p) to the default tol; its true residual at that tol is
    # tests/test_pcg_solver.py's (the explicit 10,240 x 10,240 system is 800 MB)
    info = est.solver_info_
    assert info["rank"] < est.n_output_features_ == 10240 and info["n_iter"] >= 2 and info["converged"]
    assert info["residuals"][-1].max() <= est.tol == 1e-6
    assert re.search(r"the Gram path \(p = 10240 features\) needs about \d+ MiB per worker, more than what a Dask "
                     r"worker's tasks can hold, 80% of its 954 MiB memory limit .* \(463 MiB\)", est.solver_reason_)
    assert est.score(X, y) > 0.99


@pytest.mark.cluster
def test_a_fit_on_workers_below_what_they_need_is_refused_before_any_task():
    """A Client of the user's own LocalCluster whose workers have 200 MiB each: the fit is
    refused (MemoryBudgetError) before its first task, where the nannies would restart the
    workers at every task or in a loop; the estimator stays unfitted. With dask set to the
    threaded scheduler beside that Client the fit runs in this process and is not refused, with
    the progress bar off or on (the bar once sent the tasks to the Client's workers)."""
    from distributed import Client, LocalCluster
    from sklearn.exceptions import NotFittedError

    from dkrr._progress import progress_set
    from dkrr.errors import MemoryBudgetError
    from dkrr.estimators import RandomFeatureRidgeClassifier, RandomFeatures

    X = np.random.default_rng(0).standard_normal((200, 3))
    with LocalCluster(n_workers=1, threads_per_worker=1, memory_limit="200MiB", dashboard_address=None,
                      processes=True) as cluster, Client(cluster) as client:
        for est, y in ((RandomFeatureRidge(n_components=8, alpha=1.0), X[:, 0]),
                       (RandomFeatureRidgeClassifier(n_components=8, alpha=1.0), X[:, 0] > 0)):
            with pytest.raises(MemoryBudgetError, match=r"workers have a memory limit of 200 MiB .* at least 375 MiB"):
                est.fit(da.from_array(X, chunks=50), y)
            with pytest.raises(NotFittedError):
                est.predict(X)
        assert not client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))  # no task ran
        # a model fitted elsewhere: its predictions, and a feature map's, refused before a graph exists
        with dask.config.set(scheduler="threads"):  # fitted in this process
            fitted = RandomFeatureRidge(n_components=8, alpha=1.0).fit(X, X[:, 0])
            features = RandomFeatures(n_components=8, random_state=0).fit(X)
        for lazy in (lambda Xd: fitted.predict(Xd), lambda Xd: fitted.predict(Xd, return_std=True),
                     features.transform):
            with pytest.raises(MemoryBudgetError, match=r"at least 375 MiB"):
                lazy(da.from_array(X, chunks=50))
        np.testing.assert_allclose(fitted.predict(X[:5]), fitted.predict(X)[:5])  # numpy: computed here
        assert not client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
        # ingest through that Client (dkrr ingest --scheduler) waited forever on paused workers
        from dkrr.io import ingest

        tmp = Path(tempfile.mkdtemp())
        (tmp / "d.csv").write_text("a,b,y\n" + "".join(f"{i},{i + 1},{i % 3}\n" for i in range(50)))
        with pytest.raises(MemoryBudgetError, match=r"at least 375 MiB"):
            ingest(tmp / "d.csv", tmp / "d.zarr")
        assert not (tmp / "d.zarr").exists()
        shutil.rmtree(tmp)
        for progress in (False, True):  # with the bar on too: it follows dask's scheduler, not the Client
            with dask.config.set(scheduler="threads"), progress_set(progress):  # tasks here: not refused
                assert RandomFeatureRidge(n_components=8, alpha=1.0).fit(da.from_array(X, chunks=50),
                                                                          X[:, 0]).coef_.shape == (16,)
        assert not client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))


# --------------------------------------------------------------------------- Ctrl-C
def _interrupt_when(proc, ready, what):
    def check():
        if proc.poll() is not None:
            raise AssertionError(f"dkrr ended before it could be interrupted ({what}):\n{proc.communicate()}")
        return ready()

    _wait_for(check, 120, what, interval=0.005)
    os.killpg(proc.pid, signal.SIGINT)
    return _finish(proc)


def _cluster_idle(monitor):
    return _wait_for(lambda: not monitor.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)),
                     60, "the scheduler to release the interrupted work", interval=0.1)


@pytest.mark.cluster
def test_ctrl_c_during_fit_leaves_nothing(proc_cluster, monitor, big_store, tmp_path):
    model = tmp_path / "model"
    proc = _popen("fit", big_store, "--out", model, "--scheduler", proc_cluster["address"],
                  "--timeout", 30, "-q", *FIT_FLAGS)

    def pass_under_way():
        states, _ = _task_states(monitor)
        return states.get("memory", 0) >= 3 and sum(states.values()) - states.get("memory", 0) >= 20

    rc, out, err = _interrupt_when(proc, pass_under_way, "the pass to be under way")
    assert rc == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert not model.exists()
    _cluster_idle(monitor)
    assert _leftovers(tmp_path, "model") == []


@pytest.mark.cluster
def test_ctrl_c_during_predict_leaves_nothing(proc_cluster, monitor, big_store, reference, tmp_path):
    _, model = reference
    pred = tmp_path / "pred"
    proc = _popen("predict", model, big_store, "--out", pred, "--scheduler", proc_cluster["address"],
                  "--timeout", 30, "-q")

    def writing():  # the temporary store exists and the workers have begun filling it
        # the temporary store (beside it, `.pred.lock` is held while the output is written)
        tmp = [name for name in _leftovers(tmp_path, "pred") if ".tmp-" in name]
        chunks = tmp_path / tmp[0] / "y_pred" / "c" if tmp else None
        return chunks is not None and chunks.is_dir() and any(chunks.iterdir())

    rc, out, err = _interrupt_when(proc, writing, "the predictions to be written")
    assert rc == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert not pred.exists()
    assert _leftovers(tmp_path, "pred") == []
    # Blocks still running on the workers when the client stopped must not recreate it.
    _cluster_idle(monitor)
    time.sleep(0.5)
    assert not pred.exists() and _leftovers(tmp_path, "pred") == []


@pytest.mark.slow
@pytest.mark.cluster
def test_ctrl_c_with_in_process_local_cluster(big_store, tmp_path):
    """Without --scheduler dkrr starts its own LocalCluster, whose worker processes are in
    the terminal's process group and get the SIGINT too: still exit 130, nothing written,
    and no worker process outlives dkrr."""
    import psutil

    model = tmp_path / "model"
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err_file:
        proc = subprocess.Popen(
            _dkrr_cmd("fit", big_store, "--out", model, "--workers", 2, "--threads-per-worker", 1,
                      "--memory-limit", "1GB", *FIT_FLAGS),
            stdout=subprocess.DEVNULL, stderr=err_file, start_new_session=True, cwd=ROOT,
        )
    parent = psutil.Process(proc.pid)
    seen = []

    def pass_under_way():  # the label of the pass is printed once the cluster is up
        seen[:] = parent.children(recursive=True) or seen
        return len(seen) >= 2 and "accumulating" in log.read_text()

    rc, _, _ = _interrupt_when(proc, pass_under_way, "the pass to start")
    err = log.read_text()
    assert rc == 130, err
    assert err.rstrip().splitlines()[-1] == "dkrr: interrupted; no partial output was left behind"
    assert not model.exists() and _leftovers(tmp_path, "model") == []
    _wait_for(lambda: not [p for p in seen if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
              30, "the LocalCluster's worker processes to exit", interval=0.1)
