"""The default ``precision="auto"`` (float32 statistics, coefficients refined to float64's;
issue 26 item 1) against ``precision="float64"``.

1. **synthetic**: ``RandomFeatureRidge`` on d = 32 columns (``synthetic_arrays``), D =
   ``--n-components`` (1024: p = 2048 output columns), gamma ``1 / (2 d)``, numpy input on
   dask's threaded scheduler, at n = ``--sizes`` (100,000 to 2,000,000), without CV
   (alpha = 1) and with ``cv=5`` (the default grid): fit time of the default over
   float64's (paired within a seed, run back to back in alternating order), the
   coefficients' relative difference, whether the same alpha was chosen, the refinement's
   passes and what ``precision_`` the default ended in ("mixed", or "float64" after a
   fallback).
2. **real**: cal_housing, CASP, cod-RNA, EEG eye-state (80/20 split of all rows,
   standardised; ``dkrr.datasets``, mirror ``$DKRR_DATA_MIRROR``) with
   ``RandomFeatureRidge(Classifier)(n_components=--cv-n-components, cv=5, gamma="median",
   standardize=True)``: the same figures at the CV-chosen alpha and both test metrics;
   with ``--sklearn`` also the equal-width fit time against scikit-learn ``RBFSampler(
   n_components=p) + Ridge(Classifier)`` at that alpha and gamma (dkrr without CV).

Targets of the issue: the default <= 0.65x float64's time at p = 2048, n = 100k-2M, with
and without cv = 5; coefficients within 1e-7 relative of float64's on the four sets at
their CV-chosen alpha; <= 0.35x scikit-learn at equal width. Timings are meaningful only
on a quiet machine (the report stamps validity: load, commit, clean tree).

Publishable run (about 30-60 minutes on a quiet 2-core machine)::

    DKRR_DATA_MIRROR=/work/shared/data python -m benchmarks.bench_mixed_precision --sklearn

A check that it works (seconds; not for publication)::

    python -m benchmarks.bench_mixed_precision --sizes 20000 --n-components 128 --seeds 0 \\
        --datasets casp --cv-n-components 64 --max-train 5000 --allow-load --out /tmp/mixed
"""

from __future__ import annotations

import argparse
import gc
import json
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np

try:
    from benchmarks._data import load_split, synthetic_arrays
    from benchmarks._validity import add_load_arguments, script_end, script_start, verdict_line
except ImportError:  # run as a script from benchmarks/
    from _data import load_split, synthetic_arrays  # type: ignore[no-redef]
    from _validity import add_load_arguments, script_end, script_start, verdict_line  # type: ignore[no-redef]

__all__ = ["main"]

DATASETS = ["cal_housing", "casp", "cod_rna", "eeg_eye_state"]


