"""Throughput of the cos/sin feature nonlinearity: numpy vs dkrr's numba kernel.

Measures G elements/s (elements of P; each produces one cos and one sin) of
``cos_sin(P, scale, out)`` on an ``n x D`` block (default 100,000 x 1024, the size of a
feature block in a streamed fit), for numpy float64/float32 and the compiled kernel.
The output buffer is allocated and touched once before timing, so page faults are not
counted. Takes well under a minute::

    python benchmarks/bench_trig.py [--n 100000] [--d 1024] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dkrr.features._trig import HAVE_NUMBA, cos_sin


def _best(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=1024, help="D, projections per row")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"block {args.n} x {args.d}, numba available: {HAVE_NUMBA}; best of {args.repeat}")
    print(f"{'dtype':8s} {'backend':8s} {'seconds':>8s} {'G elem/s':>9s}")
    for dtype in (np.float64, np.float32):
        P = rng.standard_normal((args.n, args.d), dtype=dtype)
        P *= dtype(3.0)
        out = np.ones((args.n, 2 * args.d), dtype=dtype)  # touch the pages
        cos_sin(P[:2], 0.5)  # compile / load the cached kernel
        for name, use_numba in (("numpy", False), ("numba", True)):
            if use_numba and not HAVE_NUMBA:
                continue
            t = _best(lambda: cos_sin(P, 0.5, out=out, use_numba=use_numba), args.repeat)
            print(f"{np.dtype(dtype).name:8s} {name:8s} {t:8.3f} {P.size / t / 1e9:9.3f}")
        del P, out


if __name__ == "__main__":
    main()
