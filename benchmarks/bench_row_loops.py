"""dkrr's compiled row loops against the BLAS products they replaced, in the same run.

Two tables, each timed in one process with BLAS at one thread (a worker's), ``--repeats``
times alternating which goes first, medians (min, max):

* **float32 thin products** (``dkrr.linalg._precision._cross64`` with the column sums) on
  one ``--cross-rows`` x p float32 sub-block of features, for every p of ``--sizes`` and
  every target count of ``--targets``: the compiled row loop
  (:func:`dkrr.linalg._cross_numba.cross_rows`, dkrr from ``CROSS_ROWS_MAX_TARGETS``
  targets down) against the widened slices and a float64 GEMM (the baseline: the loop
  switched off). Ratio loop / slices; the largest relative difference of the products.
* **refinement passes** (``dkrr.linalg._refine._refine_weighted_block``) over ``--rows``
  rows of gaussian RFF features (8 input columns, one target), the first pass (with the
  linear statistics) and a CG pass: the compiled row loop
  (:func:`dkrr.linalg._refine_numba.refine_rows`) against BLAS's matrix-vector products
  (the baseline: ``REFINE_ROWS_MAX_COLUMNS = 0``). Ratio loop / BLAS, the features
  included; the largest relative difference of ``Z^T Z B``.

Run: ``python -m benchmarks.bench_row_loops`` (about a minute; add ``--allow-load`` on a
busy machine: the report then says NOT FOR PUBLICATION).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

import numpy as np

try:
    from benchmarks._common import check_even_sizes
    from benchmarks._validity import add_load_arguments, script_end, script_start, verdict_line, write_report
except ImportError:  # run as a script from benchmarks/
    from _common import check_even_sizes  # type: ignore[no-redef]
    from _validity import (  # type: ignore[no-redef]
        add_load_arguments, script_end, script_start, verdict_line, write_report)

__all__ = ["main"]


def _alternating(fns: dict, repeats: int) -> tuple[dict, dict]:
    """Seconds of every ``fns[name]()`` over ``repeats`` rounds, the order reversed every
    other round (one warm-up call each first, which also compiles); the last results."""
    out = {name: fn() for name, fn in fns.items()}
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            out[name] = fns[name]()
            times[name].append(time.perf_counter() - t0)
    return times, out


def _rel(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(np.asarray(b)).max(), 1e-300))


def _cell(v) -> str:
    return f"{np.median(v) * 1e3:8.2f} ({min(v) * 1e3:.2f}, {max(v) * 1e3:.2f})"


def _compare(module, constant: str, call, baseline: str, repeats: int, diff):
    """``call()`` with the loop (``module.constant`` as dkrr sets it) against ``baseline``
    (the constant 0: the loop switched off, restored after every call): the times
    (:func:`_alternating`), the ratio of the medians loop / baseline and ``diff(loop's
    result, baseline's)``."""
    saved = getattr(module, constant)

    def run(limit):
        setattr(module, constant, limit)
        try:
            return call()
        finally:
            setattr(module, constant, saved)

    times, res = _alternating({"loop": lambda: run(saved), baseline: lambda: run(0)}, repeats)
    return times, float(np.median(times["loop"]) / np.median(times[baseline])), diff(res["loop"], res[baseline])


def _row_line(p, label, times, baseline, ratio, diff) -> str:
    return f"{p:>6} {label:>6} {_cell(times['loop']):>26} {_cell(times[baseline]):>26} {ratio:>6.2f} {diff:>13.2e}"


def cross_rows_table(sizes, targets, rows: int, repeats: int):
    from dkrr.linalg import _precision

    rng = np.random.default_rng(0)
    lines = [f"{'p':>6} {'t':>6} {'loop ms (min, max)':>26} {'slices ms (min, max)':>26} {'ratio':>6} "
             f"{'max rel diff':>13}"]
    out = []
    for p in sizes:
        Z = rng.standard_normal((rows, p)).astype(np.float32)
        cast = _precision.cast_buffer(p, "float32")
        for t in targets:
            Y = rng.standard_normal((rows, t))

            def call():
                sums = np.zeros(p)
                return _precision._cross64(Z, Y, cast, sums=sums), sums

            used = t <= _precision.CROSS_ROWS_MAX_TARGETS
            times, ratio, diff = _compare(_precision, "CROSS_ROWS_MAX_TARGETS", call, "slices", repeats,
                                          lambda a, b: max(_rel(a[0], b[0]), _rel(a[1], b[1])))
            out.append({"p": p, "targets": t, "loop_used": used, "times_s": times, "ratio": ratio,
                        "max_rel_diff": diff})
            lines.append(_row_line(p, t, times, "slices", ratio, diff) + ("" if used else "  (beyond the loop's targets)"))
            print(lines[-1], flush=True)
    return lines, out


def refine_table(sizes, rows: int, repeats: int):
    from dkrr.features import build_feature_map
    from dkrr.linalg import _refine

    rng = np.random.default_rng(1)
    X = rng.standard_normal((rows, 8))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(rows)
    lines = [f"{'p':>6} {'pass':>6} {'loop ms (min, max)':>26} {'BLAS ms (min, max)':>26} {'ratio':>6} "
             f"{'max rel diff':>13}"]
    out = []
    for p in sizes:
        fmap = build_feature_map(X[:512], kernel="gaussian", method="rff", n_components=p // 2, gamma=1 / 16,
                                 random_state=np.random.default_rng(0), options={})
        B = rng.standard_normal((p, 1))
        for linear, name in ((True, "first"), (False, "CG")):
            times, ratio, diff = _compare(
                _refine, "REFINE_ROWS_MAX_COLUMNS",
                lambda: _refine._refine_weighted_block(X, y, None, 0, 0, fmap, B, False, 2**26, linear)[1],
                "blas", repeats, _rel)
            out.append({"p": p, "pass": name, "times_s": times, "ratio": ratio, "max_rel_diff": diff})
            lines.append(_row_line(p, name, times, "blas", ratio, diff))
            print(lines[-1], flush=True)
    return lines, out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_row_loops", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048], help="feature columns p (even)")
    ap.add_argument("--targets", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--cross-rows", type=int, default=4096, help="rows of the float32 sub-block")
    ap.add_argument("--rows", type=int, default=25_600, help="rows of the refinement block")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default="benchmarks/results/row_loops")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    check_even_sizes(ap, args.sizes)
    run_start = script_start(args)
    from threadpoolctl import threadpool_limits

    header = ["command: python -m benchmarks.bench_row_loops " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
              f"BLAS 1 thread; {args.repeats} repeats alternating the order; ratio = median loop / median baseline", ""]
    print("\n".join(header), flush=True)
    with threadpool_limits(1):
        print(f"[1] float32 Z^T Y and column sums, {args.cross_rows} rows:", flush=True)
        cross_lines, cross = cross_rows_table(args.sizes, args.targets, args.cross_rows, args.repeats)
        print(f"[2] refinement passes over {args.rows} rows, one target, features included:", flush=True)
        refine_lines, refine = refine_table(args.sizes, args.rows, args.repeats)
    validity = script_end(run_start)
    lines = (header + [f"[1] float32 Z^T Y and column sums, {args.cross_rows} rows:"] + cross_lines
             + [f"[2] refinement passes over {args.rows} rows, one target, features included:"] + refine_lines
             + ["", f"validity: {json.dumps(validity, default=str)}", verdict_line(validity)])
    write_report(args.out, lines, {"args": vars(args), "cross": cross, "refine": refine, "validity": validity})
    return {"cross": cross, "refine": refine}


if __name__ == "__main__":
    main()
