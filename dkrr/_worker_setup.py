"""Worker-process set-up of the LocalClusters dkrr starts (a distributed ``preload``).

A Ctrl-C at a terminal signals the whole foreground process group: the command that
started the LocalCluster *and* its worker processes. The command stops the work and
closes the cluster (exit 130, nothing half-written); the workers must not also stop on
their own, each printing a ``KeyboardInterrupt`` traceback. So each worker ignores
SIGINT from the moment its preloads run (a Ctrl-C while a worker still imports its
libraries, in the first second of the start, can still end that worker with a traceback);
the nanny stops it at the cluster's close. A worker whose heartbeat finds the scheduler
closed is being shut down with the cluster: that record (an ERROR with a traceback) is
dropped, and so is aiohttp's "Unclosed client session" of an object store's client when
the worker process ends (:func:`drop_unclosed_session`).
"""

from __future__ import annotations

import logging
import signal
import threading


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


def dask_setup(worker) -> None:  # noqa: ARG001 - the preload protocol passes the worker
    """Called by distributed in the worker process when the worker starts."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker").addFilter(_not_a_closing_heartbeat)
    logging.getLogger("asyncio").addFilter(drop_unclosed_session)
