"""The statistics paths of the ridge estimators: the Gram path (one pass; with
``precision="auto"`` a float32 one and the float64 refinement of the final model, or
after a fallback a float64 pass: :mod:`dkrr.estimators._mixed`) and the leverage-sampled path
(two passes), each choosing alpha (and gamma) by the one-pass cross-validation and
ending in the Cholesky or eigen solve. Nothing here sets an attribute of the estimator:
:func:`fit_statistics_path` returns a :class:`~dkrr.estimators._fitted.RidgeFit`."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ..errors import InvalidParameterError, PrecisionWarning, SingularSystemError
from ..features._nonlinear import output_width
from ..features._standardize import StandardizedMap
from ..linalg import ridge_coefficients, streamed_statistics
from ..linalg._cv import (AUTO_GAMMA_FACTORS, auto_gammas, default_alphas, fold_scores, report_unusable, score_grid,
                          warn_grid_edge)
from ..linalg._cv_tasks import cross_validate_pass, folds_on_workers
from ..linalg._evidence import bayes_posterior, evidence_grid
from ..linalg._precision import AUTO_PRECISION_TOL, gram_underflowed, precision_error
from ..linalg._weighted import check_weight_total, streamed_statistics_maps
from ._fitted import RidgeFit
from ._mixed import mixed_precision, refine_final, refinement_record
from ._ridge_params import uses_evidence
from ._random_features import draw_ridge_map, standardized_input

__all__ = ["Passes", "fit_statistics_path", "statistics_in_precision"]


@dataclasses.dataclass(frozen=True, eq=False)
class Passes:
    """What the statistics pass(es) and the CV chose: the statistics (targets converted)
    and map of the fit, its alpha and gamma, and with ``cv`` the grid's scores."""

    stats: object
    fmap: object
    alpha: float
    gamma: float | None
    cv_results: dict | None = None
    best_score: float | None = None


def fit_statistics_path(est, Xd, yd, wd, n, K, alpha, alphas, gammas, relative, solver, targets_fn,
                        folds=None) -> RidgeFit:
    """The Gram path of ``est`` (``sampling`` None) or its leverage-sampled path: the
    standardisation pass when asked, the map's draws, the statistics pass(es), the CV
    choice and the ``solver`` ("cholesky" or "eigh") solve. ``relative``: ``gammas`` is
    the factor grid of ``gammas="auto"``; ``targets_fn`` converts labels-mode statistics
    (the classifier's :class:`~dkrr.estimators._fitted.PlusMinusTargets`) or is None.
    ``folds``: the :class:`~dkrr.estimators._folds.FoldPlan` of a splitter or explicit
    splits (the Gram path only), or None (folds from the row-index hash)."""
    Xd, mean, scale, moments = standardized_input(est, Xd, wd)  # a pass only when asked
    fmap, gamma, fold_seed, rng = draw_ridge_map(est, Xd, moments, scale, resolve=gammas is None or relative,
                                                 sample_weight=wd)
    if relative:  # with ARD (an array gamma) the grid multiplies the whole array
        gammas = AUTO_GAMMA_FACTORS if np.ndim(gamma) else auto_gammas(gamma)
    args = (est, Xd, yd, wd, fmap, gamma, rng, n, K, alpha, alphas, gammas, fold_seed, targets_fn)
    path = sampled_statistics_and_alpha if est.sampling is not None else statistics_and_alpha
    refine = None if est.sampling is not None else lambda p: refine_final(est, Xd, yd, wd, p, targets_fn)
    passes, precision, error, refined = statistics_in_precision(est, lambda p: path(*args, p, folds=folds), refine)
    try:
        if refined is not None:  # precision="auto": the float64 solution from float32 statistics
            beta, intercept = refined.beta, refined.intercept
        else:
            beta, intercept = ridge_coefficients(passes.stats.total(shared=True), passes.alpha, bool(est.fit_intercept),
                                                 solver)
    except SingularSystemError as exc:
        if precision != "float32":
            raise
        raise SingularSystemError(
            f"{exc} The statistics are float32 (precision={est.precision!r}), whose rounding "
            f"(about eps32 ||G||, precision_error_ = {error:.1e}) can make G + alpha*I indefinite "
            "at this alpha: use precision='float64' or 'auto'.") from None
    fmap = passes.fmap
    posterior = None
    if not est._labels_mode:  # the regressor's Bayesian reading (ALGORITHMS 3.11)
        try:
            if refined is None:
                posterior = bayes_posterior(passes.stats.total(shared=True), passes.alpha, bool(est.fit_intercept))
            else:  # float64 residual and coefficients, the refinement's factor (ALGORITHMS 3.10)
                posterior = bayes_posterior(refined.stats, passes.alpha, bool(est.fit_intercept),
                                            factor=refined.factor, beta=refined.beta)
        except InvalidParameterError:
            posterior = None  # no positive noise variance or factor at this alpha: return_std explains
    return RidgeFit(
        feature_map=fmap if mean is None else StandardizedMap(fmap, mean, scale), beta=beta,
        intercept=np.atleast_1d(intercept), alpha=passes.alpha, gamma=passes.gamma, fold_seed=fold_seed,
        solver=solver, precision=precision, precision_error=float(error), mean=mean, scale=scale,
        cv_results=passes.cv_results, best_score=passes.best_score,
        classes=getattr(targets_fn, "classes", None), posterior=posterior,
        refinement=None if refined is None else refinement_record(refined),
    )


