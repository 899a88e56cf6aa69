"""How the commands open a store: :func:`~dkrr.io.open_dataset` with the command's
``--storage-options``, its rows read in blocks of :func:`~dkrr.linalg._blocks.merged_rows`.

A store written with many small chunks (by another tool, or ``write_dataset`` of a dask
array chunked finely) is read a few megabytes at a time, as a store ``dkrr ingest`` wrote:
each block costs every pass a fixed overhead, and its rows are read by slice, so joining
chunks costs nothing. ``dkrr predict`` then writes its predictions in those blocks.
"""

from __future__ import annotations

import dataclasses


def open_store(args, *, require_y: bool):
    """The store ``args.store`` (:class:`~dkrr.io.ZarrDataset`), X and y in the same blocks."""
    from .._rows import rechunk_rows
    from ..io import open_dataset
    from ..linalg._blocks import merged_rows

    data = open_dataset(args.store, require_y=require_y, storage_options=args.storage_options)
    X = merged_rows(data.X)
    if X is data.X:
        return data
    y = None if data.y is None else rechunk_rows(data.y, {0: X.chunks[0]})
    return dataclasses.replace(data, X=X, y=y)
