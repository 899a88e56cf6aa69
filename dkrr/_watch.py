"""A word when work on a cluster waits on a scheduler with no workers.

Tasks on a scheduler without workers wait until workers join: that is Dask's design (a
cluster may be scaling up), and dkrr keeps it. But a command that waits so says nothing:
a fit whose workers were all killed, or a scheduler started without workers, left a frozen
progress bar (or, with progress off or in a log, nothing at all) until it was killed. While
dkrr's work runs on a distributed Client (:func:`workers_watched`, entered by
:func:`dkrr._failures.cluster_failures_named`, the context of every compute on a Client),
a daemon thread asks the scheduler for its workers every :data:`POLL_SECONDS`; after
:data:`NO_WORKERS_NOTE_AFTER` seconds without any it prints a note on stderr naming the
step and what to do, again each time the wait doubles, and one more when workers join.
A scheduler that does not answer within :data:`ANSWER_SECONDS` is said too (a stopped or
overloaded scheduler). Nothing is cancelled: the work goes on when workers come.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

__all__ = ["ANSWER_SECONDS", "NO_WORKERS_NOTE_AFTER", "POLL_SECONDS", "workers_watched"]

#: seconds between two questions to the scheduler
POLL_SECONDS = 5.0
#: seconds without a worker (or without an answer) before the first note
NO_WORKERS_NOTE_AFTER = 30.0
#: seconds a question to the scheduler may take before the scheduler is said not to answer
ANSWER_SECONDS = 20.0

_DEPTH = [0]  # nested watched steps share the outermost one's thread
_LOCK = threading.Lock()


def _note(text: str) -> None:
    try:
        print(f"\ndkrr: note: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed: nothing to say it on
        pass


def _ask(client, out: dict) -> None:
    from ._system import scheduler_workers

    try:
        out["workers"] = len(scheduler_workers(client))
    except Exception as exc:  # the cluster going down: its own error reaches the step
        out["error"] = exc


def _watch(client, label: str, stop: threading.Event) -> None:
    """The watching thread's loop (module docstring): one question to the scheduler at a
    time, each in a daemon thread of its own (a scheduler that never answers holds that
    thread, not this one)."""
    address = getattr(client.scheduler, "address", "the scheduler")
    since = None  # when the wait (no workers, or no answer) began
    next_note = NO_WORKERS_NOTE_AFTER
    said = False
    asker, out = None, {}
    while not stop.wait(POLL_SECONDS):
        if asker is None or not asker.is_alive():
            out = {}
            asker = threading.Thread(target=_ask, args=(client, out), daemon=True, name="dkrr-watch-ask")
            asker.start()
            asker.join(ANSWER_SECONDS)
        if stop.is_set() or "error" in out:  # done, or the cluster's own error reaches the step
            return
        silent = asker.is_alive()
        if not silent and out.get("workers"):
            if said:
                _note(f"the scheduler at {address} has {out['workers']} worker(s) again: {label!r} goes on")
            since, next_note, said = None, NO_WORKERS_NOTE_AFTER, False
            continue
        now = time.monotonic()
        since = (now - (ANSWER_SECONDS if silent else 0.0)) if since is None else since
        waited = now - since
        if waited < next_note:
            continue
        if silent:
            _note(f"the scheduler at {address} has not answered dkrr for {waited:.0f} s while it is {label!r}: it "
                  "may be stopped or overloaded; the work goes on when it answers (Ctrl-C stops the command)")
        else:
            _note(f"the scheduler at {address} has had no workers for {waited:.0f} s: {label!r} waits until "
                  "workers join (they died, or none were started); start workers for it (`dask worker "
                  f"{address}`), or stop the command with Ctrl-C")
        said = True
        next_note = 2 * waited


@contextlib.contextmanager
def workers_watched(label: str):
    """While the block runs on an active distributed Client, say on stderr when its
    scheduler has no workers, or does not answer, for :data:`NO_WORKERS_NOTE_AFTER`
    seconds (module docstring). Without a Client, or inside another watched block, it
    does nothing."""
    from ._system import distributed_client

    client = distributed_client()
    with _LOCK:
        outer = _DEPTH[0] == 0
        _DEPTH[0] += 1
    stop = threading.Event()
    thread = None
    if outer and client is not None:
        thread = threading.Thread(target=_watch, args=(client, label, stop), daemon=True, name="dkrr-watch")
        thread.start()
    try:
        yield
    finally:
        stop.set()
        with _LOCK:
            _DEPTH[0] -= 1
