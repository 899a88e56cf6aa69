"""Matrix-free ridge solve: preconditioned conjugate gradients over streamed passes.

``solver="pcg"`` solves ``(A + alpha I) beta = b`` with ``A = Z_c^T Z_c`` (the centred
features ``Z_c = Z - 1 mu^T`` with an intercept, else ``Z``) and ``b = Z_c^T (y - ybar)``
without forming any p x p matrix (ALGORITHMS.md section 3.9):

* **Pass 1** (one streamed pass): the linear statistics ``c = Z^T y``, ``zsum``, ``n``,
  ``ysum``, ``yy`` (a :class:`~dkrr.linalg.RidgeStatistics` without ``G``) and the sketch
  ``S = Z^T (Z G)`` of a Gaussian test matrix ``G`` (p x l) that every block task
  regenerates from a seed. The centred sketch ``S - n mu (mu^T G)`` gives the randomized
  Nystrom preconditioner (:mod:`dkrr.linalg._precondition`).
* **One pass per CG iteration**: every block task recomputes its features from the
  seeded map and returns ``Z_b^T (Z_b V)`` for the block ``V`` (p x r) of the search
  directions of the r right-hand sides that have not converged (one GEMM pair); the
  chain-then-tree reduction sums them, and the client adds the centring and the shift:
  ``A V + alpha V = Z^T Z V - n mu (mu^T V) + alpha V``.

The r right-hand sides (targets, or a classifier's classes; with cross-validation every
(fold, alpha, target) system, :mod:`dkrr.linalg._pcg_cv`, whose block tasks zero the
entries of ``Z_b V`` that belong to a column's own fold) run independent CG
recurrences that share each pass (:func:`solve_systems`); a column stops when its relative residual
``||b - (A + alpha I) beta|| / ||b||`` (recurrence residual) is ``<= tol`` (scipy's
``rtol`` convention with ``atol = 0``). Memory: a block task holds the feature buffer,
``Z_b V`` and two p x r partial sums (p x l and the linear statistics in pass 1); the
client holds ``U``, ``G`` and a few p x l work arrays of the preconditioner and six
p x r CG vectors: ``O(p (l + r))`` (:func:`pcg_memory_estimate`). ``pcg_persist``
keeps X in memory across the passes when :func:`data_fits_in_memory`.

Every block task also returns the CRC-32 of its rows of X (:func:`block_checksum`); the
client compares each pass's with pass 1's and stops the fit with a
:class:`~dkrr.errors.SourceChangedError` when X's source changed between passes
(:func:`check_same_rows`).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ._cg import _block_cg
from ._checksum import block_checksum, check_same_rows
from ._precondition import gaussian_test_matrix, nystrom_from_sketch
from .._validation import check_finite_rows
from ._stats import (
    RidgeStatistics,
    _accumulate,
    _check_weight_block,
    _prepare,
    combine_statistics,
    feature_sub_blocks,
    row_folds,
)

__all__ = ["DEFAULT_PCG_RANK", "PcgResult", "Systems", "block_checksum", "check_same_rows", "first_pass", "pcg_ridge",
           "preconditioner", "sketch_seed", "solve_systems", "warn_not_converged"]

#: rank of the Nystrom preconditioner when ``pcg_rank`` is not given (capped by p)
DEFAULT_PCG_RANK = 256

#: tag mixed with the fold seed to derive the sketch's seed (no other draw changes)
_SKETCH_TAG = 0x70636721


def sketch_seed(fold_seed: int) -> int:
    """Seed of the preconditioner's test matrix, a child of the estimator's fold seed
    (``SeedSequence([fold_seed, tag])``): drawing it consumes nothing from the generator
    that draws the map and the folds."""
    ss = np.random.SeedSequence([int(fold_seed), _SKETCH_TAG])
    return int(ss.generate_state(1, np.uint64)[0])


# ------------------------------------------------------------------ block tasks
def _first_pass_block(X, y, row_offset, block_index, fmap, seed, rank, max_block_bytes, labels_mode,
                      n_folds=1, fold_seed=0, with_norms=False):
    """Linear statistics (per fold; column sums of squares ``zsq`` with ``with_norms``),
    the sketch ``Z_b^T (Z_b G)`` and ``{block_index: checksum}`` of one row block."""
    return _weighted_first_pass_block(X, y, None, row_offset, block_index, fmap, seed, rank, max_block_bytes,
                                      labels_mode, n_folds, fold_seed, with_norms)


def _weighted_first_pass_block(X, y, w, row_offset, block_index, fmap, seed, rank, max_block_bytes, labels_mode,
                               n_folds=1, fold_seed=0, with_norms=False):
    """:func:`_first_pass_block` with the block's sample weights ``w`` (or None): the
    weighted linear statistics with ``wsum`` (as the Gram path's, :func:`~dkrr.linalg._stats._accumulate`,
    which adds the sketch ``Z_b^T W_b (Z_b G)`` in the same loop over sub-blocks)."""
    checksum = {int(block_index): block_checksum(X, w)}  # the rows as read, before the fold sort
    Xf, Y, w, bounds, labels = _prepare(X, y, w, row_offset, block_index, n_folds, fold_seed, labels_mode)
    p = fmap.n_output_features
    stats = RidgeStatistics.zeros(n_folds, p, Y.shape[1], labels, with_gram=False, with_norms=with_norms,
                                  with_weights=w is not None)
    S = np.zeros((p, rank))
    sketch = (gaussian_test_matrix(seed, p, rank), S) if rank else None
    _accumulate(stats, Xf, Y, w, bounds, fmap, max_block_bytes, labels_mode, products=sketch)
    return [stats, S, checksum]


def _merged_checksums(parts):
    """The union of the partials' ``{block_index: checksum}`` (a new dict); the pieces of a
    block split between two chains give one each, merged by XOR (:mod:`._checksum`)."""
    out = {}
    for part in parts:
        for i, crc in part[-1].items():
            out[i] = out[i] ^ crc if i in out else crc
    return out


def _combine_first(parts):
    """Sum of first-pass partials (new objects; the inputs unchanged)."""
    return [combine_statistics([p[0] for p in parts]), sum(p[1] for p in parts[1:]) + parts[0][1],
            _merged_checksums(parts)]


def _own_fold_mask(row_offset, start, stop, col_folds, n_folds, fold_seed):
    """(rows, m) True where row ``i`` of the sub-block is in column ``j``'s own fold."""
    folds = row_folds(row_offset + start, stop - start, n_folds, fold_seed)
    return folds[:, None] == col_folds[None, :]


