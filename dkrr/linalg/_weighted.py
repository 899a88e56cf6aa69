"""Passes that accumulate several maps' statistics at once, and sample weights.

:func:`streamed_statistics_maps` reads each row block once and adds the statistics of
every map of a list (the maps of a gamma grid, ALGORITHMS.md section 3.6), optionally
weighted by ``sample_weight`` (section 3.2): ``G = sum w Z^T Z``, ``c = sum w Z^T y``,
``zsum = sum w Z``, ``ysum = sum w y``, ``yy = sum w y^2`` and ``wsum = sum w`` per fold,
``n`` the row counts. The task body is :func:`weighted_maps_block_statistics`; the block
checks, encoding and fold order are those of :mod:`dkrr.linalg._stats`.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputValidationError, InvalidParameterError
from ._stats import (
    DEFAULT_MAX_BLOCK_BYTES,
    RidgeStatistics,
    _accumulate,
    _check_weight_block,
    _prepare,
    check_precision,
    combine_statistics,
)

__all__ = [
    "ZERO_WEIGHT_MESSAGE",
    "check_sample_weight",
    "check_target_sums",
    "check_weight_total",
    "combine_statistics_maps",
    "maps_block_statistics",
    "streamed_statistics_maps",
    "weighted_maps_block_statistics",
]


def maps_block_statistics(X, y, row_offset, block_index, fmaps, n_folds, fold_seed, max_block_bytes,
                          labels_mode, precision="float64") -> tuple:
    """Statistics of one row block for every map of ``fmaps``: a tuple, one per map.

    The task body of a pass that scores several maps (a gamma grid): the block is checked,
    encoded and sorted by fold once; each map then adds its own features' sums. The
    signature follows :func:`dkrr.linalg.reduce_row_blocks`.
    """
    return weighted_maps_block_statistics(X, y, None, row_offset, block_index, fmaps, n_folds, fold_seed,
                                          max_block_bytes, labels_mode, precision)


def weighted_maps_block_statistics(X, y, w, row_offset, block_index, fmaps, n_folds, fold_seed,
                                   max_block_bytes, labels_mode, precision="float64", keys=None, hashed=True) -> tuple:
    """:func:`maps_block_statistics` with the block's sample weights ``w`` (or None).

    Weighted statistics (``sample_weight``): ``G = sum w Z^T Z``, ``c = sum w Z^T y``,
    ``zsum = sum w Z``, ``ysum = sum w y``, ``yy = sum w y^2`` and ``wsum = sum w`` per
    fold, ``n`` the row counts. Negative or non-finite weights raise
    :class:`~dkrr.errors.InputValidationError` naming the block and the global row.
    ``keys``, ``hashed``: the block's fold keys (:func:`~dkrr.linalg._stats.row_folds`;
    None: folds from the row index).
    """
    Xf, Y, w, bounds, labels = _prepare(X, y, w, row_offset, block_index, n_folds, fold_seed, labels_mode,
                                        keys, hashed)
    out = []
    for fmap in fmaps:
        stats = RidgeStatistics.zeros(n_folds, fmap.n_output_features, Y.shape[1], labels,
                                      with_weights=w is not None, packed=True)
        _accumulate(stats, Xf, Y, w, bounds, fmap, max_block_bytes, labels_mode, precision)
        out.append(stats)
    return tuple(out)


def keyed_maps_block_statistics(X, y, keys, row_offset, block_index, fmaps, n_folds, fold_seed, max_block_bytes,
                                labels_mode, precision, hashed) -> tuple:
    """Task body of :func:`streamed_statistics_maps` with fold keys and no weights."""
    return weighted_maps_block_statistics(X, y, None, row_offset, block_index, fmaps, n_folds, fold_seed,
                                          max_block_bytes, labels_mode, precision, keys, hashed)


def weighted_keyed_maps_block_statistics(X, y, w, keys, row_offset, block_index, fmaps, n_folds, fold_seed,
                                         max_block_bytes, labels_mode, precision, hashed) -> tuple:
    """Task body of :func:`streamed_statistics_maps` with fold keys and weights."""
    return weighted_maps_block_statistics(X, y, w, row_offset, block_index, fmaps, n_folds, fold_seed,
                                          max_block_bytes, labels_mode, precision, keys, hashed)


def combine_statistics_maps(parts: list) -> tuple:
    """Sum of a list of tuples of statistics, map by map: a new tuple (inputs unchanged)."""
    return tuple(combine_statistics([p[j] for p in parts]) for j in range(len(parts[0])))


def streamed_statistics_maps(
    X,
    y,
    fmaps,
    *,
    sample_weight=None,
    n_folds: int = 1,
    fold_seed: int = 0,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    split_every: int | None = None,
    labels_mode: bool = False,
    precision: str = "float64",
    fold_keys=None,
    hashed_keys: bool = True,
    persist: bool = False,
) -> list[RidgeStatistics]:
    """One pass over the row blocks of ``X``, ``y`` (and ``sample_weight``): the summed
    statistics of every map of ``fmaps``, in order.

    Each block is read once and its task computes the features of every map (the cost
    grows with the number of maps, the reads do not). ``sample_weight`` is a dask array
    (n,) with X's row chunks (:func:`check_sample_weight`) or None. Each G is exactly
    symmetric (packed during the pass, unpacked at its end). ``precision`` as in
    :func:`~dkrr.linalg.streamed_statistics`. ``fold_keys``: None (folds from a hash of
    the row index), or a dask array (n,) with X's row chunks of per-row fold keys, streamed
    like the weights: integer groups hashed to folds (``hashed_keys``) or the fold ids
    themselves (:func:`~dkrr.linalg._stats.row_folds`). ``persist``: return instead the
    pass's persisted result (:func:`~dkrr.linalg.reduce_row_blocks`), a ``Delayed`` of the
    tuple of every map's statistics with their G packed, kept where it was computed (the
    fold solves of :mod:`dkrr.linalg._cv_tasks` run on it).
    """
    from ._reduce import reduce_row_blocks

    if isinstance(max_block_bytes, bool) or not isinstance(max_block_bytes, (int, np.integer)) or max_block_bytes < 1:
        raise InvalidParameterError(f"max_block_bytes must be a positive integer, got {max_block_bytes!r}")
    check_precision(precision)
    weighted = sample_weight is not None
    arrays = [X, y] + ([sample_weight] if weighted else [])
    constants = (tuple(fmaps), int(n_folds), int(fold_seed), int(max_block_bytes), bool(labels_mode), str(precision))
    if fold_keys is None:
        body = weighted_maps_block_statistics if weighted else maps_block_statistics
    else:
        arrays.append(fold_keys)
        constants += (bool(hashed_keys),)
        body = weighted_keyed_maps_block_statistics if weighted else keyed_maps_block_statistics
    stats = reduce_row_blocks(
        arrays,
        body,
        combine_statistics_maps,
        split_every=split_every,
        constants=constants,
        label="accumulating ridge statistics",
        persist=persist,
    )
    return stats if persist else [s.symmetrized() for s in stats]


#: the error of weights that are all 0 (numpy weights before the pass, dask weights after it)
ZERO_WEIGHT_MESSAGE = ("sample_weight sums to 0: every sample weight is zero, so there is nothing to fit; "
                       "give some rows a positive weight.")


def check_sample_weight(sample_weight, X):
    """Validate ``sample_weight`` for the row-chunked dask ``X``: a float64 dask array (n,)
    with X's row chunks, or None.

    A number is every row's weight (as scikit-learn). numpy (and lists) are checked here,
    before any task runs: 1-D, one weight per row, finite, ``>= 0`` and not all zero.
    dask and zarr weights are checked for shape here and for values in the block tasks
    (as y is).

    Raises
    ------
    InputValidationError
        Wrong shape or length, negative weights, all weights zero, weights whose sum
        overflows float64.
    NonFiniteInputError
        NaN or inf in numpy weights.
    """

    from .._validation import check_input, is_dask

    if sample_weight is None:
        return None
    n = X.shape[0]
    if isinstance(sample_weight, (int, float, np.integer, np.floating)) and not isinstance(sample_weight, bool):
        sample_weight = np.full(n, float(sample_weight))
    w = check_input(sample_weight, name="sample_weight", ndim=None, check_finite=True)
    if w.ndim != 1 or w.shape[0] != n:
        raise InputValidationError(
            f"sample_weight has shape {w.shape} but X has {n} rows; pass one weight per row, "
            f"shape ({n},)."
        )
    if is_dask(w):
        from .._rows import astype_rows, rechunk_rows

        return rechunk_rows(astype_rows(w, np.float64), {0: X.chunks[0]})
    w = np.asarray(w, dtype=np.float64)
    _check_weight_block(w, None, 0)
    with np.errstate(over="ignore"):
        total = w.sum()
    if not np.isfinite(total):
        raise InputValidationError(
            f"sample_weight overflows float64: its {n} weights (largest {w.max():.3g}) sum to more "
            f"than {np.finfo(np.float64).max:.3g}, so the weighted statistics cannot be "
            f"computed. {_WEIGHT_FIX}"
        )
    if not total > 0:
        raise InputValidationError(ZERO_WEIGHT_MESSAGE)
    from .._rows import local_array

    return local_array(w, (X.chunks[0],))  # sent to a Client's workers once (dkrr._rows)


#: the fix named by the overflow errors of sample weights
_WEIGHT_FIX = ("Multiplying every weight by a constant k is the same fit as dividing alpha by k: "
               "divide sample_weight by a constant (e.g. its largest value) and alpha (or alphas) by "
               "the same constant.")

#: the weighted sums of :class:`RidgeStatistics`, as the overflow error names them
_WEIGHTED_SUMS = {"wsum": "sum w", "G": "sum w z z^T", "c": "sum w z y", "zsum": "sum w z",
                  "ysum": "sum w y", "yy": "sum w y^2"}


def _not_finite(stats: RidgeStatistics, sums: dict) -> list[str]:
    """The names (``sums``: part -> name) of the parts of ``stats`` that are not finite;
    ``yy`` only with K > 1 folds (it enters the cross-validation scores alone)."""
    return [name for part, name in sums.items()
            if getattr(stats, part) is not None and (part != "yy" or len(stats.n) > 1)
            and not np.isfinite(getattr(stats, part)).all()]


def check_target_sums(stats: RidgeStatistics) -> None:
    """Unweighted statistics need finite sums of the targets: ``sum y`` and, with K > 1
    folds (the cross-validation's scores use it), ``sum y^2``. An overflow (``|y|`` above
    about 1e154 squares to more than float64 holds) is named as y's, not as a singular
    system of the cross-validation later. Weighted statistics: :func:`check_weight_total`."""
    if stats.wsum is not None:
        return
    bad = _not_finite(stats, {"ysum": "sum y", "yy": "sum y^2"})
    if bad:
        raise InputValidationError(
            f"the target's sums overflow float64 ({', '.join(bad)} not finite): y holds values too large for "
            "float64 sums of their squares (above about 1e154). Divide y by a constant (e.g. its standard "
            "deviation): the coefficients and predictions scale with it, the chosen alpha does not."
        )


def check_weight_total(stats: RidgeStatistics) -> None:
    """Weighted statistics need a positive total weight (dask weights are only summed in
    the pass; numpy weights are checked before it by :func:`check_sample_weight`) and
    finite weighted sums: an overflow is named as the weights' (not as a singular system
    later). Unweighted ones: :func:`check_target_sums`."""
    if stats.wsum is None:
        check_target_sums(stats)
        return
    bad = _not_finite(stats, _WEIGHTED_SUMS)
    if bad:
        with np.errstate(over="ignore"):
            total = float(stats.wsum.sum())
        where = ("the weights themselves sum to more than float64 holds" if "sum w" in bad else
                 f"the weights sum to {total:.3g} and their products with the features or targets "
                 "do not fit in float64")
        raise InputValidationError(
            f"the sample-weighted statistics overflow float64 ({', '.join(bad)} not finite): "
            f"{where}. {_WEIGHT_FIX}"
        )
    if not stats.wsum.sum() > 0:
        raise InputValidationError(ZERO_WEIGHT_MESSAGE)
