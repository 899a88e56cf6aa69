"""Column scores of candidate random features, as one streamed reduction.

Liu et al. 2020, Algorithm 1 and eq. 15 (ALGORITHMS.md section 4): for ``l`` candidate
frequencies with features ``Z_l = phi_l(X)`` the surrogate leverage score of frequency
``i`` is ::

    p_i = sum over targets t of (y_t^T z_i)^2          (real nonlinearities)
    p_i = sum_t (y_t^T cos(X w_i))^2 + (y_t^T sin(X w_i))^2    (gaussian, eq. 15)

and the variant of eq. 12 adds ``n ||z_i||^2`` (``n (||cos||^2 + ||sin||^2)``).

The statistic that is *streamed* is linear in the data: one task per row block computes
``Z_b^T y_b``, ``Z_b^T 1``, ``n_b``, ``sum y_b`` (and, if asked, the column sums of
squares ``sum Z_b**2`` and the Gram ``Z_b^T Z_b``), per cross-validation fold, and a tree
of combine tasks sums them (:func:`dkrr.linalg.reduce_row_blocks`). The squares are taken
only at the end, of the *summed* statistic: ``(sum_b Z_b^T y_b)^2``, never
``sum_b (Z_b^T y_b)^2``.

Targets
    Regression targets are centred with the streamed mean:
    ``Z^T (y - ybar) = Z^T y - Z^T 1 ybar^T`` with ``ybar = sum y / n``, so no second pass
    is needed. Classification targets are +-1: the block task one-hot encodes the labels
    it sees (the classes are found in the same pass) and after the pass
    ``Z^T (2 * 1[y = j] - 1) = 2 Z^T 1[y = j] - Z^T 1``; two classes give one column
    (+1 for the larger label), more give one-vs-rest columns.

Cross-validation
    Rows are assigned to folds by :func:`dkrr.linalg.fold_ids` (a seeded hash of the global
    row index, the same assignment the ridge statistics use), the statistics are kept per
    fold, and the scores of the training rows of fold ``k`` are computed from the totals
    minus fold ``k`` (:meth:`dkrr.linalg.RidgeStatistics.training`), so the labels of the validation
    rows never enter the features that are scored on them.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputValidationError, InvalidParameterError
from ..linalg._stats import (
    DEFAULT_MAX_BLOCK_BYTES,
    RidgeStatistics,
    block_statistics,
    combine_statistics,
)

__all__ = [
    "frequency_totals",
    "streamed_score_statistics",
    "surrogate_scores",
    "target_products",
]

#: centred products below this fraction of their terms are taken as exactly zero (constant y)
_CANCEL_RTOL = 1e-11


def target_products(stats: RidgeStatistics, *, center: bool = True, classes=None) -> np.ndarray:
    """``Z^T y`` of one-fold statistics, shape (p, t), with the targets of the task.

    Numeric targets are centred (``center=True``) with the streamed mean; labels become
    +-1 columns (one column for two classes, one-vs-rest otherwise). Centred products
    whose norm is below ``1e-11`` of the terms they are the difference of are rounding
    noise (the targets are constant) and are returned as exact zeros. ``stats`` is left
    unchanged.
    """
    if stats.n_folds != 1:
        raise InvalidParameterError("call training() first: target_products needs one fold")
    if float(stats.n[0]) == 0:
        raise InputValidationError("no rows to score the candidate features on")
    if stats.labels is not None:
        classes = stats.classes() if classes is None else np.asarray(classes)
        stats = stats.aligned(np.unique(np.concatenate([stats.labels, classes])))
    c, zsum, n, ysum = stats.c[0], stats.zsum[0], float(stats.n[0]), stats.ysum[0]
    if stats.labels is not None:
        pos = np.searchsorted(stats.labels, classes)
        cols = pos[1:] if len(classes) == 2 else pos
        return 2.0 * c[:, cols] - zsum[:, None]
    if center:
        centred = c - np.outer(zsum, ysum / n)
        # constant targets: the centred products are rounding noise of the subtraction
        scale = np.linalg.norm(c) + np.linalg.norm(np.outer(zsum, ysum / n))
        if np.linalg.norm(centred) <= _CANCEL_RTOL * scale:
            return np.zeros_like(centred)
        return centred
    return c


def frequency_totals(values: np.ndarray, kernel: str, n_components: int) -> np.ndarray:
    """Per-frequency totals of per-column values: cos + sin columns for the shift-invariant
    kernels (``gaussian``, ``matern``, ``laplacian``)."""
    from ..features._nonlinear import FOURIER_KERNELS

    values = np.asarray(values, dtype=np.float64)
    if kernel in FOURIER_KERNELS:
        if values.shape[0] != 2 * n_components:
            raise InvalidParameterError(
                f"expected {2 * n_components} column values for {n_components} {kernel} "
                f"frequencies, got {values.shape[0]}"
            )
        return values[:n_components] + values[n_components:]
    return values


def surrogate_scores(
    stats: RidgeStatistics,
    kernel: str,
    n_components: int,
    *,
    exclude_fold: int | None = None,
    center: bool = True,
    eq12: bool = False,
    classes=None,
) -> np.ndarray:
    """Surrogate leverage scores ``p_i`` of the ``n_components`` candidate frequencies.

    Parameters
    ----------
    stats : RidgeStatistics
        From :func:`streamed_score_statistics` (``with_norms=True`` for ``eq12``).
    kernel : str
        Kernel of the candidate map (``gaussian`` sums the cos and sin columns, eq. 15).
    n_components : int
        l, the number of candidate frequencies.
    exclude_fold : int, optional
        Score on the training rows of this cross-validation fold only.
    center : bool, default=True
        Centre numeric targets (ignored for labels, which are +-1).
    eq12 : bool, default=False
        Add ``n ||z_i||^2`` (eq. 12) to ``(y^T z_i)^2`` (eq. 15), ``n`` the rows scored.
    classes : array-like, optional
        Labels mode: the classes (default: those seen in the scored rows).

    Returns
    -------
    ndarray of shape (n_components,), float64, >= 0.
    """
    tr = stats.training(exclude_fold)
    C = target_products(tr, center=center, classes=classes)
    col = np.einsum("pt,pt->p", C, C)
    if eq12:
        if tr.zsq is None:
            raise InvalidParameterError("eq12 scores need the column norms: stream with with_norms=True")
        col = col + float(tr.n[0]) * tr.zsq[0]
    return frequency_totals(col, kernel, n_components)


def streamed_score_statistics(
    X,
    y,
    fmap,
    *,
    n_folds: int = 1,
    fold_seed: int = 0,
    labels_mode: bool = False,
    with_norms: bool = False,
    with_gram: bool = False,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    split_every: int | None = None,
) -> RidgeStatistics:
    """One pass over the row blocks of ``X``, ``y``: the summed statistics of the candidates.

    The statistics are :class:`dkrr.linalg.RidgeStatistics` without ``yy``, and without
    ``G`` unless ``with_gram`` (then full and exactly symmetric, as the ridge pass gives it);
    the block task and the combine are those of the ridge pass.

    Parameters
    ----------
    X, y : dask arrays with identical row chunks
        See :func:`dkrr.linalg.as_row_chunked` (numpy input is accepted and chunked by it).
    fmap : FeatureMap
        The candidate map (l frequencies).
    n_folds, fold_seed : int
        Cross-validation folds (:func:`dkrr.linalg.fold_ids`); ``1`` = no folds.
    labels_mode : bool
        ``y`` holds class labels (any dtype); classes are found in the same pass.
    with_norms : bool
        Also accumulate column sums of squares (eq. 12).
    with_gram : bool
        Also accumulate the Gram ``Z^T Z`` (ridge leverage scores).
    max_block_bytes, split_every : int
        Feature-buffer budget of a task; fan-in of the combine tree.
    """
    from ..linalg._blocks import as_row_chunked
    from ..linalg._reduce import reduce_row_blocks

    if not (hasattr(X, "chunks") and hasattr(y, "chunks")):
        X, y = as_row_chunked(X, y, y_kind="labels" if labels_mode else "numeric")
    return reduce_row_blocks(
        [X, y],
        block_statistics,
        combine_statistics,
        split_every=split_every,
        constants=(fmap, int(n_folds), int(fold_seed), int(max_block_bytes), bool(labels_mode),
                   bool(with_gram), False, bool(with_norms)),
        label="scoring candidate features",
    ).symmetrized()
