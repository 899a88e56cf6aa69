"""Choosing the target and feature columns of a CSV, ``.npy`` or Parquet input."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import FeatureMismatchError, InputValidationError, InvalidParameterError

_MAX_NAMES_SHOWN = 20


def names_hint(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:_MAX_NAMES_SHOWN])
    return shown + (", ..." if len(names) > _MAX_NAMES_SHOWN else "")


def _named(name: str, names: list[str], what: str) -> int | None:
    """The index of the column called `name` (None: no such column); a name that several
    columns share is an error (`what`: "target" or "feature", for the message)."""
    matches = [j for j, n in enumerate(names) if n == name]
    if len(matches) > 1:
        raise InputValidationError(
            f"{what} column name {name!r} appears {len(matches)} times in the header "
            f"(columns {matches}); give its 0-based index instead"
        )
    return matches[0] if matches else None


def index_text(column: Any) -> int | None:
    """The 0-based index a column given as text names where no column has that name (the
    CLI's ``--features 0,1``, ``--target -1``), or None for a name that is no integer."""
    if isinstance(column, str):
        try:
            return int(column.strip())
        except ValueError:
            return None
    return None


def no_target(target: Any) -> bool:
    """Whether `target` asks for no target: an empty list (or tuple)."""
    return isinstance(target, (list, tuple)) and len(target) == 0


def like_positions(src, n_cols: int, features: Any, no_y: bool, like_file, like) -> Any:
    """The feature positions of a file read by position like a store: `like_file` is
    ``(columns, targets)``, the store's file's column count (None: not recorded, by older
    stores) and its target positions; None where the columns go by name.

    This file has the store's file's columns, less the targets when it is read without
    one (`no_y`): another count is refused (its columns would be taken from the wrong
    places, without a word), and without a target each feature position moves left past
    the targets before it."""
    if like_file is None:
        return features
    width, targets = like_file
    if width is not None:
        expected = width - len(targets) if no_y else width
        if n_cols != expected:
            hint = ("a file to predict without its target column(s): pass target=[] (--no-target)"
                    if not no_y and n_cols == width - len(targets) else
                    "a file that holds the target column(s) too: leave target=[] (--no-target) out"
                    if no_y and n_cols == width else
                    "give the file the store's columns, or choose them with features= (--features)")
            raise FeatureMismatchError(
                f"{src} has {n_cols} columns, but like={like} was read from a file of {width} columns "
                f"({width - len(targets)} feature(s) and {len(targets)} target(s)), whose places this file's "
                "columns are taken from" + (" less the target(s)" if no_y else "") + f", so it needs {expected}: "
                f"{hint}")
    if not no_y or features is None:
        return features
    return [int(j) - sum(t < int(j) for t in targets) for j in features]


def resolve_targets(
    target: Any, names: list[str], n_cols: int
) -> tuple[list[int], bool]:
    """Column indices of the target(s) and whether y is 1-D. An empty list of targets
    (``target=[]``, the CLI's ``--no-target``) reads no target: no column, y not 1-D."""
    scalar = target is None or isinstance(target, (str, int, np.integer))
    requested = [n_cols - 1] if target is None else ([target] if scalar else list(target))
    if not requested:
        return [], False
    cols: list[int] = []
    for t in requested:
        if isinstance(t, str):
            j = _named(t, names, "target")
            if j is not None:
                cols.append(j)
                continue
            if (at := index_text(t)) is None:
                raise InputValidationError(
                    f"target column {t!r} not found; the columns are: "
                    f"{names_hint(names)} (or give a 0-based column index)"
                )
            t = at
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


def select_features(src, features: Any, names: list[str], target_cols: list[int]) -> list[int]:
    """Column indices of the features: those named (or 0-based indices) in `features`, in
    that order, or every column that is not a target when `features` is None."""
    if features is None:
        return [j for j in range(len(names)) if j not in target_cols]
    if isinstance(features, (str, int, np.integer)):
        features = [features]
    cols: list[int] = []
    for f in features:
        j = _named(f, names, "feature") if isinstance(f, str) else None
        if isinstance(f, str) and j is None:  # else, as for a target, an index written as text (the CLI's)
            if (at := index_text(f)) is None:
                raise InputValidationError(
                    f"feature column {f!r} not found in {src}; the columns are: "
                    f"{names_hint(names)} (or give a 0-based column index)"
                )
            f = at
        if j is None:
            if isinstance(f, bool) or not isinstance(f, (int, np.integer)):
                raise InvalidParameterError(f"features must be column names or 0-based indices, got {f!r}")
            if not -len(names) <= f < len(names):
                raise InputValidationError(
                    f"feature column index {f} is out of range: {src} has {len(names)} "
                    f"columns (0-based indices 0..{len(names) - 1})"
                )
            j = int(f) % len(names)
        if j in target_cols:
            raise InvalidParameterError(
                f"column {names[j]!r} is both a feature and a target; leave it out of features"
            )
        if j in cols:
            raise InvalidParameterError(f"features lists column {names[j]!r} twice")
        cols.append(j)
    if not cols:
        raise InvalidParameterError("features is an empty list; name at least one column")
    return cols


def _refuse_duplicate_names(src, names: list[str], used: list[int]) -> None:
    """Columns are found by name (``like``, a model's feature names at predict): a name
    the header gives to two columns read would let them trade places without a word (a
    CSV header, or a Parquet schema, which may name two columns alike; a header-less
    file's names are distinct)."""
    seen: dict[str, list[int]] = {}
    for j, name in enumerate(names):
        seen.setdefault(name, []).append(j)
    twice = [(n, js) for n, js in seen.items() if len(js) > 1 and set(js) & set(used)]
    if twice:
        name, js = twice[0]
        raise InputValidationError(
            f"{src}: its header (or schema) names {len(js)} columns {name!r} (0-based columns {js}); columns are "
            "found by name (like=, a model's feature names), so each column read needs a name of its own: "
            "rename them, or leave all but one out (features=)")


def split_columns(
    src, target: Any, names: list[str], n_cols: int, n_features: int | None,
    features: Any = None, like: Any = None,
) -> tuple[list[int], list[int], bool]:
    """``(target_cols, feature_cols, scalar)`` of a table, checking ``n_features`` when given
    (the ``like`` store's, when one is given: the error then names that store)."""
    target_cols, scalar = resolve_targets(target, names, n_cols)
    feature_cols = select_features(src, features, names, target_cols)
    _refuse_duplicate_names(src, names, [*feature_cols, *target_cols])
    if n_features is not None and len(feature_cols) != n_features:
        expected = (f"n_features={n_features} was given" if like is None else
                    f"like={like} has {n_features} (its X's columns, which this file's features must match)")
        raise FeatureMismatchError(f"{src} has {len(feature_cols)} feature columns but {expected}")
    return target_cols, feature_cols, scalar
