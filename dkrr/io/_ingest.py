"""Stream CSV, LIBSVM/svmlight and ``.npy`` files into a dkrr Zarr store.

Every reader works on ``chunk_rows`` rows at a time, so memory is bounded by the chunk
size and the number of columns, never by the number of rows: files larger than memory
convert. The store layout is described in :mod:`dkrr.io._store`.

Passes over the input
---------------------
* CSV: one pass. Rows are appended to the Zarr arrays chunk by chunk (the arrays are
  resized as they grow). A non-numeric target column is encoded incrementally (codes in
  order of first appearance); at the end, if that order is not the sorted order of the
  labels, ``y`` is remapped chunk by chunk so the codes follow the sorted labels.
* LIBSVM: two passes. The first counts rows and finds the smallest and largest feature
  index (needed for the number of features and for ``zero_based="auto"``); the second
  writes into pre-sized arrays.
* ``.npy``: the file is memory-mapped and copied in row chunks.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from ..errors import (
    FeatureMismatchError,
    InputValidationError,
    InvalidParameterError,
    NonFiniteInputError,
)
from ._atomic import atomic_output
from ._store import LAYOUT_VERSION, default_compressors, zarr_replace_check

__all__ = ["IngestSummary", "InputNotFoundError", "ingest"]

ProgressCallback = Callable[[int, int, int], Any]

_FORMATS = ("csv", "libsvm", "npy")
_EXTENSIONS = {
    ".csv": "csv",
    ".data": "csv",
    ".t": "libsvm",
    ".txt": "libsvm",
    ".svm": "libsvm",
    ".libsvm": "libsvm",
    ".svmlight": "libsvm",
    ".npy": "npy",
}
_COMPRESSIONS = (".gz", ".bz2")
_MAX_NAMES_SHOWN = 20


class InputNotFoundError(InputValidationError, FileNotFoundError):
    """The file to ingest does not exist."""


@dataclass(frozen=True)
class IngestSummary:
    """What :func:`ingest` wrote.

    Attributes
    ----------
    n_rows : int
        Number of samples written.
    n_features : int
        Number of columns of ``X``.
    n_targets : int
        Number of target columns (``y`` is 1-D when 1 and a single target was asked).
    feature_names, target_names : list of str
        Column names recorded in the store.
    classes : list of str or None
        Sorted original labels when the target was encoded to integer codes.
    path : str
        Absolute path of the store.
    """

    n_rows: int
    n_features: int
    n_targets: int
    feature_names: list[str]
    target_names: list[str]
    classes: list[str] | None
    path: str


# --------------------------------------------------------------------------- helpers


def _infer_format(src: Path) -> str:
    suffixes = [s.lower() for s in src.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSIONS:
        suffixes = suffixes[:-1]
    fmt = _EXTENSIONS.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise InputValidationError(
            f"cannot infer the format of {src.name} from its extension; pass "
            f"format= one of {_FORMATS} (--format); known extensions: "
            f"{', '.join(sorted(_EXTENSIONS))} (+ .gz/.bz2 for text)"
        )
    return fmt


def _open_binary(src: Path):
    """Return (raw file, decompressed binary stream) for a possibly compressed file."""
    raw = open(src, "rb")
    name = src.name.lower()
    try:
        if name.endswith(".gz"):
            return raw, gzip.GzipFile(fileobj=raw, mode="rb")
        if name.endswith(".bz2"):
            return raw, bz2.BZ2File(raw, mode="rb")
    except BaseException:
        raw.close()
        raise
    return raw, raw


class _LineReader:
    """Reads non-blank lines in batches, remembering their 1-based line numbers."""

    def __init__(self, src: Path, *, skip_comments: bool = False):
        self.src = src
        self.raw, stream = _open_binary(src)
        self.text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline=None)
        self.lineno = 0
        self.skip_comments = skip_comments

    def read(self, n: int) -> tuple[list[str], list[int]]:
        lines: list[str] = []
        numbers: list[int] = []
        if n <= 0:
            return lines, numbers
        try:
            for line in self.text:
                self.lineno += 1
                if line.isspace() or (self.skip_comments and line.lstrip().startswith("#")):
                    continue
                lines.append(line)
                numbers.append(self.lineno)
                if len(lines) >= n:
                    break
        except UnicodeDecodeError as exc:
            raise InputValidationError(
                f"{self.src}: line {self.lineno + 1} is not valid UTF-8 text ({exc.reason})"
            ) from exc
        except (OSError, EOFError) as exc:  # corrupt gzip/bz2 stream
            raise InputValidationError(
                f"{self.src}: cannot read past line {self.lineno}: {exc}"
            ) from exc
        return lines, numbers

    def bytes_read(self) -> int:
        return self.raw.tell()

    def close(self) -> None:
        self.text.close()
        self.raw.close()


def _to_float(cell: str) -> float | None:
    """Parse a cell as a float like numpy.loadtxt does; None if it is not a number."""
    cell = cell.strip()
    if not cell or "_" in cell:
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def _names_hint(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:_MAX_NAMES_SHOWN])
    return shown + (", ..." if len(names) > _MAX_NAMES_SHOWN else "")


def _resolve_targets(
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
                    f"{_names_hint(names)} (or give a 0-based column index)"
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


class _StoreWriter:
    """Appends row blocks to the arrays X and y of a new Zarr group."""

    def __init__(
        self,
        path: Path,
        *,
        n_features: int,
        y_tail: tuple[int, ...],
        x_dtype: np.dtype,
        y_dtype: np.dtype,
        chunk_rows: int,
        n_rows: int = 0,
    ):
        self.group = zarr.open_group(str(path), mode="w-")
        rows = chunk_rows if n_rows == 0 else max(1, min(chunk_rows, n_rows))
        self.chunk_rows = rows
        self.X = self.group.create_array(
            "X",
            shape=(n_rows, n_features),
            dtype=x_dtype,
            chunks=(rows, n_features),
            compressors=default_compressors(),
        )
        self.y = self.group.create_array(
            "y",
            shape=(n_rows,) + y_tail,
            dtype=y_dtype,
            chunks=(rows,) + y_tail,
            compressors=default_compressors(),
        )
        self.n = 0

    def append(self, Xb: np.ndarray, yb: np.ndarray) -> None:
        end = self.n + Xb.shape[0]
        if end > self.X.shape[0]:
            self.X.resize((end,) + self.X.shape[1:])
            self.y.resize((end,) + self.y.shape[1:])
        self.X[self.n : end] = Xb
        self.y[self.n : end] = yb
        self.n = end

    def remap_y(self, mapping: np.ndarray) -> None:
        """Replace every code c of y by mapping[c], one chunk at a time."""
        for start in range(0, self.n, self.chunk_rows):
            stop = min(start + self.chunk_rows, self.n)
            self.y[start:stop] = mapping[self.y[start:stop]]

    def finish(self, attrs: dict[str, Any]) -> None:
        if self.X.shape[0] != self.n:
            self.X.resize((self.n,) + self.X.shape[1:])
            self.y.resize((self.n,) + self.y.shape[1:])
        self.group.attrs.update(attrs)


def _cast_checked(
    values: np.ndarray,
    dtype: np.dtype,
    where: Callable[[int, int], str],
    columns: Sequence[int],
) -> np.ndarray:
    """Cast to `dtype`, refusing NaN/inf and values that overflow `dtype`."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = values.astype(dtype, copy=False)
    finite = np.isfinite(out)
    if not finite.all():
        bad = np.argwhere(~finite)[0]
        i, k = int(bad[0]), (int(bad[1]) if values.ndim == 2 else 0)
        original = values[i, k] if values.ndim == 2 else values[i]
        location = where(i, columns[k])
        if np.isfinite(original):
            raise NonFiniteInputError(
                f"{location}: value {float(original)!r} is too large for {dtype}; "
                "ingest with dtype='float64' (--dtype float64)"
            )
        raise NonFiniteInputError(
            f"{location}: value is {float(original)!r}; dkrr needs finite numbers -- remove or "
            "impute rows with missing, NaN or infinite values before ingesting"
        )
    return out