def statistics_in_precision(est, run, refine=None):
    """``run(precision)`` (the path's :class:`Passes`) in the estimator's ``precision``:
    ``(passes, precision_, precision_error_, refined)``.

    ``"float32"`` warns (:class:`~dkrr.errors.PrecisionWarning`) when the estimate
    :func:`~dkrr.linalg._precision.precision_error` at the chosen alpha exceeds
    :data:`~dkrr.linalg._precision.AUTO_PRECISION_TOL`. ``"auto"`` is
    :func:`~dkrr.estimators._mixed.mixed_precision` with ``refine`` (float32 statistics,
    the final model refined in float64; ``refined`` its result), or float64 without
    ``refine`` (the leverage-sampled path, whose passes are float64); ``refined`` is None
    otherwise.
    """
    if est.precision == "auto" and refine is not None:
        return mixed_precision(est, run, refine)
    if est.precision != "float32":
        passes = run("float64")
        return passes, "float64", precision_error(passes.stats, passes.alpha, "float64"), None
    passes = run("float32")
    error = precision_error(passes.stats, passes.alpha, "float32")
    if gram_underflowed(passes.stats):
        warnings.warn(PrecisionWarning(
            "precision='float32': the float32 Gram underflowed (features below about 1e-19, as a linear or "
            "polynomial kernel makes of small X): the alpha and coefficients are not the data's. Rescale the "
            "columns of X, or use precision='auto' (the default), which repeats such a pass in float64."),
            stacklevel=5)
    elif error > AUTO_PRECISION_TOL:
        warnings.warn(PrecisionWarning(
            f"precision='float32': the statistics' rounding may change the coefficients by up to "
            f"{error:.1e} (relative; the estimate eps32 (||G||_F / alpha + 20) at alpha={passes.alpha:.3g}, an "
            f"upper estimate), above {AUTO_PRECISION_TOL:g}. precision='auto' (the default) refines the "
            "coefficients to the float64 solution; precision_error_ holds the estimate."), stacklevel=5)
    return passes, "float32", error, None


def _converted(stats, targets_fn):
    return stats if targets_fn is None else targets_fn(stats)


def sampled_statistics_and_alpha(est, Xd, yd, wd, fmap, gamma, rng, n, K, alpha, alphas, gammas, fold_seed,
                                 targets_fn, precision, folds=None) -> Passes:
    """The leverage-sampled path's two passes (candidate scores, then the statistics of
    the resampled map) and, with ``cv``, the alpha grid's scores (ALGORITHMS.md section 4).
    ``wd``, ``gammas`` and ``folds`` are None (refused with ``sampling`` before), ``precision`` float64."""
    from ..sampling import fit_sampled_ridge_statistics

    if K > 1 and alphas is None:  # the Gram is not known yet: s = n / p (section 3.6)
        alphas = default_alphas(None, bool(est.fit_intercept), scale=n / output_width(est.kernel, est.n_components))
    fit = fit_sampled_ridge_statistics(
        Xd, yd, candidate_map=fmap, sampling=est.sampling,
        n_components=est.n_components, rng=rng, n_folds=K, fold_seed=fold_seed,
        labels_mode=est._labels_mode, ridge_alpha=alpha, alphas=alphas,
        fit_intercept=bool(est.fit_intercept), targets_fn=targets_fn,
        max_block_bytes=int(est.max_block_bytes), split_every=est.split_every,
    )
    passes = Passes(fit.stats, fit.maps.feature_map, alpha, gamma)
    return _choose(passes, alphas, None, fit.fold_mse, fit.fold_sizes, fit.fold_sizes)[0] if K > 1 else passes


