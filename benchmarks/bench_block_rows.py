"""Fit time against rows per block: the measurement behind ``MIN_BLOCK_ROWS``.

A statistics task pays a fixed cost of a few passes over its p x p partial Gram
(allocation, accumulation, the combine) against ``rows x p^2`` flops for the Gram itself,
so blocks that are too small waste time. This script fits ``RandomFeatureRidge`` (RFF,
``p = 2 * n_components`` feature columns) on the same in-memory rows cut into blocks of
several sizes, on dask's threaded scheduler, and prints the median fit time of each::

    .venv/bin/python benchmarks/bench_block_rows.py [--rows 10000] [--p 2048] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time

import dask
import numpy as np


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--p", type=int, default=2048, help="feature columns (2 x n_components)")
    ap.add_argument("--d", type=int, default=16, help="input columns")
    ap.add_argument("--blocks", type=int, nargs="+", default=[1250, 2500, 5000, 10_000],
                    help="rows per block to compare")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    from dkrr import RandomFeatureRidge
    from dkrr.linalg._blocks import MIN_BLOCK_ROWS

    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.rows, args.d))
    y = np.sin(X).sum(axis=1)
    print(f"{args.rows} rows x {args.d} columns, p = {args.p} features, threaded scheduler, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}; MIN_BLOCK_ROWS = {MIN_BLOCK_ROWS}")
    with dask.config.set(scheduler="threads"):
        for rows in args.blocks:
            est = RandomFeatureRidge(method="rff", n_components=args.p // 2, gamma=0.05,
                                     chunk_rows=rows, random_state=0)
            est.fit(X[: min(rows, args.rows)], y[: min(rows, args.rows)])  # warm-up
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                est.fit(X, y)
                times.append(time.perf_counter() - t0)
            print(f"blocks of {rows:6d} rows ({-(-args.rows // rows):3d} blocks): "
                  f"median fit {np.median(times):.3f} s (min {min(times):.3f}, max {max(times):.3f})",
                  flush=True)


if __name__ == "__main__":
    main()
