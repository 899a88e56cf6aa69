"""``precision="auto"`` on the Gram path: float32 statistics, float64 coefficients
(docs/ALGORITHMS.md 3.10).

The statistics pass runs in float32 and the cross-validation scores the alpha (and gamma)
grid from its statistics, as ``precision="float32"`` does. Only the final model is then
refined (:func:`dkrr.linalg._refine.refine_ridge`): CG on the exact float64 operator,
preconditioned by the Cholesky factor of the float32 statistics' ``G_c + alpha I``, by
streamed float64 passes, until the estimated relative error of every target's
coefficients is at most :data:`~dkrr.linalg._refine.DEFAULT_REFINE_TOL` (1e-10: the
coefficients are then the float64 solve's to well within the 1e-7 the issue asks). Where that cannot be done (the float32 pass or its
factor fails at this alpha, a cross-validation chose it where the float32 solution is
more than :data:`CHOICE_START_LIMIT` off float64's, or the refinement does not converge in
:data:`~dkrr.linalg._refine.DEFAULT_REFINE_MAX_PASSES` passes: alpha below what float32
statistics resolve), :func:`mixed_precision` warns (:class:`~dkrr.errors.PrecisionWarning`)
and the statistics pass is repeated in float64. Nothing here sets an attribute.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from ..errors import PrecisionWarning, SingularSystemError
from ..linalg._evidence import posterior_factor
from ..linalg._precision import gram_underflowed, precision_error
from ..linalg._refine import RefineResult, refine_ridge
from ..linalg._solve import _check_finite_system, center_statistics

__all__ = ["CHOICE_START_LIMIT", "mixed_precision", "refine_final"]

#: a cross-validation's choice (alpha, gamma, the evidence's) made on float32 statistics is
#: kept when their solution at it is within this estimated relative error of float64's
#: (the refinement's first pass tells): beyond it the grid's scores there, and more so at
#: its smaller alphas, carry float32 noise that decided the choice (it followed the chunking)
CHOICE_START_LIMIT = 1e-2


def refine_final(est, Xd, yd, wd, passes, targets_fn) -> RefineResult | str:
    """The float64 coefficients of the final model of ``passes`` (float32 statistics, the
    chosen alpha and map): a converged :class:`RefineResult`, or why none could be had (a
    phrase for the fallback's warning)."""
    fit_intercept = bool(est.fit_intercept)
    try:
        start = _start(passes, fit_intercept)
    except SingularSystemError as exc:  # overflow: values beyond float32's range
        return f"the float32 statistics cannot be solved ({exc})"
    if start is None:
        return (f"the float32 statistics' G_c + alpha I is not positive definite at alpha={passes.alpha:.3g} "
                "(their rounding is larger than alpha)")
    beta0, factor = start
    res = refine_ridge(Xd, yd, wd, passes.fmap, beta0, factor, passes.alpha, fit_intercept,
                       labels_mode=est._labels_mode, targets_fn=targets_fn,
                       max_block_bytes=int(est.max_block_bytes), split_every=est.split_every,
                       start_limit=CHOICE_START_LIMIT if _chose(passes.cv_results) else None)
    if res.info["start_error"]:
        return (f"the cross-validation chose alpha={passes.alpha:.3g}, where the float32 statistics' solution is "
                f"{res.info['start_error']:.1e} (estimated, relative) off float64's, above {CHOICE_START_LIMIT:g}: "
                "their scores there and at smaller alphas carry that rounding, which may have made the choice")
    if not (np.isfinite(res.beta).all() and np.isfinite(res.intercept).all()):
        return (f"the float64 refinement at alpha={passes.alpha:.3g} gave non-finite coefficients (overflow: "
                "values too large for float32 statistics)")
    if not np.isfinite(res.info["residuals"]).all():
        return (f"the float64 refinement's residual norms at alpha={passes.alpha:.3g} overflow float64 (y, or the "
                "features of a linear or polynomial kernel, hold values too large for sums of their squares, above "
                "about 1e154)")
    if not res.info["converged"]:
        last = float(res.info["errors"][-1].max())
        need = res.info.get("passes_needed", 0.0)
        how = (f"did not converge in {res.info['passes']} passes" if not need else
               f"was stopped after {res.info['passes']} passes, as its contraction so far would need "
               + ("more passes than it may make" if not np.isfinite(need) else f"about {need:.0f} passes") +
               f" (at most {res.info['max_passes']})")
        return (f"the float64 refinement at alpha={passes.alpha:.3g} {how} (estimated relative error {last:.1e}, "
                f"tolerance {res.info['tol']:g}): alpha is below what float32 statistics resolve")
    return res


def _chose(cv_results) -> bool:
    """Whether the fit chose among several alphas or gammas (``cv``, ``cv="evidence"``)."""
    return cv_results is not None and (len(cv_results["alphas"]) > 1 or len(cv_results.get("gammas", ())) > 1)


def _start(passes, fit_intercept):
    """``(beta_0, L)``: the float32 statistics' solution and the lower Cholesky factor of
    their ``G_c + alpha I``, or None when it is not positive definite. The client holds
    two p x p arrays, the statistics' Gram and ``L``, here and in the refinement's passes.

    Raises
    ------
    SingularSystemError
        The statistics are not finite: X, y or the features overflow float32 (a Cholesky
        factor of NaNs raises nothing, and its NaN coefficients would be refined into a
        NaN model); or their Gram underflowed (:func:`~dkrr.linalg._precision.gram_underflowed`:
        its CV chose from a Gram of zeros).
    """
    tot = passes.stats.total(shared=True)
    _check_finite_system(tot.G[0], tot.c[0])
    if gram_underflowed(tot):
        raise SingularSystemError("their Gram underflowed float32: the features are below about 1e-19, as a "
                                  "linear or polynomial kernel makes of small X; rescale the columns of X")
    n = tot.weights()[0]
    _, cc, _, _ = center_statistics(None, tot.c[0], tot.zsum[0], n, tot.ysum[0], fit_intercept)
    try:  # the centred Gram formed in the factor's own array: one p x p array besides G
        factor = posterior_factor(tot.G[0], passes.alpha, (tot.zsum[0], n) if fit_intercept else None)
    except np.linalg.LinAlgError:
        return None
    return scipy.linalg.cho_solve((factor, True), cc, check_finite=False), factor


def refinement_record(res: RefineResult) -> dict:
    """The fitted ``refinement_``: ``passes`` (float64 passes over the data, the first the
    true residual of the float32 solution); ``residuals`` and ``errors`` (passes,
    targets): the relative residual ``||b - A beta|| / ||b||`` and the estimated relative
    error ``||M^-1 r|| / ||beta||`` of the float32 solution and of each corrected
    iterate (the last row: the fitted coefficients'); ``converged`` (True: an unconverged
    refinement is not kept) and ``tol`` (the error at which it stops)."""
    info = res.info
    return {"passes": int(info["passes"]), "residuals": np.asarray(info["residuals"], dtype=np.float64),
            "errors": np.asarray(info["errors"], dtype=np.float64),
            "converged": bool(info["converged"]), "tol": float(info["tol"])}


def mixed_precision(est, run, refine):
    """``precision="auto"`` on the Gram path: ``(passes, precision_, precision_error_,
    refined)``. ``run(precision)`` makes the path's passes, ``refine(passes)`` is
    :func:`refine_final` bound to the fit's data. ``refined`` is the converged
    :class:`RefineResult` with ``precision_ = "mixed"`` and ``precision_error_`` the
    float64 estimate (the coefficients are the float64 solve's); after a fallback it is
    None, ``precision_ = "float64"``, and a :class:`PrecisionWarning` says why (after the
    float64 pass: with the alpha its cross-validation chose, where it differs). The
    warnings of a discarded float32 pass (grid edges, unusable alphas) are dropped; those
    of a kept one are re-issued."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            passes = run("float32")
        except SingularSystemError as exc:  # no alpha of the grid usable on float32 statistics
            passes, reason = None, f"the float32 statistics cannot be solved ({exc})"
    if passes is not None:
        refined = refine(passes)
        if isinstance(refined, RefineResult):
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            return passes, "mixed", precision_error(passes.stats, passes.alpha, "float64"), refined
        reason = refined
    alpha32 = None if passes is None else passes.alpha
    passes = run("float64")
    # the float64 pass's CV may choose another alpha than the float32 one the reason names
    chose = ("" if alpha32 is None or passes.alpha == alpha32 else
             f", whose cross-validation chose alpha_={passes.alpha:.4g} (the float32 statistics' choice was "
             f"{alpha32:.4g})")
    warnings.warn(PrecisionWarning(
        f"precision='auto': {reason}, so the statistics pass was repeated in float64 (precision_ = 'float64')"
        f"{chose}. Pass precision='float64' to skip the float32 pass and its refinement, or use a larger alpha."),
        stacklevel=6)
    return passes, "float64", precision_error(passes.stats, passes.alpha, "float64"), None
