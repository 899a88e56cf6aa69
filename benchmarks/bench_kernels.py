"""The kernels of issue 28 (Matérn, laplacian, polynomial, ARD) on the project's real data sets.

Two parts, both on columns standardised by the training rows:

``approx``
    Kernel approximation error versus output width for every kernel and every method that
    approximates it (``dkrr.features._registry.kernel_methods``; Nyström left out), like the
    ORF paper's Fig. 4: ``--approx-rows`` rows sampled from each of ``--approx-datasets``,
    the relative Gram error ``||K_hat - K||_F / ||K||_F`` (K from scikit-learn's
    ``Matern``, ``laplacian_kernel``, ``polynomial_kernel``), mean over ``--approx-seeds``
    maps, at output widths ``--widths`` (``p = 2D`` for the shift-invariant kernels; for the
    polynomial ``tensorsketch`` has D = p and ``tensor_srht`` D = p / 2 complex features).
    Widths: Matérn and gaussian by the 50-NN rule, laplacian ``1 / d`` (``"scale"``),
    polynomial ``gamma = 1 / d``, ``coef0 = 1``. Each table also gives every method's error
    relative to ``rff`` (``tensorsketch`` for the polynomial kernel) at equal width.
``heldout``
    Held-out RMSE at equal width (``--n-components`` frequencies, p = 2D) of the gaussian,
    Matérn 1.5 and 2.5 and laplacian kernels, each as ``dkrr fit`` would choose it: its
    gamma rule (median for gaussian/Matérn, scale for the laplacian) with ``gammas="auto"``
    and the default alpha grid by 5-fold one-pass CV, ``method="auto"``; and Matérn 1.5
    with ARD widths from the isotropic fit's gradients (``dkrr.estimators.ard_gamma``,
    ALGORITHMS.md 5.1; ``--no-ard`` drops it). For each, exact scikit-learn ``KernelRidge``
    with the same kernel on ``--krr-rows`` training rows (the chosen gamma_, and alpha_
    scaled by the rows: ridge on features with penalty alpha is kernel ridge with the
    kernel ``Z Z^T`` and the same alpha, over n rows) next to dkrr refitted on those rows
    at the same (gamma_, alpha_): the gap between the two is the approximation's. The
    report says which kernel wins per data set.

The errors are deterministic (seeded); timings are indicative only on a shared machine
(the report stamps the load, the commit and whether the tree was dirty). The full run::

    DKRR_DATA_MIRROR=/work/shared/data python -m benchmarks.bench_kernels

and a tiny one (a minute) for checking that it works::

    DKRR_DATA_MIRROR=/work/shared/data python -m benchmarks.bench_kernels --tiny --allow-load
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
    from benchmarks._data import shuffled_split
    from benchmarks._validity import add_load_arguments, script_end, script_start, verdict_line
except ImportError:  # run as a script from benchmarks/
    from _data import shuffled_split  # type: ignore[no-redef]
    from _validity import add_load_arguments, script_end, script_start, verdict_line  # type: ignore[no-redef]

__all__ = ["main"]

REGRESSION = ["casp", "cal_housing", "abalone", "kin8nm", "elevators", "cpu_small", "ailerons"]
#: (label, kernel, kernel parameters) of the approximation part
APPROX_KERNELS = [("matern nu=0.5", "matern", {"nu": 0.5}), ("matern nu=1.5", "matern", {"nu": 1.5}),
                  ("matern nu=2.5", "matern", {"nu": 2.5}), ("laplacian", "laplacian", {}),
                  ("polynomial degree=2", "polynomial", {"degree": 2}),
                  ("polynomial degree=3", "polynomial", {"degree": 3})]
#: (label, kernel, parameters, gamma rule) of the held-out part
HELDOUT_KERNELS = [("gaussian", "gaussian", {}, "median"), ("matern 1.5", "matern", {"nu": 1.5}, "median"),
                   ("matern 2.5", "matern", {"nu": 2.5}, "median"), ("laplacian", "laplacian", {}, "scale")]
TINY = ["--datasets", "kin8nm", "--seeds", "0", "--max-train", "1200", "--max-test", "400", "--krr-rows", "400",
        "--n-components", "32", "--approx-datasets", "kin8nm", "--approx-rows", "80", "--approx-seeds", "2",
        "--widths", "32", "64"]



def _exact(kernel, X, Y, gamma, params):
    """scikit-learn's kernel matrix (the targets; ARD gamma: per-column length scales)."""
    from sklearn.gaussian_process.kernels import RBF, Matern
    from sklearn.metrics.pairwise import laplacian_kernel, polynomial_kernel

    if kernel == "matern":
        return Matern(length_scale=1.0 / np.sqrt(2.0 * np.asarray(gamma)), nu=params["nu"])(X, Y)
    if kernel == "gaussian":
        return RBF(length_scale=1.0 / np.sqrt(2.0 * np.asarray(gamma)))(X, Y)
    if kernel == "laplacian":
        return laplacian_kernel(X, Y, gamma=gamma)
    return polynomial_kernel(X, Y, gamma=gamma, coef0=1.0, **params)


