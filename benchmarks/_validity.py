"""Whether a benchmark run may be published: a quiet machine and a committed tree.

Timings taken while other work shares the cores, or from a tree that differs from the
commit the report names, are not evidence. Every report states the load average at its
start, the CPU time *other* processes used while it ran, the commit and whether the tree
was modified; :func:`publication_problems` turns those facts into the reasons a run is
*not for publication* (an empty list means it may be quoted), and :func:`check_quiet`
refuses to start a run on a busy machine unless the caller accepts an unpublishable run.

Two measures, one threshold per available core (``max_load_per_core``, default 0.25: on 2
cores, half a core):

- before the run, the 1-minute load average (``load_1min / cores``);
- during the run, the cores other processes kept busy on average: the machine's busy CPU
  time (``/proc/stat``) minus this process's and its reaped children's (``getrusage``;
  the suites close their clusters, so worker processes are counted as ours), divided by
  the wall time. The load average at the end cannot serve: it counts the benchmark's own
  threads.

A standalone script's validity also records the machine (:func:`machine_facts`: CPU model,
cores, caches and the GEMM rate numpy reaches on it), because ratios between dkrr's paths
move with it: a machine with faster BLAS shrinks the Gram's share of a fit and leaves the
parts that are not GEMM (features, the refinement's matrix-vector passes, the fold
reductions) a larger one.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any

__all__ = [
    "DEFAULT_MAX_LOAD_PER_CORE",
    "LoadTooHighError",
    "check_quiet",
    "cpu_snapshot",
    "load_average",
    "machine_facts",
    "other_cores_busy",
    "publication_problems",
    "write_report",
]

#: cores kept busy by other work, per available core, above which a run is not for publication
DEFAULT_MAX_LOAD_PER_CORE = 0.25


class LoadTooHighError(RuntimeError):
    """The machine is busy: a run started now would not be publishable."""


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def load_average() -> list[float] | None:
    """``[1, 5, 15]``-minute load averages, or None where the platform has none."""
    try:
        return [float(x) for x in os.getloadavg()]
    except (OSError, AttributeError):  # pragma: no cover
        return None


def _machine_busy_seconds() -> float | None:
    """CPU seconds all processes have used since boot (``/proc/stat``), or None."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()
    except OSError:  # pragma: no cover - not Linux
        return None
    if not fields or fields[0] != "cpu":
        return None
    v = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
    return busy / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def cpu_snapshot() -> dict[str, float | None]:
    """Wall clock, the machine's busy CPU seconds and this process tree's, now."""
    return {"wall": time.monotonic(), "machine": _machine_busy_seconds(), "own": _own_seconds()}


def other_cores_busy(start: dict[str, Any], end: dict[str, Any]) -> float | None:
    """Average number of cores other processes kept busy between two :func:`cpu_snapshot`."""
    if start.get("machine") is None or end.get("machine") is None:
        return None
    wall = end["wall"] - start["wall"]
    if wall <= 0:
        return None
    others = (end["machine"] - start["machine"]) - (end["own"] - start["own"])
    return max(0.0, others / wall)


def publication_problems(
    load_start: list[float] | None,
    others_busy: float | None,
    commit: str | None,
    *,
    cores: int | None = None,
    max_load_per_core: float = DEFAULT_MAX_LOAD_PER_CORE,
) -> list[str]:
    """Reasons a run's numbers must not be quoted (empty: publishable).

    Parameters
    ----------
    load_start : list of float or None
        Load averages at the start of the run (``os.getloadavg()``).
    others_busy : float or None
        Cores other processes kept busy on average during the run (:func:`other_cores_busy`).
    commit : str or None
        The commit string of :func:`benchmarks._common.machine_info` (``"<sha>"`` or
        ``"<sha> (working tree modified)"``; None outside a git checkout).
    cores : int, optional
        Cores available to the run (default: this process's affinity).
    max_load_per_core : float
        Threshold on both measures, per core.
    """
    cores = _cores() if cores is None else int(cores)
    limit = max_load_per_core * cores
    problems = []
    if load_start is None:
        problems.append("load average at the start unknown")
    elif load_start[0] > limit:
        problems.append(f"1-minute load {load_start[0]:.2f} at the start is above {limit:.2f} "
                        f"({max_load_per_core} per core x {cores} cores): other work shared the cores")
    if others_busy is None:
        problems.append("CPU time of other processes during the run unknown")
    elif others_busy > limit:
        problems.append(f"other processes kept {others_busy:.2f} cores busy on average during the run, "
                        f"above {limit:.2f} ({max_load_per_core} per core x {cores} cores)")
    if commit is None:
        problems.append("commit unknown (not a git checkout)")
    elif "modified" in commit:
        problems.append("working tree modified: the numbers are not those of the named commit")
    return problems


def check_quiet(*, allow_load: bool, max_load_per_core: float = DEFAULT_MAX_LOAD_PER_CORE,
                cores: int | None = None, load: list[float] | None = None) -> list[float] | None:
    """The load at the start; raises :class:`LoadTooHighError` if it is too high and not allowed.

    ``load`` defaults to the current load average (a parameter for tests).
    """
    cores = _cores() if cores is None else int(cores)
    load = load_average() if load is None else load
    if load is not None and load[0] > max_load_per_core * cores and not allow_load:
        raise LoadTooHighError(
            f"the 1-minute load average is {load[0]:.2f} on {cores} cores (limit "
            f"{max_load_per_core * cores:.2f}): timings now would measure other work too. Wait "
            "for a quiet machine, or pass --allow-load to run anyway (the report is then "
            "marked NOT FOR PUBLICATION)."
        )
    return load


