"""A ``solver="pcg"`` fit at D = 32,768 (p = 65,536) from a Zarr store, with each worker's
peak memory next to the estimate the docs give (issue 16; ALGORITHMS.md 3.9).

1. **store**: ``--n`` synthetic rows (X ~ N(0, I_d) float32, ``y = sin(x_0) + cos(x_1) x_2
   + 0.1 e``, block ``i`` from ``default_rng([seed, i])``, as ``bench_fit_2m.py``) written
   with :func:`dkrr.io.write_dataset` in chunks of ``--chunk-rows`` rows;
2. **fit**: on a fresh ``LocalCluster`` (``--workers`` processes x ``--threads`` threads,
   ``memory_limit=--memory-limit``), :func:`dkrr.io.open_dataset` and
   ``RandomFeatureRidge(n_components=--D, solver=--solver, method=--method, pcg_rank=--rank)``
   (``--solver auto`` shows the choice: the Gram path's estimate, printed too, does not
   fit). The peak RSS of every worker and of the client (which hosts the scheduler) is the
   kernel's high-water mark, reset before the fit (:class:`benchmarks.bench_fit_2m.PeakRSS`).

Printed next to each measured peak: the estimate of
:func:`dkrr.linalg._pcg.pcg_memory_estimate` for the same parameters on the same cluster
(``worker`` for a worker, ``client`` for this process) and the peak minus the process's RSS
before the fit (the estimate counts the fit's arrays, not the interpreter and libraries:
that baseline is about 150-250 MiB a process). Stamped with the commit, a modified tree and
the load (``_validity.py``). Run (a few minutes on 2 cores)::

    python -m benchmarks.bench_pcg_memory [--n 20000] [--D 32768] [--memory-limit 6GB]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import warnings

try:  # python -m benchmarks.bench_pcg_memory
    from benchmarks._validity import add_load_arguments, script_end, script_start
    from benchmarks.bench_fit_2m import PeakRSS, fmt_mb, synthetic_dask
except ImportError:  # python benchmarks/bench_pcg_memory.py
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]
    from bench_fit_2m import PeakRSS, fmt_mb, synthetic_dask


def run(args, workdir) -> dict:
    from dkrr import RandomFeatureRidge
    from dkrr.cluster import local_cluster
    from dkrr.io import open_dataset, write_dataset
    from dkrr.linalg._memory import ridge_memory_estimate
    from dkrr.linalg._pcg import pcg_memory_estimate

    store = os.path.join(workdir, "pcg_memory.zarr")
    res = {}
    with local_cluster(n_workers=args.workers, threads_per_worker=args.threads, processes=True,
                       memory_limit=args.memory_limit, dashboard=False, quiet=True) as client:
        X, y = synthetic_dask(args.n, args.d, args.chunk_rows, args.seed)
        write_dataset(X, y, store, overwrite=True)
        ds = open_dataset(store)
        kw = {"method": args.method, "gamma": 1.0 / (2 * args.d), "alpha": args.alpha, "random_state": args.seed}
        # warm-up (imports, kernels) on a tiny problem, not measured
        RandomFeatureRidge(n_components=64, solver="pcg", **kw).fit(ds.X[: args.chunk_rows], ds.y[: args.chunk_rows])
        shape = dict(kernel="gaussian", method=args.method, n_features_in=args.d, n_components=args.D, n_targets=1,
                     split_every=None, block_rows=args.chunk_rows, n_blocks=len(ds.X.chunks[0]),
                     max_block_bytes=64 * 2**20)
        est_pcg = pcg_memory_estimate(rank=args.rank, **shape)
        est_gram = ridge_memory_estimate(**shape)
        est = RandomFeatureRidge(n_components=args.D, solver=args.solver, pcg_rank=args.rank, tol=args.tol,
                                 max_iter=args.max_iter, **kw)
        with PeakRSS(client) as mon:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est.fit(ds.X, ds.y)
            res["fit_s"] = time.perf_counter() - t0
        res["memory"] = mon.result
        res["r2_first_chunk"] = float(est.score(ds.X[: args.chunk_rows], ds.y[: args.chunk_rows]))
    info = getattr(est, "solver_info_", {})
    used = est_pcg if est.solver_ == "pcg" else est_gram  # the estimate of the path that ran
    res.update(solver=est.solver_, n_iter=info.get("n_iter"), passes=info.get("passes"), persisted=info.get("persisted"),
               p=est.n_output_features_, estimate_worker=used.worker, estimate_client=used.client,
               estimate_block_task=used.block_task, pcg_worker=est_pcg.worker, pcg_client=est_pcg.client,
               gram_worker=est_gram.worker, gram_client=est_gram.client)
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--D", type=int, default=32_768)
    ap.add_argument("--method", default="sorf")
    ap.add_argument("--solver", default="auto", choices=["auto", "pcg"])
    ap.add_argument("--rank", type=int, default=256)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--max-iter", type=int, default=200)
    ap.add_argument("--chunk-rows", type=int, default=5_000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--memory-limit", default="6GB")
    ap.add_argument("--dir", default=None, help="where to write the store (default: a temp dir in /tmp)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    run_start = script_start(args)
    workdir = args.dir or tempfile.mkdtemp(prefix="dkrr_pcg_mem_", dir="/tmp")
    print(f"n = {args.n} x d = {args.d} float32 in chunks of {args.chunk_rows} rows; D = {args.D} "
          f"({args.method}, gaussian), solver={args.solver!r}, pcg_rank = {args.rank}, tol = {args.tol}; "
          f"LocalCluster {args.workers} worker(s) x {args.threads} thread(s), memory_limit={args.memory_limit}")
    try:
        res = run(args, workdir)
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"solver used: {res['solver']} (estimates: Gram path {fmt_mb(res['gram_worker'])} a worker and "
          f"{fmt_mb(res['gram_client'])} the client, PCG {fmt_mb(res['pcg_worker'])} and {fmt_mb(res['pcg_client'])}); "
          f"p = {res['p']}; {res['n_iter']} CG iterations, "
          f"{res['passes']} passes, X kept in worker memory: {res['persisted']}; fit {res['fit_s']:.1f} s; "
          f"R^2 on the first chunk {res['r2_first_chunk']:.3f}")
    for name, v in res["memory"].items():
        what = "client+scheduler" if name == "client" else f"worker {name}"
        estimate = res["estimate_client"] if name == "client" else res["estimate_worker"]
        print(f"  {what:>32s}: peak {fmt_mb(v['peak']):>10s}, before the fit {fmt_mb(v['baseline']):>9s}, "
              f"fit's own {fmt_mb(v['peak'] - v['baseline']):>10s}; estimate {fmt_mb(estimate):>10s} "
              f"(peak / estimate {v['peak'] / estimate:.2f}, fit's own / estimate "
              f"{(v['peak'] - v['baseline']) / estimate:.2f})")
    res["validity"] = script_end(run_start)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "result": res}, f, indent=1, default=float)
    return res


if __name__ == "__main__":
    main()
