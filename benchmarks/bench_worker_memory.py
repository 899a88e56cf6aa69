"""Peak memory of a Dask worker fitting ``RandomFeatureRidge(n_components=4096, cv=5)``.

The target of the packed Gram (issue 16, item 1): D = 4096 gaussian features (p = 8192)
with 5-fold cross-validation fit on a worker of 4 GB. One worker process with one thread
(``dkrr.cluster.local_cluster``, ``memory_limit`` 4 GB by default; distributed's default
spill / pause / terminate thresholds), ``--rows`` synthetic rows of ``--d`` columns in
dkrr's default row blocks, so one chain whose every step holds the running sum it receives
and its own statistics. The worker's peak RSS is the kernel's high-water mark (``VmHWM``,
reset before the run; polled with psutil as a cross-check: ``bench_fit_2m.PeakRSS``),
printed beside dkrr's estimate (``ridge_memory_estimate(...).worker``), the memory limit
and the worker's log lines about memory (spilling, pausing).

``--mode fit`` runs the whole fit (the client then unpacks the Grams and cross-validates;
its peak is printed too). ``--mode pass`` runs only the statistics pass, whose result is
reduced on the worker to one number so that the client holds nothing: it measures code
whose client side would not fit on a shared machine, such as the full-storage code before
the packed Gram, run from its checkout with ``PYTHONPATH`` (the script prints which dkrr
it imported)::

    .venv/bin/python benchmarks/bench_worker_memory.py [--mode fit|pass] [--n-components 4096]
        [--cv 5] [--rows 20000] [--d 8] [--memory-limit 4GB] [--allow-load]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start
    from benchmarks.bench_fit_2m import PeakRSS
except ImportError:  # run as a script from benchmarks/
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]
    from bench_fit_2m import PeakRSS  # type: ignore[no-redef]


def _g_checksum(stats) -> float:
    """What the pass mode sends to the client: one number of the reduced statistics."""
    return float(stats.G.sum() + stats.c.sum())


def _memory_log_lines(client) -> list[str]:
    lines = []
    for _, log in client.get_worker_logs().items():
        for _, msg in log:
            if any(w in msg.lower() for w in ("memory", "spill", "paus")):
                lines.append(msg.splitlines()[0][:160])
    return lines


def main(argv=None) -> dict:
    import dask
    from dask.utils import parse_bytes

    import dkrr
    from dkrr import RandomFeatureRidge, RandomFeatures
    from dkrr.cluster import local_cluster
    from dkrr.errors import MemoryBudgetError
    from dkrr.linalg import as_row_chunked, reduce_row_blocks
    from dkrr.linalg._memory import ridge_memory_estimate
    from dkrr.linalg._stats import block_statistics, combine_statistics

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["fit", "pass"], default="fit")
    ap.add_argument("--n-components", type=int, default=4096)
    ap.add_argument("--cv", type=int, default=5)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--d", type=int, default=8)
    ap.add_argument("--memory-limit", default="4GB")
    ap.add_argument("--seed", type=int, default=0)
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    start = script_start(args)
    print(f"dkrr imported from {dkrr.__file__}")
    rng = np.random.default_rng(args.seed)
    X = rng.standard_normal((args.rows, args.d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(args.rows)
    limit = parse_bytes(args.memory_limit)
    # float64: the published measurement's path (precision='auto' adds refinement passes)
    est = RandomFeatureRidge(n_components=args.n_components, cv=args.cv, random_state=args.seed,
                             precision="float64")
    out = {"mode": args.mode, "args": vars(args), "dkrr": dkrr.__file__}
    with local_cluster(n_workers=1, threads_per_worker=1, processes=True, memory_limit=args.memory_limit,
                       dashboard=False, quiet=True) as client:
        Xd, yd = as_row_chunked(X, y)
        e = ridge_memory_estimate(kernel="gaussian", method="orf", n_features_in=args.d,
                                  n_components=args.n_components, n_folds=args.cv, block_rows=max(Xd.chunks[0]),
                                  n_blocks=len(Xd.chunks[0]))
        print(f"{args.rows} rows x {args.d} columns in {len(Xd.chunks[0])} blocks of {max(Xd.chunks[0])} rows; "
              f"p = {2 * args.n_components}, cv = {args.cv}; one worker x 1 thread, memory_limit "
              f"{args.memory_limit} ({limit / 1e9:.2f} GB); estimate: statistics object {e.statistics / 1e9:.2f} GB, "
              f"worker {e.worker / 1e9:.2f} GB, client {e.client / 1e9:.2f} GB", flush=True)
        # a small fit first, so that the baseline includes the imports and BLAS of a task
        RandomFeatureRidge(n_components=64, cv=args.cv, random_state=args.seed, precision="float64").fit(X[:2000], y[:2000])
        t0 = time.perf_counter()
        with PeakRSS(client, interval=0.02) as mon:
            try:
                if args.mode == "fit":
                    est.fit(X, y)
                    out["alpha_"] = float(est.alpha_)
                else:
                    fmap = RandomFeatures(n_components=args.n_components, random_state=args.seed).fit(X).feature_map_
                    stats = reduce_row_blocks([Xd, yd], block_statistics, combine_statistics,
                                              constants=(fmap, args.cv, 1, 64 * 2**20, False), compute=False)
                    out["checksum"] = dask.compute(dask.delayed(_g_checksum)(stats))[0]
                out["status"] = "ok"
            except MemoryBudgetError as exc:
                out["status"] = f"refused before any compute: {exc}"
        out["seconds"] = time.perf_counter() - t0
        out["memory"] = mon.result
        out["memory_log"] = _memory_log_lines(client)
    out["estimate_worker"] = e.worker
    worker = [v for k, v in mon.result.items() if k != "client"][0]
    print(f"status: {out['status']} ({out['seconds']:.0f} s)")
    rise = worker["peak"] - worker["baseline"]
    print(f"worker peak RSS {worker['peak'] / 1e9:.2f} GB (VmHWM {worker['hwm']}, polled {worker['sampled'] / 1e9:.2f}"
          f" GB) against the memory limit {limit / 1e9:.2f} GB: {worker['baseline'] / 1e9:.2f} GB before the run "
          f"(interpreter, libraries, BLAS) + {rise / 1e9:.2f} GB during it, against dkrr's estimate "
          f"{e.worker / 1e9:.2f} GB; client peak RSS {mon.result['client']['peak'] / 1e9:.2f} GB")
    print(f"worker log lines about memory: {len(out['memory_log'])}")
    for line in out["memory_log"][:10]:
        print("   ", line)
    out["validity"] = script_end(start)
    return out


if __name__ == "__main__":
    main()