def _matvec_block(X, row_offset, block_index, fmap, V, col_folds, n_folds, fold_seed, max_block_bytes):
    """``[Z_b^T M (Z_b V), {block_index: checksum}]`` of one row block, features in
    sub-blocks of max_block_bytes.

    ``M`` masks nothing when ``col_folds`` is None; else entry ``(i, j)`` of ``U = Z_b V``
    is zeroed when row ``i`` is in fold ``col_folds[j]`` (a column of fold ``K`` is never
    masked): column ``j`` then gets the product with its training rows only. One GEMM pair
    serves every (fold, alpha, target) system. The block's rows are checked at every pass
    (a source that changed since the first pass is named, not solved with: rows turned
    non-finite here, any other change by the checksum on the client).
    """
    return _weighted_matvec_block(X, None, row_offset, block_index, fmap, V, col_folds, n_folds, fold_seed,
                                  max_block_bytes)


def _weighted_matvec_block(X, w, row_offset, block_index, fmap, V, col_folds, n_folds, fold_seed, max_block_bytes):
    """:func:`_matvec_block` with the block's sample weights ``w`` (or None): ``Z_b^T W_b M
    (Z_b V)``, the features' rows scaled by ``sqrt(w)`` in the sub-block engine."""
    r = row_weights(X, w, row_offset, block_index)
    out = np.zeros(V.shape)
    for start, stop, Z in feature_sub_blocks(X, fmap, max_block_bytes, row_scale=r):
        U = Z @ V
        if col_folds is not None:
            U[_own_fold_mask(row_offset, start, stop, col_folds, n_folds, fold_seed)] = 0.0
        out += Z.T @ U
    return [out, {int(block_index): block_checksum(X, w)}]


