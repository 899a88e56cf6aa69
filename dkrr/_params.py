"""Checks of parameter values (what a user passes to an estimator or a map), in one place.

:mod:`dkrr._validation` checks *data* (arrays, shapes, finiteness); this module checks the
*settings*: integers, choices, booleans, the kernel and its ``gamma``, and the
construction options of a projection method. Every check returns the normalised value or
raises :class:`~dkrr.errors.InvalidParameterError` naming the parameter, the value given
and what is allowed. The feature maps (``dkrr.features``) and the estimators
(``dkrr.estimators``) both call these, so a parameter is refused with the same message
wherever it is given.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable
from typing import Any, Callable, Iterable, Mapping

from .errors import InvalidParameterError

__all__ = [
    "check_bool",
    "check_choice",
    "check_gamma",
    "check_int",
    "check_kernel_params",
    "check_options",
]


def check_int(value: Any, name: str, *, minimum: int = 1, maximum: int | None = None, note: str = "",
              allow_none: bool = False) -> int | None:
    """``value`` as an ``int`` in ``[minimum, maximum]`` (bools and floats are refused).

    ``note`` is inserted after the range in the message (e.g. where ``maximum`` comes
    from). With ``allow_none``, ``None`` (not given) is returned as is.
    """
    if allow_none and value is None:
        return None
    ok = not isinstance(value, bool) and isinstance(value, numbers.Integral)
    if ok and value >= minimum and (maximum is None or value <= maximum):
        return int(value)
    if maximum is not None:
        want = f"an integer in [{minimum}, {maximum}]{note}"
    elif minimum == 1:
        want = f"a positive integer{note}"
    else:
        want = f"an integer >= {minimum}{note}"
    raise InvalidParameterError(f"{name} must be {'None or ' if allow_none else ''}{want}, got {value!r}")


def check_choice(value: Any, name: str, choices: Iterable[Any]) -> Any:
    """``value`` when it is one of ``choices`` (shown as given in the message)."""
    if isinstance(value, bool) or not isinstance(value, Hashable) or value not in choices:
        raise InvalidParameterError(f"{name} must be one of {choices!r}, got {value!r}")
    return value


def check_bool(value: Any, name: str) -> bool:
    """``value`` as a ``bool`` (``True``/``False`` or a numpy bool only)."""
    import numpy as np

    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name} must be True or False, got {value!r}")
    return bool(value)


#: kernels with a width ``gamma`` (the others refuse a gamma other than 1.0); the names
#: are those of :data:`dkrr.features.KERNELS`
WIDTH_KERNELS = ("gaussian", "matern", "laplacian", "polynomial")
#: kernels whose gamma may hold one value per input column (ARD): the shift-invariant ones
ARD_KERNELS = ("gaussian", "matern", "laplacian")


def check_gamma(gamma: Any, kernel: str, n_features: int | None = None):
    """``gamma`` of a kernel with a width: a positive finite number, or for the
    shift-invariant kernels (``gaussian``, ``matern``, ``laplacian``) one positive finite
    value per input column (ARD; a float64 array, of length ``n_features`` when given).

    The other kernels have no width: for them ``gamma`` must stay at its default 1.0
    (a value given there would silently do nothing).
    """
    import numpy as np

    if kernel in ARD_KERNELS and not isinstance(gamma, (str, bytes)) and np.ndim(gamma) > 0:
        try:
            arr = np.array(gamma, dtype=np.float64)
        except (TypeError, ValueError):
            arr = None
        if arr is None or arr.ndim != 1 or arr.size == 0 or not np.isfinite(arr).all() or (arr <= 0).any():
            raise InvalidParameterError(
                f"gamma must be a positive finite number, or one positive finite value per input column "
                f"(ARD), got {gamma!r}"
            )
        if n_features is not None and arr.size != n_features:
            raise InvalidParameterError(
                f"gamma holds {arr.size} values (one per input column, ARD), but X has {n_features} columns"
            )
        return arr
    if kernel in WIDTH_KERNELS:
        if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not math.isfinite(gamma) or gamma <= 0:
            ard = " (or, for the shift-invariant kernels, one per input column)" if kernel in ARD_KERNELS else ""
            raise InvalidParameterError(f"gamma must be a positive finite number{ard}, got {gamma!r}")
        return float(gamma)
    if np.ndim(gamma) or gamma != 1.0:
        raise InvalidParameterError(
            f"gamma applies only to the kernels {list(WIDTH_KERNELS)}; kernel={kernel!r} has no width, so "
            f"leave gamma at its default (got {gamma!r})"
        )
    return 1.0


#: the kernel parameters (beyond gamma) and the kernels that take them, with their
#: defaults (scikit-learn's: ``Matern(nu=1.5)``, ``polynomial_kernel(degree=3, coef0=1)``)
KERNEL_PARAMS: dict[str, tuple[str, Any]] = {"nu": ("matern", 1.5), "degree": ("polynomial", 3),
                                             "coef0": ("polynomial", 1.0)}


def check_kernel_params(kernel: str, **given: Any) -> dict[str, Any]:
    """The parameters of ``kernel`` among :data:`KERNEL_PARAMS` (``None``: not given, the
    default), checked: ``nu`` a positive finite number (``matern``), ``degree`` a positive
    integer and ``coef0`` a finite number >= 0 (``polynomial``). One given for another
    kernel is an error. Returns only ``kernel``'s parameters, defaults filled in."""
    out: dict[str, Any] = {}
    unknown = set(given) - set(KERNEL_PARAMS)
    if unknown:
        raise InvalidParameterError(f"unknown kernel parameter(s) {sorted(unknown)}; known: {sorted(KERNEL_PARAMS)}")
    for name, (owner, default) in KERNEL_PARAMS.items():
        value = given.get(name)
        if owner != kernel:
            if value is not None:
                raise InvalidParameterError(
                    f"{name}={value!r} is a parameter of kernel={owner!r}, not of kernel={kernel!r}; drop it"
                )
            continue
        value = default if value is None else value
        if name == "degree":
            out[name] = check_int(value, "degree")
            continue
        ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
        if name == "nu" and not (ok and value > 0):
            raise InvalidParameterError(
                f"nu must be a positive finite number (0.5, 1.5 and 2.5 have closed forms; nu -> inf is "
                f"kernel='gaussian'), got {value!r}"
            )
        if name == "coef0" and not (ok and value >= 0):
            raise InvalidParameterError(
                f"coef0 must be a finite number >= 0 (the sketches append sqrt(coef0) to x), got {value!r}"
            )
        out[name] = float(value)
    return out


def check_options(
    method: str,
    accepted: Mapping[str, Any],
    given: Mapping[str, Any],
    takers: Callable[[str], list[str]] | None = None,
) -> dict[str, Any]:
    """Construction options of ``method``: its defaults ``accepted`` updated by ``given``.

    Parameters
    ----------
    method : str
        The projection method (for the message).
    accepted : mapping
        The options the method takes, with their defaults.
    given : mapping
        The options passed. Every name must be in ``accepted``.
    takers : callable, optional
        ``takers(name)`` lists the methods that do take an option ``name``; with it the
        message says where the option belongs.

    Raises
    ------
    InvalidParameterError
        An option the method does not take.
    """
    unknown = sorted(set(given) - set(accepted))
    if unknown:
        if takers is not None:
            name = unknown[0]
            raise InvalidParameterError(
                f"option {name}={given[name]!r} does not apply to method={method!r}; it is "
                f"used by method(s) {takers(name)}"
            )
        allowed = f"allowed: {sorted(accepted)}" if accepted else f"method {method!r} takes no options"
        raise InvalidParameterError(f"unknown options for method {method!r}: {unknown}; {allowed}")
    return {**accepted, **given}