def statistics_and_alpha(est, Xd, yd, wd, fmap, gamma, rng, n, K, alpha, alphas, gammas, fold_seed,
                         targets_fn, precision, folds=None) -> Passes:
    """The Gram path's statistics pass in ``precision`` (one map, or every map of the
    gamma grid, weighted or not, folds from the row hash or ``folds``' keys) and, with
    ``cv``, the grid's scores."""
    common = dict(n_folds=K, fold_seed=fold_seed, max_block_bytes=int(est.max_block_bytes),
                  split_every=est.split_every, labels_mode=est._labels_mode, precision=precision)
    if folds is not None:  # per-row fold keys, streamed with the rows
        common.update(fold_keys=folds.keys, hashed_keys=folds.hashed)
    # the widths scored are the grid's values, or with ARD (an array gamma) its multiples of the array
    widths = None if gammas is None else [g * gamma if np.ndim(gamma) else g for g in gammas]
    maps = [fmap] if gammas is None else [fmap.with_gamma(w) for w in widths]
    # the default alpha grid follows the Gram of the grid's middle width (the rule's own with
    # gammas="auto"), so that it scores every model the single gamma would
    middle = int(np.argsort(gammas)[len(gammas) // 2]) if gammas is not None else 0
    p, t = maps[0].n_output_features, 1 if yd.ndim == 1 or est._labels_mode else int(yd.shape[1])
    if K > 1 and not uses_evidence(est) and folds_on_workers(p, t, K, len(maps)):
        # the pass's result stays where it was computed; the fold solves run there as tasks
        # (the client receives the fold errors and the chosen map's total statistics, never
        # the fold Grams)
        root = streamed_statistics_maps(Xd, yd, maps, sample_weight=wd, persist=True, **common)
        cv = cross_validate_pass(root, len(maps), K, alphas, bool(est.fit_intercept), targets_fn=targets_fn,
                                 weighted=wd is not None, alpha_map=middle, p=p)
        del root
        fold_weights = cv.folds.n.copy() if wd is None else cv.folds.weights()
        one = slice(None) if gammas is not None else 0
        passes, g = _choose(Passes(None, fmap, alpha, gamma), cv.alphas, gammas, cv.fold_mse[one],
                            cv.folds.n.copy(), fold_weights, lam_min=cv.lam_min[one], default_grid=alphas is None)
        passes = dataclasses.replace(passes, stats=cv.total(g))
        cv.release()
        if gammas is not None:  # the chosen gamma's map (ARD: the chosen multiple)
            passes = dataclasses.replace(passes, fmap=maps[g], gamma=widths[g] if np.ndim(widths[g]) else passes.gamma)
        return passes
    if gammas is None and wd is None and folds is None:
        every = [_converted(streamed_statistics(Xd, yd, fmap, **common), targets_fn)]
    else:  # one pass for every gamma of the grid, weighted or not
        every = [_converted(s, targets_fn) for s in streamed_statistics_maps(Xd, yd, maps, sample_weight=wd, **common)]
    check_weight_total(every[0])  # or, unweighted, the targets' sums
    if uses_evidence(est):
        return _choose_by_evidence(est, every, maps, alpha, gamma, alphas, gammas, widths)
    stats = every[0]
    if K == 1:
        return Passes(stats, fmap, alpha, gamma)
    # the workers cannot hold a fold's solve (folds_on_workers): the client solves the folds
    default_grid = alphas is None
    alphas = default_alphas(every[middle], est.fit_intercept) if default_grid else alphas
    scored = [fold_scores(s, alphas, bool(est.fit_intercept)) for s in every]
    fold_mse, lam_min = np.stack([m for m, _ in scored]), np.stack([lam for _, lam in scored])
    fold_weights = stats.n.copy() if wd is None else stats.weights()
    one = slice(None) if gammas is not None else 0
    passes, g = _choose(Passes(stats, fmap, alpha, gamma), alphas, gammas, fold_mse[one], stats.n.copy(),
                        fold_weights, lam_min=lam_min[one], default_grid=default_grid)
    if gammas is not None:  # the chosen gamma's map and statistics (ARD: the chosen multiple)
        passes = dataclasses.replace(passes, stats=every[g], fmap=maps[g],
                                     gamma=widths[g] if np.ndim(widths[g]) else passes.gamma)
    return passes


def _choose_by_evidence(est, every, maps, alpha, gamma, alphas, gammas, widths=None) -> Passes:
    """``cv="evidence"``: the (gamma, alpha) of the largest log marginal likelihood, every
    gamma's from one tridiagonal reduction of its centred Gram (ALGORITHMS.md 3.11), with the
    edge warnings. ``cv_results_`` holds ``alphas``, ``log_evidence`` and ``noise_variance``
    (with a gamma grid: ``gammas`` and a leading gamma axis)."""
    fit_intercept = bool(est.fit_intercept)
    totals = [s.total() for s in every]
    default_grid = alphas is None
    if default_grid:
        middle = totals[int(np.argsort(gammas)[len(gammas) // 2])] if gammas is not None else totals[0]
        alphas = default_alphas(middle, fit_intercept)
    alphas = np.asarray(alphas, dtype=np.float64)
    table = [evidence_grid(t, alphas, fit_intercept) for t in totals]
    logev = np.stack([row[0] for row in table])  # (m, n_alphas)
    s2 = np.stack([row[1] for row in table])  # (m, n_alphas, t)
    if not np.isfinite(logev).any():
        # a target whose residual is not positive at any alpha that factors (a constant target, one the
        # features interpolate) makes every sum of the targets' evidences -inf: larger alphas cannot help
        factors = np.stack([row[2] for row in table])  # (m, n_alphas): G_c + alpha I positive definite
        flat = [j for j in range(s2.shape[2]) if factors.any() and not np.isfinite(s2[..., j][factors]).any()]
        raise SingularSystemError(
            f"cv='evidence': no alpha of {alphas.tolist()} gives a positive definite G_c + alpha I and a "
            "positive noise variance; " + ("use larger alphas." if not flat else (
                f"target(s) {flat} (0-based) have no positive residual at any alpha (a constant target, or one "
                "the features interpolate): the evidence needs a noise variance for every target; fit such a "
                "target apart, without cv='evidence'.")))
    g, i = np.unravel_index(int(np.argmax(logev)), logev.shape)
    # alphas below the statistics' rounding (float32's under the default precision) are said as
    # the K-fold CV says them: always for a grid the user gave, for the default grid when the
    # best scored alpha is the least scored one (the best might lie among them)
    usable = np.stack([row[2] for row in table])
    scores = np.where(usable, -logev, np.inf)[:, None, :]  # one "fold"; -inf evidence: an inf score
    report_unusable(alphas, scores, np.array([[row[3]] for row in table]), np.ones(1),
                    default_grid=default_grid, chosen=int(g), evidence=True)
    results = {"alphas": alphas, "log_evidence": logev if gammas is not None else logev[0],
               "noise_variance": s2 if gammas is not None else s2[0]}
    warn_grid_edge("alpha", alphas, float(alphas[i]))
    if gammas is not None:
        results["gammas"] = np.asarray(gammas, dtype=np.float64)
        warn_grid_edge("gamma", gammas, float(gammas[g]))
        # the chosen width: the grid's value, or with ARD (an array gamma) its multiple of the array
        gamma = widths[g] if widths is not None and np.ndim(widths[g]) else float(gammas[g])
    return Passes(every[g], maps[g], float(alphas[i]), gamma, cv_results=results, best_score=float(logev[g, i]))


def _choose(passes: Passes, alphas, gammas, fold_mse, fold_sizes, fold_weights, lam_min=None, *,
            default_grid: bool = False) -> tuple[Passes, int]:
    """The grid's best alpha (and gamma) from the fold errors, with the warnings of the
    chosen point (alphas it could not score, :func:`report_unusable`, given the folds'
    ``lam_min``: the sampled fit's scoring reports its own; the grid's edges):
    ``(passes, gamma_index)``."""
    gidx, idx, results, best = score_grid(alphas, gammas, fold_mse, fold_sizes, fold_weights)
    if lam_min is not None:
        report_unusable(alphas, fold_mse, lam_min, fold_weights, default_grid=default_grid, chosen=gidx)
    alpha = float(alphas[idx])
    warn_grid_edge("alpha", alphas, alpha)
    gamma = passes.gamma
    if gammas is not None:
        gamma = float(gammas[gidx])
        warn_grid_edge("gamma", gammas, gamma)
    return dataclasses.replace(passes, alpha=alpha, gamma=gamma, cv_results=results, best_score=best), gidx