def row_weights(X, w, row_offset, block_index):
    """The checks of a block at a pass after the first: its rows finite (a source that
    changed since the first pass is named, not solved with) and its weights (or None)
    finite and ``>= 0``. Returns ``sqrt(w)`` for :func:`~dkrr.linalg._stats.feature_sub_blocks`
    (None without weights)."""
    check_finite_rows(X, "X", block_index, row_offset)
    return None if w is None else np.sqrt(_check_weight_block(w, block_index, row_offset))


def _sum_checked(parts):
    """Sum of ``[array, checksums]`` partials: a new array and the union of the
    checksums, the inputs unchanged."""
    out = parts[0][0].copy()
    for a, _ in parts[1:]:
        out += a
    return [out, _merged_checksums(parts)]


# ------------------------------------------------------------------ the solve
@dataclasses.dataclass(eq=False)
class PcgResult:
    """Outcome of :func:`pcg_ridge`.

    Attributes
    ----------
    beta : ndarray (p, t)
    intercept : ndarray (t,)
    stats : RidgeStatistics
        The first pass's linear statistics (targets already converted by ``targets_fn``).
    info : dict
        ``solver`` ("pcg"), ``n_iter`` (CG iterations = passes after the first),
        ``converged`` (bool), ``residuals`` (n_iter + 1, t) relative residuals per
        iteration and target (a converged column keeps its last value), ``tol``,
        ``rank`` (of the preconditioner; 0 is plain CG) and ``passes`` (over the data).
    """

    beta: np.ndarray
    intercept: np.ndarray
    stats: RidgeStatistics
    info: dict


@dataclasses.dataclass(eq=False)
class Systems:
    """The ``m`` shifted systems that share the passes: column ``j`` solves
    ``(A_g + alphas[j] I) beta_j = b[:, j]`` where ``A_g = Z_g^T Z_g - counts[g] mu_g mu_g^T``
    (``mu_g = centres[:, g]``; no centring without intercept) is the centred Gram of the rows
    of group ``g = groups[j]``.

    Attributes
    ----------
    b : ndarray (p, m)
    alphas : ndarray (m,)
    groups : ndarray (m,) int
        Row group of each column: ``g < K`` the training rows of fold ``g`` (all rows but
        fold g), ``g = K`` all rows. Without folds every column is group 0 (all rows).
    centres : ndarray (p, n_groups) or None
        Mean feature row of each group (None without intercept).
    counts : ndarray (n_groups,)
        Rows of each group.
    n_folds, fold_seed : int
        The fold assignment (``n_folds = 1``: no masking).
    """

    b: np.ndarray
    alphas: np.ndarray
    groups: np.ndarray
    centres: np.ndarray | None
    counts: np.ndarray
    n_folds: int = 1
    fold_seed: int = 0


def first_pass(X, y, fmap, *, rank, seed, max_block_bytes, split_every=None, labels_mode=False,
               n_folds=1, fold_seed=0, with_norms=False, n_chains=None, sample_weight=None):
    """Pass 1: per-fold linear statistics, the sketch ``Z^T (Z G)`` (p, rank) and the
    checksum of every row block of X (``{block_index: crc}``, :func:`block_checksum`);
    with ``sample_weight`` (a dask array with X's row chunks) weighted, ``Z^T W Z G``, and
    checked as the Gram path checks its weighted statistics."""
    from ._reduce import reduce_row_blocks
    from ._weighted import check_weight_total

    weighted = sample_weight is not None
    stats, S, sums = reduce_row_blocks(
        [X, y, sample_weight] if weighted else [X, y],
        _weighted_first_pass_block if weighted else _first_pass_block, _combine_first,
        split_every=split_every, n_chains=n_chains,
        constants=(fmap, int(seed), int(rank), int(max_block_bytes), bool(labels_mode), int(n_folds),
                   int(fold_seed), bool(with_norms)),
        label="pcg: statistics and preconditioner sketch",
    )
    check_weight_total(stats)
    return stats, S, sums


