"""One block of CSV lines into numbers, with pyarrow's CSV reader.

A block is a run of whole lines (:class:`._text.BlockReader`). pyarrow parses it in one
call, every feature and numeric target column as float64 and a label column as strings
(the fast path). When that fails -- a cell that is not a number, a missing-value marker
such as ``NA``, a whitespace-only line, a row with the wrong number of fields -- the
block is parsed again with every column as a string and checked cell by cell with
pyarrow's compute functions (the slow path), which finds the first bad cell in row
order and names its line and column, or marks the missing cells. Errors are the same
as the hand-written parser's before it (``line 5, column 1 ('b'): cannot parse 'oops'
as a number``).

Numbers are what Python's ``float`` reads (``1e5``, ``.5``, ``inf``, ``nan``, with
surrounding whitespace), digit separators (``1_000``) excepted; pyarrow also reads
``nan(...)`` as NaN and refuses non-ASCII digits. Missing cells are the markers of
:data:`._text.MISSING_MARKERS` (case-insensitive, whitespace-stripped); ``nan`` is a
number (NaN) in a numeric column and a missing label in a label column; in telling
whether a target holds labels (:func:`target_text`), it is a missing cell, not a number.

Lines are numbered from the block's first line; blank lines (empty, or whitespace only)
are not rows. A quoted field that spans lines, or a carriage return that ends a line
without a line feed, is refused with its line: row numbers would not match lines.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from ...errors import InputValidationError
from ._table import Block, LocalLabels, TableLayout
from ._text import MISSING_MARKERS

#: what Python's float() reads, without digit separators (checked by the tests against float())
NUMBER = r"^[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))$"
#: the numbers of NUMBER that are not finite (NaN, infinities)
NON_FINITE = r"^[+-]?(?i:inf|infinity|nan)$"
#: markers of a missing cell in a numeric column ("nan" is a number there)
_NUMERIC_MARKERS = pa.array(sorted(MISSING_MARKERS - {"nan"}))
_MARKERS = pa.array(sorted(MISSING_MARKERS))
#: whitespace bytes of a blank line (and of the separators of whitespace-delimited text)
_WS = np.zeros(256, dtype=bool)
_WS[list(b" \t\r\x0b\x0c")] = True
_WS_EDGES = re.compile(rb"^[ \t\r\x0b\x0c]+|[ \t\r\x0b\x0c]+$", re.MULTILINE)
_WS_RUNS = re.compile(rb"[ \t\x0b\x0c]+")
_BLANK_LINES = re.compile(rb"^[ \t\r\x0b\x0c]+(?:\n|\Z)", re.MULTILINE)


def line_ends(data) -> tuple[np.ndarray, np.ndarray]:
    """The offset after each line of `data` (bytes-like; a last line without a break
    included) and whether each line is a row, i.e. not blank (empty or whitespace only)."""
    x = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(x == 10) + 1
    if x.size and x[-1] != 10:
        ends = np.append(ends, x.size)
    starts = np.concatenate(([0], ends[:-1])).astype(np.int64)
    lengths = ends - starts - (x[np.maximum(ends - 1, 0)] == 10)  # without the break
    blank = lengths == 0
    # a line that starts with whitespace may be blank: count its other bytes
    candidates = np.flatnonzero(~blank & _WS[x[np.minimum(starts, max(x.size - 1, 0))]])
    if candidates.size > 256:
        other = ~_WS[x] & (x != 10)
        counts = np.add.reduceat(other.astype(np.int32), starts)
        blank[candidates] = counts[candidates] == 0
    else:
        for k in candidates:
            blank[k] = not bytes(data[starts[k]:starts[k] + lengths[k]]).strip(b" \t\r\x0b\x0c")
    return ends, ~blank


def blank_lines(data) -> np.ndarray:
    """Whether each line of `data` is blank (empty or whitespace only)."""
    return ~line_ends(data)[1]


class LineNumbers:
    """The line number of each row of a block (computed only when a message needs it)."""

    def __init__(self, data: bytes, first_line: int, contiguous: bool):
        self._data = data
        self._first = first_line
        self._index: np.ndarray | None = None if contiguous else np.flatnonzero(~blank_lines(data))

    def __getitem__(self, i: int) -> int:
        if self._index is None:
            return self._first + int(i)
        return self._first + int(self._index[i])


#: bytes pyarrow parses and converts at a time: its parsed cells then stay in the cache
#: while each column is converted (2.3x faster than one 32 MB block: 164 against 72 MB
#: per CPU-second for 28 float columns, measured on the development VM). A row must fit
#: in one: a block with a longer line is parsed whole.
ARROW_BLOCK = 256 * 2**10


def _options(layout: TableLayout, types: dict[str, pa.DataType], size: int, strings: bool,
             quoted: bool = True, piece: int | None = None):
    """pyarrow's options for a block of `size` bytes parsed in pieces of `piece` bytes
    (None: whole): the columns of `types` converted, empty cells null unless `strings`;
    `quoted` false: the block holds no quote, so quoting is off (a little faster)."""
    names = [f"c{j}" for j in range(layout.n_cols)]
    # one thread: a task parses its block while the other tasks parse theirs
    read = pa_csv.ReadOptions(column_names=names, use_threads=False,
                              block_size=max(size + 1, 1 << 20) if piece is None else piece)
    parse = pa_csv.ParseOptions(
        delimiter="\t" if layout.delimiter is None else layout.delimiter,
        quote_char=False if layout.delimiter is None or not quoted else '"',
        newlines_in_values=False, ignore_empty_lines=True,
    )
    convert = pa_csv.ConvertOptions(
        column_types=types, check_utf8=False, strings_can_be_null=False,
        null_values=[] if strings else [""], quoted_strings_can_be_null=not strings,
        include_columns=list(types),  # other columns are split (counted), not converted
    )
    return read, parse, convert


def _read(data: bytes, options) -> pa.Table:
    read, parse, convert = options
    return pa_csv.read_csv(pa.BufferReader(data), read_options=read, parse_options=parse,
                           convert_options=convert)


def split_line(line: str, delimiter: str | None) -> list[str]:
    """The cells of one line as Python's csv module reads them (whitespace: str.split)."""
    import csv

    if delimiter is None:
        return line.split()
    return next(csv.reader([line], delimiter=delimiter), [])


