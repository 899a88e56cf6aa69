"""How dkrr's passes cut the rows of their inputs into blocks.

:func:`as_row_chunked` turns numpy, zarr and dask inputs into dask arrays whose row chunks
agree (what :func:`~dkrr.linalg.reduce_row_blocks` needs): in-memory data is cut into
blocks of :func:`default_chunk_rows` rows; dask input keeps its chunks, unless there are
many small ones (:func:`merged_row_chunks` joins consecutive chunks, since each block
costs every pass a fixed overhead); zarr input becomes a reader-backed array whose rows
the reductions read themselves (:mod:`dkrr._rows`).
"""

from __future__ import annotations

import math

import numpy as np

from .._frames import unknown_rows
from .._validation import check_input, is_dask
from ..errors import InputValidationError, InvalidParameterError

__all__ = ["CHUNK_BYTES", "MERGE_ABOVE_BLOCKS", "MERGE_ABOVE_READER_BLOCKS", "MIN_BLOCKS", "MIN_BLOCK_ROWS",
           "READER_BLOCK_BYTES", "as_row_chunked", "default_chunk_rows", "merged_row_chunks", "merged_rows"]

#: byte budget of one row block of X when dkrr chooses the chunking of in-memory data
CHUNK_BYTES = 32 * 2**20

#: dkrr cuts in-memory data into up to this many blocks when it has enough rows
MIN_BLOCKS = 8

#: ... each of at least this many rows: a statistics task has a fixed cost of a few passes
#: over its p x p partial Gram (allocation, accumulation, the combine), against
#: ``rows x p^2`` flops for the Gram itself, so small blocks waste time. Measurement:
#: benchmarks/README.md, "Measurements behind the code's constants".
MIN_BLOCK_ROWS = 4096

#: dask input with more row chunks than this, of fewer than :data:`MIN_BLOCK_ROWS` rows on
#: average, has its consecutive chunks merged (:func:`merged_row_chunks`): each block costs
#: every pass about a millisecond of dask's and dkrr's task overhead, which at thousands of
#: small blocks outweighs the work; fewer chunks cost at most about a second a pass and are
#: kept as given. Measurement: benchmarks/README.md, "Measurements behind the code's
#: constants"
MERGE_ABOVE_BLOCKS = 1024

#: a Zarr store's rows (a reader-backed array, :mod:`dkrr._rows`) are read by slice inside
#: the step that uses them, so joining chunks costs no concatenation: a store with more
#: than :data:`MERGE_ABOVE_READER_BLOCKS` chunks holding under an eighth of this much of X
#: on average is read in blocks of at least this much (and :data:`MIN_BLOCK_ROWS` rows),
#: the 65,536-row chunks ``dkrr ingest`` writes of 8 float32 columns. Measured (LocalCluster,
#: 2 workers x 1 thread, 10^6 x 8 float32 rows in 1,000 chunks, RFF D = 256, the default
#: precision): the fit took 16.6 s on the chunks as stored, 8.0 s on blocks of 4,096 rows,
#: 4.9 s on 16,384 and 4.5 s on 65,536
READER_BLOCK_BYTES = 2 * 2**20
MERGE_ABOVE_READER_BLOCKS = 64


