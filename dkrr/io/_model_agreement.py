"""Agreement of a model file's fields: each fitted attribute against what it derives from.

A model file stores fields that derive from one another (the chosen alpha from the CV
scores, ``n_features_in_`` from the map, the order of ``classes_`` from the coefficient
rows, ...). A file whose checksums were recomputed after one field was changed passes
every check of a field alone (:mod:`dkrr.io._model_reader`), so each fitted attribute has
a rule here, :data:`AGREEMENT`, tying it to the parameters and to the fields checked
before it. A rule takes the loaded estimator and returns None when its field agrees, else
what it disagrees with; the reader turns that into a ModelFormatError naming the field.
SECURITY.md ("Model files", point 2) lists the rules.
"""

from __future__ import annotations

import math

import numpy as np

from ._model_agreement_bayes import agree_evidence_results, agree_noise_variance, agree_posterior

__all__ = ["AGREEMENT"]


def _is_real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _targets(est) -> int:
    """Coefficient rows: 1 for a 1-D coef_ (one target, or two classes)."""
    return 1 if est.coef_.ndim == 1 else est.coef_.shape[0]


def _inner(fm):
    from ..features._standardize import StandardizedMap

    return fm.inner if isinstance(fm, StandardizedMap) else fm


def _map_gamma(fm):
    """The width a map was drawn for (a float, or an array with ARD), or None when the map
    does not record one (kernels without a width; a sampled map, whose W has the width
    folded in)."""
    from ..features._map import RandomFeatureMap
    from ..features._nonlinear import WIDTH_KERNELS
    from ..features._nystroem import NystroemMap
    from ..features._polynomial import PolynomialSketchMap

    fm = _inner(fm)
    kernel = getattr(fm, "kernel", None)
    if kernel not in WIDTH_KERNELS:
        return None
    if isinstance(fm, (NystroemMap, PolynomialSketchMap)):
        return fm.gamma
    if type(fm) is RandomFeatureMap:  # W = s(gamma) W_unit: s = sqrt(2 gamma), or gamma (laplacian)
        s = fm.column_scale if fm.column_scale is not None else float(fm.projection.scale)
        return s if kernel == "laplacian" else s**2 / 2
    return None


def _map_kernel_params(fm) -> dict | None:
    """The kernel parameters a map records (``nu``; ``degree`` and ``coef0``), or None for a
    map that records none."""
    from ..features._nystroem import NystroemMap
    from ..features._polynomial import PolynomialSketchMap

    fm = _inner(fm)
    if isinstance(fm, NystroemMap):
        return dict(fm.kernel_params)
    if isinstance(fm, PolynomialSketchMap):
        return {"degree": fm.degree, "coef0": fm.coef0}
    return {"nu": fm.nu} if getattr(fm, "nu", None) is not None else {}


def _chosen(est) -> tuple[int | None, int]:
    """(gamma index or None, alpha index) the fit chooses from ``cv_results_``'s mean_mse:
    the least mean, ties to the larger alpha, then the smaller gamma (the rule of
    :func:`~dkrr.linalg._cv.score_grid`, applied to the stored means)."""
    from ..linalg._cv import select_alpha, select_gamma_alpha

    r = est.cv_results_
    if "log_evidence" in r:  # cv="evidence": the first largest log evidence (gamma-major)
        ev = np.atleast_2d(r["log_evidence"])
        gi, ai = np.unravel_index(int(np.argmax(ev)), ev.shape)
        return (int(gi) if "gammas" in r else None), int(ai)
    if "gammas" in r:
        gi, ai, _, _ = select_gamma_alpha(r["gammas"], r["alphas"], r["mean_mse"][:, None, :], [1.0])
        return gi, ai
    return None, select_alpha(r["alphas"], r["mean_mse"][None, :], [1.0])[0]


