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
biased upwards by ``exp(-a) a^2 (d' - 2) / (r d' (d' + 2))`` to second order, ``a = gamma
||x - y||^2`` (derived in ALGORITHMS.md section 2.5; at most 0.041 / r at ``d' = 8``) --
negligible for realistic ``d'``, visible in tight tests at tiny ``d'``. That is the paper's construction; use
``skew_nonzeros=1`` for exact unbiasedness.

This module holds the five block families; the densification, the block loop and the
fast/dense choice are in :mod:`dkrr.features._pmodel`, the FFT products in
:mod:`dkrr.features._fft`.

Fast path: one FWHT-based densification of all rows, then ``scipy.fft`` over all rows
at once -- ``rfft``/``irfft`` for circulant (``O(n log n)`` per block), the twiddle
``exp(i pi k / n)`` turning a skew-circulant product into a cyclic convolution, and
embedding in a circulant of size ``2n`` for Toeplitz and Hankel. The transform of the
densified input is shared by all blocks; the spectra of the generating vectors are
computed lazily and cached on the instance (not stored in the state, which holds only
the O(D + d) random numbers). float32 input is transformed in float32/complex64.

For small ``d'`` a dense GEMM with ``W`` regenerated once from the stored numbers (by
running the fast path on the identity, cached on the instance) is faster; see
:meth:`PModelProjection.use_dense` for the rule (measurements in benchmarks/README.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.fft
import scipy.linalg

from .._params import check_int
from ..errors import InvalidParameterError
from ._fft import (
    _complex_dtype,
    _skew_finish,
    _skew_prepare,
    _skew_spectrum,
    _toeplitz_like_apply,
    skew_circulant_matrix,
)
from ._pmodel import PModelProjection

__all__ = [
    "CirculantProjection",
    "HankelProjection",
    "SkewCirculantProjection",
    "ToeplitzLikeProjection",
    "ToeplitzProjection",
]


def _check_bound(value, name: str, dp: int, method: str) -> int:
    return check_int(value, f"option {name!r} of method {method!r}", maximum=dp,
                     note=f" (d' = {dp}, the input dimension padded to a power of two)")


@dataclasses.dataclass(eq=False)
class CirculantProjection(PModelProjection):
    """Circulant P-model projection: ``M[j, k] = g[(k - j) mod d']``, ``g ~ N(0, I)``.

    ``gen`` has shape ``(n_blocks, d')`` (the first rows). Time per block
    ``O(n d' log d')`` (one ``irfft``; the ``rfft`` of the input is shared). Stored
    numbers: ``(n_blocks + 2) d'``.
    """

    method = "circulant"
    options = {}
    laws = ("gaussian", "cauchy")

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
    laws = ("gaussian", "cauchy")

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


@dataclasses.dataclass(eq=False)
class _EmbeddedProjection(PModelProjection):
    """Blocks with a generating vector of length ``2d' - 1``, applied through a cyclic
    product of size ``2d'`` (real FFTs); subclasses choose the input transform and the
    output window."""

    _gen_len = staticmethod(lambda dp: 2 * dp - 1)

    def _compute_spectra(self, dtype):
        L = 2 * self.padded_features
        return scipy.fft.rfft(self.gen * self.scale, n=L, axis=-1).astype(_complex_dtype(dtype))

    def _cyclic(self, prep, spec_b) -> np.ndarray:
        return scipy.fft.irfft(prep * spec_b, n=2 * self.padded_features, axis=-1, overwrite_x=True)

    def _block_cost(self):
        return 2.5


@dataclasses.dataclass(eq=False)
class ToeplitzProjection(_EmbeddedProjection):
    """Toeplitz P-model projection: ``M[j, k] = g[j - k + d' - 1]``, ``g ~ N(0, I_{2d'-1})``
    (constant diagonals), i.e. ``scipy.linalg.toeplitz(g[d'-1:], g[d'-1::-1])``.

    Applied by embedding in a circulant of size ``2d'`` (real FFTs). Stored numbers:
    ``n_blocks (2d' - 1) + 2d'``.
    """

    method = "toeplitz"
    options = {}
    laws = ("gaussian", "cauchy")

    def block_matrix(self, b: int) -> np.ndarray:
        g = self.gen[b]
        dp = self.padded_features
        return scipy.linalg.toeplitz(g[dp - 1 :], g[dp - 1 :: -1])

    def _prepare(self, Y):
        return scipy.fft.rfft(Y, n=2 * self.padded_features, axis=-1)

    def _apply_block(self, b, prep, spec, dtype):
        dp = self.padded_features
        return self._cyclic(prep, spec[b])[:, dp - 1 : 2 * dp - 1]


@dataclasses.dataclass(eq=False)
class HankelProjection(_EmbeddedProjection):
    """Hankel P-model projection: ``M[j, k] = g[j + k]``, ``g ~ N(0, I_{2d'-1})``
    (constant anti-diagonals), i.e. ``scipy.linalg.hankel(g[:d'], g[d'-1:])``.

    Applied as a cyclic correlation of size ``2d'`` (real FFTs). Stored numbers:
    ``n_blocks (2d' - 1) + 2d'``.
    """

    method = "hankel"
    options = {}
    laws = ("gaussian", "cauchy")

    def block_matrix(self, b: int) -> np.ndarray:
        g = self.gen[b]
        dp = self.padded_features
        return scipy.linalg.hankel(g[:dp], g[dp - 1 :])

    def _prepare(self, Y):
        return np.conj(scipy.fft.rfft(Y, n=2 * self.padded_features, axis=-1))

    def _apply_block(self, b, prep, spec, dtype):
        return self._cyclic(prep, spec[b])[:, : self.padded_features]


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
    def _draw(cls, n_features_in, n_components, scale, rng, *, displacement_rank, skew_nonzeros):
        d, D = n_features_in, n_components
        dp, nb = cls._layout(d, D)
        r = _check_bound(displacement_rank, "displacement_rank", dp, cls.method)
        s = skew_nonzeros
        if s is not None:
            s = _check_bound(s, "skew_nonzeros", dp, cls.method)
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
        return cls(d, D, scale, densify, gen, skew)

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
