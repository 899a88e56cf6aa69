"""Random feature maps: projections (the linear part), kernel nonlinearities, fitted maps.

Where things live: :mod:`._base` (the projection contract), one module per family
(:mod:`._rff`, :mod:`._orthogonal`, :mod:`._fastfood`, :mod:`._fft` + :mod:`._pmodel` +
:mod:`._structured`, :mod:`._qmc`), the kernels' spectral laws (:mod:`._spectral`), the
fitted maps (:mod:`._map`, :mod:`._nystroem`, :mod:`._sampled`, the polynomial sketches
:mod:`._polynomial`), applying a map to blocks (:mod:`._blockwise`) and the registry of
every method and map type with the ``method=`` dispatch (:mod:`._registry`).
"""

from ._base import Projection, next_power_of_two
from ._map import FeatureMap, RandomFeatureMap
from ._nonlinear import KERNELS, exact_kernel
from ._registry import (
    DATA_DEPENDENT_METHODS,
    MAP_OPTION_NAMES,
    MAP_TYPES,
    METHODS,
    PROJECTIONS,
    SKETCH_METHODS,
    build_feature_map,
    build_random_feature_map,
    feature_map_from_state,
    projection_class,
)

__all__ = [
    "DATA_DEPENDENT_METHODS",
    "FeatureMap",
    "KERNELS",
    "MAP_OPTION_NAMES",
    "MAP_TYPES",
    "METHODS",
    "PROJECTIONS",
    "Projection",
    "RandomFeatureMap",
    "SKETCH_METHODS",
    "build_feature_map",
    "build_random_feature_map",
    "exact_kernel",
    "feature_map_from_state",
    "next_power_of_two",
    "projection_class",
]
