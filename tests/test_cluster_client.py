"""Tests of dkrr._cluster.dask_client against real in-process LocalClusters on 127.0.0.1.

Connecting to separately started scheduler/worker processes (TCP and TLS) is tested in
tests/test_cluster_deploy.py.
"""

from __future__ import annotations

import importlib.util
import io
import re
import socket
import time
import urllib.request
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

from dkrr._cluster import (
    dask_client,
    limit_blas_threads,
    make_security,
    resolve_scheduler_address,
    worker_blas_threads,
)
from dkrr.errors import DkrrError, InvalidParameterError, SchedulerUnreachableError

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
    got = client.compute((dx.T @ dx).sum(axis=0)).result()
    np.testing.assert_allclose(got, (x.T @ x).sum(axis=0), rtol=1e-12, atol=1e-9)


def test_local_cluster_processes_computes_and_prints_dashboard():
    out = io.StringIO()
    with dask_client(n_workers=2, threads_per_worker=1, memory_limit="1GB", stream=out) as client:
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
    with dask_client(
        n_workers=1, threads_per_worker=threads_per_worker, dashboard=False, quiet=True
    ) as client:
        (worker,) = client.scheduler_info()["workers"].values()
        assert worker["nthreads"] == threads_per_worker
        (info,) = worker_blas_threads(client).values()
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
    with dask_client(n_workers=1, processes=False, dashboard=False, stream=out) as client:
        pools = threadpoolctl.threadpool_info()
        assert pools and all(p["num_threads"] == 1 for p in pools), pools
        _dask_sum_matches_numpy(client)
    assert "no dashboard" in out.getvalue()
    assert "Dask dashboard at" not in out.getvalue()


@pytest.mark.parametrize("processes", [False, True])
def test_every_socket_is_bound_to_loopback(processes):
    psutil = pytest.importorskip("psutil")
    with dask_client(n_workers=1, processes=processes, quiet=True) as client:
        me = psutil.Process()
        listening = [
            conn.laddr
            for proc in [me, *me.children(recursive=True)]
            for conn in proc.net_connections(kind="inet")
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
    with dask_client(n_workers=1, processes=False, quiet=True) as client:
        assert client.status == "running"
    captured = capsys.readouterr()
    assert "dkrr:" not in captured.err + captured.out


def test_default_stream_is_stderr_at_call_time(capsys):
    with dask_client(n_workers=1, processes=False):
        pass
    assert "Dask dashboard at http://127.0.0.1:" in capsys.readouterr().err


def test_tls_local_cluster(certs):
    out = io.StringIO()
    with dask_client(
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
        with dask_client(address, timeout=2, quiet=True):
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
        with dask_client(f"tls://127.0.0.1:{_free_port()}", timeout=2):
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
        with dask_client(address, timeout=2, quiet=True):
            pass


def test_certificates_with_plain_tcp_address_are_refused(certs):
    with pytest.raises(InvalidParameterError, match="use the tls:// address"):
        with dask_client(
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
        with dask_client(n_workers=0):
            pass
    with pytest.raises(InvalidParameterError, match="timeout must be a positive"):
        with dask_client("tcp://127.0.0.1:8786", timeout=0):
            pass
    with pytest.raises(InvalidParameterError, match="either security"):
        with dask_client(
            "tls://127.0.0.1:8786", security=make_security(certs["ca"], certs["client"], certs["client_key"]),
            tls_ca_file=certs["ca"], tls_cert=certs["client"],
        ):
            pass
