"""Throughput of the fast Walsh-Hadamard transform backends (dkrr.features._hadamard).

Usage::

    .venv/bin/python benchmarks/bench_fwht.py            # FWHT backends, < 1 minute
    .venv/bin/python benchmarks/bench_fwht.py --paths    # also SORF/Fastfood dense vs FWHT

Prints, per dtype and backend, the time of one in-place transform of a
``rows x width`` array (best of ``--repeats``), the throughput in G additions/s
(``rows * width * log2(width)`` additions) and rows/s, and the ratio to the best
backend. Everything runs on one thread (fht_cpu with ``num_threads=1``, BLAS limited to
one thread for ``--paths``). The slow numpy butterfly runs on a slice of the rows.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _best_time(fn, buf, src, repeats):
    best = np.inf
    for _ in range(repeats):
        np.copyto(buf, src)
        t = time.perf_counter()
        fn(buf)
        best = min(best, time.perf_counter() - t)
    return best


def bench_backends(rows: int, width: int, repeats: int) -> None:
    from dkrr.features._hadamard import available_fwht_backends, fwht

    backends = available_fwht_backends()
    print(f"FWHT of {rows} x {width} (in place, one thread), best of {repeats}")
    print(f"{'dtype':8s} {'backend':8s} {'rows':>7s} {'time s':>8s} {'Gadd/s':>8s} {'Mrows/s':>8s} {'vs best':>8s}")
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        src = rng.standard_normal((rows, width)).astype(dtype)
        results = {}
        for backend in backends:
            m = rows if backend != "numpy" else max(1, rows // 8)
            buf = np.empty_like(src[:m])
            fwht(src[:4].copy(), backend=backend)  # warm-up (numba compile/cache load)
            t = _best_time(lambda a: fwht(a, backend=backend), buf, src[:m], repeats if backend != "numpy" else 1)
            adds = m * width * np.log2(width)
            results[backend] = (m, t, adds / t / 1e9, m / t / 1e6)
        best = max(r[2] for r in results.values())
        for backend, (m, t, gadd, mrows) in results.items():
            print(f"{np.dtype(dtype).name:8s} {backend:8s} {m:7d} {t:8.3f} {gadd:8.2f} {mrows:8.3f} {gadd / best:8.2f}")


def bench_paths(repeats: int) -> None:
    import threadpoolctl

    from dkrr.features._fastfood import FastfoodProjection
    from dkrr.features._orthogonal import SORFProjection

    print("\nSORF (k=3) / Fastfood: ns per row and output column, fast (FWHT) vs dense (GEMM)")
    rng = np.random.default_rng(0)
    with threadpoolctl.threadpool_limits(1):
        for dtype in (np.float64, np.float32):
            for d in (16, 64, 128, 256, 512):
                for D in (d // 4, d, 4 * d):
                    n = max(2048, 2**21 // D)
                    X = rng.standard_normal((n, d)).astype(dtype)
                    cells = []
                    for cls in (SORFProjection, FastfoodProjection):
                        p = cls.generate(d, D, 1.0, rng)
                        times = {}
                        for path in ("fast", "dense"):
                            p.project(X[:64], path=path)
                            best = np.inf
                            for _ in range(repeats):
                                t = time.perf_counter()
                                p.project(X, path=path)
                                best = min(best, time.perf_counter() - t)
                            times[path] = best / n / D * 1e9
                        rule = "dense" if p.use_dense() else "fast"
                        cells.append(f"{cls.method} fast {times['fast']:6.2f} dense {times['dense']:6.2f} rule {rule:5s}")
                    print(f"{np.dtype(dtype).name} d={d:4d} D={D:5d}  " + "  |  ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=65536)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paths", action="store_true", help="also time SORF/Fastfood paths")
    args = parser.parse_args()
    bench_backends(args.rows, args.width, args.repeats)
    if args.paths:
        bench_paths(args.repeats)


if __name__ == "__main__":
    main()
