"""Shared helpers of the benchmark suites: timing, memory, machine description, dkrr probes.

Every timed figure is a list of repeated measurements summarised by :func:`summarize`
(median with min, max and quartiles). Peak memory is measured by :func:`traced_peak` with
``tracemalloc`` in a separate, untimed run (tracemalloc slows allocation-heavy Python
code, so it never overlaps a timed run): the figure is the peak of Python and numpy
allocations (numpy reports its data buffers to tracemalloc, from every thread, dask worker
threads included) above the level at the start of the call. BLAS-internal scratch and
C-level ``malloc`` in compiled extensions are not counted.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import platform
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = [
    "Config",
    "check_dkrr_methods",
    "check_even_sizes",
    "dkrr_ridge_classes",
    "fmt_bytes",
    "fmt_num",
    "fmt_stat",
    "frontier_time",
    "loglog_slope",
    "machine_info",
    "make_dkrr_ridge",
    "sklearn_extra_fastfood",
    "summarize",
    "time_call",
    "traced_peak",
]


@dataclasses.dataclass
class Config:
    """Run configuration shared by the suites.

    Attributes
    ----------
    quick : bool
        Small sizes (a few minutes on 2 cores in total).
    repeats : int
        Number of timed repetitions of every measurement (the median is reported).
    out : Path
        Output folder (report.md, results.json, figures).
    seed : int
        Base seed of every random draw (data subsets, feature maps).
    """

    quick: bool
    repeats: int
    out: Path
    seed: int = 0


def check_even_sizes(ap, sizes) -> None:
    """``ap.error`` (exit 2 with the usage) unless every ``--sizes`` value is an even feature
    width ``p >= 2`` (``p = 2 D`` cos/sin columns)."""
    if any(p < 2 or p % 2 for p in sizes):
        ap.error(f"--sizes must be even numbers >= 2 (p = 2D feature columns), got {sizes}")


# -- statistics ------------------------------------------------------------------------
def summarize(values) -> dict[str, Any]:
    """Median, min, max and quartiles of repeated measurements (non-finite values dropped)."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return {"median": None, "min": None, "max": None, "q1": None, "q3": None, "n": 0, "values": []}
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return {
        "median": float(med),
        "min": float(v.min()),
        "max": float(v.max()),
        "q1": float(q1),
        "q3": float(q3),
        "n": int(v.size),
        "values": [float(x) for x in v],
    }


def time_call(fn: Callable[[], Any], repeats: int, warmup: int = 0) -> tuple[dict[str, Any], Any]:
    """Wall-clock seconds of ``fn()`` over ``repeats`` runs; returns (summary, last result)."""
    result = None
    for _ in range(warmup):
        result = fn()
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return summarize(times), result


def traced_peak(fn: Callable[[], Any]) -> tuple[int, Any]:
    """Peak traced allocation (bytes above the starting level) during ``fn()``."""
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return int(max(peak - base, 0)), result


def frontier_time(widths_time, widths_err, target: float) -> tuple[float | None, str]:
    """Time to reach error ``target`` along a time/error frontier, interpolated log-log.

    ``widths_time``, ``widths_err``: one method's fit time and test error at each width.
    The frontier keeps, in order of time, the points that lower the best error so far.
    Returns ``(time, kind)`` with kind ``"interpolated"``, ``"upper bound"`` (the fastest
    point already has an error <= target) or ``"not reached"`` (time None).
    """
    pts = sorted(zip(widths_time, widths_err))
    front, best = [], np.inf
    for t, e in pts:
        if e < best:
            front.append((t, e))
            best = e
    if front[0][1] <= target:
        return front[0][0], "upper bound"
    for (t0, e0), (t1, e1) in zip(front, front[1:]):
        if e1 <= target < e0:
            if e0 <= 0 or e1 <= 0 or target <= 0:  # a zero error: linear in the error instead
                f = (e0 - target) / (e0 - e1)
            else:
                f = (np.log(e0) - np.log(target)) / (np.log(e0) - np.log(e1))
            return float(np.exp(np.log(t0) + f * (np.log(t1) - np.log(t0)))), "interpolated"
    return None, "not reached"


def loglog_slope(x, y) -> float | None:
    """Least-squares slope of log(y) against log(x) (None with fewer than 2 valid points)."""
    pts = [(a, b) for a, b in zip(x, y) if a and b and a > 0 and b > 0]
    if len(pts) < 2:
        return None
    lx, ly = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(lx, ly, 1)[0])


