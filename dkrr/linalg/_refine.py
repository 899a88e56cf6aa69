"""Mixed-precision refinement: float32 statistics, float64 answers (ALGORITHMS.md 3.10).

What LAPACK's ``dsposv`` does for a dense system, done with streamed passes: the float32
pass gives the statistics and a factor of ``G_c^(32) + alpha I``; the solve starts from
its coefficients ``beta_0``; then CG on the exact float64 operator

    A v = Z^T W Z v - W_tot mu mu^T v + alpha v      (no centring without intercept)

preconditioned by that factor corrects ``beta_0``. Every pass recomputes the features in
float64 from the map's seed and returns ``Z^T W (Z V)`` (O(n p) per column, no p x p
product); the first pass also returns the float64 linear statistics (``Z^T W y``,
``Z^T w``, ``sum w y``), so its residual ``b - A beta_0`` is the true float64 residual.
Because the float32 factor is close to ``A`` (its error is what section 3.10 bounds),
``M^-1 A`` is close to the identity and CG needs a few passes; it still converges where
plain iterative refinement would stall. The stopping rule is the relative residual
``||b - A beta|| / ||b|| <= tol`` per target (CG's recurrence after the first pass).
Every block task also returns the CRC-32 of its rows as read, and a pass that read any
block differently from the first raises :class:`~dkrr.errors.SourceChangedError`
(:func:`~dkrr.linalg._checksum.check_same_rows`, as the PCG passes do).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg

from ._checksum import block_checksum, check_same_rows
from ._pcg import _block_cg, _merged_checksums
from ._stats import DEFAULT_MAX_BLOCK_BYTES, RidgeStatistics, _accumulate, _prepare, combine_statistics

__all__ = ["DEFAULT_REFINE_MAX_PASSES", "DEFAULT_REFINE_TOL", "RefineResult", "refine_ridge"]

#: relative residual at which refinement stops: the coefficients' error is then about
#: ``cond(A) * tol``, that of a float64 Cholesky solve (measured on 6,000 rows, p = 512:
#: error to the exact solution 4.0e-13 / 1.2e-11 / 2.1e-10 / 7.8e-10 against float64's
#: 4.1e-13 / 1.2e-11 / 2.3e-10 / 1.3e-9 at cond 4.7e2 / 4.7e4 / 4.5e6 / 1.3e8, in 3 / 4 / 7
#: / 13 passes)
DEFAULT_REFINE_TOL = 1e-14
#: passes over the data at most (the first computes the true residual)
DEFAULT_REFINE_MAX_PASSES = 16


@dataclasses.dataclass(eq=False)
class RefineResult:
    """Outcome of :func:`refine_ridge`.

    Attributes
    ----------
    beta : ndarray (p, t)
    intercept : ndarray (t,)
    stats : RidgeStatistics
        The float64 linear statistics of the first pass (no ``G``), targets converted.
    info : dict
        ``passes`` (over the data), ``residuals`` (passes, t): relative residual before
        each CG step (the first row the true residual of ``beta_0``), ``converged``,
        ``tol``.
    """

    beta: np.ndarray
    intercept: np.ndarray
    stats: RidgeStatistics
    info: dict


def _refine_block(X, y, row_offset, block_index, fmap, B, labels_mode, max_block_bytes):
    return _refine_weighted_block(X, y, None, row_offset, block_index, fmap, B, labels_mode, max_block_bytes)


def _refine_weighted_block(X, y, w, row_offset, block_index, fmap, B, labels_mode, max_block_bytes):
    """One row block's float64 linear statistics, ``Z^T W (Z B)`` (the engine of
    :func:`dkrr.linalg._stats._accumulate`) and ``{block_index: checksum}`` of its rows."""
    Xf, Y, ws, bounds, labels = _prepare(X, y, w, row_offset, block_index, 1, 0, labels_mode)
    stats = RidgeStatistics.zeros(1, fmap.n_output_features, Y.shape[1], labels, with_gram=False,
                                  with_squares=not labels_mode, with_weights=w is not None)
    out = np.zeros((1,) + B.shape)
    _accumulate(stats, Xf, Y, ws, bounds, fmap, max_block_bytes, labels_mode, "float64", products=(B, out))
    return stats, out[0], {int(block_index): block_checksum(X, w)}


def _combine(parts):
    return (combine_statistics([p[0] for p in parts]), sum(p[1] for p in parts[1:]) + parts[0][1],
            _merged_checksums(parts))


#: what a changed source's error says about these passes (:func:`check_same_rows`)
_READER = ("precision='auto' refines the coefficients by passes that read X again and need the same rows every "
           "time", "or pass precision='float64' (one pass)")


def refine_ridge(X, y, w, fmap, beta0, factor, alpha: float, fit_intercept: bool, *,
                 tol: float = DEFAULT_REFINE_TOL, max_passes: int = DEFAULT_REFINE_MAX_PASSES,
                 labels_mode: bool = False, targets_fn=None, max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
                 split_every=None, n_chains=None) -> RefineResult:
    """Refine the coefficients ``beta0`` (p, t) of a float32-statistics solve to the
    float64 ridge solution at ``alpha`` by streamed float64 passes (module docstring).

    Parameters
    ----------
    X, y : dask arrays with identical row chunks; ``w`` the sample weights or None
    fmap : FeatureMap
    beta0 : ndarray (p, t)
        Start: the float32 statistics' solution.
    factor : ndarray (p, p)
        Lower Cholesky factor of the float32 statistics' ``G_c + alpha I`` (the
        preconditioner).
    alpha : float
    fit_intercept : bool
    tol : float
        Relative residual per target at which the refinement stops.
    max_passes : int
        Passes at most (>= 1; the first computes the true residual).
    labels_mode, targets_fn : as the ridge pass (the classifier's targets).

    Returns
    -------
    RefineResult
        ``info["converged"]`` False when ``max_passes`` did not reach ``tol`` (the caller
        falls back to a float64 pass).

    Raises
    ------
    SourceChangedError
        A pass read a row block of X (or of ``w``) differently from the first pass.
    """
    from ._reduce import reduce_row_blocks

    arrays = [X, y] if w is None else [X, y, w]
    fn = _refine_block if w is None else _refine_weighted_block

    reference, read = {}, 0  # pass 1's block checksums; passes made

    def run(B, label):
        nonlocal read
        stats, ZWZB, sums = reduce_row_blocks(
            arrays, fn, _combine, split_every=split_every, n_chains=n_chains, label=label,
            constants=(fmap, np.ascontiguousarray(B, dtype=np.float64), bool(labels_mode), int(max_block_bytes)))
        read += 1
        if read == 1:
            reference.update(sums)
        check_same_rows(reference, sums, X, read, w is not None, _READER)
        return stats, ZWZB

    beta0 = np.asarray(beta0, dtype=np.float64)
    stats, M0 = run(beta0, "refining in float64: residual")
    if targets_fn is not None:
        stats = targets_fn(stats)
    tot = stats.total()
    n = float(tot.weights()[0])
    if fit_intercept:
        mu, ybar = tot.zsum[0] / n, tot.ysum[0] / n
        b = tot.c[0] - n * np.outer(mu, ybar)
    else:
        mu, ybar = None, np.zeros(tot.c.shape[2])
        b = tot.c[0].copy()

    def operator(V, ZWZV):
        out = ZWZV + alpha * V
        if mu is not None:
            out -= n * np.outer(mu, mu @ V)
        return out

    r0 = b - operator(beta0, M0)
    bnorm = np.linalg.norm(b, axis=0)
    bsafe = np.where(bnorm > 0, bnorm, 1.0)
    rel0 = np.linalg.norm(r0, axis=0) / bsafe
    beta = beta0.copy()
    history = [rel0]
    if (rel0 > tol).any() and max_passes > 1:
        def apply_A(V, cols):
            _, ZWZV = run(V, "refining in float64: CG step")
            return operator(V, ZWZV)

        def apply_M(R, cols):
            return scipy.linalg.cho_solve((factor, True), R, check_finite=False)

        # CG's tolerance is relative to its own right-hand side r0; ours to b
        r0norm = np.linalg.norm(r0, axis=0)
        active = rel0 > tol
        tol_cg = float(tol * np.min(bsafe[active] / r0norm[active]))
        delta, info = _block_cg(apply_A, r0, apply_M, tol_cg, max_passes - 1)
        beta += delta
        history += list(info["residuals"][1:] * (r0norm / bsafe)[None, :])
    residuals = np.array(history)
    converged = bool((residuals[-1] <= tol).all())
    intercept = ybar - (mu @ beta if mu is not None else 0.0)
    info = {"passes": len(history), "residuals": residuals, "converged": converged, "tol": float(tol)}
    return RefineResult(beta, np.atleast_1d(intercept), stats, info)
