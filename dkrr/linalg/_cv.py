"""K-fold cross-validation of ridge regression from per-fold statistics alone.

ALGORITHMS.md section 3. The training statistics of fold k are the totals minus fold k;
one Householder tridiagonalisation of the (centred) training Gram serves the whole alpha
grid; the
validation error of fold k is expanded with the fold's statistics. With an intercept
the validation rows are centred with the *training* means, since
``y - Z beta - b = (y - ybar) - (Z - mu) beta`` when ``b = ybar - mu^T beta``::

    G'_k  = G_k - zsum_k mu^T - mu zsum_k^T + n_k mu mu^T
    c'_k  = c_k - zsum_k ybar^T - mu ysum_k^T + n_k mu ybar^T
    yy'_k = yy_k - 2 ybar ysum_k + n_k ybar^2
    SSE_k(alpha) = yy'_k - 2 beta^T c'_k + beta^T G'_k beta     (per target)

No second pass over the data is needed, for any number of alphas. With sample weights
``n`` is the weight sum ``wsum`` everywhere above and the fold's MSE is its weighted SSE
over ``wsum_k * t`` (scikit-learn's weighted mean squared error).

A grid of gammas (:func:`select_gamma_alpha`) scores one statistics object per gamma from
the same pass; the best (gamma, alpha) pair has the least mean MSE.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import GridEdgeWarning, InputValidationError, InvalidParameterError, SingularAlphaWarning
from ._solve import TridiagonalGram, _singular, center_statistics, solve_tridiagonal, usable_alphas

__all__ = [
    "AUTO_GAMMA_FACTORS",
    "auto_gamma_factors",
    "auto_gammas",
    "check_alphas",
    "check_fold_weights",
    "check_folds",
    "check_rows_for_folds",
    "check_gammas",
    "cross_validate_statistics",
    "default_alphas",
    "fold_arguments",
    "fold_scores",
    "fold_validation_mse",
    "report_unusable",
    "score_fold",
    "score_grid",
    "select_alpha",
    "select_gamma_alpha",
    "warn_grid_edge",
]


def check_alphas(alphas) -> np.ndarray:
    """A non-empty 1-D float array of finite alphas, each ``>= 0`` (the rule of
    :func:`~dkrr.linalg._solve.check_alpha`)."""
    try:
        arr = np.asarray(alphas, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"alphas must be a sequence of numbers, got {alphas!r}") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0 or not np.isfinite(arr).all():
        raise InvalidParameterError(f"alphas must be a non-empty 1-D sequence of finite numbers, got {alphas!r}")
    if (arr < 0).any():
        raise InvalidParameterError(
            f"alphas={alphas!r} contains the negative value {float(arr[arr < 0][0])!r}: every "
            "ridge penalty must be >= 0 (as scikit-learn's Ridge)."
        )
    return arr


#: ``gammas="auto"``: the grid ``gamma * AUTO_GAMMA_FACTORS`` around the estimator's
#: (resolved) gamma, which stays the middle width (the default alphas follow its Gram), chosen
#: by ``benchmarks/bench_defaults.py`` (docs/ALGORITHMS.md 3.6)
AUTO_GAMMA_FACTORS = 2.0 ** np.arange(-3, 3)
#: the factors of ``gammas="auto"`` before: a model file saved then records that grid
EARLIER_AUTO_GAMMA_FACTORS = (2.0 ** np.arange(-2, 3),)


def check_gammas(gammas, *, kernel: str = "gaussian", n_folds: int = 2, sampling=None) -> np.ndarray | str | None:
    """The gamma grid of an estimator: None, ``"auto"`` (the grid ``gamma_ *``
    :data:`AUTO_GAMMA_FACTORS` around the resolved gamma, made by :func:`auto_gammas`), or
    a non-empty 1-D float array of finite widths, each ``> 0`` (multipliers of an ARD
    gamma); only with a kernel that has a width, ``cv`` (``n_folds > 1``) and no leverage
    ``sampling``."""
    from ..features._nonlinear import WIDTH_KERNELS

    if gammas is None:
        return None
    if isinstance(gammas, str) and gammas != "auto":
        raise InvalidParameterError(
            f"gammas={gammas!r} is neither 'auto' (the grid gamma * {AUTO_GAMMA_FACTORS.tolist()} around "
            "the gamma or its rule) nor a sequence of positive numbers"
        )
    if n_folds < 2:
        raise InvalidParameterError(
            f"gammas={gammas!r} is given but cv is None: a grid of gammas is scored by "
            "K-fold cross-validation, so pass cv (e.g. cv=5), or drop gammas and set gamma."
        )
    if kernel not in WIDTH_KERNELS:
        raise InvalidParameterError(
            f"gammas is a grid of kernel widths; kernel={kernel!r} has no gamma. Drop gammas or "
            f"use one of the kernels {list(WIDTH_KERNELS)}."
        )
    if sampling is not None:
        raise InvalidParameterError(
            f"gammas cannot be combined with sampling={sampling!r}: leverage sampling "
            "chooses frequencies for one kernel width. Drop sampling, or fit one gamma at a time."
        )
    if isinstance(gammas, str):
        return gammas
    try:
        arr = np.asarray(gammas, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"gammas must be a sequence of positive numbers, got {gammas!r}") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0 or not np.isfinite(arr).all() or (arr <= 0).any():
        raise InvalidParameterError(
            f"gammas must be a non-empty 1-D sequence of finite positive numbers (kernel "
            f"widths), got {gammas!r}"
        )
    return arr


def auto_gammas(gamma: float) -> np.ndarray:
    """The grid of ``gammas="auto"``: ``gamma * AUTO_GAMMA_FACTORS``."""
    return float(gamma) * AUTO_GAMMA_FACTORS


def auto_gamma_factors(n: int) -> np.ndarray | None:
    """The factors of a ``gammas="auto"`` grid of ``n`` widths: today's, or those of an
    earlier release (:data:`EARLIER_AUTO_GAMMA_FACTORS`, for model files saved then); None
    when no release had ``n``."""
    return next((f for f in (AUTO_GAMMA_FACTORS, *EARLIER_AUTO_GAMMA_FACTORS) if f.size == n), None)


def check_folds(n_per_fold: np.ndarray, fold_weights: np.ndarray | None = None) -> None:
    """Every fold needs rows, and every training set at least two; with sample weights
    (`fold_weights`, each fold's weight sum, checked first: :func:`check_fold_weights`)
    the rows counted are those of positive weight."""
    if fold_weights is not None:
        check_fold_weights(fold_weights)
    K = len(n_per_fold)
    n = int(n_per_fold.sum())
    rows = "rows" if fold_weights is None else "rows of positive weight"
    if n < 2 * K or (n_per_fold == 0).any():
        raise InputValidationError(
            f"too few {rows} for {K}-fold cross-validation: {n} {rows}, per fold "
            f"{n_per_fold.tolist()}; every fold needs rows and n >= 2 * cv = {2 * K}. Use "
            "fewer folds (cv) or more data."
        )


def check_rows_for_folds(n: int, K: int) -> None:
    """Before the pass: ``K``-fold cross-validation needs ``n >= 2 K`` rows (every fold
    non-empty, every training set at least two rows); the message names both numbers."""
    if K > 1 and n < 2 * K:
        larger = f"cv={K} is larger than the number of rows of X ({n})" if K > n else (
            f"cv={K} folds need n >= 2 * cv = {2 * K} rows, X has {n}")
        fix = f"use cv <= {n // 2} (n // 2)" if n >= 4 else "use cv=None (no cross-validation; --no-cv)"
        raise InputValidationError(
            f"too few rows for {K}-fold cross-validation: {larger}; every fold needs rows and "
            f"n >= 2 * cv = {2 * K}. {fix[0].upper() + fix[1:]} or give more data."
        )


def check_fold_weights(fold_weights: np.ndarray) -> None:
    """With sample weights every fold needs a positive weight sum (its MSE divides by it)."""
    w = np.asarray(fold_weights, dtype=np.float64)
    if (w <= 0).any():
        raise InputValidationError(
            f"a cross-validation fold has zero total sample_weight (weight per fold "
            f"{w.tolist()}): its validation error is undefined. Use fewer folds (cv) or give "
            "more rows a positive weight."
        )


def cross_validate_statistics(stats, alphas, fit_intercept: bool, *, default_grid: bool = False) -> np.ndarray:
    """Validation mean squared error of every (fold, alpha): shape (K, n_alphas).

    The MSE of a fold is its sum of squared errors over rows and targets divided by
    ``n_k * t`` (weighted statistics: the weighted SSE divided by ``wsum_k * t``).
    Alphas unusable in a fold are scored ``inf`` and reported (:func:`report_unusable`).

    Parameters
    ----------
    stats : RidgeStatistics
        Per-fold statistics with K >= 2 folds.
    alphas : array of shape (n_alphas,)
    fit_intercept : bool
    default_grid : bool
        ``alphas`` is dkrr's default grid (:func:`default_alphas`), not the user's: its
        alphas below the statistics' rounding are scored ``inf`` without a warning unless
        the best scored alpha is the least scored one (:func:`report_unusable`).
    """
    alphas = check_alphas(alphas)
    mse, lam_min = fold_scores(stats, alphas, fit_intercept)
    report_unusable(alphas, mse, lam_min, stats.weights(), default_grid=default_grid)
    return mse


def fold_scores(stats, alphas, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`cross_validate_statistics` without the report: ``(mse, lam_min)``, the
    validation MSE of every (fold, alpha), shape (K, n_alphas), and each fold's smallest
    training Gram eigenvalue, shape (K,) (a grid of maps reports once, for the chosen map)."""
    alphas = check_alphas(alphas)
    check_folds(stats.n, stats.wsum)
    K = stats.n_folds
    tot = stats.total()
    mse = np.full((K, alphas.size), np.inf)
    lam_min = np.full(K, np.inf)
    for k in range(K):
        mse[k], lam_min[k] = score_fold(*fold_arguments(tot, stats.fold(k)), alphas, fit_intercept)
    return mse, lam_min


def fold_arguments(total, fold) -> tuple[tuple, tuple]:
    """The ``(total, fold)`` arguments of :func:`score_fold` from one-fold statistics of
    all rows (``total``, :meth:`~dkrr.linalg.RidgeStatistics.total`) and of fold k's rows
    (:meth:`~dkrr.linalg.RidgeStatistics.fold`), G unpacked: row counts, or weight sums
    with sample weights."""
    def size(s):
        return int(s.n[0]) if s.wsum is None else float(s.wsum[0])

    return ((total.G[0], total.c[0], total.zsum[0], total.ysum[0], size(total)),
            (fold.G[0], fold.c[0], fold.zsum[0], fold.ysum[0], fold.yy[0], size(fold)))


def score_fold(total, fold, alphas, fit_intercept: bool) -> tuple[np.ndarray, float]:
    """One fold of :func:`cross_validate_statistics`: ``(mse, lam_min)``, the validation
    MSE of every alpha (``inf`` where the training ``G' + alpha I`` is not positive
    definite beyond rounding) and the least eigenvalue of the centred training Gram.
    One tridiagonalisation ``G' = Q T Q^T`` serves every alpha (:func:`solve_tridiagonal`).

    ``total`` is ``(G, c, zsum, ysum, n)`` of all rows, ``fold`` ``(G_k, c_k, zsum_k,
    ysum_k, yy_k, n_k)`` of the fold's rows (``n`` weight sums with sample weights)."""
    G, c, zs, ys, n = total
    Gk, ck, zk, yk, yyk, nk = fold
    t = c.shape[1]
    mse = np.full(alphas.size, np.inf)
    Gc, cc, mu, ybar = center_statistics(G - Gk, c - ck, zs - zk, n - nk, ys - yk, fit_intercept)
    tri = TridiagonalGram(Gc, overwrite=True)  # Gc is this fold's temporary
    del Gc
    ok = usable_alphas(tri, alphas)  # G' + alpha I positive definite beyond rounding
    lam_min = tri.lam_min
    if not ok.any():
        return mse, lam_min
    B = solve_tridiagonal(tri, cc, alphas[ok], warn=False)  # (a, p, t); the final model's cond is said
    a, p, _ = B.shape
    GB = (Gk @ B.transpose(1, 0, 2).reshape(p, a * t)).reshape(p, a, t)
    quad = np.einsum("apt,pat->at", B, GB)  # beta^T G_k beta
    mse[ok] = fold_validation_mse(B, quad, ck, zk, yk, yyk, nk, mu if fit_intercept else None, ybar)
    return mse, lam_min


def fold_validation_mse(B, quad, c, zsum, ysum, yy, n, mu=None, ybar=None) -> np.ndarray:
    """Validation MSE of one fold for every coefficient set: the scoring kernel of both CVs.

    The expansion of section 3.6 (module docstring): with an intercept the fold's rows are
    centred with the *training* means ``mu``, ``ybar``, so ``SSE = yy' - 2 beta^T c' +
    beta^T G' beta`` with ``c' = c - zsum ybar^T - mu ysum^T + n mu ybar^T``, ``yy' = yy -
    2 ybar ysum + n ybar^2`` and ``beta^T G' beta = quad - 2 (zsum^T beta)(mu^T beta) + n
    (mu^T beta)^2``. The Gram path (:func:`cross_validate_statistics`) gets ``quad`` from
    the fold's Gram, the matrix-free CV (:mod:`dkrr.linalg._pcg_cv`) from its validation
    pass; everything else is the fold's linear statistics.

    Parameters
    ----------
    B : ndarray (a, p, t)
        Coefficients fitted on the fold's training rows (a sets, e.g. one per alpha).
    quad : ndarray (a, t)
        ``beta^T G_k beta = ||Z_k beta||^2`` over the fold's rows (uncentred; weighted with
        sample weights).
    c, zsum, ysum, yy : ndarray (p, t), (p,), (t,), (t,)
        The fold's statistics.
    n : float
        The fold's rows (its weight sum with sample weights).
    mu, ybar : ndarray (p,), (t,) or None
        The training rows' means (None without intercept).

    Returns
    -------
    ndarray (a,): the SSE over rows and targets divided by ``n t``; a target's SSE that
    rounding takes below 0 counts as 0.
    """
    lin = np.einsum("apt,pt->at", B, c)
    if mu is not None:
        zb = np.einsum("p,apt->at", zsum, B)
        mb = np.einsum("p,apt->at", mu, B)
        yy = yy - 2.0 * ybar * ysum + n * ybar**2
        lin = lin - zb * ybar - mb * ysum + n * mb * ybar
        quad = quad - 2.0 * zb * mb + n * mb**2
    # The expansion cancels where the fit is near exact: its value then carries the rounding
    # of yy', and below 0 it is rounding alone (an SSE is >= 0): read it as 0. A negative
    # score was chosen as the best and failed the saved model's check (fold_mse >= 0).
    sse = np.maximum(yy[None, :] - 2.0 * lin + quad, 0.0)
    return sse.sum(axis=1) / (n * B.shape[2])


def report_unusable(alphas, mse, lam_min, fold_weights, *, default_grid: bool = False, chosen: int = 0,
                    evidence: bool = False) -> None:
    """Alphas scored ``inf`` (a fold's ``G' + alpha I`` not positive definite beyond the
    rounding of the statistics; always the smallest of the grid): a
    :class:`~dkrr.errors.SingularAlphaWarning`, or, when no alpha is usable in every fold,
    the :class:`~dkrr.errors.SingularSystemError` of the largest alpha.

    ``mse`` (K, n_alphas) and ``lam_min`` (K,) of one map, or (m, K, n_alphas) and (m, K)
    of a grid of m maps (gammas): then the error only when no map has a usable alpha, and
    the warning of the ``chosen`` map only (the one whose alpha the fit takes), once, as the
    grid-edge warnings speak of the chosen point only. Of dkrr's default grid
    (``default_grid``), whose bottom lies below what float32 statistics resolve at smooth
    widths, they are said only when the chosen map's best scored alpha
    (:func:`select_alpha`'s choice among the scored ones) is its least scored one: only then
    may its best alpha lie among them. ``evidence``: the scores are ``cv="evidence"``'s minus
    log evidence (one "fold", the whole centred Gram), and the warning says so."""
    alphas = np.asarray(alphas, dtype=np.float64)
    mse = np.asarray(mse, dtype=np.float64)
    lam_min = np.asarray(lam_min, dtype=np.float64)
    if mse.ndim == 2:
        mse, lam_min, chosen = mse[None], lam_min[None], 0
    bad = ~np.isfinite(mse).all(axis=1)  # (m, n_alphas)
    if bad.all():
        j, k = np.unravel_index(int(np.argmin(lam_min)), lam_min.shape)
        a = float(alphas.max())
        raise _singular(a, f"in cross-validation fold {k}, whose training Gram has smallest eigenvalue "
                           f"{lam_min[j, k]:.3g}" + (f" (of {len(mse)} maps, none has one)" if len(mse) > 1 else ""))
    bad, lam_min = bad[chosen], lam_min[chosen]
    if not bad.any():
        return
    k = int(np.argmin(lam_min))
    usable = np.flatnonzero(~bad)
    best = usable[select_alpha(alphas[usable], mse[chosen][:, usable], fold_weights)[0]]
    if default_grid and alphas[best] > alphas[usable].min():
        return
    lead = ("the best scored alpha of dkrr's default grid is the least one it could score, and alphas "
            if default_grid else "alphas ")
    if evidence:
        system, gram, score = "G_c + alpha*I (G_c the centred Gram)", f"G_c: {lam_min[k]:.3g}", "-inf (log evidence)"
    else:
        system, gram, score = ("a cross-validation fold's training system G + alpha*I",
                               f"a training Gram: {lam_min[k]:.3g}, fold {k}", "inf")
    warnings.warn(
        f"{lead}{[float(f'{a:.4g}') for a in alphas[bad]]} leave {system} not positive definite at the rounding "
        f"of the statistics (smallest eigenvalue of {gram}): they were scored {score} and cannot be chosen. The "
        "statistics carry the rounding of their precision (float32 statistics, those of precision='float32' "
        "and of the cross-validation of the default precision='auto', resolve alphas down to about "
        "eps32 ||G||: precision='float64' scores smaller ones), or the Gram is rank-deficient (more features "
        "than rows).",
        SingularAlphaWarning,
        stacklevel=4,
    )


def select_alpha(alphas, mse, n_per_fold) -> tuple[int, np.ndarray, np.ndarray]:
    """Index of the best alpha, mean MSE (weighted by fold size) and std over folds.

    Ties (means within 1e-12 relative of the best) go to the larger alpha.
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    w = np.asarray(n_per_fold, dtype=np.float64)
    mean = (w[:, None] * mse).sum(axis=0) / w.sum()
    with np.errstate(invalid="ignore"):  # an unusable alpha (inf in a fold) has std nan
        std = mse.std(axis=0)
    best = mean.min()
    tied = np.nonzero(mean <= best + 1e-12 * abs(best))[0]
    idx = int(tied[np.argmax(alphas[tied])])
    return idx, mean, std


def select_gamma_alpha(gammas, alphas, mse, fold_weights) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Best (gamma, alpha) pair of a grid: indices, mean MSE and std over folds.

    Parameters
    ----------
    gammas : array (n_gammas,)
    alphas : array (n_alphas,)
    mse : array (n_gammas, K, n_alphas)
        Fold MSEs of every gamma (:func:`cross_validate_statistics` per gamma).
    fold_weights : array (K,)
        Rows (or weight sums) per fold: the mean is weighted by them.

    Returns
    -------
    (gamma_index, alpha_index, mean (n_gammas, n_alphas), std (n_gammas, n_alphas))
        The least mean MSE; ties (within 1e-12 relative of the best) go to the larger
        alpha, then to the smaller gamma (the smoother model in both).
    """
    gammas = np.asarray(gammas, dtype=np.float64)
    alphas = np.asarray(alphas, dtype=np.float64)
    w = np.asarray(fold_weights, dtype=np.float64)
    mse = np.asarray(mse, dtype=np.float64)
    mean = np.einsum("k,gka->ga", w, mse) / w.sum()
    with np.errstate(invalid="ignore"):
        std = mse.std(axis=1)
    best = mean.min()
    gi, ai = np.nonzero(mean <= best + 1e-12 * abs(best))
    order = np.lexsort((gammas[gi], -alphas[ai]))  # larger alpha first, then smaller gamma
    return int(gi[order[0]]), int(ai[order[0]]), mean, std


def score_grid(alphas, gammas, fold_mse, fold_sizes, fold_weights) -> tuple[int, int, dict, float]:
    """Choose from the fold errors of an alpha grid (and a gamma grid, or None).

    ``fold_mse`` is (K, n_alphas), or (n_gammas, K, n_alphas) with gammas; the means
    are weighted by ``fold_weights`` (rows, or weight sums with sample weights).

    Returns
    -------
    (gamma_index, alpha_index, cv_results, best_score)
        ``gamma_index`` is 0 without gammas. ``cv_results`` holds ``gammas`` (with a
        gamma grid), ``alphas``, ``fold_mse``, ``mean_mse``, ``std_mse`` (the MSE arrays
        with the leading gamma axis when gammas are given) and ``fold_sizes``;
        ``best_score`` is minus the chosen mean MSE.
    """
    if gammas is None:
        gi = 0
        ai, mean, std = select_alpha(alphas, fold_mse, fold_weights)
        best = mean[ai]
        results = {}
    else:
        gi, ai, mean, std = select_gamma_alpha(gammas, alphas, fold_mse, fold_weights)
        best = mean[gi, ai]
        results = {"gammas": np.asarray(gammas, dtype=np.float64)}
    results.update(alphas=alphas, fold_mse=fold_mse, mean_mse=mean, std_mse=std, fold_sizes=fold_sizes)
    return gi, ai, results, float(-best)


def warn_grid_edge(name: str, grid, chosen) -> None:
    """Warn (:class:`~dkrr.errors.GridEdgeWarning`) when ``chosen`` is the smallest or the
    largest of at least two distinct grid values: the best value may lie beyond the grid.

    Parameters
    ----------
    name : str
        The parameter (``"alpha"``, ``"gamma"``), as the user passes its grid (``name + "s"``).
    grid : array-like of float
    chosen : float
    """
    values = np.unique(np.asarray(grid, dtype=np.float64))
    if values.size < 2 or values[0] < chosen < values[-1]:
        return
    low = chosen <= values[0]
    if low and chosen <= 0:  # alpha = 0 (least squares) has nothing below it
        return
    warnings.warn(
        f"the chosen {name}={float(chosen)!r} is the {'smallest' if low else 'largest'} value of "
        f"{name}s={values.tolist()}: the best {name} may lie beyond the grid. Extend {name}s "
        f"{'below' if low else 'above'} it (e.g. add {float(chosen) * (0.1 if low else 10.0)!r}).",
        GridEdgeWarning,
        stacklevel=4,
    )


#: the default alpha grid is ``s * 10.0 ** DEFAULT_ALPHA_EXPONENTS`` (ALGORITHMS.md 3.6)
DEFAULT_ALPHA_EXPONENTS = np.arange(-7, 2, dtype=np.float64)


def default_alphas(stats, fit_intercept: bool, *, scale: float | None = None) -> np.ndarray:
    """The grid scored when ``cv`` is given without ``alphas``: ``s * 10**(-7 .. 1)``.

    ``s`` is the mean diagonal of the (centred, with an intercept) total Gram, ``trace(G')
    / p``: the size of the penalty that matches the features' own scale, so the grid
    follows the data (n, the feature width, the kernel) and costs no pass. ``scale``
    gives ``s`` directly (leverage sampling, whose Gram is not known before its CV).
    """
    if scale is None:
        tot = stats.total()
        G, zsum, n = tot.G[0], tot.zsum[0], float(tot.weights()[0])
        trace = float(np.trace(G)) - (float(zsum @ zsum) / n if fit_intercept and n > 0 else 0.0)
        scale = trace / G.shape[0]
    if not (np.isfinite(scale) and scale > 0):
        scale = 1.0
    return float(scale) * 10.0**DEFAULT_ALPHA_EXPONENTS