def _is_weighted_mean(fold_mse: np.ndarray, mean: np.ndarray, usable: np.ndarray) -> bool:
    """Whether ``mean`` is ``sum_k w_k fold_mse[k] / sum_k w_k`` for one set of weights
    ``w >= 0`` shared by every (gamma, alpha) (rows per fold, or weight sums with sample
    weights), over the usable (finite) columns: a non-negative least-squares fit."""
    from scipy.optimize import nnls

    F = np.moveaxis(fold_mse, -2, 0)[:, usable]  # (K, columns)
    m = mean[usable]
    s = max(float(np.abs(F).max(initial=0.0)), float(np.abs(m).max(initial=0.0)), 1e-300)
    A = np.vstack([F.T / s, np.ones((1, F.shape[0]))])
    b = np.concatenate([m / s, [1.0]])
    _, residual = nnls(A, b)
    return residual <= 1e-9 * math.sqrt(b.size)


def _agree_feature_map(est):
    """The map is of the parameters' kernel and kernel parameters (``nu``, ``degree``,
    ``coef0``), method (``"auto"`` resolved at its input width and kernel) and
    n_components, standardized exactly when ``standardize`` is true."""
    from ..features._nystroem import NystroemMap
    from ..features._registry import resolve_method
    from ..features._sampled import SampledFeatureMap
    from ..features._standardize import StandardizedMap

    from ..estimators._random_features import kernel_params_of
    from ..features._polynomial import PolynomialSketchMap

    fm = est.feature_map_
    inner = _inner(fm)
    if isinstance(fm, StandardizedMap) != bool(est.standardize):
        return f"standardize={est.standardize!r}, but the map is{'' if isinstance(fm, StandardizedMap) else ' not'} standardized"
    if getattr(inner, "kernel", None) != est.kernel:
        return f"the map is of kernel {getattr(inner, 'kernel', None)!r}, the parameter kernel={est.kernel!r}"
    params, recorded = kernel_params_of(est), _map_kernel_params(inner)
    if recorded != params:
        return f"the map is of the kernel parameters {recorded!r}, the parameters give {params!r}"
    method = resolve_method(est.method, inner.n_features_in, est.kernel)
    if isinstance(inner, NystroemMap):
        found = "nystroem"
    elif isinstance(inner, PolynomialSketchMap):
        found = inner.method
    elif isinstance(inner, SampledFeatureMap):
        found = inner.source_method or method  # files before source_method lack it
    else:
        found = inner.projection.method
    if found != method:
        return f"the map is drawn by method {found!r}, the parameter method={est.method!r} gives {method!r}"
    n = inner.landmarks.shape[0] if isinstance(inner, NystroemMap) else inner.n_components
    if n != est.n_components:
        what = "landmarks" if isinstance(inner, NystroemMap) else "frequencies"
        return f"the map has {n} {what}, the parameter n_components={est.n_components!r}"
    return None


def _agree_n_features_in(est):
    """The map's input width."""
    n = est.feature_map_.n_features_in
    return None if est.n_features_in_ == n else f"is {est.n_features_in_}, but the feature map reads {n} columns"


def _agree_names(names, want: int, what: str):
    """One name per input column (``feature_names_in_``), per target of a regressor (``store_target_names_``)."""
    return None if len(names) == want else f"names {len(names)} {what}, but the model has {want}"


def _agree_n_output_features(est):
    """The map's output width."""
    n = est.feature_map_.n_output_features
    return None if est.n_output_features_ == n else f"is {est.n_output_features_}, but the feature map outputs {n} features"


def _agree_columns(key: str):
    def rule(est):
        from ..features._standardize import StandardizedMap

        value, fm = getattr(est, key), est.feature_map_
        mine = getattr(fm, key[:-1]) if isinstance(fm, StandardizedMap) else None
        if value is None or mine is None:
            if value is None and mine is None:
                return None
            return "is None, but the map standardizes its input" if value is None else "is set, but the map does not standardize its input"
        if value.shape != mine.shape or not np.array_equal(value, mine):
            return f"differs from the {key[:-1]} the standardized feature map applies"
        return None

    rule.__doc__ = f"None without standardize, else the standardized map's {key[:-1]}, exactly."
    return rule


