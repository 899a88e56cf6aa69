"""End-to-end demo: kernel ridge regression on CASP with dkrr on a local Dask cluster.

What it does (about a minute on 2 cores):

1. starts an in-process ``distributed.LocalCluster`` (2 workers x 1 thread, bound to
   127.0.0.1) and prints its dashboard link;
2. loads CASP (protein structure, 45,730 x 9, target RMSD) shipped with dkrr, shuffles it
   with a fixed seed, holds out 20% as a test set, and standardises the columns of X
   with the training mean and standard deviation;
3. picks the Gaussian bandwidth by the rule of thumb of ALGORITHMS.md section 5: sigma is
   the mean distance to the 50th nearest neighbour over 1,000 sampled training rows,
   ``gamma = 1 / (2 sigma^2)`` (:func:`dkrr.bandwidth.knn_gamma`);
4. fits :class:`dkrr.RandomFeatureRidge` (SORF features, 5-fold one-pass
   cross-validation over an alpha grid) from a row-chunked dask array on the cluster,
   and reports the test RMSE and R^2 and the fit time;
5. for comparison fits scikit-learn's exact ``KernelRidge`` (RBF kernel, the same gamma
   and the alpha dkrr chose; y centred with the training mean since ``KernelRidge`` has
   no intercept) on a random subset of the training rows that it can hold in memory
   (default 8,000 rows: a 512 MB kernel matrix), and dkrr again on that same subset, so
   both "exact vs random features at equal data" and "all data vs a subset" are shown.

Run::

    .venv/bin/python -m pipelines.demo
    .venv/bin/python -m pipelines.demo --n-components 1024 --subset 10000
"""

from __future__ import annotations

import argparse
import time

import numpy as np

__all__ = ["main"]


def _metrics(y, pred):
    resid = y - pred
    rmse = float(np.sqrt(np.mean(resid**2)))
    r2 = float(1.0 - np.sum(resid**2) / np.sum((y - y.mean()) ** 2))
    return rmse, r2


def main(argv=None) -> dict:
    """Run the demo; returns the printed numbers as a dict."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--method", default=None, help="projection (default: sorf if available, else rff)")
    parser.add_argument("--n-components", type=int, default=512, help="D random frequencies (2D features)")
    parser.add_argument("--subset", type=int, default=8000, help="training rows for the exact KernelRidge")
    parser.add_argument("--chunk-rows", type=int, default=4000, help="rows per dask block")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import dask.array as da
    from sklearn.kernel_ridge import KernelRidge

    from dkrr.bandwidth import knn_gamma
    from dkrr.cluster import local_cluster
    from dkrr.datasets import load_casp
    from dkrr.estimators import RandomFeatureRidge
    from dkrr.features import PROJECTIONS

    method = args.method or ("sorf" if "sorf" in PROJECTIONS else "rff")
    X, y = load_casp()
    rng = np.random.default_rng(args.seed)
    perm = rng.permutation(len(y))
    X, y = X[perm], y[perm]
    n_test = len(y) // 5
    X_tr, y_tr, X_te, y_te = X[n_test:], y[n_test:], X[:n_test], y[:n_test]
    mean, std = X_tr.mean(0), X_tr.std(0)
    std[std == 0] = 1.0
    X_tr = (X_tr - mean) / std
    X_te = (X_te - mean) / std
    gamma = knn_gamma(X_tr, random_state=args.seed)
    alphas = np.logspace(-3, 2, 6)
    print(f"CASP: {len(y_tr)} training rows, {len(y_te)} test rows, {X.shape[1]} features; "
          f"gamma = {gamma:.4g} (50-NN rule of thumb)")

    results = {"gamma": gamma, "n_train": len(y_tr), "n_test": len(y_te)}
    with local_cluster(n_workers=2, threads_per_worker=1, memory_limit="2GB"):  # prints the dashboard link
        Xd = da.from_array(X_tr, chunks=(args.chunk_rows, X.shape[1]))
        yd = da.from_array(y_tr, chunks=args.chunk_rows)
        est = RandomFeatureRidge(method=method, n_components=args.n_components, gamma=gamma,
                                 alphas=alphas, cv=5, random_state=args.seed)
        t0 = time.perf_counter()
        est.fit(Xd, yd)
        fit_s = time.perf_counter() - t0
        pred = est.predict(da.from_array(X_te, chunks=(args.chunk_rows, X.shape[1]))).compute()
    rmse, r2 = _metrics(y_te, pred)
    results["dkrr"] = {"rmse": rmse, "r2": r2, "fit_s": fit_s, "alpha": est.alpha_}
    cv_mse = est.cv_results_["mean_mse"]
    print(f"\ndkrr RandomFeatureRidge ({method}, D={args.n_components}, {est.n_output_features_} features), "
          f"all {len(y_tr)} training rows on the cluster, {Xd.numblocks[0]} blocks:")
    print("  5-fold one-pass CV, mean validation MSE per alpha: "
          + ", ".join(f"{a:g}: {m:.3f}" for a, m in zip(alphas, cv_mse)))
    print(f"  chosen alpha {est.alpha_:g}; fit {fit_s:.1f} s (one pass over the data, CV included)")
    print(f"  test RMSE {rmse:.3f}, R^2 {r2:.4f}")

    m = min(args.subset, len(y_tr))
    sub = np.random.default_rng(args.seed + 1).choice(len(y_tr), size=m, replace=False)
    ybar = y_tr[sub].mean()
    krr = KernelRidge(kernel="rbf", gamma=gamma, alpha=est.alpha_)
    t0 = time.perf_counter()
    krr.fit(X_tr[sub], y_tr[sub] - ybar)
    krr_s = time.perf_counter() - t0
    rmse_k, r2_k = _metrics(y_te, krr.predict(X_te) + ybar)
    results["kernel_ridge_subset"] = {"rmse": rmse_k, "r2": r2_k, "fit_s": krr_s, "n_rows": m}
    est_sub = RandomFeatureRidge(method=method, n_components=args.n_components, gamma=gamma,
                                 alpha=est.alpha_, random_state=args.seed).fit(X_tr[sub], y_tr[sub])
    rmse_s, r2_s = _metrics(y_te, est_sub.predict(X_te))
    results["dkrr_subset"] = {"rmse": rmse_s, "r2": r2_s, "n_rows": m}
    print(f"\nscikit-learn exact KernelRidge (rbf, same gamma, alpha {est.alpha_:g}) on a random {m}-row subset "
          "(all it can hold here):")
    print(f"  test RMSE {rmse_k:.3f}, R^2 {r2_k:.4f}; fit {krr_s:.1f} s")
    print(f"dkrr on the same {m}-row subset (same gamma and alpha, in memory): test RMSE {rmse_s:.3f}, R^2 {r2_s:.4f}")
    print(f"\nsummary: dkrr on all rows vs exact KRR on {m} rows: test RMSE {rmse:.3f} vs {rmse_k:.3f} "
          f"({100 * (rmse / rmse_k - 1):+.1f}%)")
    return results


if __name__ == "__main__":
    main()
