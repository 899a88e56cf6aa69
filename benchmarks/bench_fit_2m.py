"""Streamed fit of n = 2,000,000 rows against the BLAS roofline, with peak memory per process.

What it runs (all in one process, one step after the other, so nothing competes):

1. **Breakdown** of one row block (``--chunk-rows`` rows) in this process with BLAS at one
   thread, the way a worker runs it: data generation, projection, cos/sin, the Gram
   accumulation, the rest (``Z^T y``, column sums, fold bookkeeping), and the whole
   :func:`dkrr.linalg.block_statistics` call.
2. **dkrr fits** of :class:`dkrr.RandomFeatureRidge` (Gaussian kernel, ``--method``,
   D = ``--D`` frequencies, so 2D feature columns) from a lazily generated dask array on a
   fresh ``LocalCluster`` (``--workers`` workers x 1 thread, processes, 127.0.0.1) for every
   n in ``--mem-n`` and ``--n``: wall time of ``fit`` and the peak RSS of each worker and of
   the client (the client process also hosts the scheduler), measured with the exact kernel
   high-water mark (``VmHWM``, reset before the fit) and cross-checked by polling ``psutil``.
   The main n is fitted once per ``--precisions`` value (default float64 and float32).
3. **Roofline**: a bare numpy ``G += Z.T @ Z`` (float64, the same width 2D) over n rows in
   slabs of ``--slab`` rows (the full n x 2D matrix does not fit in memory at n = 2M) with
   BLAS at ``--workers`` threads: the same work on the same cores with nothing but BLAS;
   then the like-for-like baseline, the same Gram split over ``--workers`` Python threads
   with BLAS at one thread each (the workers' layout), in float64 and, for float32 fits,
   in float32 slabs of 4,096 rows summed into a float64 G. The summary quotes the fit over
   the like-for-like baseline.
4. **scikit-learn** ``RBFSampler(n_components=2D) + Ridge`` (float64, ``solver="auto"``,
   i.e. Cholesky on the normal equations) fitted in memory on ``--sklearn-n`` rows (the
   largest size held comfortably: its feature matrix alone is n x 2D x 8 bytes), next to
   a dkrr fit of the same rows on the cluster.

Data: X ~ N(0, I_d) float32, generated block by block on the workers with
``numpy.random.default_rng([seed, block_index])`` (so it never exists on the client);
``y = sin(x_0) + cos(x_1) x_2 + 0.1 e`` (float32, e ~ N(0, 1) from the same generator).

Run (about 7 minutes on 2 cores at n = 2M; ``--quick`` runs n = 200k in about a minute)::

    python -m benchmarks.bench_fit_2m [--n 2000000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import threading
import time

import numpy as np
import psutil

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start
except ImportError:  # run as a script from benchmarks/
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]

__all__ = ["PeakRSS", "synthetic_dask", "main"]


# --------------------------------------------------------------------------- memory
def fmt_mb(n) -> str:
    return "n/a" if n is None else f"{n / 2**20:,.0f} MiB"


def _reset_hwm(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _read_hwm(pid: int):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class PeakRSS:
    """Context manager: peak RSS of this process and of the workers of ``client``.

    Two measurements per process: ``hwm``, the kernel's exact high-water mark ``VmHWM``
    (``/proc/PID/status``), reset on entry by writing ``5`` to ``/proc/PID/clear_refs``
    (Linux; ``None`` where not possible), and ``sampled``, the largest RSS seen by a thread
    polling ``psutil`` every ``interval`` seconds. ``peak`` is ``hwm`` when available.

    Parameters
    ----------
    client : distributed.Client or None
        ``None`` watches only this process.
    interval : float, default=0.05

    Attributes
    ----------
    result : dict
        ``{name: {"pid", "baseline", "sampled", "hwm", "peak"}}``; name is ``"client"``
        or a worker address.
    """

    def __init__(self, client=None, interval: float = 0.05):
        self.procs = {"client": psutil.Process(os.getpid())}
        if client is not None:
            for addr, pid in sorted(client.run(os.getpid).items()):
                self.procs[addr] = psutil.Process(pid)
        self.interval = interval
        self.result: dict = {}

    def __enter__(self):
        self._stop = threading.Event()
        self._hwm_ok = {k: _reset_hwm(p.pid) for k, p in self.procs.items()}
        self._base = {k: p.memory_info().rss for k, p in self.procs.items()}
        self._peak = dict(self._base)
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self):
        while not self._stop.is_set():
            for k, p in self.procs.items():
                try:
                    rss = p.memory_info().rss
                except psutil.Error:
                    continue
                self._peak[k] = max(self._peak[k], rss)
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        for k, p in self.procs.items():
            hwm = _read_hwm(p.pid) if self._hwm_ok[k] else None
            self.result[k] = {
                "pid": p.pid,
                "baseline": int(self._base[k]),
                "sampled": int(self._peak[k]),
                "hwm": hwm,
                "peak": int(hwm if hwm is not None else self._peak[k]),
            }
        return False

    def worker_peaks(self) -> list[int]:
        return [v["peak"] for k, v in self.result.items() if k != "client"]

    def lines(self, indent: str = "    ") -> list[str]:
        return self.lines_of(self.result, indent)

    @staticmethod
    def lines_of(result: dict, indent: str = "    ") -> list[str]:
        """One line per process of a :attr:`result` dict."""
        return [
            f"{indent}{('client+scheduler' if k == 'client' else 'worker ' + k):>32s}: peak "
            f"{fmt_mb(v['peak']):>10s}  (polled {fmt_mb(v['sampled'])}, at start {fmt_mb(v['baseline'])})"
            for k, v in result.items()
        ]


# --------------------------------------------------------------------------- data
def _synthetic_block(seed, d, dtype, block_info=None):
    """Rows of block ``i``: d feature columns and the target in the last column."""
    info = block_info[None]
    rows = info["chunk-shape"][0]
    i = info["chunk-location"][0]
    rng = np.random.default_rng([seed, i])
    A = np.empty((rows, d + 1), dtype=dtype)
    A[:, :d] = rng.standard_normal((rows, d), dtype=np.float32)
    x = A[:, :3].astype(np.float64)
    A[:, d] = np.sin(x[:, 0]) + np.cos(x[:, 1]) * x[:, 2] + 0.1 * rng.standard_normal(rows)
    return A


def synthetic_dask(n: int, d: int, chunk_rows: int, seed: int = 0, dtype=np.float32):
    """Lazily generated ``(X, y)`` dask arrays (n x d and n), row chunks of ``chunk_rows``.

    Block ``i`` is drawn from ``numpy.random.default_rng([seed, i])``, so the data depend
    only on (n, d, chunk_rows, seed) and are generated where the block is used.
    """
    import dask.array as da

    full, rem = divmod(n, chunk_rows)
    chunks = (chunk_rows,) * full + ((rem,) if rem else ())
    A = da.map_blocks(
        _synthetic_block, seed, d, dtype, chunks=(chunks, (d + 1,)), dtype=dtype,
        meta=np.empty((0, 0), dtype=dtype), name=f"synthetic-{n}-{d}-{chunk_rows}-{seed}",
    )
    return A[:, :d], A[:, d]


# --------------------------------------------------------------------------- parts
def _best(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def breakdown(args, fmap) -> dict:
    """Seconds per stage for one block, BLAS at one thread (as in a worker)."""
    from threadpoolctl import threadpool_limits

    from dkrr.features._nonlinear import apply_nonlinearity
    from dkrr.linalg._packed import PackedGramSum, direct_gram, packed_length
    from dkrr.linalg._stats import block_statistics

    rows = args.chunk_rows
    info = {None: {"chunk-shape": (rows, args.d + 1), "chunk-location": (0, 0)}}
    gen = lambda: _synthetic_block(args.seed, args.d, np.float32, block_info=info)  # noqa: E731
    A = gen()
    X = np.ascontiguousarray(A[:, : args.d])
    y = A[:, args.d].copy()
    p = fmap.n_output_features
    sub = int(max(1, min(rows, args.max_block_bytes // (8 * p))))
    Xf = X.astype(np.float64)
    Zbuf = np.empty((sub, p))
    G = np.zeros((1, packed_length(p)))  # the packed Gram of one fold, as block_statistics keeps it
    P = fmap.projection.project(Xf[:sub])
    Pc = P.copy()
    n_sub = rows / sub
    res = {}
    with threadpool_limits(1):
        # what block_statistics does: the in-place DSYRK where it may, else the grouped products
        direct = direct_gram(p, rows, 1, np.float64, args.max_block_bytes)
        acc = PackedGramSum(G, p, np.float64, direct)

        def gram():  # the block's sub-blocks (one fold), then their sum into the panels
            for _ in range(int(n_sub)):
                acc.add(0, Zbuf)
            acc.close()

        block_statistics(X, y, 0, 0, fmap, max_block_bytes=args.max_block_bytes)  # warm-up
        reps = 1 if args.quick else 2
        res["generate data"] = _best(gen, 3)
        res["cast to float64"] = _best(lambda: X.astype(np.float64), 3)
        res["projection"] = _best(lambda: fmap.projection.project(Xf[:sub]), 3) * n_sub

        def nonlin():
            Pc[...] = P
            apply_nonlinearity(fmap.kernel, Pc, fmap.weights, out=Zbuf)

        res["cos/sin"] = _best(nonlin, 3) * n_sub
        res["gram Z^T Z"] = _best(gram, 2) * n_sub / int(n_sub)
        res["block_statistics (total)"] = _best(
            lambda: block_statistics(X, y, 0, 0, fmap, max_block_bytes=args.max_block_bytes), reps
        )
    parts = ("cast to float64", "projection", "cos/sin", "gram Z^T Z")
    res["rest (Z^T y, sums, copies)"] = res["block_statistics (total)"] - sum(res[k] for k in parts)
    return {"rows": rows, "sub_block_rows": sub, "gram": "in-place DSYRK" if direct else "grouped products",
            "seconds": res}


def dkrr_fit(args, n: int, precision: str = "float64") -> dict:
    """One fit on a fresh LocalCluster with peak-memory monitoring."""
    from dkrr import RandomFeatureRidge
    from dkrr.cluster import local_cluster

    X, y = synthetic_dask(n, args.d, args.chunk_rows, args.seed)
    est = RandomFeatureRidge(
        method=args.method, n_components=args.D, gamma=args.gamma, alpha=args.alpha,
        random_state=args.seed, max_block_bytes=args.max_block_bytes,
        cv=args.cv, alphas=args.alphas if args.cv else None, precision=precision,
    )
    with local_cluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                       memory_limit=args.memory_limit, dashboard=False, quiet=True) as client:
        # warm-up (imports and numba kernels loaded in the workers), not timed
        Xw, yw = synthetic_dask(4 * args.workers * 1024, args.d, 1024, args.seed + 1)
        t0 = time.perf_counter()
        RandomFeatureRidge(**est.get_params()).fit(Xw, yw)
        warm = time.perf_counter() - t0
        from distributed import get_task_stream

        with PeakRSS(client) as mon, get_task_stream(client) as stream:
            t0, w0 = time.perf_counter(), time.time()
            est.fit(X, y)
            t, w1 = time.perf_counter() - t0, time.time()
    return {"stream": stream_summary(stream.data, w0, w1),
        "n": n, "precision": precision, "fit_s": t, "warmup_s": warm, "alpha_": est.alpha_, "memory": mon.result, "lines": mon.lines(),
        "worker_peak_max": max(mon.worker_peaks()), "client_peak": mon.result["client"]["peak"],
        "n_blocks": len(X.chunks[0]), "est": est,
    }


def stream_summary(tasks: list, start: float, stop: float) -> dict:
    """Where a fit's wall time went, from ``distributed``'s task stream: per worker the
    seconds computing (and in the statistics steps, ``dkrr-block_statistics``), the steps'
    count and mean, and the seconds it was idle within the fit; the seconds before the
    first task and after the last (graph construction, the client's unpack and solve)."""
    workers: dict = {}
    first, last = stop, start
    for t in tasks:
        w = workers.setdefault(t["worker"], {"compute_s": 0.0, "steps": 0, "step_s": 0.0})
        for ss in t["startstops"]:
            first, last = min(first, ss["start"]), max(last, ss["stop"])
            if ss["action"] == "compute":
                w["compute_s"] += ss["stop"] - ss["start"]
                if "block_statistics" in str(t["key"]):
                    w["steps"] += 1
                    w["step_s"] += ss["stop"] - ss["start"]
    for w in workers.values():
        w["idle_s"] = (stop - start) - w["compute_s"]
    return {"workers": workers, "before_first_task_s": max(0.0, first - start), "after_last_task_s": max(0.0, stop - last)}


def stream_lines(s: dict, indent: str = "    ") -> list[str]:
    """The report's lines of :func:`stream_summary`."""
    out = [f"{indent}task stream: {s['before_first_task_s']:.2f} s before the first task, "
           f"{s['after_last_task_s']:.2f} s after the last (the client's unpack and solve)"]
    for name, w in sorted(s["workers"].items()):
        mean = w["step_s"] / w["steps"] if w["steps"] else float("nan")
        out.append(f"{indent}  worker {name}: {w['compute_s']:7.1f} s computing, {w['steps']} statistics steps "
                   f"of {mean:.2f} s on average, idle {w['idle_s']:5.1f} s")
    return out


def bare_gram(n: int, p: int, slab: int, threads: int, seed: int = 1) -> dict:
    """``G += Z.T @ Z`` over n rows in slabs (float64), BLAS at ``threads`` threads."""
    from threadpoolctl import threadpool_limits

    Z = np.random.default_rng(seed).random((slab, p))
    G = np.zeros((p, p))
    full, rem = divmod(n, slab)
    with threadpool_limits(threads):
        G += Z[:256].T @ Z[:256]  # warm-up
        t0 = time.perf_counter()
        for _ in range(full):
            G += Z.T @ Z
        if rem:
            Zr = Z[:rem]
            G += Zr.T @ Zr
        t = time.perf_counter() - t0
    return {"n": n, "p": p, "slab": slab, "threads": threads, "seconds": t,
            "gflops": n * p * p / t / 1e9}


def parallel_gram(n: int, p: int, slab: int, workers: int, seed: int = 1, dtype=np.float64) -> dict:
    """The same ``G += Z.T @ Z`` split over ``workers`` Python threads, BLAS at one thread
    each (numpy releases the GIL): the layout of the dask workers, without dask. With
    ``dtype=float32`` each slab's product is float32 (SSYRK), summed into a float64 G, as
    dkrr's ``precision="float32"`` does (in slabs of 4,096 rows, its float32 sub-block)."""
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    full, rem = divmod(n, slab)
    sizes = [slab] * full + ([rem] if rem else [])
    mine = [sizes[i::workers] for i in range(workers)]
    Zs = [np.random.default_rng(seed + i).random((slab, p)).astype(dtype) for i in range(workers)]

    def work(i):
        G = np.zeros((p, p))
        for rows in mine[i]:
            Zr = Zs[i][:rows]
            G += Zr.T @ Zr
        return G

    with threadpool_limits(1), ThreadPoolExecutor(workers) as pool:
        t0 = time.perf_counter()
        list(pool.map(work, range(workers)))
        t = time.perf_counter() - t0
    return {"n": n, "p": p, "slab": slab, "threads": workers, "blas_threads": 1, "seconds": t,
            "gflops": n * p * p / t / 1e9, "dtype": np.dtype(dtype).name}


def sklearn_fit(args, n: int) -> dict:
    """RBFSampler(2D) + Ridge in memory on the first n rows (float64)."""
    from sklearn.kernel_approximation import RBFSampler
    from sklearn.linear_model import Ridge

    X, y = synthetic_dask(n, args.d, args.chunk_rows, args.seed)
    import dask

    X, y = dask.compute(X, y, scheduler="threads")
    X = X.astype(np.float64)
    y = y.astype(np.float64)
    with PeakRSS(None) as mon:
        t0 = time.perf_counter()
        Z = RBFSampler(gamma=args.gamma, n_components=2 * args.D, random_state=args.seed).fit_transform(X)
        t1 = time.perf_counter()
        Ridge(alpha=args.alpha).fit(Z, y)
        t2 = time.perf_counter()
    del Z
    return {"n": n, "fit_s": t2 - t0, "transform_s": t1 - t0, "ridge_s": t2 - t1,
            "peak": mon.result["client"]["peak"], "baseline": mon.result["client"]["baseline"]}


# --------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2_000_000, help="rows of the main fit")
    ap.add_argument("--mem-n", type=int, nargs="*", default=None,
                    help="extra n for the memory comparison (default n/4)")
    ap.add_argument("--d", type=int, default=32)
    ap.add_argument("--D", type=int, default=1024, help="frequencies (2D feature columns)")
    ap.add_argument("--method", default="sorf")
    ap.add_argument("--gamma", type=float, default=None, help="default 1/(2d)")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--cv", type=int, default=None, help="folds (with --alphas); default none")
    ap.add_argument("--alphas", type=float, nargs="*", default=[0.01, 0.1, 1.0, 10.0])
    ap.add_argument("--chunk-rows", type=int, default=65536)
    ap.add_argument("--max-block-bytes", type=int, default=None, help="default: dkrr's")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="auto")
    ap.add_argument("--slab", type=int, default=65536, help="rows per slab of the bare Gram")
    ap.add_argument("--sklearn-n", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the figures as JSON here")
    ap.add_argument("--precisions", nargs="+", default=["float64", "float32"], choices=["float64", "float32"],
                    help="precision= of the main fit, each against the bare Gram of that dtype (default both)")
    ap.add_argument("--quick", action="store_true", help="n=200k, mem-n 50k, sklearn-n 50k")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    run_start = script_start(args)
    from dkrr.linalg import DEFAULT_MAX_BLOCK_BYTES

    if args.quick:
        args.n = min(args.n, 200_000)
        args.sklearn_n = min(args.sklearn_n, 50_000)
    if args.mem_n is None:
        args.mem_n = [args.n // 4]
    args.gamma = args.gamma or 1.0 / (2 * args.d)
    args.max_block_bytes = args.max_block_bytes or DEFAULT_MAX_BLOCK_BYTES
    p = 2 * args.D

    print("command: python -m benchmarks.bench_fit_2m " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])))
    print(f"machine: {platform.node()}, {os.cpu_count()} cpus, {psutil.virtual_memory().total / 2**30:.1f} GiB; "
          f"load average at start {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"problem: d={args.d}, D={args.D} ({p} feature columns), method={args.method}, gaussian kernel "
          f"gamma={args.gamma:g}, alpha={args.alpha:g}, cv={args.cv}; data float32 (X ~ N(0,I)), generated blockwise "
          f"with default_rng([seed, block]); precision {', '.join(args.precisions)}")
    print(f"cluster: LocalCluster {args.workers} workers x 1 thread (processes, 127.0.0.1), memory_limit="
          f"{args.memory_limit}; chunk_rows={args.chunk_rows}, max_block_bytes={args.max_block_bytes / 2**20:g} MiB")
    out: dict = {"args": {k: v for k, v in vars(args).items()}, "fits": []}

    # 1. breakdown of one block
    from dkrr.features import build_feature_map

    Xs, _ = synthetic_dask(4096, args.d, 4096, args.seed)
    fmap = build_feature_map(
        np.asarray(Xs), kernel="gaussian", method=args.method, n_components=args.D, gamma=args.gamma,
        random_state=np.random.default_rng(args.seed), options={},
    )
    bd = breakdown(args, fmap)
    out["breakdown"] = bd
    n_blocks_main = -(-args.n // args.chunk_rows)
    tot = bd["seconds"]["block_statistics (total)"]
    print(f"\n[1] one block of {bd['rows']} rows ({bd['sub_block_rows']} rows per sub-block; the Gram by {bd['gram']}), "
          "BLAS 1 thread:")
    for k, v in bd["seconds"].items():
        share = "" if k == "generate data" else f" {100 * v / tot:5.1f}%"
        print(f"    {k:>28s}: {v:7.3f} s{share}")
    print(f"    => block tasks alone at n={args.n:,}: {n_blocks_main} blocks x {tot:.2f} s / {args.workers} workers "
          f"= {n_blocks_main * tot / args.workers:.1f} s")

    # 2. dkrr fits
    print("\n[2] dkrr RandomFeatureRidge.fit on a fresh LocalCluster:")
    runs = [(n, "float64") for n in sorted(set(args.mem_n) - {args.n})] + [(args.n, pr) for pr in args.precisions]
    for n, precision in runs:
        r = dkrr_fit(args, n, precision)
        r.pop("est")
        print(f"  n = {n:>9,}, precision={precision}: fit {r['fit_s']:7.1f} s ({r['n_blocks']} blocks, "
              f"{n / r['fit_s'] / 1e3:.1f}k rows/s); peak RSS:")
        for line in r["lines"] + stream_lines(r["stream"]):
            print(line)
        r.pop("lines")
        out["fits"].append(r)
    main_fits = {r["precision"]: r for r in out["fits"] if r["n"] == args.n}
    main_fit = main_fits[args.precisions[0]]

    # 3. roofline
    print(f"\n[3] bare numpy G += Z.T @ Z, float64, n={args.n:,} x {p} in {args.slab}-row slabs, "
          f"BLAS {args.workers} threads:")
    g = bare_gram(args.n, p, args.slab, args.workers)
    out["bare_gram"] = g
    print(f"    {g['seconds']:.1f} s ({g['gflops']:.1f} GFLOP/s counting n p^2)")
    print(f"[3b] the same split over {args.workers} Python threads with BLAS at 1 thread each (the workers' layout):")
    g2 = parallel_gram(args.n, p, args.slab, args.workers)
    out["parallel_gram"] = g2
    print(f"    {g2['seconds']:.1f} s ({g2['gflops']:.1f} GFLOP/s)")
    if "float32" in args.precisions:
        print(f"[3c] as [3b] with float32 slabs of 4096 rows (SSYRK) summed into a float64 G (precision='float32'):")
        g3 = parallel_gram(args.n, p, 4096, args.workers, dtype=np.float32)
        out["parallel_gram_float32"] = g3
        print(f"    {g3['seconds']:.1f} s ({g3['gflops']:.1f} GFLOP/s)")

    # 4. scikit-learn
    print(f"\n[4] scikit-learn RBFSampler(n_components={p}) + Ridge (float64, in memory), n={args.sklearn_n:,}:")
    sk = sklearn_fit(args, args.sklearn_n)
    out["sklearn"] = sk
    print(f"    {sk['fit_s']:.1f} s (transform {sk['transform_s']:.1f} s, Ridge {sk['ridge_s']:.1f} s), "
          f"peak RSS {fmt_mb(sk['peak'])} (at start {fmt_mb(sk['baseline'])})")
    dk = next((r for r in out["fits"] if r["n"] == args.sklearn_n and r["precision"] == "float64"), None)
    if dk is None:
        dk = dkrr_fit(args, args.sklearn_n)
        dk.pop("est"), dk.pop("lines")
    out["dkrr_at_sklearn_n"] = dk
    print(f"    dkrr on the same n on the cluster: {dk['fit_s']:.1f} s, worker peak {fmt_mb(dk['worker_peak_max'])}")

    # summary
    ratio = main_fit["fit_s"] / g["seconds"]
    out["summary"] = {
        "fit_s": main_fit["fit_s"], "gram_s": g["seconds"], "fit_over_gram": ratio,
        "gram_parallel_s": g2["seconds"], "fit_over_gram_parallel": main_fit["fit_s"] / g2["seconds"],
        "sklearn_over_dkrr": sk["fit_s"] / dk["fit_s"],
        "worker_peak_by_n": {r["n"]: max(v["peak"] for k, v in r["memory"].items() if k != "client") for r in out["fits"]},
        "client_peak_by_n": {r["n"]: r["client_peak"] for r in out["fits"]},
        "load_average_end": os.getloadavg(),
    }
    print("\nsummary")
    print(f"  n={args.n:,}: dkrr fit {main_fit['fit_s']:.1f} s, bare Gram {g['seconds']:.1f} s, "
          f"ratio {ratio:.2f} (target <= 1.5)")
    print(f"  against the Gram in {args.workers} threads x BLAS 1 thread ({g2['seconds']:.1f} s, the workers' "
          f"layout: the like-for-like baseline): ratio {main_fit['fit_s'] / g2['seconds']:.2f}")
    if "float32" in main_fits and "float64" in main_fits:
        f32 = main_fits["float32"]["fit_s"]
        out["summary"].update({"fit32_s": f32, "fit32_over_fit64": f32 / main_fits["float64"]["fit_s"],
                               "fit32_over_gram32_parallel": f32 / out["parallel_gram_float32"]["seconds"]})
        print(f"  precision='float32': fit {f32:.1f} s = {f32 / main_fits['float64']['fit_s']:.2f}x the float64 fit; "
              f"{f32 / out['parallel_gram_float32']['seconds']:.2f}x its bare float32 Gram in the workers' layout "
              f"({out['parallel_gram_float32']['seconds']:.1f} s)")
    for r in out["fits"]:
        w = [fmt_mb(v["peak"]) for k, v in r["memory"].items() if k != "client"]
        print(f"  n={r['n']:>9,}: worker peak RSS {', '.join(w)}; client+scheduler {fmt_mb(r['client_peak'])}")
    print(f"  scikit-learn RBFSampler+Ridge at n={args.sklearn_n:,}: {sk['fit_s']:.1f} s vs dkrr {dk['fit_s']:.1f} s "
          f"(sklearn / dkrr = {sk['fit_s'] / dk['fit_s']:.2f}); sklearn peak RSS {fmt_mb(sk['peak'])}")
    out["validity"] = script_end(run_start)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)
    return out


if __name__ == "__main__":
    main()
