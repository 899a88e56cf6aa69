"""Applying a fitted feature map to numpy arrays and, lazily, to row-chunked dask arrays."""

from __future__ import annotations

import numpy as np

from .._validation import check_finite_rows
from ._map import FeatureMap

__all__ = ["shared_object", "transform_array", "transform_block"]


def shared_object(obj, prefix: str):
    """``obj`` as a 0-d dask array of one block, named ``<prefix>-<token of obj>``: one
    graph key that every block task of a ``map_blocks`` names, so the object travels once
    (to each worker that needs it), not inside every task. A block function receives it as
    a 0-d object array ``held`` (the object is ``held[()]``). ``dask.array.from_array``
    works with and without dask's array query planning, whose ``map_blocks`` takes no
    ``dask.delayed`` arguments."""
    import dask.array as da
    from dask.base import tokenize

    held = np.empty((), dtype=object)
    held[()] = obj
    return da.from_array(held, chunks=(), name=f"{prefix}-{tokenize(obj)}")


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


def _transform_held(X_block: np.ndarray, held, block_info=None) -> np.ndarray:
    """:func:`transform_block` with the map held in a 0-d array (:func:`shared_object`)."""
    return transform_block(X_block, held[()], block_info)


def transform_array(fmap: FeatureMap, X):
    """Features of a validated numpy array, or a lazy dask array for dask input.

    For dask input the map is one key of the graph that every block task names
    (:func:`shared_object`) and each row block becomes one ``map_blocks`` task; nothing is
    computed here. The output's name is ``dkrr-features-<token>`` with the token of the
    task function, the map's content and X's name, so two maps (or two inputs) never
    share keys and the same map on the same input does (with dask's array query planning
    dask appends its own token to the name). Output dtype equals the input's floating
    dtype. A distributed Client whose workers cannot run a task at all is refused
    (:func:`~dkrr._system.check_active_workers`).
    """
    if isinstance(X, np.ndarray):
        return fmap.transform(X)
    from dask.base import tokenize

    from .._system import check_active_workers

    check_active_workers()  # workers below what a task needs: refused now, not looping later
    p = fmap.n_output_features
    token = tokenize(fmap)
    return X.map_blocks(
        _transform_held,
        shared_object(fmap, "dkrr-feature-map"),
        dtype=X.dtype,
        chunks=(X.chunks[0], (p,)),
        meta=np.empty((0, p), dtype=X.dtype),
        name=f"dkrr-features-{tokenize(transform_block, token, X.name, p)}",
    )
