"""What this process may use: the memory of the host and of its cgroup, and the workers
of a distributed Client, as the memory checks and the messages need them.

* :func:`cgroup_memory` reads the memory limit of this process's cgroup (a container's, a
  SLURM job's, a systemd unit's; v2 or v1) and what it leaves;
* :func:`local_memory` is the memory available to this process: psutil's available
  memory of the host, or what the cgroup limit leaves when that is less;
* :func:`scheduler_workers` lists the scheduler's record of every worker of a Client, and
  :func:`check_worker_memory` refuses workers whose memory limit is below
  :func:`worker_memory_floor`, what a worker needs to run dkrr's tasks at all;
* :func:`cache_sizes` lists the CPU's caches (Linux sysfs) and :func:`last_level_cache`
  is the largest (the benchmarks record them);
* :func:`format_bytes` writes a size for a message.

The files read are the kernel's (``/sys/fs/cgroup``, ``/proc/self/cgroup``,
``/sys/devices/system/cpu``), never data;
a file that is missing or does not hold what the kernel writes is skipped, never an error.
"""

from __future__ import annotations

import dataclasses
import os
import sys

__all__ = ["CACHE_ROOT", "CGROUP_ROOT", "CgroupMemory", "DEFAULT_CACHE_BYTES", "HOST_MEMORY", "WORKER_BASELINE_BYTES",
           "cache_sizes", "cgroup_memory", "check_active_workers", "check_worker_memory", "distributed_client", "format_bytes",
           "last_level_cache", "local_memory", "scheduler_workers", "worker_memory_floor",
           "worker_task_memory"]

#: where the cgroup file systems are mounted (v2 at the root, v1's memory controller in memory/)
CGROUP_ROOT = "/sys/fs/cgroup"
#: cgroup v1 writes "no limit" as the largest page-aligned int64 (9223372036854771712)
_CGROUP_UNLIMITED = 2**60
#: where Linux lists the caches of the first CPU (``index*/level``, ``index*/size``)
CACHE_ROOT = "/sys/devices/system/cpu/cpu0/cache"
#: the last-level cache assumed where the kernel does not say (macOS, Windows): a common L3
DEFAULT_CACHE_BYTES = 32 * 2**20
#: what :func:`local_memory` calls the host's available memory in messages
HOST_MEMORY = "the available memory of this machine"
#: what a worker process holds once it has run dkrr's tasks, before any data: its
#: interpreter, numpy, scipy, numba's compiled kernels and BLAS (312 MiB measured in a
#: LocalCluster worker after a small fit; the 0.3 GB baseline of ``linalg/_memory.py``)
WORKER_BASELINE_BYTES = 300 * 2**20


@dataclasses.dataclass(frozen=True)
class CgroupMemory:
    """The memory limit of a cgroup (a container's, a batch job's) and what it leaves.

    Attributes
    ----------
    version : {1, 2}
        cgroup version of the files read.
    limit : int
        Bytes (``memory.max``; v1 ``memory.limit_in_bytes``).
    usage : int
        Bytes in use (``memory.current``; v1 ``memory.usage_in_bytes``; 0 when that file
        cannot be read), less the inactive file cache the kernel reclaims before it would
        refuse memory (``inactive_file`` of ``memory.stat``; v1 ``total_inactive_file``), as
        container tools count it.
    path : str
        The cgroup directory whose limit this is.
    """

    version: int
    limit: int
    usage: int
    path: str

    @property
    def available(self) -> int:
        """``limit - usage`` bytes, at least 0."""
        return max(0, self.limit - self.usage)


def _read_int(path: str) -> int | None:
    """The integer in the file ``path``; ``None`` when it is missing, unreadable, not an
    integer, or ``max`` (no limit)."""
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read(64).strip()
        return int(text)
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _inactive_file(path: str, key: str) -> int:
    """The ``key`` line of the ``memory.stat`` file ``path`` (0 when it is not there)."""
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name == key:
                    return max(0, int(value))
    except (OSError, ValueError, UnicodeDecodeError):
        pass
    return 0


def _cgroup_paths(self_cgroup: str) -> dict[int, str]:
    """This process's cgroup: ``{2: "/a/b"}`` (the ``0::`` line) and ``{1: ...}`` (the line
    of v1's memory controller) from ``self_cgroup`` (``/proc/self/cgroup``'s format)."""
    paths: dict[int, str] = {}
    try:
        with open(self_cgroup, encoding="utf-8") as fh:
            lines = fh.read(1 << 16).splitlines()
    except (OSError, UnicodeDecodeError):
        return paths
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            paths[2] = parts[2]
        elif "memory" in parts[1].split(","):
            paths[1] = parts[2]
    return paths


def _levels(base: str, path: str) -> list[str]:
    """The directories of the cgroup ``path`` under ``base`` and of its ancestors, up to
    ``base``; those that do not exist are skipped (inside a container the cgroup's own
    directory is mounted at ``base``, and a host path is not there)."""
    parts = [p for p in path.strip("/").split("/") if p and p not in (".", "..")]
    dirs = [os.path.join(base, *parts[:i]) for i in range(len(parts), 0, -1)] + [base]
    return [d for d in dirs if os.path.isdir(d)]


