"""Fast Walsh-Hadamard transform (FWHT) along the rows of a 2-D array.

:func:`fwht` computes ``a @ scipy.linalg.hadamard(n)`` in place (Sylvester ordering,
unnormalized: entries of ``H`` are +-1) for a C-contiguous float32/float64 array of
width ``n`` a power of two. Three interchangeable backends, chosen by measurement
(fastest first: ``fht_cpu``, ``numba``, ``numpy``; the numbers and the command that
reproduces them are in benchmarks/README.md, "FWHT backends").

``fht_cpu`` (a SIMD C++ extension from PyPI) is optional: it is used when it imports
and, on first use, agrees with the numba kernel (or the numpy butterfly) on a small
random array; otherwise the numba kernel is the default, and the pure-numpy butterfly
is the last resort. It always runs with ``num_threads=1``: dkrr workers run one thread
per worker thread.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from ..errors import InputValidationError, InvalidParameterError

__all__ = [
    "FWHT_BACKENDS",
    "available_fwht_backends",
    "default_fwht_backend",
    "fwht",
    "pad_columns",
]

#: every backend name :func:`fwht` knows, fastest first
FWHT_BACKENDS: tuple[str, ...] = ("fht_cpu", "numba", "numpy")

try:  # optional SIMD kernel
    import fht_cpu as _fht_cpu
except Exception:  # pragma: no cover - depends on the environment
    _fht_cpu = None


# -- numpy butterfly ------------------------------------------------------------------
def _fwht_numpy(a: np.ndarray) -> np.ndarray:
    """log2(n) vectorized radix-2 passes over the whole array (slow, always available)."""
    m, n = a.shape
    h = 1
    while h < n:
        v = a.reshape(m, n // (2 * h), 2, h)
        lo = v[:, :, 0, :]
        hi = v[:, :, 1, :]
        diff = lo - hi
        lo += hi
        hi[...] = diff
        h *= 2
    return a


# -- fht_cpu --------------------------------------------------------------------------
def _fwht_fht_cpu(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.float32:
        _fht_cpu.fht_2d_f32_rows(a, 1)
    else:
        _fht_cpu.fht_2d_f64_rows(a, 1)
    return a


_KERNELS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"numpy": _fwht_numpy}
_numba_tried = False
_numba_lock = threading.Lock()
_lock = threading.Lock()
_fht_cpu_verified: bool | None = None  # None: not checked yet
_default: str | None = None


def _kernels() -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The kernels of this process; the numba kernel joins them on the first call, when
    numba imports (``import dkrr`` and its estimators do not import numba)."""
    global _numba_tried
    if not _numba_tried:
        with _numba_lock:
            if not _numba_tried:
                try:
                    from ._hadamard_numba import fwht_numba
                except Exception:  # pragma: no cover - depends on the environment
                    pass
                else:
                    _KERNELS["numba"] = fwht_numba
                _numba_tried = True
    return _KERNELS


def _verify_fht_cpu() -> bool:
    """Compare fht_cpu with a reference kernel on small arrays, once per process."""
    global _fht_cpu_verified
    with _lock:
        if _fht_cpu_verified is None:
            ok = _fht_cpu is not None
            if ok:
                reference = _kernels().get("numba", _fwht_numpy)
                rng = np.random.default_rng(0)
                try:
                    for dtype in (np.float32, np.float64):
                        for n in (1, 2, 64, 512):
                            x = rng.standard_normal((3, n)).astype(dtype)
                            got = _fwht_fht_cpu(x.copy())
                            want = reference(x.copy())
                            tol = 1e-4 if dtype == np.float32 else 1e-10
                            if not np.allclose(got, want, rtol=tol, atol=tol * np.sqrt(n)):
                                ok = False
                except Exception:
                    ok = False
            if ok:
                _KERNELS["fht_cpu"] = _fwht_fht_cpu
            _fht_cpu_verified = ok
        return _fht_cpu_verified


