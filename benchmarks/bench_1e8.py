"""The 10^8-row fit: a Zarr store of 10^8 x 8 float32 rows, SORF, 5-fold CV, 2 workers.

What it runs, one step after the other on a fresh ``LocalCluster`` (``--workers`` workers
x 1 thread, processes, 127.0.0.1):

1. **The store** (``--store``, kept for the next run; rebuilt when its recorded recipe
   differs): ``n`` rows of ``X ~ N(0, I_8)`` (float32) and
   ``y = sin(x_0) + 0.5 cos(x_1 + x_2) + 0.25 x_3 x_4 + noise * e`` (float32), generated
   block by block on the workers from ``numpy.random.default_rng([seed, block])`` and
   written by :func:`dkrr.io.write_dataset` (every chunk written, the manifest last).
2. **Fits** of :class:`dkrr.RandomFeatureRidge` (``method="sorf"``, ``n_components=D``,
   a fixed ``gamma``, ``cv=5`` over ``--alphas``, the estimator's default precision unless
   ``--precision``) from the store for every n in ``--compare-n`` (the first rows of the
   same store) and then ``n``: wall time and the peak RSS of each worker and of the client
   (kernel ``VmHWM`` reset before each fit; see :class:`benchmarks.bench_fit_2m.PeakRSS`).
3. **Test error**: RMSE on ``--n-test`` fresh rows (another seed) against the noise
   standard deviation (the floor: a perfect model's RMSE).
4. **Where the time goes**: each fit's refinement (passes, estimated errors) and the
   summed task seconds by phase from ``distributed``'s task stream (statistics pass,
   refinement passes, CV fold solves, reads, sums), against the bare Gram: ``n p^2`` at the
   float32 SSYRK rate each worker measures at the start of the run (one BLAS thread).

Run (the store takes 3.2 GB on disk; about 10 minutes for the store and the fits on 2
cores)::

    python -m benchmarks.bench_1e8 --store /path/with/space/bench_1e8.zarr --store-only   # the store alone, any load
    python -m benchmarks.bench_1e8 --store /path/with/space/bench_1e8.zarr
    python -m benchmarks.bench_1e8 --n 2000000 --compare-n 500000 --store /tmp/b.zarr --allow-load   # a quick check
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start, verdict_line
    from benchmarks._common import machine_line
    from benchmarks.bench_fit_2m import PeakRSS, fmt_mb
except ImportError:  # run as a script from benchmarks/
    from _validity import add_load_arguments, script_end, script_start, verdict_line  # type: ignore[no-redef]
    from _common import machine_line  # type: ignore[no-redef]
    from bench_fit_2m import PeakRSS, fmt_mb  # type: ignore[no-redef]

__all__ = ["main"]

D_IN = 8
RECIPE_VERSION = 1


def _block(seed, noise, block_info=None):
    info = block_info[None]
    rows, i = info["chunk-shape"][0], info["chunk-location"][0]
    rng = np.random.default_rng([seed, i])
    A = np.empty((rows, D_IN + 1), dtype=np.float32)
    A[:, :D_IN] = rng.standard_normal((rows, D_IN), dtype=np.float32)
    x = A[:, :5].astype(np.float64)
    f = np.sin(x[:, 0]) + 0.5 * np.cos(x[:, 1] + x[:, 2]) + 0.25 * x[:, 3] * x[:, 4]
    A[:, D_IN] = f + noise * rng.standard_normal(rows)
    return A


def synthetic(n: int, chunk_rows: int, seed: int, noise: float):
    """Lazily generated ``(X, y)``: block ``i`` from ``default_rng([seed, i])``."""
    import dask.array as da

    full, rem = divmod(n, chunk_rows)
    chunks = (chunk_rows,) * full + ((rem,) if rem else ())
    A = da.map_blocks(_block, seed, noise, chunks=(chunks, (D_IN + 1,)), dtype=np.float32,
                      meta=np.empty((0, 0), dtype=np.float32), name=f"bench1e8-{n}-{chunk_rows}-{seed}-{noise}")
    return A[:, :D_IN], A[:, D_IN]


def _recipe(args) -> dict:
    return {"bench_1e8_recipe": RECIPE_VERSION, "n": args.n, "chunk_rows": args.chunk_rows, "seed": args.seed,
            "noise": args.noise}


def ensure_store(args, client) -> tuple[float | None, str]:
    """The store at ``args.store``: reused when its recipe matches, else (re)written."""
    import zarr

    from dkrr.io import write_dataset

    path = Path(args.store)
    want = _recipe(args)
    if path.exists():
        try:
            attrs = dict(zarr.open_group(str(path), mode="r").attrs)
        except Exception:  # noqa: BLE001 - anything unreadable is rebuilt below (overwrite refuses foreign data)
            attrs = {}
        if attrs.get("bench_1e8") == want:
            return None, "reused"
    X, y = synthetic(args.n, args.chunk_rows, args.seed, args.noise)
    t0 = time.perf_counter()
    write_dataset(X, y, path, attrs={"bench_1e8": want}, overwrite=path.exists())
    return time.perf_counter() - t0, "written"


#: task-name fragments -> the phase of the fit they belong to (first match wins)
PHASES = (("block_statistics", "statistics pass: float32 features and fold Grams"),
          ("refine_block", "refinement passes: float64 features, Z^T (Z v)"),
          ("dkrr-combine", "sums of the block results"),
          ("getitem", "reading the store"), ("rows", "reading the store"),
          ("_score", "CV fold solves"), ("_fold", "CV fold solves"))


def phase_of(key) -> str:
    """The phase of the fit a task key belongs to (:data:`PHASES`; else "other")."""
    name = str(key[0] if isinstance(key, tuple) else key)
    return next((phase for frag, phase in PHASES if frag in name), "other")


def breakdown(tasks: list) -> dict:
    """Summed compute and transfer seconds per phase from ``distributed``'s task stream,
    and the refinement passes (distinct refinement task names)."""
    out: dict = {}
    refine = set()
    for t in tasks:
        phase = phase_of(t["key"])
        name = str(t["key"][0] if isinstance(t["key"], tuple) else t["key"])
        if "refine_block" in name:  # one task name per pass: "dkrr-refine_block-<token>[-<block>]"
            head, _, tail = name.rpartition("-")
            refine.add(head if tail.isdigit() else name)
        row = out.setdefault(phase, {"tasks": 0, "compute_s": 0.0, "transfer_s": 0.0})
        row["tasks"] += 1
        for ss in t["startstops"]:
            kind = "compute_s" if ss["action"] == "compute" else "transfer_s"
            row[kind] += ss["stop"] - ss["start"]
    return {"phases": out, "refine_task_groups": len(refine)}


def _syrk_rate(p: int, seconds: float = 3.0) -> float:
    """Measured ``rows p^2`` per second of one float32 ``Z^T Z`` (SSYRK) at p columns on
    this worker's one BLAS thread: the Gram's hardware rate, the baseline of the breakdown."""
    Z = np.random.default_rng(0).standard_normal((16384, p)).astype(np.float32)
    np.matmul(Z.T, Z)
    t0, k = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        np.matmul(Z.T, Z)
        k += 1
    return k * Z.shape[0] * p * p / (time.perf_counter() - t0)


def fit_once(args, client, n: int) -> dict:
    from dkrr import RandomFeatureRidge
    from dkrr.io import open_dataset

    ds = open_dataset(args.store)
    X, y = ds.X[:n], ds.y[:n]
    params = dict(method="sorf", n_components=args.D, gamma=args.gamma, cv=args.cv, alphas=args.alphas,
                  random_state=args.seed)
    if args.precision:
        params["precision"] = args.precision
    est = RandomFeatureRidge(**params)
    from distributed import get_task_stream

    with PeakRSS(client) as mon, get_task_stream(client) as stream:
        t0 = time.perf_counter()
        est.fit(X, y)
        t = time.perf_counter() - t0
    Xt, yt = synthetic(args.n_test, min(args.n_test, 100_000), args.seed + 1_000_003, args.noise)
    Xt, yt = client.compute([Xt, yt], sync=True)
    rmse = float(np.sqrt(np.mean((est.predict(Xt) - yt) ** 2)))
    return {"n": n, "fit_s": t, "alpha_": float(est.alpha_), "precision_": getattr(est, "precision_", None),
            "test_rmse": rmse, "rmse_over_noise": rmse / args.noise, "memory": mon.result,
            "refinement": {k: np.asarray(v).tolist() for k, v in getattr(est, "refinement_", {}).items()},
            "breakdown": breakdown(stream.data),
            "worker_peak_max": max(mon.worker_peaks()), "client_peak": mon.result["client"]["peak"],
            "lines": mon.lines(), "n_blocks": len(X.chunks[0])}


def breakdown_lines(r: dict, rate: float, args) -> list[str]:
    """The report's lines of one fit's breakdown: the refinement's passes and each phase's
    summed task seconds, against the bare Gram at the measured SSYRK rate on every worker."""
    ref = r["refinement"]
    gram = r["n"] * (2 * args.D) ** 2 / rate / args.workers
    out = [f"    refinement: {ref.get('passes')} passes, estimated errors "
           f"{[f'{e[0]:.1e}' for e in ref.get('errors', [])]}" if ref else "    refinement: none",
           f"    bare Gram at the measured rate on {args.workers} workers: {gram:.1f} s "
           f"(fit / bare Gram {r['fit_s'] / gram:.2f}); task seconds by phase (summed over workers):"]
    for phase, row in sorted(r["breakdown"]["phases"].items(), key=lambda kv: -kv[1]["compute_s"]):
        out.append(f"      {phase:<52} {row['tasks']:5d} tasks {row['compute_s']:9.1f} s compute "
                   f"{row['transfer_s']:7.1f} s transfer")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_1e8", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000_000)
    ap.add_argument("--compare-n", type=int, nargs="*", default=[10_000_000],
                    help="smaller fits on the store's first rows, for the memory comparison")
    ap.add_argument("--store", required=True, help="Zarr store path (about 36 bytes a row)")
    ap.add_argument("--chunk-rows", type=int, default=1 << 20)
    ap.add_argument("--D", type=int, default=512, help="SORF frequencies (2D feature columns)")
    ap.add_argument("--gamma", type=float, default=1.0 / (2 * D_IN))
    ap.add_argument("--cv", type=int, default=5)
    ap.add_argument("--alphas", type=float, nargs="+", default=[1e-3, 1e-1, 1e1, 1e3])
    ap.add_argument("--precision", default=None, help="default: the estimator's default")
    ap.add_argument("--noise", type=float, default=0.3)
    ap.add_argument("--n-test", type=int, default=200_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="benchmarks/results/fit_1e8.txt")
    ap.add_argument("--store-only", action="store_true",
                    help="write (or check) the store and stop: no fits, no report (the store is not timed work)")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    from dkrr.cluster import local_cluster

    if args.store_only:
        with local_cluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                           memory_limit=args.memory_limit, dashboard=False, quiet=True) as client:
            t_store, how = ensure_store(args, client)
        print(f"store {args.store}: {how}" + (f" in {t_store:.0f} s" if t_store else ""))
        return
    run_start = script_start(args)

    lines = ["command: python -m benchmarks.bench_1e8 " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
             f"problem: n = {args.n:,} x {D_IN} float32 (X ~ N(0, I)), y = sin(x0) + 0.5 cos(x1 + x2) + "
             f"0.25 x3 x4 + {args.noise} e; SORF D = {args.D} ({2 * args.D} feature columns), gamma = {args.gamma:g}, "
             f"cv = {args.cv} over alphas {args.alphas}, precision = {args.precision or 'the default'}; "
             f"LocalCluster {args.workers} workers x 1 thread; chunk_rows {args.chunk_rows:,}"]
    lines.append(machine_line())
    print(*lines, sep="\n", flush=True)
    out: dict = {"args": vars(args), "fits": []}
    with local_cluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                       memory_limit=args.memory_limit, dashboard=False, quiet=True) as client:
        t_store, how = ensure_store(args, client)
        size = sum(f.stat().st_size for f in Path(args.store).rglob("*") if f.is_file())
        msg = (f"store {args.store}: {how}" + (f" in {t_store:.0f} s" if t_store else "")
               + f", {size / 2**30:.2f} GiB on disk")
        print(msg, flush=True)
        lines.append(msg)
        out["store"] = {"how": how, "seconds": t_store, "bytes": size}
        rate = float(np.median(client.gather([client.submit(_syrk_rate, 2 * args.D, pure=False, key=f"syrk-rate-{i}")
                                              for i in range(args.workers)])))
        out["syrk_rate"] = rate
        msg = (f"baseline: one worker's float32 Z^T Z (SSYRK, 16,384 x {2 * args.D}, 1 BLAS thread) runs at "
               f"{rate / 1e9:.1f}G rows*p^2/s, measured in this run")
        print(msg, flush=True)
        lines.append(msg)
        for n in sorted(set(args.compare_n) - {args.n}) + [args.n]:
            r = fit_once(args, client, n)
            msg = (f"n = {n:>11,}: fit {r['fit_s']:7.1f} s ({r['n_blocks']} blocks, {n / r['fit_s'] / 1e6:.2f}M rows/s), "
                   f"alpha_ {r['alpha_']:g}, precision_ {r['precision_']}, test RMSE {r['test_rmse']:.4f} = "
                   f"{r['rmse_over_noise']:.3f} x the noise sd; peak RSS:")
            print(msg, *r["lines"], sep="\n", flush=True)
            lines += [msg, *r.pop("lines")]
            bd = breakdown_lines(r, rate, args)
            print(*bd, sep="\n", flush=True)
            lines += bd
            out["fits"].append(r)
    big = out["fits"][-1]
    if len(out["fits"]) > 1:
        small = out["fits"][0]
        msg = (f"worker peak at n = {big['n']:,}: {fmt_mb(big['worker_peak_max'])} vs {fmt_mb(small['worker_peak_max'])} "
               f"at n = {small['n']:,} (ratio {big['worker_peak_max'] / small['worker_peak_max']:.2f}); fit time ratio "
               f"{big['fit_s'] / small['fit_s']:.2f} for {big['n'] / small['n']:.0f}x the rows")
        print(msg)
        lines.append(msg)
    validity = script_end(run_start)
    out["validity"] = validity
    lines += ["validity: " + json.dumps(validity), verdict_line(validity)]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(out, indent=1, default=str))
    print(f"report: {args.out}")


if __name__ == "__main__":
    main()