def _call_progress(progress, rows: int, done: int, total: int) -> None:
    if progress is not None:
        progress(rows, done, total)


# ------------------------------------------------------------------------------- CSV


def _split_rows(lines: list[str], delimiter: str | None):
    """Iterate over the fields of each line (runs of whitespace when delimiter is None)."""
    if delimiter is None:
        return (line.split() for line in lines)
    return csv.reader(lines, delimiter=delimiter)


def _csv_row(line: str, delimiter: str | None) -> list[str]:
    return next(iter(_split_rows([line], delimiter)))


def _detect_header(first: list[str], second: list[str] | None) -> bool:
    first_numeric = [_to_float(c) is not None for c in first]
    if second is None:
        return not any(first_numeric)
    second_numeric = [_to_float(c) is not None for c in second]
    return any(
        not a and b for a, b in zip(first_numeric, second_numeric, strict=False)
    )


def _parse_csv_slow(
    lines: list[str],
    numbers: list[int],
    n_cols: int,
    delimiter: str,
    names: list[str],
    label_col: int | None,
    encode: Callable[[str], int],
    shape_origin: str,
    target_cols: Sequence[int],
) -> np.ndarray:
    out = np.empty((len(lines), n_cols), dtype=np.float64)
    for i, row in enumerate(_split_rows(lines, delimiter)):
        if len(row) != n_cols:
            raise InputValidationError(
                f"line {numbers[i]} has {len(row)} fields but {shape_origin} has "
                f"{n_cols} (delimiter {'whitespace' if delimiter is None else repr(delimiter)}); every row needs the same "
                "number of columns"
            )
        for j, cell in enumerate(row):
            if j == label_col:
                out[i, j] = encode(cell)
                continue
            value = _to_float(cell)
            if value is None:
                role = "target column" if j in target_cols else "column"
                hint = (
                    " (the target was numeric in the first rows; numeric and text "
                    "labels cannot be mixed)"
                    if j in target_cols
                    else ""
                )
                raise InputValidationError(
                    f"line {numbers[i]}, {role} {j} ({names[j]!r}): cannot parse "
                    f"{cell!r} as a number{hint}; feature columns must be numeric"
                )
            out[i, j] = value
    return out


