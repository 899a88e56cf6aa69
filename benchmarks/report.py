"""Assemble and write the benchmark report: ``report.md`` and ``results.json``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ._common import fmt_bytes

__all__ = ["write_results", "render_report", "to_jsonable"]


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, paths and non-finite floats into plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _header(meta: dict[str, Any]) -> list[str]:
    m = meta["machine"]
    blas = "; ".join(
        f"{b.get('internal_api', b.get('user_api', '?'))} {b.get('version', '')} ({b.get('num_threads', '?')} threads"
        f"{', ' + b['architecture'] if b.get('architecture') else ''})"
        for b in m["blas"]
    )
    v = m["versions"]
    load = m.get("load_average_at_start")
    validity = meta.get("validity") or {"publishable": False, "problems": ["no validity record (run still in progress?)"]}
    others = validity.get("other_cores_busy")
    stamp = (["**Publishable**: quiet at the start and during the run, committed tree."] if validity["publishable"] else
             ["**NOT FOR PUBLICATION**: " + "; ".join(validity["problems"]) + "."])
    return [
        "# dkrr benchmark report",
        "",
        *stamp,
        "",
        f"Command: `{meta['command']}`",
        "",
        f"- Started {meta['started']}, took {meta['duration_s']:.0f} s; mode: {'quick' if meta['quick'] else 'full'}, "
        f"repeats = {meta['repeats']}, seed = {meta['seed']}; suites: {', '.join(meta['suites'])}.",
        f"- Machine: {m['cpu_model']} ({', '.join(m['cpu_flags'])}), {m['cores_available']} cores available of "
        f"{m['logical_cores']} logical, {fmt_bytes(m['memory_total_bytes'])} memory; {m['platform']}.",
        f"- BLAS (threadpoolctl): {blas or 'none found'}.",
        f"- Python {m['python']}; numpy {v['numpy']}, scipy {v['scipy']}, scikit-learn {v['sklearn']}, dask {v['dask']}, "
        f"distributed {v['distributed']}, zarr {v['zarr']}, numba {v['numba']}, dkrr {v['dkrr']} (commit {m['dkrr_commit']}).",
        f"- Load average at start (1/5/15 min): {', '.join(f'{x:.2f}' for x in load) if load else 'n/a'} "
        f"(a load above 0 means other work shared the cores: timings are noisier); other processes "
        f"kept {f'{others:.2f}' if others is not None else 'n/a'} cores busy on average during the run.",
        "",
        "Every figure is the median over repeated runs with [min-max] in brackets; ratios compare "
        "measurements taken in this same run.",
        "",
    ]


def render_report(results: dict[str, Any], renderers: dict[str, Any], headlines: dict[str, Any] | None = None) -> str:
    L = _header(results["meta"])
    heads = []
    for name, suite in results["suites"].items():
        fn = (headlines or {}).get(name)
        if fn is None or suite["status"] != "ok":
            continue
        try:
            heads += [f"[{name}] {h}" for h in fn(suite["result"])]
        except Exception as exc:
            heads.append(f"[{name}] (headline failed: {type(exc).__name__}: {exc})")
    if heads:
        L += ["## Headline", ""] + [f"- {h}" for h in heads] + [""]
    notes = []
    for name, suite in results["suites"].items():
        for n in suite.get("result", {}).get("notes", []) or []:
            notes.append(f"[{name}] {n}")
    if notes:
        L += ["## Findings flagged by the suites", ""] + [f"- {n}" for n in notes] + [""]
    for name, suite in results["suites"].items():
        L += [f"## {suite['title']} (`{name}`)", "", f"Suite time: {suite['duration_s']:.1f} s.", ""]
        if suite["status"] != "ok":
            L += ["Suite failed:", "", "```", suite.get("error", ""), "```", ""]
            continue
        try:
            L.append(renderers[name](suite["result"]))
        except Exception as exc:  # a rendering bug must not lose the results
            L.append(f"(rendering failed: {type(exc).__name__}: {exc}; see results.json)")
        L.append("")
    return "\n".join(L)


def write_results(out: Path, results: dict[str, Any], renderers: dict[str, Any], headlines: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """Write ``results.json`` and ``report.md`` into ``out``; return both paths."""
    out.mkdir(parents=True, exist_ok=True)
    jpath = out / "results.json"
    jpath.write_text(json.dumps(to_jsonable(results), indent=1, allow_nan=False) + "\n")
    rpath = out / "report.md"
    rpath.write_text(render_report(results, renderers, headlines) + "\n")
    return jpath, rpath
