"""Suite "speed": dkrr against scikit-learn at equal width and at equal error, and
``precision="float32"`` against float64 (issue 15's targets).

Three parts, every figure a median over seeds with its [min-max] spread, every ratio
paired within a seed (the two fits of a ratio share the seed and run back to back, in
alternating order):

1. **precision**: ``RandomFeatureRidge`` fit time with ``precision="float32"`` over the
   float64 fit, on synthetic data (d = 32, ``n_components = 1024`` so p = 2048 output
   columns, one alpha, numpy input on the threaded scheduler) at n from 100,000 to
   2,000,000 rows; with the relative change of the coefficients and ``precision_error_``.
2. **peers**: on real data (80/20 split of all rows, X standardised; cal_housing, CASP,
   cod-RNA, EEG eye-state), dkrr (float64 and float32; ``method="auto"``) and
   scikit-learn ``RBFSampler + Ridge`` (``RidgeClassifier`` for the classification sets)
   at the same output widths p (dkrr ``n_components = p / 2`` with its cos/sin map,
   ``RBFSampler(n_components=p)``), the same gamma (the 50-NN rule) and the same alpha
   (chosen once per data set by dkrr's 5-fold CV at p = 1024). Two comparisons:

   * *equal width*: fit time of dkrr over scikit-learn's at each p, and both test errors;
   * *equal error*: for scikit-learn's error at each p, the fit time dkrr needs to reach
     that error, interpolated log-log along dkrr's time/error frontier (the lowest error
     reached at each time, over the width grid), over scikit-learn's time. Interpolating,
     rather than taking the first width that crosses a threshold, keeps a small change of
     error from jumping to another width (the artifact behind an earlier "5.6x" claim).
     Where dkrr's smallest width already has a lower error the figure is an upper bound
     (marked ``<=``); where dkrr never reaches it, "not reached".
3. **cv**: the test metric (RMSE of the standardised target; error rate) of
   ``RandomFeatureRidge(Classifier)(n_components=1024, cv=5, standardize=True,
   gamma="median")`` with float32 against float64 at the CV-chosen alpha: relative
   difference, whether the same alpha was chosen, and what ``precision="auto"`` did.

Row ids (``P1``, ``W3``, ``E2``, ``C4``, ...) are HTML anchors in the report, so the README
links each number it quotes to its row.
"""

from __future__ import annotations

import gc
import time
import traceback
from typing import Any

import numpy as np

from ._common import Config, fmt_num, fmt_stat, frontier_time, summarize
from ._data import load_split, synthetic_arrays

NAME = "speed"
TITLE = "Speed at equal width and at equal error; float32 against float64"


def settings(cfg: Config) -> dict[str, Any]:
    if cfg.quick:
        return {"sizes": [20_000], "d": 16, "D": 256, "datasets": ["cal_housing"], "train_fraction": 0.1,
                "widths": [64, 128], "cv_D": 64, "cv_alpha_D": 64}
    return {"sizes": [100_000, 500_000, 2_000_000], "d": 32, "D": 1024,
            "datasets": ["cal_housing", "casp", "cod_rna", "eeg_eye_state"], "train_fraction": 0.8,
            "widths": [256, 512, 1024, 2048], "cv_D": 1024, "cv_alpha_D": 512}


