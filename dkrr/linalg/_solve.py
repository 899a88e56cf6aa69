"""Solving the ridge normal equations from accumulated statistics.

scikit-learn's penalty convention (ALGORITHMS.md section 3): minimise
``||y - Z beta - b||^2 + alpha ||beta||^2``. With an intercept the statistics are centred
with the accumulated means, ``G_c = G - n mu mu^T`` and ``c_c = c - n mu ybar^T``, then
``beta = (G_c + alpha I)^-1 c_c`` and ``b = ybar - mu^T beta``.

Two paths: a Cholesky factorisation of ``G_c + alpha I`` for one alpha, and an
eigendecomposition ``G_c = V diag(lam) V^T`` that gives ``beta(alpha) = V (lam +
alpha)^-1 V^T c_c`` for a whole grid of alphas at O(p^2 t) each.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from ..errors import IllConditionedWarning, InvalidParameterError, SingularSystemError

__all__ = [
    "CONDITION_WARN",
    "center_statistics",
    "check_alpha",
    "eigh_gram",
    "ridge_coefficients",
    "solve_cholesky",
    "solve_eigh",
    "usable_alphas",
]

#: warn (:class:`~dkrr.errors.IllConditionedWarning`, a ``scipy.linalg.LinAlgWarning``) when the
#: condition number exceeds this
CONDITION_WARN = 1e12

_EPS = np.finfo(np.float64).eps


def check_alpha(alpha, name="alpha") -> float:
    """A finite real ``alpha >= 0``, as scikit-learn's ``Ridge``.

    ``alpha = 0`` is accepted (ordinary least squares); the solvers then raise
    :class:`~dkrr.errors.SingularSystemError` when ``G`` is singular (see
    :func:`solve_cholesky`). A negative alpha would make ``G + alpha I`` indefinite or
    nearly singular and the model worse than a constant, so it is refused here.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) or not np.isfinite(alpha):
        raise InvalidParameterError(f"{name} must be a finite real number, got {alpha!r}")
    if alpha < 0:
        raise InvalidParameterError(
            f"{name}={alpha!r} is negative: the ridge penalty must be >= 0 (as scikit-learn's "
            "Ridge); use alpha=0 for least squares or a positive alpha to regularise."
        )
    return float(alpha)


def center_statistics(G, c, zsum, n, ysum, fit_intercept: bool):
    """Centred ``(G_c, c_c, mu, ybar)``; without intercept the inputs and zero means.

    ``G`` (p, p) or None (then ``G_c`` is None), ``c`` (p, t), ``zsum`` (p,), ``n`` scalar, ``ysum`` (t,). With sample
    weights ``n`` is the weight sum and the other statistics are weighted sums: the means
    are then the weighted means (scikit-learn's ``Ridge(sample_weight=...)``).
    """
    if not fit_intercept:
        return G, c, np.zeros(zsum.shape[0]), np.zeros(c.shape[1])
    n = float(n)
    mu = zsum / n
    ybar = ysum / n
    Gc = None if G is None else G - n * np.outer(mu, mu)
    cc = c - n * np.outer(mu, ybar)
    return Gc, cc, mu, ybar


def _singular(alpha, detail):
    return SingularSystemError(
        f"the ridge system G + alpha*I with alpha={alpha!r} is singular or not positive "
        f"definite ({detail}); use a larger alpha (alpha > 0 always gives a positive "
        "definite system), fewer features, or more rows."
    )


def _check_finite_system(G, c):
    if not (np.isfinite(G).all() and np.isfinite(c).all()):
        raise SingularSystemError(
            "the accumulated statistics are not finite (overflow: extremely large input "
            "values?); rescale the data, e.g. standardise the columns of X and y."
        )


def _warn_condition(cond, alpha):
    if not np.isfinite(cond) or cond > CONDITION_WARN:
        warnings.warn(
            f"ill-conditioned ridge system: condition number {cond:.3g} of G + alpha*I "
            f"with alpha={alpha!r}; the coefficients may be inaccurate. Increase alpha.",
            IllConditionedWarning,
            stacklevel=3,
        )


