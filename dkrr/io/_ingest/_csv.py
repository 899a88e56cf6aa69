"""CSV (or whitespace-separated) text into a dkrr store, in one streamed pass.

Rows are appended to the Zarr arrays chunk by chunk (the arrays grow as they go). The
number of rows per chunk follows a byte budget (:func:`._writer.chunk_rows_for`) worked
out from the width of the first lines.

Target typing: the target is a label column when ``target_type="labels"``, or when
``target_type="auto"`` and one of its cells in the first chunk is neither a number nor
a missing-value marker. Labels are encoded incrementally (codes in order of first
appearance) and remapped at the end so that the codes follow the sorted labels (sorted
as numbers when every label is a number). A column that is numeric apart from empty or
``NA`` cells is numeric with missing values: an error naming the rows, or those rows
dropped with ``missing="drop"``.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FeatureMismatchError, InputValidationError, InvalidParameterError
from ._columns import names_hint, split_columns
from ._text import LineReader, is_missing, to_float
from ._writer import (
    MissingRows,
    StoreWriter,
    call_progress,
    cast_checked,
    chunk_rows_for,
    nan_rows,
)


def split_rows(lines: list[str], delimiter: str | None):
    """Iterate over the fields of each line (runs of whitespace when delimiter is None)."""
    if delimiter is None:
        return (line.split() for line in lines)
    return csv.reader(lines, delimiter=delimiter)


def csv_row(line: str, delimiter: str | None) -> list[str]:
    return next(iter(split_rows([line], delimiter)))


def detect_header(first: list[str], second: list[str] | None) -> bool:
    """Whether `first` is a header: one of its cells is text (not a number, not a
    missing-value marker) where `second` has a number."""
    first_numeric = [to_float(c) is not None for c in first]
    if second is None:
        return not any(first_numeric)
    first_text = [not n and not is_missing(c) for n, c in zip(first_numeric, first, strict=True)]
    second_numeric = [to_float(c) is not None for c in second]
    return any(a and b for a, b in zip(first_text, second_numeric, strict=False))


#: delimiters suggested when a line splits into one field: (character, CLI spelling)
_OTHER_DELIMITERS = ((";", "';'"), ("\t", "tab"), ("|", "'|'"), (",", "','"), (":", "':'"))


def _one_column(src: Path, head: list[str], numbers: list[int], delimiter: str | None):
    """The error for a first line that is one field: name the delimiter it seems to use."""
    sep = "whitespace" if delimiter is None else repr(delimiter)
    cause = (
        f"{src}: line {numbers[0]} is a single field when split at {sep}, so there is no "
        "column left for the features once the target is taken"
    )
    for char, spelled in _OTHER_DELIMITERS:
        if char != delimiter and all(len(csv_row(h, char)) > 1 for h in head):
            return InputValidationError(
                f"{cause}; the lines look {spelled}-delimited: pass delimiter={char!r} "
                f"(--delimiter {spelled})"
            )
    if delimiter is not None and all(len(h.split()) > 1 for h in head):
        return InputValidationError(
            f"{cause}; the lines look whitespace-separated: pass delimiter=None "
            "(--delimiter whitespace)"
        )
    return InputValidationError(
        f"{cause}; pass the file's delimiter (--delimiter) -- a CSV needs at least one "
        "feature column and a target column"
    )


class _Labels:
    """Incremental encoding of a label column; a missing cell gets code -1."""

    def __init__(self):
        self.codes: dict[str, int] = {}
        self.present = np.zeros(0, dtype=bool)

    def encode(self, cell: str) -> int:
        if is_missing(cell):
            return -1
        return self.codes.setdefault(cell.strip(), len(self.codes))

    def seen(self, codes: np.ndarray) -> None:
        if self.present.size < len(self.codes):
            self.present = np.pad(self.present, (0, len(self.codes) - self.present.size))
        self.present[codes.astype(np.intp)] = True

    def classes(self, fixed: list[str] | None = None,
                where: str = "") -> tuple[list[str], np.ndarray | None]:
        """Sorted labels that occur in the store, and the code mapping (None: identity).

        With `fixed` (the classes of a ``like`` store) the codes follow `fixed`, and a
        label that is not in it is an error (`where`: the file, for the message).
        """
        self.seen(np.empty(0))
        labels = [lab for lab, c in self.codes.items() if self.present[c]]
        if fixed is not None:
            unknown = [lab for lab in labels if lab not in fixed]
            if unknown:
                raise InputValidationError(
                    f"{where}: {len(unknown)} of its labels are not classes of the like "
                    f"store: {names_hint(unknown)}; that store's classes are "
                    f"{names_hint(fixed)}. A model fitted on it cannot predict them; "
                    "ingest without like= (--like) to give this file its own classes"
                )
            classes = list(fixed)
        elif all(to_float(lab) is not None for lab in labels):
            classes = sorted(labels, key=lambda lab: (float(lab), lab))
        else:
            classes = sorted(labels)
        rank = {lab: i for i, lab in enumerate(classes)}
        mapping = np.array([rank.get(lab, -1) for lab in self.codes], dtype=np.int32)
        return classes, None if np.array_equal(mapping, np.arange(mapping.size)) else mapping


@dataclass
class _Layout:
    """How to turn the lines of one chunk into numbers."""

    n_cols: int
    delimiter: str | None
    names: list[str]
    label_col: int | None
    encode: Callable[[str], int]
    shape_origin: str
    target_cols: Sequence[int]
    target_hint: str

    def _parse_slow(self, lines, numbers):
        out = np.empty((len(lines), self.n_cols), dtype=np.float64)
        absent = np.zeros(out.shape, dtype=bool)
        for i, row in enumerate(split_rows(lines, self.delimiter)):
            if len(row) != self.n_cols:
                sep = "whitespace" if self.delimiter is None else repr(self.delimiter)
                raise InputValidationError(
                    f"line {numbers[i]} has {len(row)} fields but {self.shape_origin} has "
                    f"{self.n_cols} (delimiter {sep}); every row needs the same number "
                    "of columns"
                )
            for j, cell in enumerate(row):
                if j == self.label_col:
                    out[i, j] = self.encode(cell)
                    continue
                value = to_float(cell)
                if value is None:
                    if is_missing(cell):
                        absent[i, j] = True
                        out[i, j] = np.nan
                        continue
                    is_target = j in self.target_cols
                    raise InputValidationError(
                        f"line {numbers[i]}, {'target column' if is_target else 'column'} "
                        f"{j} ({self.names[j]!r}): cannot parse {cell!r} as a number"
                        + (self.target_hint if is_target else "; feature columns must be numeric")
                    )
                out[i, j] = value
        return out, absent

    def parse(self, lines, numbers) -> tuple[np.ndarray, np.ndarray | None]:
        """Values (rows, n_cols) and where cells are missing (None: nowhere)."""
        converters = None if self.label_col is None else {self.label_col: self.encode}
        absent = None
        try:
            arr = np.loadtxt(lines, delimiter=self.delimiter, dtype=np.float64, ndmin=2,
                             comments=None, quotechar='"', converters=converters)
            if arr.shape != (len(lines), self.n_cols):
                raise ValueError("ragged")
        except ValueError:
            arr, absent = self._parse_slow(lines, numbers)
        if self.label_col is not None:
            no_label = arr[:, self.label_col] < 0
            if no_label.any():
                absent = np.zeros(arr.shape, dtype=bool) if absent is None else absent
                absent[:, self.label_col] |= no_label
        return arr, absent if absent is not None and absent.any() else None


def read_csv(src: Path, tmp: Path, *, target, header, delimiter, dtype, y_dtype,
             chunk_rows, n_features, missing, target_type, progress, classes=None,
             columns=None, like=None, **_) -> dict[str, Any]:
    total = os.path.getsize(src)
    reader = LineReader(src, "CSV")
    try:
        head, head_numbers = reader.read(2)
        if not head:
            raise InputValidationError(f"{src} has no data rows (the file is empty)")
        first = csv_row(head[0], delimiter)
        second = csv_row(head[1], delimiter) if len(head) > 1 else None
        has_header = detect_header(first, second) if header is None else bool(header)
        n_cols = len(first)
        if n_cols == 1:
            raise _one_column(src, head, head_numbers, delimiter)
        if has_header:
            names = [c.strip() or f"column_{j}" for j, c in enumerate(first)]
            if columns is not None and names != columns:
                raise _other_columns(src, names, columns, like)
            shape_origin = f"the header (line {head_numbers[0]})"
            pending = (head[1:], head_numbers[1:])
        else:
            names = [f"column_{j}" for j in range(n_cols)]
            shape_origin = f"line {head_numbers[0]}"
            pending = (head, head_numbers)
        target_cols, feature_cols, scalar = split_columns(src, target, names, n_cols, n_features)
        if target_type == "labels" and not scalar:
            raise InvalidParameterError(
                f"target_type='labels' needs one target column, got target={target!r}"
            )
        rows = chunk_rows_for(max([8 * n_cols] + [len(h) for h in head]), chunk_rows)

        def next_chunk():
            nonlocal pending
            lines, numbers = pending[0][:rows], pending[1][:rows]
            pending = (pending[0][rows:], pending[1][rows:])
            if len(lines) < rows:
                more, more_numbers = reader.read(rows - len(lines))
                lines, numbers = lines + more, numbers + more_numbers
            return lines, numbers

        lines, numbers = next_chunk()
        if not lines:
            raise InputValidationError(f"{src} has a header but no data rows")

        labels = _Labels()
        label_col = None
        if target_type == "labels":
            label_col = target_cols[0]
        elif target_type == "auto" and scalar:
            t = target_cols[0]
            cells = (row[t] if len(row) > t else "0" for row in split_rows(lines, delimiter))
            if any(to_float(c) is None and not is_missing(c) for c in cells):
                label_col = t
        layout = _Layout(
            n_cols=n_cols, delimiter=delimiter, names=names, label_col=label_col,
            encode=labels.encode, shape_origin=shape_origin, target_cols=target_cols,
            target_hint=(
                " (the target was numeric in the first rows; pass target_type='labels' "
                "(--labels) if it holds class labels)" if target_type == "auto" and scalar
                else "; target columns must be numeric"
            ),
        )
        numeric_cols = feature_cols + ([] if label_col is not None else list(target_cols))
        x_dtype = np.dtype(dtype)
        writer = StoreWriter(
            tmp, n_features=len(feature_cols), y_tail=() if scalar else (len(target_cols),),
            x_dtype=x_dtype,
            y_dtype=np.dtype(np.int32) if label_col is not None else np.dtype(y_dtype),
            chunk_rows=rows,
        )
        gathered = MissingRows(src, names)
        dropped = 0
        while lines:
            arr, absent = layout.parse(lines, numbers)
            if missing == "drop":
                drop = nan_rows(arr[:, numeric_cols])
                if label_col is not None:
                    drop |= arr[:, label_col] < 0
                if drop.any():
                    dropped += int(drop.sum())
                    arr = arr[~drop]
                    numbers = [n for n, d in zip(numbers, drop, strict=True) if not d]
            elif absent is not None or gathered.count:
                # keep reading to name every row with a missing cell, write nothing
                if absent is not None:
                    gathered.add(absent, numbers,
                                 lambda i, _lines=lines: csv_row(_lines[i], delimiter))
                call_progress(progress, writer.n, reader.bytes_read(), total)
                lines, numbers = next_chunk()
                continue

            def where(i: int, j: int, _numbers=numbers) -> str:
                return f"line {_numbers[i]}, column {j} ({names[j]!r})"

            Xb = cast_checked(arr[:, feature_cols], x_dtype, where, feature_cols)
            if label_col is not None:
                yb = arr[:, label_col].astype(np.int32)
                labels.seen(yb)
            else:
                ycols = arr[:, target_cols[0]] if scalar else arr[:, target_cols]
                yb = cast_checked(ycols, np.dtype(y_dtype), where, target_cols, "y_dtype")
            writer.append(Xb, yb)
            del arr, Xb, yb
            call_progress(progress, writer.n, reader.bytes_read(), total)
            lines, numbers = next_chunk()
    finally:
        reader.close()
    if gathered.count:
        raise gathered.error()
    if writer.n == 0:
        raise InputValidationError(
            f"{src}: every one of its {dropped} data rows has a missing value; nothing "
            "is left to ingest with missing='drop'"
        )

    fixed, classes = classes, None
    if label_col is not None:
        classes, mapping = labels.classes(fixed, str(src))
        if mapping is not None:
            writer.remap_y(mapping)
    feature_names = [names[j] for j in feature_cols]
    target_names = [names[j] for j in target_cols]
    read_as = {"delimiter": delimiter, "header": has_header,
               "target_columns": list(target_cols)}
    return writer.finish("csv", src, feature_names, target_names, classes=classes,
                         dropped=dropped, read_as=read_as, like=like)


def _other_columns(src: Path, names: list[str], columns: list[str], like) -> Exception:
    """The error for a header that does not name the columns of the like store."""
    if len(names) != len(columns):
        what = f"{len(names)} columns, the store's file had {len(columns)}"
    else:
        j = next(j for j, (a, b) in enumerate(zip(names, columns, strict=True)) if a != b)
        what = f"column {j} is {names[j]!r} where the store's file had {columns[j]!r}"
    return FeatureMismatchError(
        f"{src}: its header names other columns than like={like}: {what} (the store's "
        f"columns: {names_hint(columns)}); reorder the columns, or pass header=False "
        "(--no-header) if the first line is data"
    )
