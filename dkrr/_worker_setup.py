"""Worker-process set-up of the LocalClusters dkrr starts (a distributed ``preload``).

A Ctrl-C at a terminal signals the whole foreground process group: the command that
started the LocalCluster *and* its worker processes. The command stops the work and
closes the cluster (exit 130, nothing half-written); the workers must not also stop on
their own, each printing a ``KeyboardInterrupt`` traceback. So each worker ignores
SIGINT from the moment its preloads run (a Ctrl-C while a worker still imports its
libraries, in the first second of the start, can still end that worker with a traceback);
the nanny stops it at the cluster's close. A worker whose heartbeat finds the scheduler
closed is being shut down with the cluster: that record (an ERROR with a traceback) is
dropped.
"""

from __future__ import annotations

import logging
import signal
import threading


def _not_a_closing_heartbeat(record) -> bool:
    return not str(record.msg).startswith("Failed to communicate with scheduler during heartbeat")


def dask_setup(worker) -> None:  # noqa: ARG001 - the preload protocol passes the worker
    """Called by distributed in the worker process when the worker starts."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger("distributed.worker").addFilter(_not_a_closing_heartbeat)
