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

The r right-hand sides (targets, or a classifier's classes) run independent CG
recurrences that share each pass; a column stops when its relative residual
``||b - (A + alpha I) beta|| / ||b||`` (recurrence residual) is ``<= tol`` (scipy's
``rtol`` convention with ``atol = 0``). Memory: a block task holds the feature buffer,
``Z_b V`` and two p x r partial sums (p x l and the linear statistics in pass 1); the
client holds ``U``, ``G`` and a few p x l work arrays of the preconditioner and six
p x r CG vectors: ``O(p (l + r))``.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ._precondition import gaussian_test_matrix, nystrom_from_sketch
from ._stats import (
    RidgeStatistics,
    combine_statistics,
    fold_feature_blocks,
    prepare_block,
)

__all__ = ["DEFAULT_PCG_RANK", "PcgResult", "pcg_ridge", "sketch_seed"]

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
def _first_pass_block(X, y, row_offset, block_index, fmap, seed, rank, max_block_bytes, labels_mode):
    """Linear statistics and the sketch ``Z_b^T (Z_b G)`` of one row block."""
    Xf, Y, bounds, labels = prepare_block(X, y, row_offset, block_index, 1, 0, labels_mode)
    p = fmap.n_output_features
    stats = RidgeStatistics.zeros(1, p, Y.shape[1], labels, with_gram=False)
    G = gaussian_test_matrix(seed, p, rank) if rank else None
    S = np.zeros((p, rank))
    for _, Zk, Yk in fold_feature_blocks(Xf, Y, bounds, fmap, max_block_bytes):
        stats.n[0] += Zk.shape[0]
        stats.zsum[0] += Zk.sum(axis=0)
        stats.ysum[0] += Yk.sum(axis=0)
        stats.c[0] += Zk.T @ Yk
        if not labels_mode:
            stats.yy[0] += np.einsum("ij,ij->j", Yk, Yk)
        if G is not None:
            S += Zk.T @ (Zk @ G)
    return [stats, S]


def _combine_first(parts):
    """Sum of first-pass partials (new objects; the inputs unchanged)."""
    return [combine_statistics([s for s, _ in parts]), sum(S for _, S in parts[1:]) + parts[0][1]]


def _matvec_block(X, row_offset, block_index, fmap, V, max_block_bytes):
    """``Z_b^T (Z_b V)`` of one row block, features in sub-blocks of max_block_bytes."""
    n_rows = X.shape[0]
    p = fmap.n_output_features
    Xf = np.ascontiguousarray(X, dtype=np.float64)
    sub = int(max(1, min(n_rows, max_block_bytes // (8 * p))))
    Zbuf = np.empty((sub, p))
    out = np.zeros(V.shape)
    for start in range(0, n_rows, sub):
        stop = min(n_rows, start + sub)
        Z = fmap.transform(Xf[start:stop], out=Zbuf[: stop - start])
        out += Z.T @ (Z @ V)
    return out


def _sum_arrays(parts):
    """Sum of partial arrays: a new array, the inputs unchanged."""
    out = parts[0].copy()
    for a in parts[1:]:
        out += a
    return out


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


def pcg_ridge(X, y, fmap, *, alpha: float, fit_intercept: bool, rank: int, tol: float, max_iter: int,
              seed: int, max_block_bytes: int, split_every=None, labels_mode: bool = False,
              targets_fn=None, n_chains=None) -> PcgResult:
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
        Most CG iterations; at it a :class:`sklearn.exceptions.ConvergenceWarning`.
    seed : int
        Seed of the sketch's Gaussian test matrix (:func:`sketch_seed`).
    max_block_bytes : int
    split_every, n_chains : optional
        Shape of the reduction (:func:`~dkrr.linalg.reduce_row_blocks`).
    labels_mode : bool
    targets_fn : callable, optional
        Turns the first pass's statistics into those of the targets (the classifier's +-1).

    Returns
    -------
    PcgResult
    """
    from ._reduce import reduce_row_blocks

    p = fmap.n_output_features
    rank = int(min(rank, p))
    stats, S = reduce_row_blocks(
        [X, y], _first_pass_block, _combine_first, split_every=split_every, n_chains=n_chains,
        constants=(fmap, int(seed), rank, int(max_block_bytes), bool(labels_mode)),
        label="pcg: statistics and preconditioner sketch",
    )
    if targets_fn is not None:
        stats = targets_fn(stats)
    tot = stats.total()
    n = float(tot.weights()[0])
    if fit_intercept:
        mu = tot.zsum[0] / n
        ybar = tot.ysum[0] / n
        b = tot.c[0] - n * np.outer(mu, ybar)
    else:
        mu, ybar = None, np.zeros(tot.c.shape[2])
        b = tot.c[0].copy()
    precond = None
    if rank:
        G = gaussian_test_matrix(seed, p, rank)
        if fit_intercept:
            S = S - n * np.outer(mu, mu @ G)
        precond = nystrom_from_sketch(S, G, alpha)
        del G, S

    def apply_A(V):
        ZZV = reduce_row_blocks(
            [X], _matvec_block, _sum_arrays, split_every=split_every, n_chains=n_chains,
            constants=(fmap, np.ascontiguousarray(V), int(max_block_bytes)), label="pcg: iteration",
        )
        if fit_intercept:
            ZZV -= n * np.outer(mu, mu @ V)
        return ZZV + alpha * V

    beta, info = _block_cg(apply_A, b, None if precond is None else precond.apply, tol, max_iter)
    info.update(rank=rank, passes=info["n_iter"] + 1)
    intercept = ybar - (mu @ beta if fit_intercept else 0.0)
    return PcgResult(beta, np.atleast_1d(intercept), stats, info)


def _block_cg(apply_A, b, apply_M, tol, max_iter):
    """Independent preconditioned CG recurrences for the columns of ``b`` (p, t); one
    ``apply_A`` call per iteration on the columns still running."""
    p, t = b.shape
    bnorm = np.linalg.norm(b, axis=0)
    x = np.zeros((p, t))
    r = b.copy()
    z = r if apply_M is None else apply_M(r)
    d = z.copy()
    rz = np.einsum("ij,ij->j", r, z)
    rel = np.where(bnorm > 0, np.linalg.norm(r, axis=0) / np.where(bnorm > 0, bnorm, 1.0), 0.0)
    history = [rel.copy()]
    active = rel > tol
    n_iter = 0
    while active.any() and n_iter < max_iter:
        cols = np.nonzero(active)[0]
        q = apply_A(d[:, cols])
        a = rz[cols] / np.einsum("ij,ij->j", d[:, cols], q)
        x[:, cols] += a * d[:, cols]
        r[:, cols] -= a * q
        n_iter += 1
        rel[cols] = np.linalg.norm(r[:, cols], axis=0) / bnorm[cols]
        history.append(rel.copy())
        active = rel > tol
        cols = np.nonzero(active)[0]
        if cols.size:
            zc = r[:, cols] if apply_M is None else apply_M(r[:, cols])
            rz_new = np.einsum("ij,ij->j", r[:, cols], zc)
            d[:, cols] = zc + (rz_new / rz[cols]) * d[:, cols]
            rz[cols] = rz_new
    converged = not active.any()
    if not converged:
        from sklearn.exceptions import ConvergenceWarning

        warnings.warn(
            f"solver='pcg' stopped at max_iter={max_iter} iterations with relative residual "
            f"{float(rel.max()):.3g} > tol={tol:g}; the coefficients are not converged. Raise "
            "max_iter, raise pcg_rank (a stronger preconditioner), use a larger alpha, or "
            "loosen tol.",
            ConvergenceWarning, stacklevel=3,
        )
    info = {"solver": "pcg", "n_iter": n_iter, "converged": bool(converged),
            "residuals": np.array(history), "tol": float(tol)}
    return x, info


def pcg_memory_estimate(*, kernel: str, method: str, n_features_in: int, n_components: int, n_targets: int,
                        rank: int, split_every, block_rows: int, n_blocks: int, max_block_bytes: int,
                        displacement_rank=None, is_complex: bool = False):
    """Memory of a ``solver="pcg"`` fit (ALGORITHMS.md 3.9), as a
    :class:`~dkrr.linalg._memory.MemoryEstimate`; ``statistics`` is the largest partial sum.

    With ``l = min(rank, p)``, ``t`` targets, ``b`` rows of a feature sub-block and ``r``
    rows per block: a partial sum of the first pass is the linear statistics
    ``8 (p t + p + 2 t) + 8`` plus the sketch ``8 p l`` (an iteration's is ``8 p t``); a block
    task holds two of them, the test matrix ``8 p l``, the feature buffers
    ``8 b (p + D' + max(l, t))``, the map and ``16 r (d + t)``; the client ``7`` p x l
    arrays of the preconditioner's construction, six p x t CG vectors, the statistics and
    the map. No term is quadratic in p.
    """
    from . import _memory as m
    from ._reduce import DEFAULT_SPLIT_EVERY, default_n_chains

    d, D, t = int(n_features_in), int(n_components), int(n_targets)
    p = m._output_width(kernel, D, is_complex)
    rank = min(int(rank), p)
    fmap = m.feature_map_bytes(method, d, D, displacement_rank=displacement_rank)
    sub = min(int(block_rows), max(1, int(max_block_bytes) // (8 * p)))
    partial = m.statistics_bytes(p, t, 1, with_gram=False) + 8 * p * max(rank, t)
    block = (2 * partial + 8 * p * rank + 8 * sub * (p + m._work_width(method, d, D) + max(rank, t)) + fmap
             + 16 * int(block_rows) * (d + t) + 2**20)
    split = DEFAULT_SPLIT_EVERY if split_every is None else int(split_every)
    chains = min(default_n_chains(), max(1, int(n_blocks)))
    threads = m.threads_per_worker()
    reduction = (min(split, chains) + 1) * partial
    client = 8 * p * (7 * rank + 6 * t) + partial + fmap
    return m.MemoryEstimate(p, fmap, partial, block, reduction, client, threads, min(threads, -(-chains // split)))
