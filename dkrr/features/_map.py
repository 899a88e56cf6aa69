"""Fitted feature maps: the object a worker needs to turn a row block X_b into Z_b.

A feature map is small (a projection's O(D) numbers, or landmarks) and is embedded once in
a dask graph; every block task calls :meth:`FeatureMap.transform` on its rows. Maps are
plain data: :meth:`FeatureMap.get_state` and
:func:`dkrr.features.feature_map_from_state` round-trip them without pickle (model files
store exactly this). The map types by name are listed in :mod:`dkrr.features._registry`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from ._base import Projection
from ._nonlinear import apply_nonlinearity, output_width

__all__ = ["FeatureMap", "RandomFeatureMap"]


class FeatureMap:
    """Interface of a fitted map ``phi``: numpy rows in, features out.

    Attributes
    ----------
    n_features_in : int
    n_output_features : int
        Width p of ``Z``.
    """

    #: the ``"map_type"`` of its state (the key of :data:`dkrr.features.MAP_TYPES`)
    map_type: str = ""
    n_features_in: int
    n_output_features: int

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Features of a validated float block ``X`` (dtype kept), optionally into ``out``."""
        raise NotImplementedError

    def get_state(self) -> dict[str, Any]:
        """Plain-data description: ``{"map_type": ..., ...}`` with ndarrays and scalars."""
        raise NotImplementedError

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "FeatureMap":
        """Inverse of :meth:`get_state`."""
        raise NotImplementedError

    def with_gamma(self, gamma) -> "FeatureMap":
        """The same draw for the kernel of width ``gamma`` (a gamma grid scores one draw at
        several widths). Maps that cannot be rescaled raise
        :class:`~dkrr.errors.InvalidParameterError`."""
        raise InvalidParameterError(f"a {type(self).__name__} cannot be rebuilt for another gamma")