def preconditioner(S, seed, rank, mu, n, fit_intercept):
    """The Nystrom factor of the total centred Gram from the sketch (None for rank 0).

    The factor does not depend on the shift (the ``mu`` of the returned object is a
    placeholder; :meth:`~dkrr.linalg._precondition.NystromPreconditioner.apply_columns`
    takes each column's shift)."""
    if not rank:
        return None
    G = gaussian_test_matrix(seed, S.shape[0], rank)
    if fit_intercept:
        S = S - n * np.outer(mu, mu @ G)
    return nystrom_from_sketch(S, G, 1.0)


def solve_systems(X, fmap, systems: Systems, precond, *, tol, max_iter, max_block_bytes, split_every=None,
                  n_chains=None, sample_weight=None, checksums=None):
    """Block CG over ``systems``, one streamed pass per iteration: ``(beta (p, m), info)``.

    Each pass computes ``Z^T M (Z V)`` (``Z^T W M (Z V)`` with ``sample_weight``) for the
    search directions ``V`` of the columns still running (fold-masked,
    :func:`_matvec_block`); the client subtracts each column's centring and adds its
    shift. Column ``j`` is preconditioned with the shared factor scaled by ``counts[g] /
    counts.max()`` and shifted by ``alphas[j]``. Each pass's block checksums must equal
    ``checksums`` (pass 1's, when given; :func:`check_same_rows`). With progress on, the
    whole solve is one progress line (:func:`~dkrr._progress.solve_progress`): its
    iteration and its worst column's relative residual.
    """
    from .._progress import solve_progress
    from ._reduce import reduce_row_blocks

    s = systems
    masked = s.n_folds > 1
    col_folds = s.groups.astype(np.int64)
    total = float(np.max(s.counts))
    scales = s.counts[s.groups] / total

    passes = [1]

    def apply_A(V, cols):
        folds = col_folds[cols] if masked else None
        ZZV, sums = reduce_row_blocks(
            [X] if sample_weight is None else [X, sample_weight],
            _matvec_block if sample_weight is None else _weighted_matvec_block, _sum_checked,
            split_every=split_every, n_chains=n_chains,
            constants=(fmap, np.ascontiguousarray(V), folds, int(s.n_folds), int(s.fold_seed), int(max_block_bytes)),
            label="pcg: iteration",
        )
        passes[0] += 1
        if checksums is not None:
            check_same_rows(checksums, sums, X, passes[0], sample_weight is not None)
        if s.centres is not None:
            M = s.centres[:, s.groups[cols]]
            ZZV -= M * (s.counts[s.groups[cols]] * np.einsum("ij,ij->j", M, V))
        return ZZV + s.alphas[cols] * V

    apply_M = None
    if precond is not None:
        def apply_M(R, cols):
            return precond.apply_columns(R, s.alphas[cols], scales[cols])

    with solve_progress("pcg", tol=tol, max_iter=max_iter) as progress:
        return _block_cg(apply_A, s.b, apply_M, tol, max_iter,
                         on_iteration=lambda n_iter, rel: progress(n_iter, float(np.max(rel))))


