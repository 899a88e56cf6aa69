"""Worker-process set-up of the LocalClusters dkrr starts (a distributed ``preload``).

A Ctrl-C at a terminal signals the whole foreground process group: the command that
started the LocalCluster *and* its worker processes. The command stops the work and
closes the cluster (exit 130, nothing half-written); the workers must not also stop on
their own, each printing a ``KeyboardInterrupt`` traceback. So each worker takes SIGINT
only as news from the moment its preloads run (before, while it imports its libraries,
it inherits SIGINT blocked from dkrr's cluster start, which this preload unblocks);
the nanny stops it at the cluster's close. From that signal on the worker's log handlers
drop every record (:func:`_quiet_once_interrupted`): the command is closing the cluster, and
a worker then logs its peers' closing connections, e.g. "failed during get data" with a
``CommClosedError`` traceback when a peer that was fetching a block from it closes first
(seen once in the full suite under distributed 2024.9.1). A worker whose heartbeat finds the scheduler
closed is being shut down with the cluster: that record (an ERROR with a traceback) is
dropped, and so is aiohttp's "Unclosed client session" of an object store's client when
the worker process ends (:func:`drop_unclosed_session`). A process that ends while Zarr's
I/O thread is still busy (a chunk read of a task cut short) lets that thread finish first
(:func:`let_zarr_io_finish_at_exit`), where Zarr's own exit handler gives it 0.2 s and then
prints a ``RuntimeError`` traceback.

A task of dkrr's that raises one of dkrr's own errors (a corrupted chunk's
:class:`~dkrr.errors.StoreError`, a block with NaN...) fails the computation, and the caller
gets that error with its message: the command prints it as its one error line. The worker's
"Compute Failed" record of it (an ERROR with the task, the error again and a traceback of
dkrr's internals) is dropped (:func:`not_a_reported_failure`); any other exception, a bug,
is still logged with its traceback. distributed's warning that an instruction "ended with
CancelledError" is dropped too: distributed says it happens only in the worker's close, and
the cluster is closing after the failure.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import signal
import sys
import threading
import time

#: seconds a process that is ending waits for Zarr's I/O thread (Zarr's own handler: 0.2)
ZARR_EXIT_WAIT_S = 10.0
_REGISTERED: list[bool] = []


async def _cancel_pending() -> None:
    """Cancel every other task of the running loop and wait for them to end."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _finish_zarr_io(timeout: float = ZARR_EXIT_WAIT_S) -> None:
    """Cancel the reads still pending on Zarr's event loop, stop the loop and wait up to
    ``timeout`` in all for its thread to end, so that Zarr's exit handler
    (``zarr.core.sync.cleanup_resources``, which follows: exit handlers run last registered
    first) finds it stopped. Zarr keeps its loop and thread in one-element lists of that
    module; where a Zarr release keeps them otherwise, nothing is done.

    Pending reads are those of a read that failed: Zarr reads a slice's chunks as
    concurrent tasks and returns the first error, leaving the others to go on (an object
    store that went away: each retries its request). Left pending when the loop closes,
    each was destroyed with a "Task was destroyed but it is pending!" line and a traceback
    (1,124 lines of stderr before ``dkrr predict``'s one error line, found by the slow
    suite's object store that dies mid-run); cancelled, each ends in its own task."""
    sync = sys.modules.get("zarr.core.sync")
    loop = (getattr(sync, "loop", None) or [None])[0]
    thread = (getattr(sync, "iothread", None) or [None])[0]
    if loop is None or thread is None or not thread.is_alive() or loop.is_closed():
        return
    deadline = time.monotonic() + timeout
    try:
        asyncio.run_coroutine_threadsafe(_cancel_pending(), loop).result(timeout)
    except Exception:  # noqa: BLE001 - a loop that cannot cancel is stopped as before
        pass
    try:
        loop.call_soon_threadsafe(loop.stop)
    except RuntimeError:  # closed meanwhile
        return
    thread.join(max(0.0, deadline - time.monotonic()))


def let_zarr_io_finish_at_exit() -> None:
    """Register :func:`_finish_zarr_io` to run at this process's exit before Zarr's own
    exit handler (Zarr is imported first, so that its handler is registered before this
    one); once per process. Zarr's handler waits 0.2 s for its I/O thread and then closes
    the loop under it, which raises "Cannot close a running event loop" (a traceback on
    stderr) when a read is still running: at a Ctrl-C on a loaded machine it was."""
    if _REGISTERED:
        return
    try:
        import zarr.core.sync  # noqa: F401  (its exit handler is registered at import)
    except ImportError:  # pragma: no cover - zarr is a dependency
        return
    atexit.register(_finish_zarr_io)
    _REGISTERED.append(True)


