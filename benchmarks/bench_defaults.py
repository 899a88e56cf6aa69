"""Default model selection against a wide tuned grid, on the project's real data sets.

For every data set and seed (a seeded shuffle, then a train / test split of at most
``--max-train`` / ``--max-test`` rows), with the columns standardised and D =
``--n-components`` (the CLI default, 256) for all fits:

(a) **new default**: ``gamma="median"``, ``gammas="auto"`` (the rule's gamma times
    :data:`dkrr.linalg._cv.AUTO_GAMMA_FACTORS`), ``cv=5``, the default alpha grid: what
    ``dkrr fit`` does without flags;
(b) **old default**: ``gamma="median"``, ``cv=5``, the default alpha grid (no gamma grid);
(c) **oracle**: the least *test* error over the wide grid gamma_rule * 2**(-6..6) x alpha
    in (b)'s alpha grid widened by a decade on each side (11 values), every model the
    map that (a) and (b) draw (the same ``random_state``) rescaled to that gamma, solved
    by a numpy eigendecomposition of the same centred ridge system. Chosen on the test
    rows, so an optimistic bound no selection procedure can beat on average;
(d) **wide CV**: the same wide grid chosen by the one-pass 5-fold CV (an honest tuned
    model, for reference).

Error: test RMSE (regression) or misclassification rate (binary classification, ridge
on +-1 targets). The report gives per data set the relative gap ``err / err_oracle - 1``
of (a), (b) and (d), mean and range over the seeds, and the fit-time ratio (a) / (b)
measured in the same run. It also scores other factor sets from the wide fit's CV table
(the fold statistics of every gamma come from the same pass, with the wide alpha grid):
that is how the default factors were chosen.

The errors are deterministic (seeded); the timings are indicative only when the machine
is shared (the report stamps the load, the commit and whether the tree was dirty).

Run: ``DKRR_DATA_MIRROR=/work/shared/data python -m benchmarks.bench_defaults --allow-load``
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start
except ImportError:  # run as a script from benchmarks/
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]

__all__ = ["main"]

REGRESSION = ["casp", "cal_housing", "abalone", "kin8nm", "elevators", "cpu_small", "ailerons"]
CLASSIFICATION = ["magic04", "eeg_eye_state", "cod_rna"]
#: the wide grid's exponents of 2 around the rule's gamma
WIDE = np.arange(-6, 7)
#: factor sets scored from the wide fit's CV table: name -> exponents of 2
CANDIDATES = {
    "2**[-1..1]": [-1, 0, 1],
    "4**[-1..1]": [-2, 0, 2],
    "2**[-2..2]": [-2, -1, 0, 1, 2],
    "2**[-3..1]": [-3, -2, -1, 0, 1],
    "2**[-3..2]": [-3, -2, -1, 0, 1, 2],
    "4**[-2..2]": [-4, -2, 0, 2, 4],
    "2**[-3..3]": list(range(-3, 4)),
    "4**[-3..3]": [-6, -4, -2, 0, 2, 4, 6],
    "2**[-4..4]": list(range(-4, 5)),
    "4**[-2..1]": [-4, -2, 0, 2],
    "4**[-3..1]": [-6, -4, -2, 0, 2],
}


def _split(name, seed, max_train, max_test):
    from dkrr.datasets import load_dataset

    X, y = load_dataset(name)
    idx = np.random.default_rng(seed).permutation(len(y))  # several files are sorted by label
    n_test = min(max_test, len(y) // 4)
    n_train = min(max_train, len(y) - n_test)
    tr, te = idx[:n_train], idx[n_train:n_train + n_test]
    return X[tr], y[tr], X[te], y[te]


def _targets(y, classes):
    """+-1 target of the binary ridge classifier (+1 for classes[1])."""
    return np.where(y == classes[1], 1.0, -1.0)


def _error(pred, y, classify, classes=None):
    if classify:
        return float(np.mean(pred != y))
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def _oracle_errors(fmap, gammas, alphas, Xtr, ttr, Xte, yte, classify, classes):
    """Test error of every (gamma, alpha): the ridge with intercept on the features of
    ``fmap.with_gamma(g)`` (the estimators' model), solved by eigh of the centred Gram."""
    errs = np.empty((len(gammas), len(alphas)))
    for i, g in enumerate(gammas):
        m = fmap.with_gamma(float(g))
        Z, Zt = m.transform(Xtr), m.transform(Xte)
        mu, tbar = Z.mean(axis=0), ttr.mean()
        Zc = Z - mu
        w, V = np.linalg.eigh(Zc.T @ Zc)
        c = V.T @ (Zc.T @ (ttr - tbar))
        for j, a in enumerate(alphas):
            beta = V @ (c / (w + a))
            dec = (Zt - mu) @ beta + tbar
            pred = np.where(dec > 0, classes[1], classes[0]) if classify else dec
            errs[i, j] = _error(pred, yte, classify)
    return errs


def _fit(cls, X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # grid-edge warnings: the report shows the choices
        t0 = time.perf_counter()
        est = cls(**params).fit(X, y)
        return est, time.perf_counter() - t0


def run_one(name, seed, args):
    from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier

    classify = name in CLASSIFICATION
    cls = RandomFeatureRidgeClassifier if classify else RandomFeatureRidge
    Xtr, ytr, Xte, yte = _split(name, seed, args.max_train, args.max_test)
    common = dict(n_components=args.n_components, standardize=True, gamma="median", cv=5, random_state=seed)
    old, t_old = _fit(cls, Xtr, ytr, **common)
    new, t_new = _fit(cls, Xtr, ytr, gammas="auto", **common)
    rule = old.gamma_
    s_alphas = np.asarray(old.cv_results_["alphas"])
    alphas = np.concatenate([[s_alphas[0] / 10], s_alphas, [s_alphas[-1] * 10]])
    wide_g = rule * 2.0 ** WIDE
    wide, _ = _fit(cls, Xtr, ytr, gammas=wide_g, alphas=alphas, **common)
    classes = getattr(old, "classes_", None)
    ttr = _targets(ytr, classes) if classify else ytr
    errs = _oracle_errors(wide.feature_map_, wide_g, alphas, Xtr, ttr, Xte, yte, classify, classes)
    err = {k: _error(e.predict(Xte), yte, classify) for k, e in (("new", new), ("old", old), ("wide_cv", wide))}
    err["oracle"] = float(errs.min())
    oi, oj = np.unravel_index(np.argmin(errs), errs.shape)
    # other factor sets, selected by the wide fit's CV table (same folds, same map draw)
    mean_mse = np.asarray(wide.cv_results_["mean_mse"])
    cand = {}
    for key, exps in CANDIDATES.items():
        cand[key] = float(errs[_pick(mean_mse, [int(np.flatnonzero(WIDE == e)[0]) for e in exps])])
    return {
        "dataset": name, "seed": seed, "task": "binary" if classify else "regression",
        "n_train": int(len(ytr)), "n_test": int(len(yte)), "n_features": int(Xtr.shape[1]),
        "gamma_rule": float(rule), "errors": err,
        "new_gamma_factor": float(new.gamma_ / rule), "new_alpha": float(new.alpha_),
        "oracle_gamma_factor": float(wide_g[oi] / rule), "oracle_alpha_index": int(oj),
        "wide_cv_gamma_factor": float(wide.gamma_ / rule),
        "candidates": cand, "fit_seconds": {"new": t_new, "old": t_old},
        # the tables behind (c), (d) and the candidates: any other factor set can be scored from them
        "wide_test_error": errs.tolist(), "wide_cv_mean_mse": mean_mse.tolist(), "wide_alphas": alphas.tolist(),
    }


def _gap(e, ref):
    return e / ref - 1.0 if ref > 0 else (0.0 if e == ref else float("inf"))


def summarize(rows, factor_label):
    """The report's lines: per data set, the gaps over seeds and the time ratio."""
    lines = []
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    head = (f"{'dataset':<14} {'task':<10} {'n_train':>7}  {'oracle err':>10}  {'(a) new gap':>22}  "
            f"{'(b) old gap':>22}  {'(d) wide CV gap':>22}  {'(a)/(b) time':>12}  gamma_/rule (a) | oracle")
    lines += [head, "-" * len(head)]
    allgaps = {"new": [], "old": [], "wide_cv": []}
    for name in names:
        rs = [r for r in rows if r["dataset"] == name]
        cells = []
        for key in ("new", "old", "wide_cv"):
            g = [_gap(r["errors"][key], r["errors"]["oracle"]) for r in rs]
            allgaps[key].append(float(np.mean(g)))
            cells.append(f"{100 * np.mean(g):+6.2f}% [{100 * min(g):+.1f},{100 * max(g):+.1f}]")
        ratio = [r["fit_seconds"]["new"] / r["fit_seconds"]["old"] for r in rs]
        fac = ",".join(f"{r['new_gamma_factor']:g}" for r in rs)
        ofac = ",".join(f"{r['oracle_gamma_factor']:g}" for r in rs)
        oracle = np.mean([r["errors"]["oracle"] for r in rs])
        lines.append(f"{name:<14} {rs[0]['task']:<10} {rs[0]['n_train']:>7}  {oracle:>10.4g}  {cells[0]:>22}  "
                     f"{cells[1]:>22}  {cells[2]:>22}  {np.median(ratio):>11.2f}x  {fac} | {ofac}")
    lines.append("")
    lines.append("mean over data sets of the per-data-set mean gap: "
                 + ", ".join(f"{k} {100 * np.mean(v):+.2f}%" for k, v in allgaps.items()))
    lines.append(f"data sets whose (a) {factor_label} mean gap exceeds 2%: "
                 + (", ".join(n for n, g in zip(names, allgaps["new"]) if g > 0.02) or "none"))
    # against the wide grid tuned as a user tunes it (by the same CV, not on the test rows)
    vs_cv = [float(np.mean([_gap(r["errors"]["new"], r["errors"]["wide_cv"]) for r in rows if r["dataset"] == n]))
             for n in names]
    lines.append("(a) against (d), the wide grid tuned by CV: "
                 + ", ".join(f"{n} {100 * g:+.2f}%" for n, g in zip(names, vs_cv)))
    lines.append("data sets where (a) is more than 2% above (d): "
                 + (", ".join(n for n, g in zip(names, vs_cv) if g > 0.02) or "none"))
    lines.append("")
    lines.append("other factor sets, chosen by the wide fit's 5-fold CV table (mean gap to the oracle; worst "
                 "data set):")
    for key in CANDIDATES:
        per = [float(np.mean([_gap(r["candidates"][key], r["errors"]["oracle"]) for r in rows if r["dataset"] == n]))
               for n in names]
        worst = names[int(np.argmax(per))]
        lines.append(f"  {key:<11} ({len(CANDIDATES[key])} gammas): mean {100 * np.mean(per):+.2f}%, "
                     f"worst {100 * max(per):+.2f}% ({worst}), data sets above 2%: {sum(p > 0.02 for p in per)}")
    return lines


def _pick(cv, rows):
    """Row (index into WIDE) and alpha column of the least CV MSE among ``rows``."""
    sub = cv[rows]
    r, c = np.unravel_index(np.argmin(sub), sub.shape)
    return rows[r], c


def _between(lo: int, hi: int) -> list[int]:
    """Rows of WIDE whose exponent lies in ``[lo, hi]``."""
    return [int(i) for i in np.flatnonzero((WIDE >= lo) & (WIDE <= hi))]


def _extending(lo: int, hi: int, step: int):
    """The rule that starts from ``2**[lo..hi]`` and, while CV chooses an end, adds ``step``
    more exponents beyond it (another pass in a fit), up to the wide grid's ends."""
    def choose(cv):
        a, b = lo, hi
        while True:
            g, c = _pick(cv, _between(a, b))
            if WIDE[g] == a and a > WIDE[0]:
                a = max(int(WIDE[0]), a - step)
            elif WIDE[g] == b and b < WIDE[-1]:
                b = min(int(WIDE[-1]), b + step)
            else:
                return g, c
    return choose


def rescore(results: dict) -> list[str]:
    """Factor sets scored from a run's stored tables (``results.json``: every seed's wide
    CV table and test errors), against both references: the oracle (least test error of
    the wide grid) and the wide grid tuned by the same CV (what a user tuning by hand gets).
    The rules: fixed sets ``2**[lo..hi]`` (one pass, ``hi - lo + 1`` widths), and sets that
    extend past an end CV chooses (more passes where they extend). No fit is run."""
    # name -> (choose(cv) -> (row, alpha column), the fixed set's end exponents or None)
    rules = {f"2**[{lo}..{hi}]": (lambda cv, lo=lo, hi=hi: _pick(cv, _between(lo, hi)), (lo, hi))
             for lo, hi in ((-2, 2), (-3, 1), (-3, 2), (-3, 3), (-4, 1), (-4, 4))}
    rules.update({f"2**[-2..2], extended by {k} at a chosen end": (_extending(-2, 2, k), None) for k in (1, 2)})
    rows = results["rows"]
    names = list(dict.fromkeys(r["dataset"] for r in rows))
    lines = [f"factor sets scored from the stored tables of {len(rows)} fits ({len(names)} data sets x seeds); "
             "gap = mean over seeds of err / ref - 1; ref = the oracle, or (d) the wide grid tuned by CV",
             "columns: mean and worst gap to the oracle and the data sets above 2%; the same against (d); "
             "fits whose choice lies at an end of a fixed set (a GridEdgeWarning)",
             f"{'rule':<42} {'mean vs oracle':>14}  {'worst vs oracle':<24} {'> 2%':>4}  {'worst vs (d)':<22} "
             f"{'> 2%':>4}  fits at an end"]
    tables = [(r["dataset"], np.asarray(r["wide_test_error"], float), np.asarray(r["wide_cv_mean_mse"], float))
              for r in rows]
    wide_cv = [te[_pick(cv, list(range(len(WIDE))))] for _, te, cv in tables]  # (d) of every fit
    for name, (choose, ends_of) in rules.items():
        vs_o, vs_d, ends = {}, {}, 0
        for (dataset, te, cv), d_err in zip(tables, wide_cv):
            g, c = choose(cv)
            vs_o.setdefault(dataset, []).append(_gap(te[g, c], te.min()))
            vs_d.setdefault(dataset, []).append(_gap(te[g, c], d_err))
            ends += ends_of is not None and WIDE[g] in ends_of
        o = {k: float(np.mean(v)) for k, v in vs_o.items()}
        d = {k: float(np.mean(v)) for k, v in vs_d.items()}
        wo, wd = max(o, key=o.get), max(d, key=d.get)
        worst_o, worst_d = f"{100 * o[wo]:+.2f}% ({wo})", f"{100 * d[wd]:+.2f}% ({wd})"
        lines.append(f"{name:<42} {100 * np.mean(list(o.values())):>+13.2f}%  {worst_o:<24} "
                     f"{sum(v > 0.02 for v in o.values()):>4}  {worst_d:<22} {sum(v > 0.02 for v in d.values()):>4}  "
                     + (f"{ends}/{len(rows)}" if ends_of is not None else "-"))
    return lines


def main(argv=None):
    from dkrr.linalg._cv import AUTO_GAMMA_FACTORS

    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_defaults", description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=REGRESSION + CLASSIFICATION,
                    choices=REGRESSION + CLASSIFICATION)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n-components", type=int, default=256, help="D for every fit (default 256, the CLI's)")
    ap.add_argument("--max-train", type=int, default=20_000)
    ap.add_argument("--max-test", type=int, default=10_000)
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads of this process (default 1: on a shared 2-core machine a 2-thread "
                         "OpenBLAS eigh of 512 x 512 took 1.8 s instead of 0.14 s)")
    ap.add_argument("--out", default="benchmarks/results/defaults", help="folder of report.txt and results.json")
    ap.add_argument("--rescore", action="store_true",
                    help="no fits: score other factor sets from OUT/results.json's stored tables into "
                         "OUT/factor_sets.txt (deterministic, any load)")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    if args.rescore:
        src = Path(args.out) / "results.json"
        if not src.is_file():
            ap.error(f"--rescore reads a previous run's tables, and {src} does not exist: run the benchmark "
                     f"with --out {args.out} first")
        results = json.loads(src.read_text())
        lines = ["command: python -m benchmarks.bench_defaults " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
                 f"source: {src} (the run of {results['validity'].get('dkrr_commit')})", *rescore(results)]
        print("\n".join(lines))
        (Path(args.out) / "factor_sets.txt").write_text("\n".join(lines) + "\n")
        return
    run_start = script_start(args)
    factors = [float(f) for f in AUTO_GAMMA_FACTORS]
    label = f"gamma_rule x {factors}"
    header = [
        "command: python -m benchmarks.bench_defaults " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        f"D = {args.n_components}, standardised columns, 5-fold one-pass CV, seeds {args.seeds}, train <= "
        f"{args.max_train:,} / test <= {args.max_test:,} rows of a seeded shuffle; BLAS threads "
        f"{args.blas_threads}, dask's threaded scheduler (numpy input, no cluster)",
        f"(a) new default: gamma='median', gammas='auto' = {label}; (b) old default: gamma='median' alone; "
        "(c) oracle: least TEST error over gamma_rule x 2**(-6..6) x 11 alphas (b's grid and a decade beyond "
        "each end); (d) that wide grid chosen by CV",
        "error: test RMSE (regression) or misclassification rate (binary); gap = err / err_oracle - 1, mean "
        "[min, max] over the seeds",
        "",
    ]
    print("\n".join(header), flush=True)
    from threadpoolctl import threadpool_limits

    rows, seed_lines = [], []
    for name in args.datasets:
        for seed in args.seeds:
            t0 = time.perf_counter()
            with threadpool_limits(args.blas_threads):
                r = run_one(name, seed, args)
            rows.append(r)
            e = r["errors"]
            seed_lines.append(f"  {name} seed {seed}: new {e['new']:.5g}, old {e['old']:.5g}, wide CV {e['wide_cv']:.5g}, "
                  f"oracle {e['oracle']:.5g}; gamma_/rule {r['new_gamma_factor']:g} (oracle "
                  f"{r['oracle_gamma_factor']:g}); fit {r['fit_seconds']['new']:.2f} s vs "
                  f"{r['fit_seconds']['old']:.2f} s ({time.perf_counter() - t0:.0f} s)")
            print(seed_lines[-1], flush=True)
    lines = summarize(rows, label)
    validity = script_end(run_start)
    caveat = ("the errors are deterministic; the timings were taken on a quiet machine (see validity)"
              if validity.get("publishable") else
              "timings are indicative only: the machine is shared by other work (see validity); the errors "
              "are deterministic")
    lines += ["", caveat, f"validity: {json.dumps(validity, default=str)}"]
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text("\n".join(header + seed_lines + [""] + lines) + "\n")
    (out / "results.json").write_text(json.dumps({"args": vars(args), "factors": factors, "rows": rows,
                                                  "validity": validity}, indent=1, default=str))
    return rows


if __name__ == "__main__":
    main()
