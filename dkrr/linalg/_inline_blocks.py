"""Row blocks read inside the step that consumes them.

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
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

__all__ = ["RowReader", "astype_rows", "map_rows", "rechunk_rows", "row_array", "row_reader", "zarr_rows"]

#: id(array) -> (weak reference to the array, its reader), for the arrays row_array made
_READERS: dict[int, tuple[weakref.ref, RowReader]] = {}


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
    key = id(arr)
    _READERS[key] = (weakref.ref(arr), reader)
    weakref.finalize(arr, _READERS.pop, key, None)
    return arr


def row_reader(a) -> RowReader | None:
    """The reader of an array that :func:`row_array` made, else None."""
    entry = _READERS.get(id(a))
    if entry is None or entry[0]() is not a:
        return None
    return entry[1]


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
    return a.map_blocks(fn, *args, dtype=dtype, meta=np.empty((0,) * a.ndim, dtype=dtype), name=name)


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
    return a.astype(dtype)


def rechunk_rows(a, chunks):
    """``a.rechunk(chunks)``; a reader-backed array keeps its reader and takes the new row
    chunks (its other axes are one block already: a reader reads whole rows)."""
    out = a.rechunk(chunks)
    reader = row_reader(a)
    if reader is None or out.chunks[0] == a.chunks[0]:
        return a if reader is not None else out
    return row_array(reader, out.chunks[0])
