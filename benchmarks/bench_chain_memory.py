"""Peak memory of a streamed pass and of a fit: chain-then-tree reduction against the plain tree.

The measurement behind making the chains the default of ``reduce_row_blocks`` (issue 16,
item 1; formula in ``dkrr.linalg._memory``). ``RandomFeatureRidge(cv=K)`` with RFF,
``p = 2 * n_components`` features, on in-memory rows cut into ``--blocks`` blocks, on
dask's threaded scheduler with ``--threads`` threads. Peaks are traced with
``tracemalloc`` (numpy's buffers included) after a warm-up fit; "tree" replaces the
default chain count by one chain per block, which is the tree of fan-in
``split_every`` over the block results that dkrr used before::

    .venv/bin/python benchmarks/bench_chain_memory.py [--p 2048] [--cv 5] [--blocks 8] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc

import dask
import numpy as np


def _peak(fn):
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        fn()
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, seconds


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, default=2048, help="feature columns (2 x n_components)")
    ap.add_argument("--cv", type=int, default=5)
    ap.add_argument("--d", type=int, default=16)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--block-rows", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    import dkrr.linalg._reduce as reduce_mod
    from dkrr import RandomFeatureRidge
    from dkrr.linalg import as_row_chunked
    from dkrr.linalg._memory import ridge_memory_estimate, statistics_bytes
    from dkrr.linalg._stats import streamed_statistics

    n = args.blocks * args.block_rows
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, args.d))
    y = np.sin(X).sum(axis=1)
    S = statistics_bytes(args.p, 1, args.cv)
    print(f"{n} rows x {args.d} columns in {args.blocks} blocks, p = {args.p}, cv = {args.cv}: one "
          f"statistics object S = {S / 2**20:.0f} MiB; threaded scheduler, {args.threads} threads, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    default = reduce_mod.default_n_chains
    est = RandomFeatureRidge(method="rff", n_components=args.p // 2, gamma=0.05, cv=args.cv,
                             chunk_rows=args.block_rows, random_state=0)
    fmap = est.fit(X[: args.block_rows], y[: args.block_rows]).feature_map_  # warm-up
    Xd, yd = as_row_chunked(X, y, chunk_rows=args.block_rows)
    with dask.config.set(scheduler="threads", num_workers=args.threads):
        for mode, chains in (("chains", args.threads), ("tree", args.blocks)):
            reduce_mod.default_n_chains = lambda c=chains: c
            try:
                pass_peak, pass_s = _peak(lambda: streamed_statistics(Xd, yd, fmap, n_folds=args.cv))
                fit_peak, fit_s = _peak(lambda: est.fit(X, y))
            finally:
                reduce_mod.default_n_chains = default
            e = ridge_memory_estimate(kernel="gaussian", method="rff", n_features_in=args.d,
                                      n_components=args.p // 2, n_folds=args.cv, block_rows=args.block_rows,
                                      n_blocks=args.blocks, n_chains=chains, threads=args.threads)
            print(f"{mode:6s} (C = {chains}): pass peak {pass_peak / 2**20:6.0f} MiB ({pass_peak / S:4.1f} S, "
                  f"{pass_s:5.1f} s), estimate per worker {e.worker / 2**20:6.0f} MiB ({e.worker / S:4.1f} S); "
                  f"fit peak {fit_peak / 2**20:6.0f} MiB ({fit_peak / S:4.1f} S, {fit_s:5.1f} s)", flush=True)


if __name__ == "__main__":
    main()
