"""Tests of dkrr.cluster (local_cluster, connect, ClusterOptions) against real LocalClusters
on 127.0.0.1.

Connecting to separately started scheduler/worker processes (TCP and TLS) is tested in
tests/test_cluster_deploy.py.
"""

from __future__ import annotations

import dataclasses
import doctest
import importlib.util
import io
import json
import re
import socket
import time
import urllib.request
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

from dkrr._connection import make_security, resolve_scheduler_address
from dkrr.cluster import ClusterOptions, connect, local_cluster, worker_blas_threads
from dkrr._blas import limit_blas_threads
from dkrr.errors import DkrrError, InvalidParameterError, SchedulerUnreachableError
from dkrr.linalg._packed import direct_gram

ROOT = Path(__file__).resolve().parents[1]


def _load_script(relpath, name):
    spec = importlib.util.spec_from_file_location(name, ROOT / relpath)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    make_certs = _load_script("cluster/tls/make_certs.py", "dkrr_make_certs")
    return make_certs.make_certs(tmp_path_factory.mktemp("certs"))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dask_sum_matches_numpy(client):
    x = np.random.default_rng(0).standard_normal((2000, 7))
    dx = da.from_array(x, chunks=(250, 7))
    # elementwise and reductions only: dask's array query planning has no matmul
    got = client.compute((dx * dx).sum(axis=0)).result()
    np.testing.assert_allclose(got, (x * x).sum(axis=0), rtol=1e-12, atol=1e-9)


def test_local_cluster_processes_computes_and_prints_dashboard():
    out = io.StringIO()
    with local_cluster(n_workers=2, threads_per_worker=1, memory_limit="1GB", stream=out) as client:
        info = client.scheduler_info(n_workers=-1)
        assert client.scheduler.address.startswith("tcp://127.0.0.1:")
        assert len(info["workers"]) == 2
        assert all(addr.startswith("tcp://127.0.0.1:") for addr in info["workers"])
        assert {w["memory_limit"] for w in info["workers"].values()} == {10**9}
        _dask_sum_matches_numpy(client)
        text = out.getvalue()
        match = re.search(r"Dask dashboard at (http://127\.0\.0\.1:(\d+)/status)", text)
        assert match, text
        assert int(match.group(2)) == info["services"]["dashboard"]
        # The link points at a live HTTP server of this scheduler.
        health = urllib.request.urlopen(match.group(1).replace("/status", "/health"), timeout=5)
        assert health.read() == b"ok"
    assert client.status == "closed"


@pytest.mark.parametrize("threads_per_worker", [1, 2])
def test_one_blas_thread_per_worker_thread(threads_per_worker):
    with local_cluster(
        n_workers=1, threads_per_worker=threads_per_worker, dashboard=False, quiet=True
    ) as client:
        (worker,) = client.scheduler_info()["workers"].values()
        assert worker["nthreads"] == threads_per_worker
        (info,) = worker_blas_threads(client).values()
        # so a float64 block task there sums its Gram by the in-place DSYRK (dkrr.linalg._packed)
        (direct,) = client.run(direct_gram, 2048, 65536, 5, "float64", 64 * 2**20).values()
    assert direct is True
    # Set by distributed.nanny.pre-spawn-environ before the worker process imports numpy.
    assert info["environ"] == {
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"
    }
    blas = [p for p in info["pools"] if p["user_api"] == "blas"]
    assert blas, info
    assert all(p["num_threads"] == 1 for p in info["pools"]), info


def test_in_process_workers_limit_blas_and_dashboard_off():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    out = io.StringIO()
    with local_cluster(n_workers=1, processes=False, dashboard=False, stream=out) as client:
        pools = threadpoolctl.threadpool_info()
        assert pools and all(p["num_threads"] == 1 for p in pools), pools
        _dask_sum_matches_numpy(client)
    assert "no dashboard" in out.getvalue()
    assert "Dask dashboard at" not in out.getvalue()


