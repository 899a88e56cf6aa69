"""The Gram accumulation ``G += Z^T Z`` of a block task: numpy against scipy's ``dsyrk``.

``block_statistics`` accumulated each sub-block's Gram with numpy's ``G += Z.T @ Z``
(numpy calls BLAS ``syrk`` for a transposed buffer times itself) before the Gram was
packed; its products are still numpy matmuls (``dkrr/linalg/_packed.py``). scipy's
``scipy.linalg.blas.dsyrk`` does the same in place without the p x p temporary but holds
the GIL, so two block tasks of the threaded scheduler cannot overlap. This script measures
both, in one thread at one BLAS thread (a distributed worker) and in two Python threads at
one BLAS thread each (the threaded scheduler on 2 cores), and prints the ratios::

    python benchmarks/bench_gram.py [--rows 4096] [--p 2048] [--repeat 5]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import time

import numpy as np
from scipy.linalg import blas
from threadpoolctl import threadpool_limits


def _median(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def numpy_gram(G, Z):
    G += Z.T @ Z


def scipy_dsyrk(G, Z):
    blas.dsyrk(1.0, Z.T, beta=1.0, c=G.T, trans=0, lower=0, overwrite_c=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096, help="rows of a sub-block (dkrr's default at p=2048)")
    ap.add_argument("--p", type=int, default=2048, help="feature columns")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    Z = np.random.default_rng(0).standard_normal((args.rows, args.p))
    flops = args.rows * args.p**2  # counting n p^2 (what syrk does)
    kernels = {"numpy G += Z.T @ Z": numpy_gram, "scipy dsyrk (in place)": scipy_dsyrk}
    res = {}
    with threadpool_limits(1):
        for name, fn in kernels.items():
            G = np.zeros((args.p, args.p))
            fn(G, Z)  # warm-up
            one = _median(lambda: fn(G, Z), args.repeat)
            Gs = [np.zeros((args.p, args.p)) for _ in range(2)]
            with cf.ThreadPoolExecutor(2) as ex:
                two = _median(lambda: list(ex.map(lambda i: fn(Gs[i], Z), range(2))), args.repeat)
            res[name] = (one, two)
            print(f"{name:>24}: 1 thread {one:.3f} s ({flops / one / 1e9:.0f} GFLOP/s n p^2); "
                  f"2 Python threads {two:.3f} s ({2 * flops / two / 1e9:.0f} GFLOP/s, "
                  f"{2 * one / two:.2f}x one thread)")
    (n1, n2), (s1, s2) = res["numpy G += Z.T @ Z"], res["scipy dsyrk (in place)"]
    print(f"numpy / scipy time: 1 thread {n1 / s1:.2f}, 2 threads {n2 / s2:.2f}")


if __name__ == "__main__":
    main()
