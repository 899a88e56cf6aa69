"""Memory estimates of a streamed fit, checked before anything is computed.

A random-feature ridge fit holds, per task, a few objects whose size follows from the
parameters alone (ALGORITHMS.md section 3; float64 everywhere, 8 bytes a number). With
``d`` input columns, ``D = n_components``, ``p`` output features (``2 D`` for the gaussian
kernel, else ``D``), ``t`` targets (a classifier's classes are unknown before the pass:
``t = 1`` is assumed), ``K`` folds (1 without ``cv``), ``s = split_every``, ``r`` rows
per block, ``T`` threads per worker and ``C`` chains of the reduction
(:func:`~dkrr.linalg.reduce_row_blocks`; by default the total threads, at most the
number of blocks):

* the statistics object (:class:`~dkrr.linalg.RidgeStatistics`) of a pass's partial
  results (a block task's, a chain's running sum, a combine's): ``S = 8 K (L + p t + p +
  2 t) + 8 K`` bytes - the packed Gram ``G`` (``L = p (p + 1) / 2 + sum_i r_i (r_i - 1) /
  2 <= p (p + nb) / 2`` numbers a fold: the upper triangle in panels of ``nb = 128`` rows,
  :mod:`dkrr.linalg._packed`), ``c``, ``zsum``, ``ysum``, ``yy`` and the int64 row counts
  ``n`` (:func:`statistics_bytes`, exact); the pass's result, unpacked on the client, has
  ``L = p^2`` (``S_full``);
* the feature map (:func:`feature_map_bytes`): ``8 D d`` for a dense ``W`` (rff, orf,
  qmc, exact); the polynomial sketches at degree 3: ``96 (d + 1)`` (tensorsketch), three
  one-HD SORF factors of ``d + 1`` columns (tensor_srht);
  ``8 D' (d + 4 + 2 r_d)`` for the structured maps, an upper bound of their
  O(D) stored numbers plus the dense ``W`` a transform may cache (``D'`` is D rounded
  up to whole ``d' x d'`` blocks, ``d'`` the next power of two >= d, ``r_d`` the
  displacement rank); ``8 (D d + 3 D^2)`` for Nystroem (landmarks, ``K_CC``, its
  eigenvectors and ``K_CC^(-1/2)``);
* a block task (a step of a chain): two statistics objects (the running sum it receives
  and the block's, into which that sum is added; one when every chain is one block), the
  Gram's work buffer (:func:`~dkrr.linalg._packed.gram_work_bytes`: ``8 p^2`` where that fits
  ``max_block_bytes``, else ``4 p^2`` where that does, else ``8 min(p, 1024) min(p, 2048)``), the feature buffer of ``b = min(r, max(1,
  max_block_bytes // (8 p)))`` rows (``8 b (p + D')``: ``Z`` and the projections), the
  map, the blocks of X and y and their copy sorted by fold (``16 r (d + t)``) and 1 MiB
  of interpreter and scheduler objects;
* a combine task of the tree over the chains' sums: ``min(s, C) + 1`` statistics
  objects (its inputs and its output) and the 1 MiB of a task;
* a worker (:attr:`MemoryEstimate.worker`): ``max(T (block task - map) + map,
  min(T, ceil(C / s)) x combine task)`` with ``T`` at most ``C``: while the chains run
  each thread holds one chain step (the map is shared), and only the ``ceil(C / s)`` combines of the tree's
  first level can run at once. With ``S`` a statistics object, ``B`` a block's buffers
  and ``F`` the map, and the default ``C = T x workers <= s``: ``max(T (2 S + B) + F,
  (C + 1) S)``, independent of the number of blocks. At ``D = 4096`` (gaussian, ``p =
  8192``), ``cv=5``, one thread: ``S = 1.36 GB`` (the full Grams would take 2.68 GB) and a
  worker 2.85 GB, against 6.0 GB with full Grams and their ``p x p`` temporary (a worker
  process's RSS adds its baseline, 0.3 GB measured: interpreter, libraries, BLAS);
* the client: the unpacked statistics ``S_full`` beside the packed result ``S`` while it
  is unpacked, then beside four ``p x p`` matrices of the solve (the eigh path's; the
  Cholesky path's is one, ``shifted_gram``): ``S_full + max(S, 32 p^2) + F``.
  With ``cv`` the fold solves run where the statistics are (:mod:`dkrr.linalg._cv_tasks`):
  the client gathers one total (``S_full`` of one fold) and a worker holds ``S``, the
  totals and one fold solve at a time (:func:`~dkrr.linalg._cv_tasks.fold_part_bytes`,
  four ``p x p`` matrices and its inputs); when no worker can, the client solves them:
  ``S_full`` of K folds and ``56 p^2`` in place of ``32 p^2`` (7.1 measured with eigh).

:func:`check_memory_budget` compares the worker's part with what the smallest Dask worker's
tasks can hold when a ``Client`` is active (its limit at the pause less its own 0.3 GB:
:func:`dkrr._system.worker_task_memory`; else this machine's memory), and the client's part with this
machine's available memory, and raises :class:`~dkrr.errors.MemoryBudgetError` with the estimate and the fix.

"This machine's available memory" (:func:`dkrr._system.local_memory`) is the smaller of psutil's
available memory of the host and what the memory limit of this process's cgroup leaves
(:func:`dkrr._system.cgroup_memory`: a container's, a SLURM job's or a systemd unit's limit, cgroup v2
or v1, the tightest level of the process's cgroup and its ancestors), so that a fit in a
4 GiB container on a 256 GiB host is checked against the container's 4 GiB.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np

from .._system import HOST_MEMORY, format_bytes, local_memory, worker_task_memory
from ..errors import MemoryBudgetError
from ._packed import gram_work_bytes, packed_length

__all__ = ["BudgetCheck", "MemoryEstimate", "MemoryLimits", "available_memory", "budget_checks",
           "check_feature_map_budget", "check_fit_memory", "check_memory_budget", "feature_map_bytes",
           "format_bytes", "local_memory", "memory_limits", "ridge_memory_estimate", "statistics_bytes"]

_DENSE_METHODS = ("rff", "orf", "qmc")
_GiB = 2**30
#: interpreter and scheduler objects of a task, beyond its arrays (measured: ~0.1 MiB)
_TASK_OVERHEAD = 2**20


def _output_width(kernel: str, n_components: int, is_complex: bool = False) -> int:
    from ..features._nonlinear import output_width

    return output_width(kernel, n_components, is_complex)


def _work_width(method: str, n_features_in: int, n_components: int) -> int:
    """``D'``: projections a transform computes (D, or D rounded up to ``d' x d'`` blocks)."""
    if method in _DENSE_METHODS or method == "nystroem":
        return n_components
    from ..features._base import next_power_of_two

    dp = next_power_of_two(n_features_in)
    return -(-n_components // dp) * dp


def statistics_bytes(p: int, n_targets: int = 1, n_folds: int = 1, *, with_gram: bool = True,
                     packed: bool = True) -> int:
    """Bytes of one statistics object: ``8 K (L + p t + p + 2 t) + 8 K`` with ``L`` the
    numbers of a packed Gram (a partial result of a pass), or ``L = p^2`` with
    ``packed=False`` (the unpacked result the client solves with; see the module)."""
    K, t = int(n_folds), int(n_targets)
    gram = 0 if not with_gram else packed_length(int(p)) if packed else p * p
    return 8 * K * (gram + p * t + p + 2 * t) + 8 * K


def feature_map_bytes(method: str, n_features_in: int, n_components: int, *,
                      displacement_rank: int | None = None) -> int:
    """Bytes of a feature map's state and transform caches (formulas in the module docstring)."""
    d, D = int(n_features_in), int(n_components)
    if method in _DENSE_METHODS:
        return 8 * D * d
    if method == "tensorsketch":  # hashes and signs, and the sparse sketches of each degree (3)
        return 8 * 3 * 4 * (d + 1)
    if method == "tensor_srht":  # a one-HD SORF of the d + 1 augmented columns per degree (3)
        return 3 * 8 * _work_width("sorf", d + 1, D) * (d + 5)
    if method == "nystroem":
        return 8 * (D * d + 3 * D * D)
    r = int(displacement_rank or 1) if method == "toeplitz_like" else 0
    return 8 * _work_width(method, d, D) * (d + 4 + 2 * r)


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes a streamed fit needs, by place (see the module docstring for the formulas).

    Attributes
    ----------
    p : int
        Output features of the largest pass.
    feature_map, statistics, block_task, reduction_task, client : int
        The map, one statistics object, the largest block task, the largest combine task
        and the client's part.
    threads : int
        ``T``, threads per worker.
    tree_tasks : int
        Combines of the tree's first level that can run at once on a worker, ``min(T, ceil(C / s))``.
    fold_part : int
        With ``cv`` solved on the workers: :func:`~dkrr.linalg._cv_tasks.fold_part_bytes`.
    """

    p: int
    feature_map: int
    statistics: int
    block_task: int
    reduction_task: int
    client: int
    threads: int = 1
    tree_tasks: int = 1
    fold_part: int = 0

    @property
    def task(self) -> int:
        """The largest task (what one worker thread must hold at once)."""
        return max(self.block_task, self.reduction_task)

    @property
    def worker(self) -> int:
        """What one worker holds at most: ``max(T (block - map) + map, tree_tasks x combine, fold_part)``."""
        chains = self.threads * (self.block_task - self.feature_map) + self.feature_map
        return max(chains, self.tree_tasks * self.reduction_task, self.fold_part)


def ridge_memory_estimate(
    *,
    kernel: str,
    method: str,
    n_features_in: int,
    n_components: int,
    n_targets: int = 1,
    n_folds: int = 1,
    split_every: int | None = None,
    block_rows: int,
    n_blocks: int = 1 << 30,
    max_block_bytes: int = 64 * 2**20,
    displacement_rank: int | None = None,
    sampling: str | None = None,
    n_candidates: int | None = None,
    n_gammas: int = 1,
    n_chains: int | None = None,
    threads: int | None = None,
    is_complex: bool = False,
    fold_tasks: bool = False,
) -> MemoryEstimate:
    """Estimate the memory of a streamed ridge fit (formulas in the module docstring).

    With ``sampling`` both passes are estimated (the candidates' pass with
    ``n_candidates`` frequencies, with their Gram for ridge leverage; the fit with the
    ``K + 1`` maps of surrogate leverage under ``cv``, whose partial results are one
    one-fold and K two-fold statistics objects) and the larger of each part kept. A grid
    of ``n_gammas`` gammas holds that many maps and statistics objects (one pass).
    ``n_chains`` (``C``) and ``threads`` (``T`` per worker) default to what the active
    scheduler gives (:func:`~dkrr.linalg._reduce.default_n_chains`, :func:`threads_per_worker`).
    ``is_complex``: a complex projection (complex ROMs), whose features are 2 D columns.
    ``fold_tasks``: with ``cv`` (no ``sampling``) the folds are solved on the workers
    (:func:`check_fit_memory` passes ``folds_on_workers``); False: on the client.

    Returns
    -------
    MemoryEstimate
    """
    from ._reduce import DEFAULT_SPLIT_EVERY, default_n_chains

    n_chains = min(int(default_n_chains() if n_chains is None else n_chains), max(1, int(n_blocks)))
    # chain steps run at once on a worker: its threads, at most one per chain
    threads = min(int(threads_per_worker() if threads is None else threads), n_chains)
    # a chain's first step receives no running sum: one-block chains hold one object
    held = 2 if int(n_blocks) > n_chains else 1
    split = DEFAULT_SPLIT_EVERY if split_every is None else int(split_every)
    fan_in = min(split, n_chains)
    tree_tasks = min(threads, -(-n_chains // split))
    t = int(n_targets)
    # (D, gram, maps, statistics a partial result holds (packed, unpacked), extra statistics
    # a block task holds)
    g = int(n_gammas)
    p_fit = _output_width(kernel, n_components, is_complex)

    def sizes(p, K, gram=True):
        return np.array([statistics_bytes(p, t, K, with_gram=gram, packed=packed) for packed in (True, False)])

    passes = [(int(n_components), True, g, g * sizes(p_fit, n_folds), 0)]
    if sampling is not None:
        n_cand = int(n_candidates or 4 * n_components)
        ridge = sampling == "ridge_leverage"
        p_cand = _output_width(kernel, n_cand, is_complex)
        passes.insert(0, (n_cand, ridge, 1, sizes(p_cand, 1 if ridge else n_folds, ridge), 0))
        if not ridge and n_folds > 1:  # one map over all rows + one per fold, as 2 "folds" each
            passes[1] = (int(n_components), True, n_folds + 1, sizes(p_fit, 1) + n_folds * sizes(p_fit, 2),
                         statistics_bytes(p_fit, t, n_folds))
    from ._cv_tasks import fold_part_bytes
    on_workers = bool(fold_tasks) and sampling is None and n_folds > 1
    solve_matrices = 7 if n_folds > 1 and not on_workers else 4
    best = None
    for D, gram, n_maps, (stats, full), transient in passes:
        p = _output_width(kernel, D, is_complex)
        fold_part = 0
        if on_workers:  # one fold solve at a time in a process (dkrr.linalg._cv_tasks._score)
            fold_part = fold_part_bytes(p, t, n_folds, g)
            full = statistics_bytes(p, t, 1, packed=False)
        fmap = n_maps * feature_map_bytes(method, n_features_in, D, displacement_rank=displacement_rank)
        sub = min(int(block_rows), max(1, int(max_block_bytes) // (8 * p)))
        buffer = 8 * sub * (p + _work_width(method, n_features_in, D))
        block = (held * int(stats) + transient + (gram_work_bytes(p, max_block_bytes) if gram else 0) + buffer + fmap
                 + 16 * int(block_rows) * (n_features_in + t) + _TASK_OVERHEAD)
        reduction = (fan_in + 1) * int(stats) + _TASK_OVERHEAD
        # the unpacked statistics, beside the packed result (while unpacking) or the solve's matrices
        client = int(full) + (max(int(stats), solve_matrices * 8 * p * p) if gram else 0) + fmap
        est = MemoryEstimate(p, fmap, int(stats), block, reduction, client, threads, tree_tasks, fold_part)
        if best is None:
            best = est
        else:
            best = MemoryEstimate(*(max(a, b) for a, b in zip(dataclasses.astuple(best), dataclasses.astuple(est))))
    return best


class MemoryLimits(NamedTuple):
    """What a fit's memory estimate is checked against (:func:`available_memory`).

    ``worker``: the smallest ``memory_limit`` of the active Client's workers (``None``
    without a Client or limits); ``local``: bytes available to this process
    (:func:`local_memory`); ``local_where``: what ``local`` is, for messages.
    """

    worker: int | None
    local: int
    local_where: str = HOST_MEMORY


def available_memory() -> MemoryLimits:
    """The limits a fit's estimate is checked against: the smallest positive
    ``memory_limit`` of the workers of the active distributed Client (``None`` without a
    Client or limits), and the memory available to this process (:func:`local_memory`)."""
    from .._system import distributed_client

    local, where = local_memory()
    client = distributed_client()
    if client is None:
        return MemoryLimits(None, local, where)
    from .._system import scheduler_workers

    try:
        workers = scheduler_workers(client)
    except Exception:  # noqa: BLE001 - an unreachable scheduler fails later, clearly
        return MemoryLimits(None, local, where)
    limits = [m for m in (int(w.get("memory_limit") or 0) for w in workers) if m > 0]
    return MemoryLimits(min(limits) if limits else None, local, where)


def memory_limits(limits=None) -> MemoryLimits:
    """``limits`` as a :class:`MemoryLimits`: ``None`` asks :func:`available_memory`; a
    ``(worker_limit, local)`` pair (tests, callers that measured them) is taken as is."""
    return available_memory() if limits is None else limits if isinstance(limits, MemoryLimits) else MemoryLimits(*limits)


#: the worker's, the client's, or (without a Client's worker limit) the whole fit's part
_PARTS = {"task": "per worker", "client": "on the client", "all": "in all"}


class BudgetCheck(NamedTuple):
    """One comparison of :func:`budget_checks`: ``need`` bytes against ``limit`` (``where``
    names it); ``kind`` is ``"task"`` (a worker's part), ``"client"`` or ``"all"``."""

    need: int
    limit: int
    where: str
    kind: str

    @property
    def fits(self) -> bool:
        return self.need <= self.limit

    def text(self) -> str:
        """``1.20 GiB per worker, within the memory limit of a Dask worker (4.00 GiB)``."""
        return (f"{format_bytes(self.need)} {_PARTS[self.kind]}, "
                f"{'within' if self.fits else 'more than'} {self.where} ({format_bytes(self.limit)})")


def budget_checks(estimate: MemoryEstimate, limits=None) -> list[BudgetCheck]:
    """What ``estimate`` is compared with: with a worker limit, the worker's part against
    it and the client's part against this process's memory; without one, the larger part
    against the latter (``limits`` as :func:`memory_limits` takes them)."""
    limits = memory_limits(limits)
    if limits.worker is not None:  # the worker's tasks: what its own memory and the pause leave
        return [BudgetCheck(estimate.worker, *worker_task_memory(limits.worker), "task"),
                BudgetCheck(estimate.client, limits.local, limits.local_where, "client")]
    return [BudgetCheck(max(estimate.worker, estimate.client), limits.local, limits.local_where, "all")]


def threads_per_worker() -> int:
    """``T``: the most threads of a worker of the active distributed Client, else the
    threaded scheduler's pool (dask's ``num_workers`` or the CPU count; 1 when dask is
    set to the synchronous scheduler)."""
    import dask
    from dask.system import CPU_COUNT

    from .._system import distributed_client

    client = distributed_client()
    if client is not None:
        try:
            return max([1, *(int(t) for t in client.nthreads().values())])
        except Exception:  # noqa: BLE001 - an unreachable scheduler fails later, clearly
            return 1
    if dask.config.get("scheduler", None) in ("sync", "synchronous", "single-threaded"):
        return 1
    return max(1, int(dask.config.get("num_workers", None) or CPU_COUNT))


def check_memory_budget(estimate: MemoryEstimate, *, kernel: str, n_components: int, n_folds: int = 1,
                        split_every: int | None = None, n_candidates: int | None = None,
                        limits: tuple[int | None, int] | None = None, is_complex: bool = False) -> None:
    """Raise :class:`~dkrr.errors.MemoryBudgetError` when ``estimate`` cannot fit.

    Parameters
    ----------
    estimate : MemoryEstimate
    kernel : str
    n_components, n_folds : int
        For the message (the fix).
    split_every : int, default=None
    n_candidates : int, default=None
        With leverage sampling: the candidates of the first pass (for the message).
    limits : MemoryLimits or (int or None, int), default=None
        As :func:`memory_limits` takes them (``None``: :func:`available_memory`).
    """
    for need, limit, where, kind in budget_checks(estimate, limits):
        if need <= limit:
            continue
        p, K = estimate.p, int(n_folds)
        fan = "8 by default" if split_every is None else f"now {split_every}"
        held = estimate.reduction_task // max(1, estimate.statistics)
        T = estimate.threads
        if kind == "client" or (kind == "all" and estimate.client >= estimate.worker):
            part = ("the solve on this machine holds the unpacked statistics (K full p x p Grams) and "
                    "4 p x p matrices")
            fixes = "fewer cv folds, or a machine with more memory"
        elif estimate.fold_part >= estimate.worker:
            part, fixes = ("solving the cross-validation's folds a worker holds the pass's result, the totals "
                           "and its fold solves (eight p x p matrices each)"), "fewer cv folds, or more memory"
        elif estimate.tree_tasks * estimate.reduction_task >= estimate.worker:
            part = (f"a combine task of the tree over the chains' sums holds min(split_every ({fan}), "
                    f"chains) + 1 = {held} of them")
            fixes = ("a smaller split_every (2 holds 3 of them), " if held > 3 else "") + \
                "fewer cv folds, or workers with more memory"
        else:
            part = (f"each of a worker's {T} thread(s) runs a chain step holding two of them (the "
                    "running sum and the block's), the feature buffer and the map")
            fixes = "fewer cv folds, fewer threads per worker, a smaller max_block_bytes, or workers with more memory"
        per_d = _output_width(kernel, 1, is_complex)
        d_fit = int(p * math.sqrt(limit / need) // per_d)  # the p^2 terms dominate; 0: a worker below the floor
        name, value = "n_components", n_components
        if n_candidates is not None and p != _output_width(kernel, n_components, is_complex):
            name, value = "n_candidates", n_candidates  # the candidates' pass is the larger
        raise MemoryBudgetError(
            f"This fit needs about {format_bytes(need)}, more than {where} ({format_bytes(limit)}): "
            f"{name}={value} gives p={p} features, so each statistics object "
            f"(the upper triangles of K={K} fold(s) of p x p float64 Grams) takes {format_bytes(estimate.statistics)} "
            f"and {part}. "
            + (f"Use a smaller {name} (about {d_fit} or fewer would fit), {fixes}." if d_fit else "No smaller model would fit: give each worker more memory.")
        )


def check_feature_map_budget(method: str, n_features_in: int, n_components: int, *, n_rows: int | None = None,
                             displacement_rank: int | None = None, local: int | None = None) -> None:
    """Refuse a feature map whose state cannot be allocated on this machine.

    Nothing is checked for parameters that are invalid (their own checks follow), nor for
    Nystroem with more landmarks than the ``n_rows`` rows of X (refused with that reason).

    Raises
    ------
    MemoryBudgetError
        :func:`feature_map_bytes` exceeds the available memory (``local`` bytes, default
        :func:`local_memory`).
    """
    from ..features import METHODS

    if method not in METHODS:
        return  # refused with its own message
    if not _positive_int(n_components) or (displacement_rank is not None and not _positive_int(displacement_rank)):
        return
    if method == "nystroem" and n_rows is not None and n_components > n_rows:
        return
    need = feature_map_bytes(method, n_features_in, n_components, displacement_rank=displacement_rank)
    where = HOST_MEMORY
    if local is None:
        local, where = local_memory()
    if need > local:
        what = "W of D x d float64" if method in _DENSE_METHODS else (
            "landmarks and D x D matrices" if method == "nystroem" else "O(D) numbers and transform caches")
        raise MemoryBudgetError(
            f"The feature map (method={method!r}, n_components={n_components}, d={n_features_in}: "
            f"{what}) needs about {format_bytes(need)}, more than {where} "
            f"({format_bytes(local)}). Use a smaller n_components."
        )


def _positive_int(value) -> bool:
    import numbers
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1


def check_fit_memory(X, y, *, kernel, method, n_components, n_folds=1, split_every=None,
                     max_block_bytes=64 * 2**20, displacement_rank=None, sampling=None,
                     n_candidates=None, n_gammas=1, solver=None, pcg_rank=256, is_complex=False,
                     n_alphas=1, limits=None):
    """Estimate a streamed fit on the row-chunked dask arrays ``X``, ``y`` and refuse it
    (:class:`~dkrr.errors.MemoryBudgetError`) when it cannot fit; before any compute.

    Parameters that are not valid yet are left to the checks that follow (nothing is
    estimated for them). ``n_gammas``: a gamma grid holds one map and one statistics
    object per gamma. ``solver="pcg"`` (rank ``pcg_rank``) has no p x p term
    (:func:`dkrr.linalg._pcg.pcg_memory_estimate`; ``n_alphas``: its CV grid). ``is_complex``:
    complex ROM features (2 D columns). ``limits``: as :func:`memory_limits` takes them, in
    place of :func:`available_memory`. Returns the :class:`MemoryEstimate` (None when not estimated).
    """
    if not _positive_int(n_components) or (n_candidates is not None and not _positive_int(n_candidates)):
        return
    if not (split_every is None or _positive_int(split_every)) or not _positive_int(max_block_bytes):
        return
    if displacement_rank is not None and not _positive_int(displacement_rank):
        return
    if method == "nystroem" and n_components > X.shape[0]:
        return  # refused with its own message (landmarks are rows of X)
    n_targets = 1 if y is None or y.ndim == 1 else int(y.shape[1])
    if solver == "pcg":
        from ._pcg import pcg_memory_estimate

        estimate = pcg_memory_estimate(
            kernel=kernel, method=method, n_features_in=int(X.shape[1]), n_components=int(n_components),
            n_targets=n_targets, rank=int(pcg_rank), split_every=split_every, block_rows=int(max(X.chunks[0])),
            n_blocks=len(X.chunks[0]), max_block_bytes=int(max_block_bytes), displacement_rank=displacement_rank,
            is_complex=bool(is_complex), n_folds=int(n_folds), n_alphas=int(n_alphas),
        )
        check_memory_budget(estimate, kernel=kernel, n_components=int(n_components), limits=limits,
                            is_complex=bool(is_complex))
        return estimate
    from ._cv_tasks import folds_on_workers

    estimate = ridge_memory_estimate(
        kernel=kernel, method=method, n_features_in=int(X.shape[1]), n_components=int(n_components),
        n_targets=n_targets, n_folds=int(n_folds), split_every=split_every,
        block_rows=int(max(X.chunks[0])), n_blocks=len(X.chunks[0]), max_block_bytes=int(max_block_bytes),
        displacement_rank=displacement_rank, sampling=sampling, n_candidates=n_candidates,
        n_gammas=int(n_gammas), is_complex=bool(is_complex),
        fold_tasks=folds_on_workers(_output_width(kernel, int(n_components), bool(is_complex)), n_targets,
                                    int(n_folds), int(n_gammas), limits),
    )
    if sampling is not None and n_candidates is None:
        n_candidates = 4 * int(n_components)
    check_memory_budget(estimate, kernel=kernel, n_components=int(n_components), n_folds=int(n_folds),
                        split_every=split_every, n_candidates=n_candidates, limits=limits, is_complex=bool(is_complex))
    return estimate
