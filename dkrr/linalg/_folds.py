"""The fold of every row: the one place where rows get their cross-validation folds
(docs/ALGORITHMS.md 3.3). :func:`fold_ids` is the seeded hash of a global row index (or
of a group); :func:`row_folds` gives a block's folds from the row-index hash, hashed
groups or the fold ids of a user's splitter (:mod:`dkrr.estimators._folds`)."""

from __future__ import annotations

import numpy as np

from ..errors import InputValidationError

__all__ = ["fold_ids", "row_folds"]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def fold_ids(rows: np.ndarray, n_folds: int, seed: int) -> np.ndarray:
    """Fold of each global row index: ``splitmix64(row + seed) mod n_folds``.

    Parameters
    ----------
    rows : ndarray of int
        Global row indices (>= 0).
    n_folds : int
    seed : int
        Any integer in ``[0, 2**64)``.

    Returns
    -------
    ndarray of int64, values in ``[0, n_folds)``.
    """
    z = np.asarray(rows).astype(np.uint64) + np.uint64(seed % 2**64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    z ^= z >> np.uint64(31)
    return (z % np.uint64(n_folds)).astype(np.int64)


def row_folds(row_offset: int, n_rows: int, n_folds: int, fold_seed: int, keys=None, hashed: bool = True,
              block_index: int | None = None) -> np.ndarray:
    """The fold of each row of a block: the one place where rows get their folds.

    ``keys`` None (``cv=K``): :func:`fold_ids` of the global row indices
    ``row_offset .. row_offset + n_rows - 1``. ``keys`` the block's per-row keys (the
    fold plan of :mod:`dkrr.estimators._folds`): with ``hashed``, integer groups, each
    row's fold :func:`fold_ids` of its group (every row of a group in one fold, without
    the groups ever being gathered); else the fold ids themselves (a splitter's, checked
    in ``[0, n_folds)``).
    """
    if keys is None:
        return fold_ids(np.arange(row_offset, row_offset + n_rows), n_folds, fold_seed)
    keys = np.asarray(keys).reshape(-1)
    if keys.shape[0] != n_rows:
        raise InputValidationError(f"the block's fold keys have {keys.shape[0]} rows, its X {n_rows}")
    if hashed:
        return fold_ids(keys.astype(np.int64), n_folds, fold_seed)
    folds = keys.astype(np.int64)
    bad = np.nonzero((folds < 0) | (folds >= n_folds))[0]
    if bad.size:
        where = "" if block_index is None else f" in row block {block_index}"
        raise InputValidationError(
            f"fold id {int(folds[bad[0]])} of row {row_offset + int(bad[0])}{where} is outside [0, {n_folds})")
    return folds