def pcg_ridge(X, y, fmap, *, alpha: float, fit_intercept: bool, rank: int, tol: float, max_iter: int,
              seed: int, max_block_bytes: int, split_every=None, labels_mode: bool = False,
              targets_fn=None, n_chains=None, sample_weight=None) -> PcgResult:
    """Solve ridge regression on the features of the row-chunked dask arrays ``X``, ``y``
    by preconditioned CG, one streamed pass per iteration (module docstring).

    Parameters
    ----------
    X, y : dask arrays with identical row chunks (see :func:`~dkrr.linalg.as_row_chunked`)
    fmap : FeatureMap
    alpha : float
        Ridge penalty, ``> 0``.
    fit_intercept : bool
    rank : int
        Rank ``l`` of the Nystrom preconditioner (capped by p); ``0`` is plain CG.
    tol : float
        Relative residual at which a column stops.
    max_iter : int
        Most CG iterations; at it a :class:`~dkrr.errors.PcgConvergenceWarning`.
    seed : int
        Seed of the sketch's Gaussian test matrix (:func:`sketch_seed`).
    max_block_bytes : int
    split_every, n_chains : optional
        Shape of the reduction (:func:`~dkrr.linalg.reduce_row_blocks`).
    labels_mode : bool
    targets_fn : callable, optional
        Turns the first pass's statistics into those of the targets (the classifier's +-1).
    sample_weight : dask array (n,) with X's row chunks, optional
        Row weights (:func:`~dkrr.linalg._weighted.check_sample_weight`): the weighted
        problem of the Gram path, ``A = Z_c^T W Z_c`` with the weighted means and ``n``
        the weight sum.

    Returns
    -------
    PcgResult
    """
    from ._reduce import fixed_n_chains

    p = fmap.n_output_features
    rank = int(min(rank, p))
    n_chains = fixed_n_chains(n_chains)  # every pass cut alike: the same-rows check compares them
    stats, S, sums = first_pass(X, y, fmap, rank=rank, seed=seed, max_block_bytes=max_block_bytes,
                                split_every=split_every, labels_mode=labels_mode, n_chains=n_chains,
                                sample_weight=sample_weight)
    if targets_fn is not None:
        stats = targets_fn(stats)
    tot = stats.total()
    n = float(tot.weights()[0])
    t = tot.c.shape[2]
    if fit_intercept:
        mu = tot.zsum[0] / n
        ybar = tot.ysum[0] / n
        b = tot.c[0] - n * np.outer(mu, ybar)
    else:
        mu, ybar = None, np.zeros(t)
        b = tot.c[0].copy()
    precond = preconditioner(S, seed, rank, mu, n, fit_intercept)
    del S
    systems = Systems(b, np.full(t, float(alpha)), np.zeros(t, dtype=np.int64),
                      None if mu is None else mu[:, None], np.array([n]))
    beta, info = solve_systems(X, fmap, systems, precond, tol=tol, max_iter=max_iter,
                               max_block_bytes=max_block_bytes, split_every=split_every, n_chains=n_chains,
                               sample_weight=sample_weight, checksums=sums)
    info.pop("active")
    if not info["converged"]:
        warn_not_converged(info, max_iter, f"the coefficients of alpha={float(alpha):.4g} are not converged")
    info.update(rank=rank, passes=info["n_iter"] + 1)
    intercept = ybar - (mu @ beta if fit_intercept else 0.0)
    return PcgResult(beta, np.atleast_1d(intercept), stats, info)


def warn_not_converged(info, max_iter, detail="the coefficients are not converged", stacklevel=4):
    """The :class:`~dkrr.errors.PcgConvergenceWarning` (a scikit-learn ``ConvergenceWarning``)
    of a CG run stopped at max_iter."""
    from ..errors import PcgConvergenceWarning

    worst = float(info["residuals"][-1].max())
    warnings.warn(
        f"solver='pcg' stopped at max_iter={max_iter} iterations with relative residual "
        f"{worst:.3g} > tol={info['tol']:g}; {detail}. Raise max_iter, raise pcg_rank (a stronger "
        "preconditioner), use a larger alpha, or loosen tol.",
        PcgConvergenceWarning, stacklevel=stacklevel,
    )