@dataclasses.dataclass(eq=False)
class RandomFeatureMap(FeatureMap):
    """``phi(x) = f(W x)`` for a kernel nonlinearity ``f`` and a random projection ``W``.

    ``W = diag(radial) W_proj diag(column_scale)`` with ``W_proj`` the projection's
    matrix: the optional factors are the Student-t radial factors of ``matern``
    and the per-column scales of an ARD ``gamma`` (``dkrr.features._spectral``).

    Parameters
    ----------
    kernel : str
        One of :data:`~dkrr.features.KERNELS` but ``polynomial`` (whose sketches are maps
        of their own).
    projection : Projection
        The linear part.
    weights : ndarray of shape (n_components,) or None
        Optional per-frequency importance weights (leverage sampling).
    radial : ndarray of shape (n_components,) or None
        Per-frequency multipliers of the rows of W (``matern``).
    column_scale : ndarray of shape (n_features_in,) or None
        Per-column multipliers of the input (ARD).
    nu : float or None
        The Matern smoothness the radial factors were drawn for (``matern`` only).
    """

    map_type = "random_features"

    kernel: str
    projection: Projection
    weights: np.ndarray | None = None
    radial: np.ndarray | None = None
    column_scale: np.ndarray | None = None
    nu: float | None = None

    def __post_init__(self) -> None:
        for name, size in (("radial", self.projection.n_components), ("column_scale", self.projection.n_features_in)):
            value = getattr(self, name)
            if value is None:
                continue
            value = np.ascontiguousarray(value, dtype=np.float64)
            if value.shape != (size,) or not np.isfinite(value).all() or (value <= 0).any():
                raise InvalidParameterError(
                    f"the {name} of a random feature map must hold {size} finite positive values, got "
                    f"shape {value.shape}"
                )
            setattr(self, name, value)
        # a matern map records nu; the drawn map has its radial factors (a sampled map has
        # them folded into its dense W)
        matern, drawn = self.kernel == "matern", type(self) is RandomFeatureMap
        if matern != (self.nu is not None) or (self.radial is not None and not matern) or (
                matern and drawn and self.radial is None):
            raise InvalidParameterError(
                "a matern random feature map has nu and (unless resampled) its radial factors; no other "
                f"kernel has them (kernel={self.kernel!r}, nu={self.nu!r}, radial "
                f"{'given' if self.radial is not None else 'missing'})"
            )
        if self.nu is not None:
            self.nu = float(self.nu)
            if not (np.isfinite(self.nu) and self.nu > 0):
                raise InvalidParameterError(f"nu must be a positive finite number, got {self.nu!r}")

    @property
    def n_features_in(self) -> int:  # type: ignore[override]
        return self.projection.n_features_in

    @property
    def n_components(self) -> int:
        return self.projection.n_components

    @property
    def n_output_features(self) -> int:  # type: ignore[override]
        return output_width(self.kernel, self.projection.n_components, self.projection.is_complex)

    @property
    def projection_columns(self) -> int:
        """Columns of the projection ``X W^T`` (twice ``n_components`` for a complex ``W``):
        the shape of :meth:`transform`'s ``work`` buffer."""
        return self.projection.n_components * (2 if self.projection.is_complex else 1)

    def transform(self, X: np.ndarray, out: np.ndarray | None = None, work: np.ndarray | None = None) -> np.ndarray:
        """Features of a validated float block ``X`` (dtype kept), optionally into ``out``;
        ``work`` (rows, :attr:`projection_columns`) of ``X``'s dtype is a buffer the
        projection may use (the sub-block engine reuses one: a fresh array per sub-block
        costs page faults where the allocator returns freed memory to the system at once,
        as dask workers' ``MALLOC_TRIM_THRESHOLD_`` makes it)."""
        if self.column_scale is not None:
            X = X * self.column_scale.astype(X.dtype, copy=False)
        P = self.projection.project(X, out=work)
        if self.radial is not None:
            P *= self.radial.astype(P.dtype, copy=False)
        return apply_nonlinearity(self.kernel, P, self.weights, out=out, n_components=self.projection.n_components)

    def matrix(self) -> np.ndarray:
        """Dense ``W`` of the features ``f(X W^T)``: the projection's matrix with the radial
        factors (rows) and column scales folded in."""
        W = self.projection.matrix()
        if self.radial is not None:
            W = self.radial[:, None] * W
        if self.column_scale is not None:
            W = W * self.column_scale[None, :]
        return W

    def with_gamma(self, gamma) -> "RandomFeatureMap":
        """The map with ``W`` rescaled to the width ``gamma`` (a number, or one per column
        for ARD) with the same unit draw, so it equals the map drawn with ``gamma`` and the
        same random state (shift-invariant kernels only)."""
        from ._nonlinear import FOURIER_KERNELS
        from ._spectral import frequency_scale

        if self.kernel not in FOURIER_KERNELS or self.weights is not None or type(self) is not RandomFeatureMap:
            raise InvalidParameterError(
                f"only an unweighted RandomFeatureMap of a shift-invariant kernel can be rescaled to another "
                f"gamma, not a {type(self).__name__} of kernel {self.kernel!r}"
            )
        s = frequency_scale(self.kernel, gamma)
        ard = bool(np.ndim(s))
        projection = dataclasses.replace(self.projection, scale=1.0 if ard else float(s))
        return dataclasses.replace(self, projection=projection, column_scale=s if ard else None)

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "map_type": self.map_type,
            "kernel": self.kernel,
            "method": self.projection.method,
            "projection": self.projection.get_state(),
        }
        for name in ("weights", "radial", "column_scale"):
            if getattr(self, name) is not None:
                state[name] = np.asarray(getattr(self, name), dtype=np.float64)
        if self.nu is not None:
            state["nu"] = self.nu
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "RandomFeatureMap":
        from ._registry import projection_class

        proj = projection_class(state["method"]).from_state(dict(state["projection"]))
        return cls(state["kernel"], proj, state.get("weights"), radial=state.get("radial"),
                   column_scale=state.get("column_scale"), nu=state.get("nu"))
