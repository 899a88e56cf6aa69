"""Per-column standardisation in front of a feature map: :class:`StandardizedMap`.

The estimators' ``standardize=True`` learns a per-column ``mean`` and ``scale`` from one
streamed pass over X (:func:`dkrr.linalg.column_moments`) and draws their map on the
standardised columns; the fitted map is then this wrapper, so ``transform``, ``predict``
and model files apply ``(x - mean) / scale`` before the inner map with no more plumbing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from ._map import FeatureMap

__all__ = ["StandardizedMap", "standardize_block"]


def standardize_block(X: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """``(X - mean) / scale`` computed in float64 (the arithmetic of the fit's pass)."""
    return (X - mean) / scale


@dataclasses.dataclass(eq=False)
class StandardizedMap(FeatureMap):
    """``phi(x) = inner((x - mean) / scale)``: a fitted map on standardised columns.

    Parameters
    ----------
    inner : FeatureMap
        The map drawn (or fitted, for Nystroem) on the standardised columns.
    mean : ndarray of shape (n_features_in,)
        Column means (float64).
    scale : ndarray of shape (n_features_in,)
        Column standard deviations (population, ``ddof=0``), ``1.0`` for a constant
        column (as scikit-learn's ``StandardScaler``): positive and finite.
    """

    map_type = "standardized"

    inner: FeatureMap
    mean: np.ndarray
    scale: np.ndarray

    def __post_init__(self) -> None:
        self.mean = np.ascontiguousarray(self.mean, dtype=np.float64)
        self.scale = np.ascontiguousarray(self.scale, dtype=np.float64)
        d = self.inner.n_features_in
        if self.mean.shape != (d,) or self.scale.shape != (d,):
            raise InvalidParameterError(
                f"a standardized map of {d} input features needs mean and scale of shape ({d},), "
                f"got {self.mean.shape} and {self.scale.shape}"
            )
        if not (np.isfinite(self.mean).all() and np.isfinite(self.scale).all() and (self.scale > 0).all()):
            raise InvalidParameterError("a standardized map needs a finite mean and a finite positive scale")

    @property
    def n_features_in(self) -> int:  # type: ignore[override]
        return self.inner.n_features_in

    @property
    def n_output_features(self) -> int:  # type: ignore[override]
        return self.inner.n_output_features

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Features of the standardised block; the output keeps X's floating dtype."""
        Xs = standardize_block(X, self.mean, self.scale).astype(X.dtype, copy=False)
        return self.inner.transform(Xs, out=out)

    def with_gamma(self, gamma: float) -> "StandardizedMap":
        return StandardizedMap(self.inner.with_gamma(gamma), self.mean, self.scale)

    def get_state(self) -> dict[str, Any]:
        return {"map_type": self.map_type, "mean": self.mean, "scale": self.scale, "inner": self.inner.get_state()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "StandardizedMap":
        from ._registry import feature_map_from_state

        missing = {"mean", "scale", "inner"} - set(state)
        if missing:
            raise InvalidParameterError(f"state of a standardized map lacks fields {sorted(missing)}")
        inner = state["inner"]
        if not isinstance(inner, dict) or inner.get("map_type") == cls.map_type:
            raise InvalidParameterError("the inner map of a standardized map must be another map type")
        return cls(feature_map_from_state(inner), np.asarray(state["mean"]), np.asarray(state["scale"]))
