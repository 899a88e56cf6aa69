"""Connecting to Dask clusters: an in-process LocalCluster or an existing scheduler.

:func:`dask_client` is the single entry point used by the ``dkrr`` command line, the
notebooks and the tests. It either starts a :class:`distributed.LocalCluster` bound to
127.0.0.1 or connects a :class:`distributed.Client` to an existing scheduler (plain TCP or
mutual TLS), and closes what it opened when the ``with`` block ends.

BLAS threads
------------
Random-feature ridge regression spends its time in BLAS (``Z.T @ Z`` per chunk). Dask
already runs one task per worker thread, so a multi-threaded BLAS inside each task would
oversubscribe the cores. ``distributed`` prevents this for every worker started by a
nanny (``LocalCluster(processes=True)`` and the ``dask worker`` command): its config key
``distributed.nanny.pre-spawn-environ`` sets ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and
``OPENBLAS_NUM_THREADS`` to 1 in the worker process before it imports numpy (checked on
distributed 2026.8; ``tests/test_cluster_client.py`` verifies it with ``threadpoolctl``).
With ``threads_per_worker > 1`` each worker thread still calls a single-threaded BLAS, so
there is one BLAS thread per Dask thread. Workers run *inside* the client process
(``processes=False``) do not get this environment; for them :func:`dask_client` limits
BLAS to one thread with ``threadpoolctl`` for the duration of the block.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from dkrr._scheduler_probe import check_scheme, probe_scheduler
from dkrr.errors import InvalidParameterError, SchedulerUnreachableError

__all__ = [
    "BLAS_THREAD_VARIABLES",
    "dask_client",
    "limit_blas_threads",
    "make_security",
    "resolve_scheduler_address",
    "worker_blas_threads",
]

#: Environment variables that bound the thread pools of the common BLAS libraries.
BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")

_TLS_SCHEMES = ("tls://", "wss://")


def make_security(tls_ca_file=None, tls_cert=None, tls_key=None, *, require_encryption=True):
    """Build a :class:`distributed.security.Security` for a client from certificate files.

    Parameters
    ----------
    tls_ca_file : str or path-like, default=None
        PEM file of the certificate authority that signed the scheduler and worker
        certificates.
    tls_cert : str or path-like, default=None
        PEM file with the client certificate (may also hold the private key).
    tls_key : str or path-like, default=None
        PEM file with the client private key, when it is not in ``tls_cert``.
    require_encryption : bool, default=True
        Refuse any unencrypted connection.

    Returns
    -------
    security : distributed.security.Security or None
        ``None`` when no file is given.

    Raises
    ------
    InvalidParameterError
        If only some of the required files are given, or a file does not exist.
    """
    from distributed.security import Security

    if tls_ca_file is None and tls_cert is None and tls_key is None:
        return None
    if tls_ca_file is None or tls_cert is None:
        raise InvalidParameterError(
            "Mutual TLS needs the CA certificate and a client certificate: pass "
            "tls_ca_file=... (ca.pem) and tls_cert=... (client.pem), plus tls_key=... "
            "(client-key.pem) if the key is in a separate file; got "
            f"tls_ca_file={tls_ca_file!r}, tls_cert={tls_cert!r}, tls_key={tls_key!r}. "
            "cluster/tls/make_certs.py creates all three."
        )
    for name, value in (("tls_ca_file", tls_ca_file), ("tls_cert", tls_cert), ("tls_key", tls_key)):
        if value is not None and not Path(value).is_file():
            raise InvalidParameterError(f"{name}={str(value)!r} does not exist or is not a file.")
    return Security(
        tls_ca_file=os.fspath(tls_ca_file),
        tls_client_cert=os.fspath(tls_cert),
        tls_client_key=None if tls_key is None else os.fspath(tls_key),
        require_encryption=require_encryption,
    )


def resolve_scheduler_address(scheduler):
    """Return the address of a scheduler given as an address or a scheduler file.

    Parameters
    ----------
    scheduler : str or path-like
        An address such as ``"tcp://127.0.0.1:8786"``, ``"tls://host:8786"`` or
        ``"host:8786"`` (TCP), or the path to a JSON scheduler file written by
        ``dask scheduler --scheduler-file`` (``cluster/local/cluster.py`` writes one).

    Returns
    -------
    address : str

    Raises
    ------
    SchedulerUnreachableError
        If the scheduler file does not exist or has no ``address``.
    """
    text = os.fspath(scheduler)
    if "://" in text:
        return text
    path = Path(text)
    if path.suffix.lower() == ".json" or path.is_file():
        if not path.is_file():
            raise SchedulerUnreachableError(
                f"Scheduler file {text!r} does not exist: is the scheduler running? Start it "
                "with `dask scheduler --scheduler-file FILE` or `python cluster/local/cluster.py "
                "start --dir RUNDIR` (which writes RUNDIR/scheduler.json)."
            )
        try:
            info = json.loads(path.read_text())
            return str(info["address"])
        except (ValueError, KeyError, TypeError) as exc:
            raise SchedulerUnreachableError(
                f"Scheduler file {text!r} is not a Dask scheduler file (JSON with an 'address' "
                f"key): {exc}"
            ) from exc
    if ":" not in text:
        raise InvalidParameterError(
            f"scheduler={text!r} is neither an address like 'tcp://127.0.0.1:8786' or "
            "'tls://host:8786' nor an existing scheduler file."
        )
    return "tcp://" + text


@contextmanager
def limit_blas_threads(n_threads=1):
    """Limit the BLAS/OpenMP thread pools of *this* process for the block.

    Uses ``threadpoolctl`` when it is installed (it is a dependency of scikit-learn);
    otherwise does nothing. Worker processes started by a nanny need no such limit (see
    the module docstring).

    Parameters
    ----------
    n_threads : int, default=1
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn always brings threadpoolctl
        yield
        return
    with threadpool_limits(limits=n_threads):
        yield


