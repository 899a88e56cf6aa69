"""The feature map that leverage sampling produces: kept rows of W with importance weights.

The sampling itself (scores, resampling, weights) is in :mod:`dkrr.sampling`; this module
holds only the map type, so that :mod:`dkrr.features._registry` lists every map type
without the features layer importing the sampling layer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from ._map import RandomFeatureMap
from ._rff import DenseProjection

__all__ = ["SampledFeatureMap"]


@dataclasses.dataclass(eq=False)
class SampledFeatureMap(RandomFeatureMap):
    """A :class:`RandomFeatureMap` over the dense rows of W kept by leverage sampling.

    ``projection`` is a :class:`~dkrr.features._rff.DenseProjection` (scale 1, the kept
    rows of the candidate W with its scale folded in) and ``weights`` the importance
    weights. It is made by :func:`dkrr.sampling.resample_feature_map` from scored
    candidates, never drawn, so it is a map type of its own
    (``"sampled_random_features"``) rather than a projection method; its state is plain
    data (``W``, ``weights``, ``kernel`` and the candidates' construction
    ``source_method``, for information; ``nu`` for ``matern``, whose radial factors are
    folded into ``W`` like the width).
    """

    map_type = "sampled_random_features"

    source_method: str = ""

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "map_type": self.map_type,
            "kernel": self.kernel,
            "source_method": self.source_method,
            "W": np.asarray(self.projection.matrix(), dtype=np.float64),
        }
        if self.weights is not None:
            state["weights"] = np.asarray(self.weights, dtype=np.float64)
        if self.nu is not None:
            state["nu"] = self.nu
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "SampledFeatureMap":
        W = np.asarray(state["W"], dtype=np.float64)
        if W.ndim != 2:
            raise InvalidParameterError(f"state of a sampled map has W of shape {W.shape}; expected (s, d)")
        proj = DenseProjection(W.shape[1], W.shape[0], 1.0, W)
        weights = state.get("weights")
        return cls(state["kernel"], proj, None if weights is None else np.asarray(weights, dtype=np.float64),
                   nu=state.get("nu"), source_method=str(state.get("source_method", "")))
