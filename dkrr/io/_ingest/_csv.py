"""CSV (or whitespace-separated) text into a dkrr store, parsed by pyarrow, in parallel.

Steps:

1. The first two non-blank lines decide the header and the columns (Python's ``csv``
   module reads them; :func:`detect_header`), and the rows per chunk follow a byte
   budget (:func:`._writer.chunk_rows_for`) from their width.
2. The target's type: labels when ``target_type="labels"``, or when
   ``target_type="auto"`` and one of its cells in the first chunk is neither a number
   nor a missing-value marker while none is a number (numbers and text: an error naming
   the first text cell).
3. Conversion, block by block, with pyarrow's CSV reader (:mod:`._csvblock`). An
   uncompressed file larger than `blocksize` is cut into segments of whole chunks of
   rows by a scan of its line breaks (numpy, at memory speed: :func:`plan_segments`);
   the segments are converted in parallel and each task writes its own chunks straight
   into the store (:mod:`._segments`), which the scan created with room for every row.
   A compressed file, and ``missing="drop"`` (the rows kept, hence the offsets, are
   known only once parsed), are converted in one pass here, the arrays growing.
4. Labels are coded per segment in order of first appearance and remapped at the end
   so that the codes follow the sorted labels (sorted as numbers when every label is a
   number; a ``like`` store's classes when given). A column that is numeric apart from
   empty or ``NA`` cells is numeric with missing values: an error naming the rows, or
   those rows dropped with ``missing="drop"``.

The store's row chunks, values, names and attributes are those of the hand-written
parser this replaced (``tests/test_ingest*.py`` hold both to the same outputs), and the
errors name the same lines and columns.
"""

from __future__ import annotations

import os
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import FeatureMismatchError, HeaderWarning, InputValidationError, InvalidParameterError
from ._columns import index_text, like_positions, names_hint, no_target, split_columns
from ._csvblock import line_ends, parse_block, split_line, target_text
from ._segments import Combiner, Segment, SegmentResult, run_segments
from ._table import LocalLabels, TableLayout, convert_blocks, merged_classes
from ._text import COMPRESSIONS, BlockReader, is_missing, open_binary, to_float
from ._writer import StoreWriter, call_progress, chunk_rows_for

#: bytes of text parsed by one call of pyarrow's reader at most (a block of a segment)
BLOCK_BYTES = 16 * 2**20
#: bytes of an uncompressed CSV converted by one task (``blocksize``), as dask's read_csv
BLOCKSIZE = 64 * 2**20
#: bytes read per step of the scan for line breaks (at most a quarter of blocksize)
_SCAN_BYTES = 16 * 2**20


def csv_row(line: str, delimiter: str | None) -> list[str]:
    """The cells of one line (runs of whitespace when `delimiter` is None)."""
    return split_line(line, delimiter)


def detect_header(first: list[str], second: list[str] | None) -> bool:
    """Whether `first` is a header: one of its cells is text (not a number, not a
    missing-value marker) where `second` has a number."""
    first_numeric = [to_float(c) is not None for c in first]
    if second is None:
        return not any(first_numeric)
    first_text = [not n and not is_missing(c) for n, c in zip(first_numeric, first, strict=True)]
    second_numeric = [to_float(c) is not None for c in second]
    return any(a and b for a, b in zip(first_text, second_numeric, strict=False))


def header_doubt(src: Path, first: list[str], line: int, header: bool | None, has_header: bool) -> None:
    """Warn (:class:`HeaderWarning`) when the first line's role is doubtful: ``header=True``
    takes a line of numbers for the column names, or detection reads as data a line whose
    numbers count the columns from 0 as pandas names them (``df.to_csv(index=False)`` of a
    frame without column names writes ``0,1,2,...``, and ``0,1,2,label`` with a named
    target; ``df.to_csv()`` puts an empty name over its row index first: no text cell over
    a number marks any of them a header)."""
    values = [to_float(c) for c in first]
    shown = ",".join(c.strip() for c in first[:6]) + (",..." if len(first) > 6 else "")
    counted = sum(v is not None for v in values)
    lead = 0 if first[0].strip() else 1  # the empty name over pandas' row index
    if header and has_header and counted == len(values):
        warnings.warn(
            f"{src}: header=True (--header) takes line {line} ({shown}) for the column names, though "
            "each of its cells is a number; if it is a row of data, ingest again with header=False "
            "(--no-header), or leave the header to detection", HeaderWarning, stacklevel=3)
    elif header is None and not has_header and counted >= 3 - lead and values[lead:lead + counted] == [
            float(j) for j in range(counted)]:
        fix = ("; pass header=True (--header) and leave the index column out (features=, --features)"
               if lead else "; if it names the columns, ingest again with header=True (--header)")
        warnings.warn(
            f"{src}: line {line} ({shown}) is read as a row of data, as no text cell of it lies over a "
            "number, though its numbers count the columns as pandas names them"
            + (" after an empty name over its row index (df.to_csv() without index=False)" if lead else "")
            + fix, HeaderWarning, stacklevel=3)


