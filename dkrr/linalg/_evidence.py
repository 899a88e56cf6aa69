"""Bayesian reading of the ridge in feature space: evidence and predictive variance.

Random-feature ridge regression is Bayesian linear regression on the features ``z(x)``
(docs/ALGORITHMS.md section 3.11):

    y = z(x)^T w + b + e,   e ~ N(0, s^2 / w_row),   w ~ N(0, (s^2 / alpha) I),

with a flat prior on the intercept ``b`` (``fit_intercept=True``). The posterior mean of
``w`` is the ridge solution ``(G_c + alpha I)^-1 c_c``, so every quantity below follows
from the statistics the one pass already streams (centred Gram ``G_c``, ``c_c``, the
centred sum of squares of y, the row count) and one p x p factorisation.

* **Log evidence** (restricted marginal likelihood): the log density of y's ``m``
  contrasts orthogonal to the constant (``m = n - 1`` with an intercept, which integrates
  the intercept out as REML does; ``m = n`` and y itself without). With the eigenvalues
  ``lam`` of ``G_c`` and ``q = V^T c_c``, the residual quadratic form is
  ``R(alpha) = y_c^T y_c - sum_i q_i^2 / (lam_i + alpha)`` (Woodbury) and
  ``log|I + Z_c Z_c^T / alpha| = sum_i log(1 + lam_i / alpha)`` (Sylvester), so

      log p(y | alpha, s^2) = -m/2 log(2 pi s^2) - 1/2 sum_i log(1 + lam_i/alpha) - R/(2 s^2).

  The noise variance is profiled out at its maximum, ``s^2 = R / m``:
  ``log p = -m/2 (log(2 pi R / m) + 1) - 1/2 sum_i log(1 + lam_i / alpha)``. Several
  targets are independent given alpha (one ``s^2`` each); their log evidences add. With
  sample weights the value omits the constant ``1/2 sum log w_row``, which depends on
  neither alpha nor the features.
* **Predictive variance** at a row with centred features ``d = z(x) - mu``:
  ``s^2 (d^T (G_c + alpha I)^-1 d + 1 / W)`` for the latent function (``W`` the row count
  or weight sum: the intercept's posterior variance), plus ``s^2`` for a new observation.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg

from ..errors import InvalidParameterError
from ._solve import TridiagonalGram, _spectrum_floor

__all__ = [
    "bayes_posterior",
    "evidence_from_tridiagonal",
    "evidence_grid",
    "posterior_factor",
    "predictive_variance",
]


def residual_floor(yy) -> np.ndarray:
    """The least residual ``R`` read as positive, per target: 64 eps of the targets' sum
    of squares ``yy`` (uncentred), which bounds the rounding of ``R``, a difference of such
    sums. A target constant on its rows of positive weight, with zero-weight rows about,
    left a residual of rounding (1e-15) read as a noise variance: a posterior of std 5e-8,
    and ``cv="evidence"`` chose an alpha on its fake evidence."""
    return 64.0 * np.finfo(np.float64).eps * np.abs(np.asarray(yy, dtype=np.float64))


def evidence_from_tridiagonal(tri: TridiagonalGram, q, yyc, m, alphas,
                              floor=0.0) -> tuple[np.ndarray, np.ndarray]:
    """Profiled log evidence and noise variance of every (alpha, target).

    Parameters
    ----------
    tri : TridiagonalGram
        ``G_c = Q T Q^T``, the centred Gram reduced.
    q : ndarray (p, t)
        ``Q^T c_c`` (``tri.rotate(c_c)``): the centred cross-statistics in ``T``'s basis.
    yyc : ndarray (t,)
        Centred sums of squares of the targets ``y_c^T y_c``.
    m : int
        Contrasts: the row count, minus one with an intercept.
    alphas : array (n_alphas,)
        Positive penalties.
    floor : float or ndarray (t,), default=0.0
        The least residual read as positive (:func:`residual_floor`).

    Returns
    -------
    log_evidence : ndarray (n_alphas, t)
        ``-inf`` where ``G_c + alpha I`` is not positive definite beyond the rounding of
        its eigenvalues (as the CV scores such alphas ``inf``) or the residual is not positive.
    noise_variance : ndarray (n_alphas, t)
        ``R(alpha) / m`` (``nan`` where the evidence is ``-inf``).
    """
    q = np.asarray(q, dtype=np.float64)
    yyc = np.asarray(yyc, dtype=np.float64)
    alphas = np.asarray(alphas, dtype=np.float64)
    if m < 1:
        raise InvalidParameterError(f"the evidence needs at least one contrast of y, got {m} (rows minus intercept)")
    if np.any(alphas <= 0):
        raise InvalidParameterError(
            f"the evidence needs alphas > 0 (the prior variance s^2 / alpha), got {alphas[alphas <= 0][0]!r}"
        )
    ok = (tri.lam_min + alphas > _spectrum_floor(tri)) if tri.p else np.ones(alphas.shape, dtype=bool)
    logev = np.full((alphas.size, q.shape[1]), -np.inf)
    s2 = np.full((alphas.size, q.shape[1]), np.nan)
    for i in np.flatnonzero(ok):
        a = alphas[i]
        factor = tri.shifted_factor(a)
        R = yyc - np.einsum("pt,pt->t", q, tri.solve_shifted(factor, q))  # (t,)
        logdet = float(np.log(factor[0]).sum()) - tri.p * np.log(a)  # sum_i log(1 + lam_i / a)
        good = R > floor
        s2[i, good] = R[good] / m
        logev[i, good] = -0.5 * m * (np.log(2.0 * np.pi * s2[i, good]) + 1.0) - 0.5 * logdet
    return logev, s2


def posterior_factor(Gc, alpha: float, centre=None) -> np.ndarray:
    """Lower Cholesky factor ``L`` of ``G_c + alpha I`` (the posterior precision of ``w``
    over ``s^2``); :func:`predictive_variance` solves with it. ``centre=(zsum, n)``: ``Gc``
    is the uncentred Gram, centred as :func:`~dkrr.linalg._solve.center_statistics` does
    it. ``L`` is the one ``p x p`` array made (:func:`~dkrr.linalg._solve.shifted_gram`,
    factored in place).

    Raises
    ------
    numpy.linalg.LinAlgError
        ``G_c + alpha I`` is not positive definite.
    """
    from ._solve import shifted_gram

    A = shifted_gram(Gc, alpha, centre)
    (potrf,) = scipy.linalg.get_lapack_funcs(("potrf",), (A,))
    L, info = potrf(A, lower=1, overwrite_a=1, clean=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"{info}-th leading minor of the array is not positive definite")
    return L


def predictive_variance(Z, mu, L, noise_variance, inv_weight_sum: float, *, observation: bool = True) -> np.ndarray:
    """Predictive variance of every row of the feature block ``Z`` (rows, p): shape
    (rows, t) for the ``t`` noise variances.

    ``s^2 (|L^-1 (z - mu)|^2 + 1 / W)``, plus ``s^2`` when ``observation`` (a new noisy
    observation rather than the latent function). ``inv_weight_sum`` is ``1 / W`` with
    an intercept and 0 without; ``mu`` the feature means (zeros without intercept).
    """
    D = np.asarray(Z, dtype=np.float64) - np.asarray(mu, dtype=np.float64)[None, :]
    V = scipy.linalg.solve_triangular(L, D.T, lower=True, check_finite=False)  # (p, rows)
    quad = np.einsum("pr,pr->r", V, V) + float(inv_weight_sum)
    s2 = np.atleast_1d(np.asarray(noise_variance, dtype=np.float64))
    var = quad[:, None] * s2[None, :]
    if observation:
        var = var + s2[None, :]
    return var


def _centred_parts(tot, fit_intercept: bool):
    """``(G_c, c_c, yyc, mu, m, W)`` of one-fold statistics (targets numeric, ``yy`` kept):
    the centred Gram and cross-statistics, the centred sums of squares of the targets,
    the feature means (zeros without intercept), the contrasts ``m`` (rows, minus one with
    an intercept) and the weight sum ``W`` (the row count without weights)."""
    from ._solve import center_statistics

    W = float(tot.weights()[0])
    Gc, cc, mu, ybar = center_statistics(None if tot.G is None else tot.G[0], tot.c[0], tot.zsum[0], W, tot.ysum[0], fit_intercept)
    yy = tot.yy[0]
    yyc = yy - W * ybar**2 if fit_intercept else yy
    m = int(tot.n[0]) - (1 if fit_intercept else 0)
    return Gc, cc, np.asarray(yyc, dtype=np.float64), mu, m, W


def evidence_grid(tot, alphas, fit_intercept: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Log evidence (summed over targets) and noise variances (n_alphas, t) of every alpha
    from one-fold statistics ``tot``: one tridiagonalisation of ``G_c``; then the mask of the
    alphas that leave ``G_c + alpha I`` positive definite beyond the statistics' rounding
    (:func:`~dkrr.linalg._solve.usable_alphas`; the others are ``-inf``) and ``G_c``'s least
    eigenvalue, for :func:`~dkrr.linalg._cv.report_unusable`."""
    from ._solve import usable_alphas

    Gc, cc, yyc, _, m, _ = _centred_parts(tot, fit_intercept)
    tri = TridiagonalGram(Gc, overwrite=fit_intercept)  # with an intercept G_c is a temporary
    del Gc
    logev, s2 = evidence_from_tridiagonal(tri, tri.rotate(cc), yyc, m, alphas, residual_floor(tot.yy[0]))
    return logev.sum(axis=1), s2, usable_alphas(tri, alphas), float(tri.lam_min) if tri.p else 0.0


