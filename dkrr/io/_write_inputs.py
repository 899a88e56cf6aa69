"""The arrays handed to :func:`~dkrr.io.write_dataset` and :func:`~dkrr.io.write_predictions`.

What the readers would refuse is refused here, before anything is written: a store that
``dkrr fit`` or ``dkrr predict`` cannot open (text, complex numbers, class codes that are
not codes) is never created. The rules are the readers' own (``check_numeric`` and
``checked_class_codes``), so the writers and the readers cannot drift apart.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import dask.array as da
import numpy as np

from ..errors import InputValidationError
from ._labels import checked_class_codes
from ._reader import check_numeric


def as_dask(arr: Any, name: str, *, order: str) -> da.Array:
    """`arr` as a dask array of integers or floats with at least one dimension.

    `order` names the function's leading arguments for the message when a path was
    passed where an array belongs (``write_dataset('data.zarr', X, y)``).
    """
    if isinstance(arr, (str, bytes, os.PathLike)):
        raise InputValidationError(
            f"{name} is the {type(arr).__name__} {os.fspath(arr)!r}, not an array; the "
            f"arguments come in the order {order}"
        )
    if not isinstance(arr, da.Array):
        kind, arr = type(arr).__name__, np.asarray(arr)
        if arr.ndim == 0:
            raise InputValidationError(f"{name} is a scalar ({kind}); expected an array")
    check_numeric(name, arr, None, fix=(
        "convert it to integers or floats (labels: y holds their codes 0..k-1 and "
        "classes= the labels)" if name == "y" else "convert it to integers or floats"))
    if isinstance(arr, da.Array):
        return arr
    return da.from_array(arr, chunks=(min(max(arr.shape[0], 1), 65536),) + arr.shape[1:])


def regular_rows(arr: da.Array, name: str) -> da.Array:
    """Make row chunks uniform (all equal but the last) and columns one chunk."""
    if any(np.isnan(c) for c in arr.shape):
        raise InputValidationError(
            f"{name} has unknown chunk sizes {arr.chunks}; call "
            f"`{name}.compute_chunk_sizes()` first"
        )
    rows = arr.chunks[0]
    regular = len(rows) <= 1 or (
        all(c == rows[0] for c in rows[:-1]) and rows[-1] <= rows[0]
    )
    new: dict[int, Any] = {}
    if not regular:
        new[0] = max(rows)
    if arr.ndim == 2 and arr.numblocks[1] != 1:
        new[1] = -1
    return arr.rechunk(new) if new else arr


def class_codes(y: da.Array | None, classes: Sequence[str], out: str) -> da.Array:
    """`y` checked to hold codes ``0 .. len(classes) - 1``, each block as it is written.

    A block outside them fails the write, which then leaves nothing at `out`.
    """
    if y is None:
        raise InputValidationError("classes= was given without y; classes name the codes in y")
    if isinstance(classes, str):
        raise InputValidationError(f"classes= is the str {classes!r}; pass a list of labels")
    if not classes or len(set(map(str, classes))) != len(classes):
        raise InputValidationError(
            f"classes= must name each class once; got {list(classes)!r}"
        )
    return checked_class_codes(y, [str(c) for c in classes], out, written=True)