@pytest.mark.parametrize("processes", [False, True])
def test_every_socket_is_bound_to_loopback(processes):
    psutil = pytest.importorskip("psutil")
    with local_cluster(n_workers=1, processes=processes, quiet=True) as client:
        me = psutil.Process()
        listening = [
            conn.laddr
            for proc in [me, *me.children(recursive=True)]
            # net_connections: psutil >= 6 (connections before, the range starts at 5.9)
            for conn in getattr(proc, "net_connections", getattr(proc, "connections", None))(kind="inet")
            if conn.status == psutil.CONN_LISTEN
        ]
        assert client.status == "running"
    # scheduler comm (unless inproc), scheduler HTTP, worker (and nanny) sockets
    assert len(listening) >= 2
    assert {addr.ip for addr in listening} == {"127.0.0.1"}, listening


def test_limit_blas_threads_restores_previous_limits():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [p["num_threads"] for p in threadpoolctl.threadpool_info()]
    with limit_blas_threads(1):
        assert all(p["num_threads"] == 1 for p in threadpoolctl.threadpool_info())
    assert [p["num_threads"] for p in threadpoolctl.threadpool_info()] == before


def test_quiet_prints_nothing(capsys):
    with local_cluster(n_workers=1, processes=False, quiet=True) as client:
        assert client.status == "running"
    captured = capsys.readouterr()
    assert "dkrr:" not in captured.err + captured.out


def test_default_stream_is_stderr_at_call_time(capsys):
    with local_cluster(n_workers=1, processes=False):
        pass
    assert "Dask dashboard at http://127.0.0.1:" in capsys.readouterr().err


def test_tls_local_cluster(certs):
    out = io.StringIO()
    with local_cluster(
        n_workers=1, processes=False, tls_ca_file=certs["ca"], tls_cert=certs["client"],
        tls_key=certs["client_key"], stream=out,
    ) as client:
        assert client.scheduler.address.startswith("tls://127.0.0.1:")
        assert all(a.startswith("tls://") for a in client.scheduler_info()["workers"])
        _dask_sum_matches_numpy(client)


def test_unreachable_scheduler_raises_within_timeout():
    address = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    start = time.monotonic()
    with pytest.raises(SchedulerUnreachableError, match=re.escape(address)) as excinfo:
        with connect(address, timeout=2, quiet=True):
            pass
    elapsed = time.monotonic() - start
    assert "timeout 2 s" in str(excinfo.value)
    assert isinstance(excinfo.value, ConnectionError) and isinstance(excinfo.value, DkrrError)
    # Honours the 2 s timeout rather than the 30 s default (generous margin for load).
    assert elapsed < 20


def test_address_without_scheme_is_tcp():
    assert resolve_scheduler_address("127.0.0.1:8786") == "tcp://127.0.0.1:8786"
    assert resolve_scheduler_address("tls://127.0.0.1:8786") == "tls://127.0.0.1:8786"


def test_scheduler_file(tmp_path):
    good = tmp_path / "scheduler.json"
    good.write_text('{"type": "Scheduler", "address": "tcp://127.0.0.1:8786"}')
    assert resolve_scheduler_address(good) == "tcp://127.0.0.1:8786"
    with pytest.raises(SchedulerUnreachableError, match="does not exist"):
        resolve_scheduler_address(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SchedulerUnreachableError, match="not a Dask scheduler file"):
        resolve_scheduler_address(bad)
    with pytest.raises(InvalidParameterError, match="neither an address"):
        resolve_scheduler_address("not-an-address")


def test_tls_address_without_certificates_is_refused_with_instructions():
    with pytest.raises(InvalidParameterError, match="tls_ca_file=.*tls_cert=.*tls_key"):
        with connect(f"tls://127.0.0.1:{_free_port()}", timeout=2):
            pass


def test_tls_config_is_used_when_no_files_given(certs):
    import dask

    address = f"tls://127.0.0.1:{_free_port()}"
    config = {
        "distributed.comm.tls.ca-file": str(certs["ca"]),
        "distributed.comm.tls.client.cert": str(certs["client"]),
        "distributed.comm.tls.client.key": str(certs["client_key"]),
    }
    # With certificates in the config the missing-certificate check passes and the client
    # really tries (and fails) to reach the empty port.
    with dask.config.set(config), pytest.raises(SchedulerUnreachableError, match=re.escape(address)):
        with connect(address, timeout=2, quiet=True):
            pass


