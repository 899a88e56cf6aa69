"""The one registry of projection methods and feature-map types, and ``method=`` dispatch.

Every class is listed here by hand; no module registers itself when imported, so what a
name means does not depend on which modules happen to be loaded.

* :data:`PROJECTIONS`: the data-independent ``method`` values (a
  :class:`~dkrr.features._base.Projection` class each); :data:`DATA_DEPENDENT_METHODS`:
  those fitted from the rows of X (``"nystroem"``); :data:`METHODS`: both.
* :data:`MAP_TYPES`: the fitted map classes by the ``"map_type"`` of their saved state,
  which :func:`feature_map_from_state` (model files) dispatches on.
* :func:`build_feature_map`: parameters -> a fitted map, the single path by which the
  estimators (:class:`dkrr.RandomFeatures` and the ridge estimators) draw their maps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._params import check_choice, check_gamma, check_int, check_options
from ._nonlinear import check_kernel
from .._validation import check_random_state
from ..errors import InvalidParameterError
from ._base import Projection, next_power_of_two
from ._fastfood import FastfoodProjection
from ._map import FeatureMap, RandomFeatureMap
from ._nystroem import NystroemMap, fit_nystroem_map
from ._orthogonal import ORFProjection, SORFProjection
from ._qmc import QMCProjection
from ._rff import RFFProjection
from ._rom import ROMProjection
from ._sampled import SampledFeatureMap
from ._standardize import StandardizedMap
from ._structured import (
    CirculantProjection,
    HankelProjection,
    SkewCirculantProjection,
    ToeplitzLikeProjection,
    ToeplitzProjection,
)

__all__ = [
    "DATA_DEPENDENT_METHODS",
    "MAP_OPTION_NAMES",
    "MAP_TYPES",
    "METHODS",
    "PROJECTIONS",
    "build_feature_map",
    "build_random_feature_map",
    "feature_map_from_state",
    "projection_class",
]


def _by_name(attr: str, classes: tuple[type, ...]) -> dict[str, type]:
    table: dict[str, type] = {}
    for cls in classes:
        name = getattr(cls, attr)
        if not name or name in table:
            raise RuntimeError(f"{cls.__name__}.{attr} = {name!r} is empty or listed twice")
        table[name] = cls
    return table


#: ``method`` name -> projection class (the data-independent constructions of W)
PROJECTIONS: dict[str, type[Projection]] = _by_name("method", (
    RFFProjection,
    ORFProjection,
    SORFProjection,
    ROMProjection,
    FastfoodProjection,
    CirculantProjection,
    SkewCirculantProjection,
    ToeplitzProjection,
    HankelProjection,
    ToeplitzLikeProjection,
    QMCProjection,
))

#: methods whose map is fitted from the data (their landmarks are training rows)
DATA_DEPENDENT_METHODS: tuple[str, ...] = ("nystroem",)

#: every accepted ``method``
METHODS: tuple[str, ...] = (*PROJECTIONS, *DATA_DEPENDENT_METHODS)

#: saved ``"map_type"`` -> fitted map class
MAP_TYPES: dict[str, type[FeatureMap]] = _by_name("map_type", (
    RandomFeatureMap,
    SampledFeatureMap,
    NystroemMap,
    StandardizedMap,
))

#: construction options of the projection methods (the estimators' keyword parameters)
MAP_OPTION_NAMES: tuple[str, ...] = tuple(dict.fromkeys(
    name for cls in PROJECTIONS.values() for name in cls.options
))


def projection_class(method: str) -> type[Projection]:
    """The projection class of ``method`` (one of :data:`PROJECTIONS`)."""
    return PROJECTIONS[check_choice(method, "projection method", sorted(PROJECTIONS))]


def feature_map_from_state(state: dict[str, Any]) -> FeatureMap:
    """Rebuild any map of :data:`MAP_TYPES` from :meth:`FeatureMap.get_state` output."""
    kind = state.get("map_type")
    if not isinstance(kind, str) or kind not in MAP_TYPES:
        raise InvalidParameterError(f"unknown feature map type {kind!r}; known: {sorted(MAP_TYPES)}")
    return MAP_TYPES[kind].from_state(state)


#: ``method="auto"``: ORF while the padded width d' is at most this (there SORF multiplies by
#: a dense W too, so ORF costs the same and approximates better: at d' <= 16 SORF's kernel
#: MSE is 2x to 100x ORF's), SORF above (O(D) state, FWHT transforms)
AUTO_ORF_MAX_WIDTH = 128


def resolve_method(method: Any, n_features_in: int) -> Any:
    """The construction ``method="auto"`` stands for at ``n_features_in`` columns (other
    values are returned unchanged): ``"orf"`` when ``next_power_of_two(d) <=``
    :data:`AUTO_ORF_MAX_WIDTH`, else ``"sorf"``."""
    if isinstance(method, str) and method == "auto":
        return "orf" if next_power_of_two(int(n_features_in)) <= AUTO_ORF_MAX_WIDTH else "sorf"
    return method


def _checked_auto(kernel, method, n_components, gamma, options: dict, n_features_in: int):
    """:func:`_checked` of the resolved method; an error about the method's options names
    what ``"auto"`` chose (the kernel is checked first: its error is not about methods)."""
    check_kernel(kernel)
    resolved = resolve_method(method, n_features_in)
    try:
        return _checked(kernel, resolved, n_components, gamma, options)
    except InvalidParameterError as exc:
        if resolved == method:
            raise
        raise InvalidParameterError(
            f"method='auto' chose {resolved!r} for {n_features_in} input columns: {exc} "
            "(name the method to use its options)"
        ) from None


def _takers(option: str) -> list[str]:
    return sorted(m for m, c in PROJECTIONS.items() if option in c.options)


def _checked(kernel, method, n_components, gamma, options: dict) -> tuple[str, str, int, dict]:
    """Validate the map parameters shared by every method; ``None`` options are not given."""
    kernel = check_kernel(kernel)
    method = check_choice(method, "method", list(METHODS))
    n_components = check_int(n_components, "n_components")
    check_gamma(gamma, kernel)
    given = {k: v for k, v in options.items() if v is not None}
    if method in DATA_DEPENDENT_METHODS:
        if given:
            raise InvalidParameterError(
                f"option(s) {sorted(given)} do not apply to method={method!r} (they configure "
                "random projections; Nystroem uses landmark rows of X)"
            )
        return kernel, method, n_components, {}
    # an option of another method is refused as such (not judged by its meaning for rom)
    opts = check_options(method, PROJECTIONS[method].options, given, _takers)
    if method == "rom" and given.get("rom_diagonal", "rademacher") != "rademacher" and kernel != "linear":
        raise InvalidParameterError(
            f"rom_diagonal={given['rom_diagonal']!r} makes W complex, which only kernel='linear' "
            f"takes (features [Re, Im] estimating Re <Wx, Wy>), not kernel={kernel!r}; use "
            "rom_diagonal='rademacher' (the default) with this kernel"
        )
    return kernel, method, n_components, opts


def _draw_projection_map(kernel, method, n_components, gamma, n_features_in, rng, options) -> RandomFeatureMap:
    # rows of W ~ N(0, I / sigma^2), gamma = 1 / (2 sigma^2); the other kernels are scale-free
    scale = float(np.sqrt(2.0 * gamma)) if kernel == "gaussian" else 1.0
    return RandomFeatureMap(kernel, PROJECTIONS[method].generate(n_features_in, n_components, scale, rng, **options))


def build_random_feature_map(
    *,
    kernel: str,
    method: str,
    n_components: int,
    gamma: float,
    n_features_in: int,
    random_state,
    options: dict,
) -> RandomFeatureMap:
    """Validate parameters and draw a data-independent :class:`RandomFeatureMap`.

    ``options`` maps option names (:data:`MAP_OPTION_NAMES`) to values or ``None`` (not
    given). An option given for a method that does not take it is an error rather than
    silently ignored. ``method`` must be one of :data:`PROJECTIONS`.
    """
    kernel, method, n_components, opts = _checked_auto(kernel, method, n_components, gamma, options,
                                                       int(n_features_in))
    if method not in PROJECTIONS:
        raise InvalidParameterError(
            f"method={method!r} is fitted from the rows of X; use build_feature_map(X, ...)"
        )
    rng = check_random_state(random_state)
    return _draw_projection_map(kernel, method, n_components, gamma, int(n_features_in), rng, opts)


def build_feature_map(
    X,
    *,
    kernel: str,
    method: str,
    n_components: int,
    gamma: float,
    random_state,
    options: dict,
) -> FeatureMap:
    """Validate parameters and build the feature map of ``method`` for inputs like ``X``.

    Data-independent methods (every projection construction) read only ``X.shape[1]``
    and draw a :class:`RandomFeatureMap` from the generator of ``random_state``.
    ``method="nystroem"`` samples ``n_components`` landmark rows of ``X`` (a validated
    numpy array or row-chunked dask array; for dask only those rows are computed) with
    that generator and returns a :class:`~dkrr.features._nystroem.NystroemMap`.

    Raises
    ------
    InvalidParameterError
        Unknown kernel or method, bad ``n_components``/``gamma``, an option that does not
        apply to ``method``.
    """
    kernel, method, n_components, opts = _checked_auto(kernel, method, n_components, gamma, options,
                                                       int(X.shape[1]))
    rng = check_random_state(random_state)
    if method == "nystroem":
        return fit_nystroem_map(X, kernel=kernel, n_components=n_components, gamma=float(gamma), rng=rng)
    return _draw_projection_map(kernel, method, n_components, gamma, X.shape[1], rng, opts)
