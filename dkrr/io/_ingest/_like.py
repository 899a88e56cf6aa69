"""Reading a file with the layout of an existing store (``ingest(..., like=TRAIN_STORE)``).

A test file must become a store whose columns mean what the training store's columns
mean. Every store written by ingest records how its file was read (the group attributes
``format``, ``n_features``, ``index_base``, ``delimiter``, ``header``,
``target_columns``, ``feature_columns``, ``n_columns`` and ``classes``, next to the dtypes of ``X``
and ``y``; Parquet stores are followed by their column names);
:func:`read_layout` reads them back and :func:`take` lets each of them replace an
option left at its default. An option given with a different value is an error, not a
silent choice between the two. Whether a CSV has a header is decided per file (a test
file may lack the training file's header); when both have one, the store's columns are
found by name in this file's header (``Layout.columns``; ``_csv._by_name``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ...errors import InputValidationError, InvalidParameterError
from ._columns import no_target

#: a recorded value the store does not have (an older store, or another format)
UNKNOWN: Any = object()


@dataclass(frozen=True)
class Layout:
    """How the file of a store was read, as far as the store records it."""

    path: str
    format: str | None
    n_features: int
    dtype: np.dtype
    y_dtype: Any
    index_base: Any
    delimiter: Any
    target: Any
    target_type: str
    classes: list[str] | None
    columns: list[str] | None
    features: Any = UNKNOWN
    feature_names: Any = UNKNOWN
    target_names: Any = UNKNOWN
    #: the store's file's column count (attribute ``n_columns``; None in older stores)
    n_columns: int | None = None


def read_layout(like: str | os.PathLike, storage_options: dict | None = None) -> Layout:
    """The layout recorded in the store at `like` (a dkrr dataset with ``X`` and ``y``, or
    ``X`` alone; a URL is opened with `storage_options`).

    Raises StoreNotFoundError / StoreError / InputValidationError as
    :func:`dkrr.io.open_dataset` does for a store that is missing or not a dataset.
    """
    from .._store import open_dataset

    ds = open_dataset(like, require_y=False, storage_options=storage_options)
    attrs = ds.attrs
    classes = attrs.get("classes")
    fmt = attrs.get("format")
    targets = attrs.get("target_columns")
    if ds.y is None:  # a store read without a target (target=[]): so is this file
        target, targets = [], []
    elif targets is None:
        target = UNKNOWN
    else:
        target = int(targets[0]) if ds.y.ndim == 1 else [int(t) for t in targets]
    columns = None
    if attrs.get("header") and targets is not None:
        if attrs.get("feature_columns") is not None:
            # each used column's name at its place in the file's header (None: a column the store
            # did not use); the features may be a subset in another order (features=)
            placed = dict(zip(targets, attrs.get("target_names", []), strict=False))
            placed.update(zip(attrs["feature_columns"], attrs.get("feature_names", []), strict=False))
            columns = [placed.get(j) for j in range(max(placed) + 1)] if placed else None
        else:  # an older store: its features were every column but the targets, in order
            features = iter(attrs.get("feature_names", []))
            names = dict(zip(targets, attrs.get("target_names", []), strict=False))
            n_cols = ds.X.shape[1] + len(targets)
            columns = [names[j] if j in names else next(features, None) for j in range(n_cols)]
            if None in columns:
                columns = None
    return Layout(
        # the file's columns (recorded since the stores of --no-target; unused trailing ones count)
        n_columns=None if attrs.get("n_columns") is None else int(attrs["n_columns"]),
        path=ds.path,
        format=fmt,
        n_features=int(ds.X.shape[1]),
        dtype=np.dtype(ds.X.dtype),
        y_dtype=np.dtype(ds.y.dtype) if ds.y is not None and ds.y.dtype.kind == "f" else UNKNOWN,
        index_base=attrs.get("index_base", UNKNOWN),
        delimiter=attrs.get("delimiter", UNKNOWN),
        target=target,
        target_type="labels" if classes is not None else "numeric",
        classes=None if classes is None else [str(c) for c in classes],
        columns=columns,
        features=(UNKNOWN if attrs.get("feature_columns") is None
                  else [int(j) for j in attrs["feature_columns"]]),
        feature_names=[str(n) for n in attrs.get("feature_names", [])] or UNKNOWN,
        target_names=([] if ds.y is None else UNKNOWN if not attrs.get("target_names") else
                      str(attrs["target_names"][0]) if ds.y.ndim == 1
                      else [str(n) for n in attrs["target_names"]]),
    )


class Followed(NamedTuple):
    """The options of :func:`~._api.ingest` as :func:`follow` leaves them."""

    dtype: Any
    y_dtype: Any
    n_features: Any
    index_base: Any
    delimiter: Any
    target: Any
    features: Any
    target_type: Any
    classes: Any = None
    like_file: tuple | None = None


def follow(layout: Layout, fmt: str, *, dtype, y_dtype, n_features, index_base, delimiter,
           target, features, target_type) -> Followed:
    """The options of :func:`~._api.ingest` once the `layout` of its ``like`` store has
    replaced those left at their default, with the store's classes and, where the columns
    go by position, `like_file`: ``(n_columns, target positions)`` of the store's file, for
    :func:`~._columns.like_positions` (None where they go by name).

    Returns a :class:`Followed` (a named tuple, in the order of ingest's options).
    """
    classes, like_file = None, None
    dtype = take("dtype", dtype, "float32", layout.dtype.name, layout)
    y_dtype = take("y_dtype", y_dtype, "float64", getattr(layout.y_dtype, "name", UNKNOWN), layout)
    n_features = take("n_features", n_features, None, layout.n_features, layout)
    tables = {"csv", "npy", "parquet"}
    if fmt == layout.format:
        index_base = take("index_base", index_base, "auto", layout.index_base, layout)
        if fmt == "libsvm" and index_base == "auto":
            raise InputValidationError(
                f"like={layout.path} does not record the LIBSVM index base it was "
                "read with (it was ingested by an older dkrr); pass index_base=0 "
                "or 1 (--index-base)"
            )
        delimiter = take("delimiter", delimiter, ",", layout.delimiter, layout)
        by_name = fmt == "parquet"  # by name: the files of a directory may order columns
    elif {fmt, layout.format} <= tables:  # tables of another format
        # the columns by name (a CSV without a header fails on the names); else by position:
        # a .npy file or store, or a header-less CSV store
        by_name = {fmt, layout.format} == {"csv", "parquet"} and bool(
            layout.format == "parquet" or layout.columns)
    else:
        return Followed(dtype, y_dtype, n_features, index_base, delimiter, target, features,
                        target_type)
    if fmt == "libsvm":
        target = [] if no_target(target) else take("target", target, None, layout.target, layout)
        return Followed(dtype, y_dtype, n_features, index_base, delimiter, target, features,
                        target_type)
    recorded_target = layout.target_names if by_name else layout.target
    features = take("features", features, None,
                    layout.feature_names if by_name else layout.features, layout)
    if no_target(target) or no_target(recorded_target) and target is None:
        target = []
    else:
        target = take("target", target, None, recorded_target, layout)
        if fmt != "npy":  # a .npy target is numeric
            target_type = take("target_type", target_type, "auto", layout.target_type, layout)
            classes = layout.classes
    if not by_name and layout.target is not UNKNOWN:
        t = layout.target
        like_file = (layout.n_columns, [t] if isinstance(t, int) else list(t))
    return Followed(dtype, y_dtype, n_features, index_base, delimiter, target, features,
                    target_type, classes, like_file)


def take(name: str, given: Any, default: Any, recorded: Any, layout: Layout) -> Any:
    """The value of option `name`: the store's when `given` is the default (or equal)."""
    if recorded is UNKNOWN:
        return given
    same = given == recorded
    if name in ("dtype", "y_dtype"):
        same = np.dtype(given) == np.dtype(recorded)
    if same or _is_default(given, default):
        return recorded
    raise InvalidParameterError(
        f"{name}={given!r} contradicts like={layout.path}: that store was ingested with "
        f"{name}={recorded!r}; leave {name} out to read this file the same way"
    )


def _is_default(given: Any, default: Any) -> bool:
    return given is default or (type(given) is type(default) and given == default)