#: the signals this worker process received (SIGINT: the terminal's Ctrl-C reached the
#: command's whole process group)
_INTERRUPTED: list[int] = []


def _note_interrupt(signum, frame) -> None:  # noqa: ARG001 - a signal handler's signature
    """SIGINT's handler in a worker: record it, stop nothing (the command closes the cluster)."""
    _INTERRUPTED.append(signum)


def _quiet_once_interrupted(record) -> bool:
    """Log-handler filter: nothing once this worker process has received SIGINT."""
    return not _INTERRUPTED


def _not_a_closing_heartbeat(record) -> bool:
    return not str(record.msg).startswith("Failed to communicate with scheduler during heartbeat")


def drop_unclosed_session(record) -> bool:
    """Logging filter: hide aiohttp's "Unclosed client session" of an object store's client.

    Zarr reads a URL through an fsspec filesystem (s3fs, gcsfs...) created on Zarr's own
    event loop; nothing closes its HTTP session before the process exits, and aiohttp then
    logs "Unclosed client session" through asyncio when it is collected. The process is
    ending and its sockets close with it: the lines say nothing to the user. (Used by the
    command too, for its own process.)
    """
    return not str(record.msg).startswith(("Unclosed client session", "Unclosed connector"))


#: the loggers of a worker's failed task and of its closing instructions
FAILURE_LOGGERS = ("distributed.worker", "distributed.worker.state_machine")
#: the beginning of the names of the tasks dkrr builds (``dkrr-statistics_block-<token>``...)
_DKRR_TASK = "dkrr-"
_ERROR_NAMES: list[frozenset] = []


def _dkrr_error_names() -> frozenset:
    """Names of :class:`~dkrr.errors.DkrrError` and its subclasses (imported once)."""
    if not _ERROR_NAMES:
        from dkrr.errors import DkrrError

        names, todo = set(), [DkrrError]
        while todo:
            cls = todo.pop()
            names.add(cls.__name__)
            todo.extend(cls.__subclasses__())
        _ERROR_NAMES.append(frozenset(names))
    return _ERROR_NAMES[0]


def _logged_argument(msg: str, label: str, args: tuple):
    """The argument of the line of ``msg`` that starts with ``label`` (its ``%`` placeholder's
    position among the lines that hold one), or None."""
    lines = [line for line in msg.splitlines() if "%" in line]
    index = next((i for i, line in enumerate(lines) if line.startswith(label)), None)
    return None if index is None or index >= len(args) else args[index]


def not_a_reported_failure(record) -> bool:
    """Logging filter: drop distributed's "Compute Failed" record of a dkrr task whose
    exception is one of dkrr's errors (module docstring), and its "Async instruction ...
    ended with CancelledError" warning of a closing worker.

    distributed logs "Compute Failed" with one ``%`` placeholder per line: ``Key:`` the
    task's key, ``Exception:`` ``repr(exception)`` (other lines differ between releases:
    2024.9.1 also logs the function and its arguments); a record without both is kept.
    """
    msg = str(record.msg)
    if msg.startswith("Async instruction for") and msg.endswith("ended with CancelledError"):
        return False
    if not msg.startswith("Compute Failed"):
        return True
    args = record.args if isinstance(record.args, tuple) else ()
    key, exception = _logged_argument(msg, "Key:", args), _logged_argument(msg, "Exception:", args)
    if key is None or exception is None:
        return True
    return not (_DKRR_TASK in str(key) and str(exception).split("(", 1)[0] in _dkrr_error_names())


def dask_setup(worker) -> None:  # noqa: ARG001 - the preload protocol passes the worker
    """Called by distributed in the worker process when the worker starts."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _note_interrupt)
        if hasattr(signal, "pthread_sigmask"):  # the mask of dkrr's cluster start (cluster.py:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # _signals_deferred): news now
    # on the handlers, not the loggers: a logger's filters do not see its children's records
    # (distributed.worker.state_machine, distributed.comm...), a handler's see them all
    for logger in (logging.getLogger("distributed"), logging.getLogger()):
        for handler in logger.handlers:
            if _quiet_once_interrupted not in handler.filters:
                handler.addFilter(_quiet_once_interrupted)
    logging.getLogger("distributed.worker").addFilter(_not_a_closing_heartbeat)
    for name in FAILURE_LOGGERS:
        logging.getLogger(name).addFilter(not_a_reported_failure)
    logging.getLogger("asyncio").addFilter(drop_unclosed_session)
    let_zarr_io_finish_at_exit()
