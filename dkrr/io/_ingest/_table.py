"""What every table reader of ingest shares: the layout, blocks of numbers, label codes,
and the loop that writes the blocks of one segment into the store.

A reader (:mod:`._csv`, :mod:`._parquet`) turns its input into :class:`Block` objects
(float64 values per numeric column, label codes, missing cells); :func:`convert_blocks`
drops or gathers the rows with missing cells, casts and checks the values
(:func:`numbers`) and writes whole chunks (:class:`._writer.ChunkSink`). Labels are
coded per segment (:class:`LocalLabels`) and made classes at the end
(:func:`merged_classes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputValidationError, NonFiniteInputError
from ._columns import names_hint
from ._segments import Segment, SegmentResult
from ._text import MISSING_MARKERS, to_float
from ._writer import ChunkSink, MissingRows, check_cast, open_arrays


def cell_name(row_word: str, row: int, j: int, names) -> str:
    """``line 5, column 1 ('b')`` or ``row 4 (0-based), column 1 ('b')``."""
    where = f"line {row}" if row_word == "line" else f"row {row} (0-based)"
    return f"{where}, column {j} ({names[j]!r})"


@dataclass(frozen=True)
class TableLayout:
    """How the columns of a table become ``X`` and ``y``: everything a task needs
    (picklable).

    ``names`` are the input's columns (``feature_cols`` and ``target_cols`` index them);
    ``label_col`` is the target column when it holds class labels (else None).
    ``row_word`` is how messages name a row: ``"line"`` (CSV: the line number) or
    ``"row"`` (Parquet: the 0-based row of the dataset). CSV only: ``delimiter``,
    ``shape_origin`` (the line that fixed the number of columns) and ``target_hint``
    (appended to the error for a target cell that is not a number). Parquet only:
    ``partitions``, the hive partition columns (``key=value/`` folders) and their types.
    ``missing_hint`` replaces the missing cells' fix when only the last column has them
    (CSV lines that end with the delimiter: ``missing="drop"`` would drop every row).
    """

    src: str
    names: tuple[str, ...]
    feature_cols: tuple[int, ...]
    target_cols: tuple[int, ...]
    scalar: bool
    label_col: int | None
    x_dtype: str
    y_dtype: str
    missing: str
    chunk_rows: int
    block_bytes: int
    delimiter: str | None = ","
    shape_origin: str = ""
    target_hint: str = ""
    row_word: str = "line"
    partitions: dict = field(default_factory=dict)
    missing_hint: str = ""

    @property
    def n_cols(self) -> int:
        return len(self.names)

    @property
    def numeric_cols(self) -> list[int]:
        """The columns read as numbers: features, and targets unless they are labels."""
        return list(self.feature_cols) + ([] if self.label_col is not None else list(self.target_cols))

    def where(self, row: int, j: int) -> str:
        """``line 5, column 1 ('b')`` (or ``row 4 (0-based), ...``): a cell, for messages."""
        return cell_name(self.row_word, row, j, self.names)


def _nan_cells(layout, block) -> np.ndarray:
    """(rows, columns) True where a numeric column's value is NaN: a missing cell's, or a
    literal ``NaN`` (``missing="drop"`` drops both; :meth:`MissingRows.add_nan` counts the
    rows of the second kind)."""
    nan = np.zeros((block.rows, layout.n_cols), dtype=bool)
    for j in layout.numeric_cols:
        nan[:, j] = np.isnan(block.values[j])
    return nan


@dataclass
class Block:
    """The numbers of one block.

    ``values`` maps each numeric column to its float64 values (NaN where a cell is
    missing); ``codes`` holds the label codes (-1: missing) when the target is a label
    column; ``absent`` is (rows, columns), True where a cell is missing, or None when
    none is; ``lines[i]`` is the number of row i in messages (its line, or its row in the
    dataset) and ``cells(i)`` gives the cells of row i as read (for messages).
    """

    rows: int
    values: dict[int, np.ndarray]
    codes: np.ndarray | None
    absent: np.ndarray | None
    lines: Any
    cells: Callable[[int], list[Any]]


class LocalLabels:
    """Label codes of one segment, in order of first appearance (remapped at the end)."""

    def __init__(self):
        self.codes: dict[str, int] = {}
        self.present = np.zeros(0, dtype=bool)

    def encode(self, column: pa.ChunkedArray, markers: bool = True) -> np.ndarray:
        """int32 codes of a string column (whitespace-stripped; -1 for a missing cell: a
        null, an empty cell, and with `markers` a text's missing-value marker such as
        ``NA``; a typed string column, Parquet's, has nulls for that and ``NA`` is a label,
        North America's)."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        encoded = pc.dictionary_encode(pc.utf8_trim_whitespace(pc.fill_null(column, "")))
        missing = MISSING_MARKERS if markers else {""}
        lookup = np.array(
            [-1 if v.lower() in missing else self.codes.setdefault(v, len(self.codes))
             for v in encoded.dictionary.to_pylist()] or [-1],
            dtype=np.int32,
        )
        return lookup[encoded.indices.to_numpy(zero_copy_only=False)]

    def seen(self, codes: np.ndarray) -> None:
        """Record the codes stored (those of rows that were kept)."""
        if self.present.size < len(self.codes):
            self.present = np.pad(self.present, (0, len(self.codes) - self.present.size))
        self.present[codes[codes >= 0]] = True

    def stored(self) -> list[tuple[str, bool]]:
        """``(label, whether stored)`` in code order."""
        self.seen(np.empty(0, dtype=np.int32))
        return [(label, bool(self.present[c])) for label, c in self.codes.items()]


def merged_classes(stored: list[list[tuple[str, bool]]], fixed: list[str] | None,
                   where: str) -> tuple[list[str], list[np.ndarray | None]]:
    """The classes of a label column coded per segment, and each segment's code mapping.

    `stored` holds, per segment, ``(label, whether stored)`` in code order. Classes are
    the stored labels, sorted (as numbers when all are numbers), or `fixed` (the classes
    of a ``like`` store: a label that is not in it is an error; `where` names the file).
    A mapping is None where the codes are already the classes' indices.
    """
    labels = list(dict.fromkeys(lab for seg in stored for lab, kept in seg if kept))
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
    mappings: list[np.ndarray | None] = []
    for seg in stored:
        mapping = np.array([rank.get(lab, -1) for lab, _ in seg], dtype=np.int32)
        mappings.append(None if np.array_equal(mapping, np.arange(mapping.size)) else mapping)
    return classes, mappings


def numbers(layout: TableLayout, block, keep: np.ndarray | None):
    """``(X, y)`` of a block's rows (those in `keep`, or all), cast and checked finite."""
    x_dtype, y_dtype = np.dtype(layout.x_dtype), np.dtype(layout.y_dtype)
    rows = np.arange(block.rows) if keep is None else keep

    def pick(v):
        return v if keep is None else v[keep]

    def where(i: int, j: int) -> str:
        return layout.where(block.lines[rows[i]], j)

    features = list(layout.feature_cols)
    X = np.empty((rows.size, len(features)), dtype=x_dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for k, j in enumerate(features):
            X[:, k] = pick(block.values[j])
    check_cast(X, lambda i, k: block.values[features[k]][rows[i]], where, features)
    if layout.label_col is not None:
        return X, pick(block.codes).astype(np.int32, copy=False)
    targets = list(layout.target_cols)
    with np.errstate(over="ignore", invalid="ignore"):
        if layout.scalar:
            y = pick(block.values[targets[0]]).astype(y_dtype)
        else:
            y = np.empty((rows.size, len(targets)), dtype=y_dtype)
            for k, j in enumerate(targets):
                y[:, k] = pick(block.values[j])
    check_cast(y, lambda i, k: block.values[targets[k]][rows[i]], where, targets, "y_dtype")
    return X, y


def convert_blocks(layout: TableLayout, store: str, seg: Segment, blocks: Iterator[Block],
                   labels: LocalLabels | None, position: Callable[[], int], base: int,
                   report=None, cancelled=None) -> SegmentResult:
    """Write the rows of `blocks` (one segment) into the store (run by a task).

    Bad data is returned in the result, not raised (see :mod:`._segments`): an
    :class:`InputValidationError` from `blocks` (a parse or read error) ends the segment;
    after a missing cell (``missing="error"``) or a non-finite value nothing more is
    written, but the rest is read for missing cells and errors. ``report(rows, nbytes)``
    is called once per chunk written and per block read without writing; `position()`
    tells the bytes read so far (`base` at the segment's start); ``cancelled()`` true
    stops the task at its next block.
    """
    result = SegmentResult(seg.index)
    missing = MissingRows(layout.src, layout.names, layout.where, layout.missing_hint)
    told = [base, 0]  # bytes and rows reported so far

    def tell(sink: ChunkSink | None = None) -> None:
        """Report the bytes read since the last call, and one call per chunk written."""
        written = told[1] if sink is None else sink.row - seg.row
        while True:
            now = position()
            rows = min(layout.chunk_rows, written - told[1])
            result.nbytes += now - told[0]
            if report is not None:
                report(rows, now - told[0])
            told[:] = [now, told[1] + rows]
            if told[1] >= written:
                return

    sink = ChunkSink(*open_arrays(store), seg.row, layout.chunk_rows, grow=seg.rows is None)
    while not (cancelled is not None and cancelled()):
        try:
            block = next(blocks, None)
        except InputValidationError as exc:
            result.error = exc
            break
        if block is None:
            if not missing.count and result.nonfinite is None and sink.flush():
                tell(sink)
            break
        keep = None
        if layout.missing == "drop":
            drop = _nan_cells(layout, block).any(axis=1)
            if block.codes is not None:
                drop |= block.codes < 0
            if drop.any():
                result.dropped += int(drop.sum())
                keep = np.flatnonzero(~drop)
        elif block.absent is not None or missing.count or result.nonfinite is not None:
            # keep reading to name every row with a missing cell, write nothing
            if block.absent is not None:
                missing.add(block.absent, block.lines, block.cells)
            missing.add_nan(_nan_cells(layout, block), block.absent, block.lines)
            tell()
            continue
        try:
            Xb, yb = numbers(layout, block, keep)
        except NonFiniteInputError as exc:
            result.nonfinite = exc
            missing.add_nan(_nan_cells(layout, block), block.absent, block.lines)  # said if missing cells follow
            if seg.index == 0:  # nothing comes before it: the error is certain
                break
            tell()
            continue
        if labels is not None:
            labels.seen(yb)
        if sink.add(Xb, yb):
            tell(sink)
        del block, Xb, yb
    result.rows = sink.row - seg.row
    result.missing = missing if missing.count or missing.nan_rows else None
    result.labels = labels.stored() if labels is not None else None
    return result
