"""Fitted feature maps: the object a worker needs to turn a row block X_b into Z_b.

A feature map is small (a projection's O(D) numbers, or landmarks) and is embedded once in
a dask graph; every block task calls :meth:`FeatureMap.transform` on its rows. Maps are
plain data: :meth:`get_state` / :func:`feature_map_from_state` round-trip them without
pickle (model files store exactly this).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from ._base import PROJECTIONS, Projection
from ._nonlinear import apply_nonlinearity, output_width

__all__ = ["FeatureMap", "RandomFeatureMap", "feature_map_from_state", "MAP_TYPES"]

#: map type name -> class; filled by :func:`_register_map`.
MAP_TYPES: dict[str, type["FeatureMap"]] = {}


def _register_map(cls):
    MAP_TYPES[cls.map_type] = cls
    return cls


class FeatureMap:
    """Interface of a fitted map ``phi``: numpy rows in, features out.

    Attributes
    ----------
    n_features_in : int
    n_output_features : int
        Width p of ``Z``.
    """

    map_type: str = ""
    n_features_in: int
    n_output_features: int

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Features of a validated float block ``X`` (dtype kept), optionally into ``out``."""
        raise NotImplementedError

    def get_state(self) -> dict[str, Any]:
        """Plain-data description: ``{"map_type": ..., ...}`` with ndarrays and scalars."""
        raise NotImplementedError


@_register_map
@dataclasses.dataclass(eq=False)
class RandomFeatureMap(FeatureMap):
    """``phi(x) = f(W x)`` for a kernel nonlinearity ``f`` and a random projection ``W``.

    Parameters
    ----------
    kernel : str
        One of ``gaussian``, ``angular``, ``arccos0``, ``arccos1``.
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
        return output_width(self.kernel, self.projection.n_components)

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        P = self.projection.project(X)
        return apply_nonlinearity(self.kernel, P, self.weights, out=out)

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
        method = state["method"]
        if method not in PROJECTIONS:
            raise InvalidParameterError(f"unknown projection method {method!r} in saved state")
        proj = PROJECTIONS[method].from_state(dict(state["projection"]))
        return cls(state["kernel"], proj, state.get("weights"))


def feature_map_from_state(state: dict[str, Any]) -> FeatureMap:
    """Rebuild any registered feature map from :meth:`FeatureMap.get_state` output."""
    kind = state.get("map_type")
    if kind not in MAP_TYPES:
        raise InvalidParameterError(
            f"unknown feature map type {kind!r}; known: {sorted(MAP_TYPES)}"
        )
    return MAP_TYPES[kind].from_state(state)