def _agree_coef(est):
    """(n_output_features_,) or (targets >= 1, n_output_features_)."""
    coef = est.coef_
    if coef.shape[-1] != est.n_output_features_ or coef.shape[0] < 1:
        return f"has shape {coef.shape}; its last axis must be n_output_features_={est.n_output_features_}"
    return None


def _agree_intercept(est):
    """0.0 with ``fit_intercept=False``; else one value per coef_ row: an array (targets,)
    for the classifier and a 2-D coef_, a number for a 1-D regression coef_."""
    b, t = est.intercept_, _targets(est)
    if isinstance(b, np.ndarray) and b.shape != (t,):
        return f"has shape {b.shape}; expected ({t},) for coef_ of shape {est.coef_.shape}"
    if not est.fit_intercept:
        return None if np.all(np.asarray(b) == 0) else f"is {np.asarray(b).tolist()!r}, but fit_intercept=False fits none (0.0)"
    array = "classes_" in vars(est) or est.coef_.ndim == 2  # classes_: the classifier
    if array != isinstance(b, np.ndarray):
        return f"must be {'an array of shape (%d,)' % t if array else 'a number'} for coef_ of shape {est.coef_.shape}"
    return None


def _agree_classes(est):
    """The sorted distinct labels (as ``numpy.unique`` gives them, the order of the
    coefficient columns), two with a 1-D coef_, else one per coef_ row."""
    c, coef = est.classes_, est.coef_
    try:
        ordered = np.unique(c)
    except TypeError:
        ordered = None
    if ordered is None or not np.array_equal(ordered, c):
        return (f"{c.tolist()[:10]} are not the sorted distinct labels as numpy.unique orders them; the "
                "coefficient columns follow that order, so another order swaps the predicted labels")
    k = len(c)
    if (k == 2 and coef.ndim != 1) or (k > 2 and coef.shape != (k, est.n_output_features_)):
        return f"holds {k} classes, which does not match coef_ of shape {coef.shape}"
    return None


def _agree_store_classes(est):
    """The classes_ are codes into these names: integers ``0 <= code < len(store_classes_)``."""
    n = len(est.store_classes_)
    codes = getattr(est, "classes_", np.array([]))
    ok = all(_is_real(v) and float(v).is_integer() and 0 <= v < n for v in codes.tolist())
    return None if ok else f"names {n} labels, but classes_ {codes.tolist()[:10]} are not codes 0..{n - 1} into them"


def alphas_problem(est, alphas) -> str | None:
    """Why saved ``alphas`` are not those ``est.alphas`` scores (or s * 10**(-7..1)), or None."""
    from ..linalg._cv import DEFAULT_ALPHA_EXPONENTS, check_alphas

    if est.alphas is not None:
        if not np.array_equal(alphas, check_alphas(est.alphas)):
            return f"alphas {alphas.tolist()} differ from the parameter alphas={est.alphas!r}"
    elif alphas.shape[0] != DEFAULT_ALPHA_EXPONENTS.size or not (
            alphas[7] > 0 and np.allclose(alphas, alphas[7] * 10.0**DEFAULT_ALPHA_EXPONENTS, rtol=1e-12, atol=0)):
        return f"alphas {alphas.tolist()} are not the default grid s * 10**(-7..1) that alphas=None scores"
    return None


