"""Suite "scaling": fit time and peak memory of the streamed fit versus n and versus D.

Versus n: synthetic regression at sizes a factor of 4 apart, every size written to its own
Zarr store in a temporary folder (``dask.array.to_zarr``) and fitted from
``dask.array.from_zarr``, so every point reads its rows out of core in row chunks and the
slope compares like with like. The log-log slope of the median fit time is printed (a
streamed fit is linear in n: slope about 1); peak traced memory should stay about flat in
n (the Gram matrix and one block of Z, not the data).

Versus D: in-memory numpy input at a fixed n, D doubling; the slope in D is between 1
(transform-bound) and 2 (Gram-bound, ``n p^2``).
"""

from __future__ import annotations

import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from ._common import (
    Config,
    dkrr_ridge_classes,
    fmt_bytes,
    fmt_num,
    fmt_stat,
    loglog_slope,
    make_dkrr_ridge,
    time_call,
    traced_peak,
)
from ._data import synthetic_arrays

NAME = "scaling"
TITLE = "Scaling in n (out of core from Zarr) and in D"


def settings(cfg: Config) -> dict[str, Any]:
    if cfg.quick:
        return {"d": 16, "n": [4000, 16000, 64000], "chunk_rows": 8000, "D_fixed": 64,
                "n_for_D": 4000, "D": [32, 64, 128, 256], "method": "rff"}
    return {"d": 16, "n": [50000, 200000, 800000], "chunk_rows": 50000, "D_fixed": 256,
            "n_for_D": 50000, "D": [64, 128, 256, 512, 1024], "method": "rff"}


def _write_store(path: Path, n: int, d: int, chunk_rows: int, seed: int) -> None:
    """Write X (n x d) and y to a Zarr store in chunks, never holding all rows at once."""
    import dask.array as da

    X_parts, y_parts = [], []
    for i, start in enumerate(range(0, n, chunk_rows)):
        rows = min(chunk_rows, n - start)
        X_parts.append(da.from_delayed(_delayed_rows(rows, d, seed + 1000 * i, 0), (rows, d), dtype=np.float64))
        y_parts.append(da.from_delayed(_delayed_rows(rows, d, seed + 1000 * i, 1), (rows,), dtype=np.float64))
    da.to_zarr(da.concatenate(X_parts).rechunk((chunk_rows, d)), str(path / "X"), overwrite=True)
    da.to_zarr(da.concatenate(y_parts).rechunk((chunk_rows,)), str(path / "y"), overwrite=True)


def _delayed_rows(rows, d, seed, which):
    import dask

    return dask.delayed(lambda: synthetic_arrays(rows, d, seed)[which])()


