"""Throughput and peak memory of ``dkrr ingest`` on a large numeric CSV.

Writes a CSV of ``--size`` bytes (``--columns`` numeric columns, the last the target,
values as ``%.6g``; a 64 MiB block of distinct random rows written again and again, so
that generating a gigabyte takes seconds) in a temporary folder, ingests it with
``dkrr.io.ingest`` (``--repeats`` times into a fresh store), and prints the wall time,
the throughput in MB/s (10^6 bytes of CSV per second) and the process's peak RSS
(``VmHWM``, reset before each run, with a polling cross-check: ``bench_fit_2m.PeakRSS``)
above its level before the run. The store is checked against the file (row count, the
first and last rows read by numpy). ``--blocksize`` larger than the file gives the
one-pass conversion (no parallel segments); ``--workers`` sets the threads (dask's
``num_workers``). The temporary folder is removed at the end::

    .venv/bin/python -m benchmarks.bench_ingest [--size 1GB] [--columns 29] [--repeats 3]
        [--workers N] [--blocksize 64MiB] [--chunk-rows 65536] [--allow-load]

Issue 24's target: at least 150 MB/s for a 1 GB CSV on the 2-core machine, memory
bounded by the chunk size (the hand-written parser before it: 36 MB/s).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start
    from benchmarks.bench_fit_2m import PeakRSS
except ImportError:  # run as a script from benchmarks/
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]
    from bench_fit_2m import PeakRSS  # type: ignore[no-redef]

_BLOCK = 64 * 2**20


def write_csv(path: Path, size: int, columns: int, seed: int) -> int:
    """A numeric CSV of about `size` bytes with a header; returns its number of rows."""
    rng = np.random.default_rng(seed)
    rows = max(1, min(_BLOCK, size) // (10 * columns))
    X = rng.standard_normal((rows, columns - 1))
    y = np.sin(X[:, 0]) + np.cos(X[:, 1]) * X[:, 2 % (columns - 1)]
    text = io.StringIO()
    np.savetxt(text, np.column_stack([X, y]), fmt="%.6g", delimiter=",")
    block = text.getvalue().encode()
    header = (",".join(f"x{j}" for j in range(columns - 1)) + ",y\n").encode()
    per_block = block.count(b"\n")
    n = 0
    with open(path, "wb") as fh:
        fh.write(header)
        written = len(header)
        while written < size:
            part = block if written + len(block) <= size else block[: block.rfind(b"\n", 0, size - written) + 1]
            if not part:
                break
            fh.write(part)
            written += len(part)
            n += per_block if part is block else part.count(b"\n")
    return n


def main(argv=None) -> dict:
    import dask
    from dask.utils import format_bytes, parse_bytes

    import dkrr
    from dkrr.io import ingest, open_dataset

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1GB", help="CSV size (default 1GB)")
    ap.add_argument("--columns", type=int, default=29, help="columns, the last the target (default 29)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None, help="threads (default: one per core)")
    ap.add_argument("--blocksize", default="64MiB")
    ap.add_argument("--chunk-rows", type=int, default=65536)
    ap.add_argument("--seed", type=int, default=0)
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    start = script_start(args)
    print(f"dkrr imported from {dkrr.__file__}")
    size = parse_bytes(args.size)
    tmp = Path(tempfile.mkdtemp(prefix="dkrr-bench-ingest-"))
    out: dict = {"args": vars(args)}
    try:
        src = tmp / "data.csv"
        t0 = time.perf_counter()
        n = write_csv(src, size, args.columns, args.seed)
        nbytes = src.stat().st_size
        print(f"wrote {nbytes / 1e6:.0f} MB of CSV ({n:,} rows x {args.columns} columns) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        config = {} if args.workers is None else {"num_workers": args.workers}
        times, peaks = [], []
        for k in range(args.repeats):
            store = tmp / f"data-{k}.zarr"
            with dask.config.set(config), PeakRSS(None, interval=0.02) as mon:
                t0 = time.perf_counter()
                summary = ingest(src, store, target="y", chunk_rows=args.chunk_rows,
                                 blocksize=args.blocksize)
                seconds = time.perf_counter() - t0
            rss = mon.result["client"]
            times.append(seconds)
            peaks.append(rss["peak"] - rss["baseline"])
            print(f"run {k + 1}: {seconds:.2f} s, {nbytes / 1e6 / seconds:.0f} MB/s; peak RSS "
                  f"{format_bytes(rss['peak'])} ({format_bytes(rss['baseline'])} before, "
                  f"+{format_bytes(rss['peak'] - rss['baseline'])})", flush=True)
            if summary.n_rows != n:
                raise AssertionError(f"{summary.n_rows} rows ingested, the file has {n}")
            ds = open_dataset(store)
            first = np.loadtxt(src, delimiter=",", skiprows=1, max_rows=3)
            np.testing.assert_array_equal(ds.X[:3].compute(), first[:, :-1].astype(np.float32))
            np.testing.assert_array_equal(ds.y[:3].compute(), first[:, -1])
            chunk = ds.X.chunks[0][0]
            shutil.rmtree(store)
        med = statistics.median(times)
        out.update(bytes=nbytes, rows=n, seconds=times, mb_per_s=nbytes / 1e6 / med,
                   peak_rss_rise=max(peaks), chunk_rows=chunk,
                   chunk_bytes=chunk * (args.columns - 1) * 4, workers=args.workers or os.cpu_count())
        print(f"ingest of {nbytes / 1e6:.0f} MB: median {med:.2f} s over {len(times)} runs = "
              f"{out['mb_per_s']:.0f} MB/s (target >= 150 MB/s); largest RSS rise "
              f"{format_bytes(max(peaks))} with chunks of {chunk:,} rows "
              f"({format_bytes(out['chunk_bytes'])} of X)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out["validity"] = script_end(start)
    return out


if __name__ == "__main__":
    main()
