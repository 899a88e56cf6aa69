"""Suite "roofline": dkrr against what this machine can do, measured in the same run.

Gram accumulation. The streamed fit computes ``G = Z^T Z`` over row blocks (plus the
transform and a p x p solve). Its floor is one bare ``Z.T @ Z`` on a feature matrix of the
same shape (numpy dispatches it to BLAS ``syrk``); a general ``A.T @ B`` GEMM of that shape
is measured too. Throughput is counted as ``2 n p^2`` flops (the GEMM count) for all, so
the fraction ``bare time / dkrr time`` is the share of the machine's Gram throughput that
the whole dkrr fit achieves. Stages (transform, Gram, solve) are timed on their own to
show where the rest goes.

FWHT-based maps (SORF, Fastfood). Achieved memory bandwidth of the transform against the
bandwidth of ``np.copyto`` on a large array (read + write), one thread each (dkrr runs the
FWHT single-threaded per worker thread). Traffic is counted as a lower bound: every FWHT
reads and writes the ``n x (blocks * d')`` working array once, plus reading X and writing
the ``n x D`` output; the bare FWHT kernel counts one read + write of its array.
"""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np

from ._common import Config, dkrr_ridge_classes, fmt_bytes, fmt_num, fmt_stat, make_dkrr_ridge, time_call

NAME = "roofline"
TITLE = "Roofline: Gram throughput and FWHT bandwidth"


def settings(cfg: Config) -> dict[str, Any]:
    if cfg.quick:
        return {"n": 8000, "d": 16, "D": 128, "copy_mib": 64, "fwht_rows": 8192, "fwht_d": 512, "fwht_D": 1024}
    return {"n": 60000, "d": 16, "D": 512, "copy_mib": 512, "fwht_rows": 65536, "fwht_d": 512, "fwht_D": 2048}


def _gflops(flops, s):
    return flops / s["median"] / 1e9 if s and s.get("median") else None


