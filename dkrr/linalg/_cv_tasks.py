"""K-fold cross-validation where the statistics are: the fold solves as dask tasks.

The Gram path's cross-validation (ALGORITHMS.md 3.6, :func:`~dkrr.linalg._cv.score_fold`)
needs, per fold, the training Gram ``G - G_k`` and one eigendecomposition of it: K p x p
problems, independent of each other. :func:`cross_validate_pass` runs them as K tasks
(per map of a gamma grid) on the pass's persisted result, on the workers of a distributed
Client when one is active (spread over them round-robin), else on dask's threaded
scheduler, and brings back to the client only each fold's ``(mse_row, lam_min)``, the
folds' linear statistics (no Gram), the alpha grid, and at the end the *total* statistics
(one unpacked p x p Gram) of the map the client chose: never the K fold Grams.

The graph after the pass (a Delayed of the tuple of every map's K-fold statistics, G
packed, kept where the tree's root ran): one task converts the targets (the classifier's
+-1 columns) and checks the folds and weights; per map one task sums the folds into the
total and unpacks its Gram; per fold a task takes the fold's packed statistics (views of
the root, so a worker that runs the fold's solve receives one packed Gram, plus the
total once); the fold task unpacks its ``G_k``, forms ``G - G_k`` and scores the alpha
grid (:func:`~dkrr.linalg._cv.score_fold`). Fold solves in one process run one at a time
(:func:`_score`), each with every thread of the process's scheduler (or of its worker) as
BLAS threads where p is large enough for them to pay (:func:`solve_threads`): two
tridiagonal reductions (``dsytrd`` through scipy) in two threads of
one process take as long as one after the other, while two processes run them side by
side: scipy's f2py ``dsytrd`` holds the GIL. Called without it (``scipy.linalg.cython_lapack``
through ctypes, ad hoc), two reductions in two threads with one BLAS thread each took as
long as these one at a time with two BLAS threads (0.666 / 0.672 s at p = 2048, 5.70 /
5.74 s at p = 4096) or longer (0.136 / 0.103 s at p = 1024), so the GIL-free call is not
used.
The sums and the unpacking are those of
:meth:`~dkrr.linalg.RidgeStatistics.symmetrized` then
:meth:`~dkrr.linalg.RidgeStatistics.total`, in the same order, so the fold errors are
those of :func:`~dkrr.linalg.cross_validate_statistics` on the client (to the rounding
of the fold solve's BLAS threads).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import numpy as np

from ._memory import memory_limits, statistics_bytes, threads_per_worker
from ._cv import (
    check_alphas,
    check_folds,
    default_alphas,
    fold_arguments,
    score_fold,
)

__all__ = ["FoldScores", "cross_validate_pass", "fold_part_bytes", "fold_task_bytes", "folds_on_workers",
           "solve_threads"]

#: One fold solve at a time in a process (:func:`_score`).
_SOLVE_LOCK = threading.Lock()
#: Fold solves of at least this many features use every thread of their process as BLAS
#: threads, smaller ones one: one fold's scoring (``score_fold``, the default grid) on 2
#: cores took 0.083 / 0.278 / 0.607 s with one thread and 0.093 / 0.231 / 0.402 s with two
#: at p = 1024 / 1536 / 2048 (the reduction is half BLAS-2: threads pay off only on
#: larger matrices)
THREADED_SOLVE_MIN_P = 1536


def solve_threads(p: int, threads: int) -> int:
    """BLAS threads of one fold solve of ``p`` features in a process of ``threads``
    threads (:data:`THREADED_SOLVE_MIN_P`)."""
    return max(1, int(threads)) if int(p) >= THREADED_SOLVE_MIN_P else 1


def fold_task_bytes(p: int, n_targets: int = 1) -> int:
    """One fold solve of the cross-validation on the workers: its inputs, the total
    statistics (G unpacked) and the fold's packed ones, and four ``p x p`` matrices (the
    fold's unpacked Gram, the training Gram, its centred copy and the eigenvectors; a
    fit's traced peak at p = 512 is 0.85 of :func:`fold_part_bytes` with one solve)."""
    return statistics_bytes(p, n_targets, 1, packed=False) + statistics_bytes(p, n_targets, 1) + 32 * p * p


def fold_part_bytes(p: int, n_targets: int, n_folds: int, n_gammas: int = 1) -> int:
    """What the worker that holds a cross-validated pass's result (the ``g = n_gammas``
    maps' K-fold statistics, G packed) holds while the folds are solved there: that result,
    the ``g`` totals (G unpacked) and one fold solve (:func:`fold_task_bytes`; a process
    solves one fold at a time, :func:`_score`)."""
    K, g = int(n_folds), int(n_gammas)
    return (g * (statistics_bytes(p, n_targets, K) + statistics_bytes(p, n_targets, 1, packed=False))
            + fold_task_bytes(p, n_targets))


