"""Fast ``[cos(P), sin(P)] * scale``: the nonlinearity of the Gaussian (cos/sin) feature map.

numpy's float64 ``cos``/``sin`` are slow (about 0.1 G elements/s on a typical server
core: they are correctly rounded for every argument) and on a large feature block they cost
more than the Gram product that follows. :func:`cos_sin` evaluates both in one pass with a
numba kernel that LLVM vectorizes:

1. Cody-Waite range reduction by ``pi/2``: ``k = round(x * 2/pi)``,
   ``r = x - k*(pi/2)`` with ``pi/2`` split in three parts (float64: the first two parts
   have 33 significant bits, so ``k * part`` is exact for ``|k| < 2**20``; float32: the
   Cephes split, exact products for ``|k| < 2**16``), ``|r| <= pi/4``.
2. Minimax polynomials for ``sin`` and ``cos`` on ``[-pi/4, pi/4]`` (fdlibm's
   ``__kernel_sin``/``__kernel_cos`` coefficients in float64, Cephes ``sinf``/``cosf`` in
   float32).
3. Quadrant selection ``k mod 4`` computed in floating point (no float->int conversion),
   written with selects only, so the loop has no branches and vectorizes (AVX2/AVX-512;
   compiled with ``fastmath={"contract"}`` only, so FMAs are used but no reassociation
   can break the Cody-Waite reduction).

Accuracy (tested in ``tests/test_trig.py``): float64 absolute error below ``~5e-16`` for
``|x| <= 1e5``; float32 below ``~1e-6`` against float64 numpy on the float32 argument.
Arguments outside the reduction's safe range (``|x| > 1e5`` in float64, ``|x| > 8192`` in
float32) and non-finite arguments are recomputed with numpy after the kernel, so the result is
always correct. The kernel detects them as it goes: one ``good &= |x| <= limit`` per
element (False for NaN), which costs nothing measurable, where the two numpy passes
``max(P.max(), -P.min())`` it replaced were 20-27% of the function (float64, 64-512 rows
of 512-1024 arguments, medians of 41 alternating repeats, ad hoc: ``cos_sin`` took
0.73-0.82x its earlier time). Counting them inside the kernel, rather than ANDing a flag,
halved its speed. Without numba the function falls back to numpy.
"""

from __future__ import annotations


import numpy as np

from .._jit import njit_cached
from ..errors import InputValidationError

__all__ = ["cos_sin", "HAVE_NUMBA"]

try:  # pragma: no cover - exercised depending on the environment
    import numba

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover
    numba = None
    HAVE_NUMBA = False

#: arguments with ``|x|`` above this (or non-finite) are recomputed with numpy
MAX_ARG64 = 1.0e5
MAX_ARG32 = 8192.0

# --- float64 constants (fdlibm, e_rem_pio2.c / k_sin.c / k_cos.c) -----------------------
_TWO_OVER_PI = 6.36619772367581382433e-01
_PIO2_1 = 1.57079632673412561417e00  # first 33 bits of pi/2
_PIO2_2 = 6.07710050630396597660e-11  # next 33 bits
_PIO2_3 = 2.02226624879595063154e-21  # pi/2 - _PIO2_1 - _PIO2_2 (double)
_S1 = -1.66666666666666324348e-01
_S2 = 8.33333333332248946124e-03
_S3 = -1.98412698298579493134e-04
_S4 = 2.75573137070700676789e-06
_S5 = -2.50507602534068634195e-08
_S6 = 1.58969099521155010221e-10
_C1 = 4.16666666666666019037e-02
_C2 = -1.38888888888741095749e-03
_C3 = 2.48015872894767294178e-05
_C4 = -2.75573143513906633035e-07
_C5 = 2.08757232129817482790e-09
_C6 = -1.13596475577881948265e-11

# --- float32 constants (Cephes sinf.c, reduction by pi/2) --------------------------------
_F_TWO_OVER_PI = np.float32(0.636619772367581343)
_F_DP1 = np.float32(1.5703125)
_F_DP2 = np.float32(4.837512969970703125e-4)
_F_DP3 = np.float32(7.54978995489188216e-8)
_F_S1 = np.float32(-1.6666654611e-1)
_F_S2 = np.float32(8.3321608736e-3)
_F_S3 = np.float32(-1.9515295891e-4)
_F_C1 = np.float32(4.166664568298827e-2)
_F_C2 = np.float32(-1.388731625493765e-3)
_F_C3 = np.float32(2.443315711809948e-5)


