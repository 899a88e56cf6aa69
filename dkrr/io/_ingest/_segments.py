"""Converting the parts of a large input in parallel: on a cluster's workers or in threads.

An input is cut into *segments*, each a run of whole Zarr chunks of rows: the segment
knows where its rows start in the store and, for CSV, the bytes and the first line it
covers. A task converts one segment and writes its chunks straight into the (temporary)
store, so no two tasks write the same chunk and no data passes through the client. The
tasks run on the workers of the active ``distributed`` client when there is one (they
must see the input and the output, as for ``dkrr predict``), else in a pool of threads
of this process (``dask.config`` ``num_workers``, by default one per core; pyarrow's
parser and Blosc release the GIL). One segment is converted here, in this thread.

A task returns a :class:`SegmentResult` rather than raising for bad data, and the results
are combined in file order (:class:`Combiner`), so the error reported is the one a
single pass would meet first whatever the number of workers: a parse error, or a
non-finite value unless missing cells come before it (those are gathered over the
whole input for one message). Once an error is certain the other tasks are cancelled
and waited for, so that nothing writes into the store when it is removed.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import dask
from dask.base import tokenize
from dask.system import CPU_COUNT

from ..._failures import cluster_failures_named
from ._writer import MissingRows

__all__ = ["Combiner", "Segment", "SegmentResult", "run_segments"]


@dataclass(frozen=True)
class Segment:
    """One part of an input: rows ``row .. row + rows`` of the store.

    CSV: the bytes ``start .. end`` of the file, whose first line is ``first_line``;
    Parquet: rows ``start .. end`` of the dataset. ``rows`` is None for an input
    converted in one piece whose length is unknown (compressed text, dropped rows): the
    arrays then grow as it is written.
    """

    index: int
    start: int
    end: int | None
    first_line: int
    row: int
    rows: int | None


@dataclass
class SegmentResult:
    """What a task found: rows written and dropped, the labels it coded (``(label,
    stored)`` in code order), missing cells, errors, and the bytes it read."""

    index: int
    rows: int = 0
    dropped: int = 0
    labels: list[tuple[str, bool]] | None = None
    missing: MissingRows | None = None
    error: Exception | None = None
    nonfinite: Exception | None = None
    nbytes: int = 0


class Combiner:
    """Combines segment results in file order and raises the first certain error."""

    def __init__(self, layout):
        self.missing = MissingRows(layout.src, layout.names, layout.where, layout.missing_hint)
        self.results: dict[int, SegmentResult] = {}
        self.done: list[SegmentResult] = []

    def add(self, result: SegmentResult) -> None:
        """Record a result; raise the error it settles (see the module docstring)."""
        self.results[result.index] = result
        while len(self.done) in self.results:
            r = self.results.pop(len(self.done))
            self.done.append(r)
            if r.error is not None:
                raise r.error
            if r.nonfinite is not None and not self.missing.count:
                raise r.nonfinite
            if r.missing is not None:
                self.missing.merge(r.missing)

    def finish(self) -> list[SegmentResult]:
        """The results in order; the missing cells' error if any were found."""
        if self.missing.count:
            raise self.missing.error()
        return self.done


def n_threads() -> int:
    """Threads of the pool when there is no cluster (dask's ``num_workers`` or the cores)."""
    return max(1, int(dask.config.get("num_workers", None) or CPU_COUNT))


def run_segments(
    convert: Callable[..., SegmentResult],
    args: tuple,
    segments: Iterable[Segment],
    combiner: Combiner,
    report: Callable[[int, int], None],
    *,
    parallel: bool,
) -> list[SegmentResult]:
    """Run ``convert(*args, segment, report, cancelled)`` for every segment and combine
    the results in order.

    ``report(rows, nbytes)`` is called in this thread as rows are written and bytes
    read (by the tasks of a thread pool, or per segment on a cluster). With `parallel`
    false the segments are converted one after the other here.
    """
    if not parallel:
        for seg in segments:
            combiner.add(convert(*args, seg, report, None))
        return combiner.finish()
    from ..._system import distributed_client

    client = distributed_client()
    if client is not None:
        return _on_cluster(client, convert, args, segments, combiner, report)
    return _in_threads(convert, args, segments, combiner, report)


def _in_threads(convert, args, segments, combiner, report):
    events: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()
    pool = concurrent.futures.ThreadPoolExecutor(n_threads(), thread_name_prefix="dkrr-ingest")
    pending: set = set()

    def drain_events():
        while True:
            try:
                rows, nbytes = events.get_nowait()
            except queue.Empty:
                return
            report(rows, nbytes)

    def collect(timeout):
        done, _ = concurrent.futures.wait(pending, timeout=timeout,
                                          return_when=concurrent.futures.FIRST_COMPLETED)
        drain_events()
        for future in done:
            pending.discard(future)
            combiner.add(future.result())

    ahead = 2 * n_threads()  # the scan stays this many segments ahead of the conversion
    try:
        for seg in segments:
            pending.add(pool.submit(convert, *args, seg,
                                    lambda r, b: events.put((r, b)), stop.is_set))
            collect(0)
            while len(pending) >= ahead:  # the file's pages are still cached when read again
                collect(0.1)
        while pending:
            collect(0.1)
        drain_events()
        return combiner.finish()
    finally:
        stop.set()  # running tasks stop at their next block; none writes after this returns
        pool.shutdown(wait=True, cancel_futures=True)


def _on_cluster(client, convert, args, segments, combiner, report):
    from distributed import as_completed

    name = f"dkrr-ingest-{tokenize(convert, args, object())}"
    futures = []
    try:
        ac = as_completed()
        for seg in segments:
            future = client.submit(convert, *args, seg, None, None, key=f"{name}-{seg.index}",
                                   pure=False, retries=0)
            futures.append(future)
            ac.add(future)
        for future in ac:
            with cluster_failures_named("converting the input"):
                result = future.result()
            report(result.rows, result.nbytes)
            combiner.add(result)
        return combiner.finish()
    except BaseException:
        from .._drain import drain_keys

        client.cancel(futures)
        drain_keys(client, {name})
        raise
