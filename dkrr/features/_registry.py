"""The one registry of projection methods and feature-map types, and ``method=`` dispatch.

Every class is listed here by hand; no module registers itself when imported, so what a
name means does not depend on which modules happen to be loaded.

* :data:`PROJECTIONS`: the data-independent ``method`` values (a
  :class:`~dkrr.features._base.Projection` class each); :data:`SKETCH_METHODS`: the
  sketches of the polynomial kernel (a map class each, no single W);
  :data:`DATA_DEPENDENT_METHODS`: those fitted from the rows of X (``"nystroem"``);
  :data:`METHODS`: all.
* :data:`MAP_TYPES`: the fitted map classes by the ``"map_type"`` of their saved state,
  which :func:`feature_map_from_state` (model files) dispatches on.
* :func:`build_feature_map`: parameters -> a fitted map, the single path by which the
  estimators (:class:`dkrr.RandomFeatures` and the ridge estimators) draw their maps.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._params import check_choice, check_gamma, check_int, check_kernel_params, check_options
from ._nonlinear import check_kernel
from .._validation import check_random_state
from ..errors import InvalidParameterError
from ._base import Projection, next_power_of_two
from ._fastfood import FastfoodProjection
from ._map import FeatureMap, RandomFeatureMap
from ._nystroem import NystroemMap, fit_nystroem_map
from ._orthogonal import ORFProjection, SORFProjection
from ._polynomial import POLYNOMIAL_MAPS, TensorSketchMap, TensorSRHTMap
from ._qmc import QMCProjection
from ._rff import RFFProjection
from ._rom import ROMProjection
from ._sampled import SampledFeatureMap
from ._spectral import ENTRY_LAW, draw_radial, frequency_scale
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
    "SKETCH_METHODS",
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

#: sketches of the polynomial kernel (``kernel="polynomial"`` only; a map class each)
SKETCH_METHODS: tuple[str, ...] = tuple(POLYNOMIAL_MAPS)

#: methods whose map is fitted from the data (their landmarks are training rows)
DATA_DEPENDENT_METHODS: tuple[str, ...] = ("nystroem",)

#: every accepted ``method``
METHODS: tuple[str, ...] = (*PROJECTIONS, *SKETCH_METHODS, *DATA_DEPENDENT_METHODS)

#: saved ``"map_type"`` -> fitted map class
MAP_TYPES: dict[str, type[FeatureMap]] = _by_name("map_type", (
    RandomFeatureMap,
    SampledFeatureMap,
    NystroemMap,
    StandardizedMap,
    TensorSketchMap,
    TensorSRHTMap,
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


def resolve_method(method: Any, n_features_in: int, kernel: Any = "gaussian") -> Any:
    """The construction ``method="auto"`` stands for at ``n_features_in`` columns (other
    values are returned unchanged): for ``kernel="polynomial"`` ``"tensor_srht"``, for
    ``"laplacian"`` ``"rff"`` (no orthogonal construction keeps its product-Cauchy law);
    else ``"orf"`` when ``next_power_of_two(d) <=`` :data:`AUTO_ORF_MAX_WIDTH`, ``"sorf"``
    above."""
    if isinstance(method, str) and method == "auto":
        if kernel == "polynomial":
            return "tensor_srht"
        if kernel == "laplacian":
            return "rff"
        return "orf" if next_power_of_two(int(n_features_in)) <= AUTO_ORF_MAX_WIDTH else "sorf"
    return method


def _checked_auto(kernel, method, n_components, gamma, options: dict, n_features_in: int, kernel_params: dict):
    """:func:`_checked` of the resolved method; an error about the method's options names
    what ``"auto"`` chose (the parameters every method shares are checked first: their
    errors are not about methods, and "method='auto' chose 'orf' ... (name the method to
    use its options)" misled about n_components=0)."""
    check_kernel(kernel)
    check_int(n_components, "n_components")
    check_gamma(gamma, kernel, n_features_in)
    check_kernel_params(kernel, **(kernel_params or {}))
    resolved = resolve_method(method, n_features_in, kernel)
    try:
        return _checked(kernel, resolved, n_components, gamma, options, n_features_in, kernel_params)
    except InvalidParameterError as exc:
        if resolved == method:
            raise
        raise InvalidParameterError(
            f"method='auto' chose {resolved!r} for {n_features_in} input columns: {exc} "
            "(name the method to use its options)"
        ) from None