def bayes_posterior(tot, alpha: float, fit_intercept: bool, *, factor=None, beta=None) -> dict:
    """What the predictive standard deviation and the evidence at ``alpha`` need, from
    one-fold statistics ``tot`` (one Cholesky factorisation of ``G_c + alpha I``):
    ``factor`` (L, lower), ``mean`` (mu, zeros without intercept), ``inv_weight``
    (``1 / W`` with intercept, else 0), ``noise_variance`` (t,) and
    ``log_marginal_likelihood`` (the profiled log evidence, summed over targets).

    ``precision="auto"`` passes the refinement's ``factor`` (of the float32 statistics'
    ``G_c + alpha I``) and its float64 coefficients ``beta``, with ``tot`` the float64
    linear statistics of its first pass (no ``G``): the residual ``R``, hence the noise
    variance, is then float64's, and nothing is factorised again.

    Raises
    ------
    ValueError
        When ``G_c + alpha I`` is not positive definite (``alpha`` too small for the
        statistics' rounding) or a target's residual is not positive.
    """
    if alpha <= 0:
        raise InvalidParameterError(f"the posterior needs alpha > 0, got {alpha!r}")
    _, cc, yyc, mu, m, W = _centred_parts(dataclasses.replace(tot, G=None), fit_intercept)
    L = factor
    if L is None:  # G_c formed in L's own array (posterior_factor): one p x p array besides G
        try:
            L = posterior_factor(tot.G[0], alpha, (tot.zsum[0], W) if fit_intercept else None)
        except np.linalg.LinAlgError:
            raise InvalidParameterError(
                f"G_c + alpha I is not positive definite at alpha={alpha:.3g} (the statistics' rounding): "
                "the posterior needs a larger alpha") from None
    if beta is None:
        beta = scipy.linalg.cho_solve((L, True), cc, check_finite=False)
    R = yyc - np.einsum("pt,pt->t", cc, beta)
    if m < 1 or np.any(R <= residual_floor(tot.yy[0])):  # a residual of rounding is 0
        raise InvalidParameterError(
            "the noise variance is not positive (the features interpolate the targets, or too few rows): "
            "use a larger alpha")
    s2 = R / m
    logdet = 2.0 * float(np.log(np.diag(L)).sum()) - L.shape[0] * np.log(alpha)
    logml = float(np.sum(-0.5 * m * (np.log(2.0 * np.pi * s2) + 1.0) - 0.5 * logdet))
    return {"factor": L, "mean": np.asarray(mu, dtype=np.float64),
            "inv_weight": 1.0 / W if fit_intercept else 0.0, "noise_variance": s2,
            "log_marginal_likelihood": logml}
