"""Applying a fitted feature map to numpy arrays and, lazily, to row-chunked dask arrays."""

from __future__ import annotations

import numpy as np

from .._validation import check_finite_rows
from ._map import FeatureMap

__all__ = ["transform_array", "transform_block"]


def transform_block(X_block: np.ndarray, fmap: FeatureMap, block_info=None) -> np.ndarray:
    """Task body: validate one row block (finite values) and return its features.

    ``block_info`` (passed by ``map_blocks``) gives the block's position and its global
    first row, so an error names the global rows.
    """
    if block_info is None:
        check_finite_rows(X_block, "X")
    else:
        info = block_info[0]
        check_finite_rows(X_block, "X", info["chunk-location"][0], info["array-location"][0][0])
    return fmap.transform(np.ascontiguousarray(X_block))


def transform_array(fmap: FeatureMap, X):
    """Features of a validated numpy array, or a lazy dask array for dask input.

    For dask input the map is embedded once in the graph (a single delayed key every block
    task depends on) and each row block becomes one ``map_blocks`` task; nothing is
    computed here. The output's name is ``dkrr-features-<token>`` with the token of the
    task function, the map's content and X's name, so two maps (or two inputs) never
    share keys and the same map on the same input does. Output dtype equals the input's
    floating dtype.
    """
    if isinstance(X, np.ndarray):
        return fmap.transform(X)
    import dask
    from dask.base import tokenize

    p = fmap.n_output_features
    fmap_key = dask.delayed(fmap, pure=True)
    return X.map_blocks(
        transform_block,
        fmap_key,
        dtype=X.dtype,
        chunks=(X.chunks[0], (p,)),
        meta=np.empty((0, p), dtype=X.dtype),
        name=f"dkrr-features-{tokenize(transform_block, fmap_key.key, X.name, p)}",
    )
