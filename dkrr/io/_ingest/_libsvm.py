"""LIBSVM/svmlight sparse text into a dkrr store (dense ``X``), in two streamed passes.

The first pass counts rows and finds the smallest and largest feature index (needed for
the number of features and for ``index_base="auto"``); an index that would make one
dense row of ``X`` too large is refused there, as soon as it is seen. The second pass
writes dense blocks into pre-sized arrays, with rows per chunk from the byte budget.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FeatureMismatchError, InputValidationError, InvalidParameterError
from ._columns import no_target
from ._text import LineReader, to_float
from ._writer import (
    StoreWriter,
    call_progress,
    cast_checked,
    check_row_width,
    chunk_rows_for,
    max_columns,
)

_MAX_INDEX = int(np.iinfo(np.int64).max)


def _parse_slow(lines, numbers):
    labels: list[float] = []
    rows: list[int] = []
    idx: list[int] = []
    vals: list[float] = []
    for i, line in enumerate(lines):
        parts = line.split("#", 1)[0].split()
        label = to_float(parts[0]) if parts else None
        if label is None:
            shown = parts[0] if parts else line.strip()
            if "," in shown and len(parts) > 1 and all(":" in t for t in parts[1:]):  # "1,3 2:0.5 ..."
                hint = (" (comma-separated labels are LIBSVM's multilabel form, which dkrr does not read: "
                        "it fits one label or one numeric target per row)")
            else:
                hint = " (it looks like CSV: pass format='csv', --format csv)" if "," in shown else ""
            raise InputValidationError(
                f"line {numbers[i]}: label {shown!r} is not a number; a LIBSVM line is "
                f"'<label> <index>:<value> ...'{hint}"
            )
        labels.append(label)
        for tok in parts[1:]:
            key, sep, value = tok.partition(":")
            if key == "qid" and sep:
                continue
            fval = to_float(value) if sep else None
            try:
                ikey = int(key) if fval is not None else None
            except ValueError:
                ikey = None
            if ikey is None:
                raise InputValidationError(
                    f"line {numbers[i]}: cannot parse {tok!r} as <index>:<value>; "
                    "for dense whitespace-separated columns use format='csv' with "
                    "delimiter=None (--format csv --delimiter whitespace)"
                )
            if ikey < 0:
                raise InputValidationError(
                    f"line {numbers[i]}: feature index {ikey} is negative"
                )
            if ikey > _MAX_INDEX:
                raise InputValidationError(
                    f"line {numbers[i]}: feature index {ikey} is beyond the 64-bit "
                    "integer range; a LIBSVM index is a column of X, which dkrr stores "
                    "dense (check the file for a corrupted or misread index)"
                )
            rows.append(i)
            idx.append(ikey)
            vals.append(fval)
    return (
        np.array(labels, dtype=np.float64),
        np.array(rows, dtype=np.int64),
        np.array(idx, dtype=np.int64),
        np.array(vals, dtype=np.float64),
    )


def parse_chunk(lines, numbers, values=True):
    """Labels (m,), row of each entry, feature index and value (nnz,) for a chunk.

    With ``values=False`` (first pass) only the labels and indices are converted; the
    values come back as None.
    """
    labels: list[str] = []
    counts: list[int] = []
    pairs: list[str] = []
    for line in lines:
        if "#" in line:
            line = line.split("#", 1)[0]
        parts = line.split()
        if not parts:
            return _parse_slow(lines, numbers)
        labels.append(parts[0])
        counts.append(len(parts) - 1)
        pairs.extend(parts[1:])
    tokens = " ".join(pairs).replace(":", " ").split()
    if len(tokens) != 2 * len(pairs):
        return _parse_slow(lines, numbers)
    vals = None
    try:
        idx = np.array(tokens[0::2]).astype(np.int64) if tokens else np.empty(0, np.int64)
        y = np.array(labels).astype(np.float64)
        if values:
            vals = np.array(tokens[1::2]).astype(np.float64) if tokens else np.empty(0)
    except (ValueError, OverflowError):
        return _parse_slow(lines, numbers)
    if idx.size and idx.min() < 0:
        return _parse_slow(lines, numbers)
    rows = np.repeat(np.arange(len(lines), dtype=np.int64), counts)
    return y, rows, idx, vals


def _drop_nan_rows(labels, rows, idx, vals, numbers):
    """Leave out the rows whose label or any value is NaN; returns the rest and the count."""
    bad = np.isnan(labels)
    bad[rows[np.isnan(vals)]] = True
    if not bad.any():
        return labels, rows, idx, vals, numbers, 0
    keep = ~bad[rows]
    new_row = np.cumsum(~bad) - 1
    numbers = [n for n, b in zip(numbers, bad, strict=True) if not b]
    return labels[~bad], new_row[rows[keep]], idx[keep], vals[keep], numbers, int(bad.sum())


def index_base_of(src: Path, index_base, lo: int | None, hi: int | None,
                  n_features: int | None, like=None) -> tuple[int, bool]:
    """The index base to read a file with, and whether "auto" chose it, given the
    file's smallest and largest feature index.

    "auto": index 0 present -> 0. Otherwise 1 (the LIBSVM convention) when the two
    readings differ at most by a leading column that is never used: no `n_features`,
    no entries, or a largest index equal to `n_features` (zero-based would need one
    column more). With `n_features` larger than the largest index both readings fit
    and differ by a shift of every column: that guess is refused (``like``: the table store
    whose X gave `n_features`, which records no index base; the message names it).
    """
    if index_base != "auto":
        if index_base == 1 and lo == 0:
            raise InputValidationError(
                f"{src} has feature index 0 but index_base=1 (one-based); pass "
                "index_base=0 (--index-base 0)"
            )
        return int(index_base), False
    if lo == 0:
        return 0, True
    if n_features is None or hi is None or hi >= n_features:
        return 1, True
    # a table's store as like (a LIBSVM store's base is taken) records no base to read it with
    width = f"n_features={n_features}" if like is None else f"the {n_features} columns of like={like}"
    remedy = ("so the index base cannot be guessed: pass index_base=1 or 0 (--index-base 1 or 0), or "
              "like=TRAIN_STORE (--like) to read it as the training file was read" if like is None else
              "and that store was not ingested from a LIBSVM file, so it records no index base: pass "
              "index_base=1 or 0 (--index-base 1 or 0)")
    raise InputValidationError(
        f"{src} never uses feature index 0 and its largest index, {hi}, fits {width} both one-based "
        f"and zero-based (which would shift every column by one), {remedy}"
    )


def read_libsvm(src: Path, tmp: Path, *, target, dtype, y_dtype, chunk_rows, n_features,
                index_base, missing, target_type, progress, like=None,
                **_) -> dict[str, Any]:
    no_y = no_target(target)  # target=[]: the labels are not stored (a file to predict; still parsed)
    if target is not None and not no_y:
        raise InvalidParameterError(
            "a LIBSVM file has its label first on each line; target cannot be chosen "
            f"(got target={target!r}; target=[] reads no target, leaving the labels out)"
        )
    if target_type == "labels":
        raise InvalidParameterError(
            "target_type='labels' (--labels) is for CSV and Parquet input; LIBSVM labels are numbers (a "
            "classifier fitted on the store treats them as classes)"
        )
    x_dtype = np.dtype(dtype)
    size = os.path.getsize(src)
    total = 2 * size
    # Pass 1: rows, index range and line lengths.
    n_rows, chars, lo, hi = 0, 0, None, None
    reader = LineReader(src, "LIBSVM", skip_comments=True)
    try:
        while True:
            lines, numbers = reader.read(chunk_rows)
            if not lines:
                break
            _, rows, idx, _ = parse_chunk(lines, numbers, values=False)
            n_rows += len(lines)
            chars += sum(map(len, lines))
            if idx.size:
                lo = int(idx.min()) if lo is None else min(lo, int(idx.min()))
                k = int(np.argmax(idx))
                if hi is None or idx[k] > hi:
                    hi = int(idx[k])
                    low = 0 if index_base == 0 or (index_base == "auto" and lo == 0) else 1
                    if hi - low + 1 > max_columns(x_dtype):
                        check_row_width(
                            hi - low + 1, x_dtype,
                            f"{src}, line {numbers[rows[k]]}: feature index {hi}", n_rows,
                            error=InputValidationError,
                        )
            call_progress(progress, 0, reader.bytes_read(), total)
    finally:
        reader.close()
    if n_rows == 0:
        raise InputValidationError(f"{src} has no data rows")
    offset, guessed = index_base_of(src, index_base, lo, hi, n_features, like)
    needed = 0 if hi is None else hi - offset + 1
    if n_features is None:
        if needed == 0:
            raise InputValidationError(
                f"{src} has no feature entries; pass n_features to set the width"
            )
        d = needed
    else:
        if needed > n_features:
            raise FeatureMismatchError(
                f"{src} has feature index {hi} ({'zero' if offset == 0 else 'one'}-based), "
                f"which needs n_features >= {needed}, but n_features={n_features}"
            )
        d = int(n_features)
    # Pass 2: dense blocks into pre-sized arrays.
    rows_per_chunk = chunk_rows_for(max(d * x_dtype.itemsize, chars // n_rows), chunk_rows)
    writer = StoreWriter(
        tmp, n_features=d, y_tail=(0,) if no_y else (), x_dtype=x_dtype, y_dtype=np.dtype(y_dtype),
        chunk_rows=rows_per_chunk, n_rows=n_rows,
    )
    dropped = 0
    reader = LineReader(src, "LIBSVM", skip_comments=True)
    try:
        while True:
            lines, numbers = reader.read(rows_per_chunk)
            if not lines:
                break
            labels, rows, idx, vals = parse_chunk(lines, numbers)
            if no_y:  # not read: a NaN label neither drops its row nor is an error
                labels = np.zeros(len(labels))
            if missing == "drop":
                labels, rows, idx, vals, numbers, k = _drop_nan_rows(
                    labels, rows, idx, vals, numbers
                )
                dropped += k
            cols = idx - offset
            keys = rows * d + cols
            if np.unique(keys).size != keys.size:
                order = np.sort(keys)
                dup = order[1:][order[1:] == order[:-1]][0]
                raise InputValidationError(
                    f"line {numbers[dup // d]}: feature index {dup % d + offset} "
                    "appears twice; indices must be unique"
                )

            def where(i: int, j: int, _numbers=numbers) -> str:
                return f"line {_numbers[i]}"

            yb = cast_checked(labels, np.dtype(y_dtype), where, [0], "y_dtype")
            with np.errstate(over="ignore"):
                vals_cast = vals.astype(x_dtype)
            bad = ~np.isfinite(vals_cast)
            if bad.any():
                k = int(np.argmax(bad))
                location = f"line {numbers[rows[k]]}, feature index {idx[k]}"
                cast_checked(np.array([[vals[k]]]), x_dtype, lambda i, j, _at=location: _at, [0])
            Xb = np.zeros((len(labels), d), dtype=x_dtype)
            Xb[rows, cols] = vals_cast
            writer.append(Xb, yb)
            del Xb
            call_progress(progress, writer.n, size + reader.bytes_read(), total)
    finally:
        reader.close()
    if writer.n == 0:
        raise InputValidationError(
            f"{src}: every one of its {dropped} rows has a NaN; nothing is left to "
            "ingest with missing='drop'"
        )
    return writer.finish("libsvm", src, None, [] if no_y else ["label"], dropped=dropped,
                         read_as={"index_base": offset}, like=like, guessed=guessed)
