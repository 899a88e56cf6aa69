"""The sampling driver: scores (pass 1) -> resampled feature map -> ridge statistics (pass 2).

A sampled fit reads the data exactly twice:

1. :func:`fit_sampled_feature_map`: one streamed reduction over the row blocks gives
   the linear score statistics of the ``l`` candidates (``Z^T y``, ``Z^T 1``, ... per
   cross-validation fold; plus the Gram for ridge leverage), then ``s`` frequencies are
   resampled on the client.
2. :func:`sampled_ridge_statistics`: one streamed reduction gives the ridge statistics of
   the resampled features. With cross-validation the map of fold ``k`` must be sampled
   from the training rows of fold ``k`` only (otherwise the validation labels leak into
   the features scored on them), so this pass computes, per row block, the statistics of
   the final map (all rows) and of each fold's map (split into fold ``k`` and the rest).
   That costs ``K + 1`` feature computations per block in the same single pass. Ridge
   leverage scores do not read the labels, so there one map (scored on all rows) serves
   every fold and the pass is the plain K-fold statistics pass.

:func:`cross_validate_fold_maps` then scores every (fold, alpha) from those statistics,
with the same formulas as :func:`dkrr.linalg.cross_validate_statistics`.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from ..errors import InvalidParameterError
from ..features._map import RandomFeatureMap
from ..linalg._stats import (
    DEFAULT_MAX_BLOCK_BYTES,
    RidgeStatistics,
    block_statistics,
    combine_statistics,
)
from ._resample import resample_feature_map
from ._ridge_leverage import ridge_leverage_scores
from ._scores import streamed_score_statistics, surrogate_scores

__all__ = [
    "SAMPLINGS",
    "SampledFeatureMaps",
    "SampledRidgeFit",
    "check_sampling",
    "cross_validate_fold_maps",
    "fit_sampled_feature_map",
    "fit_sampled_ridge_statistics",
    "sampled_ridge_statistics",
]

#: values of the ``sampling`` parameter (besides ``None``)
SAMPLINGS = ("surrogate_leverage", "ridge_leverage")


def check_sampling(sampling, n_candidates, n_components) -> tuple[str | None, int | None]:
    """Validate ``sampling`` and ``n_candidates``; returns ``(sampling, l)``.

    ``n_candidates=None`` means ``4 * n_components``. Raises
    :class:`~dkrr.errors.InvalidParameterError` for an unknown sampling, a non-integer
    ``n_candidates``, ``n_candidates`` given without sampling, or ``n_candidates <
    n_components``.
    """
    if sampling is None:
        if n_candidates is not None:
            raise InvalidParameterError(
                f"n_candidates={n_candidates!r} is given but sampling is None; candidates are "
                f"only drawn for sampling in {list(SAMPLINGS)}"
            )
        return None, None
    if sampling not in SAMPLINGS:
        raise InvalidParameterError(f"sampling must be None or one of {list(SAMPLINGS)}, got {sampling!r}")
    if n_candidates is None:
        return sampling, 4 * int(n_components)
    if isinstance(n_candidates, bool) or not isinstance(n_candidates, numbers.Integral) or n_candidates < 1:
        raise InvalidParameterError(f"n_candidates must be a positive integer, got {n_candidates!r}")
    if n_candidates < n_components:
        raise InvalidParameterError(
            f"n_candidates={n_candidates} is smaller than n_components={n_components}: "
            "leverage sampling keeps n_components of the n_candidates scored frequencies, so "
            f"it needs n_candidates >= n_components (e.g. n_candidates={4 * n_components})."
        )
    return sampling, int(n_candidates)


@dataclasses.dataclass(eq=False)
class SampledFeatureMaps:
    """Result of :func:`fit_sampled_feature_map`.

    Attributes
    ----------
    feature_map : RandomFeatureMap
        The ``s`` resampled, importance-weighted frequencies, scored on all rows.
    fold_maps : list of RandomFeatureMap or None
        With ``n_folds > 1`` and surrogate leverage: map ``k`` is resampled from scores of
        the training rows of fold ``k`` (all rows not in fold ``k``). ``None`` otherwise:
        ridge leverage scores do not read the labels, so the final map serves every fold.
    scores : ndarray (l,)
        Scores of the candidates on all rows.
    indices : ndarray (s,)
        Candidate index of each frequency of ``feature_map``.
    """

    feature_map: RandomFeatureMap
    fold_maps: list | None
    scores: np.ndarray
    indices: np.ndarray


def fit_sampled_feature_map(
    X,
    y,
    *,
    candidate_map: RandomFeatureMap,
    sampling: str,
    n_components: int,
    rng: np.random.Generator,
    n_folds: int = 1,
    fold_seed: int = 0,
    labels_mode: bool = False,
    ridge_alpha: float = 1.0,
    eq12: bool = False,
    weighted: bool = True,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    split_every: int | None = None,
) -> SampledFeatureMaps:
    """Score the candidate frequencies in one pass and resample ``n_components`` of them.

    Parameters
    ----------
    X, y : dask arrays with identical row chunks (or numpy)
        Training data; ``y`` numeric (regression, centred for scoring) or class labels
        (``labels_mode``, scored as +-1 columns).
    candidate_map : RandomFeatureMap
        ``l`` candidate frequencies, drawn with any method (unweighted).
    sampling : {"surrogate_leverage", "ridge_leverage"}
    n_components : int
        s, the number of frequencies kept (``s <= l``).
    rng : numpy Generator
        Resampling draws (the final map first, then fold 0, 1, ...).
    n_folds, fold_seed : int
        Cross-validation folds of :func:`dkrr.linalg.fold_ids`; with ``n_folds > 1`` the
        result also holds one map per fold, scored on that fold's training rows.
    labels_mode : bool
        ``y`` holds class labels.
    ridge_alpha : float
        ``n lambda`` of the ridge leverage scores (ignored for surrogate leverage).
    eq12 : bool
        Surrogate leverage: the eq. 12 variant (adds ``n ||z_i||^2``).
    weighted : bool
        Importance weights on (``False`` only for comparisons: biased).
    max_block_bytes, split_every : int

    Returns
    -------
    SampledFeatureMaps

    Raises
    ------
    InvalidParameterError
        Unknown sampling, ``n_components > l``.
    InputValidationError
        All scores zero (constant targets), fewer than two classes.
    NonFiniteInputError
        NaN/inf in X or y (names the row block).
    """
    if sampling not in SAMPLINGS:
        raise InvalidParameterError(f"sampling must be one of {list(SAMPLINGS)}, got {sampling!r}")
    l = candidate_map.n_components
    if n_components > l:
        check_sampling(sampling, l, n_components)  # raises with the explanation
    if candidate_map.projection.is_complex:
        raise InvalidParameterError(
            f"sampling={sampling!r} resamples rows of a real W, but rom_diagonal="
            f"{candidate_map.projection.rom_diagonal!r} makes W complex; use rom_diagonal='rademacher' "
            "or sampling=None"
        )
    ridge = sampling == "ridge_leverage"
    stats = streamed_score_statistics(
        X, y, candidate_map, n_folds=1 if ridge else n_folds, fold_seed=fold_seed, labels_mode=labels_mode,
        with_norms=bool(eq12) and not ridge, with_gram=ridge,
        max_block_bytes=max_block_bytes, split_every=split_every,
    )
    classes = stats.classes() if labels_mode else None

    def scores_for(exclude):
        if ridge:
            tr = stats.training(exclude)
            return ridge_leverage_scores(tr.G[0], ridge_alpha, candidate_map.kernel, l)
        return surrogate_scores(stats, candidate_map.kernel, l, exclude_fold=exclude, eq12=eq12, classes=classes)

    scores = scores_for(None)
    fmap, idx = resample_feature_map(candidate_map, scores, n_components, rng, weighted=weighted)
    fold_maps = None
    if n_folds > 1 and not ridge:
        fold_maps = [
            resample_feature_map(candidate_map, scores_for(k), n_components, rng, weighted=weighted)[0]
            for k in range(n_folds)
        ]
    return SampledFeatureMaps(fmap, fold_maps, scores, idx)


def _two_folds(stats: RidgeStatistics, k: int) -> RidgeStatistics:
    """Collapse K-fold statistics to two "folds": [fold k, all other rows]."""
    return stats.map_parts(lambda a: np.stack([a[k], a.sum(0) - a[k]]))


def _block_statistics_fold_maps(X, y, row_offset, block_index, fmap, fold_maps, n_folds, fold_seed,
                                max_block_bytes, labels_mode):
    out = [block_statistics(X, y, row_offset, block_index, fmap, 1, 0, max_block_bytes, labels_mode)]
    for k, m in enumerate(fold_maps):
        s = block_statistics(X, y, row_offset, block_index, m, n_folds, fold_seed, max_block_bytes, labels_mode)
        out.append(_two_folds(s, k))
    return out


def _combine_lists(parts: list) -> list:
    """Pure combine of lists of statistics, element by element."""
    return [combine_statistics(list(column)) for column in zip(*parts)]


def sampled_ridge_statistics(
    X,
    y,
    maps: SampledFeatureMaps,
    *,
    n_folds: int = 1,
    fold_seed: int = 0,
    labels_mode: bool = False,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    split_every: int | None = None,
) -> tuple[RidgeStatistics, list | None]:
    """The second pass: ridge statistics of the sampled map(s), in one streamed reduction.

    Returns
    -------
    stats : RidgeStatistics
        Statistics of ``maps.feature_map``: one fold over all rows, or, when
        ``n_folds > 1`` and ``maps.fold_maps`` is ``None`` (ridge leverage: one map for
        every fold), the usual K-fold statistics for
        :func:`dkrr.linalg.cross_validate_statistics`.
    fold_stats : list of RidgeStatistics or None
        With ``n_folds > 1`` and fold maps: for fold ``k`` the statistics of
        ``maps.fold_maps[k]`` as two "folds", ``[rows of fold k, all other rows]``
        (symmetrised), ready for :func:`cross_validate_fold_maps`.
    """
    from ..linalg._blocks import as_row_chunked
    from ..linalg._reduce import reduce_row_blocks

    if not (hasattr(X, "chunks") and hasattr(y, "chunks")):
        X, y = as_row_chunked(X, y, y_kind="labels" if labels_mode else "numeric")
    if n_folds > 1 and maps.fold_maps is None:  # one map for every fold: plain K-fold statistics
        from ..linalg._stats import streamed_statistics

        stats = streamed_statistics(
            X, y, maps.feature_map, n_folds=n_folds, fold_seed=fold_seed, max_block_bytes=max_block_bytes,
            split_every=split_every, labels_mode=labels_mode,
        )
        return stats, None
    fold_maps = maps.fold_maps if n_folds > 1 else []
    if n_folds > 1 and len(fold_maps) != n_folds:
        raise InvalidParameterError(
            f"{n_folds}-fold statistics need one sampled map per fold; fit the maps with n_folds={n_folds}"
        )
    parts = reduce_row_blocks(
        [X, y],
        _block_statistics_fold_maps,
        _combine_lists,
        split_every=split_every,
        constants=(maps.feature_map, list(fold_maps), int(n_folds), int(fold_seed),
                   int(max_block_bytes), bool(labels_mode)),
        label="accumulating ridge statistics of the sampled features",
    )
    parts = [p.symmetrized() for p in parts]
    return parts[0], (parts[1:] if n_folds > 1 else None)


def cross_validate_fold_maps(fold_stats: list, alphas, fit_intercept: bool, targets_fn=None) -> np.ndarray:
    """Validation MSE of every (fold, alpha), each fold with its own sampled map: (K, a).

    ``fold_stats[k]`` is the two-"fold" statistics of :func:`sampled_ridge_statistics`;
    ``targets_fn`` (e.g. the classifier's +-1 conversion of labels-mode statistics) is
    applied to each first. Fold ``k`` is trained on its other rows and validated on its
    own rows by :func:`dkrr.linalg.cross_validate_statistics` (whose second row, the
    reverse split, is discarded).
    """
    from ..linalg._cv import cross_validate_statistics

    rows = []
    for st in fold_stats:
        if targets_fn is not None:
            st = targets_fn(st)
        rows.append(cross_validate_statistics(st, alphas, fit_intercept)[0])
    return np.asarray(rows)


@dataclasses.dataclass(eq=False)
class SampledRidgeFit:
    """Result of :func:`fit_sampled_ridge_statistics`.

    Attributes
    ----------
    maps : SampledFeatureMaps
    stats : RidgeStatistics
        One-fold statistics of ``maps.feature_map`` over all rows (targets converted by
        ``targets_fn``), ready for :func:`dkrr.linalg.ridge_coefficients`.
    fold_mse : ndarray (K, n_alphas) or None
        Validation MSE of every (fold, alpha), fold ``k`` with its own sampled map.
    fold_sizes : ndarray (K,) or None
        Rows per fold.
    """

    maps: SampledFeatureMaps
    stats: RidgeStatistics
    fold_mse: np.ndarray | None
    fold_sizes: np.ndarray | None


def fit_sampled_ridge_statistics(
    X,
    y,
    *,
    candidate_map: RandomFeatureMap,
    sampling: str,
    n_components: int,
    rng: np.random.Generator,
    n_folds: int = 1,
    fold_seed: int = 0,
    labels_mode: bool = False,
    ridge_alpha: float = 1.0,
    alphas=None,
    fit_intercept: bool = True,
    targets_fn=None,
    eq12: bool = False,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    split_every: int | None = None,
) -> SampledRidgeFit:
    """A sampled ridge fit's two passes over the data: scores, then ridge statistics.

    Pass 1 is :func:`fit_sampled_feature_map`, pass 2 :func:`sampled_ridge_statistics`;
    with ``n_folds > 1`` every (fold, alpha) of ``alphas`` is scored by
    :func:`cross_validate_fold_maps` (fold ``k``'s features sampled from its training rows
    only). ``targets_fn`` converts statistics to the fitted targets (the classifier's +-1
    encoding of labels-mode statistics); it is applied to every statistics object.
    Parameters as in those functions.
    """
    maps = fit_sampled_feature_map(
        X, y, candidate_map=candidate_map, sampling=sampling, n_components=n_components, rng=rng,
        n_folds=n_folds, fold_seed=fold_seed, labels_mode=labels_mode, ridge_alpha=ridge_alpha,
        eq12=eq12, max_block_bytes=max_block_bytes, split_every=split_every,
    )
    stats, fold_stats = sampled_ridge_statistics(
        X, y, maps, n_folds=n_folds, fold_seed=fold_seed, labels_mode=labels_mode,
        max_block_bytes=max_block_bytes, split_every=split_every,
    )
    if targets_fn is not None:
        stats = targets_fn(stats)
    mse = sizes = None
    if n_folds > 1:
        if alphas is None:
            raise InvalidParameterError("cross-validation of sampled maps needs the grid of alphas")
        if fold_stats is None:
            from ..linalg._cv import cross_validate_statistics

            mse = cross_validate_statistics(stats, alphas, fit_intercept)
            sizes = stats.n.copy()
            stats = stats.total()
        else:
            mse = cross_validate_fold_maps(fold_stats, alphas, fit_intercept, targets_fn)
            sizes = np.array([int(s.n[0]) for s in fold_stats], dtype=np.int64)
    return SampledRidgeFit(maps, stats, mse, sizes)
