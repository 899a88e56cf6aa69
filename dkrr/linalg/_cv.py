"""K-fold cross-validation of ridge regression from per-fold statistics alone.

ALGORITHMS.md section 3. The training statistics of fold k are the totals minus fold k;
one eigendecomposition of the (centred) training gram serves the whole alpha grid; the
validation error of fold k is expanded with the fold's statistics. With an intercept
the validation rows are centred with the *training* means, since
``y - Z beta - b = (y - ybar) - (Z - mu) beta`` when ``b = ybar - mu^T beta``::

    G'_k  = G_k - zsum_k mu^T - mu zsum_k^T + n_k mu mu^T
    c'_k  = c_k - zsum_k ybar^T - mu ysum_k^T + n_k mu ybar^T
    yy'_k = yy_k - 2 ybar ysum_k + n_k ybar^2
    SSE_k(alpha) = yy'_k - 2 beta^T c'_k + beta^T G'_k beta     (per target)

No second pass over the data is needed, for any number of alphas.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputValidationError, InvalidParameterError
from ._solve import center_statistics, eigh_gram, solve_eigh

__all__ = ["check_alphas", "check_folds", "cross_validate_statistics", "select_alpha"]


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


def check_folds(n_per_fold: np.ndarray) -> None:
    """Every fold needs rows, and every training set at least two."""
    K = len(n_per_fold)
    n = int(n_per_fold.sum())
    if n < 2 * K or (n_per_fold == 0).any():
        raise InputValidationError(
            f"too few rows for {K}-fold cross-validation: {n} rows, rows per fold "
            f"{n_per_fold.tolist()}; every fold needs rows and n >= 2 * cv = {2 * K}. Use "
            "fewer folds (cv) or more data."
        )


def cross_validate_statistics(stats, alphas, fit_intercept: bool) -> np.ndarray:
    """Validation mean squared error of every (fold, alpha): shape (K, n_alphas).

    The MSE of a fold is its sum of squared errors over rows and targets divided by
    ``n_k * t``.

    Parameters
    ----------
    stats : RidgeStatistics
        Per-fold statistics with K >= 2 folds.
    alphas : array of shape (n_alphas,)
    fit_intercept : bool
    """
    alphas = check_alphas(alphas)
    check_folds(stats.n)
    K = stats.n_folds
    tot = stats.total()
    G, c, zs, ys = tot.G[0], tot.c[0], tot.zsum[0], tot.ysum[0]
    n = int(tot.n[0])
    t = c.shape[1]
    mse = np.empty((K, alphas.size))
    for k in range(K):
        Gk, ck, zk, nk, yk, yyk = stats.G[k], stats.c[k], stats.zsum[k], int(stats.n[k]), stats.ysum[k], stats.yy[k]
        Gtr, ctr = G - Gk, c - ck
        Gc, cc, mu, ybar = center_statistics(Gtr, ctr, zs - zk, n - nk, ys - yk, fit_intercept)
        lam, V = eigh_gram(Gc)
        B = solve_eigh(lam, V, cc, alphas)  # (a, p, t)
        if fit_intercept:
            Gv = Gk - np.outer(zk, mu) - np.outer(mu, zk) + nk * np.outer(mu, mu)
            cv = ck - np.outer(zk, ybar) - np.outer(mu, yk) + nk * np.outer(mu, ybar)
            yyv = yyk - 2.0 * ybar * yk + nk * ybar**2
        else:
            Gv, cv, yyv = Gk, ck, yyk
        a, p, _ = B.shape
        Bm = B.transpose(1, 0, 2).reshape(p, a * t)
        GB = (Gv @ Bm).reshape(p, a, t)
        quad = np.einsum("pat,pat->at", B.transpose(1, 0, 2), GB)
        lin = np.einsum("apt,pt->at", B, cv)
        sse = yyv[None, :] - 2.0 * lin + quad  # (a, t)
        mse[k] = sse.sum(axis=1) / (nk * t)
    return mse


def select_alpha(alphas, mse, n_per_fold) -> tuple[int, np.ndarray, np.ndarray]:
    """Index of the best alpha, mean MSE (weighted by fold size) and std over folds.

    Ties (means within 1e-12 relative of the best) go to the larger alpha.
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    w = np.asarray(n_per_fold, dtype=np.float64)
    mean = (w[:, None] * mse).sum(axis=0) / w.sum()
    std = mse.std(axis=0)
    best = mean.min()
    tied = np.nonzero(mean <= best + 1e-12 * abs(best))[0]
    idx = int(tied[np.argmax(alphas[tied])])
    return idx, mean, std