def run(cfg: Config) -> dict[str, Any]:
    st = settings(cfg)
    reg, _ = dkrr_ridge_classes()
    res: dict[str, Any] = {"settings": st}
    import dask.array as da

    d = st["d"]
    gamma = 0.5 / d

    def make(D, chunk_rows=None):
        kw = dict(kernel="gaussian", method=st["method"], n_components=D, gamma=gamma, alpha=1.0,
                  fit_intercept=True, random_state=cfg.seed)
        if chunk_rows:
            kw["chunk_rows"] = chunk_rows
        return make_dkrr_ridge(reg, **kw)

    tmp = Path(tempfile.mkdtemp(prefix="dkrr-bench-zarr-"))
    rows_n = []
    try:
        for n in st["n"]:
            try:
                store = tmp / f"n{n}"
                _write_store(store, n, d, st["chunk_rows"], cfg.seed)
                X = da.from_zarr(str(store / "X"))
                y = da.from_zarr(str(store / "y"))
                t, _ = time_call(lambda: make(st["D_fixed"]).fit(X, y), cfg.repeats, warmup=1)
                peak, _ = traced_peak(lambda: make(st["D_fixed"]).fit(X, y))
                rows_n.append({"n": n, "data_bytes": n * d * 8, "chunks": len(X.chunks[0]), "fit_s": t, "peak_traced_bytes": peak})
            except Exception:
                rows_n.append({"n": n, "error": traceback.format_exc(limit=4)})
            finally:
                shutil.rmtree(tmp / f"n{n}", ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = [r for r in rows_n if "fit_s" in r]
    res["vs_n"] = rows_n
    res["slope_time_vs_n"] = loglog_slope([r["n"] for r in ok], [r["fit_s"]["median"] for r in ok])
    res["slope_memory_vs_n"] = loglog_slope([r["n"] for r in ok], [r["peak_traced_bytes"] for r in ok])
    n = st["n_for_D"]
    X, y = synthetic_arrays(n, d, cfg.seed)
    rows_D = []
    for D in st["D"]:
        try:
            t, _ = time_call(lambda: make(D).fit(X, y), cfg.repeats, warmup=1)
            peak, _ = traced_peak(lambda: make(D).fit(X, y))
            rows_D.append({"D": D, "width_p": 2 * D, "fit_s": t, "peak_traced_bytes": peak})
        except Exception:
            rows_D.append({"D": D, "error": traceback.format_exc(limit=4)})
    okD = [r for r in rows_D if "fit_s" in r]
    res["vs_D"] = rows_D
    res["slope_time_vs_D"] = loglog_slope([r["D"] for r in okD], [r["fit_s"]["median"] for r in okD])
    res["slope_memory_vs_D"] = loglog_slope([r["D"] for r in okD], [r["peak_traced_bytes"] for r in okD])
    notes = []
    s = res["slope_time_vs_n"]
    if s is not None and s > 1.2:
        notes.append(f"fit time grows faster than linearly in n (log-log slope {s:.2f}).")
    sm = res["slope_memory_vs_n"]
    if sm is not None and sm > 0.5:
        notes.append(f"peak memory grows with n (log-log slope {sm:.2f}): the fit is not streaming in memory.")
    res["notes"] = notes
    return res


def render(res: dict[str, Any]) -> str:
    st = res["settings"]
    if "status" in res:
        return res["status"]
    L = [f"Synthetic regression, d = {st['d']}, method {st['method']}, gamma = 0.5/d, alpha = 1. "
         f"Versus n: D = {st['D_fixed']} (p = {2 * st['D_fixed']}), each size read from its own Zarr store "
         f"(dask.array.from_zarr, {st['chunk_rows']}-row chunks, threaded scheduler). Peak memory: tracemalloc peak "
         "(separate untimed run).", "",
         "| n | data size | chunks | fit s | peak traced mem |", "|---|---|---|---|---|"]
    for r in res["vs_n"]:
        if "error" in r:
            L.append(f"| {r['n']} | failed: {r['error'].splitlines()[-1]} | | | |")
        else:
            L.append(f"| {r['n']} | {fmt_bytes(r['data_bytes'])} | {r['chunks']} | {fmt_stat(r['fit_s'])} | {fmt_bytes(r['peak_traced_bytes'])} |")
    L += ["", f"**log-log slope of fit time vs n: {fmt_num(res['slope_time_vs_n'])}** (expected about 1); "
          f"of peak memory vs n: {fmt_num(res['slope_memory_vs_n'])} (expected about 0).", "",
          f"Versus D at n = {st['n_for_D']} (numpy input):", "",
          "| D | width p | fit s | peak traced mem |", "|---|---|---|---|"]
    for r in res["vs_D"]:
        if "error" in r:
            L.append(f"| {r['D']} | failed: {r['error'].splitlines()[-1]} | | |")
        else:
            L.append(f"| {r['D']} | {r['width_p']} | {fmt_stat(r['fit_s'])} | {fmt_bytes(r['peak_traced_bytes'])} |")
    L += ["", f"**log-log slope of fit time vs D: {fmt_num(res['slope_time_vs_D'])}** (1 = transform-bound, 2 = Gram-bound); "
          f"of peak memory vs D: {fmt_num(res['slope_memory_vs_D'])}.", ""]
    if res.get("notes"):
        L += [f"- {n}" for n in res["notes"]] + [""]
    return "\n".join(L)


def headline(res: dict[str, Any]) -> list[str]:
    if "status" in res:
        return [res["status"]]
    ns = [r["n"] for r in res["vs_n"] if "fit_s" in r]
    return [f"fit time vs n ({', '.join(map(str, ns))}; Zarr, out of core): log-log slope {fmt_num(res['slope_time_vs_n'])}; "
            f"peak memory slope {fmt_num(res['slope_memory_vs_n'])}",
            f"fit time vs D: log-log slope {fmt_num(res['slope_time_vs_D'])}"]
