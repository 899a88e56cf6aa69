"""Predictive uncertainty and evidence-based selection on the project's real data sets.

For every data set and seed (a seeded shuffle, at most ``--max-train`` / ``--max-test``
rows, columns standardised), with D = ``--n-components`` frequencies (2D feature
columns) and ``gamma="median"``, ``gammas="auto"``:

(a) **CV**: ``cv=5`` chooses (gamma, alpha); the noise variance is the evidence's at the
    chosen alpha;
(b) **evidence**: ``cv="evidence"`` chooses (gamma, alpha) by the log marginal
    likelihood (one eigendecomposition per gamma, no fold statistics);
(c) **exact GP**: scikit-learn's ``GaussianProcessRegressor`` with
    ``ConstantKernel * RBF + WhiteKernel`` (hyperparameters by its own marginal-likelihood
    optimiser, one start from the rule's width) on the first ``--gp-train`` training rows
    (the largest it fits in reasonable time here).

For each: test RMSE, the coverage of the central 68.27% and 95% predictive intervals
(``mean +- z std`` of a new observation, ``predict(X, return_std=True)``), the mean
negative log predictive density (Gaussian), and the fit time (measured in the same run).
The intervals are calibrated when the coverages are near 68% and 95%.

Run: ``DKRR_DATA_MIRROR=/work/shared/data python -m benchmarks.bench_uncertainty``
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import warnings

import numpy as np

try:
    from benchmarks._data import shuffled_split
    from benchmarks._validity import add_load_arguments, script_end, script_start, verdict_line, write_report
except ImportError:  # run as a script from benchmarks/
    from _data import shuffled_split  # type: ignore[no-redef]
    from _validity import (  # type: ignore[no-redef]
        add_load_arguments, script_end, script_start, verdict_line, write_report)

__all__ = ["main", "calibration"]

DATASETS = ["cal_housing", "casp", "kin8nm", "abalone"]
Z68, Z95 = 0.994457883, 1.959963985


def calibration(y, mean, std) -> dict:
    """Coverage of the 68.27% / 95% central intervals and the mean Gaussian NLPD."""
    y, mean, std = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (y, mean, std))
    z = np.abs(y - mean) / std
    nlpd = 0.5 * np.log(2 * np.pi * std**2) + 0.5 * z**2
    return {"rmse": float(np.sqrt(np.mean((y - mean) ** 2))), "cover68": float(np.mean(z <= Z68)),
            "cover95": float(np.mean(z <= Z95)), "nlpd": float(np.mean(nlpd))}



def _dkrr(Xtr, ytr, Xte, yte, cv, args, seed):
    from dkrr import RandomFeatureRidge

    est = RandomFeatureRidge(n_components=args.n_components, gamma="median", gammas="auto", cv=cv,
                             random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # grid-edge warnings: the report shows the choices
        t0 = time.perf_counter()
        est.fit(Xtr, ytr)
        t = time.perf_counter() - t0
    mean, std = est.predict(Xte, return_std=True)
    out = calibration(yte, mean, std)
    out.update(fit_s=t, gamma=float(est.gamma_), alpha=float(est.alpha_),
               noise_sd=float(np.sqrt(np.atleast_1d(est.noise_variance_)[0])))
    return out


def _gp(Xtr, ytr, Xte, yte, args):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    m = min(args.gp_train, len(ytr))
    d2 = np.sum((Xtr[:500, None, :] - Xtr[None, :500, :]) ** 2, axis=-1)
    ls = float(np.sqrt(np.median(d2[d2 > 0]) / 2))
    kernel = ConstantKernel(float(np.var(ytr))) * RBF(ls) + WhiteKernel(0.1 * float(np.var(ytr)))
    gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0)
    t0 = time.perf_counter()
    gp.fit(Xtr[:m], ytr[:m])
    t = time.perf_counter() - t0
    mean, std = gp.predict(Xte, return_std=True)
    out = calibration(yte, mean, std)
    out.update(fit_s=t, n_train=m)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_uncertainty", description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=DATASETS)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n-components", type=int, default=1024, help="D (2D feature columns; default 1024: p = 2048)")
    ap.add_argument("--max-train", type=int, default=20_000)
    ap.add_argument("--max-test", type=int, default=10_000)
    ap.add_argument("--gp-train", type=int, default=3000, help="rows of the exact GP's training set (0: skip)")
    ap.add_argument("--blas-threads", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/results/uncertainty")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    run_start = script_start(args)
    from threadpoolctl import threadpool_limits

    header = [
        "command: python -m benchmarks.bench_uncertainty " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        f"D = {args.n_components} ({2 * args.n_components} feature columns), gamma='median', gammas='auto', "
        f"standardised columns; seeds {args.seeds}; train <= {args.max_train:,} / test <= {args.max_test:,} rows "
        f"of a seeded shuffle; exact GP on the first {args.gp_train:,} training rows; BLAS threads {args.blas_threads}",
        "cover68 / cover95: fraction of test targets inside mean +- 0.9945 std / 1.96 std (a new observation's "
        "predictive std); nlpd: mean Gaussian negative log predictive density",
        "",
    ]
    print("\n".join(header), flush=True)
    rows, lines = [], []
    for name in args.datasets:
        for seed in args.seeds:
            Xtr, ytr, Xte, yte = shuffled_split(name, seed, args.max_train, args.max_test)
            with threadpool_limits(args.blas_threads):
                r = {"dataset": name, "seed": seed, "n_train": len(ytr), "n_test": len(yte),
                     "cv": _dkrr(Xtr, ytr, Xte, yte, 5, args, seed),
                     "evidence": _dkrr(Xtr, ytr, Xte, yte, "evidence", args, seed)}
                if args.gp_train:
                    r["gp"] = _gp(Xtr, ytr, Xte, yte, args)
            rows.append(r)
            for k in ("cv", "evidence", "gp"):
                if k in r:
                    v = r[k]
                    lines.append(f"  {name:<12} seed {seed} {k:<9} rmse {v['rmse']:.5g}  cover68 {v['cover68']:.3f}  "
                                 f"cover95 {v['cover95']:.3f}  nlpd {v['nlpd']:.4f}  fit {v['fit_s']:.1f} s")
                    print(lines[-1], flush=True)
    summary = ["", f"{'dataset':<12} {'model':<9} {'rmse':>10} {'cover68':>15} {'cover95':>15} {'nlpd':>9} "
                   f"{'fit s':>7}  (mean [min, max] over seeds)"]
    for name in args.datasets:
        rs = [r for r in rows if r["dataset"] == name]
        for k in ("cv", "evidence", "gp"):
            if k not in rs[0]:
                continue
            col = {m: [r[k][m] for r in rs] for m in ("rmse", "cover68", "cover95", "nlpd", "fit_s")}
            summary.append(
                f"{name:<12} {k:<9} {np.mean(col['rmse']):>10.5g} "
                f"{np.mean(col['cover68']):.3f} [{min(col['cover68']):.3f},{max(col['cover68']):.3f}] "
                f"{np.mean(col['cover95']):.3f} [{min(col['cover95']):.3f},{max(col['cover95']):.3f}] "
                f"{np.mean(col['nlpd']):>9.4f} {np.median(col['fit_s']):>7.1f}")
        ev = [r["evidence"]["rmse"] / r["cv"]["rmse"] - 1 for r in rs]
        tr = [r["evidence"]["fit_s"] / r["cv"]["fit_s"] for r in rs]
        summary.append(f"{'':<12} evidence vs CV: test RMSE {100 * np.mean(ev):+.2f}% [{100 * min(ev):+.2f}, "
                       f"{100 * max(ev):+.2f}], fit time {np.median(tr):.2f}x (median over seeds)")
    validity = script_end(run_start)
    summary += ["", f"validity: {json.dumps(validity, default=str)}", verdict_line(validity)]
    print("\n".join(summary))
    write_report(args.out, header + lines + summary, {"args": vars(args), "rows": rows, "validity": validity})
    return rows


if __name__ == "__main__":
    main()
