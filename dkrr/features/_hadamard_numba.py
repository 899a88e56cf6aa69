"""The numba kernel of :func:`dkrr.features._hadamard.fwht`, in a module of its own so that
numba is imported at the first transform that uses it, not when dkrr's estimators are
imported (numba's import is about half a second)."""

from __future__ import annotations

import numpy as np

from .._jit import njit_cached

__all__ = ["fwht_numba"]


@njit_cached(nogil=True, boundscheck=False)
def _fwht_numba_kernel(a):  # pragma: no cover - compiled, covered via fwht()
    # Per row: one scalar radix-4 pass (stages h = 1, 2), then radix-4 passes on
    # contiguous slices (two stages per sweep over the row, inner loops LLVM
    # vectorizes), then a final radix-2 pass when log2(n) is odd. No fastmath:
    # the additions happen in the same order as the radix-2 algorithm.
    m, n = a.shape
    for r in range(m):
        x = a[r]
        h = 1
        if n >= 4:
            for i in range(0, n, 4):
                x0 = x[i]
                x1 = x[i + 1]
                x2 = x[i + 2]
                x3 = x[i + 3]
                a0 = x0 + x1
                a1 = x0 - x1
                a2 = x2 + x3
                a3 = x2 - x3
                x[i] = a0 + a2
                x[i + 1] = a1 + a3
                x[i + 2] = a0 - a2
                x[i + 3] = a1 - a3
            h = 4
        while 4 * h <= n:
            for i in range(0, n, 4 * h):
                q0 = x[i : i + h]
                q1 = x[i + h : i + 2 * h]
                q2 = x[i + 2 * h : i + 3 * h]
                q3 = x[i + 3 * h : i + 4 * h]
                for j in range(h):
                    p0 = q0[j]
                    p1 = q1[j]
                    p2 = q2[j]
                    p3 = q3[j]
                    a0 = p0 + p1
                    a1 = p0 - p1
                    a2 = p2 + p3
                    a3 = p2 - p3
                    q0[j] = a0 + a2
                    q1[j] = a1 + a3
                    q2[j] = a0 - a2
                    q3[j] = a1 - a3
            h *= 4
        if h < n:  # log2(n) odd: one radix-2 stage left, 2 * h == n
            lo = x[:h]
            hi = x[h:]
            for j in range(h):
                u = lo[j]
                v = hi[j]
                lo[j] = u + v
                hi[j] = u - v
    return a


def fwht_numba(a: np.ndarray) -> np.ndarray:
    """``a`` transformed in place by the numba kernel (checked by the caller)."""
    _fwht_numba_kernel(a)
    return a