def default_chunk_rows(n_rows: int, n_cols: int, itemsize: int = 8) -> int:
    """Rows per block for in-memory data: equal blocks, up to :data:`MIN_BLOCKS` of them
    but none under :data:`MIN_BLOCK_ROWS` rows, and at most :data:`CHUNK_BYTES` of X per
    block."""
    by_bytes = max(1, CHUNK_BYTES // max(1, n_cols * itemsize))
    n_blocks = max(1, min(MIN_BLOCKS, n_rows // MIN_BLOCK_ROWS))
    return int(max(1, min(math.ceil(n_rows / n_blocks), by_bytes)))


def merged_row_chunks(chunks, n_cols: int, itemsize: int = 8, *, reader: bool = False):
    """The row chunks of dask input after merging small ones, or ``None`` to keep them.

    Only more than :data:`MERGE_ABOVE_BLOCKS` chunks of fewer than :data:`MIN_BLOCK_ROWS`
    rows on average are merged (``reader``, a Zarr store's rows: more than
    :data:`MERGE_ABOVE_READER_BLOCKS` chunks of under an eighth of
    :data:`READER_BLOCK_BYTES`, to blocks of that much, or fewer rows where that leaves
    :data:`MIN_BLOCKS` blocks for the workers): consecutive chunks are joined until a block holds
    ``MIN_BLOCK_ROWS`` rows, and a block of wide X is closed before it holds more than
    :data:`CHUNK_BYTES` of it (a chunk larger than that stays as it is); a remainder joins
    the last block where it fits. Every new boundary is an old one, so dask's rechunk
    only concatenates (no block is split) and the rows keep their order; the results
    differ from the unmerged chunking's by rounding only (the folds follow the global row
    index, ALGORITHMS.md 3.3)."""
    chunks = tuple(int(c) for c in chunks)
    cap = max(1, CHUNK_BYTES // max(1, n_cols * itemsize))  # rows of CHUNK_BYTES
    if reader:
        target = min(max(MIN_BLOCK_ROWS, READER_BLOCK_BYTES // max(1, n_cols * itemsize)), cap)
        if len(chunks) <= MERGE_ABOVE_READER_BLOCKS or 8 * sum(chunks) >= target * len(chunks):
            return None
        target = min(target, max(MIN_BLOCK_ROWS, sum(chunks) // MIN_BLOCKS))  # and MIN_BLOCKS blocks
    elif len(chunks) <= MERGE_ABOVE_BLOCKS or sum(chunks) >= MIN_BLOCK_ROWS * len(chunks):
        return None
    else:
        target = min(MIN_BLOCK_ROWS, cap)
    out, rows = [], 0
    for c in chunks:
        if rows and rows + c > cap:  # the block is closed before it passes the byte cap
            out.append(rows)
            rows = 0
        rows += c
        if rows >= target:
            out.append(rows)
            rows = 0
    if rows:
        if out and out[-1] + rows <= cap:
            out[-1] += rows
        else:
            out.append(rows)
    return tuple(out) if len(out) < len(chunks) else None


def merged_rows(X):
    """Dask array ``X`` (rows x columns) in the blocks of :func:`merged_row_chunks` (a Zarr
    store's rows by its ``reader`` rule), or ``X`` itself where they are kept."""
    from .._rows import rechunk_rows, row_reader

    if unknown_rows(X):
        return X
    merged = merged_row_chunks(X.chunks[0], X.shape[1] if X.ndim > 1 else 1, X.dtype.itemsize,
                               reader=row_reader(X) is not None)
    return X if merged is None else rechunk_rows(X, {0: merged})


def _check_chunk_rows(chunk_rows):
    if chunk_rows is None:
        return None
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise InvalidParameterError(f"chunk_rows must be a positive integer or None, got {chunk_rows!r}")
    return int(chunk_rows)


def as_row_chunked(X, y=None, *, chunk_rows=None, y_kind="numeric"):
    """Validate ``X`` (and ``y``) and return dask arrays with identical row chunks.

    Parameters
    ----------
    X : array-like, dask array or zarr array of shape (n, d)
        numpy input is cut into blocks of ``chunk_rows`` rows (default:
        :func:`default_chunk_rows`), marked so that the first pass on a distributed Client
        persists it on the workers (sent once, not with every pass,
        :func:`dkrr._rows.local_array`); dask input keeps its row chunks unless
        ``chunk_rows`` is given, or unless they are many and small
        (:func:`merged_row_chunks`: consecutive chunks joined); zarr input becomes a
        reader-backed array whose rows the reductions read inside their steps
        (:mod:`dkrr._rows`).
    y : array-like, dask array or zarr array of shape (n,) or (n, t), optional
        Rechunked to X's row chunks.
    chunk_rows : int, optional
    y_kind : {"numeric", "labels"}
        ``"numeric"`` converts y to a float dtype; ``"labels"`` keeps any 1-D label
        array (strings, integers, ...) as is.

    Returns
    -------
    X : dask array of shape (n, d), one column block, float dtype
    y : dask array or None

    Raises
    ------
    InputValidationError
        Bad shape/dtype, or ``y`` and ``X`` have different numbers of rows.
    ChunkingError
        X is chunked along its columns.
    """
    from .._rows import local_array, rechunk_rows

    chunk_rows = _check_chunk_rows(chunk_rows)
    Xv = check_input(X, name="X", check_finite=False)
    if not is_dask(Xv):
        rows = chunk_rows or default_chunk_rows(Xv.shape[0], Xv.shape[1], Xv.dtype.itemsize)
        Xd = local_array(Xv, (rows, Xv.shape[1]))
    elif chunk_rows:
        Xd = rechunk_rows(Xv, {0: chunk_rows})
    else:
        Xd = merged_rows(Xv)
    if y is None:
        return Xd, None
    if y_kind == "numeric":
        yv = check_input(y, name="y", ndim=None, check_finite=False)
    else:
        yv = _labels_as_array(y)
    for name, a in (("X", Xd), ("y", yv)):
        if is_dask(a) and unknown_rows(a):  # NaN rows compare unequal to anything
            raise InputValidationError(
                f"{name} is a dask array with unknown chunk sizes (shape {a.shape}: a DataFrame's .values or "
                f"to_dask_array() gives one); call `{name}.compute_chunk_sizes()` first (dkrr's estimators count "
                "the rows themselves)"
            )
    if yv.shape[0] != Xd.shape[0]:
        raise InputValidationError(
            f"X and y have different numbers of rows: X has {Xd.shape[0]} (shape "
            f"{Xd.shape}), y has {yv.shape[0]} (shape {yv.shape}); pass one target row per "
            "sample."
        )
    if not is_dask(yv):
        yd = local_array(np.asarray(yv), (Xd.chunks[0],) + tuple((s,) for s in yv.shape[1:]))
    else:
        yd = rechunk_rows(yv, {0: Xd.chunks[0], **{i: -1 for i in range(1, yv.ndim)}})
    return Xd, yd


def _labels_as_array(y):
    """Class labels: a 1-D numpy or dask array of any dtype (zarr read through dask)."""
    try:
        import zarr

        if isinstance(y, zarr.Array):
            from .._rows import zarr_rows

            y = zarr_rows(y)
    except ImportError:  # pragma: no cover
        pass
    if not is_dask(y):
        y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise InputValidationError(
            f"class labels y must be 1-dimensional, got shape {y.shape}; multilabel "
            "targets are not supported, pass one label per row."
        )
    if y.shape[0] == 0:
        raise InputValidationError("y is empty; it needs one label per row of X")
    if y.dtype.kind == "T":  # numpy 2's StringDType (zarr 3's strings): as Python strings
        y = y.astype(object)
    if y.dtype.kind not in "biufUSO":
        raise InputValidationError(
            f"class labels of dtype {y.dtype} are not supported: pass numbers, booleans or strings "
            "(y.astype(str) for other labels)")
    return y
