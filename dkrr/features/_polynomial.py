"""Sketches of the polynomial kernel ``(gamma x^T y + coef0)^degree`` (ALGORITHMS.md 2.9).

Both maps work on the augmented input ``x~ = [sqrt(gamma) x, sqrt(coef0)]`` (d + 1
columns), for which the kernel is ``(x~^T y~)^p``, ``p = degree``, as scikit-learn's
``PolynomialCountSketch`` does:

* :class:`TensorSketchMap` (``method="tensorsketch"``, Pham & Pagh 2013): ``p``
  independent CountSketches ``C_i x~`` (hash ``h_i: [d + 1] -> [D]``, signs ``s_i``)
  combined by circular convolution, ``phi(x) = irfft(prod_i rfft(C_i x~))``: width D,
  ``E <phi(x), phi(y)> = (x~^T y~)^p``.
* :class:`TensorSRHTMap` (``method="tensor_srht"``: the complex-to-real TensorSRHT of
  Wacker, Ohana & Filippone 2022, built on the TensorSRHT of Ahle et al. 2020): per factor
  ``i`` and block ``b`` of ``d'`` features (``d'`` = d + 1 padded to a power of two) the
  rows of ``H D_ib`` (unnormalised Walsh-Hadamard ``H``, diagonal ``D_ib`` uniform on {1,
  -1, i, -i}) in a random order ``pi_ib``; complex feature ``j`` of block ``b`` is ``z_j =
  prod_i (H D_ib x~)[pi_ib(j)] / sqrt(D)`` and the output is ``[Re z, Im z]`` (width
  ``2 D``), whose dot product is ``Re <z(x), z(y)>``. Every factor is ``w^T x~`` with
  ``E[w conj(w)^T] = I`` and the factors are independent, so the estimate is unbiased;
  within a block each factor's rows are orthogonal and drawn without repetitions, and
  the complex rows halve the variance of each product's real part, which together beat
  the hashed CountSketch at equal output width (ALGORITHMS.md 2.9 has the measurements).

Neither is a projection followed by an elementwise nonlinearity, so both are map types of
their own; :meth:`PolynomialSketchMap.matrices` gives the ``p`` matrices ``W_i`` (``D x
(d + 1)``, acting on ``[x, 1]``, ``sqrt(gamma)`` and ``sqrt(coef0)`` folded in) of which
the features are the convolution (TensorSketch) or ``[Re, Im]`` of the product
(TensorSRHT; complex ``W_i``) of ``[X, 1] W_i^T``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from ..errors import InvalidParameterError
from ._base import next_power_of_two
from ._map import FeatureMap

__all__ = ["POLYNOMIAL_MAPS", "PolynomialSketchMap", "TensorSRHTMap", "TensorSketchMap"]


@dataclasses.dataclass(eq=False)
class PolynomialSketchMap(FeatureMap):
    """Base of the polynomial-kernel sketches: the augmentation, the width, the state.

    Attributes
    ----------
    n_features : int
        d, the input columns.
    n_components : int
        D, the output width.
    gamma, coef0 : float
        The kernel's ``gamma`` and ``coef0``.
    """

    kernel: ClassVar[str] = "polynomial"
    method: ClassVar[str] = ""
    _arrays: ClassVar[tuple[str, ...]] = ()

    n_features: int
    n_components: int
    gamma: float
    coef0: float

    def __post_init__(self) -> None:
        self.n_features, self.n_components = int(self.n_features), int(self.n_components)
        self.gamma, self.coef0 = float(self.gamma), float(self.coef0)
        if self.n_features < 1 or self.n_components < 1:
            raise InvalidParameterError(f"a {self.method} map needs d >= 1 and D >= 1")
        if not (np.isfinite(self.gamma) and self.gamma > 0 and np.isfinite(self.coef0) and self.coef0 >= 0):
            raise InvalidParameterError(f"a {self.method} map needs gamma > 0 and coef0 >= 0, finite")
        self._cache: dict[Any, Any] = {}

    @property
    def n_features_in(self) -> int:  # type: ignore[override]
        return self.n_features

    @property
    def n_output_features(self) -> int:  # type: ignore[override]
        return self.n_components

    @property
    def degree(self) -> int:
        return int(getattr(self, self._arrays[0]).shape[0])

    def _factors(self) -> np.ndarray:
        """The column factors of the augmentation: ``sqrt(gamma)`` (d times), ``sqrt(coef0)``."""
        return np.concatenate([np.full(self.n_features, np.sqrt(self.gamma)), [np.sqrt(self.coef0)]])

    def augmented(self, X: np.ndarray) -> np.ndarray:
        """``[sqrt(gamma) X, sqrt(coef0)]`` (n, d + 1) in X's dtype."""
        out = np.empty((X.shape[0], self.n_features + 1), dtype=X.dtype)
        np.multiply(X, X.dtype.type(np.sqrt(self.gamma)), out=out[:, :-1])
        out[:, -1] = np.sqrt(self.coef0)
        return out

    def with_gamma(self, gamma) -> "PolynomialSketchMap":
        """The same sketch for another ``gamma`` (the hashes and signs do not depend on it)."""
        if np.ndim(gamma):
            raise InvalidParameterError("the polynomial kernel takes one gamma, not one per column")
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return type(self)(**{**fields, "gamma": float(gamma)})

    def matrices(self) -> np.ndarray:  # pragma: no cover - abstract
        """The ``(degree, D, d + 1)`` matrices ``W_i`` acting on ``[x, 1]``."""
        raise NotImplementedError

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"map_type": self.map_type}
        state.update({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "PolynomialSketchMap":
        names = {f.name for f in dataclasses.fields(cls)}
        got = set(state) - {"map_type"}
        if got != names:
            raise InvalidParameterError(
                f"state of a {cls.map_type} map has missing fields {sorted(names - got)} and unexpected "
                f"fields {sorted(got - names)}"
            )
        return cls(**{k: state[k] for k in names})

    def __reduce__(self):
        """Pickle the fields only (the caches are rebuilt on first use), as projections do."""
        return (_rebuild, (type(self), {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}))

    def _check_signs(self, signs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        signs = np.ascontiguousarray(signs, dtype=np.int8)
        if signs.shape != shape or signs.shape[0] < 1 or not np.all(np.abs(signs) == 1):
            raise InvalidParameterError(f"{self.method}: signs must be a {shape} array of +-1 (degree >= 1), "
                                        f"got shape {signs.shape}")
        return signs


def _rebuild(cls, fields):
    return cls(**fields)


def _rademacher(rng: np.random.Generator, shape) -> np.ndarray:
    return (2 * rng.integers(0, 2, size=shape, dtype=np.int8) - 1).astype(np.int8)


@dataclasses.dataclass(eq=False)
class TensorSketchMap(PolynomialSketchMap):
    """TensorSketch (Pham & Pagh 2013; scikit-learn's ``PolynomialCountSketch``).

    Attributes
    ----------
    hashes : ndarray of int64, shape (degree, d + 1)
        ``h_i(j)``, the output bucket of augmented column ``j`` in CountSketch ``i``.
    signs : ndarray of int8, shape (degree, d + 1)
        ``s_i(j)``.

    Time per row O(degree (d + D log D)); stored numbers ``2 degree (d + 1)``.
    """

    map_type = "tensorsketch"
    method = "tensorsketch"
    _arrays = ("hashes", "signs")

    hashes: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0), np.int64))
    signs: np.ndarray = dataclasses.field(default_factory=lambda: np.ones((0, 0), np.int8))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.hashes = np.ascontiguousarray(self.hashes, dtype=np.int64)
        shape = (self.hashes.shape[0], self.n_features + 1)
        self.signs = self._check_signs(self.signs, shape)
        if self.hashes.shape != shape or self.hashes.min() < 0 or self.hashes.max() >= self.n_components:
            raise InvalidParameterError(f"tensorsketch: hashes must be a {shape} array of buckets in "
                                        f"[0, {self.n_components})")

    @classmethod
    def draw(cls, n_features_in, n_components, degree, gamma, coef0, rng) -> "TensorSketchMap":
        shape = (int(degree), int(n_features_in) + 1)
        hashes = rng.integers(0, int(n_components), size=shape, dtype=np.int64)
        return cls(n_features_in, n_components, gamma, coef0, hashes, _rademacher(rng, shape))

    def _sketches(self, dtype) -> list:
        import scipy.sparse

        key = ("sketch", np.dtype(dtype))
        if key not in self._cache:
            rows = np.arange(self.n_features + 1)
            self._cache[key] = [
                scipy.sparse.csr_matrix((self.signs[i].astype(dtype), (rows, self.hashes[i])),
                                        shape=(self.n_features + 1, self.n_components))
                for i in range(self.degree)
            ]
        return self._cache[key]

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        import scipy.fft

        Xa = self.augmented(X)
        prod = None
        for S in self._sketches(X.dtype):
            F = scipy.fft.rfft(np.asarray(S.T.dot(Xa.T).T), axis=1)  # C_i x~, then its spectrum
            prod = F if prod is None else np.multiply(prod, F, out=prod)
        Z = scipy.fft.irfft(prod, n=self.n_components, axis=1).astype(X.dtype, copy=False)
        if out is None:
            return Z
        out[...] = Z
        return out

    def matrices(self) -> np.ndarray:
        W = np.zeros((self.degree, self.n_components, self.n_features + 1))
        cols = np.arange(self.n_features + 1)
        for i in range(self.degree):
            W[i, self.hashes[i], cols] = self.signs[i] * self._factors()
        return W