# -- formatting ------------------------------------------------------------------------
def fmt_num(x, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 1e4 or ax < 1e-3:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def fmt_stat(s: dict | None, scale: float = 1.0, digits: int = 3) -> str:
    """``median [min-max]`` of a :func:`summarize` dict, values multiplied by ``scale``."""
    if not s or s.get("median") is None:
        return "n/a"
    med, lo, hi = (s[k] * scale for k in ("median", "min", "max"))
    if s.get("n", 1) <= 1:
        return fmt_num(med, digits)
    return f"{fmt_num(med, digits)} [{fmt_num(lo, digits)}-{fmt_num(hi, digits)}]"


def fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "n/a"
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= f:
            return f"{n / f:.3g} {unit}"
    return f"{int(n)} B"


# -- machine ---------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return sorted(flags & {"avx", "avx2", "fma", "avx512f", "avx512dq", "avx512vl", "sse4_2"})
    except OSError:
        pass
    return []


def _mem_total() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _version(mod: str) -> str:
    """Version of a library, or why it does not import (the header still shows a dkrr that
    fails to import; the suites then fail with the error)."""
    try:
        m = __import__(mod)
        return str(getattr(m, "__version__", "unknown"))
    except Exception as exc:  # pragma: no cover - depends on the environment
        return f"not importable ({type(exc).__name__})"


def _git_commit() -> str | None:
    import subprocess

    try:
        root = Path(__file__).resolve().parents[1]
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=10,
        )
        commit = out.stdout.strip() or None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10,
        ).stdout.strip()
        return f"{commit}{' (working tree modified)' if dirty else ''}" if commit else None
    except Exception:  # pragma: no cover
        return None


def machine_info() -> dict[str, Any]:
    """Cores, memory, CPU model and flags, BLAS (threadpoolctl), library versions, load."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        affinity = os.cpu_count()
    try:
        from threadpoolctl import threadpool_info

        blas = [
            {k: v for k, v in info.items() if k in ("user_api", "internal_api", "version", "num_threads", "threading_layer", "architecture", "prefix")}
            for info in threadpool_info()
        ]
    except Exception as exc:  # pragma: no cover
        blas = [{"error": repr(exc)}]
    try:
        load = list(os.getloadavg())
    except OSError:  # pragma: no cover
        load = None
    return {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "logical_cores": os.cpu_count(),
        "cores_available": affinity,
        "memory_total_bytes": _mem_total(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "blas": blas,
        "versions": {m: _version(m) for m in ("numpy", "scipy", "sklearn", "dask", "distributed", "zarr", "numba", "dkrr")},
        "dkrr_commit": _git_commit(),
        "load_average_at_start": load,
    }


def machine_line() -> str:
    """One report line naming the machine a run measured: CPU model, cores, memory,
    Python and the numeric libraries' versions (a report from another machine says so)."""
    m = machine_info()
    mem = m["memory_total_bytes"]
    blas = ", ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('architecture')})" for b in m["blas"]
                     if b.get("user_api") == "blas")
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items())
    memory = f"{mem / 2**30:.0f} GiB memory" if mem else "memory unknown"
    return (f"machine: {m['cpu_model']}, {m['cores_available']} cores available ({m['logical_cores']} logical), "
            f"{memory}; Python {m['python']}; BLAS {blas}; {versions}")


# -- dkrr probes -----------------------------------------------------------------------
def dkrr_ridge_classes() -> tuple[type, type]:
    """``(RandomFeatureRidge, RandomFeatureRidgeClassifier)`` from the public ``dkrr`` package.

    Any import error propagates: a benchmark of dkrr without dkrr is a failed run, never a
    report that says "not available".
    """
    from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier

    return RandomFeatureRidge, RandomFeatureRidgeClassifier


def make_dkrr_ridge(cls: type, **params) -> Any:
    """``cls(**params)``, refusing any parameter ``cls`` does not have (no silent drop).

    Raises
    ------
    TypeError
        Names the unknown parameters and the accepted ones (a misspelled ``chunk_rows``
        must not benchmark the default instead).
    """
    accepted = set(cls().get_params())
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise TypeError(f"{cls.__name__} has no parameter(s) {unknown}; accepted: {sorted(accepted)}")
    return cls(**params)


def check_dkrr_methods(cls: type, methods: list[str], regression: bool = True) -> None:
    """Fit and predict each dkrr method on a tiny problem before a suite measures it.

    Raises
    ------
    RuntimeError
        Naming the method that failed to fit or predict, chained to its error.
    """
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 4))
    y = X[:, 0] if regression else np.where(X[:, 0] > 0, 1, -1)
    for m in methods:
        try:
            est = make_dkrr_ridge(cls, method=m, n_components=8, gamma=0.5, alpha=1.0, random_state=0)
            est.fit(X, y)
            est.predict(X[:4])
        except Exception as exc:
            raise RuntimeError(f"dkrr {cls.__name__}(method={m!r}) fails on a 64 x 4 problem: "
                               f"{type(exc).__name__}: {exc}") from exc


def sklearn_extra_fastfood() -> tuple[type | None, str | None]:
    """scikit-learn-extra's Fastfood class, or the reason it cannot be used."""
    import contextlib
    import io

    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf):
            from sklearn_extra.kernel_approximation import Fastfood  # type: ignore
        return Fastfood, None
    except Exception as exc:
        return None, f"scikit-learn-extra not usable: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