def _parse_csv_chunk(lines, numbers, n_cols, delimiter, label_col, encode, slow_args):
    converters = None if label_col is None else {label_col: encode}
    try:
        arr = np.loadtxt(
            lines,
            delimiter=delimiter,
            dtype=np.float64,
            ndmin=2,
            comments=None,
            quotechar='"',
            converters=converters,
        )
        if arr.shape == (len(lines), n_cols):
            return arr
    except ValueError:
        pass
    return _parse_csv_slow(lines, numbers, n_cols, delimiter, **slow_args)


def _ingest_csv(src: Path, tmp: Path, *, target, header, delimiter, dtype, chunk_rows,
                n_features, progress, **_) -> dict[str, Any]:
    total = os.path.getsize(src)
    reader = _LineReader(src)
    try:
        lines, numbers = reader.read(chunk_rows + 1)
        if not lines:
            raise InputValidationError(f"{src} has no data rows (the file is empty)")
        first = _csv_row(lines[0], delimiter)
        second = _csv_row(lines[1], delimiter) if len(lines) > 1 else None
        has_header = _detect_header(first, second) if header is None else bool(header)
        n_cols = len(first)
        if has_header:
            names = [c.strip() or f"column_{j}" for j, c in enumerate(first)]
            shape_origin = f"the header (line {numbers[0]})"
            lines, numbers = lines[1:], numbers[1:]
        else:
            names = [f"column_{j}" for j in range(n_cols)]
            shape_origin = f"line {numbers[0]}"
        target_cols, scalar = _resolve_targets(target, names, n_cols)
        feature_cols = [j for j in range(n_cols) if j not in target_cols]
        if n_features is not None and len(feature_cols) != n_features:
            raise FeatureMismatchError(
                f"{src} has {len(feature_cols)} feature columns but n_features="
                f"{n_features} was given"
            )
        if not lines:
            raise InputValidationError(f"{src} has a header but no data rows")

        # Decide from the first chunk whether a single target holds text labels.
        label_col = None
        if scalar:
            t = target_cols[0]
            cells = [row[t] if len(row) > t else "0" for row in _split_rows(lines, delimiter)]
            if any(_to_float(c) is None for c in cells):
                label_col = t
        codes: dict[str, int] = {}

        def encode(cell: str) -> int:
            return codes.setdefault(cell.strip(), len(codes))

        slow_args = dict(
            names=names,
            label_col=label_col,
            encode=encode,
            shape_origin=shape_origin,
            target_cols=target_cols,
        )
        x_dtype = np.dtype(dtype)
        y_dtype = np.dtype(np.int32) if label_col is not None else x_dtype
        y_tail = () if scalar else (len(target_cols),)
        writer = _StoreWriter(
            tmp,
            n_features=len(feature_cols),
            y_tail=y_tail,
            x_dtype=x_dtype,
            y_dtype=y_dtype,
            chunk_rows=chunk_rows,
        )
        carry: tuple[list[str], list[int]] | None = None
        if len(lines) > chunk_rows:
            carry = (lines[chunk_rows:], numbers[chunk_rows:])
            lines, numbers = lines[:chunk_rows], numbers[:chunk_rows]
        while lines:
            arr = _parse_csv_chunk(
                lines, numbers, n_cols, delimiter, label_col, encode, slow_args
            )

            def where(i: int, j: int, _numbers=numbers) -> str:
                return f"line {_numbers[i]}, column {j} ({names[j]!r})"

            Xb = _cast_checked(arr[:, feature_cols], x_dtype, where, feature_cols)
            if label_col is not None:
                yb = arr[:, label_col].astype(np.int32)
            else:
                ycols = arr[:, target_cols[0]] if scalar else arr[:, target_cols]
                yb = _cast_checked(ycols, x_dtype, where, target_cols)
            writer.append(Xb, yb)
            del arr, Xb, yb
            _call_progress(progress, writer.n, reader.bytes_read(), total)
            if carry is not None:
                more, more_numbers = reader.read(chunk_rows - len(carry[0]))
                lines, numbers = carry[0] + more, carry[1] + more_numbers
                carry = None
            else:
                lines, numbers = reader.read(chunk_rows)
    finally:
        reader.close()

    classes = None
    if label_col is not None:
        seen = list(codes)
        classes = sorted(seen)
        rank = {label: i for i, label in enumerate(classes)}
        mapping = np.array([rank[label] for label in seen], dtype=np.int32)
        if not np.array_equal(mapping, np.arange(len(seen))):
            writer.remap_y(mapping)
    feature_names = [names[j] for j in feature_cols]
    target_names = [names[j] for j in target_cols]
    attrs: dict[str, Any] = {
        "dkrr_layout": LAYOUT_VERSION,
        "feature_names": feature_names,
        "target_names": target_names,
        "source": str(src),
        "format": "csv",
    }
    if classes is not None:
        attrs["classes"] = classes
    writer.finish(attrs)
    return dict(
        n_rows=writer.n,
        n_features=len(feature_cols),
        n_targets=len(target_cols),
        feature_names=feature_names,
        target_names=target_names,
        classes=classes,
    )


