"""Dask clients for dkrr: a new LocalCluster on this machine, or an existing scheduler.

This module is about the *client side* in Python. The repository's top-level ``cluster/``
folder is something else: deployment recipes (scheduler and worker processes,
certificates, SLURM, Kubernetes) that start the clusters :func:`connect` reaches.

* :func:`local_cluster` starts a :class:`distributed.LocalCluster` bound to 127.0.0.1 and
  yields a :class:`distributed.Client` on it;
* :func:`connect` yields a client of a scheduler that is already running (``tcp://`` or
  mutual-TLS ``tls://`` address, or a scheduler JSON file). It first checks that the
  address is a Dask scheduler (:mod:`dkrr._scheduler_probe`) and that it completes the
  handshake within the timeout;
* :class:`ClusterOptions` holds the runtime knobs of both, so that one object can
  describe "how this job reaches Dask";
* :func:`worker_blas_threads` reports the BLAS threads of each worker (one per Dask
  thread, see :mod:`dkrr._blas`).

Both context managers close what they opened when the ``with`` block ends: the client,
and for :func:`local_cluster` the cluster; never a remote cluster. Unless ``quiet``, they
print one line (once, when the client opens) that names the cluster - its address, its
workers, threads and memory limits - and the dashboard link: in a batch job's log it
says which cluster the job used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from contextlib import contextmanager
from typing import Any

from dkrr._connection import (check_workers_dkrr, dashboard_link, local_security, make_security, open_client,
                              say_cluster)
from dkrr.errors import InvalidParameterError, MainGuardError
from ._blas import limit_blas_threads, worker_blas_threads
from ._system import check_worker_memory
from ._worker_setup import FAILURE_LOGGERS, not_a_reported_failure

__all__ = ["ClusterOptions", "connect", "local_cluster", "worker_blas_threads"]

#: the fields of :class:`ClusterOptions` that only :func:`local_cluster` uses
_LOCAL_ONLY = ("n_workers", "threads_per_worker", "memory_limit", "processes", "dashboard")


@dataclasses.dataclass(frozen=True)
class ClusterOptions:
    """How a dkrr job reaches Dask: runtime knobs, apart from model hyperparameters.

    The first five fields shape a new LocalCluster and are used by :func:`local_cluster`
    only (:func:`connect` ignores them in an options object and refuses them as keyword
    arguments); the others serve both.

    Parameters
    ----------
    n_workers : int, default=None
        LocalCluster workers (``None``: distributed's choice from the CPU count).
    threads_per_worker : int, default=1
        Threads per LocalCluster worker. BLAS stays at one thread per worker thread.
    memory_limit : str, float or int, default="auto"
        Memory limit per LocalCluster worker (``"2GB"``, bytes, or ``"auto"``).
    processes : bool, default=True
        Run LocalCluster workers in separate processes (``False``: threads of this
        process, with BLAS limited to one thread while the block runs).
    dashboard : bool, default=True
        Start the LocalCluster dashboard on a free port of 127.0.0.1.
    timeout : float, default=30.0
        Seconds to wait for the scheduler before
        :class:`~dkrr.errors.SchedulerUnreachableError`.
    security : distributed.security.Security, default=None
        TLS settings; mutually exclusive with the three ``tls_*`` files.
    tls_ca_file, tls_cert, tls_key : str or path-like, default=None
        CA certificate, client certificate and client key (PEM). For :func:`connect` to a
        ``tls://`` scheduler; when neither these nor ``security`` are given, the
        ``distributed.comm.tls.*`` Dask configuration is used if it names a CA and a
        client certificate. With :func:`local_cluster` they switch the new cluster to
        TLS, the same files then serving scheduler, workers and client.
    quiet : bool, default=False
        Do not print the line naming the cluster and its dashboard link.
    stream : file-like, default=None
        Where that line is printed (``None``: ``sys.stderr`` at call time).

    Raises
    ------
    InvalidParameterError
        If ``timeout`` is not a positive number, ``n_workers`` or ``threads_per_worker``
        is not a positive integer, or both ``security`` and ``tls_*`` files are given.

    Examples
    --------
    >>> from dkrr.cluster import ClusterOptions
    >>> options = ClusterOptions(n_workers=2, memory_limit="2GB", timeout=10)
    >>> options.timeout, options.replace(quiet=True).quiet
    (10.0, True)
    """

    n_workers: int | None = None
    threads_per_worker: int = 1
    memory_limit: Any = "auto"
    processes: bool = True
    dashboard: bool = True
    timeout: float = 30.0
    security: Any = None
    tls_ca_file: Any = None
    tls_cert: Any = None
    tls_key: Any = None
    quiet: bool = False
    stream: Any = None

    def __post_init__(self):
        timeout = self.timeout
        if timeout is None or not float(timeout) > 0:
            raise InvalidParameterError(f"timeout must be a positive number of seconds, got {timeout!r}.")
        object.__setattr__(self, "timeout", float(timeout))
        if self.security is not None and any(f is not None for f in (self.tls_ca_file, self.tls_cert, self.tls_key)):
            raise InvalidParameterError(
                "Pass either security=Security(...) or the tls_ca_file/tls_cert/tls_key files, not both."
            )
        for name in ("n_workers", "threads_per_worker"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InvalidParameterError(f"{name} must be a positive integer, got {value!r}.")

    def replace(self, **changes):
        """A copy with ``changes`` applied (and checked).

        Raises
        ------
        InvalidParameterError
            If a name is not a field of :class:`ClusterOptions`, or a value is invalid.
        """
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise InvalidParameterError(
                f"Unknown cluster option(s) {', '.join(unknown)}: the options are "
                f"{', '.join(f.name for f in dataclasses.fields(self))}."
            )
        return dataclasses.replace(self, **changes)


def _options(options, overrides, where):
    if options is None:
        options = ClusterOptions()
    elif not isinstance(options, ClusterOptions):
        raise InvalidParameterError(
            f"options must be a dkrr.cluster.ClusterOptions, got {type(options).__name__}: "
            "pass ClusterOptions(...) or the options as keyword arguments."
        )
    if where == "connect":
        local = sorted(set(overrides) & set(_LOCAL_ONLY))
        if local:
            raise InvalidParameterError(
                f"connect() got {', '.join(local)}, which only shape a new LocalCluster: an "
                "existing scheduler's workers are sized where they are started (see "
                "cluster/README.md); use local_cluster(...) to start a cluster here."
            )
    options = options.replace(**overrides) if overrides else options
    if options.security is not None:
        security = options.security
    else:
        security = make_security(options.tls_ca_file, options.tls_cert, options.tls_key)
    stream = sys.stderr if options.stream is None else options.stream
    return options, security, stream


def _is_main_guard(node) -> bool:
    """Whether ``node`` is ``if __name__ == "__main__":`` (either operand order)."""
    import ast

    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(n, ast.Name) and n.id == "__name__" for n in sides)
            and any(isinstance(n, ast.Constant) and n.value == "__main__" for n in sides))


def _guarded(path, line) -> bool:
    """Whether ``line`` of the Python file ``path`` lies in the body of a top-level
    ``if __name__ == "__main__":`` block (``True`` when the file cannot be read)."""
    import ast

    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return True
    return any(_is_main_guard(node) and node.body[0].lineno <= line <= node.body[-1].end_lineno
               for node in tree.body)


def _check_main_guard(options) -> None:
    """Refuse to start worker processes from a script's unguarded top-level code.

    distributed starts LocalCluster workers with multiprocessing's ``spawn`` (or
    ``forkserver``) method: each worker process first runs the main script again as the
    module ``__mp_main__``, so that code outside ``if __name__ == "__main__":`` runs once
    more in every worker (a fit, a ``save_model`` that finds its output, another
    LocalCluster) and the worker fails to start ("Nanny failed to start"). Scripts run
    as ``python -m package`` (a ``__main__.py``), interactive sessions and notebooks are
    not run again; nor is anything with ``processes=False`` or the ``fork`` method.
    """
    import dask

    if not options.processes:
        return
    if dask.config.get("distributed.worker.multiprocessing-method", "spawn") == "fork":
        return
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>"
                                     and frame.f_globals.get("__name__") in ("__main__", "__mp_main__")):
        frame = frame.f_back
    if frame is None:
        return
    path = frame.f_globals.get("__file__")
    if frame.f_globals["__name__"] == "__main__":
        # what spawn runs again: the file of sys.modules["__main__"], unless it is a
        # package's __main__.py (python -m package) or IPython's launcher
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if (main is None or frame.f_globals is not vars(main) or path is None
                or (spec is not None and spec.name.rsplit(".", 1)[-1] == "__main__")
                or os.path.splitext(os.path.basename(path))[0] == "ipython"
                or _guarded(path, frame.f_lineno)):
            return
    # else: a worker process is running the script again (it did not stop above)
    raise MainGuardError(
        f"local_cluster() is called from the top-level code of the script {path} (line "
        f"{frame.f_lineno}); its LocalCluster worker processes import that script and "
        "would run that code again. Put the script's work under "
        "`if __name__ == \"__main__\":` (or pass processes=False)."
    )


@contextmanager
def _signals_deferred(processes: bool = True):
    """Hold SIGINT and SIGTERM while the block runs (in the main thread), then deliver
    them to the handlers in force before it.

    A LocalCluster interrupted half-way through its start leaves a cluster object that
    distributed's exit handler cannot close (``AssertionError: Status.init`` at exit, and
    ``Nanny failed to start`` tracebacks); deferring the signal lets the start finish, the
    caller's cleanup close the cluster, and Ctrl-C / SIGTERM then act as usual.
    Yields a list that holds the signals received while deferred.

    SIGINT is also blocked in this thread meanwhile (POSIX): the threads and worker
    processes started inside inherit the mask, so a terminal's Ctrl-C, which reaches the
    whole process group, no longer interrupts a worker process in its imports, before its
    preload (``dkrr._worker_setup``) can ignore it (each printed a ``KeyboardInterrupt``
    traceback). Here the signal waits, pending, for the unblocking; distributed stops its
    workers with SIGTERM, which stays unblocked. Only with worker `processes`.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    received: list[int] = []
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, lambda n, f: received.append(n))
    mask = None
    if processes and hasattr(signal, "pthread_sigmask"):
        from multiprocessing import resource_tracker

        # its start unblocks SIGINT in the thread that starts it (an IO loop's, whose
        # worker processes then took it): started here, before the block, it is not again
        resource_tracker.ensure_running()
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield received
    finally:
        if mask is not None:  # a pending SIGINT arrives now, to the handler above: signal.signal
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # runs pending handlers first
        for signum, handler in previous.items():
            signal.signal(signum, handler)