def cgroup_memory(root: str = CGROUP_ROOT, self_cgroup: str = "/proc/self/cgroup") -> CgroupMemory | None:
    """The tightest cgroup memory limit over this process: of its cgroup and each ancestor,
    v2 (``memory.max``, ``memory.current`` in ``root``) and v1 (``memory.limit_in_bytes``,
    ``memory.usage_in_bytes`` in ``root/memory``), the level that leaves the fewest bytes.

    Parameters
    ----------
    root : str, default=CGROUP_ROOT
        Where the cgroup file systems are mounted.
    self_cgroup : str, default="/proc/self/cgroup"
        The file naming this process's cgroup (missing: only ``root`` itself is read).

    Returns
    -------
    CgroupMemory or None
        ``None`` when no level sets a limit (``max``, v1's unlimited value, no files: a
        host without cgroup limits, or no cgroups at all).
    """
    paths = _cgroup_paths(self_cgroup)
    found = []
    for version, base, limit_file, usage_file, stat_key in (
            (2, root, "memory.max", "memory.current", "inactive_file"),
            (1, os.path.join(root, "memory"), "memory.limit_in_bytes", "memory.usage_in_bytes",
             "total_inactive_file")):
        for level in _levels(base, paths.get(version, "/")):
            limit = _read_int(os.path.join(level, limit_file))
            if limit is None or limit <= 0 or limit >= _CGROUP_UNLIMITED:
                continue
            usage = _read_int(os.path.join(level, usage_file)) or 0
            usage = max(0, usage - _inactive_file(os.path.join(level, "memory.stat"), stat_key))
            found.append(CgroupMemory(version, limit, usage, level))
    return min(found, key=lambda c: c.available, default=None)


def local_memory(root: str = CGROUP_ROOT) -> tuple[int, str]:
    """``(bytes, where)``: the memory available to this process - psutil's available
    memory of the host, or what this process's cgroup limit leaves (:func:`cgroup_memory`
    under ``root``) when that is less - and what it is, for messages."""
    import psutil

    host = int(psutil.virtual_memory().available)
    cgroup = cgroup_memory(root)
    if cgroup is None or cgroup.available >= host:
        return host, HOST_MEMORY
    return cgroup.available, (
        f"the memory left under this process's cgroup v{cgroup.version} limit of "
        f"{format_bytes(cgroup.limit)} at {cgroup.path} with {format_bytes(cgroup.usage)} in use"
    )