# ---------------------------------------------------------------------------- LIBSVM


def _parse_libsvm_slow(lines, numbers):
    labels: list[float] = []
    rows: list[int] = []
    idx: list[int] = []
    vals: list[float] = []
    for i, line in enumerate(lines):
        parts = line.split("#", 1)[0].split()
        label = _to_float(parts[0]) if parts else None
        if label is None:
            shown = parts[0] if parts else line.strip()
            raise InputValidationError(
                f"line {numbers[i]}: label {shown!r} is not a number; a LIBSVM line is "
                "'<label> <index>:<value> ...'"
            )
        labels.append(label)
        for tok in parts[1:]:
            key, sep, value = tok.partition(":")
            if key == "qid" and sep:
                continue
            fval = _to_float(value) if sep else None
            try:
                ikey = int(key) if fval is not None else None
            except ValueError:
                ikey = None
            if ikey is None:
                raise InputValidationError(
                    f"line {numbers[i]}: cannot parse {tok!r} as <index>:<value>; "
                    "for dense whitespace-separated columns use format='csv' with "
                    "delimiter=None"
                )
            if ikey < 0:
                raise InputValidationError(
                    f"line {numbers[i]}: feature index {ikey} is negative"
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


def _parse_libsvm_chunk(lines, numbers, values=True):
    """Labels (m,), row of each entry, feature index and value (nnz,) for a chunk.

    With ``values=False`` (first pass) only the indices are converted; labels and
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
            return _parse_libsvm_slow(lines, numbers)
        labels.append(parts[0])
        counts.append(len(parts) - 1)
        pairs.extend(parts[1:])
    tokens = " ".join(pairs).replace(":", " ").split()
    if len(tokens) != 2 * len(pairs):
        return _parse_libsvm_slow(lines, numbers)
    y = vals = None
    try:
        idx = np.array(tokens[0::2]).astype(np.int64) if tokens else np.empty(0, np.int64)
        if values:
            y = np.array(labels).astype(np.float64)
            vals = np.array(tokens[1::2]).astype(np.float64) if tokens else np.empty(0)
    except (ValueError, OverflowError):
        return _parse_libsvm_slow(lines, numbers)
    if idx.size and idx.min() < 0:
        return _parse_libsvm_slow(lines, numbers)
    rows = np.repeat(np.arange(len(lines), dtype=np.int64), counts)
    return y, rows, idx, vals


def _ingest_libsvm(src: Path, tmp: Path, *, target, dtype, chunk_rows, n_features,
                   zero_based, progress, **_) -> dict[str, Any]:
    if target is not None:
        raise InvalidParameterError(
            "a LIBSVM file has its label first on each line; target cannot be chosen "
            f"(got target={target!r})"
        )
    size = os.path.getsize(src)
    total = 2 * size
    # Pass 1: rows and index range.
    n_rows, lo, hi = 0, None, None
    reader = _LineReader(src, skip_comments=True)
    try:
        while True:
            lines, numbers = reader.read(chunk_rows)
            if not lines:
                break
            _, _, idx, _ = _parse_libsvm_chunk(lines, numbers, values=False)
            n_rows += len(lines)
            if idx.size:
                lo = int(idx.min()) if lo is None else min(lo, int(idx.min()))
                hi = int(idx.max()) if hi is None else max(hi, int(idx.max()))
            _call_progress(progress, 0, reader.bytes_read(), total)
    finally:
        reader.close()
    if n_rows == 0:
        raise InputValidationError(f"{src} has no data rows")
    if zero_based == "auto":
        offset = 0 if lo == 0 else 1
    else:
        offset = 0 if zero_based else 1
        if offset == 1 and lo == 0:
            raise InputValidationError(
                f"{src} has feature index 0 but zero_based=False; pass zero_based=True "
                "or 'auto'"
            )
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
    x_dtype = np.dtype(dtype)
    # Pass 2: dense blocks into pre-sized arrays.
    writer = _StoreWriter(
        tmp, n_features=d, y_tail=(), x_dtype=x_dtype, y_dtype=x_dtype,
        chunk_rows=chunk_rows, n_rows=n_rows,
    )
    reader = _LineReader(src, skip_comments=True)
    try:
        while True:
            lines, numbers = reader.read(chunk_rows)
            if not lines:
                break
            labels, rows, idx, vals = _parse_libsvm_chunk(lines, numbers)
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

            yb = _cast_checked(labels, x_dtype, where, [0])
            with np.errstate(over="ignore"):
                vals_cast = vals.astype(x_dtype)
            bad = ~np.isfinite(vals_cast)
            if bad.any():
                k = int(np.argmax(bad))
                probe = np.array([[vals[k]]])
                _cast_checked(probe, x_dtype, lambda i, j: f"line {numbers[rows[k]]}, "
                              f"feature index {idx[k]}", [0])
            Xb = np.zeros((len(lines), d), dtype=x_dtype)
            Xb[rows, cols] = vals_cast
            writer.append(Xb, yb)
            del Xb
            _call_progress(progress, writer.n, size + reader.bytes_read(), total)
    finally:
        reader.close()
    feature_names = [f"feature_{j}" for j in range(d)]
    attrs = {
        "dkrr_layout": LAYOUT_VERSION,
        "feature_names": feature_names,
        "target_names": ["label"],
        "source": str(src),
        "format": "libsvm",
    }
    writer.finish(attrs)
    return dict(
        n_rows=writer.n, n_features=d, n_targets=1, feature_names=feature_names,
        target_names=["label"], classes=None,
    )


# ------------------------------------------------------------------------------- NPY


def _ingest_npy(src: Path, tmp: Path, *, target, dtype, chunk_rows, n_features,
                progress, **_) -> dict[str, Any]:
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
    names = [f"column_{j}" for j in range(n_cols)]
    target_cols, scalar = _resolve_targets(target, names, n_cols)
    feature_cols = [j for j in range(n_cols) if j not in target_cols]
    if n_features is not None and len(feature_cols) != n_features:
        raise FeatureMismatchError(
            f"{src} has {len(feature_cols)} feature columns but n_features="
            f"{n_features} was given"
        )
    x_dtype = np.dtype(dtype)
    writer = _StoreWriter(
        tmp, n_features=len(feature_cols), y_tail=() if scalar else (len(target_cols),),
        x_dtype=x_dtype, y_dtype=x_dtype, chunk_rows=chunk_rows, n_rows=n_rows,
    )
    total = os.path.getsize(src)
    header = total - arr.nbytes
    row_bytes = arr.itemsize * n_cols
    for start in range(0, n_rows, chunk_rows):
        stop = min(start + chunk_rows, n_rows)
        block = np.asarray(arr[start:stop])

        def where(i: int, j: int, _start=start) -> str:
            return f"row {_start + i} (0-based), column {j}"

        Xb = _cast_checked(block[:, feature_cols], x_dtype, where, feature_cols)
        ycols = block[:, target_cols[0]] if scalar else block[:, target_cols]
        yb = _cast_checked(ycols, x_dtype, where, target_cols)
        writer.append(Xb, yb)
        del block, Xb, yb
        _call_progress(progress, writer.n, header + stop * row_bytes, total)
    del arr
    feature_names = [names[j] for j in feature_cols]
    target_names = [names[j] for j in target_cols]
    writer.finish({
        "dkrr_layout": LAYOUT_VERSION,
        "feature_names": feature_names,
        "target_names": target_names,
        "source": str(src),
        "format": "npy",
    })
    return dict(
        n_rows=writer.n, n_features=len(feature_cols), n_targets=len(target_cols),
        feature_names=feature_names, target_names=target_names, classes=None,
    )


_INGESTERS = {"csv": _ingest_csv, "libsvm": _ingest_libsvm, "npy": _ingest_npy}


# ------------------------------------------------------------------------ public API


def ingest(
    path: str | os.PathLike,
    out: str | os.PathLike,
    *,
    target: str | int | Sequence[str | int] | None = None,
    format: str | None = None,
    header: bool | None = None,
    delimiter: str | None = ",",
    dtype: str | np.dtype = "float32",
    chunk_rows: int = 65536,
    n_features: int | None = None,
    zero_based: bool | str = "auto",
    overwrite: bool = False,
    progress: ProgressCallback | None = None,
) -> IngestSummary:
    """Convert a CSV, LIBSVM/svmlight or ``.npy`` file into a dkrr Zarr store, streaming.

    The input is read ``chunk_rows`` rows at a time and each chunk is appended to the
    Zarr arrays ``X`` and ``y``, so memory use is bounded by ``chunk_rows`` times the
    number of columns whatever the file size. The store is written under a temporary
    name next to `out` and renamed to `out` only when complete; on any error (or
    ``KeyboardInterrupt``) nothing is left behind and an existing `out` is untouched.

    Parameters
    ----------
    path : str or os.PathLike
        Input file: ``.csv``/``.data`` (CSV), ``.txt``/``.t``/``.svm``/``.libsvm``/
        ``.svmlight`` (LIBSVM; CSV and LIBSVM may be compressed as ``.gz`` or ``.bz2``), or ``.npy``
        (a 2-D numeric matrix).
    out : str or os.PathLike
        Directory of the Zarr store to create (layout: see :mod:`dkrr.io._store`).
    target : str, int or list of these, optional
        CSV and ``.npy``: the target column(s), by header name or 0-based index
        (negative counts from the end; ``.npy`` and header-less CSV columns are also
        named ``column_{j}``). Default: the last column. A list gives a 2-D ``y``.
        LIBSVM files carry their label first; leave it None.
    format : {"csv", "libsvm", "npy"}, optional
        Input format; inferred from the extension when None.
    header : bool, optional
        CSV only: whether the first line holds column names. None detects it: the first
        line is a header when one of its cells is not a number while the same column
        of the second line is.
    delimiter : str or None, default=","
        CSV field separator (one character), or None for runs of whitespace (dense
        space-separated text such as ``cod-rna.train.txt.gz`` with ``format="csv"``).
        Fields may be quoted with ``"``; quoted fields may not span lines.
    dtype : {"float32", "float64"}, default="float32"
        Dtype of ``X`` (and of a numeric ``y``). A text target is stored as int32 codes.
    chunk_rows : int, default=65536
        Rows per chunk, both for reading and for the Zarr chunks of ``X`` and ``y``.
    n_features : int, optional
        LIBSVM: number of features (columns) of ``X``; by default the largest index in
        the file. CSV/``.npy``: if given, the number of feature columns is checked.
    zero_based : bool or "auto", default="auto"
        LIBSVM: whether feature indices start at 0. "auto" (as scikit-learn's
        ``load_svmlight_file``) treats them as 0-based if index 0 occurs, else 1-based.
    overwrite : bool, default=False
        Replace an existing Zarr store at `out` (only once the new one is complete).
    progress : callable, optional
        Called as ``progress(rows_done, bytes_read, total_bytes)`` after each chunk.
        The byte counts cover every pass over the (compressed) file: LIBSVM is read
        twice, so its ``total_bytes`` is twice the file size.

    Returns
    -------
    summary : IngestSummary
        Rows, columns, names, classes and path of the store.

    Raises
    ------
    OutputExistsError
        If `out` exists and `overwrite` is false (checked before reading anything), or
        `out` exists and is not a Zarr store.
    InputNotFoundError
        If `path` does not exist.
    InputValidationError
        Unknown format, a non-numeric feature cell (with line and column), a row with
        the wrong number of fields (with line), an unknown target column, no data.
    NonFiniteInputError
        A NaN or infinite value, or one too large for `dtype` (with line and column).
    InvalidParameterError
        An invalid option value.

    Notes
    -----
    A CSV target column is a class label column when any of its cells in the first
    chunk is not a number; its labels (whitespace-stripped strings, numbers included)
    are then encoded to ``0 .. k-1`` in sorted order and recorded in the ``classes``
    attribute. When the first chunk is all numeric the target is numeric, and a text
    cell further down is an error.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "data.csv").write_text("a,b,label\\n1,2,g\\n3,4,h\\n")
    >>> s = ingest(d / "data.csv", d / "data.zarr", target="label")
    >>> s.n_rows, s.feature_names, s.classes
    (2, ['a', 'b'], ['g', 'h'])
    """
    src = Path(os.path.abspath(os.fspath(path)))
    if format is None:
        fmt = _infer_format(src)
    else:
        fmt = str(format).lower()
        if fmt not in _FORMATS:
            raise InvalidParameterError(
                f"format must be one of {_FORMATS}, got {format!r}"
            )
    try:
        x_dtype = np.dtype(dtype)
    except TypeError as exc:
        raise InvalidParameterError(f"dtype must be float32 or float64, got {dtype!r}") from exc
    if x_dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise InvalidParameterError(f"dtype must be float32 or float64, got {dtype!r}")
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise InvalidParameterError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    if delimiter is not None and (
        not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "\"\r\n"
    ):
        raise InvalidParameterError(
            "delimiter must be one character other than a quote or newline, or None "
            f"for runs of whitespace; got {delimiter!r}"
        )
    if header not in (None, True, False):
        raise InvalidParameterError(f"header must be None, True or False, got {header!r}")
    if n_features is not None and (
        isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1
    ):
        raise InvalidParameterError(f"n_features must be a positive integer, got {n_features!r}")
    if zero_based not in ("auto", True, False):
        raise InvalidParameterError(f"zero_based must be True, False or 'auto', got {zero_based!r}")
    if not src.exists():
        raise InputNotFoundError(f"input file {src} does not exist")
    if src.is_dir():
        raise InputValidationError(
            f"{src} is a directory; ingest reads one CSV, LIBSVM or .npy file "
            "(a Zarr store needs no ingest)"
        )
    if fmt == "npy" and src.name.lower().endswith(_COMPRESSIONS):
        raise InputValidationError(f"{src}: compressed .npy files are not supported")

    final = Path(os.path.abspath(os.fspath(out)))
    with atomic_output(final, overwrite, can_replace=zarr_replace_check) as tmp:
        info = _INGESTERS[fmt](
            src,
            tmp,
            target=target,
            header=header,
            delimiter=delimiter,
            dtype=x_dtype,
            chunk_rows=int(chunk_rows),
            n_features=None if n_features is None else int(n_features),
            zero_based=zero_based,
            progress=progress,
        )
    return IngestSummary(path=str(final), **info)
