"""``--scheduler`` pointing at something that is not a Dask scheduler (issue 11, item 9).

Every peer here is a real server on 127.0.0.1 (a TCP service that speaks first like SSH, a
silent one, Python's ``http.server``, real LocalCluster schedulers over TCP and TLS),
started by the test and stopped at its end. Each connection attempt runs in a thread with a
join bound, so a regression that hangs fails the test instead of blocking the suite.
Before the fix an SSH or HTTP answer was read as a message length and distributed tried
to allocate exabytes (MemoryError), and a wrong scheme raised a bare ValueError.
"""

from __future__ import annotations

import http.server
import importlib.util
import re
import socket
import threading
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

from dkrr.cluster import connect, local_cluster
from dkrr.errors import DkrrError, InvalidParameterError, SchedulerUnreachableError

ROOT = Path(__file__).resolve().parents[1]
SSH_BANNER = b"SSH-2.0-OpenSSH_9.0\r\n"


class _TCPService:
    """A TCP server on 127.0.0.1 that sends ``greeting`` on accept and holds connections open."""

    def __init__(self, greeting=b""):
        self.greeting = greeting
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        conns = []
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conns.append(conn)
            if self.greeting:
                conn.sendall(self.greeting)
        for conn in conns:
            conn.close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)
        self.sock.close()


class _Quiet(http.server.BaseHTTPRequestHandler):
    timeout = 10  # a silent client does not hold a handler thread for ever

    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(10)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("dkrr_make_certs", ROOT / "cluster/tls/make_certs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_certs(tmp_path_factory.mktemp("certs"))


def _connect_error(address, timeout=3.0, **kwargs):
    """The exception of ``connect(address)``, run in a thread bounded to timeout + 60 s."""
    result = {}

    def attempt():
        try:
            with connect(address, timeout=timeout, quiet=True, **kwargs):
                result["error"] = None
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            result["error"] = exc

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout + 60)
    assert not thread.is_alive(), f"connect({address!r}) hung"
    return result["error"]


def _unreachable(address, **kwargs):
    exc = _connect_error(address, **kwargs)
    assert isinstance(exc, SchedulerUnreachableError), repr(exc)
    message = str(exc)
    assert address in message
    return message


def test_service_that_speaks_first_is_not_a_scheduler():
    with _TCPService(SSH_BANNER) as ssh:
        message = _unreachable(f"tcp://127.0.0.1:{ssh.port}")
    assert "not a Dask scheduler" in message
    assert "SSH-2.0-OpenSSH_9.0" in message and "SSH server" in message


def test_http_server_is_not_a_scheduler(http_server):
    port = http_server.server_address[1]
    message = _unreachable(f"tcp://127.0.0.1:{port}")
    assert "not a Dask scheduler" in message and "HTTP server" in message
    assert "dashboard" in message  # the usual mistake: the dashboard port instead of 8786


def test_garbage_length_prefix_is_refused_without_allocating():
    # 8 bytes that read as a 2**64 - 1 byte message, then a few more
    with _TCPService(b"\xff" * 8 + b"rest") as svc:
        message = _unreachable(f"tcp://127.0.0.1:{svc.port}")
    assert "not a Dask scheduler" in message and "declare a message of" in message


def test_peer_that_closes_at_once_is_not_a_scheduler():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    stop = threading.Event()

    def close_each():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            conn.close()

    thread = threading.Thread(target=close_each, daemon=True)
    thread.start()
    try:
        message = _unreachable(f"tcp://127.0.0.1:{port}")
    finally:
        stop.set()
        thread.join(10)
        server.close()
    assert "closed the connection" in message and "not a Dask scheduler" in message


def test_silent_port_fails_within_the_timeout():
    with _TCPService() as silent:
        message = _unreachable(f"tcp://127.0.0.1:{silent.port}", timeout=2)
        assert silent.accepted >= 1
    assert "sent nothing within 2 s" in message


def test_connection_refused_says_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    message = _unreachable(f"tcp://127.0.0.1:{port}")
    assert "refused" in message and "nothing listens" in message


def test_unknown_host_says_dns():
    message = _unreachable("tcp://nonexistent.invalid:8786")
    assert "could not resolve the host name 'nonexistent.invalid'" in message


@pytest.mark.parametrize(
    "address, hint",
    [("http://127.0.0.1:8787", "dashboard"), ("ssh://127.0.0.1:22", "tcp://"), ("ftp://x:1", "tcp://")],
)
def test_wrong_scheme_is_a_parameter_error(address, hint):
    exc = _connect_error(address)
    assert isinstance(exc, InvalidParameterError) and isinstance(exc, DkrrError), repr(exc)
    message = str(exc)
    assert address in message and "scheme" in message and hint in message