def solve_cholesky(G, c, alpha: float) -> np.ndarray:
    """``(G + alpha I)^-1 c`` by Cholesky (``G`` symmetric p x p, ``c`` p x t).

    Warns with :class:`~dkrr.errors.IllConditionedWarning` (a ``scipy.linalg.LinAlgWarning``) when the condition number (LAPACK
    ``pocon`` estimate, 1-norm) exceeds :data:`CONDITION_WARN`.

    Raises
    ------
    SingularSystemError
        ``G + alpha I`` is not positive definite (e.g. ``alpha <= 0`` on a
        rank-deficient G) or not finite.
    """
    _check_finite_system(G, c)
    A = G + alpha * np.eye(G.shape[0])
    anorm = np.abs(A).sum(axis=0).max()
    try:
        cf = scipy.linalg.cho_factor(A, lower=False, check_finite=False)
    except np.linalg.LinAlgError as exc:
        raise _singular(alpha, f"Cholesky failed: {exc}") from None
    (pocon,) = scipy.linalg.get_lapack_funcs(("pocon",), (A,))
    rcond, info = pocon(cf[0], anorm, uplo="L" if cf[1] else "U")
    if info != 0 or rcond <= 0 or rcond < _EPS:
        raise _singular(alpha, f"reciprocal condition number {rcond:.3g}")
    _warn_condition(1.0 / rcond, alpha)
    return scipy.linalg.cho_solve(cf, c, check_finite=False)


def eigh_gram(G) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and eigenvectors of the symmetric ``G``."""
    _check_finite_system(G, np.zeros(1))
    lam, V = scipy.linalg.eigh(G, check_finite=False)
    return lam, V


def usable_alphas(lam, alphas) -> np.ndarray:
    """Mask of the alphas for which ``lam[0] + alpha`` is above the rounding noise of the
    eigenvalues ``lam`` (ascending) of a symmetric Gram: ``G + alpha I`` is then positive
    definite, as :func:`solve_eigh` requires."""
    alphas = np.asarray(alphas, dtype=np.float64)
    if not lam.size:
        return np.ones(alphas.shape, dtype=bool)
    return lam[0] + alphas > _spectrum_floor(lam)


def _spectrum_floor(lam) -> float:
    scale = max(float(np.abs(lam).max()), 1.0) if lam.size else 1.0
    return lam.size * _EPS * scale  # rounding noise of the eigenvalues


def _check_spectrum(lam, alphas):
    """Raise for alphas that leave ``lam + alpha`` non-positive; warn on bad conditioning."""
    floor = _spectrum_floor(lam)
    for a in alphas:
        if lam[0] + a <= floor:
            raise _singular(float(a), f"smallest eigenvalue of G + alpha*I is {lam[0] + a:.3g}")
    conds = (lam[-1] + alphas) / (lam[0] + alphas)
    i = int(np.argmax(conds))
    _warn_condition(float(conds[i]), float(alphas[i]))


def solve_eigh(lam, V, c, alphas) -> np.ndarray:
    """``beta(alpha) = V (lam + alpha)^-1 V^T c`` for every alpha: shape (n_alphas, p, t)."""
    alphas = np.asarray(alphas, dtype=np.float64)
    _check_spectrum(lam, alphas)
    q = V.T @ c  # (p, t)
    gam = q[None, :, :] / (lam[None, :, None] + alphas[:, None, None])  # (a, p, t)
    a, p, t = gam.shape
    B = V @ gam.transpose(1, 0, 2).reshape(p, a * t)
    return B.reshape(p, a, t).transpose(1, 0, 2)


def ridge_coefficients(stats, alpha: float, fit_intercept: bool, solver: str = "cholesky"):
    """Coefficients ``beta`` (p, t) and intercept (t,) from one-fold statistics.

    Parameters
    ----------
    stats : RidgeStatistics
        Totals (``stats.total()``); weighted when it has ``wsum``.
    alpha : float
    fit_intercept : bool
    solver : {"cholesky", "eigh"}
    """
    G, c = stats.G[0], stats.c[0]
    Gc, cc, mu, ybar = center_statistics(G, c, stats.zsum[0], stats.weights()[0], stats.ysum[0], fit_intercept)
    if solver == "cholesky":
        beta = solve_cholesky(Gc, cc, alpha)
    elif solver == "eigh":
        lam, V = eigh_gram(Gc)
        beta = solve_eigh(lam, V, cc, [alpha])[0]
    else:
        raise InvalidParameterError(f"solver must be 'auto', 'cholesky' or 'eigh', got {solver!r}")
    intercept = ybar - mu @ beta
    return beta, intercept