def _text_lines(data: bytes, first_line: int):
    """``(number, line)`` of the non-blank lines of `data`."""
    for k, raw in enumerate(data.split(b"\n")):
        if raw.strip(b" \t\r\x0b\x0c"):
            yield first_line + k, raw.decode("utf-8").rstrip("\r")


def _shape_error(layout: TableLayout, line: int, n: int) -> InputValidationError:
    sep = "whitespace" if layout.delimiter is None else repr(layout.delimiter)
    return InputValidationError(
        f"line {line} has {n} fields but {layout.shape_origin} has {layout.n_cols} "
        f"(delimiter {sep}); every row needs the same number of columns"
    )


def _line_break_error(layout: TableLayout, data, first_line: int, rows: int,
                      lines: int) -> InputValidationError:
    """The error for a block whose rows do not match its lines (pyarrow read `rows`)."""
    data = bytes(data)
    what = (
        "a quoted field spans lines (quoted fields may not contain line breaks)"
        if rows < lines else
        "a carriage return ends a line without a line feed (old Mac line endings: "
        "convert the file to \\n or \\r\\n line endings)"
    )
    for number, line in _text_lines(data, first_line):
        if (rows < lines and line.count('"') % 2) or (rows > lines and "\r" in line):
            return InputValidationError(f"{layout.src}: line {number}: {what}")
    last = first_line + data.count(b"\n")
    return InputValidationError(f"{layout.src}: lines {first_line} to {last}: {what}")