@pytest.mark.parametrize("address, hint", [
    ("inproc://x", "inproc:// reaches only a scheduler started in this same Python process"),
    ("inproc://127.0.0.1/1/1", "inproc:// reaches only a scheduler started in this same Python process"),
    pytest.param("ucx://127.0.0.1:8786", "ucx:// needs distributed's UCX backend",
                 marks=pytest.mark.skipif(importlib.util.find_spec("distributed_ucxx") is not None
                                          or importlib.util.find_spec("ucp") is not None, reason="UCX installed")),
])
def test_schemes_distributed_refuses_are_a_parameter_error_not_a_traceback(address, hint):
    """inproc:// and ucx:// (without its backend) pass the scheme check, and distributed's
    Client raised ValueError / TypeError from inside its comm layer: a traceback from
    `dkrr fit --scheduler` (found by a cluster probe). Now a parameter error with a hint."""
    exc = _connect_error(address)
    assert isinstance(exc, InvalidParameterError), repr(exc)
    assert f"Could not connect to the Dask scheduler at {address!r}" in str(exc) and hint in str(exc), str(exc)


def test_tls_address_to_a_plain_service_fails_clearly(certs):
    files = {"tls_ca_file": certs["ca"], "tls_cert": certs["client"], "tls_key": certs["client_key"]}
    with _TCPService(SSH_BANNER) as ssh:
        message = _unreachable(f"tls://127.0.0.1:{ssh.port}", **files)
    assert "TLS handshake" in message
    with _TCPService() as silent:
        message = _unreachable(f"tls://127.0.0.1:{silent.port}", timeout=2, **files)
    assert "within 2 s" in message


def _sum_matches(client):
    x = np.arange(40.0).reshape(20, 2)
    got = client.compute(da.from_array(x, chunks=(5, 2)).sum()).result()
    assert got == x.sum()


def test_real_schedulers_still_pass_the_probe(certs):
    from distributed import LocalCluster

    with (
        LocalCluster(n_workers=1, processes=False, host="127.0.0.1", protocol="tcp://",
                     dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0") as cluster,
        connect(cluster.scheduler_address, timeout=10, quiet=True) as client,
    ):
        _sum_matches(client)
    files = {"tls_ca_file": certs["ca"], "tls_cert": certs["client"], "tls_key": certs["client_key"]}
    with local_cluster(n_workers=1, processes=False, dashboard=False, quiet=True, **files) as local:
        address = local.scheduler.address
        assert re.match(r"tls://127\.0\.0\.1:\d+$", address)
        with connect(address, timeout=10, quiet=True, **files) as client:
            _sum_matches(client)


def test_cli_reports_not_a_scheduler(tmp_path, capsys):
    from dkrr.cli._main import main

    rng = np.random.default_rng(0)
    csv = tmp_path / "d.csv"
    np.savetxt(csv, rng.standard_normal((50, 3)), delimiter=",", fmt="%.5f")
    assert main(["ingest", str(csv), "--out", str(tmp_path / "s"), "--no-header", "-q"]) == 0
    with _TCPService(SSH_BANNER) as ssh:
        code = main(["fit", str(tmp_path / "s"), "--out", str(tmp_path / "m"), "--method", "rff",
                     "--n-components", "8", "--scheduler", f"127.0.0.1:{ssh.port}", "--timeout", "3", "-q"])
    err = capsys.readouterr().err
    assert code == 1
    assert "not a Dask scheduler" in err and "Traceback" not in err
    assert not (tmp_path / "m").exists()


def test_tls_scheduler_rejecting_the_client_certificate_says_so(certs, tmp_path):
    spec = importlib.util.spec_from_file_location("dkrr_make_certs", ROOT / "cluster/tls/make_certs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    other = module.make_certs(tmp_path / "other")  # another CA
    files = {"tls_ca_file": certs["ca"], "tls_cert": certs["client"], "tls_key": certs["client_key"]}
    with local_cluster(n_workers=1, processes=False, dashboard=False, quiet=True, **files) as local:
        address = local.scheduler.address
        # the client trusts the cluster CA, but its certificate is signed by another one
        message = _unreachable(address, tls_ca_file=certs["ca"], tls_cert=other["client"],
                               tls_key=other["client_key"])
        assert "rejects the client certificate" in message and "not a Dask scheduler" not in message
        # a plain tcp:// address to the TLS scheduler
        message = _unreachable(address.replace("tls://", "tcp://"))
        assert "use tls://" in message
