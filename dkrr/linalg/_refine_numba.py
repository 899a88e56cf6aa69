"""The compiled products of a refinement pass (:mod:`dkrr.linalg._refine`): a module of its
own, imported at first use, so ``import dkrr`` does not import numba."""

from __future__ import annotations

import numpy as np

from .._jit import njit_cached

__all__ = ["refine_rows"]


@njit_cached(nogil=True, boundscheck=False, error_model="numpy", fastmath={"contract", "reassoc"})
def refine_rows(Z, BT, outT, Y, cT, w, zsum, linear):  # pragma: no cover - compiled
    """For the rows ``z`` of the float64 features ``Z`` (rows, p): ``outT[k] += sum_z z (z .
    BT[k])`` for every column k of ``B`` (``outT += (Z^T Z B)^T``) and, when ``linear``,
    ``cT[k] += sum_i Y[i, k] z_i`` (``cT += (Z^T Y)^T``, ``Y`` (rows, t)) and ``zsum += sum_i w[i] z_i``.

    One read of each row from memory: the row (p numbers) stays in L1 between its dot
    products and its updates, where the two matrix-vector products ``Z^T (Z B)`` read the
    sub-block twice and the linear statistics twice more. The dot products are summed in
    vector lanes (``reassoc``: a fixed order for a given build, like BLAS's); the rows'
    terms are summed in order into zeroed arrays of this call, which are then added to
    the outputs (two levels, as a sub-block's product and the running sum of the BLAS path)."""
    n, p = Z.shape
    m = BT.shape[0]
    t = Y.shape[1]
    lo = np.zeros((m, p))
    lc = np.zeros((t, p))
    lz = np.zeros(p)
    for i in range(n):
        zi = Z[i]
        for k in range(m):
            bk = BT[k]
            u = 0.0
            for j in range(p):
                u += zi[j] * bk[j]
            ok = lo[k]
            for j in range(p):
                ok[j] += zi[j] * u
        if linear:
            for k in range(t):
                yk = Y[i, k]
                ck = lc[k]
                for j in range(p):
                    ck[j] += zi[j] * yk
            wi = w[i]
            for j in range(p):
                lz[j] += zi[j] * wi
    for k in range(m):
        outT[k] += lo[k]
    if linear:
        for k in range(t):
            cT[k] += lc[k]
        zsum += lz