def parse_block(layout: TableLayout, data, first_line: int, labels: LocalLabels | None,
                n_lines: int) -> Block:
    """The numbers of the `n_lines` lines in `data` (bytes-like; `first_line`: the number
    of its first line).

    Raises
    ------
    InputValidationError
        A row with the wrong number of fields, a cell of a numeric column that is neither
        a number nor a missing-value marker (the first in row order, with its line and
        column), or lines that are not rows (a quoted field spanning lines, a lone
        carriage return).
    """
    text = _normalised(layout, data)
    types = {f"c{j}": pa.float64() for j in layout.numeric_cols}
    if layout.label_col is not None:
        types[f"c{layout.label_col}"] = pa.string()
    table = None
    quoted = layout.delimiter is not None and _has_quote(text)
    try:
        table = _read(text, _options(layout, types, len(text), strings=False, quoted=quoted,
                                     piece=ARROW_BLOCK))
    except pa.ArrowInvalid:  # a bad cell, or a line longer than ARROW_BLOCK: whole
        try:
            table = _read(text, _options(layout, types, len(text), strings=False, quoted=quoted))
        except pa.ArrowInvalid:
            pass
    codes = None
    if table is not None:
        missing = any(table.column(f"c{j}").null_count for j in layout.numeric_cols)
        if layout.label_col is not None:
            codes = labels.encode(table.column(f"c{layout.label_col}"))
            missing = missing or bool((codes < 0).any())
        if missing and layout.missing != "drop":
            table = None  # the slow path names the missing cells, with their text
    if table is None:
        return _parse_slow(layout, data, first_line, labels)
    values = {j: table.column(f"c{j}").to_numpy() for j in layout.numeric_cols}
    lines = _line_numbers(layout, data, first_line, table.num_rows, n_lines)
    return Block(table.num_rows, values, codes, None, lines, lambda i: [])


def _line_numbers(layout: TableLayout, data, first_line: int, rows: int,
                  n_lines: int) -> LineNumbers:
    """The line numbers of the `rows` rows pyarrow read from the `n_lines` lines of `data`
    (blank lines are not rows); rows that do not match lines are an error."""
    contiguous = rows == n_lines
    if not contiguous:
        expected = int((~blank_lines(data)).sum())
        if rows != expected:
            raise _line_break_error(layout, data, first_line, rows, expected)
    return LineNumbers(data, first_line, contiguous)


def _has_quote(data) -> bool:
    return bool(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 34))


def _normalised(layout: TableLayout, data: bytes) -> bytes:
    """`data` as pyarrow reads it: whitespace-separated text with one tab between cells
    and none at the line ends (so that a whitespace-only line is empty)."""
    if layout.delimiter is None:
        return _WS_RUNS.sub(b"\t", _WS_EDGES.sub(b"", data))
    return data


def _parse_slow(layout: TableLayout, data, first_line: int,
                labels: LocalLabels | None) -> Block:
    """Every column as strings, checked cell by cell (see the module docstring)."""
    data = bytes(data)
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    text = _normalised(layout, data)
    if layout.delimiter is not None and _BLANK_LINES.search(text):
        text = _BLANK_LINES.sub(b"", text)  # whitespace-only lines are blank, not rows
    used = sorted({*layout.feature_cols, *layout.target_cols})
    types = {f"c{j}": pa.string() for j in used}
    try:
        table = _read(text, _options(layout, types, len(text), strings=True))
    except pa.ArrowInvalid as exc:
        raise _find_shape_error(layout, data, first_line, labels, exc) from None
    rows = table.num_rows
    lines = _line_numbers(layout, data, first_line, rows, n_lines)
    trimmed = {j: pc.utf8_trim_whitespace(table.column(f"c{j}")) for j in layout.numeric_cols}
    bad_row, bad_col = rows, -1
    numbers = {}
    for j in layout.numeric_cols:
        is_number = pc.match_substring_regex(trimmed[j], NUMBER)
        is_marker = pc.is_in(pc.utf8_lower(trimmed[j]), value_set=_NUMERIC_MARKERS)
        bad = ~(is_number.to_numpy(zero_copy_only=False) | is_marker.to_numpy(zero_copy_only=False))
        if bad.any():
            first = int(np.argmax(bad))
            if first < bad_row:  # columns in order: a tie keeps the first column
                bad_row, bad_col = first, j
        numbers[j] = is_number
    if bad_col >= 0:
        cell = table.column(f"c{bad_col}")[bad_row].as_py()
        is_target = bad_col in layout.target_cols
        raise InputValidationError(
            f"line {lines[bad_row]}, {'target column' if is_target else 'column'} "
            f"{bad_col} ({layout.names[bad_col]!r}): cannot parse {cell!r} as a number"
            + (layout.target_hint if is_target else "; feature columns must be numeric")
        )
    absent = np.zeros((rows, layout.n_cols), dtype=bool)
    values = {}
    for j in layout.numeric_cols:
        filled = pc.if_else(numbers[j], trimmed[j], "nan")
        values[j] = pc.cast(filled, pa.float64()).to_numpy()
        absent[:, j] = ~numbers[j].to_numpy(zero_copy_only=False)
    codes = None
    if layout.label_col is not None:
        codes = labels.encode(table.column(f"c{layout.label_col}"))
        absent[:, layout.label_col] = codes < 0

    def cells(i: int) -> list[str]:
        return [table.column(f"c{j}")[i].as_py() if j in used else "" for j in range(layout.n_cols)]

    return Block(rows, values, codes, absent if absent.any() else None, lines, cells)


