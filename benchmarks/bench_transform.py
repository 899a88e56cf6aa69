"""Transform throughput of every random feature map, against RFF's dense matmul.

For d in {64, 256, 1024, 4096} with D = 4d frequencies (gaussian kernel, so 2D output
columns), float32 and float64, times ``RandomFeatures(method=m).transform(X)`` on an
``n x d`` block (n chosen so that the output is about 64 MiB, at least 256 rows) and
prints rows/s and the ratio to RFF (a dense ``X @ W.T`` then cos/sin) measured in the same
run. The map is drawn before timing (``fit``); the time is the median of ``--repeats``
transforms after one warm-up. BLAS and the FWHT kernel run on one thread: the layout of a
dask worker thread. ::

    python benchmarks/bench_transform.py [--d 64 256 1024 4096] [--repeats 3] [--methods ...]
        [--kernel linear --methods rff sorf rom rom:complex4 rom:unit_circle]

``--kernel`` picks the kernel (``linear``: the JLT sketch ``X W^T / sqrt(D)``); a method
``rom:<diagonal>`` is ``method="rom"`` with that ``rom_diagonal`` (complex ones need
``--kernel linear``; their output has 2D columns).

The structured maps store O(D) numbers and apply FWHTs (SORF, Fastfood) or FFTs
(circulant family) once d' (d padded to a power of two) passes the measured crossover;
below it they multiply by a dense W regenerated from those numbers (see
``dkrr/features/_orthogonal.py`` and ``_structured.py``), so at small d they cost what RFF
costs.
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from threadpoolctl import threadpool_limits

from dkrr import RandomFeatures
from dkrr.features import PROJECTIONS

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start
except ImportError:  # run as a script from benchmarks/
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]

OUTPUT_BYTES = 64 * 2**20


def _median_time(fn, repeats):
    fn()  # warm-up (numba compilation, FFT plans, page faults of the output)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def measure(d: int, method: str, dtype, repeats: int, seed: int = 0, kernel: str = "gaussian") -> tuple[int, float]:
    D = 4 * d
    rows = max(256, OUTPUT_BYTES // (2 * D * np.dtype(dtype).itemsize))
    X = np.random.default_rng(seed).standard_normal((rows, d)).astype(dtype)
    method, _, diagonal = method.partition(":")
    opts = {"rom_diagonal": diagonal} if diagonal else {}
    gamma = {"gamma": 1.0 / d} if kernel == "gaussian" else {}
    rf = RandomFeatures(kernel=kernel, method=method, n_components=D, random_state=seed, **gamma, **opts).fit(X)
    return rows, _median_time(lambda: rf.transform(X), repeats)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, nargs="+", default=[64, 256, 1024, 4096])
    ap.add_argument("--methods", nargs="+", default=list(PROJECTIONS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kernel", default="gaussian")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    run_start = script_start(args)
    methods = ["rff"] + [m for m in args.methods if m != "rff"]
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; BLAS and FWHT on 1 thread")
    print(f"{'d':>5s} {'D':>6s} {'dtype':8s} {'method':15s} {'rows':>6s} {'time s':>8s} {'rows/s':>10s} {'vs rff':>7s}")
    summary = []
    with threadpool_limits(1):
        for d in args.d:
            for dtype in (np.float32, np.float64):
                t_rff = None
                for m in methods:
                    rows, t = measure(d, m, dtype, args.repeats, kernel=args.kernel)
                    if m == "rff":
                        t_rff = t
                    speed = t_rff / t  # > 1: faster than RFF
                    summary.append((d, np.dtype(dtype).name, m, speed))
                    print(f"{d:5d} {4 * d:6d} {np.dtype(dtype).name:8s} {m:15s} {rows:6d} {t:8.4f} "
                          f"{rows / t:10.0f} {speed:6.2f}x", flush=True)
    print("\nspeed-up over RFF (RFF time / method time) at the largest d:")
    dmax = max(args.d)
    for name in ("float32", "float64"):
        row = ", ".join(f"{m} {s:.2f}x" for d, dt, m, s in summary if d == dmax and dt == name and m != "rff")
        print(f"  d={dmax} {name}: {row}")
    script_end(run_start)


if __name__ == "__main__":
    main()