def test_certificates_with_plain_tcp_address_are_refused(certs):
    with pytest.raises(InvalidParameterError, match="use the tls:// address"):
        with connect(
            "tcp://127.0.0.1:8786", tls_ca_file=certs["ca"], tls_cert=certs["client"],
            tls_key=certs["client_key"],
        ):
            pass


def test_make_security(certs, tmp_path):
    assert make_security() is None
    sec = make_security(certs["ca"], certs["client"], certs["client_key"])
    assert sec.require_encryption
    assert sec.tls_ca_file == str(certs["ca"]) and sec.tls_client_cert == str(certs["client"])
    with pytest.raises(InvalidParameterError, match="tls_cert"):
        make_security(tls_ca_file=certs["ca"])
    with pytest.raises(InvalidParameterError, match="does not exist"):
        make_security(certs["ca"], tmp_path / "nope.pem")


def test_invalid_arguments(certs):
    with pytest.raises(InvalidParameterError, match="n_workers must be a positive integer"):
        with local_cluster(n_workers=0):
            pass
    with pytest.raises(InvalidParameterError, match="timeout must be a positive"):
        with connect("tcp://127.0.0.1:8786", timeout=0):
            pass
    with pytest.raises(InvalidParameterError, match="either security"):
        with connect(
            "tls://127.0.0.1:8786", security=make_security(certs["ca"], certs["client"], certs["client_key"]),
            tls_ca_file=certs["ca"], tls_cert=certs["client"],
        ):
            pass


# --------------------------------------------------------------------------- the public seam
def test_options_object_and_overrides(certs):
    options = ClusterOptions(n_workers=1, processes=False, dashboard=False, timeout=10)
    assert options.timeout == 10.0 and isinstance(options.timeout, float)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.n_workers = 2
    # keyword arguments override the options object; the object itself is unchanged
    out = io.StringIO()
    with local_cluster(options, threads_per_worker=2, stream=out) as client:
        (worker,) = client.scheduler_info()["workers"].values()
        assert worker["nthreads"] == 2
        address = client.scheduler.address
    assert options.threads_per_worker == 1
    # one line names the cluster: address, workers, threads, memory limit, dashboard
    line = out.getvalue().strip()
    assert re.fullmatch(rf"dkrr: started a LocalCluster at {re.escape(address)} \(1 worker\(s\), 2 thread\(s\) "
                        r"in all, memory limit \S+ \w+ per worker\); no dashboard", line), line
    # the same object serves connect(), which ignores its LocalCluster fields
    files = {"tls_ca_file": certs["ca"], "tls_cert": certs["client"], "tls_key": certs["client_key"]}
    tls = options.replace(**files, quiet=True)
    with local_cluster(tls) as local:
        out = io.StringIO()
        with connect(local.scheduler.address, tls, quiet=False, stream=out) as client:
            assert client.submit(sum, [1, 2, 3]).result() == 6
        assert f"connected to the scheduler at {local.scheduler.address}" in out.getvalue()
        assert local.status == "running"  # leaving connect() closed only its own client


def test_invalid_options_are_refused_with_the_names():
    with pytest.raises(InvalidParameterError, match="threads_per_worker must be a positive integer, got 0"):
        ClusterOptions(threads_per_worker=0)
    with pytest.raises(InvalidParameterError, match="timeout must be a positive"):
        ClusterOptions().replace(timeout=-1)
    with pytest.raises(InvalidParameterError, match=r"Unknown cluster option\(s\) n_worker: the options are n_workers"):
        with local_cluster(n_worker=2):
            pass
    with pytest.raises(InvalidParameterError, match="options must be a dkrr.cluster.ClusterOptions, got dict"):
        with local_cluster({"n_workers": 1}):
            pass
    with pytest.raises(InvalidParameterError, match="connect\\(\\) got memory_limit, n_workers, which only shape"):
        with connect("tcp://127.0.0.1:8786", n_workers=2, memory_limit="1GB"):
            pass
    with pytest.raises(InvalidParameterError, match="Could not start a LocalCluster"):
        with local_cluster(n_workers=1, processes=False, memory_limit="lots", quiet=True):
            pass


