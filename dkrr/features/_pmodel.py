"""The P-model base of the structured projections: densification, blocks, fast or dense path.

Choromanski & Sindhwani 2016, section 3.3 (ALGORITHMS.md section 2). A P-model projection
first *densifies* the zero-padded input, ``x' = H_n D_a H_n D_b x`` (``D_a``, ``D_b``
Rademacher diagonals, ``H_n`` the orthonormal Walsh-Hadamard matrix of order ``d'``, the
next power of two >= d: two in-place FWHTs, an orthogonal map), then applies
``ceil(D / d')`` independent structured ``d' x d'`` blocks ``M_b`` times ``scale`` and
keeps the first ``D`` rows. :class:`PModelProjection` holds the densification, the
Gaussian generating vectors, the block loop of the FFT path and the choice between that
path and a dense GEMM (:meth:`PModelProjection.use_dense`); the block families are in
:mod:`dkrr.features._structured`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import scipy.linalg

from ..errors import InvalidParameterError
from ._hadamard import fwht
from ._orthogonal import HadamardBlockProjection

__all__ = ["PModelProjection"]


#: FFT-path cost per padded column, log2(d') and block, in GEMM multiply-adds; fitted to
#: the measurements in benchmarks/README.md (see :meth:`PModelProjection.use_dense`).
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
    def _draw_densify(cls, dp: int, rng: np.random.Generator) -> np.ndarray:
        return (2 * rng.integers(0, 2, size=(2, dp), dtype=np.int8) - 1).astype(np.int8)

    @classmethod
    def _draw(cls, n_features_in, n_components, scale, rng, law="gaussian"):
        """Gaussian generators after a random densification; ``law="cauchy"`` (the laplacian
        kernel's product-Cauchy rows, which no rotation keeps): Cauchy generators and no
        densification (``D_a = D_b = I``, for which ``H_n D_a H_n D_b = I``), so every row of
        ``W`` is a signed permutation of i.i.d. Cauchy entries. Nothing else is drawn."""
        dp, nb = cls._layout(n_features_in, n_components)
        if law == "gaussian":
            densify = cls._draw_densify(dp, rng)
            gen = rng.standard_normal((nb, cls._gen_len(dp)))
        else:
            densify = np.ones((2, dp), dtype=np.int8)
            gen = rng.standard_cauchy((nb, cls._gen_len(dp)))
        return cls(n_features_in, n_components, scale, densify, gen)

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

        The constants were fitted to measurements (``benchmarks/bench_structured.py``; the
        table is in benchmarks/README.md, "PModelProjection.use_dense of the circulant
        family"), float32 alike: the FFTs pay off from ``d' >= 512`` (circulant) or
        ``d' >= 1024`` with several blocks; below that, and for partial blocks, the dense
        GEMM is faster. Storage stays O(D + d) either way: the dense ``W`` is a cache on the instance.
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