# -- approximation error versus width ---------------------------------------------------------
def approx_part(args):
    from dkrr import RandomFeatures
    from dkrr.bandwidth import knn_gamma
    from dkrr.features._registry import kernel_methods

    rows = []
    for name in args.approx_datasets:
        X, _, _, _ = shuffled_split(name, 0, args.approx_rows, 0)
        d = X.shape[1]
        for label, kernel, params in APPROX_KERNELS:
            gamma = {"matern": knn_gamma(X, k=min(50, len(X) - 1), random_state=0), "laplacian": 1.0 / d,
                     "polynomial": 1.0 / d}[kernel]
            K = _exact(kernel, X, X, gamma, params)
            norm = np.linalg.norm(K)
            for method in kernel_methods(kernel):
                if method == "nystroem":
                    continue
                for p in args.widths:
                    D = p // 2 if kernel != "polynomial" or method == "tensor_srht" else p
                    errs = []
                    for s in range(args.approx_seeds):
                        Z = RandomFeatures(kernel=kernel, method=method, n_components=D, gamma=gamma,
                                           random_state=s, **params).fit_transform(X)
                        errs.append(np.linalg.norm(Z @ Z.T - K) / norm)
                    rows.append({"dataset": name, "kernel": label, "method": method, "width": p,
                                 "rel_error": float(np.mean(errs)), "rel_error_sd": float(np.std(errs))})
            print(f"  approx {name} {label} done", flush=True)
    return rows


def approx_tables(rows, widths):
    lines = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        for label in dict.fromkeys(r["kernel"] for r in rows if r["dataset"] == name):
            sel = [r for r in rows if r["dataset"] == name and r["kernel"] == label]
            base = "tensorsketch" if label.startswith("polynomial") else "rff"
            ref = {r["width"]: r["rel_error"] for r in sel if r["method"] == base}
            lines.append(f"{name}, {label}: relative Gram error ||K_hat - K||_F / ||K||_F (ratio to {base})")
            lines.append("  " + f"{'method':<16}" + "".join(f"{f'p = {p}':>22}" for p in widths))
            for method in dict.fromkeys(r["method"] for r in sel):
                cells = {r["width"]: r for r in sel if r["method"] == method}
                lines.append("  " + f"{method:<16}" + "".join(
                    f"{cells[p]['rel_error']:>12.4g} ({cells[p]['rel_error'] / ref[p]:>5.2f}x)" for p in widths))
            lines.append("")
    return lines


# -- held-out error at equal width ------------------------------------------------------------
def _fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # grid-edge warnings: the report shows the choices
        t0 = time.perf_counter()
        est.fit(X, y)
        return est, time.perf_counter() - t0


def _rmse(pred, y):
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def heldout_one(name, seed, args):
    from sklearn.kernel_ridge import KernelRidge

    from dkrr import RandomFeatureRidge
    from dkrr.estimators import ard_gamma

    Xtr, ytr, Xte, yte = shuffled_split(name, seed, args.max_train, args.max_test)
    sub = np.random.default_rng([seed, 1]).permutation(len(ytr))[:args.krr_rows]
    # float64, the path of the published report (measured before precision='auto' became the default)
    common = dict(n_components=args.n_components, cv=5, gammas="auto", random_state=seed, precision="float64")
    specs = list(HELDOUT_KERNELS)
    results = []
    fitted = {}
    for label, kernel, params, rule in specs + ([("matern 1.5 ARD", "matern", {"nu": 1.5}, "ard")] if args.ard else []):
        t_ard = 0.0
        if rule == "ard":  # widths from the gradients of the isotropic Matérn 1.5 fit
            t0 = time.perf_counter()
            gamma = ard_gamma(fitted["matern 1.5"], Xtr)
            t_ard = time.perf_counter() - t0
        else:
            gamma = rule
        est, seconds = _fit(RandomFeatureRidge(kernel=kernel, gamma=gamma, **params, **common), Xtr, ytr)
        fitted[label] = est
        alpha_sub = est.alpha_ * len(sub) / len(ytr)  # the same penalty per row on the subset
        ybar = ytr[sub].mean()  # KernelRidge has no intercept: centred targets
        krr = KernelRidge(alpha=alpha_sub, kernel="precomputed").fit(
            _exact(kernel, Xtr[sub], Xtr[sub], est.gamma_, params), ytr[sub] - ybar)
        krr_pred = krr.predict(_exact(kernel, Xte, Xtr[sub], est.gamma_, params)) + ybar
        rf_sub, _ = _fit(RandomFeatureRidge(kernel=kernel, gamma=est.gamma_, alpha=alpha_sub,
                                            n_components=args.n_components, random_state=seed, precision="float64", **params),
                         Xtr[sub], ytr[sub])
        # the chosen width relative to the grid's centre (the rule's value; with ARD the multiplier)
        chosen = float(np.ravel(est.gamma_)[0] / (np.ravel(gamma)[0] if rule == "ard" else est.cv_results_["gammas"][2]))
        results.append({
            "dataset": name, "seed": seed, "kernel": label, "method": est.feature_map_.projection.method,
            "rmse": _rmse(est.predict(Xte), yte), "krr_rmse": _rmse(krr_pred, yte),
            "rf_subset_rmse": _rmse(rf_sub.predict(Xte), yte), "n_train": len(ytr), "krr_rows": len(sub),
            "gamma_over_rule": chosen,
            "alpha": float(est.alpha_), "fit_seconds": seconds + t_ard,
        })
    return results


