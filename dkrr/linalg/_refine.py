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
plain iterative refinement would stall.

The stopping rule is a measured estimate of the coefficients' error. With ``M = A + E``
the float32 factor, the error of an iterate ``beta`` is ``A^-1 r = (I - M^-1 E)^-1 M^-1 r``
(``r = b - A beta``), so ``z = M^-1 r`` -- which CG computes anyway -- is that error to
within a factor ``1 / (1 - rho)``, ``rho = ||M^-1 E||``, and ``rho`` is small wherever
refinement converges at all (it is what makes ``beta_0`` float32-accurate). A target
stops when ``||z|| / ||beta|| <= tol``: the first pass gives ``r`` of ``beta_0``, each CG
step (one pass) the next ``r``, and no pass is spent only to confirm convergence. A
float32 start ~1e-6 off and ``rho`` ~1e-5 stop after two passes. A target also stops
when its relative residual ``||r|| / ||b||`` reaches :data:`RESIDUAL_FLOOR` (1e-14), a
float64 solve's own: where ``cond(A) eps64`` exceeds ``tol`` (alpha near the
interpolation limit) no float64 computation can meet ``tol``. Where the last pass
shrank the estimate by :data:`FINAL_CORRECTION_CONTRACTION` or more, the returned
coefficients take that ``z`` as a last, free correction (iterative refinement's step):
their error is then about ``rho`` times the recorded estimate, float64's rounding in
the common case, so fits that differ only in how their float32 statistics rounded (the
chunking, the order of the sums) agree as float64 fits do. Such a target also stops when
the estimate after that correction, ``e_k (e_k / e_(k-1))`` with the last pass's
contraction standing for ``rho``, is at most ``tol /`` :data:`CORRECTION_MARGIN`: the pass
that would only confirm it is saved (2 passes instead of 3 at moderate alpha).
Every block task also returns the CRC-32 of its rows as read, and a pass that read any
block differently from the first raises :class:`~dkrr.errors.SourceChangedError`
(:func:`~dkrr.linalg._checksum.check_same_rows`, as the PCG passes do).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg

from ._cg import _block_cg
from ._checksum import block_checksum, check_same_rows
from ._pcg import _merged_checksums
from ._stats import DEFAULT_MAX_BLOCK_BYTES, RidgeStatistics, _prepare, combine_statistics, feature_sub_blocks

__all__ = ["DEFAULT_REFINE_MAX_PASSES", "DEFAULT_REFINE_TOL", "RefineResult", "refine_ridge", "targets_stopped"]

#: estimated relative error of the coefficients (every target) at which refinement
#: stops: ``||M^-1 r|| / ||beta||``, the preconditioned residual over the iterate
#: (module docstring). The float64 Cholesky solve's own error is about ``cond(A) eps64``;
#: the issue asks 1e-7 of it, and 1e-10 leaves a factor 1,000 for the estimate's own
#: error ``1 / (1 - rho)``, ``rho`` the float32 factor's relative error (measured: see
#: tests/test_refine.py and docs/ALGORITHMS.md 3.10)
DEFAULT_REFINE_TOL = 1e-10
#: bytes of one feature sub-block in a refinement pass (at most the estimator's
#: ``max_block_bytes``): 256 rows at p = 2048 in float64, which stay in cache for the
#: matrix-vector products that follow. Measured on 100,000 rows, p = 2048, one thread:
#: the linear pass 0.94 s with 64 MiB sub-blocks (the Gram pass's), 0.46 s with 4 MiB
#: (the features alone 0.71 s against 0.35 s); 0.5 MiB is slower again (0.51 s). With the
#: row loop (ad hoc, medians of 9-15 alternating repeats, one thread): on RFF p = 2048
#: (d = 32) 2 MiB took 1.04x / 1.00x the time of 4 MiB per first / CG pass and 1 MiB
#: 1.15x / 1.00x, while on SORF p = 1024 (d = 8) 1 MiB took 0.92x / 0.96x: not kept
REFINE_SUB_BLOCK_BYTES = 4 * 2**20
#: most columns of ``B`` (and targets, in the first pass) whose products a refinement pass
#: takes row by row in one compiled loop (:func:`~dkrr.linalg._refine_numba.refine_rows`)
#: rather than by BLAS's matrix-vector products. Measured on 256 rows, p = 2048, one thread
#: (first pass / CG pass, against BLAS): 0.68 / 0.79x at 1 column, 0.56 / 0.54x at 2, 0.62 /
#: 0.54x at 3, 0.93 / 1.05x at 4, 1.5x at 8 (ad hoc). A whole pass with its float64
#: features (``benchmarks/results/row_loops``: 25,600 rows, one column, medians): 0.86 /
#: 0.93x at p = 2048, 0.83 / 0.91x at p = 1024
REFINE_ROWS_MAX_COLUMNS = 3
#: relative residual ``||r|| / ||b||`` at which a target stops even above ``tol``: a
#: float64 solve's own (backward-stable) residual, so nothing more can be had; at cond
#: ``1e8`` and beyond (alpha near the interpolation limit) float64's own error exceeds
#: ``tol`` and this is the rule that ends the refinement there
RESIDUAL_FLOOR = 1e-14
#: the returned coefficients are the last iterate plus its correction ``M^-1 r`` (no
#: further pass) for a target whose last pass shrank the error estimate by this factor or
#: more: ``M^-1 A`` is then near the identity, and the correction removes all but about
#: ``rho`` of the estimated error (at alpha = 1 on 6,000 rows: 7.4e-11 to below 1e-14)
FINAL_CORRECTION_CONTRACTION = 1e-3
#: a target whose last pass shrank its estimate ``e_k`` by :data:`FINAL_CORRECTION_CONTRACTION`
#: or more also stops (with that free correction) when ``e_k * (e_k / e_{k-1})`` -- the
#: estimate after the correction, ``rho`` measured as the last pass's contraction -- is at
#: most ``tol`` divided by this factor: the margin for a contraction that the next
#: direction would show larger (the pass measured ``rho`` along one error). Measured (a
#: 10^6-row fit, 1024 columns, alpha = 0.1): estimates 1e-4 -> 1.5e-8, so 2.1e-12 after
#: the correction, and the third pass that the plain rule needed is saved
CORRECTION_MARGIN = 10.0
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
        ``passes`` (over the data); ``residuals`` (passes, t): the relative residual
        ``||r|| / ||b||`` of the iterate after each pass's correction is known, the
        first row the true residual of ``beta_0``, the others CG's recurrence;
        ``errors`` (passes, t): the estimated relative error ``||M^-1 r|| / ||beta||``
        of the same iterates (the last row bounds the returned coefficients', which add
        a final free correction where the passes allow, module docstring); ``converged``
        (every target stopped by a rule: its last error at most ``tol``, its estimate after
        the final correction at most ``tol /`` :data:`CORRECTION_MARGIN`, or its residual
        at most :data:`RESIDUAL_FLOOR`; :func:`targets_stopped` checks a record) and ``tol``.
    factor : ndarray (p, p)
        The preconditioner's factor it was given (the Bayesian reading reuses it).
    """

    beta: np.ndarray
    intercept: np.ndarray
    stats: RidgeStatistics
    info: dict
    factor: np.ndarray | None = None


def _stop_rules(e, prev, tol, final_correction=True):
    """``(done, correct)`` per target from its last estimate ``e`` and the one before,
    ``prev`` (inf after the first pass): done when ``e <= tol``, or (with the final
    correction) when the last pass shrank the estimate by :data:`FINAL_CORRECTION_CONTRACTION`
    (``correct``) and the estimate after the correction, ``e * (e / prev)``, is at most
    ``tol /`` :data:`CORRECTION_MARGIN`. The residual rule is the caller's."""
    e, prev = np.asarray(e, dtype=float), np.asarray(prev, dtype=float)
    correct = np.isfinite(prev) & (e <= FINAL_CORRECTION_CONTRACTION * prev) & bool(final_correction)
    after = np.where(prev > 0, e * (e / np.where(prev > 0, prev, 1.0)), 0.0)
    return (e <= tol) | (correct & (after * CORRECTION_MARGIN <= tol)), correct


#: passes after which a refinement may be given up as unable to reach ``tol`` within its
#: ``max_passes`` (:func:`hopeless_passes`): three estimates give two contractions
HOPELESS_AFTER = 3
#: the contraction is measured over at most this many of the last passes
HOPELESS_WINDOW = 3
#: a refinement is given up when its prediction exceeds ``max_passes`` by this factor: CG's
#: contraction improves as it goes (on sklearn's sample-weight check a classifier's
#: refinement predicted 19 passes at the third and converged at the 14th; given up, its
#: float64 fallback differed from the other fit's refined answer by 8.5e-7, beyond the check's 1e-7)
HOPELESS_MARGIN = 1.5


def hopeless_passes(errors, tol) -> np.ndarray:
    """Per target, the passes a refinement would need in all at the contraction its
    estimates have shown lately (``errors``: passes x targets, as recorded): the mean
    contraction per pass over the last :data:`HOPELESS_WINDOW` passes, ``rho = (e_k /
    e_(k-m))^(1/m)``, carried on from ``e_k`` down to ``tol``; inf where the estimate has
    not shrunk; 0 before :data:`HOPELESS_AFTER` passes and where ``e_k <= tol``. An alpha
    below what float32 statistics resolve stalls: 16 passes reached 9e-6, not 1e-10, on
    300 rows at alpha 1.3e-6 (a probe of ``dkrr fit``; its estimates rose again at the
    8th), and this stops it there."""
    e = np.asarray(errors, dtype=np.float64)
    k = e.shape[0]
    out = np.zeros(e.shape[1:])
    if k < HOPELESS_AFTER:
        return out
    m = min(k - 1, HOPELESS_WINDOW)
    first, last = e[-1 - m], e[-1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rho = (last / first) ** (1.0 / m)
        more = np.log(tol / last) / np.log(rho)
    live = np.isfinite(first) & (first > 0) & (last > tol)
    return np.where(live, np.where((rho < 1) & np.isfinite(more), k + np.ceil(more), np.inf), 0.0)


def targets_stopped(errors, residuals, tol) -> np.ndarray:
    """Whether each target of a recorded refinement (``errors`` and ``residuals``, passes x
    targets, as :func:`refine_ridge` records them) stopped by a rule of this module at its
    last pass: a target that stopped before the others keeps its value in later rows, so
    its own last pass is its last change (the check of a model file's ``refinement_``)."""
    e, r = np.asarray(errors, dtype=float), np.asarray(residuals, dtype=float)
    out = (r[-1] <= RESIDUAL_FLOOR) | (e[-1] <= tol)
    for j in np.nonzero(~out)[0]:
        changed = np.nonzero(e[1:, j] != e[:-1, j])[0]
        k = int(changed[-1]) + 1 if changed.size else 0
        out[j] = k > 0 and bool(_stop_rules(e[k, j], e[k - 1, j], tol)[0])
    return out


def _refine_block(X, y, row_offset, block_index, fmap, B, labels_mode, max_block_bytes, linear):
    return _refine_weighted_block(X, y, None, row_offset, block_index, fmap, B, labels_mode, max_block_bytes, linear)


def _refine_weighted_block(X, y, w, row_offset, block_index, fmap, B, labels_mode, max_block_bytes, linear):
    """One row block of a refinement pass: ``(stats, Z^T W Z B, {block_index: checksum})``.

    The features are computed in float64 by the one sub-block engine
    (:func:`~dkrr.linalg._stats.feature_sub_blocks`, rows scaled by ``sqrt(w)``). A CG
    pass (``linear`` False) needs only ``Z^T W (Z B)``; ``stats`` is then None. The first
    pass (``linear``) also returns the float64 linear statistics (``n``, ``Z^T W Y``,
    ``Z^T w``, ``sum w Y``, ``yy``, ``wsum``): ``Z_s^T (r Y)`` and ``Z_s^T r`` with ``Z_s =
    r Z``, ``r = sqrt(w)`` (ones without weights). The sub-blocks are at most
    :data:`REFINE_SUB_BLOCK_BYTES`, so the features stay in cache. Up to
    :data:`REFINE_ROWS_MAX_COLUMNS` columns of ``B`` (and targets) every product of a row
    is taken while the row is in L1 (:func:`~dkrr.linalg._refine_numba.refine_rows`: one
    read of Z where BLAS's matrix-vector products read it twice, four times in the first
    pass); beyond, BLAS's products."""
    Xf, Y, ws, _, labels = _prepare(X, y, w, row_offset, block_index, 1, 0, labels_mode)
    r = None if ws is None else np.sqrt(ws)
    p, m, t = fmap.n_output_features, B.shape[1], Y.shape[1]
    stats = None
    if linear:
        stats = RidgeStatistics.zeros(1, p, t, labels, with_gram=False, with_squares=not labels_mode,
                                      with_weights=w is not None)
        Yr = Y if r is None else Y * r[:, None]
        rows = np.ones(Y.shape[0]) if r is None else r
    # sub-blocks that stay in cache (REFINE_SUB_BLOCK_BYTES)
    subs = feature_sub_blocks(Xf, fmap, min(int(max_block_bytes), REFINE_SUB_BLOCK_BYTES), "float64", row_scale=r)
    if m <= REFINE_ROWS_MAX_COLUMNS and (not linear or t <= REFINE_ROWS_MAX_COLUMNS):
        from ._refine_numba import refine_rows  # numba is imported by the first pass

        outT = np.zeros((m, p))  # (Z^T W Z B)^T
        BT = np.ascontiguousarray(B.T)
        # every argument C-contiguous float64 (a sub-block's rows of Y are), so every kind of
        # pass shares one compiled signature (compiled once per machine)
        Yc = np.ascontiguousarray(Yr, dtype=np.float64) if linear else np.empty((Y.shape[0], 0))
        cT, zsum = (np.zeros((t, p)), np.zeros(p)) if linear else (np.empty((0, p)), np.empty(0))
        w_rows = np.ascontiguousarray(rows, dtype=np.float64) if linear else np.empty(Y.shape[0])
        for start, stop, Z in subs:
            refine_rows(Z, BT, outT, Yc[start:stop], cT, w_rows[start:stop], zsum, bool(linear))
        out = np.ascontiguousarray(outT.T)
        if linear:
            stats.c[0] += cT.T
            stats.zsum[0] += zsum
    else:  # many targets: BLAS's products, each reading the sub-block once more
        out = np.zeros((p, m))
        for start, stop, Z in subs:
            out += Z.T @ (Z @ B)
            if linear:
                stats.c[0] += (Yr[start:stop].T @ Z).T
                stats.zsum[0] += rows[start:stop] @ Z
    if linear:
        stats.n[0] = Y.shape[0] if ws is None else np.count_nonzero(ws)  # rows of positive weight
        wY = Y if ws is None else Y * ws[:, None]
        stats.ysum[0] = wY.sum(axis=0)
        if stats.yy is not None:
            stats.yy[0] = np.einsum("ij,ij->j", wY, Y)
        if stats.wsum is not None:
            stats.wsum[0] = ws.sum()
    return stats, out, {int(block_index): block_checksum(X, w)}


def _combine(parts):
    linear = [p[0] for p in parts if p[0] is not None]
    return (combine_statistics(linear) if linear else None, sum(p[1] for p in parts[1:]) + parts[0][1],
            _merged_checksums(parts))


#: what a changed source's error says about these passes (:func:`check_same_rows`)
_READER = ("precision='auto' refines the coefficients by passes that read X again and need the same rows every "
           "time", "or pass precision='float64' (one pass)")


def refine_ridge(X, y, w, fmap, beta0, factor, alpha: float, fit_intercept: bool, *,
                 tol: float = DEFAULT_REFINE_TOL, max_passes: int = DEFAULT_REFINE_MAX_PASSES,
                 labels_mode: bool = False, targets_fn=None, max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
                 split_every=None, n_chains=None, final_correction: bool = True,
                 start_limit: float | None = None) -> RefineResult:
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
        Estimated relative error of the coefficients, per target, at which the refinement
        stops (module docstring).
    max_passes : int
        Passes at most (>= 1; the first computes the true residual).
    labels_mode, targets_fn : as the ridge pass (the classifier's targets).
    final_correction : bool
        Add the last ``M^-1 r`` to a target whose last pass shrank its error estimate by
        :data:`FINAL_CORRECTION_CONTRACTION` (module docstring), and stop such a target
        once the estimate after that correction is small enough; False returns the iterate
        the estimate describes and stops on ``tol`` (or the residual floor) alone.
    start_limit : float, optional
        Stop after the first pass, unconverged with ``info["start_error"]`` the largest
        estimate, when the estimated relative error of ``beta0`` exceeds it for some target
        (a cross-validation's choice made on float32 statistics that do not resolve it:
        :func:`~dkrr.estimators._mixed.refine_final`).

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
    from ._reduce import fixed_n_chains, reduce_row_blocks

    arrays = [X, y] if w is None else [X, y, w]
    n_chains = fixed_n_chains(n_chains)  # every pass cut alike: the same-rows check compares them
    fn = _refine_block if w is None else _refine_weighted_block

    reference, read = {}, 0  # pass 1's block checksums; passes made

    def run(B, label):
        nonlocal read
        stats, ZWZB, sums = reduce_row_blocks(
            arrays, fn, _combine, split_every=split_every, n_chains=n_chains, label=label,
            constants=(fmap, np.ascontiguousarray(B, dtype=np.float64), bool(labels_mode), int(max_block_bytes),
                       read == 0))
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
    t = r0.shape[1]
    bnorm = np.linalg.norm(b, axis=0)
    bsafe = np.where(bnorm > 0, bnorm, 1.0)
    r0norm = np.linalg.norm(r0, axis=0)
    errors = []  # the estimated relative error of every target, per pass
    last_z = np.zeros_like(r0)  # each target's last M^-1 r: its iterate's error, about
    correct = np.zeros(t, dtype=bool)  # whose last pass allows the free final correction
    needed = np.zeros(t)  # passes a target given up would have needed (hopeless_passes)
    start_error = [0.0]  # beta0's estimated error where it exceeded start_limit

    def apply_A(V, cols):
        _, ZWZV = run(V, "refining in float64: CG step")
        return operator(V, ZWZV)

    def apply_M(R, cols):
        return scipy.linalg.cho_solve((factor, True), R, check_finite=False)

    def stop(delta, r, z, cols):  # the error of beta0 + delta is about M^-1 r = z (module docstring)
        # before the first pass: inf, but 0 where r0 is 0 (beta0 solves that target, and CG
        # never passes its column here; an inf left in the record failed the model's save)
        row = errors[-1].copy() if errors else np.where(r0norm > 0, np.inf, 0.0)
        prev = row[cols]  # a copy (fancy index): the estimate before this pass
        norm = np.linalg.norm(beta0[:, cols] + delta, axis=0)
        e = row[cols] = np.linalg.norm(z, axis=0) / np.where(norm > 0, norm, 1.0)
        errors.append(row)
        last_z[:, cols] = z
        if len(errors) == 1 and start_limit is not None and float(e.max()) > start_limit:
            start_error[0] = float(e.max())
            return np.ones(e.shape, dtype=bool)
        done, correct[cols] = _stop_rules(e, prev, tol, final_correction)
        done = done | (np.linalg.norm(r, axis=0) <= RESIDUAL_FLOOR * bsafe[cols])
        total = hopeless_passes(np.array([x[cols] for x in errors]), tol)
        # the last pass ends anyway; HOPELESS_MARGIN: CG speeds up, a prediction a little over is not given up
        give_up = ~done & (total > HOPELESS_MARGIN * max_passes) & (len(errors) < max_passes)
        needed[cols] = np.where(give_up, total, needed[cols])
        return done | give_up

    # CG on A delta = r0 from delta = 0; a column also ends when its residual is exactly 0
    delta, info = _block_cg(apply_A, r0, apply_M, 0.0, max_passes - 1, stop=stop)
    beta = beta0 + delta
    residuals = info["residuals"] * (r0norm / bsafe)[None, :]  # relative to b, not to r0
    while len(errors) < len(residuals):  # a pass that left no residual: no error
        errors.append(np.where(residuals[len(errors)] > 0, errors[-1], 0.0) if errors else np.zeros(t))
    if final_correction:  # the free last correction where a target's last pass showed M^-1 A near I
        fast = ~info["active"] & correct
        beta[:, fast] += last_z[:, fast]
    intercept = ybar - (mu @ beta if mu is not None else 0.0)
    # NaN residuals end CG's columns as if converged: a non-finite result never counts
    finite = bool(np.isfinite(beta).all() and np.isfinite(intercept).all() and np.isfinite(residuals).all())
    info = {"passes": len(residuals), "residuals": residuals, "errors": np.array(errors),
            "converged": (finite and not bool(info["active"].any()) and not bool((needed > 0).any())
                          and not start_error[0]),
            "start_error": start_error[0],
            "tol": float(tol), "max_passes": int(max_passes), "passes_needed": float(needed.max())}
    return RefineResult(beta, np.atleast_1d(intercept), stats, info, factor)
