"""The cross-validation step of a D = 4096, cv = 5 fit: fold solves on the workers vs on the client.

Issue 26, item 2: with ``cv=K`` the K fold systems (one ``p x p`` eigendecomposition each)
used to be solved one after another on the client, which gathered and unpacked the K fold
Grams (6.7 GB at D = 4096, p = 8192, cv = 5) while the workers idled. Now they run as K
tasks where the statistics are (:mod:`dkrr.linalg._cv_tasks`) and the client receives the
fold errors and one total Gram. This script runs the statistics pass once on a LocalCluster
(``--workers`` processes x 1 thread; gaussian ``rff`` features of ``--rows`` synthetic rows
of ``--d`` columns, kept on the workers with ``persist``), then, on that same result:

* ``workers``: :func:`~dkrr.linalg._cv_tasks.cross_validate_pass` (the fold solves as
  tasks, round-robin over the workers; the total statistics gathered);
* ``client``: the previous path, the pass's result gathered and unpacked on the client
  (``symmetrized``) and :func:`~dkrr.linalg.cross_validate_statistics` there (the
  client's BLAS uses every core of this machine; a worker's one, as a nanny sets it).

For each it prints the step's wall time and the peak RSS of the client and of each worker
(:class:`bench_fit_2m.PeakRSS`: ``VmHWM`` reset before the step, polled by a thread with
psutil as a cross-check), and that both gave the same fold errors. The pass itself is not
the point (its time is printed). Defaults are the issue's target; the full run should take
under 10 minutes on the 2-core machine (the pass of 20,000 rows at p = 8192 about 2; each
CV step five p = 8192 fold solves, a tridiagonalisation each, plus the gathers)::

    .venv/bin/python benchmarks/bench_cv_workers.py [--n-components 4096] [--cv 5] [--rows 20000]
        [--d 8] [--workers 2] [--allow-load]

A tiny run that proves the script works: ``--n-components 512 --rows 4000 --allow-load``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start
    from benchmarks._common import machine_line
    from benchmarks.bench_fit_2m import PeakRSS
except ImportError:  # run as a script from benchmarks/
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]
    from _common import machine_line  # type: ignore[no-redef]
    from bench_fit_2m import PeakRSS  # type: ignore[no-redef]


def _rise(mon) -> dict:
    """GB: each process's peak and its rise above the RSS at the step's start."""
    return {k: {"peak_gb": v["peak"] / 1e9, "rise_gb": (v["peak"] - v["baseline"]) / 1e9}
            for k, v in mon.result.items()}


def main(argv=None) -> dict:
    import dask
    from distributed import futures_of, wait

    import dkrr
    from dkrr.cluster import local_cluster
    from dkrr.features import build_random_feature_map
    from dkrr.linalg import as_row_chunked, cross_validate_statistics
    from dkrr.linalg._cv_tasks import cross_validate_pass
    from dkrr.linalg._weighted import streamed_statistics_maps

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("n-components", 4096), ("cv", 5), ("rows", 20000), ("d", 8), ("workers", 2), ("seed", 0)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--skip-client", action="store_true", help="only the workers' path")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    start = script_start(args)
    K = int(args.cv)
    fmap = build_random_feature_map(kernel="gaussian", method="rff", n_components=args.n_components,
                                    gamma=1.0 / args.d, n_features_in=args.d, random_state=args.seed, options={})
    print(f"dkrr imported from {dkrr.__file__}")
    print(machine_line(), flush=True)
    rng = np.random.default_rng(args.seed)
    X = rng.standard_normal((args.rows, args.d))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(args.rows)
    p = fmap.n_output_features
    out = {"args": vars(args), "p": p, "dkrr": dkrr.__file__}
    with local_cluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard=False,
                       quiet=True) as client:
        Xd, yd = as_row_chunked(X, y)
        print(f"{args.rows} rows x {args.d} columns in {len(Xd.chunks[0])} blocks; p = {p}, cv = {K}; "
              f"LocalCluster of {args.workers} worker(s) x 1 thread", flush=True)
        t0 = time.perf_counter()
        root = streamed_statistics_maps(Xd, yd, [fmap], n_folds=K, persist=True)
        wait(futures_of(root))
        out["pass_seconds"] = time.perf_counter() - t0
        print(f"pass (kept on the workers): {out['pass_seconds']:.1f} s", flush=True)

        with PeakRSS(client, interval=0.02) as mon:
            t0 = time.perf_counter()
            cv = cross_validate_pass(root, 1, K, None, True, p=p)
            total = cv.total(0)
            seconds = time.perf_counter() - t0
        out["workers"] = {"seconds": seconds, "memory": _rise(mon)}
        alphas, mse_workers = cv.alphas, cv.fold_mse[0]
        del total, cv
        _report("workers", out["workers"])

        if not args.skip_client:
            with PeakRSS(client, interval=0.02) as mon:
                t0 = time.perf_counter()
                (packed,) = dask.compute(root)
                stats = packed[0].symmetrized()
                del packed
                mse_client = cross_validate_statistics(stats, alphas, True)
                seconds = time.perf_counter() - t0
            del stats
            out["client"] = {"seconds": seconds, "memory": _rise(mon)}
            _report("client", out["client"])
            rel = float(np.max(np.abs(mse_workers - mse_client) / np.abs(mse_client)))
            out["fold_mse_max_relative_difference"] = rel
            print(f"fold MSE, workers vs client: max relative difference {rel:.1e}; CV step "
                  f"{out['client']['seconds'] / out['workers']['seconds']:.2f}x faster on the workers")
        del root
    out["validity"] = script_end(start)
    return out


def _report(name, part):
    mem = part["memory"]
    workers = [v for k, v in mem.items() if k != "client"]
    print(f"CV step, folds solved on the {name}: {part['seconds']:.1f} s; client peak RSS "
          f"{mem['client']['peak_gb']:.2f} GB (+{mem['client']['rise_gb']:.2f} GB during the step); workers' peaks "
          + ", ".join(f"{w['peak_gb']:.2f} GB (+{w['rise_gb']:.2f})" for w in workers), flush=True)


if __name__ == "__main__":
    main()