def check_map_params(kernel, method, n_components, gamma, options: dict, n_features_in: int,
                     kernel_params: dict | None = None) -> None:
    """Raise :class:`~dkrr.errors.InvalidParameterError` for parameters no map could be
    drawn with (what :func:`draw_feature_map` and :func:`build_feature_map` check), so
    that an estimator refuses them before its first pass over X."""
    _checked_auto(kernel, method, n_components, gamma, options, int(n_features_in), kernel_params or {})


def _takers(option: str) -> list[str]:
    return sorted(m for m, c in PROJECTIONS.items() if option in c.options)


def kernel_methods(kernel: str) -> list[str]:
    """The methods that approximate ``kernel`` (every one but ``"auto"``)."""
    if kernel == "polynomial":
        return [*SKETCH_METHODS, *DATA_DEPENDENT_METHODS]
    law = ENTRY_LAW.get(kernel, "gaussian")
    return [m for m, c in PROJECTIONS.items() if law in c.laws] + list(DATA_DEPENDENT_METHODS)


def _checked(kernel, method, n_components, gamma, options: dict, n_features_in: int | None = None,
             kernel_params: dict | None = None) -> tuple[str, str, int, dict, Any, dict]:
    """Validate the map parameters shared by every method; ``None`` options are not given.
    Returns ``(kernel, method, n_components, options, gamma, kernel parameters)``."""
    kernel = check_kernel(kernel)
    method = check_choice(method, "method", list(METHODS))
    n_components = check_int(n_components, "n_components")
    gamma = check_gamma(gamma, kernel, n_features_in)
    params = check_kernel_params(kernel, **(kernel_params or {}))
    if method not in kernel_methods(kernel):
        why = {"polynomial": "its sketches", "laplacian": "methods whose rows keep i.i.d. Cauchy entries (no "
               "rotation keeps the product-Cauchy law)"}.get(kernel, "random projections and Nystroem")
        raise InvalidParameterError(
            f"method={method!r} does not approximate kernel={kernel!r}; it takes {why}: {kernel_methods(kernel)}"
        )
    given = {k: v for k, v in options.items() if v is not None}
    if method in DATA_DEPENDENT_METHODS or method in SKETCH_METHODS:
        if given:
            what = "Nystroem uses landmark rows of X" if method in DATA_DEPENDENT_METHODS else \
                "the polynomial sketches take none"
            raise InvalidParameterError(
                f"option(s) {sorted(given)} do not apply to method={method!r} (they configure "
                f"random projections; {what})"
            )
        return kernel, method, n_components, {}, gamma, params
    # an option of another method is refused as such (not judged by its meaning for rom)
    opts = check_options(method, PROJECTIONS[method].options, given, _takers)
    if method == "rom" and given.get("rom_diagonal", "rademacher") != "rademacher" and kernel != "linear":
        raise InvalidParameterError(
            f"rom_diagonal={given['rom_diagonal']!r} makes W complex, which only kernel='linear' "
            f"takes (features [Re, Im] estimating Re <Wx, Wy>), not kernel={kernel!r}; use "
            "rom_diagonal='rademacher' (the default) with this kernel"
        )
    return kernel, method, n_components, opts, gamma, params


