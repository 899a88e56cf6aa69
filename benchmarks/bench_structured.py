"""Structured (circulant family) projections: FFT path against a dense GEMM.

The measurement behind ``PModelProjection.use_dense`` (``dkrr/features/_pmodel.py``): for
each method and shape, the time of the FFT path and of ``X @ W.T`` with the dense ``W``
regenerated from the stored numbers, in ns per row and output column, one thread (BLAS
and FFT), and the path the rule picks::

    .venv/bin/python benchmarks/bench_structured.py [--rows 4096] [--repeat 3] [--float32]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

#: (method, d' = padded input width, D) of the table in benchmarks/README.md
SHAPES = [
    ("circulant", 128, 512), ("circulant", 256, 1024), ("circulant", 512, 512),
    ("circulant", 512, 2048), ("circulant", 1024, 1024), ("circulant", 1024, 4096),
    ("toeplitz_like", 512, 2048), ("toeplitz_like", 1024, 1024), ("toeplitz_like", 1024, 4096),
    ("toeplitz", 1024, 4096), ("hankel", 1024, 4096), ("skew_circulant", 1024, 4096),
]


def _best(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--float32", action="store_true")
    args = ap.parse_args(argv)

    from dkrr.features import PROJECTIONS

    dtype = np.float32 if args.float32 else np.float64
    rng = np.random.default_rng(0)
    print(f"{'method':15s} {'d_pad':>6s} {'D':>6s} {'fft':>8s} {'dense':>8s}  rule   "
          f"(ns per row and output column, {np.dtype(dtype).name}, {args.rows} rows, 1 thread)")
    with threadpool_limits(1):
        for method, dp, D in SHAPES:
            cls = PROJECTIONS[method]
            proj = cls.generate(dp, D, 1.0 / np.sqrt(dp), rng, **cls.options)
            X = rng.standard_normal((args.rows, dp)).astype(dtype)
            W = proj.matrix().astype(dtype)
            proj._project_fast(X[:16])  # warm-up: spectra cached on the instance
            t_fft = _best(lambda: proj._project_fast(X), args.repeat)
            t_dense = _best(lambda: X @ W.T, args.repeat)
            scale = 1e9 / (args.rows * D)
            rule = "dense" if proj.use_dense() else "fft"
            print(f"{method:15s} {dp:6d} {D:6d} {t_fft * scale:8.1f} {t_dense * scale:8.1f}  {rule}", flush=True)


if __name__ == "__main__":
    main()