def _client_active() -> bool:
    from .._system import distributed_client

    return distributed_client() is not None


def folds_on_workers(p: int, n_targets: int, n_folds: int, n_gammas: int = 1, limits=None) -> bool:
    """Whether the cross-validation's fold solves run as tasks where the statistics are
    (:mod:`dkrr.linalg._cv_tasks`): always on dask's threaded scheduler, and on a
    distributed Client when what its smallest worker's tasks can hold
    (:func:`~dkrr._system.worker_task_memory`; no limit: unlimited) holds
    :func:`fold_part_bytes`; else the client solves them (the K unpacked fold Grams on the
    client, as the module's ``S_full``). ``limits`` as :func:`~dkrr.linalg._memory.memory_limits` takes them."""
    from .._system import worker_task_memory

    if not _client_active():
        return True
    worker = memory_limits(limits).worker
    return worker is None or fold_part_bytes(p, n_targets, n_folds, n_gammas) <= worker_task_memory(worker)[0]


@dataclasses.dataclass(eq=False)
class FoldScores:
    """What :func:`cross_validate_pass` brings to the client.

    Attributes
    ----------
    alphas : ndarray (n_alphas,)
        The grid scored (the default grid computed on the workers when none was given).
    fold_mse : ndarray (m, K, n_alphas)
        Validation MSE of every map, fold and alpha (``inf``: unusable alpha, reported by
        :func:`~dkrr.linalg._cv.report_unusable` once the map is chosen).
    lam_min : ndarray (m, K)
        Each map's and fold's smallest training Gram eigenvalue.
    folds : RidgeStatistics
        Map 0's K-fold statistics without their Gram (targets converted): the fold sizes
        (``n``) and weights (:meth:`~dkrr.linalg.RidgeStatistics.weights`).
    """

    alphas: np.ndarray
    fold_mse: np.ndarray
    lam_min: np.ndarray
    folds: object
    _root: object = dataclasses.field(repr=False)
    _targets_fn: object = dataclasses.field(repr=False)
    _weighted: bool = dataclasses.field(repr=False)
    _totals: dict = dataclasses.field(default_factory=dict, repr=False)

    def total(self, j: int):
        """The total statistics of map ``j`` (one fold, G full and symmetric): computed
        where the pass's result is and gathered (one p x p Gram; with one map it came
        with the scores). Called once per map."""
        if j not in self._totals:
            import dask

            from .._progress import compute_limited

            checked = dask.delayed(_checked, pure=True)(self._root, self._targets_fn, self._weighted)
            (self._totals[j],) = compute_limited(dask.delayed(_total, pure=True)(checked, j),
                                                 label="gathering the total statistics", n_tasks=1)
        return self._totals.pop(j)

    def release(self) -> None:
        """Drop the pass's persisted result (on a Client: its Future, freeing the workers)."""
        self._root = None


def _checked(root, targets_fn, weighted: bool) -> tuple:
    """The pass's statistics of every map with converted targets (the Grams shared, not
    copied), after the checks of the fit: positive, finite weighted sums, finite sums of
    the targets (map 0, as the client-side path), rows (and weight) in every fold."""
    from ._weighted import check_target_sums, check_weight_total

    every = tuple(s if targets_fn is None else targets_fn(s) for s in root)
    (check_weight_total if weighted else check_target_sums)(every[0])
    check_folds(every[0].n, every[0].wsum)
    return every


def _linear(root):
    """Map 0's K-fold statistics without their Gram, targets as the pass left them (the
    client converts them with its own ``targets_fn``, which then knows the classes)."""
    return dataclasses.replace(root[0], G=None)


def _total(every, j: int):
    """Map ``j``'s total statistics, G unpacked."""
    return every[j].total().symmetrized()


def _fold(every, j: int, k: int):
    """Map ``j``'s fold ``k`` statistics, G packed (views of the pass's result)."""
    return every[j].fold(k)


def _alphas(total, fit_intercept: bool) -> np.ndarray:
    return default_alphas(total, fit_intercept)


def _score(total, fold, alphas, fit_intercept: bool, blas_threads: int | None):
    """One fold's solve: ``(mse_row, lam_min)`` of :func:`score_fold`, one at a time in this
    process (:data:`_SOLVE_LOCK`): solves in two threads of one process do not overlap
    (module docstring), so one solve with every thread finishes the K sooner than K with
    one each (5 folds at p = 2048 on 2 cores: 2.1 s against 3.0 s in a fit at 100,000 rows).
    ``blas_threads``: on a distributed worker :func:`solve_threads` of its threads, set for
    the solve (the worker's BLAS has one per thread); None on the threaded scheduler, whose
    compute already gives BLAS as many (:func:`cross_validate_pass`). The fold's Gram is
    unpacked inside the lock, so a process holds one solve's matrices."""
    from .._blas import limit_blas_threads

    with _SOLVE_LOCK, (limit_blas_threads(blas_threads) if blas_threads else contextlib.nullcontext()):
        return score_fold(*fold_arguments(total, fold.symmetrized()), alphas, fit_intercept)