def _blas_info():
    import numpy  # noqa: F401  (load the BLAS numpy links against)

    env = {name: os.environ.get(name) for name in BLAS_THREAD_VARIABLES}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover
        return {"environ": env, "pools": []}
    pools = [
        {"user_api": p["user_api"], "internal_api": p["internal_api"], "num_threads": p["num_threads"]}
        for p in threadpool_info()
    ]
    return {"environ": env, "pools": pools}


def worker_blas_threads(client):
    """Report the BLAS thread settings of every worker of ``client``.

    Parameters
    ----------
    client : distributed.Client

    Returns
    -------
    info : dict
        Maps each worker address to ``{"environ": {...}, "pools": [...]}``: the values of
        :data:`BLAS_THREAD_VARIABLES` and the thread pools seen by ``threadpoolctl``
        (``user_api``, ``internal_api``, ``num_threads``).
    """
    return client.run(_blas_info)


def _security_from_config():
    from distributed.security import Security

    security = Security()  # reads distributed.comm.tls.* and require-encryption
    if security.tls_ca_file and security.tls_client_cert:
        return security
    return None


def _same_certificate_for_all_roles(security):
    """A copy of a client ``Security`` whose certificate also serves scheduler and workers."""
    from distributed.security import Security

    cert, key = security.tls_client_cert, security.tls_client_key
    return Security(
        tls_ca_file=security.tls_ca_file,
        tls_client_cert=cert,
        tls_client_key=key,
        tls_scheduler_cert=security.tls_scheduler_cert or cert,
        tls_scheduler_key=security.tls_scheduler_key or key,
        tls_worker_cert=security.tls_worker_cert or cert,
        tls_worker_key=security.tls_worker_key or key,
        require_encryption=security.require_encryption,
    )


async def _handshake(address, connection_args, timeout):
    from distributed.comm import connect

    comm = await connect(address, timeout=timeout, **connection_args)
    await comm.close()


def _check_scheduler_answers(address, security, timeout):
    """Connect to ``address`` and complete distributed's handshake within ``timeout`` s.

    ``Client(timeout=...)`` bounds the TCP/TLS connection but not the handshake that
    follows it (distributed 2026.8 waits for the peer's first message without a limit), so
    a port that accepts connections and never answers (another service, a hung
    scheduler) would block forever. Raises ``TimeoutError`` or ``OSError``.
    """
    from distributed.security import Security
    from distributed.utils import LoopRunner, sync

    args = (security if security is not None else Security()).get_connection_args("client")
    runner = LoopRunner(asynchronous=False)
    runner.start()
    try:
        sync(runner.loop, _handshake, address, args, timeout, callback_timeout=timeout)
    except TimeoutError as exc:
        raise TimeoutError(f"the scheduler did not complete the handshake within {timeout:g} s") from exc
    finally:
        runner.stop()