#: the loggers that report a worker process whose start was interrupted
_START_LOGGERS = ("distributed.nanny", "distributed.core", "distributed.deploy.spec",
                  "distributed.process", "distributed.worker")


@contextmanager
def _log_filter(names, keep):
    """Add the filter ``keep`` to the loggers ``names`` while the block runs."""
    import logging

    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addFilter(keep)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(keep)


def _redeliver(received) -> None:
    """Deliver the first signal held by :func:`_signals_deferred` to its handler now."""
    import signal

    if received:
        signal.raise_signal(received[0])


@contextmanager
def local_cluster(options=None, **overrides):
    """Start a :class:`distributed.LocalCluster` on 127.0.0.1 and yield a client of it.

    Every socket is bound to 127.0.0.1: with ``processes=False`` and no TLS the workers
    talk over ``inproc://`` and only the HTTP servers listen. Cluster and client are
    closed when the block ends.

    Parameters
    ----------
    options : ClusterOptions, default=None
        ``None``: the defaults of :class:`ClusterOptions`.
    **overrides
        Fields of :class:`ClusterOptions` that replace those of ``options``.

    Yields
    ------
    client : distributed.Client

    Raises
    ------
    InvalidParameterError
        If an option is invalid (see :class:`ClusterOptions`), a TLS file is missing,
        LocalCluster refuses its arguments (``memory_limit="lots"``), or its workers' memory
        limit is below what a worker needs to run dkrr's tasks (about 375 MiB: a worker
        holds about 300 MiB with dkrr's libraries loaded, and is paused at 80% of its
        limit); the cluster is closed again.
    MainGuardError
        If it is called, with worker processes, from a script's top-level code outside
        ``if __name__ == "__main__":``: the worker processes import the script and would
        run that code again.

    Examples
    --------
    >>> import dask.array as da
    >>> from dkrr.cluster import local_cluster
    >>> with local_cluster(n_workers=1, processes=False, dashboard=False, quiet=True) as client:
    ...     float(da.ones(10, chunks=5).sum().compute())
    10.0
    """
    from distributed import Client, LocalCluster

    options, security, stream = _options(options, overrides, "local_cluster")
    _check_main_guard(options)
    with contextlib.ExitStack() as stack:
        kwargs = {}
        if security is not None:
            security = local_security(security)
            kwargs.update(protocol="tls://", security=security)
        if options.processes or security is not None:
            kwargs["host"] = "127.0.0.1"
        # else: in-process workers talk over inproc://, no network socket at all.
        if not options.processes:  # the preload's settings, for this process's workers
            stack.enter_context(limit_blas_threads(1))
            stack.enter_context(_log_filter(FAILURE_LOGGERS, not_a_reported_failure))
        try:
            # Ctrl-C / SIGTERM during the start are held until the cluster and the client
            # are up, then delivered (the ExitStack closes both before the error leaves)
            start = stack.enter_context(contextlib.ExitStack())
            held = start.enter_context(_signals_deferred(bool(options.processes)))
            # a Ctrl-C at a terminal also reaches the workers being started: their start
            # then fails, which is the interruption, not news (no nanny tracebacks)
            start.enter_context(_log_filter(_START_LOGGERS, lambda record: not held))
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=options.n_workers,
                    threads_per_worker=options.threads_per_worker,
                    memory_limit=options.memory_limit,
                    processes=options.processes,
                    # The scheduler's HTTP server (/health, /metrics) always runs; keep
                    # it on a free port of 127.0.0.1 and add the dashboard on request.
                    dashboard_address="127.0.0.1:0",
                    scheduler_kwargs={"dashboard": bool(options.dashboard)},
                    # Same for the workers' HTTP servers (else 0.0.0.0 when inproc).
                    worker_dashboard_address="127.0.0.1:0",
                    # worker processes ignore a terminal's Ctrl-C: this process handles it
                    **({"preload": ["dkrr._worker_setup"]} if options.processes else {}),
                    **kwargs,
                )
            )
        except Exception as exc:
            if held:  # interrupted while the workers started: an interruption, not an error
                raise KeyboardInterrupt from None
            if isinstance(exc, (TypeError, ValueError)):
                raise InvalidParameterError(f"Could not start a LocalCluster: {exc}") from exc
            raise
        client = stack.enter_context(Client(cluster, timeout=options.timeout, security=security))
        start.close()
        _redeliver(held)
        check_worker_memory(client, options.memory_limit)
        if not options.quiet:
            link = None
            if options.dashboard:
                port = client.scheduler_info()["services"].get("dashboard")
                link = None if port is None else f"http://127.0.0.1:{port}/status"
            say_cluster(stream, link, f"started a LocalCluster at {cluster.scheduler_address}", client)
        yield client


