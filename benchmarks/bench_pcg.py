"""solver="pcg" against the Gram path: iterations and time versus D and n, the crossover,
the cost of cross-validation, and the per-core rates of the cost model (issue 16).

Three modes, each stamped with the commit, a modified tree and the load (refused on a
busy machine without ``--allow-load``; see ``benchmarks/_validity.py``), every ratio taken
against a baseline measured in the same run:

``sweep`` (default)
    For each n in ``--n`` and D in ``--D`` (``n_components``, gaussian kernel, SORF, so
    ``p = 2 D``) fits ``RandomFeatureRidge`` on synthetic rows (a smooth function of
    ``--d`` inputs plus noise, threaded scheduler) with the Gram path (Cholesky of the
    accumulated ``p x p`` Gram; skipped above ``--gram-max-p``) and with
    ``solver="pcg"`` (Nystrom rank ``--rank``; plain CG too with ``--plain``). Prints the
    seconds, the ratio PCG / Gram, CG iterations and passes, the relative difference of the
    held-out predictions and both held-out RMSEs, then per n the crossover: the smallest
    D from which PCG was faster. ``--repeats`` fits each model that many times and keeps
    the least time (sweep and cv).
``cv``
    ``cv=--cv`` over ``--alphas`` (or the default grid with ``--default-grid``) by the
    Gram path's one-pass CV and by PCG's fold-masked CV (ALGORITHMS.md 3.9): seconds, the
    ratio, passes over the data, the largest relative difference of the fold errors and
    whether the same alpha was chosen.
``cost``
    Per-core rates on this machine (one thread): the feature transform (rows/s at
    ``--D``, d = ``--d``) and DGEMM (GFLOP/s of ``Z^T (Z V)``), and the client's time to
    build one pass's graph (``reduce_row_blocks(..., compute=False)`` of an iteration over
    ``--graph-blocks`` row blocks of an in-memory X and of a dkrr Zarr store, least of 3),
    and from them the cost model of a fit with ``--n-model`` rows, ``--D-model``
    frequencies on ``--workers`` x ``--cores`` cores (ALGORITHMS.md 3.9): seconds of pass 1
    and of an iteration (the graph's construction, serial on the client, added to each
    pass for ``--n-model / --block-rows`` blocks), the total for ``--iterations``, and the
    per-worker memory of ``pcg_memory_estimate``.

::

    python -m benchmarks.bench_pcg sweep [--D 1024 2048 4096 8192 16384 32768 65536] [--n 20000 100000]
    python -m benchmarks.bench_pcg cv [--D 256 512 1024 2048] [--n 20000] [--cv 5]
    python -m benchmarks.bench_pcg cost [--n-model 1e9] [--D-model 100000] [--workers 100] [--cores 16]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

try:  # python -m benchmarks.bench_pcg
    from benchmarks._validity import add_load_arguments, script_end, script_start
    from benchmarks.bench_fit_2m import _best
except ImportError:  # python benchmarks/bench_pcg.py
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]
    from bench_fit_2m import _best  # type: ignore[no-redef]


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0] * 1.5) + np.cos(X[:, 1] * X[:, 2]) + 0.5 * X[:, 3] ** 2 + 0.1 * rng.standard_normal(n)
    return X, y


#: fits per measurement (--repeats); the least time is kept
REPEATS = [1]


def _timed(est, X, y):
    """``(est fitted, seconds)``: the least of ``REPEATS[0]`` fits (the same model each time)."""
    best = np.inf
    for _ in range(REPEATS[0]):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        best = min(best, time.perf_counter() - t0)
    return est, best


def _f(v, spec):
    width = int(spec.rstrip("dfex").split(".")[0])
    return f"{'-':>{width}}" if v is None else format(v, spec)


def _warm_up():
    """Imports, numba kernels and thread pools of a first fit, not measured."""
    from dkrr import RandomFeatureRidge

    X, y = _data(2000, 8, seed=1)
    for solver in ("cholesky", "pcg"):
        _timed(RandomFeatureRidge(method="sorf", n_components=64, gamma=0.1, solver=solver, cv=None), X, y)
        _timed(RandomFeatureRidge(method="sorf", n_components=64, gamma=0.1, solver=solver, cv=3, alphas=[1.0]), X, y)


def sweep(args) -> dict:
    from dkrr import RandomFeatureRidge

    _warm_up()
    print(f"d = {args.d}, gamma = {args.gamma}, alpha = {args.alpha}, tol = {args.tol}, rank = {args.rank}; "
          f"gaussian SORF (p = 2 D); threaded scheduler, {os.cpu_count()} cores; Gram path up to p = {args.gram_max_p}")
    rows, crossover = [], {}
    for n in args.n:
        X, y = _data(n + 5000, args.d)
        Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
        print(f"\nn = {n}")
        print(f"{'D':>6} {'p':>6} {'gram s':>8} {'pcg s':>8} {'pcg/gram':>8} {'iters':>6} {'passes':>6} "
              f"{'plain s':>8} {'plain it':>8} {'rel pred':>9} {'rmse gram':>9} {'rmse pcg':>9}", flush=True)
        for D in args.D:
            p = 2 * D
            kw = {"method": "sorf", "n_components": D, "gamma": args.gamma, "alpha": args.alpha, "random_state": 0}
            gram = gram_s = None
            if p <= args.gram_max_p:
                gram, gram_s = _timed(RandomFeatureRidge(**kw, solver="cholesky"), Xtr, ytr)
            pcg, pcg_s = _timed(RandomFeatureRidge(**kw, solver="pcg", pcg_rank=args.rank, tol=args.tol,
                                                   max_iter=args.max_iter), Xtr, ytr)
            plain_s = plain_it = None
            if args.plain:
                plain, plain_s = _timed(RandomFeatureRidge(**kw, solver="pcg", pcg_rank=0, tol=args.tol,
                                                           max_iter=args.max_iter), Xtr, ytr)
                plain_it = plain.solver_info_["n_iter"]
            pp = pcg.predict(Xte)
            rmse_p = float(np.sqrt(np.mean((pp - yte) ** 2)))
            rel = rmse_g = ratio = None
            if gram is not None:
                pg = gram.predict(Xte)
                rel = float(np.linalg.norm(pp - pg) / np.linalg.norm(pg))
                rmse_g = float(np.sqrt(np.mean((pg - yte) ** 2)))
                ratio = pcg_s / gram_s
                if ratio < 1 and n not in crossover:
                    crossover[n] = D
            info = pcg.solver_info_
            it = f"{info['n_iter']}{'' if info['converged'] else '*'}"
            print(f"{D:>6} {p:>6} {_f(gram_s, '8.2f')} {pcg_s:>8.2f} {_f(ratio, '8.2f')} {it:>6} {info['passes']:>6} "
                  f"{_f(plain_s, '8.2f')} {_f(plain_it, '8d')} {_f(rel, '9.1e')} {_f(rmse_g, '9.4f')} {rmse_p:>9.4f}",
                  flush=True)
            rows.append({"n": n, "D": D, "p": p, "gram_s": gram_s, "pcg_s": pcg_s, "pcg_over_gram": ratio,
                         "iterations": info["n_iter"], "passes": info["passes"], "converged": info["converged"],
                         "plain_s": plain_s, "plain_iterations": plain_it, "rel_pred": rel, "rmse_gram": rmse_g,
                         "rmse_pcg": rmse_p})
    print("\n* not converged at max_iter")
    for n in args.n:
        ran = [r["D"] for r in rows if r["n"] == n and r["gram_s"] is not None]
        if n in crossover:
            print(f"crossover at n = {n}: PCG faster than the Gram path from D = {crossover[n]} (p = {2 * crossover[n]})")
        elif ran:
            print(f"crossover at n = {n}: the Gram path was faster at every D both ran (up to D = {max(ran)})")
    return {"rows": rows, "crossover": crossover}


def cv(args) -> dict:
    from dkrr import RandomFeatureRidge

    _warm_up()
    alphas = None if args.default_grid else args.alphas
    n = args.n[0]
    X, y = _data(n, args.d)
    print(f"n = {n}, d = {args.d}, gamma = {args.gamma}, cv = {args.cv}, alphas = "
          f"{'default grid s * 10^(-7..1)' if alphas is None else alphas}, tol = {args.tol}, rank = {args.rank}")
    print(f"{'D':>6} {'p':>6} {'gram cv s':>9} {'pcg cv s':>9} {'pcg/gram':>8} {'passes':>6} {'iters':>6} "
          f"{'systems':>7} {'max rel mse':>11} {'same alpha':>10}", flush=True)
    rows = []
    for D in args.D:
        kw = {"method": "sorf", "n_components": D, "gamma": args.gamma, "cv": args.cv, "alphas": alphas,
              "random_state": 0}
        gram, gram_s = _timed(RandomFeatureRidge(**kw, solver="cholesky"), X, y)
        pcg, pcg_s = _timed(RandomFeatureRidge(**kw, solver="pcg", pcg_rank=args.rank, tol=args.tol,
                                               max_iter=args.max_iter), X, y)
        info = pcg.solver_info_
        rel = float(np.max(np.abs(pcg.cv_results_["fold_mse"] / gram.cv_results_["fold_mse"] - 1)))
        same = pcg.alpha_ == gram.alpha_
        it = f"{info['n_iter']}{'' if info['converged'] else '*'}"
        print(f"{D:>6} {2 * D:>6} {gram_s:>9.2f} {pcg_s:>9.2f} {pcg_s / gram_s:>8.2f} {info['passes']:>6} {it:>6} "
              f"{info['residuals'].shape[1]:>7} {rel:>11.1e} {str(same):>10}", flush=True)
        rows.append({"D": D, "p": 2 * D, "gram_s": gram_s, "pcg_s": pcg_s, "pcg_over_gram": pcg_s / gram_s,
                     "passes": info["passes"], "iterations": info["n_iter"], "converged": info["converged"],
                     "systems": int(info["residuals"].shape[1]), "max_rel_fold_mse": rel, "same_alpha": same,
                     "alpha_gram": gram.alpha_, "alpha_pcg": pcg.alpha_})
    print("the Gram path reads the data once; PCG's passes = iterations + 2 (statistics and sketch, CG, "
          "validation errors); * not converged at max_iter")
    return {"rows": rows}


def graph_seconds(n_blocks: int, d: int, fmap, V, repeats: int = 3) -> dict:
    """Seconds the client takes to build one CG iteration's graph (no compute) over
    ``n_blocks`` row blocks (16 rows each) of X in memory (``dask.array.from_array``) and of
    X in a dkrr Zarr store (reader-backed, :mod:`dkrr._rows`): the least of
    ``repeats`` builds."""
    import shutil
    import tempfile

    import dask.array as da

    from dkrr.io import open_dataset, write_dataset
    from dkrr.linalg._pcg import _matvec_block, _sum_checked
    from dkrr.linalg._reduce import reduce_row_blocks

    rows = 16
    X = np.random.default_rng(0).standard_normal((n_blocks * rows, d))
    consts = (fmap, V, None, 1, 0, 64 * 2**20)

    def build(Xd):
        return lambda: reduce_row_blocks([Xd], _matvec_block, _sum_checked, constants=consts, compute=False,
                                         n_chains=16)

    out = {"blocks": n_blocks, "memory_s": _best(build(da.from_array(X, chunks=(rows, d))), repeats)}
    tmp = tempfile.mkdtemp(prefix="dkrr-bench-graph-")
    try:
        write_dataset(da.from_array(X, chunks=(rows, d)), None, os.path.join(tmp, "x.zarr"))
        out["zarr_s"] = _best(build(open_dataset(os.path.join(tmp, "x.zarr"), require_y=False).X), repeats)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def cost(args) -> dict:
    from threadpoolctl import threadpool_limits

    from dkrr import RandomFeatures
    from dkrr.linalg._pcg import pcg_memory_estimate

    rows, D, d = 4096, args.D[0], args.d
    X = np.random.default_rng(0).standard_normal((rows, d))
    rf = RandomFeatures(method=args.method, n_components=D, gamma=1.0 / d, random_state=0).fit(X)
    p = rf.n_output_features_
    Z = np.empty((rows, p))
    V = np.random.default_rng(1).standard_normal((p, args.rhs))
    Om = np.random.default_rng(2).standard_normal((p, args.rank))
    with threadpool_limits(1):
        t_feat = _best(lambda: rf.feature_map_.transform(X, out=Z), 3) / rows  # s per row at this D
        t_gemm = _best(lambda: Z.T @ (Z @ V), 3)
        t_sketch = _best(lambda: Z.T @ (Z @ Om), 1)
    gemm = 4.0 * rows * p * args.rhs / t_gemm  # flop/s of one core: an iteration's product (m columns)
    sketch = 4.0 * rows * p * args.rank / t_sketch  # ... and pass 1's sketch (rank columns)
    feat_per_col = t_feat / p  # s per row and output column (linear in D at fixed d)
    graph = graph_seconds(args.graph_blocks, d, rf.feature_map_, V)
    per_block = max(graph["memory_s"], graph["zarr_s"]) / graph["blocks"]  # s per block of a pass's graph
    N, Dm, cores = float(args.n_model), int(args.D_model), args.workers * args.cores
    pm = 2 * Dm
    n_blocks = int(np.ceil(N / args.block_rows))
    graph_pass = per_block * n_blocks  # serial, on the client, before each pass
    per_row_feat = feat_per_col * pm
    pass1 = N * (per_row_feat + 4.0 * pm * args.rank / sketch) / cores + graph_pass
    it = N * (per_row_feat + 4.0 * pm * args.rhs / gemm) / cores + graph_pass
    total = pass1 + args.iterations * it
    mem = pcg_memory_estimate(kernel="gaussian", method=args.method, n_features_in=d, n_components=Dm,
                              n_targets=args.rhs, rank=args.rank, split_every=None, block_rows=args.block_rows,
                              n_blocks=n_blocks, max_block_bytes=64 * 2**20)
    x_share = N * d * 4 / args.workers
    out = {"feature_s_per_row_col": feat_per_col, "gemm_flops_per_core": gemm, "sketch_flops_per_core": sketch,
           "graph_memory_s": graph["memory_s"], "graph_zarr_s": graph["zarr_s"], "graph_blocks": graph["blocks"],
           "graph_s_per_block": per_block, "graph_s_per_pass": graph_pass, "pass1_s": pass1, "iteration_s": it,
           "total_s": total, "block_task_bytes": mem.block_task, "client_bytes": mem.client, "x_bytes_per_worker": x_share}
    print(f"one core here: features {feat_per_col * 1e9:.2f} ns per row and output column ({args.method}, d = {d}, "
          f"D = {D}); Z^T (Z V) {gemm / 1e9:.1f} GFLOP/s with {args.rhs} right-hand side(s), "
          f"{sketch / 1e9:.1f} GFLOP/s with the {args.rank} columns of the sketch")
    print(f"graph of one pass, built on the client: {graph['memory_s']:.3f} s for {graph['blocks']:,} in-memory "
          f"blocks, {graph['zarr_s']:.3f} s for {graph['blocks']:,} blocks of a Zarr store "
          f"({1000 * per_block:.2f} s per 1,000 blocks, the larger)")
    print(f"model: n = {N:.3g}, D = {Dm} (p = {pm}), rank {args.rank}, {args.workers} workers x {args.cores} cores "
          f"at these rates, {n_blocks:,} blocks of {args.block_rows:,} rows")
    print(f"  graph of a pass: {graph_pass:,.1f} s (serial, on the client; in each pass below)")
    print(f"  pass 1 (statistics + sketch, 4 n p l flops): {pass1:,.0f} s; each iteration: {it:,.0f} s; "
          f"{args.iterations} iterations: total {total:,.0f} s ({total / 3600:.2f} h)")
    print(f"  memory: a block task {mem.block_task / 2**30:.2f} GiB (a {args.cores}-thread worker "
          f"{(args.cores * (mem.block_task - mem.feature_map) + mem.feature_map) / 2**30:.1f} GiB), the client "
          f"{mem.client / 2**30:.2f} GiB; X (float32) {x_share / 2**30:.2f} GiB per worker (kept in memory)")
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", nargs="?", default="sweep", choices=["sweep", "cv", "cost"])
    ap.add_argument("--D", type=int, nargs="+", default=None)
    ap.add_argument("--n", type=int, nargs="+", default=[20000])
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--gamma", type=float, default=0.1)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.1, 1.0, 10.0, 100.0])
    ap.add_argument("--default-grid", action="store_true", help="cv: the default grid s * 10^(-7..1)")
    ap.add_argument("--cv", type=int, default=5)
    ap.add_argument("--rank", type=int, default=256)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--gram-max-p", type=int, default=8192)
    ap.add_argument("--plain", action="store_true", help="sweep: also plain CG (pcg_rank=0)")
    ap.add_argument("--method", default="rff", help="cost: the feature map measured (dense rff at small d)")
    ap.add_argument("--rhs", type=int, default=1, help="cost: right-hand sides per pass")
    ap.add_argument("--n-model", type=float, default=1e9)
    ap.add_argument("--D-model", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=100)
    ap.add_argument("--cores", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--block-rows", type=int, default=65536, help="cost: rows per block of the model's X")
    ap.add_argument("--graph-blocks", type=int, default=1000,
                    help="cost: row blocks of the pass whose graph construction is timed")
    ap.add_argument("--repeats", type=int, default=1, help="sweep/cv: fits per measurement, the least time kept")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    REPEATS[0] = max(1, args.repeats)
    if args.D is None:
        args.D = {"sweep": [1024, 2048, 4096, 8192, 16384, 32768, 65536], "cv": [256, 512, 1024, 2048],
                  "cost": [4096]}[args.mode]
    if args.mode == "cost":
        args.d = 9 if args.d == 8 else args.d  # TAXI has 9 features
    run_start = script_start(args)
    result = {"sweep": sweep, "cv": cv, "cost": cost}[args.mode](args)
    result["validity"] = script_end(run_start)
    return result


if __name__ == "__main__":
    main()