if HAVE_NUMBA:

    @njit_cached(nogil=True, boundscheck=False, error_model="numpy", fastmath={"contract"})
    def _kernel64(P, scale, out, limit):  # pragma: no cover - compiled
        n, D = P.shape
        good = True  # every |x| <= limit (False for NaN)
        for i in range(n):
            # 1-D row views: with them LLVM proves the loop vectorizable
            Pi = P[i]
            oc = out[i, :D]
            os_ = out[i, D:]
            for j in range(D):
                x = Pi[j]
                good &= abs(x) <= limit
                k = np.floor(x * _TWO_OVER_PI + 0.5)
                r = ((x - k * _PIO2_1) - k * _PIO2_2) - k * _PIO2_3
                z = r * r
                s = r + r * z * (_S1 + z * (_S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))))
                c = 1.0 - 0.5 * z + z * z * (
                    _C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * _C6))))
                )
                # quadrant q = k mod 4 in {0, 1, 2, 3}, in floating point
                q = k - 4.0 * np.floor(k * 0.25)
                odd = (q == 1.0) | (q == 3.0)
                sv = c if odd else s
                cv = s if odd else c
                sin_neg = q >= 2.0
                cos_neg = (q == 1.0) | (q == 2.0)
                oc[j] = (-cv if cos_neg else cv) * scale
                os_[j] = (-sv if sin_neg else sv) * scale
        return good

    @njit_cached(nogil=True, boundscheck=False, error_model="numpy", fastmath={"contract"})
    def _kernel32(P, scale, out, limit):  # pragma: no cover - compiled
        n, D = P.shape
        lim = np.float32(limit)
        good = True  # every |x| <= limit (False for NaN)
        half = np.float32(0.5)
        one = np.float32(1.0)
        four = np.float32(4.0)
        quarter = np.float32(0.25)
        sc = np.float32(scale)
        for i in range(n):
            # 1-D row views: with them LLVM proves the loop vectorizable
            Pi = P[i]
            oc = out[i, :D]
            os_ = out[i, D:]
            for j in range(D):
                x = Pi[j]
                good &= abs(x) <= lim
                k = np.float32(np.floor(x * _F_TWO_OVER_PI + half))
                r = ((x - k * _F_DP1) - k * _F_DP2) - k * _F_DP3
                z = r * r
                s = r + r * z * (_F_S1 + z * (_F_S2 + z * _F_S3))
                c = one - half * z + z * z * (_F_C1 + z * (_F_C2 + z * _F_C3))
                q = k - four * np.float32(np.floor(k * quarter))
                odd = (q == np.float32(1.0)) | (q == np.float32(3.0))
                sv = c if odd else s
                cv = s if odd else c
                sin_neg = q >= np.float32(2.0)
                cos_neg = (q == np.float32(1.0)) | (q == np.float32(2.0))
                oc[j] = (-cv if cos_neg else cv) * sc
                os_[j] = (-sv if sin_neg else sv) * sc
        return good


def _cos_sin_numpy(P: np.ndarray, scale: float, out: np.ndarray) -> None:
    D = P.shape[1]
    s = P.dtype.type(scale)
    np.cos(P, out=out[:, :D])
    np.sin(P, out=out[:, D:])
    if s != 1:
        out *= s


def cos_sin(
    P: np.ndarray, scale: float = 1.0, out: np.ndarray | None = None, *, use_numba: bool = True
) -> np.ndarray:
    """Return ``[cos(P), sin(P)] * scale`` as one ``(n, 2D)`` array.

    Parameters
    ----------
    P : ndarray of shape (n, D), float32 or float64
        Projections ``X @ W.T``. Must be C-contiguous.
    scale : float, default=1.0
        Multiplier of both blocks (``1 / sqrt(D)`` for the Gaussian feature map).
    out : ndarray of shape (n, 2D), optional
        C-contiguous output array of the same dtype as ``P``; allocated when omitted.
        Columns ``[:D]`` receive the cosines, ``[D:]`` the sines. Must not overlap ``P``.
    use_numba : bool, default=True
        Use the compiled kernel when numba is installed; ``False`` forces numpy
        (reference path, used by tests and benchmarks).

    Returns
    -------
    out : ndarray of shape (n, 2D), same dtype as ``P``

    Raises
    ------
    InputValidationError
        If ``P`` is not a 2-D C-contiguous float32/float64 array, or ``out`` has the wrong
        shape, dtype or layout.

    Notes
    -----
    Float64 absolute error is below about ``5e-16`` (times ``scale``) for ``|x| <= 1e5``,
    float32 below about ``1e-6``; larger or non-finite arguments are recomputed with
    numpy, so the result matches numpy's semantics there (NaN for NaN and +-inf).
    """
    if not isinstance(P, np.ndarray) or P.ndim != 2:
        raise InputValidationError(
            f"cos_sin expects a 2-D ndarray, got {type(P).__name__} "
            f"with ndim={getattr(P, 'ndim', None)}"
        )
    if P.dtype not in (np.float32, np.float64):
        raise InputValidationError(
            f"cos_sin expects float32 or float64 input, got dtype {P.dtype}; "
            "convert with P.astype(np.float64)"
        )
    if not P.flags.c_contiguous:
        raise InputValidationError(
            "cos_sin expects a C-contiguous array; pass np.ascontiguousarray(P)"
        )
    n, D = P.shape
    if out is None:
        out = np.empty((n, 2 * D), dtype=P.dtype)
    else:
        if not isinstance(out, np.ndarray) or out.shape != (n, 2 * D) or out.dtype != P.dtype:
            raise InputValidationError(
                f"out must be an ndarray of shape {(n, 2 * D)} and dtype {P.dtype}, got "
                f"shape {getattr(out, 'shape', None)} and dtype {getattr(out, 'dtype', None)}"
            )
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise InputValidationError("out must be a writeable C-contiguous array")
        if np.shares_memory(out, P):
            raise InputValidationError("out must not overlap P")
    if P.size == 0:
        return out
    if not (HAVE_NUMBA and use_numba):
        _cos_sin_numpy(P, scale, out)
        return out
    # the kernels check the range as they go (one AND per element, False for NaN)
    if P.dtype == np.float64:
        limit = MAX_ARG64
        good = _kernel64(P, float(scale), out, limit)
    else:
        limit = MAX_ARG32
        good = _kernel32(P, float(scale), out, limit)
    if not good:
        # rare: huge or non-finite arguments -> numpy, element by element
        mask = ~(np.abs(P) <= limit)
        vals = P[mask]
        s = P.dtype.type(scale)
        out[:, :D][mask] = np.cos(vals) * s
        out[:, D:][mask] = np.sin(vals) * s
    return out
