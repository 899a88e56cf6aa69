"""Independent preconditioned conjugate-gradient recurrences over the columns of a
right-hand side (p, t), one operator call per iteration for the columns still running:
the recurrence of ``solver="pcg"`` (:mod:`._pcg`, one streamed pass per call) and of the
float64 refinement (:mod:`._refine`)."""

from __future__ import annotations

import numpy as np

__all__ = ["_block_cg"]


def _block_cg(apply_A, b, apply_M, tol, max_iter, stop=None, on_iteration=None):
    """Independent preconditioned CG recurrences for the columns of ``b`` (p, t); one
    ``apply_A(V, cols)`` call per iteration on the columns ``cols`` still running
    (``apply_M(R, cols)`` preconditions them). A column stops when its relative residual
    is at most ``tol`` or, with ``stop``, when ``stop(x, r, z, cols)`` (the iterates, the
    residuals and the preconditioned residuals ``z = M^-1 r`` of the running columns
    ``cols``, before each step) marks it done. ``on_iteration(n_iter, rel)``, when given,
    is called before the first iteration (``n_iter = 0``) and after each with the relative
    residuals of every column (a stopped column keeps its last): a progress line's update.
    Returns ``(x, info)``; ``info["active"]`` marks the columns that did not stop."""
    p, t = b.shape
    bnorm = np.linalg.norm(b, axis=0)
    x = np.zeros((p, t))
    r = b.copy()
    every = np.arange(t)
    z = r if apply_M is None else apply_M(r, every)
    d = z.copy()
    rz = np.einsum("ij,ij->j", r, z)
    rel = np.where(bnorm > 0, np.linalg.norm(r, axis=0) / np.where(bnorm > 0, bnorm, 1.0), 0.0)
    history = [rel.copy()]
    if on_iteration is not None:
        on_iteration(0, rel)
    active = rel > tol
    if stop is not None and active.any():
        active[active] = ~stop(x[:, active], r[:, active], z[:, active], every[active])
    n_iter = 0
    while active.any() and n_iter < max_iter:
        cols = np.nonzero(active)[0]
        q = apply_A(d[:, cols], cols)
        a = rz[cols] / np.einsum("ij,ij->j", d[:, cols], q)
        x[:, cols] += a * d[:, cols]
        r[:, cols] -= a * q
        n_iter += 1
        rel[cols] = np.linalg.norm(r[:, cols], axis=0) / bnorm[cols]
        history.append(rel.copy())
        if on_iteration is not None:
            on_iteration(n_iter, rel)
        active &= rel > tol  # (a column stopped by ``stop`` stays stopped)
        cols = np.nonzero(active)[0]
        if cols.size:
            zc = r[:, cols] if apply_M is None else apply_M(r[:, cols], cols)
            if stop is not None:
                keep = ~stop(x[:, cols], r[:, cols], zc, cols)
                active[cols[~keep]] = False
                cols, zc = cols[keep], zc[:, keep]
        if cols.size:
            rz_new = np.einsum("ij,ij->j", r[:, cols], zc)
            d[:, cols] = zc + (rz_new / rz[cols]) * d[:, cols]
            rz[cols] = rz_new
    info = {"solver": "pcg", "n_iter": n_iter, "converged": bool(not active.any()),
            "residuals": np.array(history), "tol": float(tol), "active": active}
    return x, info
