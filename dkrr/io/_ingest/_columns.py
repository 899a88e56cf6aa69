"""Choosing the target column(s) of a CSV or ``.npy`` input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import FeatureMismatchError, InputValidationError, InvalidParameterError

_MAX_NAMES_SHOWN = 20


def names_hint(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:_MAX_NAMES_SHOWN])
    return shown + (", ..." if len(names) > _MAX_NAMES_SHOWN else "")


def resolve_targets(
    target: Any, names: list[str], n_cols: int
) -> tuple[list[int], bool]:
    """Column indices of the target(s) and whether y is 1-D."""
    scalar = target is None or isinstance(target, (str, int, np.integer))
    requested = [n_cols - 1] if target is None else ([target] if scalar else list(target))
    if not requested:
        raise InvalidParameterError("target is an empty list; name at least one column")
    cols: list[int] = []
    for t in requested:
        if isinstance(t, str):
            matches = [j for j, n in enumerate(names) if n == t]
            if len(matches) > 1:
                raise InputValidationError(
                    f"target column name {t!r} appears {len(matches)} times in the "
                    f"header (columns {matches}); give its 0-based index instead"
                )
            if matches:
                cols.append(matches[0])
                continue
            try:
                t = int(t.strip())
            except ValueError:
                raise InputValidationError(
                    f"target column {t!r} not found; the columns are: "
                    f"{names_hint(names)} (or give a 0-based column index)"
                ) from None
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise InvalidParameterError(
                f"target must be a column name or a 0-based index, got {t!r}"
            )
        j = int(t)
        if not -n_cols <= j < n_cols:
            raise InputValidationError(
                f"target column index {j} is out of range: the input has {n_cols} "
                "columns (0-based indices 0.."
                f"{n_cols - 1})"
            )
        cols.append(j % n_cols)
    if len(set(cols)) != len(cols):
        raise InvalidParameterError(f"target lists a column twice: {requested!r}")
    if len(cols) >= n_cols:
        raise InputValidationError(
            f"every column ({n_cols}) is a target; at least one feature column is needed"
        )
    return cols, scalar


def split_columns(
    src, target: Any, names: list[str], n_cols: int, n_features: int | None
) -> tuple[list[int], list[int], bool]:
    """``(target_cols, feature_cols, scalar)`` of a table, checking ``n_features`` when given."""
    target_cols, scalar = resolve_targets(target, names, n_cols)
    feature_cols = [j for j in range(n_cols) if j not in target_cols]
    if n_features is not None and len(feature_cols) != n_features:
        raise FeatureMismatchError(
            f"{src} has {len(feature_cols)} feature columns but n_features={n_features} was given"
        )
    return target_cols, feature_cols, scalar
