"""What a failure of the cluster means for dkrr's step, said where it is raised.

distributed's ``KilledWorker`` (every worker that ran a task died) and a task cancelled
because this process lost its scheduler reach the user as distributed raised them, with a
note (PEP 678) naming dkrr's step and the fix (:func:`cluster_failures_named`, the context
of every compute on a Client, which also watches for a scheduler without workers:
:mod:`dkrr._watch`). :func:`dkrr.cli.main` prints the note as the command's error.
"""

from __future__ import annotations

import contextlib
import sys

from ._system import distributed_client
from ._watch import workers_watched

__all__ = ["cluster_failures_named"]


def _workers_memory(client) -> str:
    """The workers' memory limits and their processes' memory now, from the scheduler
    (``""`` when it does not answer). The dead workers' nannies are restarting them: up
    to 15 s are given for one to be back (0.7-2.7 s measured on an idle machine, more
    under load)."""
    from ._system import WORKER_BASELINE_BYTES, format_bytes, scheduler_workers

    try:
        client.wait_for_workers(1, timeout=15)
        workers = scheduler_workers(client)
        limits = sorted({int(w.get("memory_limit") or 0) for w in workers})
        used = [int(w["metrics"]["memory"]) for w in workers]
    except Exception:  # the cluster may be going down: the note is said without it
        return ""
    if not workers:
        return ""
    held = f"{format_bytes(min(used))}-{format_bytes(max(used))}" if len(used) > 1 else format_bytes(used[0])
    if limits == [0]:
        return f" The workers have no memory limit and their processes hold {held} now."
    said = ", ".join(format_bytes(v) for v in limits if v) or "none"
    text = f" The workers' memory limit is {said} each and their processes hold {held} now."
    if limits[0] and limits[0] < 2 * max(max(used), WORKER_BASELINE_BYTES):
        text += (f" A worker that has run dkrr's tasks holds about {format_bytes(WORKER_BASELINE_BYTES)} before"
                 f" any data (its libraries and compiled kernels), so a limit of {format_bytes(limits[0])}"
                 " leaves its tasks little room: this is the likely cause.")
    return text


def _cluster_failure_note(exc: BaseException, label: str) -> str | None:
    """dkrr's note for an exception of the cluster's failure, or None for any other."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    if isinstance(exc, distributed.KilledWorker):
        client = distributed_client()
        return (
            f"dkrr: the Dask workers died while running {label!r}: task {exc.task!r} was tried on "
            f"{exc.allowed_failures + 1} worker(s) and each one died (a worker's nanny restarts it "
            "when its process passes 95% of its memory limit by default, distributed's "
            "worker.memory.terminate; the operating system kills it when the machine runs out of "
            "memory)." + ("" if client is None else _workers_memory(client)) + " Give each worker "
            + ("more memory (dkrr fit/predict/evaluate: --memory-limit, or fewer --workers; "
               "LocalCluster(memory_limit=...))" if client is None or client.cluster is not None else
               "more memory where the cluster is started (`dask worker --memory-limit`, "
               "`cluster/local/cluster.py start --memory-limit`)") + " or smaller row blocks (dkrr fit "
            "--chunk-rows; the dask array's chunks); the workers' log lines say why each one stopped."
        )
    if _lost_scheduler(exc):
        return (
            f"dkrr: this process lost its connection to the Dask scheduler while running {label!r} "
            "(the scheduler stopped, or the network to it failed, and distributed gave up "
            "reconnecting), so its tasks were cancelled. Check the scheduler and its workers (logs, "
            "`python cluster/local/cluster.py status --dir RUNDIR` for dkrr's local recipe) and run the "
            "command again once they are up: workers that lost their scheduler may have stopped (those of "
            "cluster/local/cluster.py do), then start the cluster again."
        )
    return None


#: distributed's exceptions of a client whose scheduler connection is gone (matched by name
#: in the class's ancestry: ``distributed.client.ClosedClientError`` once reconnection gave
#: up, ``distributed.comm.CommClosedError`` for a connection reset mid-call)
_LOST_SCHEDULER = frozenset({"ClosedClientError", "CommClosedError"})


def _lost_scheduler(exc: BaseException) -> bool:
    """Whether ``exc``, or an exception it was raised from, says this process lost its
    scheduler: a task cancelled with reason ``scheduler-connection-lost``, or one of
    :data:`_LOST_SCHEDULER` (a scheduler stopped mid-fit gave a 118-line traceback
    through them, found by a cluster probe)."""
    import concurrent.futures

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, concurrent.futures.CancelledError) and \
                "scheduler-connection-lost" in str(getattr(exc, "reason", None) or exc):
            return True
        if any(k.__name__ in _LOST_SCHEDULER and k.__module__.split(".")[0] == "distributed"
               for k in type(exc).__mro__):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@contextlib.contextmanager
def cluster_failures_named(label: str):
    """Add a note (PEP 678) that says what the cluster's failure means for dkrr's step
    ``label`` and what to do to distributed's ``KilledWorker`` (the workers that ran a task
    all died) and to a task cancelled because this process lost its scheduler: the
    exception stays the one a Dask user catches, and :func:`dkrr.cli.main` prints it with
    the note as the command's error instead of a traceback. Every other exception passes
    unchanged. While it runs, a scheduler without workers is said (:mod:`dkrr._watch`)."""
    try:
        with workers_watched(label):
            yield
    except Exception as exc:
        note = _cluster_failure_note(exc, label)
        if note is not None:
            exc.add_note(note)
        raise