def _timed(fn):
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _rel(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


# -- 1. precision ----------------------------------------------------------------------
def _precision_part(cfg: Config, st: dict) -> list[dict]:
    from dkrr import RandomFeatureRidge

    rows = []
    for n in st["sizes"]:
        per = {"float64": [], "float32": [], "ratio": [], "coef_rel_change": [], "precision_error": []}
        for s in range(cfg.repeats):
            seed = cfg.seed + s
            X, y = synthetic_arrays(n, st["d"], seed)
            gamma = 1.0 / (2.0 * st["d"])
            fits = {}
            order = ("float64", "float32") if s % 2 == 0 else ("float32", "float64")
            for prec in order:
                est = RandomFeatureRidge(n_components=st["D"], gamma=gamma, alpha=1.0, precision=prec,
                                         random_state=seed)
                t, fitted = _timed(lambda est=est: est.fit(X, y))
                fits[prec] = (t, fitted)
            per["float64"].append(fits["float64"][0])
            per["float32"].append(fits["float32"][0])
            per["ratio"].append(fits["float32"][0] / fits["float64"][0])
            per["coef_rel_change"].append(_rel(fits["float32"][1].coef_, fits["float64"][1].coef_))
            per["precision_error"].append(fits["float32"][1].precision_error_)
            del X, y, fits
        rows.append({"n": n, "d": st["d"], "p": 2 * st["D"], **{k: summarize(v) for k, v in per.items()}})
        print(f"[speed] precision n={n}: float32/float64 {rows[-1]['ratio']['median']:.3f}", flush=True)
    return rows


# -- 2. peers --------------------------------------------------------------------------
def _models(task: str, gamma: float, alpha: float):
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.pipeline import make_pipeline

    from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier

    reg = task == "regression"
    dk = RandomFeatureRidge if reg else RandomFeatureRidgeClassifier
    lin = Ridge if reg else RidgeClassifier
    return {
        "dkrr float64": lambda p, seed: dk(n_components=p // 2, gamma=gamma, alpha=alpha, random_state=seed,
                                           precision="float64"),
        "dkrr float32": lambda p, seed: dk(n_components=p // 2, gamma=gamma, alpha=alpha, random_state=seed,
                                           precision="float32"),
        "sklearn RBFSampler+Ridge": lambda p, seed: make_pipeline(
            RBFSampler(gamma=gamma, n_components=p, random_state=seed), lin(alpha=alpha)),
    }


def _error(task, y_true, y_pred) -> float:
    if task == "regression":
        return float(np.sqrt(np.mean((np.asarray(y_true, float) - np.asarray(y_pred, float)) ** 2)))
    return float(np.mean(np.asarray(y_true) != np.asarray(y_pred)))


def _choose_alpha(split, gamma: float, D: int, seed: int) -> float:
    """alpha by dkrr's 5-fold one-pass CV over its default grid (float64, p = 2D)."""
    import warnings

    from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier

    cls = RandomFeatureRidge if split.task == "regression" else RandomFeatureRidgeClassifier
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = cls(n_components=D, gamma=gamma, cv=5, random_state=seed).fit(split.X_train, split.y_train)
    return float(est.alpha_)


def _peers_dataset(cfg: Config, st: dict, name: str) -> dict:
    from dkrr.bandwidth import knn_gamma

    split = load_split(name, None, None, seed=cfg.seed, train_fraction=st["train_fraction"])
    gamma = float(knn_gamma(split.X_train, random_state=cfg.seed))
    alpha = _choose_alpha(split, gamma, st["cv_alpha_D"], cfg.seed)
    models = _models(split.task, gamma, alpha)
    raw = {m: {p: {"fit_s": [], "error": []} for p in st["widths"]} for m in models}
    for s in range(cfg.repeats):
        seed = cfg.seed + s
        for p in st["widths"]:
            names = list(models) if s % 2 == 0 else list(models)[::-1]
            for m in names:
                est = models[m](p, seed)
                t, _ = _timed(lambda est=est: est.fit(split.X_train, split.y_train))
                raw[m][p]["fit_s"].append(t)
                raw[m][p]["error"].append(_error(split.task, split.y_test, est.predict(split.X_test)))
                del est
    sk = "sklearn RBFSampler+Ridge"
    equal_width, equal_error = [], []
    for variant in ("dkrr float64", "dkrr float32"):
        for p in st["widths"]:
            ratios = [a / b for a, b in zip(raw[variant][p]["fit_s"], raw[sk][p]["fit_s"])]
            err_diff = [(a - b) / b if b else 0.0 for a, b in zip(raw[variant][p]["error"], raw[sk][p]["error"])]
            equal_width.append({"variant": variant, "p": p, "time_ratio": summarize(ratios),
                                "error_rel_diff": summarize(err_diff)})
        for p in st["widths"]:  # dkrr's time to scikit-learn's error at width p, per seed
            ratios, kinds = [], []
            for s in range(cfg.repeats):
                t_dk = [raw[variant][q]["fit_s"][s] for q in st["widths"]]
                e_dk = [raw[variant][q]["error"][s] for q in st["widths"]]
                t, kind = frontier_time(t_dk, e_dk, raw[sk][p]["error"][s])
                kinds.append(kind)
                ratios.append(None if t is None else t / raw[sk][p]["fit_s"][s])
            equal_error.append({"variant": variant, "sklearn_p": p, "time_ratio": summarize(ratios),
                                "kinds": kinds, "n_reached": sum(r is not None for r in ratios)})
    return {
        "dataset": name, "task": split.task, "note": split.note, "gamma": gamma, "alpha": alpha,
        "n_train": int(split.X_train.shape[0]), "n_test": int(split.X_test.shape[0]),
        "measurements": {m: {str(p): {k: summarize(v) for k, v in d.items()} for p, d in by.items()}
                         for m, by in raw.items()},
        "equal_width": equal_width, "equal_error": equal_error,
    }


# -- 3. cv -----------------------------------------------------------------------------
def _cv_dataset(cfg: Config, st: dict, name: str) -> dict:
    import warnings

    from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier

    split = load_split(name, None, None, seed=cfg.seed, train_fraction=st["train_fraction"])
    cls = RandomFeatureRidge if split.task == "regression" else RandomFeatureRidgeClassifier
    per = {"metric64": [], "metric32": [], "rel_diff": [], "fit64_s": [], "fit32_s": [], "fitauto_s": [],
           "precision_error": []}
    same_alpha, auto_kept = [], []
    for s in range(cfg.repeats):
        seed = cfg.seed + s
        fitted = {}
        order = ("float64", "float32", "auto")
        for prec in (order if s % 2 == 0 else order[::-1]):
            est = cls(n_components=st["cv_D"], cv=5, standardize=True, gamma="median", random_state=seed,
                      precision=prec)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t, _ = _timed(lambda est=est: est.fit(split.X_train, split.y_train))
            fitted[prec] = (t, est, _error(split.task, split.y_test, est.predict(split.X_test)))
        m64, m32 = fitted["float64"][2], fitted["float32"][2]
        per["metric64"].append(m64)
        per["metric32"].append(m32)
        per["rel_diff"].append(abs(m32 - m64) / abs(m64) if m64 else abs(m32 - m64))
        per["fit64_s"].append(fitted["float64"][0])
        per["fit32_s"].append(fitted["float32"][0])
        per["fitauto_s"].append(fitted["auto"][0])
        per["precision_error"].append(fitted["float32"][1].precision_error_)
        same_alpha.append(bool(np.isclose(fitted["float32"][1].alpha_, fitted["float64"][1].alpha_, rtol=1e-6)))
        auto_kept.append(fitted["auto"][1].precision_ == "mixed")  # refined, not fallen back to float64
    return {"dataset": name, "task": split.task, "metric": "RMSE" if split.task == "regression" else "error rate",
            **{k: summarize(v) for k, v in per.items()}, "same_alpha": same_alpha, "auto_refined": auto_kept}


def run(cfg: Config) -> dict[str, Any]:
    st = settings(cfg)
    out: dict[str, Any] = {"settings": st, "notes": []}
    out["precision"] = _precision_part(cfg, st)
    out["peers"], out["cv"] = [], []
    for part, fn in (("peers", _peers_dataset), ("cv", _cv_dataset)):
        for name in st["datasets"]:
            try:
                out[part].append(fn(cfg, st, name))
            except Exception as exc:  # a missing data set is recorded, the others still run
                out[part].append({"dataset": name, "error": f"{type(exc).__name__}: {exc}",
                                  "traceback": traceback.format_exc()})
                out["notes"].append(f"{part} {name}: {type(exc).__name__}: {exc}")
            print(f"[speed] {part} {name} done", flush=True)
    return out


# -- report ----------------------------------------------------------------------------
def _anchor(rid: str) -> str:
    return f'<a id="{rid.lower()}"></a>{rid}'


def headline(res: dict) -> list[str]:
    heads = []
    for r in res["precision"]:
        heads.append(f"float32 fit / float64 fit, n = {r['n']:,}, p = {r['p']}: {fmt_stat(r['ratio'])}")
    for d in res["peers"]:
        if "error" in d:
            continue
        for row in d["equal_width"]:
            if row["p"] == max(res["settings"]["widths"]):
                heads.append(f"{d['dataset']}: {row['variant']} / sklearn fit time at equal width p = {row['p']}: "
                             f"{fmt_stat(row['time_ratio'])}")
    for d in res["cv"]:
        if "error" not in d:
            heads.append(f"{d['dataset']}: float32 vs float64 test {d['metric']} at the CV-chosen alpha differs by "
                         f"{fmt_stat(d['rel_diff'], scale=100)} %")
    return heads


def render(res: dict) -> str:
    L = ["Every ratio is computed within a seed (both fits with that seed, back to back) and then summarised "
         "over seeds: median [min-max]. Fit times are wall seconds on the threaded scheduler (numpy input); "
         "scikit-learn runs with its BLAS on all cores.", ""]
    L += ["### 1. float32 against float64 (synthetic, one alpha)", "",
          "| id | n | p | float64 fit s | float32 fit s | float32 / float64 | coef rel. change | precision_error_ |",
          "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(res["precision"], 1):
        L.append(f"| {_anchor(f'P{i}')} | {r['n']:,} | {r['p']} | {fmt_stat(r['float64'])} | {fmt_stat(r['float32'])} | "
                 f"{fmt_stat(r['ratio'])} | {fmt_stat(r['coef_rel_change'])} | {fmt_stat(r['precision_error'])} |")
    L += ["", "### 2. Against scikit-learn RBFSampler + Ridge on real data", ""]
    wi = ei = 0
    for d in res["peers"]:
        if "error" in d:
            L += [f"#### {d['dataset']}", "", f"Not run: {d['error']}", ""]
            continue
        L += [f"#### {d['dataset']} ({d['task']})", "",
              f"{d['note']}; gamma = {fmt_num(d['gamma'])} (50-NN rule), alpha = {fmt_num(d['alpha'])} "
              "(dkrr 5-fold CV), the same for every method.", "",
              "| method | width p | fit s | test " + ("RMSE (standardised y)" if d["task"] == "regression" else "error rate")
              + " |", "|---|---|---|---|"]
        for m, by in d["measurements"].items():
            for p, v in by.items():
                L.append(f"| {m} | {p} | {fmt_stat(v['fit_s'])} | {fmt_stat(v['error'])} |")
        L += ["", "**Equal width** (dkrr fit time / scikit-learn's at the same p; relative error difference, "
              "negative = dkrr better):", "", "| id | variant | p | time ratio | error rel. diff |", "|---|---|---|---|---|"]
        for row in d["equal_width"]:
            wi += 1
            L.append(f"| {_anchor(f'W{wi}')} | {row['variant']} | {row['p']} | {fmt_stat(row['time_ratio'])} | "
                     f"{fmt_stat(row['error_rel_diff'])} |")
        L += ["", "**Equal error** (dkrr's interpolated time to scikit-learn's error at p / scikit-learn's time at p):",
              "", "| id | variant | sklearn p | time ratio | seeds reached | how |", "|---|---|---|---|---|---|"]
        for row in d["equal_error"]:
            ei += 1
            kinds = sorted(set(row["kinds"]))
            L.append(f"| {_anchor(f'E{ei}')} | {row['variant']} | {row['sklearn_p']} | "
                     f"{('<= ' if kinds == ['upper bound'] else '') + fmt_stat(row['time_ratio'])} | "
                     f"{row['n_reached']}/{len(row['kinds'])} | {', '.join(kinds)} |")
        L.append("")
    L += ["### 3. float32 against float64 at the CV-chosen alpha", "",
          "precision_error_ is the float32 fit's estimate of its coefficients' relative change (an upper "
          "estimate); precision='auto' (the default) refines the float32 solution to float64's, or repeats the pass "
          "in float64 where it cannot (benchmarks/bench_mixed_precision.py measures it).", "",
          "| id | data set | metric | float64 | float32 | rel. diff % | same alpha | float64 fit s | float32 fit s | "
          "precision_error_ | auto refined | auto fit s |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, d in enumerate(res["cv"], 1):
        if "error" in d:
            L.append(f"| {_anchor(f'C{i}')} | {d['dataset']} | not run: {d['error']} |||||||||| ")
            continue
        L.append(f"| {_anchor(f'C{i}')} | {d['dataset']} | {d['metric']} | {fmt_stat(d['metric64'], digits=5)} | "
                 f"{fmt_stat(d['metric32'], digits=5)} | {fmt_stat(d['rel_diff'], scale=100)} | "
                 f"{sum(d['same_alpha'])}/{len(d['same_alpha'])} | {fmt_stat(d['fit64_s'])} | {fmt_stat(d['fit32_s'])} | "
                 f"{fmt_stat(d['precision_error'])} | {sum(d['auto_refined'])}/{len(d['auto_refined'])} | "
                 f"{fmt_stat(d['fitauto_s'])} |")
    return "\n".join(L)