def _agree_cv_results(est):
    """Only with ``cv``: fold axis of length cv, the parameters' alphas (or the default grid
    ``s * 10**(-7..1)``) and gammas; fold_sizes >= 1; fold_mse >= 0 or inf, never NaN, some
    alpha finite in every fold; mean_mse a weighted mean of fold_mse (finite where every
    fold is) and std_mse its standard deviation over the folds."""
    from ..linalg._cv import check_gammas

    r = est.cv_results_
    if est.cv is None:
        return "is set, but cv=None scores no grid"
    if isinstance(est.cv, str):
        return agree_evidence_results(est)
    K, A = int(est.cv), r["alphas"].shape[0]
    grid = () if "gammas" not in r else (r["gammas"].shape[0],)
    want = {"fold_mse": grid + (K, A), "mean_mse": grid + (A,), "std_mse": grid + (A,), "fold_sizes": (K,)}
    for key, shape in want.items():
        if r[key].shape != shape:
            return f"{key} has shape {r[key].shape}; cv={K} folds and {A} alphas{' x %d gammas' % grid[0] if grid else ''} give {shape}"
    if (problem := alphas_problem(est, r["alphas"])) is not None:
        return problem
    if (est.gammas is not None) != bool(grid):
        return "has gammas, but the parameter gammas=None" if grid else f"lacks the gammas of the parameter gammas={est.gammas!r}"
    if grid and isinstance(est.gammas, str):  # "auto": the factors around the gamma or its rule's value
        from ..linalg._cv import AUTO_GAMMA_FACTORS, auto_gamma_factors

        if (factors := auto_gamma_factors(grid[0])) is None:  # today's grid or an earlier release's
            return f"gammas {r['gammas'].tolist()} are not the {AUTO_GAMMA_FACTORS.size} widths of gammas='auto'"
        centre = float(r["gammas"][int(np.flatnonzero(factors == 1.0)[0])])
        want = 1.0 if np.ndim(est.gamma) else None if isinstance(est.gamma, str) else float(est.gamma)
        if want is not None and centre != want:  # ARD: multipliers of the gamma array, centred on 1
            return f"gammas {r['gammas'].tolist()} are not centred on {'1 (ARD multipliers)' if np.ndim(est.gamma) else f'the parameter gamma={est.gamma!r}'}"
        if not np.allclose(r["gammas"], centre * factors, rtol=1e-12, atol=0):
            return f"gammas {r['gammas'].tolist()} are not gammas='auto''s grid {centre!r} * {factors.tolist()}"
    elif grid:
        try:
            same = np.array_equal(r["gammas"], check_gammas(est.gammas, kernel=est.kernel, n_folds=K, sampling=est.sampling))
        except Exception as exc:  # noqa: BLE001 - parameters that could not have fitted a grid
            return f"has gammas, but the parameters cannot score them: {exc}"
        if not same:
            return f"gammas {r['gammas'].tolist()} differ from the parameter gammas={est.gammas!r}"
    sizes = r["fold_sizes"]
    if sizes.dtype.kind not in "iu" or (sizes < 1).any():
        return f"fold_sizes {sizes.tolist()} must be integer row counts >= 1"
    F, mean, std = r["fold_mse"], r["mean_mse"], r["std_mse"]
    for key, v in (("fold_mse", F), ("mean_mse", mean)):
        if np.isnan(v).any() or (v < 0).any():
            return f"{key} holds NaN or negative values; a mean squared error is >= 0 (inf for an unusable alpha)"
    usable = np.isfinite(F).all(axis=-2)
    if not usable.any():
        return "fold_mse has no alpha with a finite error in every fold (such a fit raises instead)"
    if not np.array_equal(np.isfinite(mean), usable) or not _is_weighted_mean(F, mean, usable):
        return "mean_mse is not a weighted mean of fold_mse over the folds"
    with np.errstate(invalid="ignore"):
        if not np.allclose(std, F.std(axis=-2), rtol=1e-9, atol=0.0, equal_nan=True):
            return "std_mse is not the standard deviation of fold_mse over the folds"
    return None


def _agree_alpha(est):
    """With cv_results_: the alpha of the least mean_mse (ties to the larger alpha); without
    cv: the parameter alpha."""
    if "cv_results_" in vars(est):
        _, ai = _chosen(est)
        want, what = float(est.cv_results_["alphas"][ai]), "the alpha of the least mean_mse in cv_results_"
    elif est.cv is None:
        want, what = float(est.alpha), "the parameter alpha (no cv)"
    else:
        return None  # cv without its scores: nothing to choose from
    return None if est.alpha_ == want else f"is {est.alpha_!r}, but {what} is {want!r}"