def _workers() -> dict:
    """The worker addresses of the active Client, sorted, with their threads; {} without one."""
    from .._system import distributed_client

    client = distributed_client()
    if client is None:
        return {}
    info = client.scheduler_info(n_workers=-1)["workers"]
    return {a: max(1, int(info[a].get("nthreads", 1))) for a in sorted(info)}


def cross_validate_pass(root, n_maps: int, n_folds: int, alphas, fit_intercept: bool, *, p: int, targets_fn=None,
                        weighted: bool = False, alpha_map: int = 0) -> FoldScores:
    """Score the alpha grid by K-fold CV with the fold solves as tasks on ``root``.

    Parameters
    ----------
    root : dask.delayed.Delayed
        The persisted result of a statistics pass
        (:func:`~dkrr.linalg._weighted.streamed_statistics_maps` with ``persist=True``):
        a tuple of ``n_maps`` K-fold statistics, G packed.
    n_maps, n_folds : int
        Maps (gammas) and folds (K >= 2) of the pass.
    alphas : array-like or None
        The grid; None: the default grid (:func:`~dkrr.linalg._cv.default_alphas`) of map
        ``alpha_map``'s total, computed where the statistics are.
    fit_intercept : bool
    targets_fn : callable, optional
        Converts labels-mode statistics (the classifier's); called on the workers for the
        Grams' statistics and on the client for the folds' linear statistics.
    weighted : bool
        The pass has sample weights (:func:`~dkrr.linalg._weighted.check_weight_total`).
    alpha_map : int
        The map whose total sets the default alpha grid.
    p : int
        Features: the BLAS threads of a fold solve (:func:`solve_threads`).

    Returns
    -------
    FoldScores
        Its :meth:`FoldScores.total` gathers one map's total statistics.

    Alphas unusable in some fold are scored ``inf``; the caller reports them once a map is
    chosen (:func:`~dkrr.linalg._cv.report_unusable`, with ``lam_min``).

    Raises
    ------
    InputValidationError
        A fold without rows or weight, or overflowing weighted sums.
    """
    import dask

    from .._progress import compute_limited

    alphas = None if alphas is None else check_alphas(alphas)
    checked = dask.delayed(_checked, pure=True)(root, targets_fn, bool(weighted))
    linear = dask.delayed(_linear, pure=True)(root)
    totals = [dask.delayed(_total, pure=True)(checked, j) for j in range(n_maps)]
    grid = dask.delayed(_alphas, pure=True)(totals[alpha_map], bool(fit_intercept)) if alphas is None else alphas
    workers = _workers()
    names = list(workers)
    K = int(n_folds)
    scores = []
    for j in range(n_maps):
        row = []
        for k in range(K):
            fold = dask.delayed(_fold, pure=True)(checked, j, k)
            i = j * K + k
            where = names[i % len(names)] if names else None
            with dask.annotate(**({"workers": [where], "allow_other_workers": True} if where else {})):
                row.append(dask.delayed(_score, pure=True)(totals[j], fold, grid, bool(fit_intercept),
                                                           solve_threads(p, workers[where]) if where else None))
        scores.append(row)
    grid_out = grid if alphas is None else dask.delayed(np.asarray, pure=True)(alphas)
    gathered = [linear, grid_out] + [s for row in scores for s in row]
    if n_maps == 1:
        gathered.append(totals[0])
    # threaded scheduler: BLAS gets solve_threads (n_tasks=1: every thread), the fold solves take turns
    out = compute_limited(*gathered, label=f"cross-validating {K} folds",
                          n_tasks=1 if solve_threads(p, threads_per_worker()) > 1 else None)
    small, grid_values = out[0], np.asarray(out[1], dtype=np.float64)
    folds = small if targets_fn is None else targets_fn(small)
    results = out[2:2 + n_maps * K]
    fold_mse = np.stack([np.stack([results[j * K + k][0] for k in range(K)]) for j in range(n_maps)])
    lam_min = np.array([[results[j * K + k][1] for k in range(K)] for j in range(n_maps)])
    if n_maps == 1:  # gathered with the scores: the pass's result is no longer needed
        return FoldScores(grid_values, fold_mse, lam_min, folds, None, targets_fn, bool(weighted), {0: out[-1]})
    return FoldScores(grid_values, fold_mse, lam_min, folds, root, targets_fn, bool(weighted))
