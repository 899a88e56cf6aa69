"""Fastfood projections (Le, Sarlos & Smola 2013)."""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg

from ..errors import InvalidParameterError
from ._hadamard import fwht
from ._orthogonal import HadamardBlockProjection

__all__ = ["FastfoodProjection"]


@dataclasses.dataclass(eq=False)
class FastfoodProjection(HadamardBlockProjection):
    """Fastfood: ``W = (scale / sqrt(d')) S H G Pi H B`` per ``d' x d'`` block.

    ``d'`` is d zero-padded to a power of two, ``H`` the unnormalized Walsh-Hadamard
    matrix (entries +-1), ``B`` a Rademacher diagonal, ``Pi`` a random permutation
    (``(Pi v)_i = v[perm[i]]``), ``G`` diagonal i.i.d. N(0, 1) and
    ``S_ii = s_i / ||G||_F`` with ``s_i`` i.i.d. chi(d'), so row ``i`` of ``W`` has norm
    exactly ``s_i * scale``, like a Gaussian row in dimension ``d'``
    (ALGORITHMS.md section 2). ``ceil(D / d')`` independent blocks are stacked and the
    first ``D`` rows kept. Two FWHTs per block: time O(n D log d'); stores
    ``4 * ceil(D / d') * d'`` numbers, i.e. O(D + d).

    Attributes
    ----------
    signs : ndarray of int8, shape (n_blocks, d')
        Diagonal of ``B``.
    perm : ndarray of int64, shape (n_blocks, d')
        The permutations ``Pi``.
    gaussian : ndarray of float64, shape (n_blocks, d')
        Diagonal of ``G``.
    chi : ndarray of float64, shape (n_blocks, d')
        The ``s_i`` (``S_ii = s_i / ||G_b||_F``).
    """

    method = "fastfood"
    options = {}

    signs: np.ndarray = dataclasses.field(default_factory=lambda: np.ones((0, 0), np.int8))
    perm: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0), np.int64))
    gaussian: np.ndarray = dataclasses.field(default_factory=lambda: np.empty((0, 0)))
    chi: np.ndarray = dataclasses.field(default_factory=lambda: np.empty((0, 0)))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.signs = np.ascontiguousarray(self.signs, dtype=np.int8)
        self.perm = np.ascontiguousarray(self.perm, dtype=np.int64)
        self.gaussian = np.ascontiguousarray(self.gaussian, dtype=np.float64)
        self.chi = np.ascontiguousarray(self.chi, dtype=np.float64)
        shape = (self.n_blocks, self.padded_features)
        for name in ("signs", "perm", "gaussian", "chi"):
            if getattr(self, name).shape != shape:
                raise InvalidParameterError(
                    f"Fastfood field {name!r} must have shape {shape}, "
                    f"got {getattr(self, name).shape}"
                )
        if not np.array_equal(np.sort(self.perm, axis=1), np.broadcast_to(np.arange(shape[1]), shape)):
            raise InvalidParameterError("Fastfood field 'perm' must hold a permutation of range(d') per block")

    @classmethod
    def _draw(cls, n_features_in, n_components, scale, rng):
        d, D = n_features_in, n_components
        dp, nb = cls._layout(d, D)
        signs = (2 * rng.integers(0, 2, size=(nb, dp), dtype=np.int8) - 1).astype(np.int8)
        perm = np.stack([rng.permutation(dp) for _ in range(nb)]).reshape(nb, dp)
        gaussian = rng.standard_normal((nb, dp))
        chi = np.sqrt(rng.chisquare(dp, size=(nb, dp)))
        return cls(d, D, float(scale), signs, perm, gaussian, chi)

    def _n_passes(self) -> float:
        # two transforms, sign flip + padding, gather * G, final scaling
        return 2 * np.log2(self.padded_features) + 4

    def _row_factors(self) -> np.ndarray:
        """``scale / sqrt(d') * s_i / ||G_b||_F`` for every block output row."""
        dp = self.padded_features
        fro = np.sqrt(np.sum(self.gaussian**2, axis=1, keepdims=True))
        return (self.scale / np.sqrt(dp) * self.chi / fro).reshape(-1)

    def _float_field(self, name: str) -> np.ndarray:
        if name == "factors":
            return self._row_factors()[: self.n_components]
        return super()._float_field(name)

    def _flat_perm(self) -> np.ndarray:
        flat = self._cast_cache.get(("flat_perm", None))
        if flat is None:
            nb, dp = self.perm.shape
            flat = (self.perm + dp * np.arange(nb)[:, None]).reshape(-1)
            self._cast_cache[("flat_perm", None)] = flat
        return flat

    def _project_fast(self, X: np.ndarray) -> np.ndarray:
        n = X.shape[0]
        dp, nb = self.padded_features, self.n_blocks
        Y = self._signed_padded_input(X, self._cast("signs", X.dtype))  # B x
        fwht(Y.reshape(n * nb, dp))  # H B x
        # Pi H B x: one gather over the flattened block columns (a new C-contiguous array)
        Y = np.take(Y.reshape(n, nb * dp), self._flat_perm(), axis=1)
        Y *= self._cast("gaussian", X.dtype).reshape(-1)  # G Pi H B x
        fwht(Y.reshape(n * nb, dp))  # H G Pi H B x
        out = Y[:, : self.n_components]
        return np.multiply(out, self._cast("factors", X.dtype))  # S, scale / sqrt(d')

    def matrix(self) -> np.ndarray:
        dp, d = self.padded_features, self.n_features_in
        H = scipy.linalg.hadamard(dp).astype(np.float64)
        blocks = []
        for b in range(self.n_blocks):
            B = np.diag(self.signs[b].astype(np.float64))
            Pi = np.eye(dp)[self.perm[b]]
            G = np.diag(self.gaussian[b])
            S = np.diag(self.chi[b] / np.linalg.norm(self.gaussian[b]))
            blocks.append(self.scale / np.sqrt(dp) * (S @ H @ G @ Pi @ H @ B))
        return np.concatenate(blocks, axis=0)[: self.n_components, :d]
