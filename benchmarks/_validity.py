"""Whether a benchmark run may be published: a quiet machine and a committed tree.

Timings taken while other work shares the cores, or from a tree that differs from the
commit the report names, are not evidence. Every report states the load average at its
start and end, the commit and whether the tree was modified; :func:`publication_problems`
turns those facts into the reasons a run is *not for publication* (an empty list means it
may be quoted), and :func:`check_quiet` refuses to start a run on a busy machine unless the
caller accepts an unpublishable run.

The load threshold is per available core: ``load_1min / cores <= max_load_per_core``
(default 0.25: on 2 cores, a 1-minute load of at most 0.5 at the start and at the end).
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["DEFAULT_MAX_LOAD_PER_CORE", "LoadTooHighError", "check_quiet", "load_average", "publication_problems"]

#: 1-minute load average per available core above which a run is not for publication
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


def publication_problems(
    load_start: list[float] | None,
    load_end: list[float] | None,
    commit: str | None,
    *,
    cores: int | None = None,
    max_load_per_core: float = DEFAULT_MAX_LOAD_PER_CORE,
) -> list[str]:
    """Reasons a run's numbers must not be quoted (empty: publishable).

    Parameters
    ----------
    load_start, load_end : list of float or None
        Load averages at the start and end of the run (``os.getloadavg()``).
    commit : str or None
        The commit string of :func:`benchmarks._common.machine_info` (``"<sha>"`` or
        ``"<sha> (working tree modified)"``; None outside a git checkout).
    cores : int, optional
        Cores available to the run (default: this process's affinity).
    max_load_per_core : float
        Threshold on the 1-minute load average per core.
    """
    cores = _cores() if cores is None else int(cores)
    limit = max_load_per_core * cores
    problems = []
    for when, load in (("start", load_start), ("end", load_end)):
        if load is None:
            problems.append(f"load average at the {when} unknown")
        elif load[0] > limit:
            problems.append(
                f"1-minute load {load[0]:.2f} at the {when} is above {limit:.2f} "
                f"({max_load_per_core} per core x {cores} cores): other work shared the cores"
            )
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


def validity_meta(load_start: Any, commit: str | None, *, max_load_per_core: float) -> dict[str, Any]:
    """The ``validity`` entry of a report's metadata, with the load at the end taken now."""
    load_end = load_average()
    problems = publication_problems(load_start, load_end, commit, max_load_per_core=max_load_per_core)
    return {
        "load_average_at_end": load_end,
        "max_load_per_core": max_load_per_core,
        "publishable": not problems,
        "problems": problems,
    }


def add_load_arguments(parser) -> None:
    """``--max-load-per-core`` and ``--allow-load`` on a benchmark script's parser."""
    parser.add_argument("--max-load-per-core", type=float, default=DEFAULT_MAX_LOAD_PER_CORE,
                        help="1-minute load average per core above which a run is not publishable (default %(default)s)")
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
    print(f"dkrr commit {commit}; load average at start {load}")
    return {"load_average_at_start": load, "dkrr_commit": commit, "max_load_per_core": args.max_load_per_core}


def script_end(start: dict[str, Any]) -> dict[str, Any]:
    """Print and return the validity of a standalone script's run (see :func:`script_start`)."""
    v = validity_meta(start["load_average_at_start"], start["dkrr_commit"], max_load_per_core=start["max_load_per_core"])
    v.update(start)
    print("Publishable: quiet at start and end, committed tree." if v["publishable"] else
          "NOT FOR PUBLICATION: " + "; ".join(v["problems"]))
    return v