def _agree_best_score(est):
    """Minus the least mean_mse of cv_results_ (at alpha_ and gamma_)."""
    if "cv_results_" not in vars(est):
        return "is set without cv_results_, the scores it is the best of"
    gi, ai = _chosen(est)
    if "log_evidence" in est.cv_results_:
        ev = est.cv_results_["log_evidence"]
        want = float(ev[ai] if gi is None else ev[gi, ai])
        return None if est.best_score_ == want else f"is {est.best_score_!r}, but the largest log_evidence gives {want!r}"
    mean = est.cv_results_["mean_mse"]
    want = -float(mean[ai] if gi is None else mean[gi, ai])
    return None if est.best_score_ == want else f"is {est.best_score_!r}, but the least mean_mse of cv_results_ gives {want!r}"


def _agree_gamma(est):
    """The gamma of the least mean_mse with a gamma grid (with an ARD gamma array: that
    multiplier times the array), else the parameter gamma when it is a number or an array;
    and the width the feature map is drawn for (where the map records one)."""
    g, want, what = est.gamma_, None, ""
    ard = not isinstance(est.gamma, str) and np.ndim(est.gamma) > 0
    results = vars(est).get("cv_results_")
    if results is not None and "gammas" in results:
        gi, _ = _chosen(est)
        t = float(results["gammas"][gi])
        want = t * np.asarray(est.gamma, dtype=np.float64) if ard else t
        what = "the gamma of the least mean_mse in cv_results_" + (" times the parameter gamma (ARD)" if ard else "")
    elif getattr(est, "gammas", None) is None and not isinstance(est.gamma, str):
        want, what = (np.asarray(est.gamma, dtype=np.float64) if ard else float(est.gamma)), "the parameter gamma"
    if np.ndim(g) != np.ndim(want if want is not None else g):
        return f"is {g!r}, but {what} is {want!r}"
    if want is not None and not np.array_equal(g, want):
        return f"is {g!r}, but {what} is {want!r}"
    drawn = _map_gamma(est.feature_map_)
    if drawn is not None and (np.shape(drawn) != np.shape(g) or not np.allclose(drawn, g, rtol=1e-12, atol=0)):
        return f"is {g!r}, but the feature map is drawn for gamma={drawn!r}"
    return None


def _agree_solver(est):
    """The parameter solver unless "auto"; "pcg" exactly when solver_info_ is stored."""
    s = est.solver_
    if est.solver != "auto" and s != est.solver:
        return f"is {s!r}, but the parameter solver={est.solver!r}"
    if (s == "pcg") != ("solver_info_" in vars(est)):
        return "is 'pcg' without solver_info_, the pcg solver's record" if s == "pcg" else f"is {s!r}, but solver_info_ records a pcg solve"
    return None


def _agree_solver_reason(est):
    """The sentence :func:`dkrr.estimators._solver.choose_solver` writes for this solver:
    ``solver='auto' chose '<solver_>': ...`` or ``solver='<solver>' was asked for...``."""
    if "solver_" not in vars(est):
        return "is stored without solver_, the solver it explains"
    s = est.solver_
    start = f"solver='auto' chose {s!r}:" if est.solver == "auto" else f"solver={s!r} was asked for"
    if not est.solver_reason_.startswith(start):
        return f"does not begin with {start!r} (solver={est.solver!r}, solver_={s!r})"
    return None


