"""Dense Gaussian projections: RFF (Rahimi & Recht 2007)."""

from __future__ import annotations

import dataclasses

import numpy as np

from ._base import Projection

__all__ = ["DenseProjection", "RFFProjection"]


@dataclasses.dataclass(eq=False)
class DenseProjection(Projection):
    """A projection that stores ``W`` itself (unit scale) and multiplies densely.

    ``weights`` holds the unscaled matrix; ``W = scale * weights``.
    """

    weights: np.ndarray = dataclasses.field(default_factory=lambda: np.empty((0, 0)))

    def __post_init__(self) -> None:
        self.weights = np.ascontiguousarray(self.weights, dtype=np.float64)
        self._cast: dict[np.dtype, np.ndarray] = {}

    def _wt(self, dtype: np.dtype) -> np.ndarray:
        # W.T in the input dtype, cached: X @ W.T is one GEMM in the caller's precision.
        dtype = np.dtype(dtype)
        if dtype not in self._cast:
            self._cast[dtype] = np.ascontiguousarray((self.scale * self.weights).T, dtype=dtype)
        return self._cast[dtype]

    def project(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        return np.matmul(X, self._wt(X.dtype), out=out)

    def matrix(self) -> np.ndarray:
        return self.scale * self.weights


@dataclasses.dataclass(eq=False)
class RFFProjection(DenseProjection):
    """Random Fourier features: ``W = G * scale`` with G i.i.d. N(0, 1) (or, with
    ``law="cauchy"``, i.i.d. standard Cauchy: the laplacian kernel's frequencies).

    Stores the D x d unit matrix. Time O(n D d) per block (one GEMM).
    """

    method = "rff"
    laws = ("gaussian", "cauchy")

    @classmethod
    def _draw(cls, n_features_in, n_components, scale, rng, law="gaussian"):
        shape = (n_components, n_features_in)
        G = rng.standard_normal(shape) if law == "gaussian" else rng.standard_cauchy(shape)
        return cls(n_features_in, n_components, scale, G)
