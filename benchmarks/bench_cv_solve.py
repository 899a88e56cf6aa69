"""One cross-validation fold's scoring: the tridiagonal solve against the eigendecomposition it replaced.

For every p of ``--sizes`` (feature columns): gaussian random features (RFF, p = 2D
columns, gamma 1/8) of ``--rows-per-column * p`` synthetic rows
(``benchmarks._data.synthetic_arrays``, 8 columns), the totals and fold 0's statistics of a
5-fold split (row index mod 5), and the default alpha grid (9 values, ``s * 10^(-7..1)``,
ALGORITHMS.md 3.6). Then, in the same run, alternating which goes first, ``--repeats``
times each:

* **eigh** (the baseline, the kernel dkrr used before): ``scipy.linalg.eigh`` of the
  centred training Gram, ``beta(alpha) = V (lam + alpha)^-1 V^T c`` for the grid;
* **tridiagonal** (dkrr's ``score_fold``): ``G' = Q T Q^T`` (``dsytrd``), ``Q^T c``, one
  O(p) tridiagonal solve per alpha, ``Q`` applied to the stacked solutions (``dormqr``).

Both then score every alpha with the same expansion (``fold_validation_mse``). The report
gives the median times (min, max), their ratio, the largest relative difference of the
fold MSEs over the alphas both find usable, and whether both refuse the same alphas.

A second table times the 5 fold solves (fold 0's problem five times, the tridiagonal
kernel) as dask's threaded scheduler runs them, in the same run, alternating the order:

* **all threads**: ``--blas-threads`` solves at once, one BLAS thread each (dkrr before);
* **dkrr**: one solve at a time with ``solve_threads(p, --blas-threads)`` BLAS threads
  (all of them from p = 1536, one below), as ``dkrr.linalg._cv_tasks`` runs them (two
  solves in two threads of one process do not overlap, so its lock makes them take turns).

Run: ``python -m benchmarks.bench_cv_solve`` (add ``--allow-load`` on a busy machine: the
report then says NOT FOR PUBLICATION).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

import numpy as np
import scipy.linalg

try:
    from benchmarks._common import check_even_sizes
    from benchmarks._data import synthetic_arrays
    from benchmarks._validity import add_load_arguments, script_end, script_start, verdict_line, write_report
except ImportError:  # run as a script from benchmarks/
    from _common import check_even_sizes  # type: ignore[no-redef]
    from _data import synthetic_arrays  # type: ignore[no-redef]
    from _validity import (  # type: ignore[no-redef]
        add_load_arguments, script_end, script_start, verdict_line, write_report)

__all__ = ["eigh_score_fold", "fold_problem", "main"]

N_FOLDS = 5


def fold_problem(p: int, rows_per_column: int, seed: int = 0):
    """``(total, fold, alphas)`` of :func:`dkrr.linalg._cv.score_fold` for fold 0 of a
    5-fold split of gaussian random features (p columns) of synthetic rows."""
    from dkrr.features import build_feature_map
    from dkrr.linalg._cv import DEFAULT_ALPHA_EXPONENTS

    n = rows_per_column * p
    X, y = synthetic_arrays(n, 8, seed)
    y = y[:, None]
    fmap = build_feature_map(X[:1000], kernel="gaussian", method="rff", n_components=p // 2, gamma=0.125,
                             random_state=np.random.default_rng(seed), options={})
    G, Gk = np.zeros((p, p)), np.zeros((p, p))
    c, ck = np.zeros((p, 1)), np.zeros((p, 1))
    zs, zk = np.zeros(p), np.zeros(p)
    for start in range(0, n, 4096):
        Z = fmap.transform(X[start:start + 4096])
        yb = y[start:start + 4096]
        val = (np.arange(start, start + len(Z)) % N_FOLDS) == 0
        G += Z.T @ Z
        c += Z.T @ yb
        zs += Z.sum(0)
        Zv, yv = Z[val], yb[val]
        Gk += Zv.T @ Zv
        ck += Zv.T @ yv
        zk += Zv.sum(0)
    val = (np.arange(n) % N_FOLDS) == 0
    total = (G, c, zs, y.sum(0), float(n))
    fold = (Gk, ck, zk, y[val].sum(0), (y[val] ** 2).sum(0), float(val.sum()))
    scale = (np.trace(G) - zs @ zs / n) / p  # the default grid's s (with an intercept)
    return total, fold, scale * 10.0**DEFAULT_ALPHA_EXPONENTS


def eigh_score_fold(total, fold, alphas, fit_intercept: bool):
    """The baseline: dkrr's per-fold scoring as it was, by ``scipy.linalg.eigh``."""
    from dkrr.linalg._cv import fold_validation_mse
    from dkrr.linalg._solve import center_statistics

    G, c, zs, ys, n = total
    Gk, ck, zk, yk, yyk, nk = fold
    t = c.shape[1]
    mse = np.full(alphas.size, np.inf)
    Gc, cc, mu, ybar = center_statistics(G - Gk, c - ck, zs - zk, n - nk, ys - yk, fit_intercept)
    lam, V = scipy.linalg.eigh(Gc, check_finite=False)
    p = lam.size
    ok = lam[0] + alphas > p * np.finfo(np.float64).eps * max(float(np.abs(lam).max()), 1.0)
    if not ok.any():
        return mse, float(lam[0])
    q = V.T @ cc
    gam = q[None, :, :] / (lam[None, :, None] + alphas[ok][:, None, None])
    a = gam.shape[0]
    B = (V @ gam.transpose(1, 0, 2).reshape(p, a * t)).reshape(p, a, t).transpose(1, 0, 2)
    GB = (Gk @ B.transpose(1, 0, 2).reshape(p, a * t)).reshape(p, a, t)
    quad = np.einsum("apt,pat->at", B, GB)
    mse[ok] = fold_validation_mse(B, quad, ck, zk, yk, yyk, nk, mu if fit_intercept else None, ybar)
    return mse, float(lam[0])


