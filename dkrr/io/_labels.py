"""Class codes of a store: ``y`` holds integer codes, the ``classes`` attribute their labels.

Labels are the contract, codes are storage: code ``i`` of a store means ``classes[i]`` of
that store, and two stores ingested separately may number the same label differently.
:func:`checked_class_codes` is applied by :func:`~dkrr.io.open_dataset` to every store
with a ``classes`` attribute: the attribute must be a list of distinct strings, ``y`` must
hold integers, and a code outside ``0 .. len(classes) - 1`` is a
:class:`~dkrr.errors.StoreError` naming the array, the store and the rows, raised by the
task that reads the block (no extra pass over ``y``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np

from ..errors import InputValidationError, StoreError

__all__ = ["checked_class_codes", "continuous_labels", "store_classes"]


def continuous_labels(classes, column: str, rows: int | None = None, fix: str | None = None) -> str | None:
    """Why `classes` (the labels of a target column, as text) are a continuous target
    rather than classes, or None: every label a finite number and one of them not an
    integer (scikit-learn's "continuous", which its classifiers and dkrr's refuse for a
    numeric y). ``--labels`` on a measured column made one class per distinct value.
    `fix` replaces the advice (leave out --labels) where the labels came otherwise: a
    Parquet column typed as text."""
    values = []
    for c in classes:
        try:
            v = float(c)
        except (TypeError, ValueError):
            return None
        if not np.isfinite(v):
            return None
        values.append(v)
    odd = [c for c, v in zip(classes, values) if v != int(v)]
    if not odd:
        return None
    of_rows = "" if rows is None else f" in {rows:,} rows"
    return (f"the target column {column} holds continuous numbers, not class labels: "
            f"{len(values):,} distinct values{of_rows}, non-integer ones among them (e.g. {odd[0]!r}); "
            "a class label is text or an integer: " + (fix or "leave out --labels (target_type='labels') to "
                                                       "read it as a number for a regression") +
            ", or bin it into classes first")


def store_classes(attrs: dict, path: str | Path) -> list[str] | None:
    """The ``classes`` attribute of a store, checked: None, or a list of distinct strings."""
    classes = attrs.get("classes")
    if classes is None:
        return None
    if (not isinstance(classes, list) or not classes
            or not all(isinstance(c, str) for c in classes) or len(set(classes)) != len(classes)):
        raise StoreError(
            f"the 'classes' attribute of {path} must be a non-empty list of distinct strings "
            f"(the labels of the codes in y), got {str(classes)[:200]}; the metadata is "
            "corrupted: re-create the store with `dkrr ingest`"
        )
    return list(classes)


def _check_codes_block(block: np.ndarray, n_classes: int, path: str, written: bool = False,
                       block_info=None) -> np.ndarray:
    flat = block.reshape(block.shape[0], -1)
    bad = ((flat < 0) | (flat >= n_classes)).any(axis=1)
    if bad.any():
        rows = np.nonzero(bad)[0]
        offset = block_info[0]["array-location"][0][0] if block_info else 0
        first = int(rows[0])
        vals = flat[first]
        code = int(vals[(vals < 0) | (vals >= n_classes)][0])
        where = (f"rows {offset} to {offset + block.shape[0] - 1}, first in row "
                 f"{offset + first} (code {code})")
        if written:  # write_dataset: the write fails and leaves nothing at `path`
            raise InputValidationError(
                f"y holds {rows.size} class code(s) outside 0..{n_classes - 1} in {where}; "
                f"classes= names {n_classes} labels (y == i means classes[i]), so nothing "
                f"was written to {path}"
            )
        raise StoreError(
            f"array 'y' of {path} holds {rows.size} class code(s) outside 0..{n_classes - 1} in "
            f"{where}; its 'classes' "
            f"attribute names {n_classes} labels, so the store is corrupted: re-create it with "
            "`dkrr ingest` or restore it from a copy"
        )
    return block


def checked_class_codes(y: da.Array, classes: list[str], path: str | Path, *,
                        written: bool = False) -> da.Array:
    """``y`` of a store with ``classes``: integers, each block checked when it is read.

    ``written=True``: `y` is about to be written to `path` by
    :func:`~dkrr.io.write_dataset`, and the errors say so.

    Raises
    ------
    StoreError
        At once if ``y`` is not an integer array; when a block is computed, if it holds a
        code outside ``0 .. len(classes) - 1`` (naming the rows and the first bad code).
        :class:`~dkrr.errors.InputValidationError` instead when ``written``.
    """
    dtype: Any = np.dtype(y.dtype)
    if dtype.kind not in "iu":
        if written:
            raise InputValidationError(
                f"y has dtype {dtype} but classes= was given, so y must hold integer class "
                "codes (y == i means classes[i]); pass y.astype(int) if its values are codes"
            )
        raise StoreError(
            f"array 'y' of {path} has dtype {dtype} but the store has a 'classes' attribute, "
            "so y must hold integer class codes (y == i means classes[i]); the store is "
            "corrupted: re-create it with `dkrr ingest`"
        )
    # the meta: dask's array query planning needs it to slice the result
    return y.map_blocks(_check_codes_block, len(classes), str(path), written, dtype=y.dtype,
                        meta=np.empty((0,) * y.ndim, dtype=y.dtype))