@dataclasses.dataclass(eq=False)
class TensorSRHTMap(PolynomialSketchMap):
    """Complex-to-real TensorSRHT: products of ``degree`` independent randomised Hadamard
    projections with complex diagonals, each block's rows in an independent random order;
    the ``[Re, Im]`` of the ``D`` complex products (the module docstring).

    Each factor is a one-``H D`` complex :class:`~dkrr.features._rom.ROMProjection`
    (``rom_diagonal="complex4"``: ``W = H D``, entries in {1, -1, i, -i}; its FWHT or dense
    path) of the augmented input, drawn over whole blocks, whose outputs are gathered in
    the order ``perm``.

    Attributes
    ----------
    codes : ndarray of int8, shape (degree, n_blocks, d')
        The diagonals ``D_ib``: entry ``i ** code``.
    perm : ndarray of int64, shape (degree, n_blocks, d')
        ``pi_ib``: feature ``j`` of block ``b`` takes row ``perm[i, b, j]`` of ``H D_ib``.

    Output width ``2 D`` (``n_output_features``); time per row O(degree D log d') (or a
    GEMM for small d'); stored numbers ``2 degree ceil(D / d') d'``.
    """

    map_type = "tensor_srht"
    method = "tensor_srht"
    _arrays = ("codes", "perm")

    codes: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0, 0), np.int8))
    perm: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 0, 0), np.int64))

    def __post_init__(self) -> None:
        super().__post_init__()
        dp = next_power_of_two(self.n_features + 1)
        self.codes = np.ascontiguousarray(self.codes, dtype=np.int8)
        self.perm = np.ascontiguousarray(self.perm, dtype=np.int64)
        shape = (self.codes.shape[0] if self.codes.ndim == 3 else 0, -(-self.n_components // dp), dp)
        if self.codes.shape != shape or shape[0] < 1 or not np.isin(self.codes, (0, 1, 2, 3)).all():
            raise InvalidParameterError(f"tensor_srht: codes must be a {shape} array (degree >= 1) of 0..3")
        if self.perm.shape != shape or not np.array_equal(np.sort(self.perm, axis=-1),
                                                          np.broadcast_to(np.arange(dp), shape)):
            raise InvalidParameterError(f"tensor_srht: perm must hold a permutation of range({dp}) per factor "
                                        f"and block, shape {shape}")

    @property
    def n_output_features(self) -> int:  # type: ignore[override]
        return 2 * self.n_components

    @classmethod
    def draw(cls, n_features_in, n_components, degree, gamma, coef0, rng) -> "TensorSRHTMap":
        dp = next_power_of_two(int(n_features_in) + 1)
        shape = (int(degree), -(-int(n_components) // dp), dp)
        codes = rng.integers(0, 4, size=shape, dtype=np.int8)
        perm = np.argsort(rng.random(shape), axis=-1)
        return cls(n_features_in, n_components, gamma, coef0, codes, perm)

    def _factor_projections(self) -> list:
        from ._rom import ROMProjection

        if "rom" not in self._cache:
            nb, dp = self.codes.shape[1:]
            offsets = dp * np.arange(nb)[:, None]
            self._cache["rom"] = [
                (ROMProjection(self.n_features + 1, nb * dp, 1.0, "complex4", self.codes[i][:, None, :]),
                 (self.perm[i] + offsets).reshape(-1)[: self.n_components])
                for i in range(self.degree)
            ]
        return self._cache["rom"]

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        Xa = self.augmented(X)
        D = self.n_components
        Z = out if out is not None else np.empty((X.shape[0], 2 * D), dtype=X.dtype)
        re, im = Z[:, :D], Z[:, D:]
        for i, (proj, rows) in enumerate(self._factor_projections()):
            P = proj.project(Xa)  # [Re, Im] of the whole blocks
            a, b = np.take(P, rows, axis=1), np.take(P, rows + proj.n_components, axis=1)
            if i == 0:
                re[...], im[...] = a, b
            else:  # (re + i im)(a + i b)
                t = re * b
                re *= a
                re -= im * b
                im *= a
                im += t
        Z *= X.dtype.type(1.0 / np.sqrt(D))
        return Z

    def matrices(self) -> np.ndarray:
        """The ``(degree, D, d + 1)`` complex matrices: the features are ``[Re, Im]`` of
        ``prod_i [X, 1] W_i^T / sqrt(D)``."""
        return np.stack([proj.matrix()[rows] * self._factors() for proj, rows in self._factor_projections()])


#: ``method`` -> sketch class of the polynomial kernel
POLYNOMIAL_MAPS: dict[str, type[PolynomialSketchMap]] = {"tensorsketch": TensorSketchMap,
                                                         "tensor_srht": TensorSRHTMap}
