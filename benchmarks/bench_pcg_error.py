"""Test error versus D where more features help, with ``solver="pcg"`` beyond the Gram
path's reach (issue 16): EEG eye-state and a synthetic function at up to n = 1e6.

``eeg``
    EEG eye-state with the protocol of ``pipelines/accuracy_real.py`` (seeded 80/20 split,
    features clipped to their training 0.5/99.5 percentiles and standardised), the
    classifier with the exact-KRR choice of that report (``gamma = 0.3193``, ``alpha =
    0.1``; exact KRR on 10,000 training rows errs on 2.60% of the test rows). For each D
    (SORF, ``p = 2 D``): the Gram path (``solver="cholesky"``, up to ``--gram-max-p``) and
    ``solver="pcg"``; the test error rate, seconds, the ratio PCG / Gram, CG iterations.
    ``--krr`` recomputes exact KRR on ``--krr-rows`` training rows (about 100 s at 10,000).
``synthetic``
    ``y = f(x) + noise`` with ``x ~ N(0, I_d)`` and ``f(x) = sum_j a_j cos(w_j^T x + b_j)``,
    ``J = --components`` frequencies ``w_j ~ N(0, 2 gamma_f I)``, ``a_j ~ N(0, 2 / J)``
    (``Var f = 1``), ``b_j ~ U[0, 2 pi)``, noise sd ``--noise`` (the floor of the test MSE
    is its square). ``gamma_f = --f-gamma`` (0.125) is a quarter of the model's ``gamma``
    (0.5): f's spectrum is four times narrower (in variance) than the kernel's spectral
    density, so f is smooth at the kernel's scale and (nearly) in its RKHS, and the excess
    error of random features falls towards 0 as D grows. (With ``gamma_f = gamma``, f is
    close to a sample of the kernel's Gaussian process, which is not in the RKHS and is
    learnt only slowly: at n = 1e5 its MSE stands at 7-8x the floor at D = 4096.) The
    model's D frequencies are drawn independently of the ``w_j``: the test MSE reaches the
    noise floor only at large D (given n rows). Rows are generated blockwise by dask
    (``--n`` up to 1e6 and beyond); the test rows are 20,000 fresh ones. The rows are
    generated once and kept in memory (48 MB at n = 1e6, d = 5) before the fits are timed.
    Same table as ``eeg`` with the MSE and its ratio to the floor.

Every run is stamped with the commit, a modified tree and the load (``_validity.py``)::

    python -m benchmarks.bench_pcg_error eeg [--D 1024 2048 4096 8192 16384]
    python -m benchmarks.bench_pcg_error synthetic [--n 1000000] [--D 512 1024 2048 4096] [--gram-max-p 2048]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

try:  # python -m benchmarks.bench_pcg_error
    from benchmarks._validity import add_load_arguments, script_end, script_start
except ImportError:  # python benchmarks/bench_pcg_error.py
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]

#: exact KRR on EEG (pipelines/results/accuracy_real.md: 10,000 training rows, seed 0)
EEG_KRR = {"gamma": 0.3193, "alpha": 0.1, "error": 0.0260}


def _fit(est, X, y):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return est, time.perf_counter() - t0


def _target_block(X, W, b, a):
    """``f(X) = cos(X W^T + b) a`` in slices of 256 frequencies (bounded memory)."""
    out = np.zeros(X.shape[0])
    for s in range(0, W.shape[0], 256):
        out += np.cos(X @ W[s:s + 256].T + b[s:s + 256]) @ a[s:s + 256]
    return out


def _synthetic_block(seed, d, W, b, a, noise, block_info=None):
    loc = block_info[None]["array-location"][0]
    i = block_info[None]["chunk-location"][0]
    rng = np.random.default_rng([seed, 1, i])
    X = rng.standard_normal((loc[1] - loc[0], d))
    y = _target_block(X, W, b, a) + noise * rng.standard_normal(X.shape[0])
    return np.column_stack([X, y])


def synthetic_data(n, d, components, f_gamma, noise, seed, chunk_rows=50_000):
    """Lazily generated ``(X, y)`` dask arrays, and the test rows ``(Xte, yte)`` (numpy);
    f's frequencies ``w_j ~ N(0, 2 f_gamma I)``."""
    import dask.array as da

    rng = np.random.default_rng([seed, 0])
    W = rng.standard_normal((components, d)) * np.sqrt(2.0 * f_gamma)
    b = rng.uniform(0.0, 2.0 * np.pi, components)
    a = rng.standard_normal(components) * np.sqrt(2.0 / components)
    full, rem = divmod(n, chunk_rows)
    chunks = (chunk_rows,) * full + ((rem,) if rem else ())
    A = da.map_blocks(_synthetic_block, seed, d, W, b, a, noise, chunks=(chunks, (d + 1,)), dtype=np.float64,
                      meta=np.empty((0, 0)), name=f"pcg-synthetic-{n}-{d}-{components}-{f_gamma}-{noise}-{seed}")
    test = np.random.default_rng([seed, 2])
    Xte = test.standard_normal((20_000, d))
    yte = _target_block(Xte, W, b, a) + noise * test.standard_normal(20_000)
    return A[:, :d], A[:, d], Xte, yte