def gemm_gflops(dtype: str, n: int = 4096, p: int = 2048, repeats: int = 3) -> float:
    """GFLOP/s of numpy's ``Z.T @ Z`` (``n x p``, counted as ``2 n p^2`` flops, the way
    this project quotes GEMM rates) with the BLAS threads numpy has: the best of
    ``repeats`` after one warm-up."""
    import numpy as np

    try:
        from ._common import time_call
    except ImportError:  # run as a script from benchmarks/
        from _common import time_call  # type: ignore[no-redef]

    Z = np.random.default_rng(0).standard_normal((n, p)).astype(dtype)
    best = time_call(lambda: Z.T @ Z, repeats, warmup=1)[0]["min"]
    return 2.0 * n * p * p / best / 1e9


def machine_facts() -> dict[str, Any]:
    """What a report says about the machine it ran on: CPU model and vector flags, available
    cores, the first core's L2 and the largest cache (bytes; None where Linux does not list
    them), and :func:`gemm_gflops` in float64 and float32 (about a second, measured at the
    script's start)."""
    from dkrr._system import cache_sizes, last_level_cache

    try:
        from ._common import _cpu_flags, _cpu_model
    except ImportError:  # run as a script from benchmarks/
        from _common import _cpu_flags, _cpu_model  # type: ignore[no-redef]

    l2 = max((size for level, size in cache_sizes() if level == 2), default=None)
    return {"cpu": _cpu_model(), "flags": _cpu_flags(), "cores": _cores(), "l2_bytes": l2,
            "last_level_cache_bytes": last_level_cache(),
            "gemm_gflops": {dt: round(gemm_gflops(dt), 1) for dt in ("float64", "float32")}}


def validity_meta(load_start: Any, commit: str | None, cpu_start: dict[str, Any], *,
                  max_load_per_core: float) -> dict[str, Any]:
    """The ``validity`` entry of a report's metadata, measured up to now."""
    others = other_cores_busy(cpu_start, cpu_snapshot())
    problems = publication_problems(load_start, others, commit, max_load_per_core=max_load_per_core)
    return {
        "load_average_at_end": load_average(),  # for the record: it includes this run's own work
        "other_cores_busy": others,
        "max_load_per_core": max_load_per_core,
        "publishable": not problems,
        "problems": problems,
    }


def add_load_arguments(parser) -> None:
    """``--max-load-per-core`` and ``--allow-load`` on a benchmark script's parser."""
    parser.add_argument("--max-load-per-core", type=float, default=DEFAULT_MAX_LOAD_PER_CORE,
                        help="load per core (before the run; of other processes during it) above which "
                             "a run is not publishable (default %(default)s)")
    parser.add_argument("--allow-load", action="store_true",
                        help="run on a busy machine anyway; the results are marked NOT FOR PUBLICATION")


def script_start(args) -> dict[str, Any]:
    """Start of a standalone benchmark script: refuse a busy machine (unless ``--allow-load``)
    and return the facts :func:`script_end` checks. Exits with status 3 when refused."""
    import sys

    try:
        from ._common import _git_commit
    except ImportError:  # run as a script from benchmarks/
        from _common import _git_commit  # type: ignore[no-redef]

    try:
        load = check_quiet(allow_load=args.allow_load, max_load_per_core=args.max_load_per_core)
    except LoadTooHighError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        raise SystemExit(3) from None
    commit = _git_commit()
    machine = machine_facts()
    print(f"dkrr commit {commit}; load average at start {load}; machine {machine}")
    return {"load_average_at_start": load, "dkrr_commit": commit, "max_load_per_core": args.max_load_per_core,
            "machine": machine, "cpu_start": cpu_snapshot()}


def script_end(start: dict[str, Any]) -> dict[str, Any]:
    """Print and return the validity of a standalone script's run (see :func:`script_start`)."""
    v = validity_meta(start["load_average_at_start"], start["dkrr_commit"], start["cpu_start"],
                      max_load_per_core=start["max_load_per_core"])
    v.update({k: val for k, val in start.items() if k != "cpu_start"})
    print(verdict_line(v))
    return v


def verdict_line(validity: dict[str, Any]) -> str:
    """The one line a report carries about its validity (``Publishable: ...`` or
    ``NOT FOR PUBLICATION: ...``), which the README's link check looks for."""
    return ("Publishable: quiet at start and during the run, committed tree." if validity["publishable"]
            else "NOT FOR PUBLICATION: " + "; ".join(validity["problems"]))


def write_report(out, lines: list[str], payload: dict[str, Any]) -> None:
    """A standalone script's files in the folder ``out`` (created): ``report.txt`` (the
    ``lines``, which carry the :func:`verdict_line`) and ``results.json`` (``payload``,
    which carries the validity)."""
    import json
    from pathlib import Path

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(json.dumps(payload, indent=1, default=str))