@contextmanager
def connect(address_or_scheduler_file, options=None, **overrides):
    """Yield a :class:`distributed.Client` of a scheduler that is already running.

    Before ``distributed`` reads from the address, a probe with bounded reads checks that
    a Dask scheduler answers there (:mod:`dkrr._scheduler_probe`), then the handshake is
    completed within ``timeout``. Only the client is closed when the block ends; the
    cluster keeps running.

    Parameters
    ----------
    address_or_scheduler_file : str or path-like
        ``"tcp://host:8786"``, ``"tls://host:8786"``, ``"host:8786"`` (Dask's configured
        ``distributed.comm.default-scheme``, tcp unless set), or a scheduler JSON file
        (``dask scheduler --scheduler-file``; ``cluster/local/cluster.py`` writes one).
    options : ClusterOptions, default=None
        ``None``: the defaults. Its LocalCluster fields (``n_workers`` ...) are ignored.
    **overrides
        Fields of :class:`ClusterOptions` that replace those of ``options``: ``timeout``,
        ``security`` or ``tls_ca_file``/``tls_cert``/``tls_key``, ``quiet``, ``stream``.

    Yields
    ------
    client : distributed.Client

    Raises
    ------
    SchedulerUnreachableError
        If the scheduler does not answer within ``timeout`` seconds, or the address is not
        a Dask scheduler. The message says what went wrong: DNS, connection refused, no
        answer, TLS handshake, or not a Dask scheduler (with the bytes it sent, e.g. an
        SSH banner or an HTTP page); also a missing or invalid scheduler file.
    InvalidParameterError
        If the address scheme is not a Dask one (``http://``, ``ssh://``, ...), a
        ``tls://`` address is given without certificates, certificates with a ``tcp://``
        address, a LocalCluster option is passed, or an option is invalid.

    Warns
    -----
    WorkerVersionWarning
        If workers connected now run another dkrr than this process (other sources, even
        under the same version string) or cannot import it.

    Examples
    --------
    >>> from distributed import LocalCluster
    >>> from dkrr.cluster import connect
    >>> with LocalCluster(n_workers=1, processes=False, protocol="tcp://", host="127.0.0.1",
    ...                   dashboard_address="127.0.0.1:0") as cluster:
    ...     with connect(cluster.scheduler_address, timeout=10, quiet=True) as client:
    ...         client.submit(sum, [1, 2, 3]).result()
    6

    A mutual-TLS cluster (``cluster/tls/``) or a scheduler file:

    >>> with connect("tls://10.0.0.5:8786", tls_ca_file="ca.pem", tls_cert="client.pem",
    ...              tls_key="client-key.pem") as client:  # doctest: +SKIP
    ...     ...
    >>> with connect("run/scheduler.json") as client:  # doctest: +SKIP
    ...     ...
    """
    options, security, stream = _options(options, overrides, "connect")
    client, address = open_client(address_or_scheduler_file, security, options.timeout)
    with client:
        check_workers_dkrr(client, address)
        if not options.quiet:
            say_cluster(stream, dashboard_link(client), f"connected to the scheduler at {address}", client)
        yield client