def _find_shape_error(layout: TableLayout, data: bytes, first_line: int,
                      labels: LocalLabels | None, exc: Exception) -> InputValidationError:
    """The error for a block pyarrow cannot split into rows: the first line with the
    wrong number of fields, unless a line before it has a bad cell (rows are checked
    in order)."""
    offset = 0
    for number, line in _text_lines(data, first_line):
        n = len(split_line(line, layout.delimiter))
        if n != layout.n_cols:
            head = data[:offset]
            if head.strip():
                _parse_slow(layout, head, first_line, labels)  # raises for a bad cell
            return _shape_error(layout, number, n)
        offset = _line_end(data, offset)
    last = first_line + data.count(b"\n")
    return InputValidationError(f"{layout.src}: cannot read lines {first_line} to {last} "
                                f"as CSV: {exc}")


def _line_end(data: bytes, offset: int) -> int:
    """The offset after the next non-blank line at or after `offset` (blank lines
    before it are skipped, as :func:`_text_lines` does)."""
    while True:
        nl = data.find(b"\n", offset)
        end = len(data) if nl < 0 else nl + 1
        if data[offset:end].strip(b" \t\r\x0b\x0c"):
            return end
        offset = end



def target_text(layout: TableLayout, data: bytes, column: int,
                first_line: int) -> tuple[int, tuple[int, str] | None]:
    """The cells of `column` in the lines `data` (the first at line `first_line`): how many
    are numbers, and the first that is neither a number nor a missing-value marker as
    ``(line, cell)``, or None (the test that makes a target column a label column; a
    column of numbers with such a cell is a numeric target with a bad cell).

    A NaN (``nan``, ``NaN``: what pandas writes for a missing label) is not counted: it is
    a missing cell in a label column as ``NA`` is, and a NaN target value in a numeric
    one. Infinities count only beside a finite number: a column of text whose only
    "numbers" are ``inf`` holds no number a regression could use, so it is read as labels
    (``inf`` one of them, as pandas reads it) rather than refused as a typo."""
    from ._text import is_missing, to_float

    def counted(values) -> int:  # the floats of the cells that are numbers (see above)
        finite = sum(math.isfinite(v) for v in values)
        return finite + sum(math.isinf(v) for v in values) if finite else 0

    def scan():  # (line, cell) of every row, in Python: rows of other lengths, or to name the line
        for line, text in _text_lines(data, first_line):
            row = split_line(text, layout.delimiter)
            yield line, (row[column].strip() if len(row) > column else "0")

    def first_text():
        return next(((line, c) for line, c in scan() if to_float(c) is None and not is_missing(c)), None)

    text = _normalised(layout, data)
    read, parse, convert = _options(layout, {f"c{column}": pa.string()}, len(text), strings=True)
    try:
        cells = pc.utf8_trim_whitespace(_read(text, (read, parse, convert)).column(0))
    except pa.ArrowInvalid:  # rows of other lengths (the conversion names them)
        return counted([v for v in (to_float(c) for _, c in scan()) if v is not None]), first_text()
    number = pc.match_substring_regex(cells, NUMBER)
    marker = pc.is_in(pc.utf8_lower(cells), value_set=_MARKERS)
    non_finite = pc.and_(number, pc.match_substring_regex(cells, NON_FINITE))
    infinite = pc.and_(non_finite, pc.invert(pc.match_substring_regex(cells, r"(?i)nan")))
    finite = int(pc.sum(number).as_py() or 0) - int(pc.sum(non_finite).as_py() or 0)
    numbers = finite + int(pc.sum(infinite).as_py() or 0) if finite else 0
    return numbers, None if pc.all(pc.or_(number, marker)).as_py() else first_text()
