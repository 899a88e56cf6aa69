"""The compiled loop of :func:`dkrr.linalg._precision._cross64` for float32 features: a
module of its own, imported at first use, so ``import dkrr`` does not import numba."""

from __future__ import annotations

import numpy as np

from .._jit import njit_cached

__all__ = ["cross_rows"]


@njit_cached(nogil=True, boundscheck=False, error_model="numpy", fastmath={"contract"})
def cross_rows(Z, Y, outT, sums, with_sums):  # pragma: no cover - compiled
    """``outT += Y^T Z`` and (``with_sums``) ``sums += 1^T Z`` in float64 from a float32
    ``Z`` (rows, p), one row at a time: each row is widened in registers and read from L1
    once per target, and every sum runs over the rows in order (as numpy's ``axis=0`` sum
    of the widened slice does)."""
    n, p = Z.shape
    t = Y.shape[1]
    for i in range(n):
        zi = Z[i]
        for k in range(t):
            yk = Y[i, k]
            ok = outT[k]
            for j in range(p):
                ok[j] += np.float64(zi[j]) * yk
        if with_sums:
            for j in range(p):
                sums[j] += np.float64(zi[j])