def available_fwht_backends() -> tuple[str, ...]:
    """Backends usable in this process, fastest first.

    ``"fht_cpu"`` is listed only if it imports and passed its one-time check against the
    numba kernel.
    """
    _verify_fht_cpu()
    return tuple(b for b in FWHT_BACKENDS if b in _kernels())


def default_fwht_backend() -> str:
    """The backend :func:`fwht` uses when none is given (the fastest available)."""
    global _default
    if _default is None:
        _default = available_fwht_backends()[0]
    return _default


def fwht(a: np.ndarray, *, backend: str | None = None) -> np.ndarray:
    """In-place unnormalized Walsh-Hadamard transform of every row of ``a``.

    Computes ``a @ scipy.linalg.hadamard(n)`` (Sylvester ordering, entries +-1, no
    ``1/sqrt(n)`` factor) in ``O(m n log n)`` additions, overwriting ``a``.

    Parameters
    ----------
    a : ndarray of shape (m, n), float32 or float64, C-contiguous and writeable
        ``n`` must be a power of two (1 included); ``m`` may be 0.
    backend : {"fht_cpu", "numba", "numpy"}, optional
        Kernel to use; default :func:`default_fwht_backend` (the fastest available).
        ``"fht_cpu"`` runs single-threaded.

    Returns
    -------
    ndarray
        ``a`` itself, transformed.

    Raises
    ------
    InputValidationError
        If ``a`` is not a 2-D C-contiguous writeable float32/float64 ndarray whose width is
        a power of two.
    InvalidParameterError
        If ``backend`` is unknown or not available in this process.
    """
    if not isinstance(a, np.ndarray):
        raise InputValidationError(
            f"fwht expects a numpy ndarray, got {type(a).__name__}; convert with np.asarray"
        )
    if a.ndim != 2:
        raise InputValidationError(
            f"fwht expects a 2-D array (rows are transformed), got shape {a.shape}; "
            "reshape to (n_rows, width)"
        )
    if a.dtype not in (np.float32, np.float64):
        raise InputValidationError(
            f"fwht supports float32 and float64 arrays, got dtype {a.dtype}; "
            "convert with a.astype(np.float64)"
        )
    n = a.shape[1]
    if n < 1 or n & (n - 1):
        raise InputValidationError(
            f"fwht needs a width that is a power of two, got shape {a.shape}; "
            "zero-pad the columns (see pad_columns)"
        )
    if not a.flags.c_contiguous:
        raise InputValidationError(
            f"fwht works in place on C-contiguous arrays; array of shape {a.shape} is not "
            "C-contiguous, pass np.ascontiguousarray(a)"
        )
    if not a.flags.writeable:
        raise InputValidationError(
            f"fwht works in place but the array of shape {a.shape} is read-only; pass a copy"
        )
    if backend is None:
        backend = default_fwht_backend()
    elif backend == "fht_cpu":
        _verify_fht_cpu()
    kernel = _kernels().get(backend)
    if kernel is None:
        if backend in FWHT_BACKENDS:
            raise InvalidParameterError(
                f"fwht backend {backend!r} is not available in this process; "
                f"available: {available_fwht_backends()}"
            )
        raise InvalidParameterError(
            f"unknown fwht backend {backend!r}; choose one of {FWHT_BACKENDS}"
        )
    if n == 1 or a.shape[0] == 0:
        return a
    return kernel(a)


def pad_columns(X: np.ndarray, width: int, dtype=None) -> np.ndarray:
    """Return a new C-contiguous array of ``width`` columns: ``X`` followed by zeros.

    Parameters
    ----------
    X : ndarray of shape (m, d)
    width : int
        Number of output columns, ``>= d`` (typically ``next_power_of_two(d)``).
    dtype : dtype, optional
        Output dtype, default ``X.dtype``.

    Returns
    -------
    ndarray of shape (m, width)
    """
    m, d = X.shape
    if width < d:
        raise InvalidParameterError(f"cannot pad {d} columns to a smaller width {width}")
    out = np.zeros((m, width), dtype=X.dtype if dtype is None else dtype)
    out[:, :d] = X
    return out
