"""K-fold cross-validation with the matrix-free solver: fold-masked matvecs (ALGORITHMS.md 3.9).

Every (fold, alpha, target) system, and the full-data system of every (alpha, target)
(the refit, so the chosen alpha needs no more passes), is one column of the block ``V``
of search directions, and all of them share each streamed pass:

* **Pass 1** (:func:`~dkrr.linalg._pcg.first_pass`) accumulates the linear statistics
  ``c, zsum, n, ysum, yy`` *per fold* (and the column sums of squares ``zsq`` when the
  default alpha grid is needed: ``trace(G') = sum(zsq) - ||zsum||^2 / n``, no Gram) and
  the sketch of the total Gram.
* **Each CG iteration** is one pass: a block task computes ``U = Z_b V``, zeroes the
  entries whose row lies in the column's own fold and returns ``Z_b^T U`` (one GEMM pair
  for every system). Column ``j`` of fold ``k`` thus gets ``Z_{-k}^T Z_{-k} v_j``; the
  client subtracts the centring with fold k's *training* means ``mu_k = (zsum -
  zsum_k) / (n - n_k)`` and adds the column's alpha. The right-hand sides
  ``c_{-k} - n_{-k} mu_k ybar_k^T`` come from the per-fold statistics.
* **The preconditioner** is the Nystrom factor of the total Gram, shared by every
  column: column ``j`` uses its eigenvalues scaled by ``n_{-k} / n`` (the training
  Gram is about that fraction of the total) and its own shift ``alpha_j``.
* **One last pass** computes ``||Z_k beta_{k,a}||^2`` over the rows of fold k (masked as
  above), and the validation error is the expansion of section 3.6 with fold k's
  statistics and training means:
  ``SSE_k = yy'_k - 2 beta^T c'_k + ||Z_k beta||^2 - 2 (zsum_k^T beta)(mu_k^T beta) +
  n_k (mu_k^T beta)^2`` (no intercept: ``yy_k - 2 beta^T c_k + ||Z_k beta||^2``), computed
  by :func:`~dkrr.linalg._cv.fold_validation_mse`, the scoring kernel the Gram path's CV
  uses with ``beta^T G_k beta`` from its Gram.

Cost: ``(K + 1) n_alphas t`` right-hand sides per pass instead of ``t``, and
``iterations + 2`` passes (the hardest system, usually the smallest alpha, sets the
iterations; converged columns leave the block).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ._cv import check_folds, default_alphas, fold_validation_mse
from ._pcg import Systems, block_checksum, check_same_rows, first_pass, preconditioner, solve_systems
from ._pcg import _own_fold_mask, _sum_checked, row_weights, warn_not_converged
from ._stats import feature_sub_blocks

__all__ = ["PcgCvResult", "pcg_cross_validate", "trace_scale", "warn_cv_not_converged"]


def trace_scale(tot, fit_intercept: bool) -> float:
    """``s = trace(G') / p`` from one-fold statistics with ``zsq``: the mean diagonal of
    the (centred) Gram without the Gram (the scale of the default alpha grid)."""
    n = float(tot.weights()[0])
    trace = float(tot.zsq[0].sum()) - (float(tot.zsum[0] @ tot.zsum[0]) / n if fit_intercept and n > 0 else 0.0)
    return trace / tot.zsq.shape[1]


def _validation_block(X, row_offset, block_index, fmap, B, col_folds, n_folds, fold_seed, max_block_bytes):
    """``[sum over the rows i of fold col_folds[j] of (z_i^T B[:, j])^2`` (m,),
    ``{block_index: checksum}]``."""
    return _weighted_validation_block(X, None, row_offset, block_index, fmap, B, col_folds, n_folds, fold_seed,
                                      max_block_bytes)


def _weighted_validation_block(X, w, row_offset, block_index, fmap, B, col_folds, n_folds, fold_seed,
                               max_block_bytes):
    """:func:`_validation_block` with the block's sample weights ``w`` (or None): ``sum
    w_i (z_i^T B[:, j])^2``."""
    r = row_weights(X, w, row_offset, block_index)
    out = np.zeros(B.shape[1])
    for start, stop, Z in feature_sub_blocks(X, fmap, max_block_bytes, row_scale=r):
        U = Z @ B
        own = _own_fold_mask(row_offset, start, stop, col_folds, n_folds, fold_seed)
        out += np.einsum("ij,ij->j", U, np.where(own, U, 0.0))
    return [out, {int(block_index): block_checksum(X, w)}]


@dataclasses.dataclass(eq=False)
class PcgCvResult:
    """Outcome of :func:`pcg_cross_validate`.

    Attributes
    ----------
    alphas : ndarray (a,)
    fold_mse : ndarray (K, a)
        Validation mean squared error of every (fold, alpha), averaged over targets
        (with sample weights the weighted MSE).
    fold_sizes : ndarray (K,)
        Rows per fold.
    betas : ndarray (a, p, t)
        The full-data coefficients of every alpha.
    intercepts : ndarray (a, t)
    converged : ndarray (K + 1, a) bool
        Whether all targets of a (training set, alpha) system reached ``tol``; row ``K``
        is the full-data fit.
    stats : RidgeStatistics
        Per-fold linear statistics of pass 1 (targets converted).
    info : dict
        As :class:`~dkrr.linalg._pcg.PcgResult`'s, ``residuals`` of shape
        ``(n_iter + 1, (K + 1) a t)`` in (training set, alpha, target) order and
        ``passes = n_iter + 2``.
    fold_weights : ndarray (K,)
        What the mean over folds is weighted by: the rows, or the weight sums.
    """

    alphas: np.ndarray
    fold_mse: np.ndarray
    fold_sizes: np.ndarray
    betas: np.ndarray
    intercepts: np.ndarray
    converged: np.ndarray
    stats: object
    info: dict
    fold_weights: np.ndarray | None = None


def pcg_cross_validate(X, y, fmap, *, alphas, n_folds: int, fold_seed: int, fit_intercept: bool, rank: int,
                       tol: float, max_iter: int, seed: int, max_block_bytes: int, split_every=None,
                       labels_mode: bool = False, targets_fn=None, n_chains=None,
                       sample_weight=None) -> PcgCvResult:
    """Cross-validate an alpha grid and fit every alpha on all rows by fold-masked PCG.

    Parameters
    ----------
    X, y : dask arrays with identical row chunks
    fmap : FeatureMap
    alphas : ndarray of float (each ``> 0``) or None
        None: the default grid ``s * 10**(-7..1)`` with ``s`` from :func:`trace_scale`.
    n_folds, fold_seed : int
        ``K >= 2`` and the seed of the fold hash (ALGORITHMS.md 3.3).
    fit_intercept, rank, tol, max_iter, seed, max_block_bytes, split_every, labels_mode, targets_fn, n_chains
        As :func:`~dkrr.linalg._pcg.pcg_ridge`.
    sample_weight : dask array (n,) or None
        As :func:`~dkrr.linalg._pcg.pcg_ridge`; the fold errors are then weighted MSEs
        (divided by the fold's weight sum), as the Gram path's CV.

    Returns
    -------
    PcgCvResult
    """
    from ._reduce import fixed_n_chains

    K = int(n_folds)
    p = fmap.n_output_features
    rank = int(min(rank, p))
    n_chains = fixed_n_chains(n_chains)  # every pass cut alike: the same-rows check compares them
    common = dict(max_block_bytes=max_block_bytes, split_every=split_every, n_chains=n_chains,
                  sample_weight=sample_weight)
    stats, S, sums = first_pass(X, y, fmap, rank=rank, seed=seed, labels_mode=labels_mode, n_folds=K,
                                fold_seed=fold_seed, with_norms=alphas is None, **common)
    if targets_fn is not None:
        stats = targets_fn(stats)
    check_folds(stats.n, stats.wsum)
    weights = stats.weights()  # rows, or the folds' weight sums
    tot = stats.total()
    n = float(weights.sum())
    if alphas is None:
        alphas = default_alphas(None, fit_intercept, scale=trace_scale(tot, fit_intercept))
    alphas = np.asarray(alphas, dtype=np.float64)
    A, t = alphas.size, tot.c.shape[2]
    # the row groups: training rows of fold k (k < K), then all rows (k = K)
    counts = np.append(n - weights, n).astype(np.float64)
    zsum = np.vstack([tot.zsum[0] - stats.zsum, tot.zsum])  # (K + 1, p)
    ysum = np.vstack([tot.ysum[0] - stats.ysum, tot.ysum])  # (K + 1, t)
    c = np.concatenate([tot.c[0][None] - stats.c, tot.c])  # (K + 1, p, t)
    if fit_intercept:
        mu = zsum / counts[:, None]
        ybar = ysum / counts[:, None]
        c = c - counts[:, None, None] * mu[:, :, None] * ybar[:, None, :]
    else:
        mu, ybar = None, np.zeros((K + 1, t))
    # columns in (group, alpha, target) order
    groups = np.repeat(np.arange(K + 1), A * t)
    b = np.repeat(c.transpose(1, 0, 2)[:, :, None, :], A, axis=2).reshape(p, -1)
    systems = Systems(b, np.tile(np.repeat(alphas, t), K + 1), groups, None if mu is None else mu.T.copy(),
                      counts, K, int(fold_seed))
    precond = preconditioner(S, seed, rank, None if mu is None else mu[K], n, fit_intercept)
    del S
    beta, info = solve_systems(X, fmap, systems, precond, tol=tol, max_iter=max_iter, checksums=sums, **common)
    converged = ~info.pop("active").reshape(K + 1, A, t).any(axis=2)
    B = beta.reshape(p, K + 1, A, t)
    # the validation pass: ||Z_k beta||^2 over fold k's rows, every (k, alpha, target)
    from ._reduce import reduce_row_blocks

    m = K * A * t
    sq, last = reduce_row_blocks(
        [X] if sample_weight is None else [X, sample_weight],
        _validation_block if sample_weight is None else _weighted_validation_block, _sum_checked,
        split_every=split_every, n_chains=n_chains,
        constants=(fmap, np.ascontiguousarray(beta[:, :m]), groups[:m], K, int(fold_seed), int(max_block_bytes)),
        label="pcg: validation errors",
    )
    check_same_rows(sums, last, X, info["n_iter"] + 2, sample_weight is not None)
    sq = sq.reshape(K, A, t)
    fold_mse = np.empty((K, A))
    for k in range(K):
        fold_mse[k] = fold_validation_mse(B[:, k].transpose(1, 0, 2), sq[k], stats.c[k], stats.zsum[k],
                                          stats.ysum[k], stats.yy[k], float(weights[k]),
                                          mu[k] if fit_intercept else None, ybar[k])
    betas = B[:, K].transpose(1, 0, 2).copy()  # (A, p, t)
    intercepts = np.broadcast_to(ybar[K], (A, t)).copy()
    if fit_intercept:
        intercepts -= np.einsum("p,apt->at", mu[K], betas)
    info.update(rank=rank, passes=info["n_iter"] + 2)
    return PcgCvResult(alphas, fold_mse, stats.n.copy(), betas, intercepts, converged, stats, info, weights.copy())


def warn_cv_not_converged(res: PcgCvResult, chosen: int, max_iter: int) -> None:
    """The :class:`~dkrr.errors.PcgConvergenceWarning` of a CV whose systems stopped at
    ``max_iter`` (nothing when all converged): it names the alphas that did not converge
    and says whether ``alphas[chosen]``, the chosen one, is among them (its CV error and
    coefficients are then those of the stopped CG iterate)."""
    if res.info["converged"]:
        return
    bad = [float(f"{a:.4g}") for a in res.alphas[~res.converged.all(axis=0)]]
    alpha = float(res.alphas[chosen])
    if not res.converged[:, chosen].all():
        # the residuals of the chosen alpha's columns: (training set, alpha, target) order
        last = res.info["residuals"][-1].reshape(res.converged.shape[0], res.alphas.size, -1)[:, chosen]
        info = {**res.info, "residuals": last.reshape(1, -1)}
        detail = (f"the chosen alpha_={alpha:.4g} is one of the alphas whose systems did not converge ({bad}), so "
                  "its CV error (which chose it) and the coefficients are those of the stopped CG iterate, not the "
                  "exact ridge solution")
    else:
        info = res.info
        detail = (f"the systems of alphas {bad} did not converge, so their CV errors are those of the stopped CG "
                  f"iterate; the chosen alpha_={alpha:.4g} converged")
    warn_not_converged(info, max_iter, detail, stacklevel=5)
