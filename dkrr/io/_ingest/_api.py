"""The ingest dispatcher: check the options, pick the reader for the format, write atomically.

One reader per format turns the input into row blocks for the one store writer:

* :mod:`._csv` -- CSV or whitespace-separated text, parsed by pyarrow, in parallel
  segments of whole chunks when larger than ``blocksize``;
* :mod:`._parquet` -- a Parquet file or directory, row groups streamed, in parallel
  segments too;
* :mod:`._libsvm` -- LIBSVM/svmlight sparse text, two streamed passes;
* :mod:`._npy` -- a 2-D ``.npy`` array, memory-mapped.

Memory is bounded by the chunk (at most ``chunk_rows`` rows and about
:data:`._writer.CHUNK_BYTES` of ``X``) per worker, by the scan's buffer (a quarter of
``blocksize``, at most 16 MiB) and by the longest line accepted
(:data:`._text.MAX_LINE_CHARS`), never by the number of rows: files larger than memory
convert. The input must be a regular file or a directory of Parquet files (a pipe is
refused: it cannot be sized or read twice). The store layout is described in :mod:`dkrr.io._store`; the attributes that
record how the file was read (for ``like=``) in :mod:`._like`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputNotFoundError, InputValidationError, InvalidParameterError
from .._atomic import atomic_output
from .._paths import Remote, locate
from .._store import zarr_replace_check
from ._csv import read_csv
from ._like import follow, read_layout
from ._libsvm import read_libsvm
from ._npy import read_npy
from ._parquet import is_parquet_dir, read_parquet
from ._text import COMPRESSIONS
from ._writer import check_row_width

__all__ = ["IngestSummary", "InputNotFoundError", "ingest"]

ProgressCallback = Callable[[int, int, int], Any]

_FORMATS = ("csv", "libsvm", "npy", "parquet")
_EXTENSIONS = {
    ".csv": "csv",
    ".data": "csv",
    ".t": "libsvm",
    ".txt": "libsvm",
    ".svm": "libsvm",
    ".libsvm": "libsvm",
    ".svmlight": "libsvm",
    ".npy": "npy",
    ".parquet": "parquet",
    ".parq": "parquet",
    ".pq": "parquet",
}
_READERS = {"csv": read_csv, "libsvm": read_libsvm, "npy": read_npy, "parquet": read_parquet}
_MISSING = ("error", "drop")
_TARGET_TYPES = ("auto", "numeric", "labels")
_INDEX_BASES = (0, 1, "auto")


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
        Column names recorded in the store (no feature names for LIBSVM, whose columns
        are indices: an empty list).
    classes : list of str or None
        Sorted original labels when the target was encoded to integer codes.
    path : str
        Absolute path of the store, or its URL.
    index_base : int or None
        LIBSVM: the index of the first column, 0 or 1, as read (None for CSV/``.npy``).
    index_base_guessed : bool
        LIBSVM: whether ``index_base="auto"`` decided `index_base` (0 when index 0
        occurs; 1, the LIBSVM convention, when it does not).
    rows_dropped : int
        Rows left out by ``missing="drop"`` (the store's ``rows_dropped`` attribute).
    """

    n_rows: int
    n_features: int
    n_targets: int
    feature_names: list[str]
    target_names: list[str]
    classes: list[str] | None
    path: str
    index_base: int | None = None
    index_base_guessed: bool = False
    rows_dropped: int = 0


