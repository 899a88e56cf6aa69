"""Applying a fitted feature map to numpy arrays and, lazily, to row-chunked dask arrays."""

from __future__ import annotations

import numpy as np

from .._validation import check_finite_block
from ._map import FeatureMap

__all__ = ["transform_array", "transform_block"]


def transform_block(X_block: np.ndarray, fmap: FeatureMap, block_id=None) -> np.ndarray:
    """Task body: validate one row block (finite values) and return its features."""
    where = "" if block_id is None else f" (row block {block_id[0]})"
    check_finite_block(X_block, "X", where)
    return fmap.transform(np.ascontiguousarray(X_block))


def transform_array(fmap: FeatureMap, X):
    """Features of a validated numpy array, or a lazy dask array for dask input.

    For dask input the map is embedded once in the graph (a single delayed key every block
    task depends on) and each row block becomes one ``map_blocks`` task; nothing is
    computed here. Output dtype equals the input's floating dtype.
    """
    if isinstance(X, np.ndarray):
        return fmap.transform(X)
    import dask

    p = fmap.n_output_features
    fmap_key = dask.delayed(fmap, pure=True)
    return X.map_blocks(
        transform_block,
        fmap_key,
        dtype=X.dtype,
        chunks=(X.chunks[0], (p,)),
        meta=np.empty((0, p), dtype=X.dtype),
        name="dkrr-features",
    )