def _labels_at(target: Any, n_cols: int) -> int | None:
    """The column of a labels target before the header is read: the last by default, or
    an index (also as text); None for a name (it needs a header) or several targets."""
    at = index_text(target) if isinstance(target, str) else target
    if target is None:
        return n_cols - 1
    if isinstance(at, (int, np.integer)) and not isinstance(at, bool) and -n_cols <= at < n_cols:
        return int(at) % n_cols
    return None


#: delimiters suggested when a line splits into one field: (character, CLI spelling)
_OTHER_DELIMITERS = ((";", "';'"), ("\t", "tab"), ("|", "'|'"), (",", "','"), (":", "':'"))


def _one_column(src: Path, head: list[str], numbers: list[int], delimiter: str | None,
                no_y: bool = False) -> InputValidationError | None:
    """The error for a first line that is one field: name the delimiter it seems to use
    (`no_y`, a file read without a target: None unless another delimiter fits, as one
    feature column is then a valid input)."""
    sep = "whitespace" if delimiter is None else repr(delimiter)
    cause = f"{src}: line {numbers[0]} is a single field when split at {sep}" + (
        "" if no_y else ", so there is no column left for the features once the target is taken")
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
    if no_y:
        return None
    return InputValidationError(
        f"{cause}; pass the file's delimiter (--delimiter) -- a CSV needs at least one "
        "feature column and a target column"
    )


# ------------------------------------------------------------------ one segment (a task)


def convert_segment(layout: TableLayout, store: str, seg: Segment, report=None,
                    cancelled=None) -> SegmentResult:
    """Convert one segment of the CSV into its rows of the store (run by a task; see
    :func:`._table.convert_blocks`)."""
    reader = BlockReader(Path(layout.src), "CSV", start=seg.start, end=seg.end,
                         first_line=seg.first_line)
    labels = LocalLabels() if layout.label_col is not None else None

    def blocks():
        while True:
            data, first, n_lines = reader.read(layout.block_bytes)
            if not n_lines:
                return
            yield parse_block(layout, data, first, labels, n_lines)

    try:
        return convert_blocks(layout, store, seg, blocks(), labels, reader.bytes_read,
                              0 if seg.index == 0 else seg.start, report, cancelled)
    finally:
        reader.close()


# ------------------------------------------------------------------ the whole file


def _head(src: Path) -> tuple[list[str], list[int], int, int]:
    """The first two non-blank lines (text, with their numbers), the offset after the
    first one, and that of the first byte after a UTF-8 byte order mark (0 or 3)."""
    raw, stream = open_binary(src)
    try:
        bom = 3 if stream.read(3) == b"\xef\xbb\xbf" else 0
    except (OSError, EOFError, zlib.error):
        bom = 0  # the reader below names the problem
    finally:
        if stream is not raw:
            stream.close()
        raw.close()
    reader = BlockReader(src, "CSV", start=bom)
    lines: list[str] = []
    numbers: list[int] = []
    after_first = offset = bom
    try:
        while len(lines) < 2:
            view, number, _ = reader.read(2**16)
            if not len(view):
                break
            data = bytes(view)
            start = 0
            while start < len(data) and len(lines) < 2:
                end = data.find(b"\n", start) + 1 or len(data)
                line = data[start:end]
                if line.strip(b" \t\r\n\x0b\x0c"):
                    lines.append(line.decode("utf-8").rstrip("\r\n") + "\n")
                    numbers.append(number)
                    if len(lines) == 1:
                        after_first = offset + end
                start = end
                number += 1
            offset += len(data)
    finally:
        reader.close()
    return lines, numbers, after_first, bom