def _folds_at_once(total, fold, alphas, at_once: int, threads: int) -> float:
    """Seconds for N_FOLDS fold solves, ``at_once`` at a time on a thread pool, each with
    ``threads // at_once`` BLAS threads (the limit is per process, as compute_limited's)."""
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    from dkrr.linalg._cv import score_fold

    with threadpool_limits(max(1, threads // at_once)), ThreadPoolExecutor(at_once) as pool:
        t0 = time.perf_counter()
        list(pool.map(lambda _: score_fold(total, fold, alphas, True), range(N_FOLDS)))
        return time.perf_counter() - t0


def _schedules(args, problems) -> tuple[list[str], list[dict]]:
    """The second table: the fold solves at once (module docstring)."""
    from dkrr._system import last_level_cache
    from dkrr.linalg._cv_tasks import solve_threads

    threads = args.blas_threads
    lines = ["", f"{N_FOLDS} fold solves on {threads} threads (last-level cache {last_level_cache() / 2**20:.0f} MiB): "
                 f"{threads} at once with 1 BLAS thread each, against dkrr's one at a time (solve_threads BLAS threads)",
             f"{'p':>6} {'all threads s (min, max)':>26} {'dkrr s (min, max)':>24} {'BLAS':>5} {'ratio':>7}"]
    rows = []
    for p, (total, fold, alphas) in problems.items():
        blas = solve_threads(p, threads)
        times = {"all_threads": [], "dkrr": []}
        for r in range(args.repeats):
            order = [("all_threads", threads, threads), ("dkrr", 1, blas)]
            for name, k, pool in (order if r % 2 == 0 else order[::-1]):
                times[name].append(_folds_at_once(total, fold, alphas, k, pool))
        med = {k: float(np.median(v)) for k, v in times.items()}
        rows.append({"p": p, "at_once": 1, "blas_threads": blas, "times_s": times, "median_s": med,
                     "ratio": med["dkrr"] / med["all_threads"]})
        ta, td = times["all_threads"], times["dkrr"]
        lines.append(f"{p:>6} {med['all_threads']:>10.3f} ({min(ta):.3f}, {max(ta):.3f}) {med['dkrr']:>8.3f} "
                     f"({min(td):.3f}, {max(td):.3f}) {blas:>5} {rows[-1]['ratio']:>7.2f}")
        print(lines[-1], flush=True)
    lines.append("ratio: dkrr median / all threads median (same run)")
    return lines, rows


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_cv_solve", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096], help="feature columns p (even)")
    ap.add_argument("--rows-per-column", type=int, default=4, help="rows = this x p (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--blas-threads", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/results/cv_solve")
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    check_even_sizes(ap, args.sizes)
    run_start = script_start(args)
    from threadpoolctl import threadpool_limits

    from dkrr.linalg._cv import score_fold

    header = [
        "command: python -m benchmarks.bench_cv_solve " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        f"one fold of 5 (fold 0), fit_intercept=True, one target, the default alpha grid (9 values); gaussian RFF, "
        f"rows = {args.rows_per_column} x p; {args.repeats} repeats alternating the order; BLAS threads "
        f"{args.blas_threads}",
        "",
        f"{'p':>6} {'eigh s (min, max)':>24} {'tridiagonal s (min, max)':>28} {'ratio':>7} {'max rel MSE diff':>17} "
        f"{'same inf':>9}",
    ]
    print("\n".join(header), flush=True)
    rows, lines, problems = [], [], {}
    with threadpool_limits(args.blas_threads):
        for p in args.sizes:
            total, fold, alphas = problems[p] = fold_problem(p, args.rows_per_column)
            times = {"eigh": [], "tridiagonal": []}
            for r in range(args.repeats):
                order = [("eigh", eigh_score_fold), ("tridiagonal", score_fold)]
                for name, fn in (order if r % 2 == 0 else order[::-1]):
                    dt, out = _timed(fn, total, fold, alphas, True)
                    times[name].append(dt)
                    if name == "eigh":
                        old = out[0]
                    else:
                        new = out[0]
            both = np.isfinite(old) & np.isfinite(new)
            diff = float(np.max(np.abs(new[both] / old[both] - 1.0))) if both.any() else float("nan")
            same = bool((np.isfinite(old) == np.isfinite(new)).all())
            med = {k: float(np.median(v)) for k, v in times.items()}
            row = {"p": p, "rows": args.rows_per_column * p, "times_s": times, "median_s": med,
                   "ratio": med["eigh"] / med["tridiagonal"], "max_rel_mse_diff": diff, "same_refused": same,
                   "alphas": alphas.tolist(), "mse_eigh": old.tolist(), "mse_tridiagonal": new.tolist()}
            rows.append(row)
            te, tt = times["eigh"], times["tridiagonal"]
            lines.append(f"{p:>6} {med['eigh']:>8.3f} ({min(te):.3f}, {max(te):.3f}) "
                         f"{med['tridiagonal']:>12.3f} ({min(tt):.3f}, {max(tt):.3f}) {row['ratio']:>7.2f} "
                         f"{diff:>17.2e} {str(same):>9}")
            print(lines[-1], flush=True)
    schedule_lines, schedule_rows = _schedules(args, problems)
    validity = script_end(run_start)
    summary = ["", "ratio: eigh median / tridiagonal median (same run); max rel MSE diff over the alphas both "
                   "score finite", *schedule_lines, "", f"validity: {json.dumps(validity, default=str)}", verdict_line(validity)]
    print("\n".join(summary[1:]))
    write_report(args.out, header + lines + summary, {"args": vars(args), "rows": rows, "schedules": schedule_rows,
                                                        "validity": validity})
    return rows


if __name__ == "__main__":
    main()
