"""What ``dkrr fit`` and ``dkrr evaluate`` print: the cross-validation table, the choice,
the metrics, rounded for a person to read; and the ``--json`` documents at full precision.

Everything here is a pure function of a fitted estimator or a metrics dict, returning
text lines or a JSON-ready dict; the commands (:mod:`._commands`) do the printing.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["cv_table", "evidence_table", "fit_json", "fit_lines", "in_dims_of", "json_ready", "metric_lines", "predict_line",
           "predictive_metrics", "predictive_sums", "significant"]

#: significant digits of a CV error (mean) and of its spread (std) in the table
MEAN_DIGITS, STD_DIGITS = 4, 3


def significant(x, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits (``1e-05``, ``0.1``, ``19.37``, ``1.235e+04``);
    ``nan``/``inf`` as such."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


def _cell_number(x, digits: int) -> str:
    """Like :func:`significant` but keeping trailing zeros (``0.4590``, ``0.0110``), so
    that the cells of a column line up."""
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    text = f"{x:#.{digits}g}"
    return text[:-1] if text.endswith(".") else text


def plus_minus(stream) -> str:
    """``±`` where ``stream`` can encode it, else ``+-``."""
    try:
        "±".encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "+-"
    return "±"


def gamma_used(est):
    """The kernel width the fitted model uses (``gamma_``, else a numeric ``gamma``): a
    float, a list of floats (ARD), or None when the kernel has no width."""
    from ..features._nonlinear import WIDTH_KERNELS

    if getattr(est, "kernel", "gaussian") not in WIDTH_KERNELS:  # its gamma_ is 1.0, no width
        return None
    gamma = getattr(est, "gamma_", None)
    if gamma is None:
        gamma = est.gamma if isinstance(est.gamma, numbers.Real) else None
    if gamma is None:
        return None
    return [float(g) for g in gamma] if np.ndim(gamma) else float(gamma)


def _grid_gamma(est, gamma):
    """The value of ``cv_results_["gammas"]`` the model uses: gamma itself, or with an ARD
    gamma array the multiplier of the parameter gamma (None without a width)."""
    if gamma is None or not np.ndim(gamma):
        return gamma
    return float(np.asarray(gamma)[0] / np.asarray(est.gamma, dtype=np.float64)[0])


def _gamma_text(gamma) -> str:
    return "[" + ", ".join(significant(g) for g in gamma) + "]" if np.ndim(gamma) else significant(gamma)


def error_name(est) -> str:
    """What the cross-validation error of ``est`` measures, honestly worded."""
    coef = np.atleast_2d(est.coef_)
    if hasattr(est, "classes_"):
        targets = "one-vs-rest +-1 targets" if len(est.classes_) > 2 else "+-1 class targets"
        return (f"mean squared error of the {targets} (what ridge classification minimizes, "
                "not the misclassification rate)")
    if coef.shape[0] > 1:
        return f"mean squared error, averaged over the {coef.shape[0]} targets"
    return "mean squared error"


def _chosen_index(grid, value) -> int:
    grid = np.asarray(grid, dtype=np.float64)
    hits = np.nonzero(grid == value)[0]
    return int(hits[0]) if hits.size else int(np.argmin(np.abs(grid - value)))


def cv_table(cv_results, *, alpha, gamma=None, pm: str = "±", ard: bool = False) -> list[str]:
    """The CV errors as a table: one row per alpha, one column per gamma.

    Parameters
    ----------
    cv_results : dict
        ``cv_results_`` of a fitted estimator: ``alphas``, ``mean_mse``, ``std_mse``
        ((n_alphas,) without a gamma grid; (n_gammas, n_alphas) with ``gammas``).
    alpha : float
        The chosen alpha (``alpha_``); its cell is marked ``*``.
    gamma : float or None
        The chosen gamma with a gamma grid (with an ARD gamma: the chosen multiplier, the
        columns headed ``gamma x t``); else the one gamma used (the column header), or
        None for a kernel without a width.
    pm : str
        The plus-minus sign.

    Returns
    -------
    list of str
        Header and one line per alpha; cells ``mean pm std`` to 4 and 3 significant
        digits, ``not scored`` for an alpha scored ``inf`` (a fold's ``G' + alpha I`` not
        positive definite at the statistics' rounding).
    """
    alphas = np.asarray(cv_results["alphas"], dtype=np.float64)
    mean = np.asarray(cv_results["mean_mse"], dtype=np.float64)
    std = np.asarray(cv_results["std_mse"], dtype=np.float64)
    headers, gi = _gamma_columns(cv_results, gamma, ard, "CV error")
    mean, std = mean.reshape(len(headers), -1), std.reshape(len(headers), -1)
    ai = _chosen_index(alphas, alpha)
    cells = [[(f"{_cell_number(mean[g, a], MEAN_DIGITS)} {pm} {_cell_number(std[g, a], STD_DIGITS)}"
               if np.isfinite(mean[g, a]) else "not scored")  # inf: a fold's system not positive definite
              + (" *" if (g, a) == (gi, ai) else "  ")
              for g in range(mean.shape[0])] for a in range(alphas.size)]
    return _grid_lines(alphas, headers, cells)


def _gamma_columns(cv_results, gamma, ard: bool, single: str) -> tuple[list[str], int]:
    """The column headers of a grid table (one per gamma of the grid, else one column
    named after the gamma used, or ``single``) and the chosen column."""
    if "gammas" in cv_results:
        gammas = np.asarray(cv_results["gammas"], dtype=np.float64)
        headers = [f"gamma x{significant(g)}" if ard else f"gamma={significant(g)}" for g in gammas]
        return headers, _chosen_index(gammas, gamma)
    return [single if gamma is None or ard else f"gamma={significant(gamma)}"], 0


#: significant digits of a log evidence in the table
EVIDENCE_DIGITS = 7


def evidence_table(cv_results, *, alpha, gamma=None, ard: bool = False) -> list[str]:
    """The log evidence of ``cv="evidence"`` as a table laid out like :func:`cv_table`:
    one row per alpha, one column per gamma, the chosen (largest) cell marked ``*``;
    ``cv_results`` holds ``alphas``, ``log_evidence`` ((n_alphas,) or (n_gammas, n_alphas))
    and with a gamma grid ``gammas``."""
    alphas = np.asarray(cv_results["alphas"], dtype=np.float64)
    headers, gi = _gamma_columns(cv_results, gamma, ard, "log evidence")
    logev = np.asarray(cv_results["log_evidence"], dtype=np.float64).reshape(len(headers), -1)
    ai = _chosen_index(alphas, alpha)
    cells = [[(_cell_number(logev[g, a], EVIDENCE_DIGITS) if np.isfinite(logev[g, a]) else "not scored")
              + (" *" if (g, a) == (gi, ai) else "  ")  # -inf: G_c + alpha I not positive definite
              for g in range(logev.shape[0])] for a in range(alphas.size)]
    return _grid_lines(alphas, headers, cells)


def _grid_lines(alphas, headers, cells) -> list[str]:
    """A header line and one line per alpha, the cells right-aligned in their columns."""
    labels = [significant(a) for a in alphas]
    lw = max(len("alpha"), *(len(s) for s in labels))
    widths = [max(len(h), *(len(row[g]) for row in cells)) for g, h in enumerate(headers)]
    lines = ["  ".join([f"{'alpha':>{lw}}"] + [f"{h:>{w}}" for h, w in zip(headers, widths)])]
    for label, row in zip(labels, cells):
        lines.append("  ".join([f"{label:>{lw}}"] + [f"{c:>{w}}" for c, w in zip(row, widths)]))
    return lines


def fit_lines(est, *, out, n_rows: int, n_features: int, seconds: float, pm: str = "±") -> list[str]:
    """What ``dkrr fit`` prints: the CV table and the choice (with ``cv``), why the solver
    was chosen (``solver_reason_``), the model."""
    gamma = gamma_used(est)
    chosen = f"alpha_ = {significant(est.alpha_)}"
    if gamma is not None:
        chosen += f", gamma_ = {_gamma_text(gamma)}"
    lines = []
    results = getattr(est, "cv_results_", None)
    if results is not None and "log_evidence" in results:
        unscored = not np.isfinite(np.asarray(results["log_evidence"], dtype=np.float64)).all()
        lines.append("log marginal likelihood (evidence) of y, * = chosen (the largest)"
                     + (", not scored = G + alpha*I not positive definite" if unscored else "") + ":")
        lines += ["  " + line for line in evidence_table(results, alpha=est.alpha_, gamma=_grid_gamma(est, gamma),
                                                         ard=bool(np.ndim(gamma)))]
        s2 = noise_variance(est)
        noise = _gamma_text(s2) if np.ndim(s2) else significant(s2)
        lines.append(f"chosen: {chosen} (log evidence {significant(est.best_score_, EVIDENCE_DIGITS)}, "
                     f"noise variance {noise})")
    elif results is not None:
        k = np.asarray(results["fold_mse"]).shape[-2]
        unscored = not np.isfinite(np.asarray(results["mean_mse"], dtype=np.float64)).all()
        lines.append(f"{k}-fold cross-validated {error_name(est)}; mean {pm} std over the folds, * = chosen"
                     + (", not scored = G + alpha*I not positive definite in a fold" if unscored else "") + ":")
        lines += ["  " + line for line in cv_table(results, alpha=est.alpha_, gamma=_grid_gamma(est, gamma), pm=pm,
                                                   ard=bool(np.ndim(gamma)))]
        best = -float(est.best_score_)
        score = f"CV MSE {significant(best)}"
        if not hasattr(est, "classes_") and best >= 0:
            score += f", RMSE {significant(math.sqrt(best))}"
        lines.append(f"chosen: {chosen} ({score})")
    else:
        lines.append(f"fitted with {chosen} (no cross-validation: without --no-cv or a lone --alpha, 5-fold CV chooses alpha)")
    what = type(est).__name__
    if getattr(est, "standardize", False):
        what += ", standardized X"
    what += f", {solver_text(est)}"
    reason = getattr(est, "solver_reason_", None)
    if reason is not None:
        lines.append(reason)
    lines.append(f"wrote {out} ({what}; {n_rows:,} rows x {n_features} features; "
                 f"fit {seconds:.1f} s)")
    return lines


def noise_variance(est):
    """The noise variance of the chosen (gamma, alpha): ``noise_variance_``, or with
    ``cv="evidence"`` and no posterior its ``cv_results_`` entry; a float, or a list with
    several targets."""
    s2 = getattr(est, "noise_variance_", None)
    if s2 is None:
        res = est.cv_results_
        ai = _chosen_index(res["alphas"], est.alpha_)
        table = np.asarray(res["noise_variance"], dtype=np.float64)
        if "gammas" in res:
            table = table[_chosen_index(res["gammas"], _grid_gamma(est, gamma_used(est)))]
        s2 = table[ai]
        s2 = s2[0] if np.size(s2) == 1 else s2
    return [float(v) for v in s2] if np.ndim(s2) else float(s2)


def solver_text(est) -> str:
    """``solver cholesky``, or ``solver pcg (N iterations, M passes)`` (with ``auto``: what it chose)."""
    solver = getattr(est, "solver_", None) or est.solver
    text = f"solver {solver}" + (" (chosen by auto)" if est.solver == "auto" else "")
    info = getattr(est, "solver_info_", None)
    if solver == "pcg" and info is not None:
        text += f", {info['n_iter']} CG iterations, {info['passes']} passes over the data"
    return text


def json_ready(value):
    """``value`` with numpy arrays and scalars as lists and numbers, and non-finite floats
    as None (JSON has no NaN or infinity)."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [json_ready(v) for v in (value.tolist() if isinstance(value, np.ndarray) else value)]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def fit_json(est, *, out, n_rows: int, n_features: int, seconds: float) -> dict:
    """The ``dkrr fit --json`` document: the summary, the precision, with ``solver="pcg"``
    whether CG converged (``pcg``: converged, n_iter, passes, tol, rank and the largest
    final relative residual), with ``precision_="mixed"`` the refinement's passes, the
    choice and, with ``cv``, every array of ``cv_results_`` at full precision."""
    doc = {"model": str(out), "estimator": type(est).__name__, "fit_seconds": round(seconds, 3),
           "n_rows": int(n_rows), "n_features": int(n_features), "alpha": float(est.alpha_),
           "gamma": gamma_used(est), "solver": getattr(est, "solver_", None) or est.solver,
           "solver_reason": getattr(est, "solver_reason_", None)}
    doc["precision"] = getattr(est, "precision_", None)
    info = getattr(est, "solver_info_", None)
    if info is not None:  # solver="pcg": whether CG met its tol (a warning says so on stderr)
        doc["pcg"] = {"converged": bool(info["converged"]), "n_iter": int(info["n_iter"]),
                      "passes": int(info["passes"]), "tol": float(info["tol"]), "rank": int(info["rank"]),
                      "residual": float(np.max(np.asarray(info["residuals"], dtype=np.float64)[-1]))}
    refinement = getattr(est, "refinement_", None)
    if refinement is not None:  # precision "mixed": the float64 passes that refined the solve
        doc["refinement"] = {"passes": int(refinement["passes"]), "converged": bool(refinement["converged"])}
    results = getattr(est, "cv_results_", None)
    if results is not None and "log_evidence" in results:  # cv="evidence"
        doc["selection"] = "evidence"
        doc["log_evidence"] = float(est.best_score_)
        doc["noise_variance"] = noise_variance(est)
        doc["cv_results"] = json_ready(results)
    elif results is not None:
        doc["cv_error"] = error_name(est)
        doc["best_score"] = float(est.best_score_)
        doc["cv_results"] = json_ready(results)
    if getattr(est, "noise_variance_", None) is not None:  # the posterior (ALGORITHMS.md 3.11)
        doc["noise_variance"] = noise_variance(est)
        doc["log_marginal_likelihood"] = float(est.log_marginal_likelihood_)
    return json_ready(doc)


#: the central predictive intervals ``dkrr evaluate --std`` scores: (name, probability)
INTERVALS = (("coverage_68", 0.68), ("coverage_95", 0.95))


#: how each metric of ``dkrr evaluate`` is rounded for reading
_METRIC_FORMATS = {
    "accuracy": lambda v: f"{v:.4f}",
    "r2": lambda v: f"{v:.4f}",
    "rmse": lambda v: significant(v, 4),
    "mse": lambda v: significant(v, 4),
    "nlpd": lambda v: significant(v, 4),
    **{name: (lambda v: f"{v:.4f}") for name, _ in INTERVALS},
}


def metric_lines(metrics: dict) -> list[str]:
    """``key: value`` lines of ``dkrr evaluate``: accuracy, R^2 and coverages to 4 decimals,
    RMSE, MSE and NLPD to 4 significant digits, counts as integers; ``per_target`` as
    ``key[target]: value`` lines after the others."""
    def line(key, value, label):
        if isinstance(value, float) and math.isfinite(value) and key in _METRIC_FORMATS:
            value = _METRIC_FORMATS[key](value)
        return f"{label}: {value}"

    lines = [line(k, v, k) for k, v in metrics.items() if k != "per_target"]
    for target, scores in metrics.get("per_target", {}).items():
        lines += [line(k, v, f"{k}[{target}]") for k, v in scores.items()]
    return lines


def regression_metrics(sse, ysum, yy, n_rows: int, names=None, level=None) -> tuple[dict, str | None]:
    """``dkrr evaluate``'s scores of a regression from computed column sums over the rows
    (``yy`` and ``ysum`` of y less a shift, ``level`` that shift): ``r2`` (scikit-learn's
    ``r2_score``: the uniform average over the targets, and for a constant target 1.0 where
    the predictions are exact, else 0.0), ``rmse`` and ``mse`` (over rows and targets); with
    several targets also ``per_target``, ``{name: {r2, rmse, mse}}`` (``names``: the
    store's, else ``target_j``). Returns ``(metrics, note)``: the note names the constant
    targets, whose R^2 is undefined (None when there are none)."""
    sse, ysum, yy = (np.atleast_1d(np.asarray(a, dtype=np.float64)) for a in (sse, ysum, yy))
    level = np.zeros_like(sse) if level is None else np.abs(np.atleast_1d(np.asarray(level, dtype=np.float64)))
    total = yy - ysum**2 / n_rows
    # constant up to the rounding of y less its shift (a few ulps of the shift per row)
    constant = total <= n_rows * (8 * np.finfo(np.float64).eps * level) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(constant, np.where(sse == 0, 1.0, 0.0), 1 - sse / total)
    names = list(names) if names is not None and len(names) == sse.size else [f"target_{j}" for j in range(sse.size)]
    metrics = {"r2": float(np.mean(r2)), "rmse": float(np.sqrt(np.mean(sse) / n_rows)),
               "mse": float(np.mean(sse) / n_rows)}
    if sse.size > 1:
        metrics["per_target"] = {str(name): {"r2": float(r2[j]), "rmse": float(np.sqrt(sse[j] / n_rows)),
                                             "mse": float(sse[j] / n_rows)} for j, name in enumerate(names)}
    note = None
    if constant.any():
        which = "y" if sse.size == 1 else "target " + ", ".join(str(names[j]) for j in np.flatnonzero(constant))
        note = (f"{which} is constant over the {n_rows:,} rows, so R^2 is undefined there: r2 counts it as "
                "scikit-learn's r2_score does (1.0 for exact predictions, else 0.0); rmse is the measure")
    return metrics, note


def predict_line(out, n_rows: int, arrays=("y_pred",)) -> str:
    """What ``dkrr predict`` prints (``arrays``: those written, ``y_pred`` and maybe ``y_std``)."""
    return f"wrote {out}: {' and '.join(arrays)} for {n_rows:,} rows"


def in_dims_of(a, y):
    """``a`` (a prediction of ``y``'s targets, same length) with ``y``'s number of
    dimensions: one target as (n,) or (n, 1). By indexing, not ``reshape``, which dask's
    array query planning does not have."""
    if a.ndim == y.ndim:
        return a
    return a[:, None] if a.ndim == 1 else a[:, 0]


def predictive_sums(resid, std) -> list:
    """The column sums (lazy with dask inputs) that score a predictive std on held-out rows:
    the negative log predictive density ``0.5 log(2 pi s^2) + r^2 / (2 s^2)`` of the
    Gaussian ``N(y_pred, s^2)``, then for each of :data:`INTERVALS` the rows with
    ``|r| <= z s``, ``z`` the interval's normal quantile. ``resid = y - y_pred``."""
    from scipy.stats import norm

    sums = [(0.5 * np.log(2 * np.pi * std**2) + resid**2 / (2 * std**2)).sum(axis=0)]
    for _, prob in INTERVALS:
        z = float(norm.ppf(0.5 + prob / 2))
        sums.append((abs(resid) <= z * std).sum(axis=0))
    return sums


def predictive_metrics(sums, n_rows: int) -> dict:
    """``nlpd`` (mean over rows and targets) and the coverages (fractions of rows inside the
    interval, averaged over targets) from the computed :func:`predictive_sums`."""
    metrics = {"nlpd": float(np.mean(sums[0]) / n_rows)}
    for (name, _), inside in zip(INTERVALS, sums[1:]):
        metrics[name] = float(np.mean(inside) / n_rows)
    return metrics