def pcg_memory_estimate(*, kernel: str, method: str, n_features_in: int, n_components: int, n_targets: int,
                        rank: int, split_every, block_rows: int, n_blocks: int, max_block_bytes: int,
                        displacement_rank=None, is_complex: bool = False, n_folds: int = 1, n_alphas: int = 1):
    """Memory of a ``solver="pcg"`` fit (ALGORITHMS.md 3.9), as a
    :class:`~dkrr.linalg._memory.MemoryEstimate`; ``statistics`` is the largest partial sum.

    With ``l = min(rank, p)``, ``t`` targets, ``K`` folds, ``m`` right-hand sides per pass
    (``t``; with cross-validation ``(K + 1) n_alphas t``), ``b`` rows of a feature
    sub-block and ``r`` rows per block: a partial sum of the first pass is the per-fold
    linear statistics ``8 K (p t + 2 p + 2 t) + 8 K`` plus the sketch ``8 p l``, an
    iteration's is ``8 p m``; a block task holds two partial sums, the product
    ``Z_s^T (Z_s V)`` of a sub-block before it is added (``8 p max(l, m)``), the test
    matrix ``8 p l``, the directions ``V`` (``8 p m``), the feature buffers
    ``8 b (p + D' + max(l, m)) + b m`` (features, projections, ``Z V`` and its fold mask),
    the map and ``16 r (d + t)``; the client ``9`` p x l arrays while it builds the
    preconditioner (the sketch, its centred copy, the test matrix, Q, Y, Y_nu, B, U and
    the SVD's workspace), six p x m CG vectors, the centres, the statistics and the map.
    No term is quadratic in p.
    """
    from . import _memory as mem
    from ._reduce import DEFAULT_SPLIT_EVERY, default_n_chains

    d, D, t, K = int(n_features_in), int(n_components), int(n_targets), int(n_folds)
    p = mem._output_width(kernel, D, is_complex)
    rank = min(int(rank), p)
    m = t if K == 1 else (K + 1) * int(n_alphas) * t
    fmap = mem.feature_map_bytes(method, d, D, displacement_rank=displacement_rank)
    sub = min(int(block_rows), max(1, int(max_block_bytes) // (8 * p)))
    first = mem.statistics_bytes(p, t, K, with_gram=False) + 8 * K * p * (K > 1) + 8 * p * rank
    partial = max(first, 8 * p * m)
    block = (2 * partial + 8 * p * (rank + m + max(rank, m)) + 8 * sub * (p + mem._work_width(method, d, D) + max(rank, m))
             + sub * m + fmap + 16 * int(block_rows) * (d + t) + 2**20)
    split = DEFAULT_SPLIT_EVERY if split_every is None else int(split_every)
    chains = min(default_n_chains(), max(1, int(n_blocks)))
    threads = mem.threads_per_worker()
    reduction = (min(split, chains) + 1) * partial
    client = 8 * p * (9 * rank + 6 * m + K + 1) + first + fmap
    return mem.MemoryEstimate(p, fmap, partial, block, reduction, client, threads, min(threads, -(-chains // split)))


#: ``pcg_persist="auto"`` keeps X and y in memory when they take at most this fraction of
#: the memory the fit's own estimate leaves free (per worker with a Client)
PERSIST_FRACTION = 0.25


def data_fits_in_memory(nbytes: int, block_bytes: int, estimate, *, limits=None, n_workers=None) -> bool:
    """Whether ``pcg_persist="auto"`` keeps the row blocks (``nbytes`` in all, the largest
    ``block_bytes``) in memory: with a distributed Client whose workers have a memory
    limit, a worker's share ``nbytes / workers + block_bytes`` must be at most
    :data:`PERSIST_FRACTION` of what its tasks can hold (as the solver's choice takes it,
    :func:`~dkrr._system.worker_task_memory`) less ``estimate.worker``; else (threaded
    scheduler) all of it at most that fraction of this machine's available memory less the
    estimate. ``limits`` as :func:`~dkrr.linalg._memory.memory_limits` takes them and
    ``n_workers`` the Client's workers (each asked when None)."""
    from .._system import distributed_client, worker_task_memory
    from ._memory import memory_limits

    worker_limit, local, _ = memory_limits(limits)
    if worker_limit is not None:
        if n_workers is None:
            client = distributed_client()
            n_workers = 1 if client is None else max(1, len(client.nthreads()))
        share = nbytes / max(1, int(n_workers)) + block_bytes
        return share <= PERSIST_FRACTION * (worker_task_memory(worker_limit)[0] - estimate.worker)
    return nbytes <= PERSIST_FRACTION * (local - max(estimate.worker, estimate.client))
