"""A 2-D numeric ``.npy`` array into a dkrr store: memory-mapped, copied in row chunks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputValidationError, InvalidParameterError
from ._columns import like_positions, no_target, split_columns
from ._text import sniff
from ._writer import (
    StoreWriter,
    call_progress,
    cast_checked,
    check_row_width,
    chunk_rows_for,
    nan_rows,
)

_NPY_MAGIC = b"\x93NUMPY"


def _not_npy(src: Path) -> InputValidationError:
    with open(src, "rb") as fh:
        head = fh.read(512)
    what = sniff(src)
    if what is None and head and all(32 <= b < 127 or b in b"\t\r\n" for b in head):
        what = "text: pass format='csv' (or format='libsvm')"
    return InputValidationError(
        f"{src} is not a .npy file (it does not start with the .npy magic string "
        f"\\x93NUMPY){'; it looks like ' + what if what else ''}"
    )


def read_npy(src: Path, tmp: Path, *, target, dtype, y_dtype, chunk_rows, n_features,
             missing, target_type, progress, features=None, like=None, like_file=None,
             **_) -> dict[str, Any]:
    if target_type == "labels":
        raise InvalidParameterError(
            "target_type='labels' (--labels) is for CSV and Parquet input; a .npy target is numeric (a "
            "classifier fitted on the store treats its values as classes)"
        )
    with open(src, "rb") as fh:
        if fh.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise _not_npy(src)
    try:
        arr = np.load(src, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise InputValidationError(f"cannot read {src} as a .npy array: {exc}") from exc
    if not isinstance(arr, np.ndarray):
        raise InputValidationError(f"{src} is not a single .npy array")
    if arr.ndim != 2:
        raise InputValidationError(
            f"{src} holds an array of shape {arr.shape}; ingest needs a 2-D matrix "
            "(n_samples, n_columns) with the target as one of its columns"
        )
    if arr.dtype.kind not in "biuf":
        raise InputValidationError(
            f"{src} has dtype {arr.dtype}, which is not numeric"
        )
    n_rows, n_cols = arr.shape
    if n_rows == 0:
        raise InputValidationError(f"{src} has no rows")
    if n_cols == 0:  # else "index -1 is out of range ... (0-based indices 0..-1)"
        raise InputValidationError(f"{src} holds an array of shape {arr.shape}: it has no columns")
    names = [f"column_{j}" for j in range(n_cols)]
    features = like_positions(src, n_cols, features, no_target(target), like_file, like)
    target_cols, feature_cols, scalar = split_columns(src, target, names, n_cols, n_features,
                                                      features, like)
    x_dtype = np.dtype(dtype)
    check_row_width(len(feature_cols), x_dtype,
                    f"{src} holds a {n_rows} x {n_cols} {arr.dtype} array", n_rows,
                    error=InputValidationError)
    rows = chunk_rows_for(max(n_cols * arr.itemsize, len(feature_cols) * x_dtype.itemsize),
                          chunk_rows)
    writer = StoreWriter(
        tmp, n_features=len(feature_cols), y_tail=() if scalar else (len(target_cols),),
        x_dtype=x_dtype, y_dtype=np.dtype(y_dtype), chunk_rows=rows, n_rows=n_rows,
    )
    total = os.path.getsize(src)
    header = total - arr.nbytes
    row_bytes = arr.itemsize * n_cols
    dropped = 0
    for start in range(0, n_rows, rows):
        stop = min(start + rows, n_rows)
        block = np.asarray(arr[start:stop])
        Xb = block[:, feature_cols]
        ycols = block[:, target_cols[0]] if scalar else block[:, target_cols]
        index = np.arange(start, stop)
        if missing == "drop" and block.dtype.kind == "f":
            drop = nan_rows(Xb, ycols)
            if drop.any():
                dropped += int(drop.sum())
                Xb, ycols, index = Xb[~drop], ycols[~drop], index[~drop]

        def where(i: int, j: int, _index=index) -> str:
            return f"row {_index[i]} (0-based), column {j}"

        Xb = cast_checked(Xb, x_dtype, where, feature_cols)
        yb = cast_checked(ycols, np.dtype(y_dtype), where, target_cols, "y_dtype")
        writer.append(Xb, yb)
        del block, Xb, yb
        call_progress(progress, writer.n, header + stop * row_bytes, total)
    del arr
    if writer.n == 0:
        raise InputValidationError(
            f"{src}: every one of its {dropped} rows has a NaN; nothing is left to "
            "ingest with missing='drop'"
        )
    feature_names = [names[j] for j in feature_cols]
    target_names = [names[j] for j in target_cols]
    return writer.finish("npy", src, feature_names, target_names, dropped=dropped,
                         read_as={"target_columns": list(target_cols), "n_columns": n_cols,
                                  "feature_columns": list(feature_cols)}, like=like)