def cache_sizes(root: str = CACHE_ROOT) -> list[tuple[int | None, int]]:
    """``(level, bytes)`` of every cache of the first CPU that Linux lists under ``root``
    (``index*/size``, e.g. ``32768K``, and ``index*/level``; level None where unreadable);
    entries without a readable positive size are skipped."""
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
    out = []
    try:
        names = os.listdir(root)
    except OSError:
        names = []
    for name in names:
        if not name.startswith("index"):
            continue
        try:
            with open(os.path.join(root, name, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        number, unit = text.rstrip("KMG"), text[len(text.rstrip("KMG")):]
        if not (number.isdigit() and unit in units and int(number) > 0):
            continue
        try:
            with open(os.path.join(root, name, "level")) as f:
                level = f.read().strip()
        except OSError:
            level = ""
        out.append((int(level) if level.isdigit() else None, int(number) * units[unit]))
    return out


def last_level_cache(root: str = CACHE_ROOT) -> int:
    """Bytes of the largest cache of the first CPU (its last level, the L3 of most
    machines) as Linux lists it under ``root`` (:func:`cache_sizes`), or
    :data:`DEFAULT_CACHE_BYTES` where no such file can be read."""
    return max((size for _, size in cache_sizes(root)), default=DEFAULT_CACHE_BYTES)


def format_bytes(n: float) -> str:
    """A size for a message, in the largest binary unit it reaches: ``512 bytes``,
    ``3.50 KiB``, ``18.4 MiB``, ``256 MiB``, ``1.00 GiB``, ``2048 GiB`` (three significant
    digits below 100 of a unit, whole units above; GiB is the largest unit)."""
    n = float(n)
    if abs(n) < 1024:
        return f"{n:.0f} bytes"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            v = n / size
            if unit == "GiB" and abs(v) >= 1000:
                return f"{v:.0f} GiB"
            return f"{v:.2f} {unit}" if abs(v) < 10 else f"{v:.1f} {unit}" if abs(v) < 100 else f"{v:.0f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def _enforced_fraction() -> tuple[float, str] | None:
    """The fraction of a worker's memory limit at which distributed pauses it
    (``distributed.worker.memory.pause``, 0.8 by default) or, without pausing, restarts it
    (``terminate``, 0.95), with that verb; None where this process's dask config turns both
    off (the limit is then only read, e.g. for spilling)."""
    import dask

    fractions = [(float(f), verb) for f, verb in ((dask.config.get("distributed.worker.memory.pause", 0.8), "pauses"),
                 (dask.config.get("distributed.worker.memory.terminate", 0.95), "restarts")) if f]
    return min(fractions) if fractions else None


def worker_memory_floor() -> float:
    """The least memory limit a worker needs to run dkrr's tasks at all:
    :data:`WORKER_BASELINE_BYTES` over the fraction of its limit at which distributed
    pauses or restarts it (:func:`_enforced_fraction`): 375 MiB by default, before any
    data; 0 where both are off."""
    enforced = _enforced_fraction()
    return WORKER_BASELINE_BYTES / enforced[0] if enforced else 0.0


def worker_task_memory(limit: int) -> tuple[int, str]:
    """``(bytes, words)``: what the tasks of a worker whose memory limit is ``limit`` can
    hold, and how the messages say it. The limit times the fraction at which distributed
    pauses (or restarts) the worker, less :data:`WORKER_BASELINE_BYTES` that the worker
    holds itself: 463 MiB of a 954 MiB (1 GB) limit. A fit's worker part estimated within
    the whole limit (811 MiB at p = 10,240) had the nanny restart the worker at each try.
    Where both are off the whole limit, which is then only read."""
    enforced = _enforced_fraction()
    if enforced is None:
        return int(limit), "the memory limit of a Dask worker"
    fraction, verb = enforced
    return max(0, int(limit * fraction - WORKER_BASELINE_BYTES)), (
        f"what a Dask worker's tasks can hold, {fraction:.0%} of its {format_bytes(limit)} memory limit (where "
        f"distributed {verb} it) less about {format_bytes(WORKER_BASELINE_BYTES)} that the worker holds itself")


def check_worker_memory(client, memory_limit=None) -> None:
    """Refuse workers whose memory limit is below what a worker needs to run dkrr's tasks
    at all (:func:`worker_memory_floor`): their nannies would restart them at every task,
    or in a loop that no task survives and the fit waits on forever. Checked on the
    workers' own limits (also those ``"auto"`` gave; a worker without a limit passes).

    ``memory_limit``: the argument of a LocalCluster that :func:`dkrr.cluster.local_cluster`
    started (an :class:`~dkrr.errors.InvalidParameterError` names it and the cluster is
    closed again); ``None``, the workers of the active Client that a fit is about to use
    (a :class:`~dkrr.errors.MemoryBudgetError`, before any task).
    """
    from .errors import InvalidParameterError, MemoryBudgetError

    floor = worker_memory_floor()
    limits = sorted({int(w.get("memory_limit") or 0) for w in scheduler_workers(client)} - {0})
    if not limits or limits[0] >= floor:
        return
    fraction, verb = _enforced_fraction()  # a floor above 0: one of them is on
    why = (f"a worker holds about {format_bytes(WORKER_BASELINE_BYTES)} once it has run dkrr's tasks (its "
           f"libraries and compiled kernels), and distributed {verb} a worker at {fraction:.0%} of its limit, "
           f"so each needs at least {format_bytes(floor)}, and more for its data: its nanny would "
           "restart it at every task, or in a loop that the command would wait on forever.")
    if memory_limit is not None:
        raise InvalidParameterError(
            f"the LocalCluster's workers have a memory limit of {format_bytes(limits[0])} each "
            f"(memory_limit={memory_limit!r}, --memory-limit): {why} Give each worker 1 GB or more, or "
            "fewer workers (--workers, n_workers) to share the memory."
        )
    raise MemoryBudgetError(
        f"the active Dask client's workers have a memory limit of {format_bytes(limits[0])} (the smallest): "
        f"{why} Give each worker 1 GB or more (LocalCluster(memory_limit=...), `dask worker --memory-limit`), "
        "or fewer workers to share the memory."
    )


def check_active_workers() -> None:
    """:func:`check_worker_memory` on the workers of the distributed Client that
    ``dask.compute`` would use now, if any (the estimators' ``fit``, before their first
    task)."""
    client = distributed_client()
    if client is not None:
        check_worker_memory(client)


def distributed_client():
    """The distributed Client that ``dask.compute`` would use now, else None: the threaded
    or synchronous scheduler, also where a Client exists but dask's ``scheduler`` setting
    names another (``dask.config.set(scheduler="threads")``). Every dkrr computation asks
    this, so that its tasks, progress bar and memory checks follow the same scheduler.

    distributed is not imported for it: no Client exists before distributed is imported
    (:func:`dkrr.io.ingest` on the threaded scheduler does not import it)."""
    if "distributed" not in sys.modules:
        return None
    from dask.base import get_scheduler

    try:
        client = getattr(get_scheduler(), "__self__", None)
    except (RuntimeError, ValueError):  # set to "distributed" with no Client: dask.compute says so
        return None
    return client if callable(getattr(client, "scatter", None)) else None


def scheduler_workers(client) -> list[dict]:
    """The scheduler's record of each worker of ``client`` (``nthreads``, ``memory_limit``,
    ...): every worker, where the scheduler would otherwise list only the first few."""
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # older distributed: no n_workers argument, every worker listed
        info = client.scheduler_info()
    return list(info["workers"].values())
