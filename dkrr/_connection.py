"""Reaching a Dask scheduler: addresses, TLS certificates and the handshake check.

The plumbing behind :func:`dkrr.cluster.connect` and :func:`dkrr.cluster.local_cluster`:
:func:`resolve_scheduler_address` turns an address or a scheduler file into an address,
:func:`make_security` turns certificate files into a :class:`distributed.security.Security`,
and :func:`check_scheduler_answers` completes distributed's handshake within the timeout
(after :func:`dkrr._scheduler_probe.probe_scheduler` has checked that the peer is a Dask
scheduler at all); :func:`check_workers_dkrr` warns of workers running another dkrr;
:func:`say_cluster` prints the one line naming the cluster a job uses.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dkrr._scheduler_probe import check_scheme, probe_scheduler
from dkrr.errors import InvalidParameterError, SchedulerUnreachableError

__all__ = ["check_workers_dkrr", "dashboard_link", "local_security", "make_security", "open_client",
           "resolve_scheduler_address", "say_cluster"]

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
        ``"host:8786"`` (the ``distributed.comm.default-scheme`` of the Dask
        configuration, ``tcp`` by default, as ``distributed.Client``), or the path to a JSON scheduler file written by
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
                f"Scheduler file {str(path.absolute())!r} does not exist"
                + ("" if path.is_absolute() else f" ({text!r} is relative to the working directory, {os.getcwd()})")
                + ": is the scheduler running? Start it "
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
    import dask

    # as distributed.Client: a scheme-less address takes the configured default scheme
    return f"{dask.config.get('distributed.comm.default-scheme', 'tcp')}://{text}"


def _security_from_config():
    from distributed.security import Security

    security = Security()  # reads distributed.comm.tls.* and require-encryption
    if security.tls_ca_file and security.tls_client_cert:
        return security
    return None


def local_security(security):
    """``security`` for a LocalCluster: the client certificate also serves scheduler and
    workers unless they have their own."""
    if security.tls_scheduler_cert is not None and security.tls_worker_cert is not None:
        return security
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


def open_client(scheduler, security, timeout):
    """A :class:`distributed.Client` connected to an existing scheduler.

    Parameters
    ----------
    scheduler : str or path-like
        Address or scheduler file (:func:`resolve_scheduler_address`).
    security : distributed.security.Security or None
        ``None`` for a ``tls://`` address: the ``distributed.comm.tls.*`` configuration.
    timeout : float
        Seconds for the probe, the handshake and the connection, each.

    Returns
    -------
    client : distributed.Client
    address : str
        The resolved address.

    Raises
    ------
    SchedulerUnreachableError, InvalidParameterError
        As :func:`dkrr.cluster.connect`.
    """
    from distributed import Client

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
    except (ValueError, TypeError, ImportError) as exc:  # schemes dkrr does not probe: distributed's refusals
        scheme = address.split("://", 1)[0].lower()
        if scheme in ("tcp", "tls"):
            raise
        hint = {"inproc": "inproc:// reaches only a scheduler started in this same Python process "
                          "(LocalCluster(processes=False)); another process's scheduler listens on tcp://host:8786",
                "ucx": "ucx:// needs distributed's UCX backend (the distributed-ucxx package) here and on the "
                       "cluster; without it use the scheduler's tcp:// address"}.get(scheme, "check the address")
        raise InvalidParameterError(
            f"Could not connect to the Dask scheduler at {address!r}: {type(exc).__name__}: {exc}; {hint}."
        ) from exc
    except (OSError, TimeoutError) as exc:
        hint = (
            " Check that the client certificate is signed by the cluster CA and that the "
            "scheduler speaks TLS."
            if is_tls
            else " Check the address and that `dask scheduler` is running and reachable."
        )
        given = os.fspath(scheduler)
        if "://" not in given and not address.endswith("://" + given):  # the address came from a file
            hint += (f" The scheduler file {given!r} may be stale: its scheduler is gone (start the "
                     "cluster again, which rewrites it).")
        raise SchedulerUnreachableError(
            f"Could not connect to the Dask scheduler at {address!r} (timeout {timeout:g} s): "
            f"{exc}.{hint}"
        ) from exc
    return client, address


def say_cluster(stream, link, what, client):
    """The one line that says which cluster a job uses: its address, its workers' threads
    and memory limits, and the dashboard link (printed once, when the client is opened)."""
    where = f"Dask dashboard at {link}" if link else "no dashboard"
    print(f"dkrr: {what} ({_workers_summary(client)}); {where}", file=stream, flush=True)


def _workers_summary(client) -> str:
    """``2 worker(s), 2 thread(s) in all, memory limit 1.00 GiB per worker`` for the line
    of :func:`say_cluster`."""
    from dkrr._system import format_bytes, scheduler_workers

    try:
        workers = scheduler_workers(client)
    except Exception:  # noqa: BLE001 - the line is informative only
        return "workers unknown"
    threads = sum(int(w.get("nthreads") or 0) for w in workers)
    limits = sorted({int(w.get("memory_limit") or 0) for w in workers})
    if not workers:
        # dask waits for workers without a word; say so (an adaptive cluster starts them for the tasks)
        memory = ("no workers yet: its tasks wait until workers join, e.g. `dask worker SCHEDULER_ADDRESS`, "
                  "or until an adaptive cluster starts them")
    elif limits == [0]:
        memory = "no memory limit"
    elif len(limits) == 1:
        memory = f"memory limit {format_bytes(limits[0])} per worker"
    else:
        low = format_bytes(limits[0]) if limits[0] else "none"
        memory = f"memory limits {low} to {format_bytes(limits[-1])} per worker"
    return f"{len(workers)} worker(s), {threads} thread(s) in all, {memory}"


def dashboard_link(client):
    """The scheduler's dashboard link, or None where it has none. A scheduler started with
    ``--no-dashboard`` still lists its HTTP server (/health, /metrics) as the dashboard
    service, whose ``/status`` page is then a 404: asked once, with a 1 s limit. A link that
    cannot be reached from here (another network, a TLS dashboard) is kept: a browser
    elsewhere may reach it."""
    import urllib.error
    import urllib.request

    try:
        services = client.scheduler_info().get("services", {})
    except Exception:  # noqa: BLE001 - the link is informative only
        return None
    if "dashboard" not in services:
        return None
    link = client.dashboard_link
    try:
        with urllib.request.urlopen(link, timeout=1):  # noqa: S310 - the scheduler's own http(s) link
            pass
    except urllib.error.HTTPError as exc:
        return None if exc.code == 404 else link
    except Exception:  # noqa: BLE001 - unreachable from here: kept
        return link
    return link


def check_workers_dkrr(client, address: str, timeout: float = 10.0) -> None:
    """Ask every worker of ``client`` for its dkrr (:func:`dkrr._version.install_identity`)
    and warn (:class:`~dkrr.errors.WorkerVersionWarning`) of those whose version or source
    digest differs from this process's, or that cannot import dkrr. A team cluster's
    workers may have been installed from a release while the client runs a checkout: the
    version strings agree, the code does not. Asked once, when :func:`dkrr.cluster.connect`
    opens the client (workers that join later are not asked), and for at most ``timeout``
    seconds: a cluster that does not answer in time goes unchecked (its tasks say more)."""
    import threading
    import warnings

    from dkrr._version import install_identity
    from dkrr.errors import WorkerVersionWarning

    answer = {}

    def ask():
        try:
            answer["workers"] = client.run(install_identity, on_error="return")
        except Exception:  # noqa: BLE001 - the check is informative only
            pass

    thread = threading.Thread(target=ask, name="dkrr-check-workers", daemon=True)
    thread.start()
    thread.join(timeout)
    ours = install_identity()
    other, broken = {}, {}
    for worker, found in sorted(answer.get("workers", {}).items()):
        if isinstance(found, BaseException):
            # (distributed wraps a failed unpickling as Exception("ModuleNotFoundError(...)"))
            broken[worker] = str(found) if type(found) is Exception else f"{type(found).__name__}: {found}"
        elif tuple(found) != ours:
            other[worker] = f"dkrr {found[0]}, sources {found[1]}"
    n = len(answer.get("workers", {}))
    for found, what, why in (
            (broken, "cannot import dkrr", "Every dkrr task sent there fails: install dkrr (the client's version)"),
            (other, f"run another dkrr than this client (dkrr {ours[0]}, sources {ours[1]})",
             "Tasks run the workers' code, so results and errors may not be this dkrr's: install the client's dkrr")):
        if found:
            listed = "; ".join(f"{w} ({text})" for w, text in list(found.items())[:3])
            warnings.warn(WorkerVersionWarning(
                f"{len(found)} of {n} worker(s) of the scheduler at {address} {what}: {listed}"
                f"{' ...' if len(found) > 3 else ''}. {why} where those workers run, and restart them"), stacklevel=2)
