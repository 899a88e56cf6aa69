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

    def with_gamma(self, gamma: float) -> "FeatureMap":
        """The same draw for the gaussian kernel of width ``gamma`` (a gamma grid scores
        one draw at several widths). Maps that cannot be rescaled raise
        :class:`~dkrr.errors.InvalidParameterError`."""
        raise InvalidParameterError(f"a {type(self).__name__} cannot be rebuilt for another gamma")


@dataclasses.dataclass(eq=False)
class RandomFeatureMap(FeatureMap):
    """``phi(x) = f(W x)`` for a kernel nonlinearity ``f`` and a random projection ``W``.

    Parameters
    ----------
    kernel : str
        One of ``gaussian``, ``angular``, ``arccos0``, ``arccos1``, ``linear``.
    projection : Projection
        The linear part.
    weights : ndarray of shape (n_components,) or None
        Optional per-frequency importance weights (leverage sampling).
    """

    map_type = "random_features"

    kernel: str
    projection: Projection
    weights: np.ndarray | None = None

    @property
    def n_features_in(self) -> int:  # type: ignore[override]
        return self.projection.n_features_in

    @property
    def n_components(self) -> int:
        return self.projection.n_components

    @property
    def n_output_features(self) -> int:  # type: ignore[override]
        return output_width(self.kernel, self.projection.n_components, self.projection.is_complex)

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        P = self.projection.project(X)
        return apply_nonlinearity(self.kernel, P, self.weights, out=out, n_components=self.projection.n_components)

    def with_gamma(self, gamma: float) -> "RandomFeatureMap":
        """The map with ``W`` rescaled to the gaussian width ``gamma``: ``W = sqrt(2 gamma)
        W_unit`` with the same unit draw, so it equals the map drawn with ``gamma`` and the
        same random state."""
        if self.kernel != "gaussian" or self.weights is not None or type(self) is not RandomFeatureMap:
            raise InvalidParameterError(
                f"only an unweighted gaussian RandomFeatureMap can be rescaled to another gamma, "
                f"not a {type(self).__name__} of kernel {self.kernel!r}"
            )
        projection = dataclasses.replace(self.projection, scale=float(np.sqrt(2.0 * float(gamma))))
        return RandomFeatureMap(self.kernel, projection)

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "map_type": self.map_type,
            "kernel": self.kernel,
            "method": self.projection.method,
            "projection": self.projection.get_state(),
        }
        if self.weights is not None:
            state["weights"] = np.asarray(self.weights, dtype=np.float64)
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "RandomFeatureMap":
        from ._registry import projection_class

        proj = projection_class(state["method"]).from_state(dict(state["projection"]))
        return cls(state["kernel"], proj, state.get("weights"))