def test_connect_by_scheduler_file_closes_only_its_client(tmp_path):
    with local_cluster(n_workers=1, processes=True, dashboard=False, quiet=True) as local:
        address = local.scheduler.address
        scheduler_file = tmp_path / "scheduler.json"
        scheduler_file.write_text(json.dumps({"type": "Scheduler", "address": address}))
        with connect(scheduler_file, timeout=10, quiet=True) as client:
            assert client.scheduler.address == address
            _dask_sum_matches_numpy(client)
        assert client.status == "closed" and local.status == "running"


def test_docstring_examples_run():
    import dkrr.cluster
    import dkrr._blas

    for module in (dkrr.cluster, dkrr._blas):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, (module.__name__, result)


def test_public_names():
    import dkrr.cluster

    assert sorted(dkrr.cluster.__all__) == ["ClusterOptions", "connect", "local_cluster", "worker_blas_threads"]
    assert all(callable(getattr(dkrr.cluster, name)) for name in dkrr.cluster.__all__)


def test_a_scheduler_without_workers_is_said_to_wait_for_them():
    """A new user's `dkrr fit --scheduler` on a scheduler with no workers printed "(0
    worker(s) ... no workers yet)" and then nothing while dask waited: the line now says
    that the tasks wait for workers, and how they come."""
    from distributed import LocalCluster

    out = io.StringIO()
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as empty:
        with connect(empty.scheduler_address, quiet=False, stream=out):
            pass
    line = out.getvalue()
    assert "0 worker(s)" in line and "its tasks wait until workers join, e.g. `dask worker" in line, line


def test_work_waiting_on_a_scheduler_without_workers_is_said_until_they_join(monkeypatch, capsys):
    """A fit whose workers all died, or a command on a scheduler started without workers,
    waited without a word (a frozen bar, nothing in a log) until it was killed. Now a note
    says the step waits for workers, again as the wait doubles, and once more when
    workers join; the work then finishes."""
    import threading

    from distributed import Client, LocalCluster

    import dkrr._watch as watch
    from dkrr._progress import compute

    monkeypatch.setattr(watch, "POLL_SECONDS", 0.2)
    monkeypatch.setattr(watch, "NO_WORKERS_NOTE_AFTER", 1.0)
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as empty, Client(empty):
        joined = threading.Timer(3.0, lambda: empty.scale(1))
        joined.start()
        try:
            t0 = time.monotonic()
            (total,) = compute(da.ones((100, 4), chunks=(50, 4)).sum(), label="summing")
            waited = time.monotonic() - t0
        finally:
            joined.cancel()
    assert total == 400 and waited >= 2.5
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("dkrr: note: the scheduler at tcp://127.0.0.1:")]
    waits = [n for n in notes if "has had no workers for" in n]
    assert 2 <= len(waits) <= 3, err  # at about 1 s and 2 s (the wait doubles; 4 s under load), then it joined at 3 s
    assert "has had no workers for 1 s: 'summing' waits until workers join" in waits[0], notes
    assert "start workers for it (`dask worker tcp://127.0.0.1:" in waits[0], notes
    # the worker's arrival is said when the watch sees it before the work ends (a race)
    assert notes[2:] in ([], [n for n in notes if n.endswith("has 1 worker(s) again: 'summing' goes on")]), notes
    # a scheduler with workers: nothing is said
    with LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as full, Client(full):
        compute(da.ones((100, 4), chunks=(50, 4)).sum(), label="summing")
        time.sleep(0.5)
    assert "dkrr: note" not in capsys.readouterr().err


def test_missing_relative_scheduler_file_names_the_absolute_path(tmp_path, monkeypatch):
    """A notebook run from notebooks/ with DKRR_SCHEDULER=run/scheduler.json looked in
    notebooks/run/: the error said only 'run/scheduler.json', not where it looked."""
    (tmp_path / "notebooks").mkdir()
    monkeypatch.chdir(tmp_path / "notebooks")
    with pytest.raises(SchedulerUnreachableError) as info:
        resolve_scheduler_address("run/scheduler.json")
    looked = str(tmp_path / "notebooks" / "run" / "scheduler.json")
    assert f"Scheduler file {looked!r} does not exist" in str(info.value), info.value
    assert "relative to the working directory" in str(info.value)