def _print_dashboard(link, stream, what):
    if link:
        print(f"dkrr: {what}; Dask dashboard at {link}", file=stream, flush=True)
    else:
        print(f"dkrr: {what}; no dashboard", file=stream, flush=True)


def _scheduler_dashboard_link(client):
    try:
        services = client.scheduler_info().get("services", {})
    except Exception:  # noqa: BLE001 - the link is informative only
        return None
    if "dashboard" not in services:
        return None
    return client.dashboard_link


@contextmanager
def dask_client(
    scheduler=None,
    *,
    n_workers=None,
    threads_per_worker=1,
    memory_limit="auto",
    processes=True,
    security=None,
    tls_ca_file=None,
    tls_cert=None,
    tls_key=None,
    timeout=30.0,
    dashboard=True,
    quiet=False,
    stream=None,
):
    """Yield a :class:`distributed.Client`, starting a LocalCluster or connecting to one.

    Parameters
    ----------
    scheduler : str or path-like, default=None
        ``None`` starts an in-process :class:`distributed.LocalCluster` bound to
        127.0.0.1 (with ``processes=False`` and no TLS its workers use ``inproc://``
        and only the dashboard listens, on 127.0.0.1). Otherwise the address of an existing scheduler
        (``"tcp://127.0.0.1:8786"``, ``"tls://host:8786"``) or the path of a scheduler
        JSON file.
    n_workers : int, default=None
        Workers of the LocalCluster (``None``: distributed's choice from the CPU count).
        Ignored when connecting.
    threads_per_worker : int, default=1
        Threads per LocalCluster worker. BLAS stays at one thread per worker thread.
    memory_limit : str, float or int, default="auto"
        Memory limit per LocalCluster worker (``"2GB"``, bytes, or ``"auto"``).
    processes : bool, default=True
        Run LocalCluster workers in separate processes (``False``: threads of this
        process, with BLAS limited to one thread while the block runs).
    security : distributed.security.Security, default=None
        TLS settings; mutually exclusive with the three ``tls_*`` files.
    tls_ca_file, tls_cert, tls_key : str or path-like, default=None
        CA certificate, client certificate and client key (PEM) for a ``tls://``
        scheduler. When neither these nor ``security`` are given, the
        ``distributed.comm.tls.*`` Dask configuration is used if it names a CA and a
        client certificate. With a LocalCluster they switch it to TLS, the same files
        then serving scheduler, workers and client.
    timeout : float, default=30.0
        Seconds to wait for the scheduler before :class:`SchedulerUnreachableError`.
    dashboard : bool, default=True
        Start the LocalCluster dashboard on a free port of 127.0.0.1.
    quiet : bool, default=False
        Do not print the dashboard link.
    stream : file-like, default=None
        Where the dashboard link is printed (``None``: ``sys.stderr`` at call time).

    Yields
    ------
    client : distributed.Client

    Raises
    ------
    SchedulerUnreachableError
        If the scheduler does not answer within ``timeout`` seconds, or the address is not
        a Dask scheduler. ``tcp://`` and ``tls://`` addresses are probed first with bounded
        reads (:mod:`dkrr._scheduler_probe`), and the message says what went wrong: DNS,
        connection refused, no answer, TLS handshake, or not a Dask scheduler (with the
        bytes it sent, e.g. an SSH banner or an HTTP page).
    InvalidParameterError
        If the address scheme is not a Dask one (``http://``, ``ssh://``, ...), a ``tls://``
        address is given without certificates, certificates with a ``tcp://`` address, or
        invalid cluster options.

    Examples
    --------
    >>> import dask.array as da
    >>> from dkrr._cluster import dask_client
    >>> with dask_client(n_workers=1, processes=False, dashboard=False, quiet=True) as client:
    ...     float(da.ones(10, chunks=5).sum().compute())
    10.0
    """
    from distributed import Client, LocalCluster

    stream = sys.stderr if stream is None else stream
    if timeout is None or not float(timeout) > 0:
        raise InvalidParameterError(f"timeout must be a positive number of seconds, got {timeout!r}.")
    timeout = float(timeout)
    files_given = any(f is not None for f in (tls_ca_file, tls_cert, tls_key))
    if security is not None and files_given:
        raise InvalidParameterError(
            "Pass either security=Security(...) or the tls_ca_file/tls_cert/tls_key files, not both."
        )
    if security is None:
        security = make_security(tls_ca_file, tls_cert, tls_key)

    with contextlib.ExitStack() as stack:
        if scheduler is None:
            for name, value in (("n_workers", n_workers), ("threads_per_worker", threads_per_worker)):
                if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                    raise InvalidParameterError(f"{name} must be a positive integer, got {value!r}.")
            kwargs = {}
            if security is not None:
                if security.tls_scheduler_cert is None or security.tls_worker_cert is None:
                    security = _same_certificate_for_all_roles(security)
                kwargs.update(protocol="tls://", security=security)
            if processes or security is not None:
                kwargs["host"] = "127.0.0.1"
            # else: in-process workers talk over inproc://, no network socket at all.
            if not processes:
                stack.enter_context(limit_blas_threads(1))
            try:
                cluster = stack.enter_context(
                    LocalCluster(
                        n_workers=n_workers,
                        threads_per_worker=threads_per_worker,
                        memory_limit=memory_limit,
                        processes=processes,
                        # The scheduler's HTTP server (/health, /metrics) always runs; keep
                        # it on a free port of 127.0.0.1 and add the dashboard on request.
                        dashboard_address="127.0.0.1:0",
                        scheduler_kwargs={"dashboard": bool(dashboard)},
                        # Same for the workers' HTTP servers (else 0.0.0.0 when inproc).
                        worker_dashboard_address="127.0.0.1:0",
                        **kwargs,
                    )
                )
            except (TypeError, ValueError) as exc:
                raise InvalidParameterError(f"Could not start a LocalCluster: {exc}") from exc
            client = stack.enter_context(Client(cluster, timeout=timeout, security=security))
            if not quiet:
                n = len(cluster.workers)
                what = f"started a LocalCluster with {n} worker(s) at {cluster.scheduler_address}"
                link = None
                if dashboard:
                    port = client.scheduler_info()["services"].get("dashboard")
                    link = None if port is None else f"http://127.0.0.1:{port}/status"
                _print_dashboard(link, stream, what)
            yield client
            return

        address = resolve_scheduler_address(scheduler)
        check_scheme(address)
        is_tls = address.startswith(_TLS_SCHEMES)
        if security is None and is_tls:
            security = _security_from_config()
        if is_tls and security is None:
            raise InvalidParameterError(
                f"The scheduler address {address!r} uses TLS, but no certificates were given. "
                "Pass the cluster CA and a client certificate signed by it: "
                "tls_ca_file='ca.pem', tls_cert='client.pem', tls_key='client-key.pem' "
                "(on the command line --tls-ca-file/--tls-cert/--tls-key), or set "
                "distributed.comm.tls.ca-file and distributed.comm.tls.client.cert/key in the "
                "Dask configuration (see cluster/tls/README.md)."
            )
        if not is_tls and security is not None and security.require_encryption:
            raise InvalidParameterError(
                f"TLS certificates were given but the scheduler address {address!r} is not "
                "encrypted: use the tls:// address of the scheduler."
            )
        try:
            # Look before distributed reads: it allocates whatever length a peer declares.
            probe_scheduler(address, security, timeout)
            _check_scheduler_answers(address, security, timeout)
            client = Client(address, security=security, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            hint = (
                " Check that the client certificate is signed by the cluster CA and that the "
                "scheduler speaks TLS."
                if is_tls
                else " Check the address and that `dask scheduler` is running and reachable."
            )
            raise SchedulerUnreachableError(
                f"Could not connect to the Dask scheduler at {address!r} (timeout {timeout:g} s): "
                f"{exc}.{hint}"
            ) from exc
        stack.callback(client.close)
        if not quiet:
            _print_dashboard(
                _scheduler_dashboard_link(client), stream, f"connected to the scheduler at {address}"
            )
        yield client