def gram_roofline(cfg: Config, st: dict) -> dict[str, Any]:
    from dkrr import RandomFeatures

    n, d, D = st["n"], st["d"], st["D"]
    rng = np.random.default_rng(cfg.seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X).sum(1) + 0.1 * rng.standard_normal(n)
    gamma = 0.5 / d
    rf = RandomFeatures(method="rff", n_components=D, gamma=gamma, random_state=cfg.seed).fit(X)
    p = rf.n_output_features_
    flops = 2.0 * n * p * p
    t_transform, Z = time_call(lambda: rf.transform(X), cfg.repeats, warmup=1)
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    t_syrk, _ = time_call(lambda: Z.T @ Z, cfg.repeats, warmup=1)
    B = Z.copy()
    t_gemm, _ = time_call(lambda: Z.T @ B, cfg.repeats, warmup=1)
    del B
    t_cross, _ = time_call(lambda: (Z.T @ y, Z.sum(0)), cfg.repeats)
    import scipy.linalg

    G, c = Z.T @ Z, Z.T @ y
    t_solve, _ = time_call(lambda: scipy.linalg.cho_solve(scipy.linalg.cho_factor(G + np.eye(p)), c), cfg.repeats)
    out: dict[str, Any] = {
        "n": n, "d": d, "n_components": D, "width_p": p, "flops_2np2": flops,
        "transform_s": t_transform, "bare_ZtZ_s": t_syrk, "bare_gemm_s": t_gemm, "cross_s": t_cross, "solve_s": t_solve,
        "bare_ZtZ_gflops": _gflops(flops, t_syrk), "bare_gemm_gflops": _gflops(flops, t_gemm),
    }
    reg, _ = dkrr_ridge_classes()
    fits = {}
    for label, make_X in (("numpy input", lambda: X), ("dask input (8 row chunks)", lambda: _dask(X, n // 8))):
        try:
            Xin = make_X()
            est = lambda: make_dkrr_ridge(reg, kernel="gaussian", method="rff", n_components=D, gamma=gamma, alpha=1.0,
                                          fit_intercept=True, random_state=cfg.seed, precision="float64")
            yin = y if isinstance(Xin, np.ndarray) else _dask(y, n // 8)
            t_fit, _ = time_call(lambda: est().fit(Xin, yin), cfg.repeats, warmup=1)
            fits[label] = {
                "fit_s": t_fit,
                "gflops_2np2": _gflops(flops, t_fit),
                "fraction_of_bare_ZtZ": t_syrk["median"] / t_fit["median"],
                "fraction_of_bare_ZtZ_plus_transform": (t_syrk["median"] + t_transform["median"]) / t_fit["median"],
            }
        except Exception as exc:
            fits[label] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    out["dkrr_fit"] = fits
    return out


def _dask(a, rows):
    import dask.array as da

    return da.from_array(a, chunks=(rows,) + a.shape[1:])


def fwht_bandwidth(cfg: Config, st: dict) -> dict[str, Any]:
    import threadpoolctl

    out: dict[str, Any] = {}
    nbytes = st["copy_mib"] * 2**20
    src = np.random.default_rng(cfg.seed).standard_normal(nbytes // 8)
    dst = np.empty_like(src)
    t_copy, _ = time_call(lambda: np.copyto(dst, src), cfg.repeats, warmup=1)
    copy_bw = 2 * src.nbytes / t_copy["median"]
    out["copy"] = {"bytes": 2 * src.nbytes, "time_s": t_copy, "GBps": copy_bw / 1e9}
    del src, dst
    rows, dp, D = st["fwht_rows"], st["fwht_d"], st["fwht_D"]
    try:
        from dkrr.features._hadamard import default_fwht_backend, fwht

        buf = np.random.default_rng(1).standard_normal((rows, dp))
        t_fw, _ = time_call(lambda: fwht(buf), cfg.repeats, warmup=1)
        bw = 2 * buf.nbytes / t_fw["median"]
        out["fwht_kernel"] = {"backend": default_fwht_backend(), "shape": [rows, dp], "bytes": 2 * buf.nbytes, "time_s": t_fw,
                              "GBps": bw / 1e9, "fraction_of_copy": bw / copy_bw,
                              "Gadd_per_s": rows * dp * np.log2(dp) / t_fw["median"] / 1e9}
        del buf
    except Exception as exc:
        out["fwht_kernel"] = {"error": f"not available: {type(exc).__name__}: {exc}"}
    from dkrr.features import PROJECTIONS

    X = np.random.default_rng(2).standard_normal((rows, dp))
    maps = {}
    for method, n_fwht in (("sorf", None), ("fastfood", 2)):
        if method not in PROJECTIONS:
            maps[method] = {"error": "not registered in dkrr.features.PROJECTIONS"}
            continue
        try:
            proj = PROJECTIONS[method].generate(dp, D, 1.0 / np.sqrt(dp), np.random.default_rng(cfg.seed), **PROJECTIONS[method].options)
            k = n_fwht if n_fwht is not None else int(getattr(proj, "n_hd_blocks", 3))
            blocks = int(getattr(proj, "n_blocks", -(-D // dp)))
            with threadpoolctl.threadpool_limits(1):
                t_fast, _ = time_call(lambda: proj.project(X, path="fast"), cfg.repeats, warmup=1)
                t_dense, _ = time_call(lambda: proj.project(X, path="dense"), cfg.repeats, warmup=1)
            traffic = 8 * rows * (dp + 2 * k * blocks * dp + D)
            bw = traffic / t_fast["median"]
            maps[method] = {"n_fwht_per_block": k, "blocks": blocks, "traffic_bytes_lower_bound": traffic,
                            "fast_s": t_fast, "dense_gemm_s": t_dense, "GBps": bw / 1e9, "fraction_of_copy": bw / copy_bw,
                            "auto_path": "dense" if getattr(proj, "use_dense", lambda: False)() else "fast"}
        except Exception as exc:
            maps[method] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    out["maps"] = maps
    out["shape"] = {"rows": rows, "d": dp, "D": D}
    return out


def run(cfg: Config) -> dict[str, Any]:
    st = settings(cfg)
    res: dict[str, Any] = {"settings": st}
    for key, fn in (("gram", gram_roofline), ("fwht", fwht_bandwidth)):
        try:
            res[key] = fn(cfg, st)
        except Exception:
            res[key] = {"error": traceback.format_exc(limit=5)}
    res["notes"] = _notes(res)
    return res


def _notes(res) -> list[str]:
    notes = []
    g = res.get("gram", {})
    fits = g.get("dkrr_fit")
    if isinstance(fits, dict):
        for label, f in fits.items():
            if "fraction_of_bare_ZtZ" in f and f["fraction_of_bare_ZtZ"] < 0.5:
                tr, gr, so = g["transform_s"]["median"], g["bare_ZtZ_s"]["median"], g["solve_s"]["median"]
                rest = f["fit_s"]["median"] - tr - gr - so
                notes.append(
                    f"dkrr fit ({label}) reaches {f['fraction_of_bare_ZtZ']:.0%} of the bare Z^T Z throughput (far from the "
                    f"roofline). Profile: fit {fmt_num(f['fit_s']['median'])} s = transform {fmt_num(tr)} s + Gram "
                    f"{fmt_num(gr)} s + solve {fmt_num(so)} s + "
                    + (f"{fmt_num(rest)} s of chunking / conversion / scheduling overhead." if rest > 0 else
                       "no measurable overhead (stages overlap across threads).")
                )
    for m, v in res.get("fwht", {}).get("maps", {}).items():
        if "fraction_of_copy" in v and v["fraction_of_copy"] < 0.5:
            notes.append(f"{m}: the FWHT path moves data at {v['fraction_of_copy']:.0%} of copy bandwidth (lower-bound traffic), "
                         f"so it is compute- or pass-bound rather than bandwidth-bound; FWHT kernel alone: "
                         f"{res['fwht'].get('fwht_kernel', {}).get('fraction_of_copy', float('nan')):.0%} of copy.")
    return notes


def render(res: dict[str, Any]) -> str:
    L = []
    g = res.get("gram", {})
    if "error" in g and "n" not in g:
        L += ["Gram roofline failed:", "```", g["error"], "```"]
    else:
        L += [f"Feature matrix Z: n = {g['n']} rows, p = {g['width_p']} columns (rff, d = {g['d']}, D = {g['n_components']}); "
              f"flops counted as 2 n p^2 = {g['flops_2np2']:.3g}. Times: median [min-max] over repeats.", "",
              "| operation | time s | GFLOP/s (2np^2) | fraction of bare Z^T Z |", "|---|---|---|---|",
              f"| bare numpy Z.T @ Z (syrk) | {fmt_stat(g['bare_ZtZ_s'])} | {fmt_num(g['bare_ZtZ_gflops'])} | 1 |",
              f"| bare numpy Z.T @ B (gemm, B a copy of Z) | {fmt_stat(g['bare_gemm_s'])} | {fmt_num(g['bare_gemm_gflops'])} | "
              f"{fmt_num(g['bare_ZtZ_s']['median'] / g['bare_gemm_s']['median'])} |"]
        fits = g.get("dkrr_fit")
        if isinstance(fits, str):
            L.append(f"| dkrr RandomFeatureRidge.fit | {fits} | | |")
        else:
            for label, f in fits.items():
                if "error" in f:
                    L.append(f"| dkrr fit, {label} | failed: {f['error']} | | |")
                else:
                    L.append(f"| dkrr RandomFeatureRidge.fit, {label} | {fmt_stat(f['fit_s'])} | {fmt_num(f['gflops_2np2'])} | "
                             f"{fmt_num(f['fraction_of_bare_ZtZ'])} |")
        L += ["", "Stages timed on their own (the profile of the fit):", "",
              "| stage | time s |", "|---|---|",
              f"| transform X -> Z (dkrr RandomFeatures, rff) | {fmt_stat(g['transform_s'])} |",
              f"| Gram Z^T Z | {fmt_stat(g['bare_ZtZ_s'])} |",
              f"| Z^T y and column sums | {fmt_stat(g['cross_s'])} |",
              f"| Cholesky solve (p x p) | {fmt_stat(g['solve_s'])} |", ""]
    f = res.get("fwht", {})
    if "error" in f and "copy" not in f:
        L += ["FWHT bandwidth failed:", "```", f["error"], "```"]
    else:
        c = f["copy"]
        L += [f"Copy bandwidth: np.copyto of {fmt_bytes(c['bytes'] // 2)} float64 (read + write counted): "
              f"{fmt_num(c['GBps'])} GB/s ({fmt_stat(c['time_s'])} s). One thread everywhere below.", "",
              "| kernel | shape | time s | traffic (lower bound) | GB/s | fraction of copy |", "|---|---|---|---|---|---|"]
        k = f.get("fwht_kernel", {})
        if "error" in k:
            L.append(f"| FWHT kernel | {k['error']} | | | | |")
        else:
            L.append(f"| FWHT kernel ({k['backend']}), in place | {k['shape'][0]} x {k['shape'][1]} | {fmt_stat(k['time_s'])} | "
                     f"{fmt_bytes(k['bytes'])} | {fmt_num(k['GBps'])} | {fmt_num(k['fraction_of_copy'])} |")
        shp = f.get("shape", {})
        for m, v in f.get("maps", {}).items():
            if "error" in v:
                L.append(f"| {m} | {v['error']} | | | | |")
                continue
            L.append(f"| {m} project, FWHT path ({v['blocks']} blocks x {v['n_fwht_per_block']} FWHTs) | "
                     f"{shp.get('rows')} x {shp.get('d')} -> {shp.get('D')} | {fmt_stat(v['fast_s'])} | "
                     f"{fmt_bytes(v['traffic_bytes_lower_bound'])} | {fmt_num(v['GBps'])} | {fmt_num(v['fraction_of_copy'])} |")
            L.append(f"| {m} project, dense GEMM path (same W), for reference | same | {fmt_stat(v['dense_gemm_s'])} | | | |")
        L.append("")
    if res.get("notes"):
        L += ["**Far from the roofline:**", ""] + [f"- {n}" for n in res["notes"]] + [""]
    return "\n".join(L)


def headline(res: dict[str, Any]) -> list[str]:
    out = []
    g = res.get("gram", {})
    fits = g.get("dkrr_fit")
    if isinstance(fits, dict):
        for label, f in fits.items():
            if "fraction_of_bare_ZtZ" in f:
                out.append(f"dkrr fit ({label}, n={g['n']}, p={g['width_p']}): {fmt_num(f['gflops_2np2'])} GFLOP/s = "
                           f"{f['fraction_of_bare_ZtZ']:.0%} of bare Z^T Z ({fmt_num(g['bare_ZtZ_gflops'])} GFLOP/s); "
                           f"transform + Gram alone would be {f['fraction_of_bare_ZtZ_plus_transform']:.0%}")
    elif fits:
        out.append(f"dkrr fit: {fits}")
    fw = res.get("fwht", {})
    k = fw.get("fwht_kernel", {})
    if "GBps" in k:
        out.append(f"FWHT kernel ({k['backend']}): {fmt_num(k['GBps'])} GB/s = {k['fraction_of_copy']:.0%} of copy "
                   f"({fmt_num(fw['copy']['GBps'])} GB/s)")
    for m, v in fw.get("maps", {}).items():
        if "GBps" in v:
            out.append(f"{m} FWHT path: {fmt_num(v['GBps'])} GB/s (lower-bound traffic) = {v['fraction_of_copy']:.0%} of copy")
    return out
