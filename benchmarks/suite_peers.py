"""Suite "peers": dkrr against scikit-learn (and scikit-learn-extra) at equal accuracy.

On each data set (real: cal_housing, CASP, cod-RNA, letter; synthetic regression at
growing n) every method is fitted at a grid of *output widths* p (columns of the feature
matrix: dkrr ``n_components = p / 2`` frequencies with the cos/sin map, RBFSampler /
Nystroem / Fastfood ``n_components = p``), with the same ``gamma`` and ``alpha`` for all
methods. ``gamma`` and ``lambda`` are chosen once per data set by 3-fold CV of exact
kernel ridge regression on a small subset (grid around the 50-NN bandwidth rule of
ALGORITHMS.md section 5); every method then uses ``alpha = lambda * n_train``.

Recorded per (data set, method, width): test error (MSE of the standardised target for
regression, error rate for classification), fit and predict wall time (median over
repeats with a new random seed each repeat, so the error spread includes the randomness
of the features), and peak traced memory of fit + predict (tracemalloc, separate untimed
run). Exact ``KernelRidge`` runs when the training set has at most ``krr_max_n`` rows.

"Time to reach the same error" is reported for two targets: within 1% (relative) of
exact KRR's test error, and the *common level*: the worst of the methods' best errors,
which every method reaches somewhere in the grid. For each method, the fit time to the
target interpolated log-log along its time/error frontier over the width grid (not the
time of the first width crossing it: that jumps by the grid's factor of 2 when an error
moves slightly); ratios are to the fastest dkrr method, measured in the same run. The
``speed`` suite gives equal-width and equal-error ratios against scikit-learn with their
spread over seeds. Where a peer beats dkrr, the stage profile of dkrr (transform / Gram / solve,
each timed on its own) says where the time goes.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

import numpy as np

from ._common import (
    Config,
    check_dkrr_methods,
    dkrr_ridge_classes,
    fmt_bytes,
    fmt_num,
    fmt_stat,
    frontier_time,
    make_dkrr_ridge,
    sklearn_extra_fastfood,
    summarize,
    time_call,
    traced_peak,
)
from ._data import Split, load_split, sigma_50nn, synthetic_regression

NAME = "peers"
TITLE = "Peers at equal accuracy"

DKRR_METHODS = ["rff", "orf", "sorf", "fastfood", "nystroem"]


def settings(cfg: Config) -> dict[str, Any]:
    if cfg.quick:
        return {
            "real": ["cal_housing", "letter"],
            "n_train": 1500,
            "n_test": 500,
            "widths": [64, 256],
            "synthetic_n": [500, 2000],
            "synthetic_widths": [64, 256],
            "krr_max_n": 2000,
            "cv_rows": 400,
            "gamma_factors": [0.25, 1.0, 4.0],
            "lambdas": [1e-3, 1e-1],
        }
    return {
        "real": ["cal_housing", "casp", "cod_rna", "letter"],
        "n_train": 10000,
        "n_test": 5000,
        "widths": [256, 512, 1024, 2048],
        "synthetic_n": [2500, 10000, 40000],
        "synthetic_widths": [256, 1024],
        "krr_max_n": 10000,
        "cv_rows": 2000,
        "gamma_factors": [0.25, 0.5, 1.0, 2.0, 4.0],
        "lambdas": [1e-4, 1e-3, 1e-2, 1e-1],
    }


# -- models ---------------------------------------------------------------------------
class KernelRidgeClassifier:
    """Exact kernel ridge on +-1 (one-hot) targets, predicting by sign / argmax.

    The same encoding as scikit-learn's ``RidgeClassifier`` and dkrr's classifier
    (ALGORITHMS.md section 3), with the exact RBF kernel.
    """

    def __init__(self, alpha: float, gamma: float):
        self.alpha, self.gamma = alpha, gamma

    def fit(self, X, y):
        from sklearn.kernel_ridge import KernelRidge
        from sklearn.preprocessing import LabelBinarizer

        self._lb = LabelBinarizer(neg_label=-1, pos_label=1)
        Y = self._lb.fit_transform(y)
        self._krr = KernelRidge(alpha=self.alpha, kernel="rbf", gamma=self.gamma).fit(X, Y)
        return self

    def predict(self, X):
        s = self._krr.predict(X)
        if s.ndim == 1 or s.shape[1] == 1:
            return self._lb.classes_[(s.ravel() > 0).astype(int)]
        return self._lb.classes_[np.argmax(s, axis=1)]


def _error(task: str, y_true, y_pred) -> float:
    if task == "regression":
        return float(np.mean((np.asarray(y_true, float) - np.asarray(y_pred, float)) ** 2))
    return float(np.mean(np.asarray(y_true) != np.asarray(y_pred)))


def _model_factories(task: str, gamma: float, alpha: float, dkrr_reg, dkrr_clf, dkrr_ok, ff_cls):
    """label -> (family, factory(width, seed)) for every method that can run."""
    from sklearn.kernel_approximation import Nystroem, RBFSampler
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.pipeline import make_pipeline

    reg = task == "regression"
    lin = (lambda: Ridge(alpha=alpha)) if reg else (lambda: RidgeClassifier(alpha=alpha))
    dk_cls = dkrr_reg if reg else dkrr_clf
    out: dict[str, tuple[str, Any]] = {}
    for m in dkrr_ok:
        def f(width, seed, m=m):
            D = width if m == "nystroem" else width // 2
            return make_dkrr_ridge(dk_cls, kernel="gaussian", method=m, n_components=D, gamma=gamma,
                                   alpha=alpha, fit_intercept=True, random_state=seed)
        out[f"dkrr {m}"] = ("dkrr", f)
    out["sklearn RBFSampler+Ridge"] = ("sklearn", lambda width, seed: make_pipeline(
        RBFSampler(gamma=gamma, n_components=width, random_state=seed), lin()))
    out["sklearn Nystroem+Ridge"] = ("sklearn", lambda width, seed: make_pipeline(
        Nystroem(kernel="rbf", gamma=gamma, n_components=width, random_state=seed), lin()))
    if ff_cls is not None:
        sigma = float(np.sqrt(1.0 / (2.0 * gamma)))
        out["sklearn-extra Fastfood+Ridge"] = ("sklearn-extra", lambda width, seed: make_pipeline(
            ff_cls(sigma=sigma, n_components=width, random_state=seed, tradeoff_mem_accuracy="mem"), lin()))
    return out


# -- hyperparameters -------------------------------------------------------------------
def select_hyperparameters(split: Split, st: dict, seed: int) -> dict[str, Any]:
    """3-fold CV of exact KRR on a subset over gamma (around the 50-NN rule) x lambda."""
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.model_selection import KFold

    rng = np.random.default_rng(seed)
    n = min(st["cv_rows"], split.X_train.shape[0])
    idx = rng.choice(split.X_train.shape[0], size=n, replace=False)
    X, y = split.X_train[idx], split.y_train[idx]
    sigma = sigma_50nn(split.X_train, seed=seed)
    gamma0 = 1.0 / (2.0 * sigma**2)
    table = []
    for gf in st["gamma_factors"]:
        for lam in st["lambdas"]:
            errs = []
            for tr, va in KFold(3, shuffle=True, random_state=seed).split(X):
                alpha = lam * len(tr)
                if split.task == "regression":
                    model = KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma0 * gf)
                else:
                    model = KernelRidgeClassifier(alpha=alpha, gamma=gamma0 * gf)
                model.fit(X[tr], y[tr])
                errs.append(_error(split.task, y[va], model.predict(X[va])))
            table.append({"gamma": gamma0 * gf, "lambda": lam, "cv_error": float(np.mean(errs))})
    best = min(table, key=lambda r: r["cv_error"])
    return {"sigma_50nn": sigma, "gamma0": gamma0, "gamma": best["gamma"], "lambda": best["lambda"],
            "cv_rows": n, "grid": table}


# -- measurements ----------------------------------------------------------------------
def _measure(factory, split: Split, repeats: int, seed: int) -> dict[str, Any]:
    fit_t, pred_t, errs, widths = [], [], [], []
    for r in range(repeats):
        est = factory(seed + r)
        t0 = time.perf_counter()
        est.fit(split.X_train, split.y_train)
        t1 = time.perf_counter()
        pred = est.predict(split.X_test)
        t2 = time.perf_counter()
        fit_t.append(t1 - t0)
        pred_t.append(t2 - t1)
        errs.append(_error(split.task, split.y_test, pred))
        w = getattr(est, "n_output_features_", None)
        if w is None and hasattr(est, "steps"):
            w = getattr(est.steps[0][1], "n_components", None)
            if hasattr(est.steps[0][1], "components_"):
                w = est.steps[0][1].components_.shape[0]
        widths.append(w)
    peak, _ = traced_peak(lambda: factory(seed).fit(split.X_train, split.y_train).predict(split.X_test))
    return {"fit_s": summarize(fit_t), "predict_s": summarize(pred_t), "error": summarize(errs),
            "peak_traced_bytes": peak, "output_width": widths[0]}


def _profile_dkrr(split: Split, method: str, width: int, gamma: float, alpha: float, repeats: int, seed: int):
    """Stages of a dkrr fit timed one by one: transform, Gram + cross products, solve."""
    import scipy.linalg
    from dkrr import RandomFeatures

    X, y = split.X_train, split.y_train
    if split.task != "regression":
        from sklearn.preprocessing import LabelBinarizer

        y = LabelBinarizer(neg_label=-1).fit_transform(y).astype(float)
    D = width if method == "nystroem" else width // 2
    make = lambda: RandomFeatures(kernel="gaussian", method=method, n_components=D, gamma=gamma, random_state=seed)
    t_map, rf = time_call(lambda: make().fit(X), repeats)
    t_tr, Z = time_call(lambda: rf.transform(X), repeats)
    Z = np.asarray(Z, dtype=np.float64)
    t_gram, G = time_call(lambda: (Z.T @ Z, Z.T @ y, Z.sum(axis=0)), repeats)
    G0 = G[0]
    p = G0.shape[0]

    def solve():
        c, low = scipy.linalg.cho_factor(G0 + alpha * np.eye(p), lower=False)
        return scipy.linalg.cho_solve((c, low), G[1])

    t_solve, _ = time_call(solve, repeats)
    return {"map_fit_s": t_map, "transform_s": t_tr, "gram_s": t_gram, "solve_s": t_solve, "width": p}


def _profile_sklearn_rbf(split: Split, width: int, gamma: float, alpha: float, repeats: int, seed: int):
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import Ridge, RidgeClassifier

    X, y = split.X_train, split.y_train
    rbf = RBFSampler(gamma=gamma, n_components=width, random_state=seed).fit(X)
    t_tr, Z = time_call(lambda: rbf.transform(X), repeats)
    lin = Ridge(alpha=alpha) if split.task == "regression" else RidgeClassifier(alpha=alpha)
    t_fit, _ = time_call(lambda: lin.fit(Z, y), repeats)
    return {"transform_s": t_tr, "ridge_fit_s": t_fit}


def _time_to_target(records: list[dict], target: float) -> dict[str, dict]:
    """Per method: the fit time to reach ``target``, interpolated log-log along its
    time/error frontier over the width grid (medians over repeats;
    :func:`benchmarks._common.frontier_time`), and the smallest width reaching it.

    Interpolating keeps a small change of the target from jumping to the next width of
    the grid, which a "first width that crosses the threshold" rule turns into a 2x
    change of time.
    """
    out = {}
    for label in sorted({r["method"] for r in records}):
        rows = sorted((r for r in records if r["method"] == label), key=lambda r: r["width"] or 0)
        ok = [r for r in rows if r["error"]["median"] is not None and r["fit_s"]["median"] is not None]
        hit = next((r for r in ok if r["error"]["median"] <= target), None)
        best = min(ok, key=lambda r: r["error"]["median"], default=None)
        t, kind = (frontier_time([r["fit_s"]["median"] for r in ok], [r["error"]["median"] for r in ok], target)
                   if ok else (None, "not reached"))
        out[label] = {
            "reached": t is not None,
            "width": hit["width"] if hit else None,
            "time_s": t,
            "how": kind,
            "best_error": best["error"]["median"] if best else None,
            "family": rows[0]["family"],
        }
    return out


def _ratios(ttt: dict[str, dict]) -> tuple[str | None, dict[str, float | None]]:
    dk = {k: v for k, v in ttt.items() if v["family"] == "dkrr" and v["reached"]}
    if not dk:
        return None, {}
    best = min(dk, key=lambda k: dk[k]["time_s"])
    tb = dk[best]["time_s"]
    return best, {k: (v["time_s"] / tb if v["reached"] else None) for k, v in ttt.items()}


def run_dataset(split: Split, widths: list[int], st: dict, cfg: Config, hp: dict, env: dict) -> dict[str, Any]:
    gamma, lam = hp["gamma"], hp["lambda"]
    n = split.X_train.shape[0]
    alpha = lam * n
    factories = _model_factories(split.task, gamma, alpha, env["reg"], env["clf"], DKRR_METHODS, env["ff_cls"])
    records, failures = [], {}
    for width in widths:
        for label, (family, fac) in factories.items():
            try:
                res = _measure(lambda seed, fac=fac, width=width: fac(width, seed), split, cfg.repeats, cfg.seed)
            except Exception as exc:
                failures[f"{label} p={width}"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                continue
            records.append({"method": label, "family": family, "width": width, **res})
    krr = None
    if n <= st["krr_max_n"]:
        from sklearn.kernel_ridge import KernelRidge

        def fac(seed):
            if split.task == "regression":
                return KernelRidge(alpha=alpha, kernel="rbf", gamma=gamma)
            return KernelRidgeClassifier(alpha=alpha, gamma=gamma)

        try:
            krr = _measure(fac, split, cfg.repeats, cfg.seed)
            records.append({"method": "sklearn KernelRidge (exact)", "family": "exact", "width": None, **krr})
        except Exception as exc:
            failures["sklearn KernelRidge (exact)"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    approx = [r for r in records if r["family"] != "exact"]
    targets = {}
    if krr is not None:
        targets["within 1% of exact KRR"] = krr["error"]["median"] * 1.01
    bests = {}
    for r in approx:
        e = r["error"]["median"]
        if e is not None:
            bests[r["method"]] = min(bests.get(r["method"], np.inf), e)
    if bests:
        targets["common level (worst of the methods' best errors)"] = max(bests.values())
    analyses = {}
    for tname, tval in targets.items():
        ttt = _time_to_target(approx, tval)
        best, ratios = _ratios(ttt)
        analyses[tname] = {"target_error": tval, "per_method": ttt, "fastest_dkrr": best, "time_ratio_to_fastest_dkrr": ratios}
    # stage profiles at the largest width
    wmax = max(widths)
    profile = {}
    for m in DKRR_METHODS:
        try:
            profile[f"dkrr {m}"] = _profile_dkrr(split, m, wmax, gamma, alpha, cfg.repeats, cfg.seed)
        except Exception as exc:
            profile[f"dkrr {m}"] = {"error": f"{type(exc).__name__}: {exc}"}
    try:
        profile["sklearn RBFSampler+Ridge"] = _profile_sklearn_rbf(split, wmax, gamma, alpha, cfg.repeats, cfg.seed)
    except Exception as exc:
        profile["sklearn RBFSampler+Ridge"] = {"error": f"{type(exc).__name__}: {exc}"}
    notes = _slower_notes(split.name, analyses, records, wmax)
    return {
        "dataset": split.name, "task": split.task, "note": split.note, "n_train": n,
        "n_test": split.X_test.shape[0], "n_features": split.X_train.shape[1],
        "gamma": gamma, "lambda": lam, "alpha": alpha, "records": records, "failures": failures,
        "targets": analyses, "profile_width": wmax, "profile": profile, "notes": notes,
    }


def _slower_notes(name, analyses, records, wmax) -> list[str]:
    notes = []
    if not any(r["family"] == "dkrr" for r in records):
        return [f"{name}: no dkrr ridge results (estimator or methods not available); peers measured alone."]
    for tname, a in analyses.items():
        best = a["fastest_dkrr"]
        if best is None:
            notes.append(f"{name}: no dkrr method reached the target '{tname}' ({fmt_num(a['target_error'])}) in the width grid.")
            continue
        tb = a["per_method"][best]["time_s"]
        for label, v in a["per_method"].items():
            if v["family"] != "dkrr" and v["reached"] and v["time_s"] < tb:
                notes.append(
                    f"{name}: dkrr is SLOWER than {label} to reach '{tname}': {fmt_num(tb)} s ({best}) vs "
                    f"{fmt_num(v['time_s'])} s; see the stage profile below."
                )
    by_w = {r["method"]: r for r in records if r["width"] == wmax}
    for r in by_w.values():
        if r["family"] != "dkrr":
            continue
        # like for like: Nystroem against Nystroem, random features against RBFSampler
        ref_label = "sklearn Nystroem+Ridge" if r["method"] == "dkrr nystroem" else "sklearn RBFSampler+Ridge"
        ref = by_w.get(ref_label)
        if ref is not None and r["fit_s"]["median"] > ref["fit_s"]["median"]:
            notes.append(
                f"{name}: at equal width p={wmax}, {r['method']} fits in {fmt_num(r['fit_s']['median'])} s vs "
                f"{fmt_num(ref['fit_s']['median'])} s for {ref_label} (slower; see profile)."
            )
    return notes


# -- suite entry points --------------------------------------------------------------------
def run(cfg: Config) -> dict[str, Any]:
    st = settings(cfg)
    reg, clf = dkrr_ridge_classes()
    check_dkrr_methods(reg, DKRR_METHODS, regression=True)
    check_dkrr_methods(clf, DKRR_METHODS, regression=False)
    ff_cls, ff_reason = sklearn_extra_fastfood()
    env = {"reg": reg, "clf": clf, "ff_cls": ff_cls}
    availability = {
        "dkrr_ridge": "available",
        "dkrr_methods_regression": list(DKRR_METHODS),
        "dkrr_methods_classification": list(DKRR_METHODS),
        "sklearn_extra_fastfood": ff_reason or "available",
    }
    datasets = []
    for name in st["real"]:
        try:
            split = load_split(name, st["n_train"], st["n_test"], cfg.seed)
            hp = select_hyperparameters(split, st, cfg.seed)
            res = run_dataset(split, st["widths"], st, cfg, hp, env)
            res["hyperparameters"] = hp
            datasets.append(res)
        except Exception:
            datasets.append({"dataset": name, "error": traceback.format_exc(limit=5)})
    synth = []
    hp_syn = None
    for n in st["synthetic_n"]:
        try:
            split = synthetic_regression(n, seed=cfg.seed)
            if hp_syn is None:
                hp_syn = select_hyperparameters(split, st, cfg.seed)
            res = run_dataset(split, st["synthetic_widths"], st, cfg, hp_syn, env)
            res["hyperparameters"] = hp_syn
            synth.append(res)
        except Exception:
            synth.append({"dataset": f"synthetic n={n}", "error": traceback.format_exc(limit=5)})
    notes = [n for d in datasets + synth for n in d.get("notes", [])]
    return {"settings": st, "availability": availability, "memory_method": "tracemalloc peak (separate untimed run)",
            "datasets": datasets, "synthetic": synth, "notes": notes}


def _dataset_md(d: dict) -> list[str]:
    L = [f"#### {d['dataset']}", ""]
    if "error" in d and "records" not in d:
        return L + ["Failed:", "", "```", d["error"], "```", ""]
    hp = d.get("hyperparameters", {})
    err_name = "test MSE (standardised y)" if d["task"] == "regression" else "test error rate"
    L += [
        f"{d['note']}. Task: {d['task']}. gamma = {fmt_num(d['gamma'])} (50-NN rule gives {fmt_num(hp.get('gamma0'))}), "
        f"lambda = {fmt_num(d['lambda'])}, alpha = lambda * n_train = {fmt_num(d['alpha'])}, chosen by 3-fold CV of exact KRR "
        f"on {hp.get('cv_rows')} training rows.",
        "",
        f"| method | width p | {err_name} | fit s | predict s | peak traced mem |",
        "|---|---|---|---|---|---|",
    ]
    for r in d["records"]:
        w = r["width"] if r["width"] is not None else "exact"
        if r["width"] is not None and r.get("output_width") not in (None, r["width"]):
            w = f"{r['width']} (actual {r['output_width']})"
        L.append(f"| {r['method']} | {w} | {fmt_stat(r['error'])} | {fmt_stat(r['fit_s'])} | "
                 f"{fmt_stat(r['predict_s'])} | {fmt_bytes(r['peak_traced_bytes'])} |")
    L.append("")
    for tname, a in d["targets"].items():
        L += [f"Time to reach {tname} (target error {fmt_num(a['target_error'])}); ratio = fit time / fastest dkrr "
              f"({a['fastest_dkrr'] or 'none reached'}):", "",
              "| method | first p reaching it | time to reach it, s (interpolated) | best error in grid | "
              "time ratio vs fastest dkrr |", "|---|---|---|---|---|"]
        for label, v in a["per_method"].items():
            ratio = a["time_ratio_to_fastest_dkrr"].get(label)
            how = "<= " if v.get("how") == "upper bound" else ""
            L.append(f"| {label} | {v['width'] if v['width'] is not None else 'not reached'} | "
                     f"{how + fmt_num(v['time_s']) if v['reached'] else 'n/a'} | "
                     f"{fmt_num(v['best_error'])} | {fmt_num(ratio) if ratio is not None else 'n/a'} |")
        L.append("")
    prof = d.get("profile", {})
    if prof:
        L += [f"Stage profile at p = {d['profile_width']} (each stage timed on its own on the whole training set, float64: "
              "map fit = drawing W / sampling landmarks and K_CC^(-1/2); dkrr 'other' = fit - stages: "
              "blocking, dtype conversion, scheduling, intercept centring; negative = stages overlap or timing noise):", "",
              "| method | fit s (table) | map fit s | transform s | Gram + Z^T y s | solve s | other s |", "|---|---|---|---|---|---|---|"]
        fits = {r["method"]: r["fit_s"] for r in d["records"] if r["width"] == d["profile_width"]}
        for label, p in prof.items():
            if "error" in p:
                L.append(f"| {label} | failed: {p['error'][:120]} | | | | |")
                continue
            fit = fits.get(label)
            if "gram_s" in p:
                stages = sum(p[k]["median"] for k in ("map_fit_s", "transform_s", "gram_s", "solve_s"))
                other = fit["median"] - stages if fit and fit.get("median") is not None else None
                L.append(f"| {label} | {fmt_stat(fit)} | {fmt_stat(p['map_fit_s'])} | {fmt_stat(p['transform_s'])} | "
                         f"{fmt_stat(p['gram_s'])} | {fmt_stat(p['solve_s'])} | {fmt_num(other)} |")
            else:
                L.append(f"| {label} | {fmt_stat(fit)} | (in transform) | {fmt_stat(p['transform_s'])} | "
                         f"Ridge.fit(Z) {fmt_stat(p['ridge_fit_s'])} | (in Ridge) | |")
        L.append("")
    if d.get("failures"):
        L += ["Failures: " + "; ".join(f"{k}: {v}" for k, v in d["failures"].items()), ""]
    return L


def render(res: dict[str, Any]) -> str:
    st, av = res["settings"], res["availability"]
    L = [
        "Widths p are output columns of the feature matrix (dkrr: n_components = p/2 frequencies, cos/sin map; "
        "scikit-learn RBFSampler/Nystroem: n_components = p). Errors and times: median [min-max] over "
        "repeats, each repeat with a new random seed. Peak memory: " + res["memory_method"] + ".",
        "",
        f"- dkrr ridge estimators: {av['dkrr_ridge']}",
        f"- dkrr methods run (regression): {', '.join(av['dkrr_methods_regression']) or 'none'}; "
        f"(classification): {', '.join(av['dkrr_methods_classification']) or 'none'}",
    ]
    L.append(f"- scikit-learn-extra Fastfood: {av['sklearn_extra_fastfood']}")
    L.append("")
    if res["notes"]:
        L += ["**Where dkrr is slower than a peer or misses a target:**", ""] + [f"- {n}" for n in res["notes"]] + [""]
    else:
        L += ["No peer reached either error target faster than the fastest dkrr method in this run.", ""]
    L += ["### Real data", ""]
    for d in res["datasets"]:
        L += _dataset_md(d)
    L += ["### Synthetic regression at growing n", ""]
    for d in res["synthetic"]:
        L += _dataset_md(d)
    return "\n".join(L)


def headline(res: dict[str, Any]) -> list[str]:
    """One line per data set: time ratios at the common error level, best errors."""
    out = []
    for d in res["datasets"] + res["synthetic"]:
        if "targets" not in d:
            out.append(f"{d['dataset']}: failed")
            continue
        a = d["targets"].get("common level (worst of the methods' best errors)")
        krr = next((r for r in d["records"] if r["family"] == "exact"), None)
        parts = []
        if a and a["fastest_dkrr"]:
            best = a["fastest_dkrr"]
            parts.append(f"fastest dkrr to the common error level {fmt_num(a['target_error'])}: {best} "
                         f"({fmt_num(a['per_method'][best]['time_s'])} s, interpolated)")
            for label, ratio in a["time_ratio_to_fastest_dkrr"].items():
                if a["per_method"][label]["family"] != "dkrr" and ratio is not None:
                    parts.append(f"{label} takes {ratio:.2f}x")
        else:
            parts.append("no dkrr result")
        dk_best = min((r["error"]["median"] for r in d["records"] if r["family"] == "dkrr" and r["error"]["median"] is not None), default=None)
        if krr is not None:
            parts.append(f"best dkrr error {fmt_num(dk_best)} vs exact KRR {fmt_num(krr['error']['median'])}")
        out.append(f"{d['dataset']} (n_train {d['n_train']}): " + "; ".join(parts))
    return out
