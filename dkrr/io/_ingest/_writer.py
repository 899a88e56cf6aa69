"""The one store writer of ingest, with the checks every reader applies to its blocks.

* :class:`StoreWriter` appends row blocks to the arrays ``X`` and ``y`` of a new Zarr
  group (layout: :mod:`dkrr.io._store`).
* :func:`chunk_rows_for` sizes the row chunks from a byte budget, so a wide input gets
  fewer rows per chunk instead of multi-gigabyte chunks.
* :func:`check_row_width` refuses, before anything is allocated, a row of ``X`` that
  would not fit in memory.
* :func:`cast_checked` refuses NaN, infinite and overflowing values with their location.
* :class:`MissingRows` gathers the rows with missing cells for one clear error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from ...errors import InputValidationError, InvalidParameterError, MissingValueError, NonFiniteInputError
from .._atomic import interrupts_deferred
from .._reader import MANIFEST, manifest
from .._paths import zarr_location
from .._store import LAYOUT_VERSION, create_arrays
from ._text import format_bytes

#: bytes of ``X`` in one chunk (and one block in memory); a chunk holds at least one row
CHUNK_BYTES = 64 * 2**20
#: the widest row of ``X`` accepted (X is stored dense)
MAX_ROW_BYTES = 256 * 2**20
#: rows with missing cells named in an error message
MAX_ROWS_SHOWN = 5

MISSING_FIX = (
    "pass missing='drop' (--missing drop) to leave these rows out, or fill in the "
    "cells before ingesting"
)


def chunk_rows_for(row_bytes: int, chunk_rows: int) -> int:
    """Rows per chunk: at most `chunk_rows`, and at most :data:`CHUNK_BYTES` in all."""
    return max(1, min(int(chunk_rows), CHUNK_BYTES // max(1, int(row_bytes))))


def max_columns(dtype: np.dtype) -> int:
    """The most columns a row of ``X`` of this dtype may have."""
    return MAX_ROW_BYTES // np.dtype(dtype).itemsize


def check_row_width(n_features: int, dtype: np.dtype, what: str, n_rows: int | None = None,
                    error: type[Exception] = InvalidParameterError) -> None:
    """Refuse an ``X`` whose rows have more than :func:`max_columns` columns."""
    dtype = np.dtype(dtype)
    if n_features <= max_columns(dtype):
        return
    row = n_features * dtype.itemsize
    total = (
        f"X would be {n_rows} rows x {n_features} columns = "
        f"{format_bytes(n_rows * row)} as {dtype}; " if n_rows else ""
    )
    raise error(
        f"{what}: {total}one row alone is {format_bytes(row)}. dkrr stores X dense, so "
        f"n_features is limited to {max_columns(dtype):,} {dtype} columns "
        f"({format_bytes(MAX_ROW_BYTES)} per row). Check the input for a corrupted or "
        "misread index, or reduce the number of features (for example hash them into "
        "fewer columns with sklearn's FeatureHasher) before ingesting"
    )


class StoreWriter:
    """Appends row blocks to the arrays X and y of a new Zarr group (X alone when
    `y_tail` is ``(0,)``: an input read without a target, whose y blocks have no
    columns).

    Every write runs inside :func:`~dkrr.io._atomic.interrupts_deferred`: zarr writes from
    its own I/O thread, and a Ctrl-C or SIGTERM delivered mid-write would let the cleanup
    remove the temporary store while that thread still creates files in it.
    """

    def __init__(
        self,
        path: Path | Any,
        *,
        n_features: int,
        y_tail: tuple[int, ...],
        x_dtype: np.dtype,
        y_dtype: np.dtype,
        chunk_rows: int,
        n_rows: int = 0,
    ):
        rows = chunk_rows if n_rows == 0 else max(1, min(chunk_rows, n_rows))
        self.path = path
        self.chunk_rows = rows
        with interrupts_deferred():
            self._create(path, n_features, y_tail, x_dtype, y_dtype, rows, n_rows)
        self.n = 0

    def reopen(self, n: int) -> None:
        """Take up the arrays after tasks wrote `n` rows into them (:class:`ChunkSink`)."""
        self.X, self.y = open_arrays(self.path)
        self.n = n

    def _create(self, path, n_features, y_tail, x_dtype, y_dtype, rows, n_rows) -> None:
        self.group = zarr.open_group(store=zarr_location(path), mode="w-")
        specs = {"X": ((n_rows, n_features), x_dtype, (rows, n_features))}
        if y_tail != (0,):
            specs["y"] = ((n_rows,) + y_tail, y_dtype, (rows,) + y_tail)
        arrays = create_arrays(self.group, specs, {})
        self.X, self.y = arrays["X"], arrays.get("y")

    def append(self, Xb: np.ndarray, yb: np.ndarray) -> None:
        if Xb.shape[0] == 0:
            return
        end = self.n + Xb.shape[0]
        with interrupts_deferred():
            if end > self.X.shape[0]:
                _resize(end, self.X, self.y)
            self.X[self.n : end] = Xb
            if self.y is not None:
                self.y[self.n : end] = yb
        self.n = end

    def remap_y(self, mapping: np.ndarray, first: int = 0, last: int | None = None) -> None:
        """Replace every code c of y by mapping[c] in rows `first` to `last` (default:
        every row written), one chunk at a time (`first` starts a chunk)."""
        last = self.n if last is None else last
        for start in range(first, last, self.chunk_rows):
            stop = min(start + self.chunk_rows, last)
            with interrupts_deferred():
                self.y[start:stop] = mapping[self.y[start:stop]]

    def finish(self, fmt: str, src: Path, feature_names: list | None, target_names: list, *,
               classes=None, dropped: int = 0, read_as: dict[str, Any] | None = None,
               like: str | None = None, guessed: bool = False, labels_fix: str | None = None) -> dict[str, Any]:
        """Trim the arrays to the rows written, write the group attributes of the dkrr
        layout (one metadata write: ``attrs.update`` writes per key) and return the
        reader's summary fields.

        `read_as` holds how the file was read (``index_base``; ``delimiter``,
        ``header``, ``target_columns``), recorded so that ``like=`` can read another
        file the same way; `like` is the store whose layout was followed; `labels_fix` the
        advice of the continuous-labels refusal where it is not "leave out --labels".
        `feature_names` None: the columns have no names (LIBSVM's indices), none is
        recorded (a name per index made a 486 MB attribute of a 40-byte file whose one
        index was 20,000,000).
        """
        n_features = int(self.X.shape[1])
        attrs: dict[str, Any] = {
            "dkrr_layout": LAYOUT_VERSION,
            **({} if feature_names is None else {"feature_names": feature_names}),
            "target_names": target_names,
            "source": str(src),
            "format": fmt,
            "n_features": n_features,
            **(read_as or {}),
        }
        if classes is not None:
            from .._labels import continuous_labels

            why = None if like is not None else continuous_labels(classes, repr(target_names[0]), self.n, labels_fix)
            if why:  # --labels on a measured column: one class per distinct value, fitted without a word
                raise InputValidationError(f"{src}: {why}")
            attrs["classes"] = classes
        if dropped:
            attrs["rows_dropped"] = dropped
        if like is not None:
            attrs["like"] = like
        with interrupts_deferred():
            if self.X.shape[0] != self.n:
                _resize(self.n, self.X, self.y)
            attrs[MANIFEST] = manifest({"X": self.X, **({} if self.y is None else {"y": self.y})})
            self.group.update_attributes(attrs)
        return {
            "n_rows": self.n, "n_features": n_features, "n_targets": len(target_names),
            "feature_names": [] if feature_names is None else feature_names, "target_names": target_names,
            "classes": classes,
            "index_base": attrs.get("index_base"), "index_base_guessed": guessed, "rows_dropped": int(dropped),
        }


def _resize(rows: int, *arrays: Any) -> None:
    """Resize each array (None: a store without y) to `rows` rows."""
    for a in arrays:
        if a is not None:
            a.resize((rows,) + a.shape[1:])


def open_arrays(path: Any) -> tuple[Any, Any]:
    """The arrays ``X`` and ``y`` (None in a store without a target) of a store being
    written (by :class:`StoreWriter`), for a task that writes some of their chunks;
    all-zero chunks are written too, as the manifest promises."""
    # an array reads zarr's configuration when it is opened (Array.with_config: zarr >= 3.1.6)
    with zarr.config.set({"array.write_empty_chunks": True}):
        group = zarr.open_group(store=zarr_location(path), mode="r+")  # a local path or a URL's store
        return group["X"], (group["y"] if "y" in group else None)


class ChunkSink:
    """Row blocks in, whole chunks out.

    Rows are written to ``X`` and ``y`` from row `row` on, in writes of whole chunks of
    `chunk_rows` rows (a partial one only at :meth:`flush`), so that tasks writing
    different runs of chunks never write the same chunk. With `grow` the arrays are
    resized as rows arrive (one writer); without, they are already large enough.
    """

    def __init__(self, X: Any, y: Any, row: int, chunk_rows: int, grow: bool):
        self.X, self.y = X, y
        self.row = row
        self.chunk_rows = chunk_rows
        self.grow = grow
        self._X: list[np.ndarray] = []
        self._y: list[np.ndarray] = []
        self._pending = 0

    def add(self, Xb: np.ndarray, yb: np.ndarray) -> int:
        """Queue rows; write the whole chunks they complete. Returns the chunks written."""
        if Xb.shape[0] == 0:
            return 0
        self._X.append(Xb)
        self._y.append(yb)
        self._pending += Xb.shape[0]
        full = self._pending // self.chunk_rows * self.chunk_rows
        if not full:
            return 0
        Xs = np.concatenate(self._X) if len(self._X) > 1 else self._X[0]
        ys = np.concatenate(self._y) if len(self._y) > 1 else self._y[0]
        self._write(Xs[:full], ys[:full])
        rest = self._pending - full
        self._X, self._y = ([Xs[full:]], [ys[full:]]) if rest else ([], [])
        self._pending = rest
        return full // self.chunk_rows

    def flush(self) -> int:
        """Write the rows still queued (the input's last, partial chunk)."""
        if not self._pending:
            return 0
        self._write(np.concatenate(self._X), np.concatenate(self._y))
        self._X, self._y, self._pending = [], [], 0
        return 1

    def _write(self, Xb: np.ndarray, yb: np.ndarray) -> None:
        end = self.row + Xb.shape[0]
        with interrupts_deferred():
            if self.grow and end > self.X.shape[0]:
                _resize(end, self.X, self.y)
            self.X[self.row:end] = Xb
            if self.y is not None:
                self.y[self.row:end] = yb
        self.row = end


def cast_checked(
    values: np.ndarray,
    dtype: np.dtype,
    where: Callable[[int, int], str],
    columns: Sequence[int],
    option: str = "dtype",
) -> np.ndarray:
    """Cast to `dtype`, refusing NaN/inf and values that overflow `dtype` (`option`:
    the ingest option that sets `dtype`, named in the fix)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = values.astype(dtype, copy=False)
    check_cast(out, lambda i, k: values[i, k] if values.ndim == 2 else values[i],
               where, columns, option)
    return out


def check_cast(
    out: np.ndarray,
    original: Callable[[int, int], float],
    where: Callable[[int, int], str],
    columns: Sequence[int],
    option: str = "dtype",
) -> None:
    """Refuse a cast block `out` holding NaN or inf: the first in row order is named
    with ``where(i, columns[k])`` and its value before the cast, ``original(i, k)``
    (finite there: too large for the dtype)."""
    if np.isfinite(out).all():
        return
    bad = np.argwhere(~np.isfinite(out))[0]
    i, k = int(bad[0]), (int(bad[1]) if out.ndim == 2 else 0)
    value = original(i, k)
    location = where(i, columns[k])
    if np.isfinite(value):
        raise NonFiniteInputError(
            f"{location}: value {float(value)!r} is too large for {out.dtype}; "
            f"ingest with {option}='float64' (--{option.replace('_', '-')} float64)"
        )
    fix = (
        "pass missing='drop' (--missing drop) to leave out rows with NaN or missing "
        "values, or impute them before ingesting"
        if np.isnan(value)
        else "remove or clip infinite values before ingesting"
    )
    raise NonFiniteInputError(
        f"{location}: value is {float(value)!r}; dkrr needs finite numbers -- {fix}"
    )


def nan_rows(*blocks: np.ndarray) -> np.ndarray:
    """Rows holding a NaN in any of the (1-D or 2-D) blocks."""
    bad = np.zeros(blocks[0].shape[0], dtype=bool)
    for b in blocks:
        nan = np.isnan(b)
        bad |= nan.any(axis=1) if nan.ndim == 2 else nan
    return bad


class MissingRows:
    """Rows with missing cells, gathered over the whole input for one error message."""

    def __init__(self, src: Path, names: Sequence[str],
                 where: Callable[[int, int], str] | None = None, hint: str = ""):
        self.src = src
        self.hint = hint  # the fix to name when only the last column has missing cells
        self.names = names
        self.where = where or (lambda line, j: f"line {line}, column {j} ({names[j]!r})")
        self.count = 0
        self.shown: list[str] = []
        self.per_column: Counter[int] = Counter()
        self.nan_rows = 0  # rows with no missing cell but a NaN value: missing="drop" drops them too
        self.nan_first: str | None = None

    def add(self, absent: np.ndarray, numbers: Sequence[int], cells: Callable[[int], list[str]]):
        """Record the rows of a block; `absent` is (rows, columns) True where missing."""
        rows = np.flatnonzero(absent.any(axis=1))
        self.count += rows.size
        for j, c in enumerate(absent[rows].sum(axis=0)):
            if c:
                self.per_column[j] += int(c)
        for i in rows[: MAX_ROWS_SHOWN - len(self.shown)]:
            j = int(np.flatnonzero(absent[i])[0])
            self.shown.append(f"{self.where(numbers[i], j)}: {cells(int(i))[j]!r}")

    def add_nan(self, nan: np.ndarray, absent: np.ndarray | None, numbers: Sequence[int]) -> None:
        """Record a block's rows holding NaN (`nan`: (rows, columns), True at a NaN value)
        and no missing cell (`absent` as in :meth:`add`, or None): a literal ``NaN``."""
        rows = np.flatnonzero(nan.any(axis=1) & ~(absent.any(axis=1) if absent is not None else False))
        self.nan_rows += rows.size
        if rows.size and self.nan_first is None:
            i = int(rows[0])
            self.nan_first = self.where(numbers[i], int(np.flatnonzero(nan[i])[0]))

    def merge(self, other: MissingRows) -> None:
        """Add the rows gathered by `other` (from a later part of the same input)."""
        self.nan_rows += other.nan_rows
        self.nan_first = self.nan_first or other.nan_first
        self.count += other.count
        self.per_column.update(other.per_column)
        self.shown.extend(other.shown[: MAX_ROWS_SHOWN - len(self.shown)])

    def error(self) -> MissingValueError:
        rows = "row has" if self.count == 1 else "rows have"
        more = "; ..." if self.count > len(self.shown) else ""
        columns = ", ".join(
            f"{self.names[j]!r} ({c} row{'s' if c > 1 else ''})"
            for j, c in sorted(self.per_column.items())
        )
        return MissingValueError(
            f"{self.src}: {self.count} {rows} missing values (empty or NA cells): "
            f"{'; '.join(self.shown)}{more}. Missing per column: {columns}. A missing cell is "
            f"not a value: a numeric column with missing cells stays numeric (it is not read as labels), "
            f"and a label column gets no class for them; "
            + (self.hint if self.hint and set(self.per_column) == {len(self.names) - 1} else MISSING_FIX)
            + (f". Besides these, {self.nan_rows} row{'s hold' if self.nan_rows > 1 else ' holds'} NaN (first "
               f"{self.nan_first}), which --missing drop leaves out too" if self.nan_rows else "")
        )


def call_progress(progress, rows: int, done: int, total: int) -> None:
    if progress is not None:
        progress(rows, done, total)