def _agree_solver_info(est):
    """The pcg record of these parameters: tol, rank ``min(pcg_rank or 256, p)``, n_iter <=
    max_iter, passes ``n_iter + 1`` (+1 more with cv), residuals (n_iter + 1, systems) with
    systems = targets, or (cv + 1) x alphas x targets, non-negative; converged exactly when
    the last residuals are <= tol (else n_iter = max_iter); persisted as pcg_persist when
    that is true or false."""
    from ..linalg._pcg import DEFAULT_PCG_RANK

    info = est.solver_info_
    res, n_iter, tol = info["residuals"], info["n_iter"], info["tol"]
    if getattr(est, "solver_", "pcg") != "pcg":
        return f"records a pcg solve, but solver_={est.solver_!r}"
    if tol != float(est.tol):
        return f"tol={tol!r} differs from the parameter tol={est.tol!r}"
    rank = min(DEFAULT_PCG_RANK if est.pcg_rank is None else int(est.pcg_rank), est.n_output_features_)
    if info["rank"] != rank:
        return f"rank={info['rank']!r}, but pcg_rank={est.pcg_rank!r} with {est.n_output_features_} features gives {rank}"
    if n_iter > est.max_iter:
        return f"n_iter={n_iter} exceeds the parameter max_iter={est.max_iter!r}"
    cv = est.cv is not None
    if info["passes"] != n_iter + (2 if cv else 1):
        return f"passes={info['passes']!r}, but {n_iter} iterations make {n_iter + (2 if cv else 1)}"
    t, results = _targets(est), vars(est).get("cv_results_")
    systems = t if not cv else None if results is None else (int(est.cv) + 1) * results["alphas"].shape[0] * t
    if systems is not None and res.shape != (n_iter + 1, systems):
        return f"residuals has shape {res.shape}; {n_iter} iterations of {systems} systems give {(n_iter + 1, systems)}"
    if (res < 0).any():
        return "residuals holds negative values; they are relative residual norms"
    converged = not bool((res[-1] > tol).any())
    if info["converged"] != converged:
        return f"converged={info['converged']!r}, but the last residuals are {'' if converged else 'not '}all <= tol={tol!r}"
    if not converged and n_iter != est.max_iter:
        return f"stops unconverged after n_iter={n_iter} iterations, before max_iter={est.max_iter!r}"
    persist = est.pcg_persist
    if isinstance(persist, bool) and info.get("persisted", persist) != persist:
        return f"persisted={info['persisted']!r}, but the parameter pcg_persist={persist!r}"
    return None


def _agree_precision(est):
    """The parameter precision, except "auto": "mixed" (float32 statistics refined) or
    "float64" (its fallback, the pcg solver, sampling), or "float32" in files saved before
    issue 26 (when "auto" kept float32 statistics unrefined); "float64" with the pcg solver."""
    p = est.precision_
    if est.precision != "auto" and p != est.precision:
        return f"is {p!r}, but the parameter precision={est.precision!r}"
    if getattr(est, "solver_", None) == "pcg" and p != "float64":
        return f"is {p!r}, but the pcg solver computes in float64"
    if p == "mixed" and (getattr(est, "sampling", None) is not None or "refinement_" not in vars(est)):
        return "is 'mixed', but the model lacks refinement_ or has sampling (whose passes are float64)"
    if p != "mixed" and "refinement_" in vars(est):
        return f"is {p!r}, but the model has a refinement_, which only 'mixed' (precision='auto') has"
    return None


def _agree_precision_error(est):
    """NaN exactly with the pcg solver; else the estimate ``eps (||G||_F / alpha_ + 20)`` of
    precision_ (float64's for "mixed"): at least ``20 eps`` and finite for alpha_ > 0 (inf or
    0 for alpha_ = 0), at most 1e-2 when precision="auto" kept float32 (files before issue 26)."""
    from ..linalg._precision import AUTO_PRECISION_TOL

    e, pcg = est.precision_error_, getattr(est, "solver_", None) == "pcg"
    if math.isnan(e) or pcg:
        return None if math.isnan(e) and pcg else (
            f"is {e!r}, but the pcg solver keeps no Gram to estimate it from (NaN)" if pcg
            else "is NaN, which only the pcg solver (no Gram) records")
    precision = getattr(est, "precision_", "float64")
    low = 20 * float(np.finfo(np.dtype("float64" if precision == "mixed" else precision)).eps)
    if est.alpha_ > 0 and not low <= e < math.inf:
        return f"is {e!r}; the estimate eps (||G||_F / alpha_ + 20) in {precision} is finite and >= {low:.3g}"
    if est.alpha_ == 0 and e not in (0.0, math.inf):
        return f"is {e!r}; at alpha_=0 the estimate is inf (0 for a zero Gram)"
    if est.precision == "auto" and precision == "float32" and e > AUTO_PRECISION_TOL:
        return f"is {e!r}, above {AUTO_PRECISION_TOL:g}, at which precision='auto' would not keep float32"
    return None