def _gram_and_pcg(cls, args, D, gamma, alpha, X, y, Xte, error):
    """``(gram, gram_s, pcg, pcg_s, gram_error, pcg_error)`` of one D: the Gram path (up to
    ``--gram-max-p``; else None) and PCG, each timed, ``error(predictions on Xte)``."""
    kw = {"method": "sorf", "n_components": D, "gamma": gamma, "alpha": alpha, "random_state": args.seed}
    gram = gram_s = err_g = None
    if 2 * D <= args.gram_max_p:
        gram, gram_s = _fit(cls(**kw, solver="cholesky"), X, y)
        err_g = error(gram.predict(Xte))
    pcg, pcg_s = _fit(cls(**kw, solver="pcg", pcg_rank=args.rank, tol=args.tol, max_iter=args.max_iter), X, y)
    return gram, gram_s, pcg, pcg_s, err_g, error(pcg.predict(Xte))


def _row(D, gram, gram_s, pcg, pcg_s, err_g, err_p, fmt, extra=""):
    info = pcg.solver_info_
    it = f"{info['n_iter']}{'' if info['converged'] else '*'}"
    g = "-" if gram is None else format(err_g, fmt)
    gs = "-" if gram is None else f"{gram_s:.1f}"
    ratio = "-" if gram is None else f"{pcg_s / gram_s:.2f}"
    print(f"{D:>6} {2 * D:>6} {g:>10} {err_p:>10{fmt}} {gs:>8} {pcg_s:>8.1f} {ratio:>8} {it:>6}{extra}", flush=True)
    return {"D": D, "p": 2 * D, "gram_error": err_g, "pcg_error": err_p, "gram_s": gram_s, "pcg_s": pcg_s,
            "iterations": info["n_iter"], "converged": info["converged"], "passes": info["passes"]}


def eeg(args) -> dict:
    try:  # the offline mirror beside the checkout (../shared/data), as the other benchmarks
        from benchmarks._data import data_mirror
    except ImportError:  # python benchmarks/bench_pcg_error.py
        from _data import data_mirror  # type: ignore[no-redef]
    from pipelines.accuracy_real import exact_krr, load_dataset

    from dkrr import RandomFeatureRidgeClassifier

    mirror = data_mirror()
    if mirror is not None:
        os.environ.setdefault("DKRR_DATA_MIRROR", str(mirror))

    Xtr, ytr, Xte, yte, _, note = load_dataset("eeg", seed=args.seed)
    gamma, alpha = args.gamma or EEG_KRR["gamma"], args.alpha or EEG_KRR["alpha"]
    print(f"EEG eye-state: {note}; {len(ytr)} train / {len(yte)} test rows; gamma = {gamma}, alpha = {alpha}")
    if args.krr:
        sub = np.random.default_rng(args.seed).permutation(len(ytr))[: args.krr_rows]
        krr = exact_krr("binary", Xtr[sub], ytr[sub], Xte, yte, [gamma], args.seed)
        print(f"exact KRR on {len(sub)} training rows (this run): {krr}")
    else:
        print(f"exact KRR on 10,000 training rows: test error {EEG_KRR['error']:.4f} "
              "(pipelines/results/accuracy_real.md; --krr recomputes it)")
    print(f"{'D':>6} {'p':>6} {'gram err':>10} {'pcg err':>10} {'gram s':>8} {'pcg s':>8} {'pcg/gram':>8} {'iters':>6}")
    rows = []
    for D in args.D:
        fits = _gram_and_pcg(RandomFeatureRidgeClassifier, args, D, gamma, alpha, Xtr, ytr, Xte,
                             lambda pred: float(np.mean(pred != yte)))
        rows.append(_row(D, *fits, ".4f"))
    print("* not converged at max_iter")
    return {"rows": rows, "gamma": gamma, "alpha": alpha}


