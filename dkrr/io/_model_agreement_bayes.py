"""Agreement rules of the Bayesian fields of a model file (ALGORITHMS.md 3.11):
``cv="evidence"``'s ``cv_results_``, ``noise_variance_`` and ``posterior_``."""

from __future__ import annotations

import numpy as np

__all__ = ["agree_evidence_results", "agree_noise_variance", "agree_posterior"]


def agree_evidence_results(est):
    """cv="evidence": log_evidence (finite somewhere, -inf where unusable, never NaN or
    +inf) and noise_variance over the alphas (and gammas) of the parameters."""
    from ._model_agreement import alphas_problem

    r = est.cv_results_
    if est.cv != "evidence":
        return f"is stored for cv={est.cv!r}, which scores no grid"
    A = r["alphas"].shape[0]
    grid = () if "gammas" not in r else (r["gammas"].shape[0],)
    if (est.gammas is not None) != bool(grid):
        return "has gammas, but the parameter gammas=None" if grid else f"lacks the gammas of gammas={est.gammas!r}"
    ev, s2 = r["log_evidence"], r["noise_variance"]
    if ev.shape != grid + (A,) or s2.shape[:-1] != grid + (A,):
        return f"log_evidence {ev.shape} / noise_variance {s2.shape} do not match {A} alphas{' x %d gammas' % grid[0] if grid else ''}"
    if (problem := alphas_problem(est, r["alphas"])) is not None:
        return problem
    if np.isnan(ev).any() or (ev == np.inf).any() or not np.isfinite(ev).any():
        return "log_evidence must be finite for some alpha and never NaN or +inf"
    return None


def agree_noise_variance(est) -> str | None:
    """One positive noise variance per target (a number for 1-D coefficients)."""
    t = 1 if np.ndim(est.coef_) == 1 else np.shape(est.coef_)[0]
    s2 = np.atleast_1d(np.asarray(est.noise_variance_, dtype=np.float64))
    if s2.shape != (t,) or (np.ndim(est.coef_) == 1) != (np.ndim(est.noise_variance_) == 0):
        return f"has shape {np.shape(est.noise_variance_)}, but the coefficients have {t} target(s)"
    return None


def agree_posterior(est) -> str | None:
    """The factor is p x p lower triangular with a positive diagonal, the means p long,
    the inverse weight 0 exactly without intercept; noise_variance_ comes with it."""
    post, p = est.posterior_, int(est.n_output_features_)
    L, mu = post["factor"], post["mean"]
    if L.shape != (p, p) or mu.shape != (p,):
        return f"holds a factor {L.shape} and means {mu.shape}, but the model has {p} features"
    if np.any(np.triu(L, 1) != 0) or not np.all(np.diag(L) > 0) or not np.isfinite(L).all():
        return "holds a factor that is not lower triangular with a positive diagonal"
    if (post["inv_weight"] == 0) == bool(est.fit_intercept) or ("noise_variance_" not in vars(est)):
        return "disagrees with fit_intercept or lacks noise_variance_"
    return None
