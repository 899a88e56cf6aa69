"""solver="pcg" against the Gram path: iterations, time and agreement versus D (issue 16).

For each D (``n_components``, gaussian kernel, SORF, so ``p = 2 D``) fits
``RandomFeatureRidge`` on ``--n`` synthetic rows (a smooth function of ``--d`` inputs plus
noise) with the default Gram path (Cholesky of the accumulated ``p x p`` Gram; skipped
above ``--gram-max-p``) and with ``solver="pcg"`` (Nystrom rank ``--rank``, and plain CG
with ``--plain``), on dask's threaded scheduler. Prints the seconds, CG iterations
(passes over the data = iterations + 1), the relative difference of the predictions on
held-out rows and both held-out RMSEs, so the crossover where PCG wins shows in the table::

    .venv/bin/python benchmarks/bench_pcg.py [--D 256 512 1024 2048] [--n 20000] [--rank 256]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0] * 1.5) + np.cos(X[:, 1] * X[:, 2]) + 0.5 * X[:, 3] ** 2 + 0.1 * rng.standard_normal(n)
    return X, y


def _timed(est, X, y):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return est, time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--D", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--gamma", type=float, default=0.1)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--rank", type=int, default=256)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--gram-max-p", type=int, default=8192)
    ap.add_argument("--plain", action="store_true", help="also plain CG (pcg_rank=0)")
    args = ap.parse_args(argv)

    from dkrr import RandomFeatureRidge

    X, y = _data(args.n + 5000, args.d)
    Xtr, ytr, Xte, yte = X[: args.n], y[: args.n], X[args.n:], y[args.n:]
    print(f"n = {args.n} rows x d = {args.d}, gamma = {args.gamma}, alpha = {args.alpha}, tol = {args.tol}, "
          f"rank = {args.rank}; threaded scheduler, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'D':>6} {'p':>6} {'gram s':>8} {'pcg s':>8} {'iters':>6} {'plain s':>8} {'plain it':>8} "
          f"{'rel pred':>9} {'rmse gram':>9} {'rmse pcg':>9}")
    for D in args.D:
        p = 2 * D
        kw = {"method": "sorf", "n_components": D, "gamma": args.gamma, "alpha": args.alpha, "random_state": 0}
        gram = gram_s = None
        if p <= args.gram_max_p:
            gram, gram_s = _timed(RandomFeatureRidge(**kw), Xtr, ytr)
        pcg, pcg_s = _timed(RandomFeatureRidge(**kw, solver="pcg", pcg_rank=args.rank, tol=args.tol,
                                               max_iter=args.max_iter), Xtr, ytr)
        plain_s = plain_it = None
        if args.plain:
            plain, plain_s = _timed(RandomFeatureRidge(**kw, solver="pcg", pcg_rank=0, tol=args.tol,
                                                       max_iter=args.max_iter), Xtr, ytr)
            plain_it = plain.solver_info_["n_iter"]
        pp = pcg.predict(Xte)
        rmse_p = float(np.sqrt(np.mean((pp - yte) ** 2)))
        rel = rmse_g = None
        if gram is not None:
            pg = gram.predict(Xte)
            rel = float(np.linalg.norm(pp - pg) / np.linalg.norm(pg))
            rmse_g = float(np.sqrt(np.mean((pg - yte) ** 2)))

        def f(v, spec):
            width = int(spec.rstrip("dfe").split(".")[0])
            return f"{'-':>{width}}" if v is None else format(v, spec)

        it = pcg.solver_info_["n_iter"]
        conv = "" if pcg.solver_info_["converged"] else "*"
        print(f"{D:>6} {p:>6} {f(gram_s, '8.2f')} {pcg_s:>8.2f} {str(it) + conv:>6} {f(plain_s, '8.2f')} "
              f"{f(plain_it, '8d')} {f(rel, '9.1e')} {f(rmse_g, '9.4f')} {rmse_p:>9.4f}")
    print("* not converged at max_iter")


if __name__ == "__main__":
    main()
