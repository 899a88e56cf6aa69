"""Out of core: write a Zarr store larger than the workers' total memory, fit from it, and
show that peak memory does not grow with the store.

For each store size (default 6 GB and 1.5 GB of float32 ``X``, a factor of 4 apart) on a
fresh ``LocalCluster`` (``--workers`` workers x 1 thread, processes, 127.0.0.1, each with
``memory_limit=--memory-limit``, default 1.5 GB, so the large store is twice the total
worker memory limit):

1. **ingest**: synthetic rows (X ~ N(0, I_d) float32, ``y = sin(x_0) + cos(x_1) x_2 +
   0.1 e``, block ``i`` drawn from ``default_rng([seed, i])`` on the worker that writes
   it) are written with :func:`dkrr.io.write_dataset` (Blosc-zstd chunks of
   ``--chunk-rows`` rows, written block by block by the workers, atomically renamed);
2. **fit**: :func:`dkrr.io.open_dataset` on the store and
   ``RandomFeatureRidge(method=--method, n_components=--D).fit(ds.X, ds.y)``: one
   streamed pass reading every chunk once.

During each step the peak RSS of each worker and of the client (which also hosts the
scheduler) is measured with the kernel's high-water mark (``VmHWM``, reset before the
step) and cross-checked by polling (see :class:`benchmarks.bench_fit_2m.PeakRSS`).
D is small (default 256) since this is about memory, not speed. The stores are written
under ``--dir`` (default a temporary folder in /tmp) and deleted at the end unless
``--keep``.

Run (about 4 minutes on 2 cores; ``--quick`` writes 600 MB and 150 MB stores)::

    python -m benchmarks.bench_out_of_core [--gb 6 1.5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time

import psutil

try:  # python -m benchmarks.bench_out_of_core
    from benchmarks._validity import add_load_arguments, script_end, script_start
    from benchmarks.bench_fit_2m import PeakRSS, fmt_mb, synthetic_dask
except ImportError:  # python benchmarks/bench_out_of_core.py
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]
    from bench_fit_2m import PeakRSS, fmt_mb, synthetic_dask


def _du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def run_size(args, gb: float, workdir: str) -> dict:
    from dkrr import RandomFeatureRidge
    from dkrr.cluster import local_cluster
    from dkrr.io import open_dataset, write_dataset

    n = int(gb * 1e9 / (4 * args.d))
    store = os.path.join(workdir, f"synthetic_{gb:g}GB.zarr")
    res = {"gb_target": gb, "n": n, "d": args.d, "x_bytes": n * args.d * 4, "store": store}
    with local_cluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                       memory_limit=args.memory_limit, dashboard=False, quiet=True) as client:
        # warm-up (imports, numba kernels) on a tiny in-memory problem, not measured
        Xw, yw = synthetic_dask(8192, args.d, 2048, args.seed + 1)
        RandomFeatureRidge(method=args.method, n_components=args.D, gamma=args.gamma,
                           random_state=0, precision="float64").fit(Xw, yw)
        X, y = synthetic_dask(n, args.d, args.chunk_rows, args.seed)
        with PeakRSS(client) as mon_w:
            t0 = time.perf_counter()
            write_dataset(X, y, store, overwrite=True)
            res["write_s"] = time.perf_counter() - t0
        res["store_bytes"] = _du(store)
        res["write_memory"] = mon_w.result
        ds = open_dataset(store)
        est = RandomFeatureRidge(method=args.method, n_components=args.D, gamma=args.gamma,
                                 alpha=args.alpha, random_state=args.seed,
                                 precision="float64")  # the published report's path
        with PeakRSS(client) as mon_f:
            t0 = time.perf_counter()
            est.fit(ds.X, ds.y)
            res["fit_s"] = time.perf_counter() - t0
        res["fit_memory"] = mon_f.result
        res["n_chunks"] = len(ds.X.chunks[0])
        # sanity: the model fits (R^2 on the first chunk, computed on the cluster)
        Xc, yc = ds.X[: args.chunk_rows], ds.y[: args.chunk_rows]
        res["r2_first_chunk"] = float(est.score(Xc, yc))
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)
    return res


def _row(step, r, mem):
    w = [v["peak"] for k, v in mem.items() if k != "client"]
    return (f"  {r['store_bytes'] / 1e9:6.2f} GB on disk  {r['n']:>11,} rows  {step:5s} "
            f"{r[step + '_s']:6.1f} s  worker peak RSS {', '.join(fmt_mb(x) for x in w)}  "
            f"client+scheduler {fmt_mb(mem['client']['peak'])}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, nargs="+", default=[6.0, 1.5],
                    help="sizes of X in GB (1e9 bytes, float32)")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--D", type=int, default=256)
    ap.add_argument("--method", default="sorf")
    ap.add_argument("--gamma", type=float, default=None, help="default 1/(2d)")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--chunk-rows", type=int, default=65536)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="1.5GB")
    ap.add_argument("--dir", default=None, help="where to write the stores (default: a temp dir in /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the stores")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="0.6 GB and 0.15 GB stores")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    run_start = script_start(args)
    if args.quick:
        args.gb = [0.6, 0.15]
    args.gamma = args.gamma or 1.0 / (2 * args.d)
    workdir = args.dir or tempfile.mkdtemp(prefix="dkrr_ooc_", dir="/tmp")
    os.makedirs(workdir, exist_ok=True)
    print("command: python -m benchmarks.bench_out_of_core " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])))
    free = shutil.disk_usage(workdir).free
    la = os.getloadavg()
    print(f"machine: {os.cpu_count()} cpus, {psutil.virtual_memory().total / 2**30:.1f} GiB RAM, "
          f"{free / 1e9:.0f} GB free in {workdir}; load average at start {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}")
    print(f"cluster: LocalCluster {args.workers} workers x 1 thread, memory_limit={args.memory_limit} each; "
          f"X float32 d={args.d}, chunks of {args.chunk_rows} rows ({args.chunk_rows * args.d * 4 / 2**20:.0f} MiB); "
          f"fit: method={args.method}, D={args.D} ({2 * args.D} feature columns), one pass, no cv")
    need = sum(args.gb) * 1.1e9
    if free < need:
        raise SystemExit(f"not enough disk space in {workdir}: {free / 1e9:.1f} GB free, need about {need / 1e9:.1f} GB")
    results = []
    try:
        for gb in args.gb:
            r = run_size(args, gb, workdir)
            results.append(r)
            print(f"\nstore {gb:g} GB of X ({r['n']:,} x {args.d} float32, {r['n_chunks']} chunks; "
                  f"{r['store_bytes'] / 1e9:.2f} GB on disk), R^2 on its first chunk {r['r2_first_chunk']:.3f}")
            print(f"  write ({r['write_s']:.1f} s):")
            for line in PeakRSS.lines_of(r["write_memory"]):
                print(line)
            print(f"  fit ({r['fit_s']:.1f} s, {r['n'] / r['fit_s'] / 1e6:.2f} M rows/s):")
            for line in PeakRSS.lines_of(r["fit_memory"]):
                print(line)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print("\nsummary (peak RSS; memory limit per worker "
          f"{args.memory_limit}, total {args.workers} x {args.memory_limit})")
    for r in results:
        print(_row("write", r, r["write_memory"]))
        print(_row("fit", r, r["fit_memory"]))
    if len(results) >= 2:
        big, small = max(results, key=lambda r: r["n"]), min(results, key=lambda r: r["n"])
        wb = max(v["peak"] for k, v in big["fit_memory"].items() if k != "client")
        ws = max(v["peak"] for k, v in small["fit_memory"].items() if k != "client")
        print(f"  fit: store ratio {big['store_bytes'] / small['store_bytes']:.2f}x, largest worker peak ratio "
              f"{wb / ws:.2f}x, client peak ratio "
              f"{big['fit_memory']['client']['peak'] / small['fit_memory']['client']['peak']:.2f}x")
    validity = script_end(run_start)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results, "validity": validity}, f, indent=1, default=float)
    return results


if __name__ == "__main__":
    main()
