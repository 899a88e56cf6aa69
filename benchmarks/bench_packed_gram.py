"""The Gram accumulation of a block task: full ``G += Z.T @ Z`` against the packed panels.

Before the packed Gram (issue 16, item 1) each sub-block of features ``Z`` was added into a
full ``p x p`` float64 ``G`` with numpy's ``G += Z.T @ Z`` (SYRK into a ``p x p``
temporary, mirrored, then added). Now it is added into the packed upper triangle
(``dkrr.linalg._packed.add_packed_gram``: for each group of 1,024 rows one SYRK on its
diagonal block and GEMMs of up to 2,048 columns right of it, each added into the panels
it covers from one reused work buffer). This script times both on
the sub-blocks dkrr uses (``max_block_bytes`` = 64 MiB of features: 8,192 / 4,096 / 1,024
rows of float64 at p = 1,024 / 2,048 / 8,192; float32 sub-blocks are at most 4,096 rows,
their products added into the float64 sums as ``precision="float32"`` does), at one BLAS
thread (a worker thread), alternating the two in every repetition, and prints the median
times and their ratio, measured in the same run::

    .venv/bin/python benchmarks/bench_packed_gram.py [--p 1024 2048 8192] [--repeat 5]
        [--panel-rows 256] [--allow-load]

``--panel-rows 64 128 256`` compares panel heights (the choice of ``PANEL_ROWS``);
``--per-panel 256`` adds the simpler kernel of one SYRK and one GEMM per panel of 256
rows (against the products of ``GROUP_ROWS x GROUP_COLS`` that dkrr groups them into).
``--direct`` adds, for float64, the block task's in-place DSYRK into a ``p x p``
accumulator whose upper triangle goes into the panels at the fold's end
(``dkrr.linalg._packed.PackedGramSum`` in direct mode) and the bare in-place DSYRK of
scipy (``beta = 1``, what the fit's "bare Gram" baselines do); for float32, the block
task's SSYRK of each sub-block into a float32 ``p x p`` matrix whose upper triangle is
added into the panels at once, and the bare SSYRK (``beta = 0``, the sums' rows of a
bare float32 Gram); ``--sub-blocks N`` times
N sub-blocks a repetition (one fold's rows: the direct kernel adds into the panels once),
16 being a block of 65,536 rows at p = 2,048.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start
except ImportError:  # run as a script from benchmarks/
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]


def full_gram(G, Z, work=None):
    """The accumulation before the packed Gram: ``G += Z.T @ Z`` into a full ``p x p`` G."""
    G += Z.T @ Z


def per_panel_gram(G, Z, work, nb):
    """The packed Gram by one SYRK (diagonal block) and one GEMM (the rest) per panel."""
    from dkrr.linalg._packed import panels

    p = Z.shape[1]
    for a, b, offset in panels(p, nb):
        P = G[offset : offset + (b - a) * (p - a)].reshape(b - a, p - a)
        r = b - a
        tmp = work[: r * r].reshape(r, r)
        np.matmul(Z[:, a:b].T, Z[:, a:b], out=tmp)
        P[:, :r] += tmp
        if b < p:
            tmp = work[: r * (p - b)].reshape(r, p - b)
            np.matmul(Z[:, a:b].T, Z[:, b:], out=tmp)
            P[:, r:] += tmp


def bare_dsyrk(G, Z, work=None):
    """scipy's in-place DSYRK, ``beta = 1``, into the upper triangle of the C-ordered ``G``
    (its ``lower`` in column-major terms); the lower triangle is mirrored before comparing."""
    from scipy.linalg.blas import dsyrk

    dsyrk(1.0, Z.T, beta=1.0, c=G.T, trans=0, lower=1, overwrite_c=1)


def bare_ssyrk(G, Z, work=None):
    """SSYRK, ``beta = 0``, into the upper triangle of the float32 ``G`` (each sub-block's
    float32 product, as a float32 block sums it; not added into float64 sums)."""
    from dkrr.linalg._packed import syrk_upper

    syrk_upper(G, Z, 0.0)


def main(argv=None):
    from dkrr.linalg._packed import (
        PANEL_ROWS,
        PackedGramSum,
        add_packed_gram,
        packed_length,
        unpack_gram,
        work_length,
    )
    from dkrr.linalg._precision import sub_block_rows

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--p", type=int, nargs="+", default=[1024, 2048, 8192], help="feature columns")
    ap.add_argument("--precision", nargs="+", default=["float64", "float32"], choices=["float64", "float32"])
    ap.add_argument("--panel-rows", type=int, nargs="+", default=[PANEL_ROWS])
    ap.add_argument("--per-panel", type=int, nargs="*", default=[], help="panel rows of the per-panel kernel")
    ap.add_argument("--direct", action="store_true", help="the direct kernels too (float64: in-place DSYRK; "
                    "float32: SSYRK of each sub-block) and the bare SYRK")
    ap.add_argument("--sub-blocks", type=int, default=1, help="sub-blocks a repetition (one fold's)")
    ap.add_argument("--max-block-bytes", type=int, default=64 * 2**20)
    ap.add_argument("--repeat", type=int, default=5)
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    start = script_start(args)
    print(f"one BLAS thread; median of {args.repeat} alternating repetitions after a warm-up; "
          "ratio = packed time / full time (below 1: the packed Gram is faster)")
    rows_out = []
    for p in args.p:
        for precision in args.precision:
            rows = sub_block_rows(10**9, p, args.max_block_bytes, precision)
            Z = np.random.default_rng(0).standard_normal((rows, p)).astype(precision)
            kernels = {"full": (full_gram, np.zeros((p, p)), None)}
            finish = {}
            if args.direct:
                if precision == "float64":
                    kernels["bare dsyrk"] = (bare_dsyrk, np.zeros((p, p)), None)
                else:
                    kernels["bare ssyrk"] = (bare_ssyrk, np.zeros((p, p), np.float32), None)
                Gd = np.zeros(packed_length(p))
                acc = PackedGramSum(Gd[None], p, np.dtype(precision), direct=True)
                kernels[f"direct nb={PANEL_ROWS}"] = (lambda G, Z, w, acc=acc: acc.add(0, Z), Gd, None)
                finish[f"direct nb={PANEL_ROWS}"] = acc.close
            for nb in args.panel_rows:
                work = np.empty(work_length(p, nb), dtype=Z.dtype)
                kernels[f"packed nb={nb}"] = (
                    lambda G, Z, w, nb=nb: add_packed_gram(G, Z, w, nb=nb),
                    np.zeros(packed_length(p, nb)), work)
            for nb in args.per_panel:
                kernels[f"per-panel nb={nb}"] = (
                    lambda G, Z, w, nb=nb: per_panel_gram(G, Z, w, nb),
                    np.zeros(packed_length(p, nb)), np.empty(min(nb, p) * p, dtype=Z.dtype))
            times = {name: [] for name in kernels}
            with threadpool_limits(1):
                for rep in range(args.repeat + 1):
                    for name, (fn, G, work) in kernels.items():
                        t0 = time.perf_counter()
                        for _ in range(args.sub_blocks):
                            fn(G, Z, work)
                        if name in finish:
                            finish[name]()
                        if rep:  # the first round is the warm-up
                            times[name].append(time.perf_counter() - t0)
            full = kernels["full"][1]
            t_full = float(np.median(times["full"]))
            flops = args.sub_blocks * rows * p * p  # n p^2 (what SYRK does)
            line = [f"p={p:5d} {precision} {args.sub_blocks} sub-block(s) of {rows:5d} rows: full {t_full:.3f} s "
                    f"({flops / t_full / 1e9:.0f} GFLOP/s)"]
            for name, (_, G, _) in kernels.items():
                if name == "full":
                    continue
                if name.startswith("bare"):
                    upper = np.triu(G)
                    G = upper + np.triu(upper, 1).T
                    nb = 0
                    # the bare SSYRK (beta = 0) holds one sub-block's product: against the
                    # full sum of as many as each kernel made, divided by that number
                    ref = full if name == "bare dsyrk" else full / ((args.repeat + 1) * args.sub_blocks)
                    err = float(np.abs(G - ref).max() / np.abs(ref).max())
                else:
                    nb = int(name.split("=")[1])
                    err = float(np.abs(unpack_gram(G[None], p, nb)[0] - full).max() / np.abs(full).max())
                t = float(np.median(times[name]))
                line.append(f"{name} {t:.3f} s, ratio {t / t_full:.2f} (max rel diff {err:.0e})")
                rows_out.append((p, precision, rows, nb, t_full, t, t / t_full))
            print("; ".join(line), flush=True)
    script_end(start)
    return rows_out


if __name__ == "__main__":
    main()
