"""Structured matrices applied to row blocks by FFT: circulant, skew-circulant, Toeplitz,
Hankel and Toeplitz-like products.

Every function applies a square structured matrix ``M`` to each ROW x of a 2-D array,
i.e. returns ``X @ M.T``, with the generating vectors in the conventions of
:mod:`scipy.linalg` (``circulant(c)``, ``toeplitz(c, r)``, ``hankel(c, r)``: first
columns). Circulants use ``rfft``/``irfft``; a skew-circulant becomes a cyclic
convolution with the twiddle ``exp(i pi k / n)``; Toeplitz and Hankel matrices are
embedded in a circulant of size ``2n``. float32 input is transformed in
float32/complex64. The P-model projections (:mod:`dkrr.features._structured`) are built
from these pieces.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.fft
import scipy.linalg

from ..errors import InputValidationError, InvalidParameterError

__all__ = [
    "circulant_multiply",
    "hankel_multiply",
    "skew_circulant_matrix",
    "skew_circulant_multiply",
    "toeplitz_like_multiply",
    "toeplitz_multiply",
]


def _complex_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.complex64) if np.dtype(dtype) == np.float32 else np.dtype(np.complex128)


@functools.lru_cache(maxsize=64)
def _twiddle(n: int, dtype_str: str) -> np.ndarray:
    """``exp(i pi k / n)``, k = 0..n-1 (diagonalizes skew-circulants with the DFT)."""
    w = np.exp(1j * np.pi * np.arange(n) / n).astype(_complex_dtype(np.dtype(dtype_str)))
    w.setflags(write=False)
    return w


def _skew_spectrum(c: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """DFT of the twiddled first column: ``S(c) = T^-1 F^-1 diag(fft(T c)) F T``."""
    n = c.shape[-1]
    return scipy.fft.fft(c.astype(dtype, copy=False) * _twiddle(n, np.dtype(dtype).str))


def _skew_prepare(X: np.ndarray) -> np.ndarray:
    n = X.shape[-1]
    return scipy.fft.fft(X * _twiddle(n, X.dtype.str), axis=-1, overwrite_x=True)


def _skew_finish(prod: np.ndarray, real_dtype: np.dtype) -> np.ndarray:
    """Inverse DFT, untwiddle, real part."""
    n = prod.shape[-1]
    z = scipy.fft.ifft(prod, axis=-1, overwrite_x=True)
    z *= np.conj(_twiddle(n, np.dtype(real_dtype).str))
    return np.ascontiguousarray(z.real)


def _check_vec(v: np.ndarray, n: int, name: str) -> np.ndarray:
    v = np.asarray(v)
    if v.ndim != 1 or v.shape[0] != n:
        raise InvalidParameterError(f"{name} must be a 1-D array of length {n}, got shape {v.shape}")
    return v


def _check_rows(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X)
    if X.ndim != 2 or X.dtype not in (np.float32, np.float64):
        raise InputValidationError(
            f"X must be a 2-D float32/float64 array of row vectors, got shape {X.shape} "
            f"and dtype {X.dtype}"
        )
    return X


def circulant_multiply(c: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Apply ``scipy.linalg.circulant(c)`` (first COLUMN ``c``) to every row of ``X``.

    Returns ``X @ circulant(c).T`` in the dtype of ``X`` with one ``rfft``/``irfft`` pair.
    """
    X = _check_rows(X)
    n = X.shape[1]
    c = _check_vec(c, n, "c")
    spec = scipy.fft.rfft(c.astype(X.dtype))
    return scipy.fft.irfft(spec * scipy.fft.rfft(X, axis=-1), n=n, axis=-1)


def skew_circulant_matrix(c: np.ndarray) -> np.ndarray:
    """Dense skew-circulant matrix with first column ``c``.

    ``S[j, k] = c[j - k]`` for ``j >= k`` and ``-c[j - k + n]`` for ``j < k`` (the entries
    that wrap around are negated), built with ``scipy.linalg.toeplitz``.
    """
    c = np.asarray(c, dtype=np.float64)
    return scipy.linalg.toeplitz(c, np.concatenate([c[:1], -c[:0:-1]]))


def skew_circulant_multiply(c: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Apply the skew-circulant with first column ``c`` (:func:`skew_circulant_matrix`)
    to every row of ``X`` via the twiddle ``exp(i pi k / n)`` and complex FFTs."""
    X = _check_rows(X)
    n = X.shape[1]
    c = _check_vec(c, n, "c")
    spec = _skew_spectrum(c, X.dtype)
    return _skew_finish(spec * _skew_prepare(X), X.dtype)


def _toeplitz_vector(c: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``g`` of length ``2n-1`` with ``toeplitz(c, r)[j, k] = g[j - k + n - 1]``."""
    return np.concatenate([r[:0:-1], c])


def toeplitz_multiply(c: np.ndarray, r: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Apply ``scipy.linalg.toeplitz(c, r)`` (square, ``r[0]`` ignored) to every row of
    ``X`` by embedding it in a circulant of size ``2n`` (real FFTs)."""
    X = _check_rows(X)
    n = X.shape[1]
    g = _toeplitz_vector(_check_vec(c, n, "c"), _check_vec(r, n, "r"))
    L = 2 * n
    spec = scipy.fft.rfft(g.astype(X.dtype), n=L)
    return np.ascontiguousarray(
        scipy.fft.irfft(spec * scipy.fft.rfft(X, n=L, axis=-1), n=L, axis=-1)[:, n - 1 : 2 * n - 1]
    )


def hankel_multiply(c: np.ndarray, r: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Apply ``scipy.linalg.hankel(c, r)`` (square, ``r[0]`` ignored) to every row of
    ``X``: a cyclic correlation of size ``2n`` (real FFTs)."""
    X = _check_rows(X)
    n = X.shape[1]
    g = np.concatenate([_check_vec(c, n, "c"), _check_vec(r, n, "r")[1:]])
    L = 2 * n
    spec = scipy.fft.rfft(g.astype(X.dtype), n=L)
    prod = spec * np.conj(scipy.fft.rfft(X, n=L, axis=-1))
    return np.ascontiguousarray(scipy.fft.irfft(prod, n=L, axis=-1)[:, :n])


def toeplitz_like_multiply(G: np.ndarray, H: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Apply ``M = (1/sqrt(r)) sum_i circulant(G[i]) @ skew_circulant_matrix(H[i])`` to
    every row of ``X`` (``G``, ``H`` of shape ``(r, n)``: first columns)."""
    X = _check_rows(X)
    n = X.shape[1]
    G = np.asarray(G)
    H = np.asarray(H)
    if G.ndim != 2 or G.shape != H.shape or G.shape[1] != n:
        raise InvalidParameterError(
            f"G and H must both have shape (r, {n}), got {G.shape} and {H.shape}"
        )
    r = G.shape[0]
    spec_g = scipy.fft.rfft(G.astype(X.dtype), axis=-1) * X.dtype.type(1 / np.sqrt(r))
    spec_h = _skew_spectrum(H, X.dtype)
    return _toeplitz_like_apply(spec_g, spec_h, _skew_prepare(X), n, X.dtype)


def _toeplitz_like_apply(spec_g, spec_h, prep, n, real_dtype):
    acc = None
    for i in range(spec_g.shape[0]):
        z = _skew_finish(spec_h[i] * prep, real_dtype)
        term = scipy.fft.rfft(z, axis=-1, overwrite_x=True)
        term *= spec_g[i]
        if acc is None:
            acc = term
        else:
            acc += term
    return scipy.fft.irfft(acc, n=n, axis=-1)