def heldout_tables(rows):
    lines = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        sel = [r for r in rows if r["dataset"] == name]
        seeds = sorted({r["seed"] for r in sel})
        n_train, krr_rows = sel[0]["n_train"], sel[0]["krr_rows"]
        lines.append(f"{name} ({n_train:,} training rows; exact KRR and dkrr on {krr_rows:,} of them), test RMSE, "
                     f"mean over seeds {seeds}:")
        lines.append(f"  {'kernel':<16}{'method':>8}{'dkrr':>12}{'vs gaussian':>13}{'exact KRR (sub)':>17}"
                     f"{'dkrr (sub)':>12}{'gamma_/rule':>13}{'fit s':>8}")
        gauss = np.mean([r["rmse"] for r in sel if r["kernel"] == "gaussian"])
        means = {}
        for label in dict.fromkeys(r["kernel"] for r in sel):
            k = [r for r in sel if r["kernel"] == label]
            m = {key: float(np.mean([r[key] for r in k])) for key in ("rmse", "krr_rmse", "rf_subset_rmse",
                                                                       "gamma_over_rule", "fit_seconds")}
            means[label] = m["rmse"]
            lines.append(f"  {label:<16}{k[0]['method']:>8}{m['rmse']:>12.5g}{100 * (m['rmse'] / gauss - 1):>+12.1f}%"
                         f"{m['krr_rmse']:>17.5g}{m['rf_subset_rmse']:>12.5g}{m['gamma_over_rule']:>13.3g}"
                         f"{m['fit_seconds']:>8.1f}")
        best = min(means, key=means.get)
        lines.append(f"  best at equal width: {best} ({100 * (means[best] / gauss - 1):+.1f}% vs gaussian)")
        lines.append("")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_kernels", description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", nargs="+", default=["approx", "heldout"], choices=["approx", "heldout"])
    ap.add_argument("--datasets", nargs="+", default=REGRESSION, choices=REGRESSION)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--n-components", type=int, default=256, help="D of every held-out fit (default 256, p = 512)")
    ap.add_argument("--max-train", type=int, default=20_000)
    ap.add_argument("--max-test", type=int, default=10_000)
    ap.add_argument("--krr-rows", type=int, default=5_000, help="training rows of exact KernelRidge (default 5,000)")
    ap.add_argument("--no-ard", dest="ard", action="store_false", help="leave out the ARD Matérn fit")
    ap.add_argument("--approx-datasets", nargs="+", default=["cal_housing", "elevators", "ailerons"], choices=REGRESSION)
    ap.add_argument("--approx-rows", type=int, default=400)
    ap.add_argument("--approx-seeds", type=int, default=10)
    ap.add_argument("--widths", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048],
                    help="output widths p of the approximation part (even)")
    ap.add_argument("--tiny", action="store_true", help="a minute's run that checks the script works: " + " ".join(TINY))
    ap.add_argument("--blas-threads", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/results/kernels", help="folder of report.txt and results.json")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    if args.tiny:
        args = ap.parse_args([*TINY, *(argv if argv is not None else sys.argv[1:])])
    run_start = script_start(args)
    header = ["command: python -m benchmarks.bench_kernels "
              + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
              f"standardised columns; BLAS threads {args.blas_threads}; dask's threaded scheduler (numpy input)", ""]
    print("\n".join(header), flush=True)
    from threadpoolctl import threadpool_limits

    approx_rows, heldout_rows, lines = [], [], []
    with threadpool_limits(args.blas_threads):
        if "approx" in args.parts:
            approx_rows = approx_part(args)
            lines += ["== kernel approximation error versus output width ==", ""] + approx_tables(approx_rows, args.widths)
        if "heldout" in args.parts:
            for name in args.datasets:
                for seed in args.seeds:
                    t0 = time.perf_counter()
                    heldout_rows += heldout_one(name, seed, args)
                    print(f"  heldout {name} seed {seed} ({time.perf_counter() - t0:.0f} s)", flush=True)
            lines += [f"== held-out error at equal width (D = {args.n_components}, p = {2 * args.n_components}) ==",
                      ""] + heldout_tables(heldout_rows)
    validity = script_end(run_start)
    lines += ["the errors are deterministic; timings indicative only" + ("" if validity.get("publishable") else
              " (the machine is shared, see validity)"), f"validity: {json.dumps(validity, default=str)}", verdict_line(validity)]
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text("\n".join(header + lines) + "\n")
    (out / "results.json").write_text(json.dumps({"args": vars(args), "approx": approx_rows,
                                                  "heldout": heldout_rows, "validity": validity},
                                                 indent=1, default=str))
    return {"approx": approx_rows, "heldout": heldout_rows, "validity": validity}


if __name__ == "__main__":
    main()
