"""Fit time on dask input of many small row chunks: the measurement behind
``MERGE_ABOVE_BLOCKS`` (``dkrr/linalg/_blocks.py``).

The same in-memory rows, given as a dask array of ``--chunk``-row chunks, are fitted
three ways on dask's threaded scheduler, ``--repeats`` times alternating the order,
medians (min, max):

* **as given**: dkrr joins the small chunks into blocks of at least ``MIN_BLOCK_ROWS``
  rows (:func:`dkrr.linalg._blocks.merged_row_chunks`);
* **kept** (the baseline, the behaviour before the merge): ``chunk_rows=--chunk``, which
  dkrr honours as given;
* **rechunked by the user** to 65,536-row chunks.

The precision is the default (a float32 statistics pass, then the refinement passes: three
passes over the rows). Ratio = median / the baseline's median, measured in the same run.

Run: ``python -m benchmarks.bench_small_chunks`` (a few minutes; ``--allow-load`` on a busy
machine: the report then says NOT FOR PUBLICATION).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time

import numpy as np

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start, verdict_line, write_report
except ImportError:  # run as a script from benchmarks/
    from _validity import (  # type: ignore[no-redef]
        add_load_arguments, script_end, script_start, verdict_line, write_report)

__all__ = ["main"]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_small_chunks", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--d", type=int, default=4, help="input columns")
    ap.add_argument("--chunk", type=int, default=100, help="rows per chunk of the dask input")
    ap.add_argument("--n-components", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/small_chunks")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    run_start = script_start(args)

    import dask
    import dask.array as da

    from dkrr import RandomFeatureRidge
    from dkrr.linalg._blocks import MERGE_ABOVE_BLOCKS, MIN_BLOCK_ROWS, merged_row_chunks

    rng = np.random.default_rng(0)
    X = rng.standard_normal((args.rows, args.d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(args.rows)
    Xd, yd = da.from_array(X, chunks=(args.chunk, args.d)), da.from_array(y, chunks=args.chunk)
    merged = merged_row_chunks(Xd.chunks[0], args.d)
    header = [
        "command: python -m benchmarks.bench_small_chunks " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        f"{args.rows:,} rows x {args.d} float64 columns as a dask array of {Xd.numblocks[0]:,} chunks of {args.chunk} "
        f"rows (merged by dkrr: {len(merged) if merged else Xd.numblocks[0]:,} blocks; MIN_BLOCK_ROWS {MIN_BLOCK_ROWS}, "
        f"MERGE_ABOVE_BLOCKS {MERGE_ABOVE_BLOCKS}); RFF D = {args.n_components}, alpha 1, the default precision; "
        f"dask's threaded scheduler, {os.cpu_count()} cores",
        f"{args.repeats} repeats alternating the order; ratio = median / the kept chunks' median", ""]
    print("\n".join(header), flush=True)

    def fit(Xa, ya, **kw):
        return lambda: RandomFeatureRidge(method="rff", n_components=args.n_components, gamma=0.2, alpha=1.0,
                                          random_state=0, **kw).fit(Xa, ya)

    cases = {
        "as given (merged by dkrr)": fit(Xd, yd),
        f"chunk_rows={args.chunk} (kept: before the merge)": fit(Xd, yd, chunk_rows=args.chunk),
        "rechunked by the user to 65,536 rows": fit(Xd.rechunk({0: 65_536}), yd.rechunk(65_536)),
    }
    times = {name: [] for name in cases}
    coefs = {}
    with dask.config.set(scheduler="threads"):
        fit(X[:10_000], y[:10_000])()  # warm-up: the compiled kernels loaded
        names = list(cases)
        for r in range(args.repeats):
            for name in (names if r % 2 == 0 else names[::-1]):
                t0 = time.perf_counter()
                coefs[name] = cases[name]().coef_
                times[name].append(time.perf_counter() - t0)
    base_name = names[1]
    base = float(np.median(times[base_name]))
    rows, table = [], {}
    for name in names:
        med = float(np.median(times[name]))
        diff = float(np.abs(coefs[name] - coefs[base_name]).max() / np.abs(coefs[base_name]).max())
        table[name] = {"median_s": med, "min_s": min(times[name]), "max_s": max(times[name]), "ratio": med / base,
                       "coef_rel_diff": diff}
        rows.append(f"{name:48s} {med:8.2f} s ({min(times[name]):.2f}, {max(times[name]):.2f})  "
                    f"{med / base:.3f}x   coefficients within {diff:.1e} of the kept chunks' fit")
        print(rows[-1], flush=True)
    validity = script_end(run_start)
    lines = header + rows + ["", f"validity: {json.dumps(validity, default=str)}", verdict_line(validity)]
    write_report(args.out, lines, {"args": vars(args), "fits": table, "validity": validity})
    return table


if __name__ == "__main__":
    main()
