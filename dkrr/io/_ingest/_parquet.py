"""Parquet (a file, or a directory of files) into a dkrr store, read a chunk at a time.

The files of a directory are those pyarrow's dataset discovery finds (names starting
with ``.`` or ``_``, such as ``_SUCCESS`` or ``_metadata``, are skipped), in natural
order (``part.2`` before ``part.10``, as ``dask.dataframe.to_parquet`` numbers them).
Hive partition folders (``key=value/``, as pandas' ``partition_cols`` writes them) are
columns after the files' own, as ``pandas.read_parquet`` reads them: int64 where every
folder's value of the key is an integer, else text; every file must lie in a folder of
every key, and a key must not also be a column of the files.
Their footers give the columns and the row counts before any data is read; rows are
then read in batches of one chunk through ``ParquetFile.iter_batches``, only the columns
asked for, each column read a small buffer (and a page) at a time rather than a whole row
group at once (``pre_buffer`` off), so a task's memory is bounded by a chunk, whatever
the size of the row groups. Since the row counts are known, the rows are cut into
segments of whole chunks that are converted in parallel (:mod:`._segments`), as for CSV,
cut only at the first chunk boundary of a row group: Parquet cannot start reading inside
a row group, so a segment decodes less than a chunk of rows it does not keep, and a row
group larger than a segment (older pandas and pyarrow wrote a file as one) is read once,
as one stream, in one segment. ``missing="drop"`` is converted in one pass.

Columns: the target is one column (or several) by name or 0-based index, by default
the last; the features are the other columns, or those named by ``features`` in that
order. A pandas index stored as a column (``__index_level_0__``) is not a column. Every
feature must be numeric (integers, floats, booleans, decimals; a dictionary of them):
others (strings, dates, lists, ...) are refused with their names and types, to be left
out with ``features`` or encoded as numbers first -- dkrr does not encode them. A
single target that is not numeric (strings, categories, booleans) holds class labels
(their text: ``true``/``false`` for booleans); a numeric target is numeric unless
``target_type="labels"`` (a float's whole number is then the integer's label: ``0`` for
-0.0, one class with an int file's ``1`` for 1.0); a target that holds numbers in one file and text in another
is refused (a column of Arrow type null, which pandas writes for an all-None column, is
either: its cells are all missing). Nulls are missing cells (a text column's ``NA`` is a label: a text file's
missing-value markers do not apply to typed columns), NaN values are NaN; messages name
a cell by its 0-based row in the dataset and its column.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ...errors import InputValidationError, InvalidParameterError
from ._columns import like_positions, names_hint, no_target, split_columns
from ._segments import Combiner, Segment, SegmentResult, run_segments
from ._table import Block, LocalLabels, TableLayout, convert_blocks, merged_classes
from ._text import sniff
from ._writer import StoreWriter, call_progress, check_row_width, chunk_rows_for

__all__ = ["is_parquet_dir", "parquet_files", "read_parquet"]


def _natural(path: str) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def is_parquet_dir(src: Path) -> bool:
    """Whether `src` is a directory holding Parquet files (by their extension)."""
    return src.is_dir() and any(
        p.suffix.lower() in (".parquet", ".parq", ".pq") for p in src.rglob("*") if p.is_file()
    )


#: the folder value hive partitioning writes for a null (pandas, Spark, pyarrow)
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def parquet_files(src: Path) -> tuple[dict[Path, dict[str, Any]], dict[str, pa.DataType]]:
    """``({file: {key: value}}, {key: type})``: the Parquet files of `src` in natural order,
    each with the values of the hive partition folders (``key=value/``, percent-decoded) it
    lies in, as pandas and dask read them: int64 where every folder's value of the key is an
    integer, else text; ``__HIVE_DEFAULT_PARTITION__`` is null. No keys for a file, or for
    a directory not partitioned so."""
    if not src.is_dir():
        return {src: {}}, {}
    from urllib.parse import unquote

    import pyarrow.dataset as ds

    try:
        found = ds.dataset(str(src), format="parquet").files
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputValidationError(f"{src}: cannot list its Parquet files: {exc}") from exc
    if not found:
        raise InputValidationError(
            f"{src} is a directory without Parquet files (names starting with '.' or "
            "'_' are skipped)"
        )
    files: dict[Path, dict[str, Any]] = {}
    for f in sorted(found, key=_natural):
        path = Path(f)
        folders = [part.split("=", 1) for part in path.relative_to(src).parts[:-1] if "=" in part]
        files[path] = {k: None if v == _HIVE_NULL else unquote(v) for k, v in folders}
    keys = list(dict.fromkeys(k for values in files.values() for k in values))
    types = {}
    for k in keys:
        texts = [v[k] for v in files.values() if v.get(k) is not None]
        integer = all(re.fullmatch(r"[-+]?\d{1,18}", t) for t in texts)
        types[k] = pa.int64() if integer and texts else pa.string()
        for v in files.values():
            if v.get(k) is not None and integer:
                v[k] = int(v[k])
    return files, types


#: bytes of a column read at a time (a page larger than that is read whole): with the
#: default (no buffer, ``pre_buffer``) the columns of a whole row group are read first
_READ_BUFFER = 1 << 16


def _open(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(str(path), pre_buffer=False, buffer_size=_READ_BUFFER)
    except (pa.ArrowInvalid, OSError) as exc:
        what = sniff(path)
        hint = f"; it looks like {what}" if what and "Parquet" not in what else ""
        raise InputValidationError(
            f"{path} is not a readable Parquet file ({' '.join(str(exc).split())}){hint}"
        ) from None


def _is_numeric(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_decimal(t) or pa.types.is_null(t))


def _is_null(t: pa.DataType) -> bool:
    """The type of a column whose every cell is null (pandas writes an all-None column so)."""
    return pa.types.is_null(t.value_type if pa.types.is_dictionary(t) else t)


def _is_number_type(t: pa.DataType) -> bool:
    """A type whose values are numbers (a numeric target): not booleans."""
    return _is_numeric(t) and not pa.types.is_boolean(
        t.value_type if pa.types.is_dictionary(t) else t)


def _columns(schema: pa.Schema) -> list[str]:
    """The columns of a file, without a pandas index stored as a column."""
    index = set()
    meta = schema.pandas_metadata
    if meta:
        index = {c for c in meta.get("index_columns", []) if isinstance(c, str)}
    return [n for n in schema.names if n not in index]


def _columns_named(names: list[str]) -> str:
    return f"column{'s' if len(names) > 1 else ''} {names_hint(names)}"


def _same_columns(path: Path, schema: pa.Schema, expected: list[str], first: Path) -> None:
    """Refuse a file of a directory whose columns are not `expected`, those of its first
    file: a column it lacks, or one the first file lacks (which would be left out unsaid),
    both named. A pandas index stored as a column is not one."""
    lacking = [n for n in expected if n not in schema.names]
    extra = [n for n in _columns(schema) if n not in expected]
    if not lacking and not extra:
        return
    first_file = f"the first file, {first.name},"
    said = ([f"has no {_columns_named(lacking)}, which {first_file} has"] if lacking else []) + (
        [f"has {_columns_named(extra)}, which {'it' if lacking else first_file} has not"] if extra else [])
    raise InputValidationError(
        f"{path} {', and '.join(said)}; every file of a directory needs the same columns: "
        "write the files with the same columns, or move those that differ to a directory of their own")


def _plan(src: Path, files: dict[Path, dict[str, Any]], keys: dict[str, pa.DataType]):
    """Column names (the first file's, then the partition keys), each column's types over
    the files (``(type, file)`` pairs, the first file's first), and each file's ``(path,
    row-group sizes, partition values)``, from the footers and the folders."""
    names: list[str] = []
    types: dict[str, list] = {}
    parts = []
    first = next(iter(files))
    for path, values in files.items():
        f = _open(path)
        schema = f.schema_arrow
        if not names:
            names = _columns(schema)
            both = [k for k in keys if k in names]
            if both:
                raise InputValidationError(
                    f"{src}: {both[0]!r} is both a column of {path.name} and a partition folder "
                    f"({both[0]}=...) above it; rename one of them")
            names += list(keys)
            types = {n: [] for n in names}
            types.update({k: [(t, path)] for k, t in keys.items()})
        lacking = [k for k in keys if k not in values]
        if lacking:  # a file outside the key=value/ folders the others lie in
            raise InputValidationError(
                f"{path} does not lie in a partition folder {lacking[0]}=... as the other files of {src} do; "
                "every file needs a value of every partition column")
        own = names[: len(names) - len(keys)]
        if path != first:
            _same_columns(path, schema, own, first)
        for n in own:
            t = schema.field(schema.get_all_field_indices(n)[0]).type  # a name given twice: split_columns' check
            if all(t != seen for seen, _ in types[n]):
                types[n].append((t, path))
        parts.append((path, [f.metadata.row_group(i).num_rows
                             for i in range(f.metadata.num_row_groups)], values))
    return names, types, parts


def _check_types(src, names, types, feature_cols, target_cols, target_type) -> bool:
    """Refuse non-numeric features; return whether the target holds labels."""

    def described(j, test):
        found = [(t, path) for t, path in types[names[j]] if not test(t)]
        if not found:
            return None
        t, path = found[0]
        where = "" if path == types[names[j]][0][1] else f" in {path.name}"
        return f"{names[j]!r} ({t}{where})"

    bad = [d for j in feature_cols if (d := described(j, _is_numeric))]
    if bad:
        raise InputValidationError(
            f"{src}: feature columns must be numeric, but {len(bad)} are not: "
            f"{', '.join(bad)}; leave them out with features=[...] (--features), or encode "
            "them as numbers before ingesting (dkrr does not encode them)"
        )
    for j in target_cols:  # numbers in one file and text in another: labels '1.0' and '1' apart;
        # a null column (its cells all missing) is either kind: the missing cells' rule takes it
        kinds = {_is_number_type(t): (t, path) for t, path in reversed(types[names[j]]) if not _is_null(t)}
        if len(kinds) > 1:
            (t1, p1), (t2, p2) = kinds[True], kinds[False]
            raise InputValidationError(
                f"{src}: target column {names[j]!r} holds numbers in {p1.name} ({t1}) but not in {p2.name} "
                f"({t2}); one column needs one kind of value in every file: cast it in the files that differ")
    text = [d for j in target_cols if (d := described(j, _is_number_type))]
    if target_type == "labels":
        if len(target_cols) != 1:
            raise InvalidParameterError(
                f"target_type='labels' needs one target column, got {len(target_cols)}"
            )
        return True
    if not text:
        return False
    if target_type == "numeric" or len(target_cols) > 1:
        raise InputValidationError(
            f"{src}: target column {', '.join(text)} is not numeric; "
            + ("target_type='numeric' was asked" if target_type == "numeric"
               else "class labels must be the only target column")
        )
    return True


def _text_type(types) -> pa.DataType:
    """The first type of a label column's ``(type, file)`` pairs that is not a number
    type (a null file's column is not the one that made it labels)."""
    return next(t for t, _ in types if not _is_number_type(t))


def _segment_bounds(parts, n_rows: int, chunk_rows: int, per_segment: int) -> list[tuple[int, int]]:
    """The rows ``(start, end)`` of each segment: runs of whole chunks of at least
    `per_segment` rows, cut only at the first chunk boundary of a row group, so that a
    segment starts reading less than a chunk before its first row, and a row group that
    holds several segments' worth of rows is one segment, read once (see the module
    docstring)."""
    starts = np.cumsum([0] + [g for _, groups, _ in parts for g in groups])[1:-1]
    cuts = np.unique(-(-starts // chunk_rows) * chunk_rows)
    bounds = [0]
    for c in cuts[(cuts > 0) & (cuts < n_rows)].tolist():
        if c - bounds[-1] >= per_segment:
            bounds.append(c)
    return list(zip(bounds, [*bounds[1:], n_rows]))


def _batches(layout: TableLayout, parts, start: int, end: int, columns: list[str]):
    """Record batches of rows `start .. end` of the dataset, with their first row."""
    row = 0
    keys = [c for c in columns if c in layout.partitions]
    stored = [c for c in columns if c not in layout.partitions]
    for path, groups, values in parts:
        n = sum(groups)
        if row + n <= start:
            row += n
            continue
        if row >= end:
            return
        # row groups of this file that hold rows of [start, end)
        bounds = np.concatenate(([0], np.cumsum(groups))) + row
        wanted = [g for g in range(len(groups)) if bounds[g + 1] > start and bounds[g] < end]
        at = int(bounds[wanted[0]])
        f = _open(path)
        try:
            batches = f.iter_batches(batch_size=layout.chunk_rows, row_groups=wanted,
                                     columns=stored, use_threads=False)
            for batch in batches:
                lo, hi = max(start - at, 0), min(end - at, batch.num_rows)
                if hi > lo:
                    part = batch.slice(lo, hi - lo)
                    if keys:  # the file's partition values, one per row
                        part = pa.RecordBatch.from_arrays(
                            [*part.columns, *(pa.repeat(pa.scalar(values[k], type=layout.partitions[k]),
                                                        part.num_rows) for k in keys)],
                            names=[*part.schema.names, *keys])
                    yield path, part, at + lo
                at += batch.num_rows
                if at >= end:
                    break
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputValidationError(
                f"{path}: cannot read rows from {at} on: {' '.join(str(exc).split())}"
            ) from None
        finally:
            f.close()
        row += n


class _Rows:
    """Row numbers of a block in messages: its 0-based rows in the dataset."""

    def __init__(self, first: int):
        self.first = first

    def __getitem__(self, i: int) -> int:
        return self.first + int(i)


def _label_text(col: pa.Array) -> pa.Array:
    """The labels of a column as text. A float's whole number is written as the integer
    (``0`` for -0.0, which ``np.round`` makes of -0.4; ``123456789012``, not pyarrow's
    ``1.23456789012e+11``), so that a float column (an int column with a NaN, as pandas
    writes it) and an int column make one class of one number, as numpy sees them."""
    if not pa.types.is_floating(col.type):
        return pc.cast(col, pa.string())
    f = pc.cast(col, pa.float64())
    whole = pc.and_(pc.equal(pc.floor(f), f), pc.less(pc.abs(f), 2.0**63))  # NaN, inf: not
    ints = pc.cast(pc.cast(pc.if_else(whole, f, 0.0), pa.int64()), pa.string())
    return pc.if_else(whole, ints, pc.cast(col, pa.string()))


def _block(layout: TableLayout, batch: pa.RecordBatch, first: int,
           labels: LocalLabels | None) -> Block:
    names = layout.names
    n = batch.num_rows
    absent = np.zeros((n, layout.n_cols), dtype=bool)
    values = {}
    for j in layout.numeric_cols:
        col = batch.column(names[j])
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        values[j] = pc.cast(col, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        if col.null_count:
            absent[:, j] = col.is_null().to_numpy(zero_copy_only=False)
    codes = None
    if layout.label_col is not None:
        col = batch.column(names[layout.label_col])
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        # text labels as typed: only nulls (and empty texts) are missing, 'NA' is a label; labels of
        # numbers (target_type="labels") cast to text, where a NaN ('nan') is missing
        text = pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
        codes = labels.encode(_label_text(col), markers=not text)
        absent[:, layout.label_col] = codes < 0

    def cells(i: int) -> list[Any]:
        return [batch.column(names[j])[i].as_py() if names[j] in batch.schema.names else None
                for j in range(layout.n_cols)]

    return Block(n, values, codes, absent if absent.any() else None, _Rows(first), cells)


def convert_segment(layout: TableLayout, store: str, parts, bytes_per_row: float,
                    seg: Segment, report=None, cancelled=None) -> SegmentResult:
    """Convert rows ``seg.start .. seg.end`` of the dataset into the store (a task)."""
    labels = LocalLabels() if layout.label_col is not None else None
    columns = [layout.names[j] for j in (*layout.feature_cols, *layout.target_cols)]
    reached = [seg.start]

    def blocks():
        for _, batch, first in _batches(layout, parts, seg.start, seg.end, columns):
            reached[0] = first + batch.num_rows
            yield _block(layout, batch, first, labels)

    return convert_blocks(layout, store, seg, blocks(), labels,
                          lambda: int(reached[0] * bytes_per_row),
                          0 if seg.index == 0 else int(seg.start * bytes_per_row),
                          report, cancelled)


def read_parquet(src: Path, tmp: Path, *, target, features=None, dtype, y_dtype, chunk_rows,
                 n_features, missing, target_type, progress, classes=None, like=None,
                 blocksize, like_file=None, **_) -> dict[str, Any]:
    files, keys = parquet_files(src)
    names, types, parts = _plan(src, files, keys)
    n_cols = len(names)
    if n_cols < (1 if no_target(target) else 2):
        raise InputValidationError(
            f"{src} has {n_cols} column(s); ingest needs feature columns and a target column"
        )
    features = like_positions(src, n_cols, features, no_target(target), like_file, like)
    target_cols, feature_cols, scalar = split_columns(src, target, names, n_cols, n_features,
                                                      features, like)
    labelled = _check_types(src, names, types, feature_cols, target_cols, target_type)
    n_rows = sum(sum(groups) for _, groups, _ in parts)
    if n_rows == 0:
        raise InputValidationError(f"{src} has no rows")
    x_dtype = np.dtype(dtype)
    check_row_width(len(feature_cols), x_dtype, f"{src} has {len(feature_cols)} feature columns",
                    n_rows, error=InputValidationError)
    width = len(feature_cols) + len(target_cols)
    rows = chunk_rows_for(max(8 * width, len(feature_cols) * x_dtype.itemsize), chunk_rows)
    layout = TableLayout(
        src=str(src), names=tuple(names), feature_cols=tuple(feature_cols),
        target_cols=tuple(target_cols), scalar=scalar,
        label_col=target_cols[0] if labelled else None,
        x_dtype=x_dtype.name, y_dtype="int32" if labelled else np.dtype(y_dtype).name,
        missing=missing, chunk_rows=rows, block_bytes=rows * 8 * width, row_word="row", partitions=keys,
    )
    total = sum(os.path.getsize(p) for p in files)
    bytes_per_row = total / n_rows
    per_segment = max(1, int(blocksize) // max(1, rows * 8 * width)) * rows
    bounds = [(0, n_rows)] if missing == "drop" else _segment_bounds(parts, n_rows, rows, per_segment)
    parallel = len(bounds) > 1
    writer = StoreWriter(
        tmp, n_features=len(feature_cols), y_tail=() if scalar else (len(target_cols),),
        x_dtype=x_dtype, y_dtype=np.dtype(layout.y_dtype), chunk_rows=rows,
        n_rows=n_rows if parallel else 0,
    )
    segments = [Segment(k, a, b, 0, a, b - a if parallel else None) for k, (a, b) in enumerate(bounds)]
    done = [0, 0]

    def report(n: int, nbytes: int) -> None:
        done[0] += n
        done[1] += nbytes
        call_progress(progress, done[0], done[1], total)

    results = run_segments(convert_segment, (layout, tmp, parts, bytes_per_row),
                           segments, Combiner(layout), report, parallel=parallel)
    n = sum(r.rows for r in results)
    dropped = sum(r.dropped for r in results)
    if n == 0:
        raise InputValidationError(
            f"{src}: every one of its {dropped} rows has a missing value; nothing is left "
            "to ingest with missing='drop'"
        )
    writer.reopen(n)
    out_classes = None
    if layout.label_col is not None:
        out_classes, mappings = merged_classes([r.labels for r in results], classes, str(src))
        first_row = np.cumsum([0] + [r.rows for r in results])
        for k, mapping in enumerate(mappings):
            if mapping is not None:
                writer.remap_y(mapping, int(first_row[k]), int(first_row[k + 1]))
    read_as = {"target_columns": list(target_cols), "feature_columns": list(feature_cols), "n_columns": n_cols,
               "files": len(files), **({"partition_columns": list(keys)} if keys else {})}
    typed = target_type != "labels" and labelled  # labels because the column's type is not a number
    return writer.finish("parquet", src, [names[j] for j in feature_cols],
                         [names[j] for j in target_cols], classes=out_classes,
                         dropped=dropped, read_as=read_as, like=like,
                         labels_fix=(f"its Parquet type is {_text_type(types[names[target_cols[0]]])}, not a number: cast "
                                     "it to a number type in the files for a regression") if typed else None)