def _rel(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def _timed_fit(est, X, y):
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        est.fit(X, y)
        t = time.perf_counter() - t0
    return t, [f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught
               if w.category.__name__ == "PrecisionWarning"]


def _pair(make, X, y, s):
    """The default and the float64 fit of ``make(precision)`` back to back, the order
    alternating with the seed index ``s``: ``{precision: (seconds, estimator, warnings)}``."""
    out = {}
    for prec in ("auto", "float64"):  # warm-up, not timed: numba kernels, BLAS, first-use checks
        make(prec).fit(X[:4096], y[:4096])
    for prec in (("auto", "float64") if s % 2 == 0 else ("float64", "auto")):
        est = make(prec)
        t, ws = _timed_fit(est, X, y)
        out[prec] = (t, est, ws)
    return out


def _compare(fits) -> dict:
    (ta, a, wa), (t64, b, _) = fits["auto"], fits["float64"]
    return {"auto_s": ta, "float64_s": t64, "ratio": ta / t64, "coef_rel_diff": _rel(a.coef_, b.coef_),
            "same_alpha": bool(np.isclose(a.alpha_, b.alpha_, rtol=1e-6)), "alpha_auto": float(a.alpha_),
            "alpha_float64": float(b.alpha_), "precision_": a.precision_,
            "passes": getattr(a, "refinement_", {}).get("passes"), "warnings": wa}


def synthetic(args) -> list[dict]:
    from dkrr import RandomFeatureRidge

    rows = []
    for n in args.sizes:
        for cv in (None, 5):
            for s, seed in enumerate(args.seeds):
                X, y = synthetic_arrays(n, args.d, seed)
                make = lambda prec: RandomFeatureRidge(n_components=args.n_components, gamma=1.0 / (2 * args.d),
                                                       alpha=1.0, cv=cv, random_state=seed, precision=prec)
                r = {"n": n, "p": 2 * args.n_components, "cv": cv, "seed": seed, **_compare(_pair(make, X, y, s))}
                rows.append(r)
                print(f"synthetic n={n:,} cv={cv} seed={seed}: default/float64 {r['ratio']:.3f} "
                      f"({r['auto_s']:.2f} / {r['float64_s']:.2f} s), coef rel diff {r['coef_rel_diff']:.2e}, "
                      f"same alpha {r['same_alpha']}, {r['precision_']}, passes {r['passes']}", flush=True)
                del X, y
    return rows


def _metric(task, y, pred) -> float:
    if task == "regression":
        return float(np.sqrt(np.mean((np.asarray(y, dtype=float) - pred) ** 2)))
    return float(np.mean(np.asarray(y) != np.asarray(pred)))


def _sklearn_ratio(split, auto, args) -> dict:
    """Equal width: dkrr's default (no CV, the chosen alpha and gamma) over scikit-learn's
    RBFSampler + Ridge fit time."""
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import Ridge, RidgeClassifier
    from sklearn.pipeline import make_pipeline

    from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier

    reg = split.task == "regression"
    p, alpha, gamma = 2 * args.cv_n_components, float(auto.alpha_), float(auto.gamma_)
    dk = (RandomFeatureRidge if reg else RandomFeatureRidgeClassifier)(
        n_components=args.cv_n_components, gamma=gamma, alpha=alpha, random_state=0)
    sk = make_pipeline(RBFSampler(gamma=gamma, n_components=p, random_state=0),
                       (Ridge if reg else RidgeClassifier)(alpha=alpha))
    t_dk, _ = _timed_fit(dk, split.X_train, split.y_train)
    gc.collect()
    t0 = time.perf_counter()
    sk.fit(split.X_train, split.y_train)
    t_sk = time.perf_counter() - t0
    return {"dkrr_default_s": t_dk, "sklearn_s": t_sk, "ratio": t_dk / t_sk, "p": p}


def real(args) -> list[dict]:
    from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier

    rows = []
    for name in args.datasets:
        for s, seed in enumerate(args.seeds):
            try:
                if args.max_train:
                    split = load_split(name, args.max_train, args.max_train // 4, seed=seed)
                else:
                    split = load_split(name, None, None, seed=seed, train_fraction=0.8)
                cls = RandomFeatureRidge if split.task == "regression" else RandomFeatureRidgeClassifier
                make = lambda prec: cls(n_components=args.cv_n_components, cv=5, gamma="median", standardize=True,
                                        random_state=seed, precision=prec)
                fits = _pair(make, split.X_train, split.y_train, s)
                r = {"dataset": name, "task": split.task, "seed": seed, "n_train": int(split.X_train.shape[0]),
                     **_compare(fits)}
                r["metric_auto"], r["metric_float64"] = (_metric(split.task, split.y_test, fits[k][1].predict(split.X_test))
                                                         for k in ("auto", "float64"))
                if args.sklearn:
                    r["equal_width"] = _sklearn_ratio(split, fits["auto"][1], args)
            except Exception as exc:  # a missing data set is recorded, the others still run
                r = {"dataset": name, "seed": seed, "error": f"{type(exc).__name__}: {exc}"}
            rows.append(r)
            print(f"{name} seed {seed}: " + ("; ".join(f"{k}={v}" for k, v in r.items() if k not in ("dataset", "seed"))),
                  flush=True)
    return rows


def _summary(syn, rea) -> list[str]:
    lines = ["", "summary (median [min, max] over seeds):"]

    def stat(v):
        v = [x for x in v if x is not None]
        return f"{np.median(v):.3g} [{min(v):.3g}, {max(v):.3g}]" if v else "-"

    for key in sorted({(r["n"], r["cv"]) for r in syn}, key=lambda k: (k[0], k[1] or 0)):
        rs = [r for r in syn if (r["n"], r["cv"]) == key]
        lines.append(f"  synthetic n={key[0]:,} p={rs[0]['p']} cv={key[1]}: default/float64 {stat([r['ratio'] for r in rs])}, "
                     f"coef rel diff {stat([r['coef_rel_diff'] for r in rs])}, passes {stat([r['passes'] for r in rs])}, "
                     f"same alpha {sum(r['same_alpha'] for r in rs)}/{len(rs)}, "
                     f"refined {sum(r['precision_'] == 'mixed' for r in rs)}/{len(rs)}")
    for name in dict.fromkeys(r["dataset"] for r in rea):
        rs = [r for r in rea if r["dataset"] == name and "error" not in r]
        if not rs:
            lines.append(f"  {name}: not run ({next(r['error'] for r in rea if r['dataset'] == name)})")
            continue
        ew = [r["equal_width"]["ratio"] for r in rs if "equal_width" in r]
        lines.append(f"  {name} (cv=5): default/float64 {stat([r['ratio'] for r in rs])}, coef rel diff "
                     f"{stat([r['coef_rel_diff'] for r in rs])}, same alpha {sum(r['same_alpha'] for r in rs)}/{len(rs)}, "
                     f"refined {sum(r['precision_'] == 'mixed' for r in rs)}/{len(rs)}, passes "
                     f"{stat([r['passes'] for r in rs])}, test metric default {stat([r['metric_auto'] for r in rs])} vs "
                     f"float64 {stat([r['metric_float64'] for r in rs])}"
                     + (f"; equal width default/sklearn {stat(ew)}" if ew else ""))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_mixed_precision",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[100_000, 500_000, 2_000_000])
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--n-components", type=int, default=1024, help="D of the synthetic fits (p = 2 D)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--datasets", nargs="*", default=DATASETS, choices=DATASETS)
    ap.add_argument("--cv-n-components", type=int, default=1024, help="D of the real-data fits (p = 2 D)")
    ap.add_argument("--max-train", type=int, default=None, help="train rows at most (default: 80%% of all rows)")
    ap.add_argument("--sklearn", action="store_true", help="also the equal-width time against RBFSampler + Ridge")
    ap.add_argument("--out", default="benchmarks/results/mixed", help="folder of report.txt and results.json")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    run_start = script_start(args)
    header = ["command: python -m benchmarks.bench_mixed_precision "
              + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
              "default = precision='auto' (float32 statistics and CV, the final coefficients refined in float64); "
              "ratios paired within a seed, the two fits back to back in alternating order", ""]
    print("\n".join(header), flush=True)
    syn, rea = synthetic(args), real(args)
    lines = _summary(syn, rea)
    validity = script_end(run_start)
    lines += ["", f"validity: {json.dumps(validity, default=str)}", verdict_line(validity)]
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text("\n".join(header + lines) + "\n")
    (out / "results.json").write_text(json.dumps({"args": vars(args), "synthetic": syn, "real": rea,
                                                  "validity": validity}, indent=1, default=str))
    return syn, rea


if __name__ == "__main__":
    main()