def synthetic(args) -> dict:
    import dask

    from dkrr import RandomFeatureRidge

    gamma = args.gamma or 0.5
    alpha = args.alpha or 1.0
    X, y, Xte, yte = synthetic_data(args.n, args.d, args.components, args.f_gamma, args.noise, args.seed)
    floor = args.noise**2
    t0 = time.perf_counter()
    X, y = dask.persist(X, y)  # generated once (not timed as a fit): the fits read memory
    print(f"synthetic: n = {args.n} x d = {args.d}, f = sum of {args.components} cosines "
          f"(frequencies ~ N(0, 2 gamma_f I), gamma_f = {args.f_gamma}; model gamma = {gamma}), "
          f"noise sd {args.noise} (MSE floor {floor:g}); alpha = {alpha}; "
          f"rows generated blockwise in {time.perf_counter() - t0:.0f} s and kept in memory")
    print(f"{'D':>6} {'p':>6} {'gram mse':>10} {'pcg mse':>10} {'gram s':>8} {'pcg s':>8} {'pcg/gram':>8} "
          f"{'iters':>6} {'pcg/floor':>9}")
    rows = []
    for D in args.D:
        fits = _gram_and_pcg(RandomFeatureRidge, args, D, gamma, alpha, X, y, Xte,
                             lambda pred: float(np.mean((pred - yte) ** 2)))
        rows.append(_row(D, *fits, ".5f", f" {fits[-1] / floor:>9.2f}"))
    print("* not converged at max_iter")
    return {"rows": rows, "gamma": gamma, "f_gamma": args.f_gamma, "alpha": alpha, "floor": floor}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", choices=["eeg", "synthetic"])
    ap.add_argument("--D", type=int, nargs="+", default=None)
    ap.add_argument("--n", type=int, default=1_000_000, help="synthetic: training rows")
    ap.add_argument("--d", type=int, default=5, help="synthetic: input columns")
    ap.add_argument("--components", type=int, default=20_000, help="synthetic: cosines in f")
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--f-gamma", type=float, default=0.125,
                    help="synthetic: f's frequencies ~ N(0, 2 f_gamma I) (default: the model gamma 0.5 / 4)")
    ap.add_argument("--gamma", type=float, default=None, help="eeg: 0.3193 (exact KRR's); synthetic: 0.5")
    ap.add_argument("--alpha", type=float, default=None, help="eeg: 0.1 (exact KRR's); synthetic: 1.0")
    ap.add_argument("--rank", type=int, default=256)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--gram-max-p", type=int, default=8192)
    ap.add_argument("--krr", action="store_true", help="eeg: recompute exact KRR")
    ap.add_argument("--krr-rows", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    if args.D is None:
        args.D = [1024, 2048, 4096, 8192, 16384] if args.data == "eeg" else [512, 1024, 2048, 4096]
    run_start = script_start(args)
    result = eeg(args) if args.data == "eeg" else synthetic(args)
    result["validity"] = script_end(run_start)
    return result


if __name__ == "__main__":
    main()
