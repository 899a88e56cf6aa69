"""The rows of dkrr's inputs: Zarr rows read inside the step that consumes them, in-memory
data sent to a cluster once, rows gathered by slice.

A reduction step needs one row block of each input. When that block is a task of its own
(a Zarr read), the scheduler runs the reads as root tasks whenever a thread is free, ahead
of the chains that consume the blocks, and the blocks wait in worker memory (measured:
about 20 blocks of 32 MiB ahead on 2 workers reading a Zarr store). So the arrays dkrr
reads from Zarr itself (its own stores, :func:`dkrr.io.open_dataset`, and zarr arrays
given to an estimator) are dask arrays over a :class:`RowReader`, made by
:func:`row_array` and remembered here (by object: a persisted copy is another object).
:func:`~dkrr.linalg.reduce_row_blocks` passes such an input's reader, one graph key that
every step shares, instead of depending on its block tasks, and each step reads its rows
by slice when it runs: a block exists only while its step runs.

The row-wise operations dkrr applies to an input before a pass (the dtype cast, the
target's shift, standardisation, a new row chunking) go through :func:`map_rows`,
:func:`astype_rows` and :func:`rechunk_rows`: on a reader-backed array they give a new
reader-backed array whose reader applies them after the read; on any other dask array they
are the ordinary dask operations, and its blocks stay dependencies of the steps (in-memory
chunks, persisted results, a user's dask pipeline). Nothing here reads or rewrites a dask
graph: the arrays are made with ``dask.array.from_array`` and the reduction refers to the
other inputs' blocks through ``__dask_keys__()``.

In-memory data (numpy X and y given to a fit) becomes a dask array by :func:`local_array`,
also remembered: the first reduction that reads it on a distributed Client persists it on
the workers (:func:`held_on_workers`, after the fit's checks, one graph for all such inputs
of the pass) and every later pass names the held blocks, instead of carrying the data in
each pass's graph. The operations above keep that mark too (the derived array is persisted
on its own first pass).

The steps that draw rows of X (Nyström landmarks, the bandwidth rule's sample) draw among
the rows a :class:`RowPool` holds: every row, or with sample weights the rows of positive
weight, so that a row of weight 0 is never drawn and the draws are those of the data
without it.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

__all__ = ["RowPool", "RowReader", "astype_rows", "gather_rows", "held_on_workers", "local_array", "map_rows",
           "rechunk_rows", "row_array", "row_reader", "row_pool", "zarr_rows"]

#: id(array) -> (weak reference to the array, its reader), for the arrays row_array made
_READERS: dict[int, tuple[weakref.ref, RowReader]] = {}
#: id(array) -> (weak reference to the array, [its copy persisted on the workers or None]),
#: for the arrays of in-memory data (local_array and what the operations here derive)
_LOCAL: dict[int, tuple[weakref.ref, list]] = {}


def _remember(table: dict, arr, value) -> None:
    """``table[id(arr)] = (weakref(arr), value)`` until ``arr`` is collected."""
    key = id(arr)
    table[key] = (weakref.ref(arr), value)
    weakref.finalize(arr, table.pop, key, None)


def _lookup(table: dict, arr):
    entry = table.get(id(arr))
    return None if entry is None or entry[0]() is not arr else entry[1]


class RowReader:
    """Rows ``[start, stop)`` of an array-like ``source`` read by slice, with row-wise
    operations applied after the read.

    Parameters
    ----------
    source : array-like
        Anything with ``shape``, ``dtype`` and ``source[start:stop]`` (a Zarr array, the
        store reader of :mod:`dkrr.io._reader`). It is pickled into the graph once, so it
        must pickle to a handle (a path), not to its data.
    token : str
        Identity of the source's content (path and metadata): the dask key of the reader
        and of the arrays over it.
    ops : sequence of ``(fn, args)``
        ``block = fn(block, *args)`` in order after the read; each must be row-wise (row
        ``i`` of its output depends only on row ``i`` of its input) and keep the shape.
    dtype : dtype, optional
        dtype of the result (default the source's).
    """

    def __init__(self, source: Any, token: str, ops=(), dtype=None):
        self.source = source
        self.token = str(token)
        self.ops = tuple((fn, tuple(args)) for fn, args in ops)
        self.shape = tuple(int(s) for s in source.shape)
        self.ndim = len(self.shape)
        self.dtype = np.dtype(source.dtype if dtype is None else dtype)

    def then(self, fn: Callable, args=(), dtype=None) -> RowReader:
        """This reader with ``fn(block, *args)`` applied after its operations."""
        return RowReader(self.source, self.token, self.ops + ((fn, tuple(args)),),
                         self.dtype if dtype is None else dtype)

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)``, read now and transformed."""
        block = np.asarray(self.source[int(start):int(stop)])
        for fn, args in self.ops:
            block = fn(block, *args)
        return np.asarray(block, dtype=self.dtype)

    def __getitem__(self, key):
        """Any basic index (what ``dask.array.from_array`` asks for): whole rows read and
        transformed, then the index applied to them."""
        key = key if isinstance(key, tuple) else (key,)
        first, rest = key[0] if key else slice(None), key[1:]
        n = self.shape[0]
        if isinstance(first, slice):
            rng = range(*first.indices(n))
            if len(rng) == 0:
                block = self.rows(0, 0)
            else:
                lo, hi = min(rng[0], rng[-1]), max(rng[0], rng[-1]) + 1
                block = self.rows(lo, hi)[np.asarray(rng) - lo] if rng.step != 1 else self.rows(lo, hi)
            return block[(slice(None),) + rest]
        i = int(first) + (n if int(first) < 0 else 0)
        return self.rows(i, i + 1)[(0,) + rest]

    def __dask_tokenize__(self):
        from dask.base import tokenize

        return ("dkrr-row-reader", self.token, tokenize(self.ops), str(self.dtype))


def row_array(reader: RowReader, row_chunks):
    """A dask array over ``reader`` with these row chunks (a tuple of block lengths, or one
    length for all but the last; every other axis one block), whose row blocks a reduction
    reads inside its steps."""
    import dask.array as da
    from dask.base import tokenize

    n = reader.shape[0]
    if isinstance(row_chunks, (int, np.integer)):
        size = max(1, int(row_chunks))
        row_chunks = [size] * (n // size) + ([n % size] if n % size or not n else [])
    rows = tuple(int(c) for c in row_chunks)
    chunks = (rows,) + tuple((s,) for s in reader.shape[1:])
    arr = da.from_array(reader, chunks=chunks, name=f"dkrr-rows-{tokenize(reader, rows)}", asarray=True,
                        fancy=False, meta=np.empty((0,) * reader.ndim, dtype=reader.dtype))
    _remember(_READERS, arr, reader)
    return arr


def row_reader(a) -> RowReader | None:
    """The reader of an array that :func:`row_array` made, else None."""
    return _lookup(_READERS, a)


def local_array(values: np.ndarray, chunks):
    """``dask.array.from_array(values, chunks)`` of in-memory data, remembered so that a
    reduction on a distributed Client persists it once (:func:`held_on_workers`)."""
    import dask.array as da

    arr = da.from_array(values, chunks=chunks)
    _remember(_LOCAL, arr, [None])
    return arr


def _derived(a, out):
    """``out``, computed from ``a`` by a row-wise operation, keeps ``a``'s mark of in-memory data."""
    if _lookup(_LOCAL, a) is not None and out is not a:
        _remember(_LOCAL, out, [None])
    return out


def held_on_workers(arrays, client) -> list:
    """``arrays`` with each array of in-memory data replaced by its copy persisted on the
    workers of ``client`` (persisted now, in one ``Client.persist`` call, for those not yet
    held; reused by every later pass that reads the same array object). Without a Client
    the arrays as they are."""
    out = list(arrays)
    if client is None:
        return out
    todo = [i for i, a in enumerate(out) if (held := _lookup(_LOCAL, a)) is not None and held[0] is None]
    if todo:
        for i, p in zip(todo, client.persist([out[i] for i in todo])):
            _lookup(_LOCAL, out[i])[0] = p
    return [a if (held := _lookup(_LOCAL, a)) is None else held[0] for a in out]


def zarr_rows(z):
    """A zarr array given to dkrr as a reader-backed dask array chunked like its rows."""
    from dask.base import tokenize

    token = tokenize("zarr", str(z.store_path), z.metadata.to_dict())
    return row_array(RowReader(z, token), z.chunks[0])


def map_rows(a, fn: Callable, *args, dtype, name: str | None = None):
    """``fn(block, *args)`` on every row block of ``a`` (``fn`` row-wise, keeping the shape):
    inside the reader of a reader-backed array, else ``a.map_blocks`` (named ``name``)."""
    reader = row_reader(a)
    if reader is not None:
        return row_array(reader.then(fn, args, dtype), a.chunks[0])
    return _derived(a, a.map_blocks(fn, *args, dtype=dtype, meta=np.empty((0,) * a.ndim, dtype=dtype), name=name))


def _cast(block, dtype):
    return np.asarray(block, dtype=dtype)


def astype_rows(a, dtype):
    """``a.astype(dtype)``, kept reader-backed (see :func:`map_rows`)."""
    dtype = np.dtype(dtype)
    if dtype == a.dtype:
        return a
    reader = row_reader(a)
    if reader is not None:
        return row_array(reader.then(_cast, (dtype,), dtype), a.chunks[0])
    return _derived(a, a.astype(dtype))


def rechunk_rows(a, chunks):
    """``a.rechunk(chunks)``; a reader-backed array keeps its reader and takes the new row
    chunks (its other axes are one block already: a reader reads whole rows)."""
    out = a.rechunk(chunks)
    reader = row_reader(a)
    if reader is None:
        return _derived(a, out)
    return a if out.chunks[0] == a.chunks[0] else row_array(reader, out.chunks[0])


def _take(block, local):
    return block[local]


def gather_rows(X, idx, *, label: str = "gathering rows") -> np.ndarray:
    """Rows ``idx`` (sorted, distinct) of the row-chunked dask array ``X``, as numpy.

    One small task per row block that holds one of them keeps its rows (a basic slice of
    the block and ``map_blocks``): blocks without one are not read and only the rows
    travel. (Fancy indexing of a dask array fails with dask's array query planning.)
    """
    from ._progress import compute_limited

    idx = np.asarray(idx, dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(np.int64)
    rest = tuple((int(s),) for s in X.shape[1:])
    parts = []
    for i in np.unique(np.searchsorted(bounds, idx, side="right") - 1):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        local = idx[(idx >= lo) & (idx < hi)] - lo
        parts.append(X[lo:hi].map_blocks(_take, local, chunks=((len(local),),) + rest, dtype=X.dtype,
                                         meta=np.empty((0,) * X.ndim, dtype=X.dtype)))
    if not parts:
        return np.empty((0,) + X.shape[1:], dtype=X.dtype)
    return np.concatenate([np.asarray(p) for p in compute_limited(*parts, label=label)])


def _positive_count(block):
    """``[rows of positive weight, 1 if a weight is negative or not finite else 0]`` of a block."""
    w = np.asarray(block, dtype=np.float64)
    return np.array([np.count_nonzero(w > 0), int(not (w >= 0).all())], dtype=np.int64)  # NaN >= 0 is False


def _positive_at(block, ranks):
    """``[local indices, weights]`` of the ``ranks``-th rows of positive weight of a block
    (the indices as float64: exact, a block has fewer than 2^53 rows)."""
    w = np.asarray(block, dtype=np.float64)
    at = np.flatnonzero(w > 0)[ranks]
    return np.concatenate([at.astype(np.float64), w[at]])


class RowPool:
    """The rows a draw picks from: all ``n_rows`` rows, or only those of positive weight.

    A draw of ``size`` rows is ``ranks = rng.choice(pool.n, size, replace=False)`` (or any
    other draw of ranks in ``range(pool.n)``) and ``pool.take(ranks)``: the global row
    indices (and weights) of the ``ranks``-th rows of the pool, in the order of ``ranks``.
    Without weights ``pool.n`` is ``n_rows`` and a rank is its row, so the draws are
    those of an unweighted fit. With weights a rank counts only rows of positive weight,
    so the rows of weight 0 are never drawn, and X with such rows draws the same rows as X
    without them (docs/ALGORITHMS.md section 5, "Sample weights").

    Parameters
    ----------
    n_rows : int
        Rows of X.
    sample_weight : None, numpy array or dask array of shape (n_rows,)
        The weights. A dask array is read twice, blockwise: once for the count of positive
        weights per block (on the first use of :attr:`n`), then only the blocks that hold a
        drawn row.
    check : callable, optional
        ``check(block, block_index, row_offset)`` validates a block of weights (finite,
        ``>= 0``; it raises, naming the rows) and returns it as float64: a numpy array
        now; a dask array's count finds the blocks with a negative or non-finite weight,
        and the first is read again and checked, for the message.
    """

    def __init__(self, n_rows: int, sample_weight=None, check=None):
        self.n_rows = int(n_rows)
        if isinstance(sample_weight, np.ndarray) and check is not None:
            sample_weight = check(sample_weight, None, 0)
        self.weights = sample_weight
        self._check = check
        self._counts = None

    @property
    def weighted(self) -> bool:
        """Whether the pool has weights (a draw then skips the rows of weight 0)."""
        return self.weights is not None

    def _block_counts(self) -> np.ndarray:
        if self._counts is None:
            w = self.weights
            if isinstance(w, np.ndarray):
                self._counts = np.array([np.count_nonzero(w > 0)], dtype=np.int64)
            else:
                from ._progress import compute_limited

                w = self._held()
                blocks = w.map_blocks(_positive_count, chunks=((2,) * w.numblocks[0],), dtype=np.int64,
                                      meta=np.empty((0,), dtype=np.int64))
                counts, bad = np.asarray(compute_limited(blocks, label="counting rows of positive weight")[0]
                                         ).reshape(-1, 2).T
                if bad.any() and self._check is not None:
                    i = int(np.flatnonzero(bad)[0])
                    lo = int(sum(w.chunks[0][:i]))
                    block = compute_limited(w[lo:lo + w.chunks[0][i]], label="checking sample_weight")[0]
                    self._check(block, i, lo)  # raises, naming the row
                self._counts = counts
        return self._counts

    def _held(self):
        """The dask weights, or with a distributed Client their copy held on the workers
        when they are in-memory data (:func:`held_on_workers`: the fit's passes then name
        the same copy)."""
        from ._system import distributed_client

        return held_on_workers([self.weights], distributed_client())[0]

    @property
    def n(self) -> int:
        """Rows a draw may pick: ``n_rows``, or the rows of positive weight."""
        return self.n_rows if self.weights is None else int(self._block_counts().sum())

    def take(self, ranks) -> tuple[np.ndarray, np.ndarray | None]:
        """``(rows, weights)``: the global indices (int64) of the ``ranks``-th rows of the
        pool, in the order of ``ranks``, and their weights (None without weights)."""
        ranks = np.asarray(ranks, dtype=np.int64)
        w = self.weights
        if w is None:
            return ranks, None
        if isinstance(w, np.ndarray):
            at = np.flatnonzero(w > 0)[ranks]
            return at, np.asarray(w[at], dtype=np.float64)
        from ._progress import compute_limited

        counts = self._block_counts()
        w = self._held()
        starts = np.concatenate([[0], np.cumsum(counts)])
        row_starts = np.concatenate([[0], np.cumsum(w.chunks[0])]).astype(np.int64)
        block = np.searchsorted(starts, ranks, side="right") - 1
        order = np.argsort(ranks, kind="stable")
        parts, where = [], []
        for i in np.unique(block):
            sel = order[block[order] == i]  # the positions of this block's ranks, ascending
            lo, hi = int(row_starts[i]), int(row_starts[i + 1])
            local = ranks[sel] - starts[i]
            parts.append(w[lo:hi].map_blocks(_positive_at, local, chunks=((2 * len(local),),), dtype=np.float64,
                                             meta=np.empty((0,))))
            where.append((sel, lo))
        rows, weights = np.empty(len(ranks), dtype=np.int64), np.empty(len(ranks))
        for (sel, lo), got in zip(where, compute_limited(*parts, label="finding rows of positive weight")):
            rows[sel] = lo + got[:len(sel)].astype(np.int64)
            weights[sel] = got[len(sel):]
        return rows, weights


def row_pool(n_rows: int, sample_weight=None, check=None) -> RowPool:
    """The :class:`RowPool` of ``n_rows`` rows and their weights (array-like or a dask
    array of shape ``(n_rows,)``, refused otherwise; ``check`` as the pool's); ``sample_weight``
    may be a :class:`RowPool` already (returned as it is, so that its counts are computed
    once)."""
    from .errors import InputValidationError

    if isinstance(sample_weight, RowPool):
        return sample_weight
    if sample_weight is not None:
        if not hasattr(sample_weight, "dask"):
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != (n_rows,):
            raise InputValidationError(
                f"sample_weight has shape {sample_weight.shape} but X has {n_rows} rows; pass one "
                f"weight per row, shape ({n_rows},).")
    return RowPool(n_rows, sample_weight, check)