def _agree_refinement(est):
    """With precision_ "mixed": converged in its passes, each target stopped by its rule."""
    from ..linalg._refine import DEFAULT_REFINE_MAX_PASSES, RESIDUAL_FLOOR, targets_stopped

    info, res, passes = est.refinement_, est.refinement_["residuals"], est.refinement_["passes"]
    if getattr(est, "precision_", None) != "mixed":
        return f"is stored, but precision_={getattr(est, 'precision_', None)!r} (only 'mixed' is refined)"
    if not info["converged"] or passes > DEFAULT_REFINE_MAX_PASSES:
        return f"records an unconverged refinement or {passes} passes (at most {DEFAULT_REFINE_MAX_PASSES}); it is kept only converged"
    err, floor = (info["errors"], RESIDUAL_FLOOR) if "errors" in info else (res, info["tol"])  # format 5: residual <= tol
    if any(a.shape != (passes, _targets(est)) or (a < 0).any() for a in (res, err)) or not (
            targets_stopped(err, res, info["tol"]) if "errors" in info else res[-1] <= floor).all():
        return (f"residuals or errors has shape {res.shape} for {passes} passes of {_targets(est)} target(s), or "
                f"negative values, or a target that no rule stopped (tol={info['tol']!r}, residual floor {floor:g})")
    return None


def _agree_fold_seed(est):
    """A draw ``0 <= seed < 2**63 - 1`` of the generator; nothing else derives it (the
    fold hash of a refit; prediction does not read it)."""
    return None if 0 <= est.fold_seed_ < 2**63 - 1 else f"is {est.fold_seed_}, outside the range 0 <= seed < 2**63 - 1 it is drawn from"


#: fitted attribute -> its agreement rule, in the order they are checked (a rule may use
#: the fields before it). Every attribute of dkrr.io._model_reader.FITTED_ATTRIBUTES has one
#: (tests/test_model_agreement.py checks this).
AGREEMENT = {
    "feature_map_": _agree_feature_map,
    "n_features_in_": _agree_n_features_in,
    "feature_names_in_": lambda est: _agree_names(est.feature_names_in_, est.n_features_in_, "columns"),
    "n_output_features_": _agree_n_output_features,
    "mean_": _agree_columns("mean_"), "scale_": _agree_columns("scale_"),
    "coef_": _agree_coef,
    "intercept_": _agree_intercept,
    "classes_": _agree_classes,
    "store_target_names_": lambda est: _agree_names(est.store_target_names_,
                                                    0 if "classes_" in vars(est) else _targets(est), "targets"),
    "store_classes_": _agree_store_classes,
    "cv_results_": _agree_cv_results,
    "alpha_": _agree_alpha,
    "best_score_": _agree_best_score,
    "gamma_": _agree_gamma,
    "solver_": _agree_solver,
    "solver_reason_": _agree_solver_reason,
    "solver_info_": _agree_solver_info,
    "precision_": _agree_precision,
    "precision_error_": _agree_precision_error,
    "refinement_": _agree_refinement,
    "fold_seed_": _agree_fold_seed,
    "noise_variance_": agree_noise_variance,
    "log_marginal_likelihood_": lambda est: None if np.isfinite(est.log_marginal_likelihood_) else "is not finite",
    "posterior_": agree_posterior,
}