def _first_rows(src: Path, start: int, first_line: int, rows: int, size: int) -> bytes:
    """The first `rows` non-blank lines from byte `start` (line `first_line`)."""
    reader = BlockReader(src, "CSV", start=start, first_line=first_line)
    parts: list[bytes] = []
    try:
        while rows > 0:
            data, _, n_lines = reader.read(size)
            if not n_lines:
                break
            ends, kept = line_ends(data)
            count = np.cumsum(kept)
            if count[-1] >= rows:
                parts.append(bytes(data[: ends[int(np.argmax(count >= rows))]]))
                break
            parts.append(bytes(data))
            rows -= int(count[-1])
    finally:
        reader.close()
    return b"".join(parts)


def plan_segments(src: Path, start: int, first_line: int, rows: int, blocksize: int,
                  found: list[int]) -> Iterator[Segment]:
    """Cut the data lines from byte `start` (line `first_line`) into segments of whole
    chunks of `rows` rows and at least `blocksize` bytes, reading the file once.

    Line breaks are located with numpy (at memory speed); blank lines are not rows.
    Segments are yielded as their ends are found, so their conversion starts while the
    scan goes on; the last one reaches the end of the file. `found` receives the number
    of rows (-1 when the scan met a text error: the last segment then starts where the
    scan was and its task meets the error, in file order).
    """
    reader = BlockReader(src, "CSV", start=start, first_line=first_line)
    pending = None  # the last segment found, yielded once the next one is
    seg_start, seg_line, seg_row = start, first_line, 0
    pos, line, row, index = start, first_line, 0, 0
    try:
        while True:
            try:
                data, _, n_lines = reader.read(min(_SCAN_BYTES, max(blocksize // 4, 2**16)))
            except InputValidationError:
                row = -1
                break
            if not n_lines:
                break
            ends, kept = line_ends(data)  # the offset after each line, whether it is a row
            count = np.cumsum(kept)  # rows ended by each line
            # lines that end a chunk: a row, and the rows so far a multiple of `rows`
            for k in np.flatnonzero(kept & ((row + count) % rows == 0)):
                end = pos + int(ends[k])
                if end - seg_start >= blocksize:
                    if pending is not None:
                        yield Segment(index, *pending)
                        index += 1
                    n = row + int(count[k]) - seg_row
                    pending = (seg_start, end, seg_line, seg_row, n)
                    seg_start, seg_line, seg_row = end, line + int(k) + 1, seg_row + n
            pos += len(data)
            line += ends.size
            row += int(count[-1]) if count.size else 0
    finally:
        reader.close()
    if row == seg_row and pending is not None:  # the last segment takes the blank tail
        yield Segment(index, pending[0], None, *pending[2:])
    else:
        if pending is not None:
            yield Segment(index, *pending)
            index += 1
        yield Segment(index, seg_start, None, seg_line, seg_row, max(row - seg_row, 0))
    found.append(row)


def read_csv(src: Path, tmp: Path, *, target, header, delimiter, dtype, y_dtype,
             chunk_rows, n_features, missing, target_type, progress, features=None,
             classes=None, columns=None, like=None, blocksize=BLOCKSIZE, like_file=None,
             **_) -> dict[str, Any]:
    total = os.path.getsize(src)
    head, head_numbers, after_first, bom = _head(src)
    if not head:
        raise InputValidationError(f"{src} has no data rows (the file is empty)")
    if cr := [n for h, n in zip(head, head_numbers) if "\r" in h.rstrip("\r\n")]:
        # csv's "new-line character seen in unquoted field" traceback
        raise InputValidationError(
            f"{src}: line {cr[0]} holds a carriage return inside it: the file ends its lines, or some of them, "
            "with \\r alone (old Mac OS line endings); dkrr reads lines ended by \\n or \\r\\n: convert "
            "it first, e.g. `tr '\\r' '\\n' < FILE > FILE.unix.csv`")
    first = csv_row(head[0], delimiter)
    second = csv_row(head[1], delimiter) if len(head) > 1 else None
    has_header = bool(header)
    if header is None:  # a labels target's text over a number is a label, not a name
        skip = _labels_at(target, len(first)) if target_type == "labels" and len(first) > 1 else None
        has_header = detect_header(*([c for j, c in enumerate(row) if j != skip] if row is not None else None
                                     for row in (first, second)))
    header_doubt(src, first, head_numbers[0], header, has_header)
    n_cols = len(first)
    if n_cols == 1 and (error := _one_column(src, head, head_numbers, delimiter, no_target(target))):
        raise error
    if has_header:
        names = [c.strip() or f"column_{j}" for j, c in enumerate(first)]
        if columns is not None and (names != columns or no_target(target)):
            # the like store's columns, found by name (without a target: with or without it)
            target, features = _by_name(src, names, columns, like, target, features)
            like_file = None
        shape_origin = f"the header (line {head_numbers[0]})"
        start, first_line = after_first, head_numbers[0] + 1
        if len(head) < 2:
            raise InputValidationError(f"{src} has a header but no data rows")
    else:
        names = [f"column_{j}" for j in range(n_cols)]
        shape_origin = f"line {head_numbers[0]}"
        start, first_line = bom, 1
        chosen = [v for option in (target, features) if option is not None
                  for v in (option if isinstance(option, (list, tuple)) else [option])]
        by_name = [c for c in chosen if isinstance(c, str) and index_text(c) is None]  # "3": an index
        if like is not None and by_name:  # a Parquet (or headed CSV) store, across formats: by name
            raise InputValidationError(
                f"{src} has no header, but like={like} gives its columns by name ({names_hint(by_name)}): "
                "give the file a header row naming its columns, or ingest it without like, choosing "
                "the target and features by 0-based index")
    features = like_positions(src, n_cols, features, no_target(target), like_file, like)
    target_cols, feature_cols, scalar = split_columns(src, target, names, n_cols, n_features,
                                                      features, like)
    if has_header and not first[0].strip() and 0 in feature_cols and second and to_float(second[0]) == 0.0:
        warnings.warn(
            f"{src}: column 0 has no name in the header (line {head_numbers[0]}) and its first value is 0: "
            "it looks like the row index pandas writes (df.to_csv() without index=False), read here as a "
            "feature; leave it out (features=, --features), or write the file with index=False",
            HeaderWarning, stacklevel=2)
    if target_type == "labels" and not scalar:
        raise InvalidParameterError(
            f"target_type='labels' needs one target column, got target={target!r}"
        )
    rows = chunk_rows_for(max([8 * n_cols] + [len(h) for h in head]), chunk_rows)
    line_bytes = max(len(h) for h in head)
    layout = TableLayout(
        src=str(src), delimiter=delimiter, names=tuple(names),
        feature_cols=tuple(feature_cols), target_cols=tuple(target_cols), scalar=scalar,
        label_col=None, shape_origin=shape_origin,
        target_hint=(
            " (the target was numeric in the first rows; pass target_type='labels' "
            "(--labels) if it holds class labels)" if target_type == "auto" and scalar
            else "; target columns must be numeric"
        ),
        x_dtype=np.dtype(dtype).name, y_dtype=np.dtype(y_dtype).name, missing=missing,
        chunk_rows=rows, block_bytes=int(min(max(rows * line_bytes, 2**16), BLOCK_BYTES)),
    )
    if n_cols > 1 and all(not csv_row(h, delimiter)[-1].strip() for h in head):
        role = "the target" if n_cols - 1 in target_cols else "a feature"
        layout = _replace(layout, missing_hint=(
            f"the first lines end with the delimiter, which gives them an empty last column "
            f"({names[-1]!r}), taken as {role}: remove the trailing delimiters, or name the columns to "
            "read among the others (target=, features=; --target, --features)"))
    label_col = None
    if target_type == "labels":
        label_col = target_cols[0]
    elif target_type == "auto" and scalar:
        numbers, text = target_text(layout, _first_rows(src, start, first_line, rows, layout.block_bytes),
                                    target_cols[0], first_line)
        if text is not None and numbers:  # numbers with a text cell: a typo, not class labels
            col = target_cols[0]
            raise InputValidationError(
                f"line {text[0]}, target column {col} ({names[col]!r}): cannot parse {text[1]!r} as a number, "
                f"while {numbers} other cell(s) of the column's first rows are numbers; fix that cell, or pass "
                "target_type='labels' (--labels) if the column holds class labels (numbers among them)")
        if text is not None:
            label_col = target_cols[0]
    if label_col is not None:
        layout = _replace(layout, label_col=label_col, y_dtype="int32")

    compressed = src.name.lower().endswith(COMPRESSIONS)
    parallel = not compressed and missing != "drop" and total - start > blocksize
    n_rows = 0
    if parallel:  # room for every row (a row holds a byte per column at least), resized
        n_rows = max((total - start) // n_cols + 1, rows)  # to the rows written by finish()
    writer = StoreWriter(
        tmp, n_features=len(feature_cols), y_tail=() if scalar else (len(target_cols),),
        x_dtype=np.dtype(dtype), y_dtype=np.dtype(layout.y_dtype), chunk_rows=rows,
        n_rows=n_rows,
    )
    done = [0, 0]

    def report(n: int, nbytes: int) -> None:
        done[0] += n
        done[1] += nbytes
        call_progress(progress, done[0], done[1], total)

    found: list[int] = []
    if parallel:
        segments = plan_segments(src, start, first_line, rows, blocksize, found)
    else:
        segments = iter([Segment(0, start, None, first_line, 0, None)])
    combiner = Combiner(layout)
    results = run_segments(convert_segment, (layout, tmp), segments, combiner, report,
                           parallel=parallel)
    n = sum(r.rows for r in results)
    if parallel and found[0] >= 0 and n != found[0]:  # pragma: no cover - a bug
        raise InputValidationError(
            f"{src}: {n} rows were read but its lines hold {found[0]}; ingest it with "
            "blocksize larger than the file to read it in one pass"
        )
    dropped = sum(r.dropped for r in results)
    if n == 0:
        if dropped:
            raise InputValidationError(
                f"{src}: every one of its {dropped} data rows has a missing value; nothing "
                "is left to ingest with missing='drop'"
            )
        raise InputValidationError(f"{src} has a header but no data rows")
    writer.reopen(n)

    fixed, out_classes = classes, None
    if label_col is not None:
        out_classes, mappings = merged_classes([r.labels for r in results], fixed, str(src))
        first_row = np.cumsum([0] + [r.rows for r in results])
        for k, mapping in enumerate(mappings):
            if mapping is not None:
                writer.remap_y(mapping, int(first_row[k]), int(first_row[k + 1]))
    feature_names = [names[j] for j in feature_cols]
    target_names = [names[j] for j in target_cols]
    read_as = {"delimiter": delimiter, "header": has_header, "n_columns": n_cols,
               "target_columns": list(target_cols), "feature_columns": list(feature_cols)}
    return writer.finish("csv", src, feature_names, target_names, classes=out_classes,
                         dropped=dropped, read_as=read_as, like=like)


def _replace(layout: TableLayout, **changes) -> TableLayout:
    import dataclasses

    return dataclasses.replace(layout, **changes)


def _by_name(src: Path, names: list[str], columns: list[str], like, target, features):
    """``(target, features)`` of a header that names the like store's columns in another
    order, or among others: the store's target and feature columns (positions in its
    file's header, `columns`) as positions of the same names in this header (`names`), so
    that X's columns mean the training store's. A name this header lacks, or has twice,
    is an error naming it."""
    def position(j: int, target: bool = False) -> int:
        name = columns[j]
        found = [i for i, n in enumerate(names) if n == name]
        if len(found) != 1:
            others = [c for c in wanted if c not in names and c != name]  # the columns this read needs
            what = (f"it has no column {name!r}" + (f" (nor {names_hint(others)})" if others else "")
                    if not found else f"it names {name!r} {len(found)} times")
            known = [c for c in columns if c is not None]  # the store's file's columns it used
            raise FeatureMismatchError(
                f"{src}: its header does not name the columns of like={like}: {what} (the store's "
                f"columns: {names_hint(known)}); give the file those columns, or pass header=False "
                "(--no-header) if the first line is data" + (
                    f"; a file to predict without the target column {name!r}: pass target=[] (--no-target)"
                    if target and not found else ""))
        return found[0]

    def index(j) -> int:  # a column of the store's file: by position, or named (features=)
        if not isinstance(j, str) or (j not in columns and index_text(j) is not None):
            return int(j)
        if j not in columns:
            raise FeatureMismatchError(f"{src}: features names {j!r}, which is not a column of like={like} "
                                       f"(its columns: {names_hint(columns)})")
        return columns.index(j)

    targets = [index(j) for j in target] if isinstance(target, list) else [index(target)]
    if features is None:  # a store that does not record them: every column but the targets
        features = [j for j in range(len(columns)) if j not in targets]
    wanted = [columns[j] for j in targets] + [columns[index(j)] for j in features]
    target = [position(j, True) for j in targets] if isinstance(target, list) else position(targets[0], True)
    return target, [position(index(j)) for j in features]