def _infer_format(src: Path) -> str:
    suffixes = [s.lower() for s in src.suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes = suffixes[:-1]
    fmt = _EXTENSIONS.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise InputValidationError(
            f"cannot infer the format of {src.name} from its extension; pass "
            f"format= one of {_FORMATS} (--format); known extensions: "
            f"{', '.join(sorted(_EXTENSIONS))} (+ .gz/.bz2 for text)"
        )
    return fmt


def ingest(
    path: str | os.PathLike,
    out: str | os.PathLike,
    *,
    target: str | int | Sequence[str | int] | None = None,
    features: Sequence[str | int] | None = None,
    format: str | None = None,
    header: bool | None = None,
    delimiter: str | None = ",",
    dtype: str | np.dtype = "float32",
    y_dtype: str | np.dtype = "float64",
    chunk_rows: int = 65536,
    blocksize: int | str = "64MiB",
    n_features: int | None = None,
    index_base: int | str = "auto",
    missing: str = "error",
    target_type: str = "auto",
    like: str | os.PathLike | None = None,
    overwrite: bool = False,
    progress: ProgressCallback | None = None,
    storage_options: dict | None = None,
) -> IngestSummary:
    """Convert a CSV, LIBSVM/svmlight, ``.npy`` or Parquet input into a dkrr Zarr store.

    The input is read in chunks of rows and each chunk is written to the Zarr arrays
    ``X`` and ``y``, so memory use is bounded by the chunk size whatever the input size.
    CSV is parsed by pyarrow's CSV reader; an uncompressed CSV larger than `blocksize`
    (and any Parquet input of more than `blocksize` of values) is cut at line
    boundaries into runs of whole chunks that are converted in parallel -- by the
    workers of the active ``distributed`` client if there is one (they must see `path`
    and `out`), else by threads of this process (``dask.config`` ``num_workers``,
    default one per core) -- each task writing its own chunks; the result does not
    depend on the number of workers. The store is written under a temporary name next
    to `out` and renamed to `out` only when complete; on any error (or
    ``KeyboardInterrupt``) nothing is left behind and an existing `out` is untouched.

    Parameters
    ----------
    path : str or os.PathLike
        Input: ``.csv``/``.data`` (CSV), ``.txt``/``.t``/``.svm``/``.libsvm``/
        ``.svmlight`` (LIBSVM; CSV and LIBSVM may be compressed as ``.gz`` or ``.bz2``),
        ``.npy`` (a 2-D numeric matrix), or ``.parquet``/``.parq``/``.pq`` (a Parquet
        file, or a directory of Parquet files such as ``dask.dataframe.to_parquet``
        writes, read in natural order of their names).
    out : str or os.PathLike
        Directory of the Zarr store to create (layout: see :mod:`dkrr.io._store`), or
        its fsspec URL (``s3://bucket/data.zarr``; see `storage_options`).
    target : str, int or list of these, optional
        CSV, ``.npy`` and Parquet: the target column(s), by name or 0-based index
        (negative counts from the end; ``.npy`` and header-less CSV columns are also
        named ``column_{j}``). Default: the last column. A list gives a 2-D ``y``.
        LIBSVM files carry their label first; leave it None. An empty list (``[]``,
        the CLI's ``--no-target``) reads no target: the store holds ``X`` alone, for
        ``predict`` (``open_dataset(..., require_y=False)``), and every column is a
        feature by default (LIBSVM: the labels are not stored; each line still needs a numeric one). With `like`,
        its feature columns are found by name, or, where its columns go by position,
        in its file less its target column(s): the file to predict is the training
        file without its target.
    features : list of str or int, optional
        CSV, ``.npy`` and Parquet: the feature columns, by name or 0-based index, in
        the order of the columns of ``X``. Default: every column that is not a target.
        Every feature column must be numeric: a Parquet column of strings, dates or
        other non-numeric values is refused with its name and type (leave it out with
        `features`, or encode it as numbers first; dkrr encodes nothing), and a CSV
        cell that is not a number is an error naming its line and column.
    format : {"csv", "libsvm", "npy", "parquet"}, optional
        Input format; inferred from the extension when None (a directory without one
        that holds Parquet files is Parquet).
    header : bool, optional
        CSV only: whether the first line holds column names. None detects it: the first
        line is a header when one of its cells is not a number while the same column
        of the second line is (the target's column aside with ``target_type="labels"``:
        a text label over a numeric one is no column name). A first line of numbers in a doubtful role gives a
        :class:`~dkrr.errors.HeaderWarning`: taken for names by ``header=True``, or
        detected as data while it counts the columns (``0,1,2,...``, pandas' names).
    delimiter : str or None, default=","
        CSV field separator (one character), or None for runs of whitespace (dense
        space-separated text such as ``cod-rna.train.txt.gz`` with ``format="csv"``).
        Fields may be quoted with ``"``; quoted fields may not span lines.
    dtype : {"float32", "float64"}, default="float32"
        Dtype of ``X``.
    y_dtype : {"float64", "float32"}, default="float64"
        Dtype of a numeric ``y`` (LIBSVM labels, a numeric CSV or ``.npy`` target):
        float64 keeps every integer up to 2**53 exact (float32 would store 100000001
        as 100000000). A label target is stored as int32 codes whatever this is.
    chunk_rows : int, default=65536
        Most rows per chunk, both for reading and for the Zarr chunks of ``X`` and
        ``y``. Wide inputs get fewer: a chunk of ``X`` holds at most 64 MiB (at least
        one row), so the chunk rows follow a byte budget, not a fixed count.
    blocksize : int or str, default="64MiB"
        Bytes of an uncompressed CSV (or of Parquet values, as float64) converted by one
        parallel task, as in ``dask.dataframe.read_csv``; an input that fits in one is
        converted here. A compressed CSV, and ``missing="drop"`` (the rows kept, hence
        their places in the store, are known only once read), are converted in one pass.
    n_features : int, optional
        LIBSVM: number of features (columns) of ``X``; by default the largest index in
        the file. CSV/``.npy``: if given, the number of feature columns is checked.
    index_base : {0, 1, "auto"}, default="auto"
        LIBSVM: the index of the first column of ``X``. LIBSVM files are one-based;
        scikit-learn writes zero-based ones too. "auto" reads a file holding index 0
        as zero-based. A file without index 0 is read one-based when that is the only
        reading that fits: with no `n_features`, or when its largest index equals
        `n_features`; when `n_features` would fit either reading (a zero-based file
        that never uses index 0 would have every column shifted by one) the guess is
        refused: pass 0 or 1, or `like`. The base read is recorded in the store
        (attribute ``index_base``) and in the summary (``index_base_guessed`` tells
        whether "auto" decided it).
    missing : {"error", "drop"}, default="error"
        What to do with rows holding a missing value: an empty cell, a missing-value
        marker (``NA``, ``N/A``, ``?``, ``null``, ``None``, ``nan``; case-insensitive)
        or a NaN number. "error" refuses the input, naming the rows (the first few and
        how many) and the columns; "drop" leaves those rows out (their number is
        recorded in the store attribute ``rows_dropped``).
    target_type : {"auto", "numeric", "labels"}, default="auto"
        CSV and Parquet: whether a single target column holds numbers or class labels.
        "auto" reads a CSV column as labels only when one of its cells in the first
        chunk is neither a number nor a missing-value marker and none is a number (numbers
        with a text cell, a typo, are an error naming the cell; ``nan`` counts as a missing
        cell, not a number, and ``inf`` only beside a finite number), and a Parquet column as
        labels when its type is not a number type (strings, categories, booleans);
        "labels" encodes it as classes even when the labels are numbers (e.g. digits;
        a Parquet float's whole number is the integer's class: -0.0 and 0 are ``0``);
        "numeric" refuses text in it.
    like : str or os.PathLike, optional
        A store written by ingest (typically the training set) whose layout this file
        must follow: its number of features, its dtypes, and what it records of how
        its file was read -- the LIBSVM index base, the CSV delimiter and target
        column(s) and feature columns, and the classes of a label target (this file's labels are coded
        with those classes; a label they lack is an error naming it). Those options
        may be left out; one given with a different value is an error. Whether this
        CSV has a header is still `header` (detected by default); when both files
        have one, the store's target and feature columns are taken by name (this file
        may order its columns otherwise, or hold more; a name it lacks or repeats is an
        error naming it), also from a CSV store for a Parquet file and the reverse; a
        .npy file or store, or a header-less CSV store, gives them by position. The
        format still comes
        from `format` or the extension (the store's when the extension is unknown).
    overwrite : bool, default=False
        Replace an existing Zarr store at `out` (only once the new one is complete).
    progress : callable, optional
        Called as ``progress(rows_done, bytes_read, total_bytes)`` after each chunk.
        The byte counts cover every pass over the (compressed) file: LIBSVM is read
        twice, so its ``total_bytes`` is twice the file size.
    storage_options : dict, optional
        fsspec options when `out` or `like` is a URL (``endpoint_url``, credentials...;
        see :func:`dkrr.io.open_dataset`). The input file itself is local.

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
        A `path` that is not a regular file (a pipe such as ``/dev/stdin``, a device:
        the file is read twice (LIBSVM) or mapped (``.npy``), and its size drives the
        progress; save the stream to a file first), a corrupt or truncated ``.gz`` or
        ``.bz2`` file, text that is not UTF-8 (with the line), a CSV line that is one
        field (with the delimiter it seems to use), an ambiguous LIBSVM index base, a
        LIBSVM index beyond int64, a label missing from the classes of `like`, unknown
        format, a file that is not of its format (binary data, no line breaks, a line
        over 16 MiB without a line break), a non-numeric feature cell (with line and column), a row with the wrong number of fields (with line), an unknown target
        column, no data, or a feature index (LIBSVM) that makes one row of ``X``
        larger than 256 MiB; a CSV quoted field that spans lines or a carriage
        return that ends a line alone (with the line); a Parquet feature column that is
        not numeric (with the names and types), a file that is not Parquet, a
        directory whose files lack a column of the first.
    FeatureMismatchError
        A LIBSVM index beyond `n_features`, a CSV/``.npy`` whose feature count is not
        `n_features`, or a CSV header that names other columns than the `like` store's.
    MissingValueError
        Cells are missing and `missing` is "error" (with the rows and columns).
    NonFiniteInputError
        A NaN or infinite value, or one too large for `dtype` (with line and column).
    InvalidParameterError
        An invalid option value, or one that contradicts `like`.
    StoreNotFoundError, StoreError
        `like` is not a dkrr store.
    MemoryBudgetError
        A distributed Client is active whose workers have a memory limit below what a
        task needs (as a fit refuses them): their paused workers left ingest waiting.

    Notes
    -----
    A CSV target column is a class label column when ``target_type="labels"``, or
    when any of its cells in the first chunk is neither a number nor a missing-value
    marker and none is a number (a column of numbers with a text cell is an error naming
    that cell: a typo or a thousands separator does not make 300 one-row classes; a
    ``nan`` cell, what pandas writes for a missing label, is a missing label as ``NA``
    is, and an ``inf`` beside text alone is a label); its
    labels (whitespace-stripped strings, numbers included) are then encoded to ``0 .. k-1`` in sorted order (numeric order when all are numbers) and
    recorded in the ``classes`` attribute. A column that is numeric apart from missing
    cells is numeric: the missing cells are an error (or dropped rows), never a switch
    to labels. When the first chunk is numeric a text cell further down is an error.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "data.csv").write_text("a,b,label\\n1,2,g\\n3,4,h\\n")
    >>> s = ingest(d / "data.csv", d / "data.zarr", target="label")
    >>> s.n_rows, s.feature_names, s.classes
    (2, ['a', 'b'], ['g', 'h'])
    """
    src = locate(path, what="input file")
    if isinstance(src, Remote):
        raise InvalidParameterError(
            f"input file {src.url!r} is a URL: ingest reads a local file (copy it here first); "
            "its output (--out) may be a URL"
        )
    src = Path(os.path.abspath(os.fspath(src)))
    final = locate(out, storage_options, what="output")
    if not isinstance(final, Remote):
        final = Path(os.path.abspath(os.fspath(final)))
    layout = None if like is None else read_layout(like, storage_options)
    block_bytes = _blocksize(blocksize)
    if format is None and src.is_dir():
        if not is_parquet_dir(src):
            raise _directory_error(src)
        format = "parquet"
    if format is not None:
        fmt = str(format).lower()
        if fmt not in _FORMATS:
            raise InvalidParameterError(
                f"format must be one of {_FORMATS}, got {format!r}"
            )
    elif layout is not None and layout.format in _FORMATS:
        try:
            fmt = _infer_format(src)
        except InputValidationError:
            fmt = layout.format
    else:
        fmt = _infer_format(src)
    classes, like_file = None, None
    if layout is not None:
        (dtype, y_dtype, n_features, index_base, delimiter, target, features, target_type,
         classes, like_file) = follow(layout, fmt, dtype=dtype, y_dtype=y_dtype,
                                         n_features=n_features, index_base=index_base,
                                         delimiter=delimiter, target=target, features=features,
                                         target_type=target_type)
    x_dtype = _float_dtype("dtype", dtype)
    yf_dtype = _float_dtype("y_dtype", y_dtype)
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, (int, np.integer)) or chunk_rows < 1:
        raise InvalidParameterError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    if delimiter is not None and (
        not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in "\"\r\n"
    ):
        raise InvalidParameterError(
            "delimiter must be one character other than a quote or newline, or None "
            f"for runs of whitespace (--delimiter whitespace); got {delimiter!r}"
        )
    if header not in (None, True, False):
        raise InvalidParameterError(f"header must be None, True or False, got {header!r}")
    if n_features is not None and (
        isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)) or n_features < 1
    ):
        raise InvalidParameterError(f"n_features must be a positive integer, got {n_features!r}")
    if isinstance(index_base, bool) or index_base not in _INDEX_BASES:
        raise InvalidParameterError(
            f"index_base must be 0, 1 or 'auto', got {index_base!r}"
        )
    if missing not in _MISSING:
        raise InvalidParameterError(f"missing must be 'error' or 'drop', got {missing!r}")
    if target_type not in _TARGET_TYPES:
        raise InvalidParameterError(
            f"target_type must be one of {_TARGET_TYPES}, got {target_type!r}"
        )
    if n_features is not None:
        check_row_width(int(n_features), x_dtype, f"n_features={n_features}")
    if features is not None and fmt == "libsvm":
        raise InvalidParameterError(
            "features= selects columns of a CSV, .npy or Parquet input; a LIBSVM file's "
            "features are its indices (use n_features)"
        )
    if not src.exists():
        raise InputNotFoundError(f"input file {src} does not exist")
    if src.is_dir() and fmt != "parquet":
        raise _directory_error(src)
    if not src.is_dir() and not stat.S_ISREG(src.stat().st_mode):
        raise InputValidationError(
            f"{src} is not a regular file (a pipe, socket or device such as /dev/stdin); "
            "ingest needs a file it can size and read again (LIBSVM is read twice, "
            ".npy is memory-mapped): save the stream to a file first, e.g. "
            "`cat > data.csv`, and ingest that"
        )
    if fmt == "npy" and src.name.lower().endswith(COMPRESSIONS):
        raise InputValidationError(f"{src}: compressed .npy files are not supported")
    from ..._system import check_active_workers

    check_active_workers()  # a Client's workers too small for a task: refused, not waited on forever

    # the like store is an input too: replacing it would lose the training store's y
    with atomic_output(final, overwrite, can_replace=zarr_replace_check, storage_options=storage_options,
                       inputs=[src] + ([like] if like is not None else [])) as tmp:
        info = _READERS[fmt](
            src,
            tmp,
            target=target,
            features=features,
            header=header,
            delimiter=delimiter,
            dtype=x_dtype,
            y_dtype=yf_dtype,
            chunk_rows=int(chunk_rows),
            n_features=None if n_features is None else int(n_features),
            index_base=index_base,
            missing=missing,
            target_type=target_type,
            classes=classes,
            columns=None if layout is None or fmt != "csv" else layout.columns,
            like=None if layout is None else layout.path,
            like_file=like_file,
            progress=progress,
            blocksize=block_bytes,
        )
    return IngestSummary(path=str(final), **info)


def _directory_error(src: Path) -> InputValidationError:
    return InputValidationError(
        f"{src} is a directory; ingest reads one CSV, LIBSVM or .npy file, or a Parquet "
        "file or a directory of Parquet files (a Zarr store needs no ingest)"
    )


def _blocksize(blocksize: Any) -> int:
    """`blocksize` in bytes (an int, or a string such as ``"64MiB"``), at least 1."""
    from dask.utils import parse_bytes

    try:
        if isinstance(blocksize, bool):
            raise TypeError
        value = parse_bytes(blocksize) if isinstance(blocksize, str) else int(blocksize)
    except (TypeError, ValueError):
        value = 0
    if value < 1 or (not isinstance(blocksize, str) and value != blocksize):
        raise InvalidParameterError(
            f"blocksize must be a positive number of bytes (an int, or a string such as "
            f"'64MiB'), got {blocksize!r}"
        )
    return value


def _float_dtype(name: str, dtype: Any) -> np.dtype:
    try:
        out = np.dtype(dtype)
    except TypeError as exc:
        raise InvalidParameterError(f"{name} must be float32 or float64, got {dtype!r}") from exc
    if out not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise InvalidParameterError(f"{name} must be float32 or float64, got {dtype!r}")
    return out