def _draw_projection_map(kernel, method, n_components, gamma, n_features_in, rng, options, params) -> RandomFeatureMap:
    """The projection of the kernel's unit law (``_spectral``) at the scale of ``gamma``
    (1 with an ARD gamma, whose scales multiply the columns); then, for ``matern``, one
    radial factor per frequency from the same generator."""
    s = frequency_scale(kernel, gamma)
    ard = bool(np.ndim(s))
    proj = PROJECTIONS[method].generate(n_features_in, n_components, 1.0 if ard else float(s), rng,
                                        law=ENTRY_LAW.get(kernel, "gaussian"), **options)
    radial = draw_radial(params["nu"], n_components, rng) if kernel == "matern" else None
    return RandomFeatureMap(kernel, proj, radial=radial, column_scale=s if ard else None, nu=params.get("nu"))


def build_random_feature_map(
    *,
    kernel: str,
    method: str,
    n_components: int,
    gamma,
    n_features_in: int,
    random_state,
    options: dict,
    kernel_params: dict | None = None,
) -> RandomFeatureMap:
    """Validate parameters and draw a data-independent :class:`RandomFeatureMap`.

    ``options`` maps option names (:data:`MAP_OPTION_NAMES`) to values or ``None`` (not
    given). An option given for a method that does not take it is an error rather than
    silently ignored. ``method`` must be one of :data:`PROJECTIONS`. ``kernel_params``:
    ``nu``, ``degree``, ``coef0`` (``None`` or absent: the kernel's default).
    """
    kernel, method, n_components, opts, gamma, params = _checked_auto(
        kernel, method, n_components, gamma, options, int(n_features_in), kernel_params or {})
    if method not in PROJECTIONS:
        raise InvalidParameterError(
            f"method={method!r} is not a random projection; use build_feature_map(X, ...)"
        )
    rng = check_random_state(random_state)
    return _draw_projection_map(kernel, method, n_components, gamma, int(n_features_in), rng, opts, params)


def build_feature_map(
    X,
    *,
    kernel: str,
    method: str,
    n_components: int,
    gamma,
    random_state,
    options: dict,
    kernel_params: dict | None = None,
    sample_weight=None,
) -> FeatureMap:
    """Validate parameters and build the feature map of ``method`` for inputs like ``X``.

    Data-independent methods (every projection construction) read only ``X.shape[1]``
    and draw a :class:`RandomFeatureMap` from the generator of ``random_state``; the
    polynomial sketches (:data:`SKETCH_METHODS`) draw their hashes and signs from it.
    ``method="nystroem"`` samples ``n_components`` landmark rows of ``X`` (a validated
    numpy array or row-chunked dask array; for dask only those rows are computed) with
    that generator and returns a :class:`~dkrr.features._nystroem.NystroemMap`.
    ``kernel_params``: ``nu`` (matern), ``degree`` and ``coef0`` (polynomial).
    ``sample_weight``: the rows' weights (a checked array of shape (n,), or a
    :class:`~dkrr._rows.RowPool`), or None; the landmarks are drawn among the rows of
    positive weight (:func:`~dkrr.features._nystroem.fit_nystroem_map`). The other
    methods read no rows.

    Raises
    ------
    InvalidParameterError
        Unknown kernel or method, a method that does not approximate the kernel, bad
        ``n_components``/``gamma``/kernel parameters, an option that does not apply to
        ``method``.
    """
    d = int(X.shape[1])
    kernel, method, n_components, opts, gamma, params = _checked_auto(
        kernel, method, n_components, gamma, options, d, kernel_params or {})
    rng = check_random_state(random_state)
    if method == "nystroem":
        return fit_nystroem_map(X, kernel=kernel, n_components=n_components, gamma=gamma, rng=rng,
                                sample_weight=sample_weight, **params)
    if method in SKETCH_METHODS:
        return POLYNOMIAL_MAPS[method].draw(d, n_components, params["degree"], gamma, params["coef0"], rng)
    return _draw_projection_map(kernel, method, n_components, gamma, d, rng, opts, params)
