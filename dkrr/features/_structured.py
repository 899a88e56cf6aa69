"""P-model structured Gaussian projections (Choromanski & Sindhwani 2016, section 3.3).

Every method first *densifies* the zero-padded input, ``x' = H_n D_a H_n D_b x``
(``D_a``, ``D_b`` Rademacher diagonals, ``H_n`` the orthonormal Walsh-Hadamard matrix of
order ``d'``, the next power of two >= d; an orthogonal map, so Gaussian and arc-cosine
kernels are unchanged), then multiplies ``x'`` by ``ceil(D / d')`` independent structured
``d' x d'`` matrices ``M`` built from a small Gaussian "budget of randomness", times
``scale``, and keeps the first ``D`` rows (ALGORITHMS.md section 2):

``W = scale * [M_1; M_2; ...][:D] @ H_n D_a H_n D_b  [:, :d]``

The densification is drawn once per projection and shared by all blocks (the paper's
"preprocessing phase"); the blocks ``M_b`` are independent.

========================  ===================================================  ===========
method                    ``M`` (``n = d'``)                                   stored
========================  ===================================================  ===========
``"circulant"``           first row ``g ~ N(0, I_n)``, each row the previous   ``n`` / blk
                          one shifted cyclically right: ``M[j,k] = g[k-j mod n]``
``"skew_circulant"``      as circulant, wrapped entries negated:               ``n`` / blk
                          ``M[j,k] = g[k-j]`` (k >= j), ``-g[k-j+n]`` (k < j)
``"toeplitz"``            constant diagonals, ``g ~ N(0, I_{2n-1})``:          ``2n-1``
                          ``M[j,k] = g[j-k+n-1]``
``"hankel"``              constant anti-diagonals: ``M[j,k] = g[j+k]``         ``2n-1``
``"toeplitz_like"``       ``(1/sqrt(r)) sum_i Z1(g_i) Zm1(h_i)``, displacement  ``2rn``
                          rank ``r``: ``Z1(g)`` circulant with first column
                          ``g ~ N(0, I)``, ``Zm1(h)`` skew-circulant with first
                          column ``h`` (Rademacher signs, ``||h|| = 1``)
========================  ===================================================  ===========

Every row of each ``M`` is N(0, I_n) marginally (a signed permutation of ``g``), which is
what makes the random features unbiased. For ``toeplitz_like`` this holds exactly when
every ``Zm1(h_i)`` is a signed permutation (``skew_nonzeros=1``, any ``r``). With dense
(or multi-sparse) ``h_i`` a row is, conditionally on the ``h_i``, N(0, C) with
``C = (1/r) sum_i Zm1(h_i)^T Zm1(h_i)``: ``diag(C) = 1`` and ``E[C] = I``, so single
entries of ``M`` are exactly N(0, 1) and rows have mean 0 and covariance I, but rows of
``W = M H_n D_a H_n D_b`` are a Gaussian scale mixture (excess kurtosis ``O(1/(r d'))``,
about 0.4 at ``d' = 8``, ``r = 1``). By Jensen the Gaussian-kernel estimate is then
biased upwards by ``O(||x - y||^4 / (r d') / sigma^4)`` -- negligible for realistic
``d'``, visible in tight tests at tiny ``d'``. That is the paper's construction; use
``skew_nonzeros=1`` for exact unbiasedness.

Fast path: one FWHT-based densification of all rows, then ``scipy.fft`` over all rows
at once -- ``rfft``/``irfft`` for circulant (``O(n log n)`` per block), the twiddle
``exp(i pi k / n)`` turning a skew-circulant product into a cyclic convolution, and
embedding in a circulant of size ``2n`` for Toeplitz and Hankel. The transform of the
densified input is shared by all blocks; the spectra of the generating vectors are
computed lazily and cached on the instance (not stored in the state, which holds only
the O(D + d) random numbers). float32 input is transformed in float32/complex64.

For small ``d'`` a dense GEMM with ``W`` regenerated once from the stored numbers (by
running the fast path on the identity, cached on the instance) is faster; see
:meth:`PModelProjection.use_dense` for the measured crossover.
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from typing import Any

import numpy as np
import scipy.fft
import scipy.linalg

from ..errors import InputValidationError, InvalidParameterError
from ._base import next_power_of_two, register_projection
from ._hadamard import fwht
from ._orthogonal import HadamardBlockProjection

__all__ = [
    "PModelProjection",
    "CirculantProjection",
    "SkewCirculantProjection",
    "ToeplitzProjection",
    "HankelProjection",
    "ToeplitzLikeProjection",
    "circulant_multiply",
    "skew_circulant_multiply",
    "toeplitz_multiply",
    "hankel_multiply",
    "toeplitz_like_multiply",
    "skew_circulant_matrix",
]


# -- FFT building blocks ------------------------------------------------------------------
# Every function applies a square structured matrix M to each ROW x of a 2-D array, i.e.
# returns X @ M.T, with the generating vectors in the conventions of scipy.linalg.

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


# -- projections ------------------------------------------------------------------------
def _check_positive_int(name: str, value: Any, upper: int, method: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= upper:
        raise InvalidParameterError(
            f"option {name!r} of method {method!r} must be an integer in [1, {upper}] "
            f"(d' = {upper}, the input dimension padded to a power of two), got {value!r}"
        )
    return int(value)


#: FFT-path cost per padded column, log2(d') and block, in GEMM multiply-adds; fitted to
#: the measurements quoted in :meth:`PModelProjection.use_dense`.
_FFT_COST = 30.0
#: above this many entries of ``W`` (128 MiB in float64) the dense cache is never built
_DENSE_MAX_ENTRIES = 1 << 24


@dataclasses.dataclass(eq=False)
class PModelProjection(HadamardBlockProjection):
    """Base of the P-model structured projections (see the module docstring).

    Attributes
    ----------
    densify : ndarray of int8, shape (2, d')
        Rademacher diagonals of the densification: ``densify[0]`` is ``D_b`` (applied
        first), ``densify[1]`` is ``D_a``.
    gen : ndarray of float64
        Gaussian generating vectors of the ``ceil(D / d')`` blocks (shape per method).
    """

    densify: np.ndarray = dataclasses.field(default_factory=lambda: np.ones((2, 1), np.int8))
    gen: np.ndarray = dataclasses.field(default_factory=lambda: np.empty((0, 0)))

    #: length of one block's generating vector, as a function of d'
    _gen_len = staticmethod(lambda dp: dp)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._spec_cache: dict[np.dtype, Any] = {}
        dp = self.padded_features
        self.densify = np.ascontiguousarray(self.densify, dtype=np.int8)
        self.gen = np.ascontiguousarray(self.gen, dtype=np.float64)
        if self.densify.shape != (2, dp) or not np.all(np.abs(self.densify) == 1):
            raise InvalidParameterError(
                f"{self.method}: densify must be a (2, d'={dp}) array of +-1, got shape "
                f"{self.densify.shape}"
            )
        want = (self.n_blocks, self._gen_len(dp))
        if self.gen.shape[:1] + self.gen.shape[-1:] != want:
            raise InvalidParameterError(
                f"{self.method}: gen must have shape (n_blocks={want[0]}, ..., {want[1]}), "
                f"got {self.gen.shape}"
            )

    # -- generation -------------------------------------------------------------------
    @classmethod
    def _check_options(cls, options: dict[str, Any]) -> None:
        unknown = set(options) - set(cls.options)
        if unknown:
            raise InvalidParameterError(
                f"unknown options for method {cls.method!r}: {sorted(unknown)}; "
                f"allowed: {sorted(cls.options) or 'none'}"
            )

    @classmethod
    def _draw_densify(cls, dp: int, rng: np.random.Generator) -> np.ndarray:
        return (2 * rng.integers(0, 2, size=(2, dp), dtype=np.int8) - 1).astype(np.int8)

    @classmethod
    def generate(cls, n_features_in, n_components, scale, rng, **options):
        cls._check_options(options)
        d, D = int(n_features_in), int(n_components)
        dp = next_power_of_two(d)
        nb = -(-D // dp)
        densify = cls._draw_densify(dp, rng)
        gen = rng.standard_normal((nb, cls._gen_len(dp)))
        return cls(d, D, float(scale), densify, gen)

    # -- densification ------------------------------------------------------------------
    def _float_field(self, name: str) -> np.ndarray:
        if name == "densify_b":
            return self.densify[0].astype(np.float64)
        if name == "densify_a":
            # both H_n = H / sqrt(d') normalizations folded into D_a
            return self.densify[1] / float(self.padded_features)
        return super()._float_field(name)

    def densified(self, X: np.ndarray) -> np.ndarray:
        """``X' = pad(X) @ (H_n D_a H_n D_b).T``, shape ``(n, d')``, dtype of ``X``.

        Two in-place FWHTs; the map is orthogonal, so row norms are preserved.
        """
        n, d = X.shape
        Y = np.zeros((n, self.padded_features), dtype=X.dtype)
        np.multiply(X, self._cast("densify_b", X.dtype)[:d], out=Y[:, :d])
        fwht(Y)
        Y *= self._cast("densify_a", X.dtype)
        fwht(Y)
        return Y

    def densify_matrix(self) -> np.ndarray:
        """Dense ``H_n D_a H_n D_b`` (``d' x d'``, float64) from ``scipy.linalg.hadamard``."""
        dp = self.padded_features
        Hn = scipy.linalg.hadamard(dp).astype(np.float64) / np.sqrt(dp)
        a = self.densify[1].astype(np.float64)
        b = self.densify[0].astype(np.float64)
        return (Hn * a) @ Hn * b

    # -- structured blocks --------------------------------------------------------------
    def block_matrix(self, b: int) -> np.ndarray:
        """Dense structured block ``M_b`` (``d' x d'``, unscaled) built with scipy.linalg."""
        raise NotImplementedError

    def _spectra(self, dtype: np.dtype) -> Any:
        """Per-block spectra of the generating vectors (scale folded in), cached."""
        dtype = np.dtype(dtype)
        spec = self._spec_cache.get(dtype)
        if spec is None:
            spec = self._compute_spectra(dtype)
            self._spec_cache[dtype] = spec
        return spec

    def _compute_spectra(self, dtype: np.dtype) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _prepare(self, Y: np.ndarray) -> Any:  # pragma: no cover - abstract
        """Transform of the densified input shared by all blocks."""
        raise NotImplementedError

    def _apply_block(self, b: int, prep: Any, spec: Any, dtype: np.dtype) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _project_fast(self, X: np.ndarray) -> np.ndarray:
        n = X.shape[0]
        dp, D = self.padded_features, self.n_components
        spec = self._spectra(X.dtype)
        prep = self._prepare(self.densified(X))
        out = np.empty((n, D), dtype=X.dtype)
        for b in range(self.n_blocks):
            lo = b * dp
            hi = min(D, lo + dp)
            out[:, lo:hi] = self._apply_block(b, prep, spec, X.dtype)[:, : hi - lo]
        return out

    def _block_cost(self) -> float:
        """Relative FFT-path cost of one block (circulant = 1), from measurements."""
        return 1.0

    def use_dense(self) -> bool:
        """Whether :meth:`project` uses a dense GEMM for this shape.

        Cost model per input row, in GEMM multiply-adds: dense ``D * d``; FFT path
        ``30 * d' * log2(d') * (n_blocks * m + 1)`` where ``m`` is the relative cost of
        one block (circulant 1, skew-circulant/Toeplitz/Hankel 2.5, Toeplitz-like
        ``2.5 r + 0.5``) and the ``+ 1`` the shared densification and input transform.
        Dense is chosen when cheaper and ``D * d <= 2**24`` (the cached ``W`` stays below
        128 MiB in float64).

        Measured on the development machine (2-core Xeon, shared, one thread; 4096 rows;
        ns per row and output column, float64 -- noisy, +-30%)::

            method          d'     D      fft     dense
            circulant       128    512    24.8    15.2
            circulant       256    1024   13.0    10.5
            circulant       512    512    21.9    20.0
            circulant       512    2048   11.4    22.7
            circulant       1024   1024   52.1    93.5
            circulant       1024   4096   19.6    42.9
            toeplitz_like   512    2048   30.0    15.2
            toeplitz_like   1024   1024   53.4    35.8
            toeplitz_like   1024   4096   44.9    43.6
            toeplitz        1024   4096   30.0    18.5
            hankel          1024   4096   27.1    32.2
            skew_circulant  1024   4096   25.7    14.4

        float32 (circulant 1024 x 4096: 6.4 vs 10.2) shows the same crossover. So the
        FFTs pay off from ``d' >= 512`` (circulant) or ``d' >= 1024`` with several
        blocks; below that, and for partial blocks, the dense GEMM is faster. Storage
        stays O(D + d) either way: the dense ``W`` is a cache on the instance.
        """
        dp, nb = self.padded_features, self.n_blocks
        dense = self.n_components * self.n_features_in
        if dense > _DENSE_MAX_ENTRIES:
            return False
        fast = _FFT_COST * dp * max(np.log2(dp), 1.0) * (nb * self._block_cost() + 1.0)
        return dense < fast

    def matrix(self) -> np.ndarray:
        P = self.densify_matrix()
        blocks = [self.block_matrix(b) @ P for b in range(self.n_blocks)]
        W = np.concatenate(blocks, axis=0)[: self.n_components, : self.n_features_in]
        return self.scale * W


@register_projection
@dataclasses.dataclass(eq=False)
class CirculantProjection(PModelProjection):
    """Circulant P-model projection: ``M[j, k] = g[(k - j) mod d']``, ``g ~ N(0, I)``.

    ``gen`` has shape ``(n_blocks, d')`` (the first rows). Time per block
    ``O(n d' log d')`` (one ``irfft``; the ``rfft`` of the input is shared). Stored
    numbers: ``(n_blocks + 2) d'``.
    """

    method = "circulant"
    options = {}

    def block_matrix(self, b: int) -> np.ndarray:
        # scipy's circulant(c) has c as first COLUMN; its transpose has c as first row
        return scipy.linalg.circulant(self.gen[b]).T

    def _compute_spectra(self, dtype):
        # M = circulant(c).T, so X @ M.T = X @ circulant(g): a cyclic correlation with g
        return np.conj(scipy.fft.rfft(self.gen * self.scale, axis=-1)).astype(_complex_dtype(dtype))

    def _prepare(self, Y):
        return scipy.fft.rfft(Y, axis=-1)

    def _apply_block(self, b, prep, spec, dtype):
        return scipy.fft.irfft(prep * spec[b], n=self.padded_features, axis=-1, overwrite_x=True)

    def _block_cost(self):
        return 1.0


@register_projection
@dataclasses.dataclass(eq=False)
class SkewCirculantProjection(PModelProjection):
    """Skew-circulant P-model projection: first row ``g ~ N(0, I)``, each row the
    previous shifted right with the wrapped-around entry negated
    (``M[j, k] = g[k - j]`` if ``k >= j`` else ``-g[k - j + d']``).

    ``M`` is the skew-circulant with first column ``(g_0, -g_{d'-1}, ..., -g_1)``; applied
    with the twiddle ``exp(i pi k / d')`` and complex FFTs. Stored numbers:
    ``(n_blocks + 2) d'``.
    """

    method = "skew_circulant"
    options = {}

    def _first_column(self, b: int) -> np.ndarray:
        g = self.gen[b]
        return np.concatenate([g[:1], -g[:0:-1]])

    def block_matrix(self, b: int) -> np.ndarray:
        g = self.gen[b]
        # first row g; first column (g0, -g_{n-1}, ..., -g_1)
        return scipy.linalg.toeplitz(self._first_column(b), g)

    def _compute_spectra(self, dtype):
        cols = np.stack([self._first_column(b) for b in range(self.n_blocks)]) * self.scale
        return _skew_spectrum(cols.astype(dtype), dtype)

    def _prepare(self, Y):
        return _skew_prepare(Y)

    def _apply_block(self, b, prep, spec, dtype):
        return _skew_finish(prep * spec[b], dtype)

    def _block_cost(self):
        return 2.5


@register_projection
@dataclasses.dataclass(eq=False)
class ToeplitzProjection(PModelProjection):
    """Toeplitz P-model projection: ``M[j, k] = g[j - k + d' - 1]``, ``g ~ N(0, I_{2d'-1})``
    (constant diagonals), i.e. ``scipy.linalg.toeplitz(g[d'-1:], g[d'-1::-1])``.

    Applied by embedding in a circulant of size ``2d'`` (real FFTs). Stored numbers:
    ``n_blocks (2d' - 1) + 2d'``.
    """

    method = "toeplitz"
    options = {}
    _gen_len = staticmethod(lambda dp: 2 * dp - 1)

    def block_matrix(self, b: int) -> np.ndarray:
        g = self.gen[b]
        dp = self.padded_features
        return scipy.linalg.toeplitz(g[dp - 1 :], g[dp - 1 :: -1])

    def _compute_spectra(self, dtype):
        L = 2 * self.padded_features
        return scipy.fft.rfft(self.gen * self.scale, n=L, axis=-1).astype(_complex_dtype(dtype))

    def _prepare(self, Y):
        return scipy.fft.rfft(Y, n=2 * self.padded_features, axis=-1)

    def _apply_block(self, b, prep, spec, dtype):
        dp = self.padded_features
        z = scipy.fft.irfft(prep * spec[b], n=2 * dp, axis=-1, overwrite_x=True)
        return z[:, dp - 1 : 2 * dp - 1]

    def _block_cost(self):
        return 2.5


@register_projection
@dataclasses.dataclass(eq=False)
class HankelProjection(PModelProjection):
    """Hankel P-model projection: ``M[j, k] = g[j + k]``, ``g ~ N(0, I_{2d'-1})``
    (constant anti-diagonals), i.e. ``scipy.linalg.hankel(g[:d'], g[d'-1:])``.

    Applied as a cyclic correlation of size ``2d'`` (real FFTs). Stored numbers:
    ``n_blocks (2d' - 1) + 2d'``.
    """

    method = "hankel"
    options = {}
    _gen_len = staticmethod(lambda dp: 2 * dp - 1)

    def block_matrix(self, b: int) -> np.ndarray:
        g = self.gen[b]
        dp = self.padded_features
        return scipy.linalg.hankel(g[:dp], g[dp - 1 :])

    def _compute_spectra(self, dtype):
        L = 2 * self.padded_features
        return scipy.fft.rfft(self.gen * self.scale, n=L, axis=-1).astype(_complex_dtype(dtype))

    def _prepare(self, Y):
        return np.conj(scipy.fft.rfft(Y, n=2 * self.padded_features, axis=-1))

    def _apply_block(self, b, prep, spec, dtype):
        dp = self.padded_features
        z = scipy.fft.irfft(prep * spec[b], n=2 * dp, axis=-1, overwrite_x=True)
        return z[:, :dp]

    def _block_cost(self):
        return 2.5


@register_projection
@dataclasses.dataclass(eq=False)
class ToeplitzLikeProjection(PModelProjection):
    """Toeplitz-like semi-Gaussian P-model projection with displacement rank ``r``.

    ``M = (1/sqrt(r)) sum_{i=1..r} Z1(g_i) Zm1(h_i)``: ``Z1(g_i)`` circulant with first
    column ``g_i ~ N(0, I)``, ``Zm1(h_i)`` skew-circulant with first column ``h_i``
    (random signs, ``||h_i|| = 1``). ``r`` trades structure for randomness (``r -> d'``
    approaches a fully random matrix).

    Options
    -------
    displacement_rank : int, default 1
        ``r``, an integer in ``[1, d']``.
    skew_nonzeros : int or None, default None
        ``None``: dense ``h_i`` with entries ``+-1/sqrt(d')`` (the paper's "random
        discretized vectors"). An integer ``s`` in ``[1, d']``: the paper's sparse setting,
        ``h_i`` has ``s`` non-zeros ``+-1/sqrt(s)`` at random positions. With ``s = 1``
        ``Zm1(h_i)`` is a signed permutation and every row of ``M`` is exactly N(0, I).

    Attributes
    ----------
    gen : ndarray of float64, shape (n_blocks, r, d')
        The Gaussian first columns ``g_i`` of every block.
    skew : ndarray of float64, shape (n_blocks, r, d')
        The first columns ``h_i``.

    Time per block ``O(r n d' log d')``; stored numbers ``(2 r n_blocks + 2) d'``.
    """

    method = "toeplitz_like"
    options = {"displacement_rank": 1, "skew_nonzeros": None}

    skew: np.ndarray = dataclasses.field(default_factory=lambda: np.empty((0, 0, 0)))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.skew = np.ascontiguousarray(self.skew, dtype=np.float64)
        if self.gen.ndim != 3 or self.skew.shape != self.gen.shape or self.gen.shape[1] < 1:
            raise InvalidParameterError(
                f"toeplitz_like: gen and skew must both have shape (n_blocks, r, d'), got "
                f"{self.gen.shape} and {self.skew.shape}"
            )

    @property
    def displacement_rank(self) -> int:
        """``r``, the number of circulant x skew-circulant products summed."""
        return int(self.gen.shape[1])

    @classmethod
    def generate(cls, n_features_in, n_components, scale, rng, **options):
        cls._check_options(options)
        d, D = int(n_features_in), int(n_components)
        dp = next_power_of_two(d)
        nb = -(-D // dp)
        r = _check_positive_int(
            "displacement_rank", options.get("displacement_rank", 1), dp, cls.method
        )
        s = options.get("skew_nonzeros", None)
        if s is not None:
            s = _check_positive_int("skew_nonzeros", s, dp, cls.method)
        densify = cls._draw_densify(dp, rng)
        gen = rng.standard_normal((nb, r, dp))
        signs = 2.0 * rng.integers(0, 2, size=(nb, r, dp)) - 1.0
        if s is None or s == dp:
            skew = signs / np.sqrt(dp)
        else:
            # s distinct random positions per vector: the s smallest of i.i.d. uniforms
            ranks = np.argsort(rng.random((nb, r, dp)), axis=-1)
            mask = np.zeros((nb, r, dp), dtype=bool)
            np.put_along_axis(mask, ranks[..., :s], True, axis=-1)
            skew = np.where(mask, signs / np.sqrt(s), 0.0)
        return cls(d, D, float(scale), densify, gen, skew)

    def block_matrix(self, b: int) -> np.ndarray:
        r = self.displacement_rank
        M = sum(
            scipy.linalg.circulant(self.gen[b, i]) @ skew_circulant_matrix(self.skew[b, i])
            for i in range(r)
        )
        return M / np.sqrt(r)

    def _compute_spectra(self, dtype):
        factor = self.scale / np.sqrt(self.displacement_rank)
        spec_g = scipy.fft.rfft(self.gen * factor, axis=-1).astype(_complex_dtype(dtype))
        spec_h = _skew_spectrum(self.skew.astype(dtype), dtype)
        return spec_g, spec_h

    def _prepare(self, Y):
        return _skew_prepare(Y)

    def _apply_block(self, b, prep, spec, dtype):
        spec_g, spec_h = spec
        return _toeplitz_like_apply(spec_g[b], spec_h[b], prep, self.padded_features, dtype)

    def _block_cost(self):
        return 2.5 * self.displacement_rank + 0.5
