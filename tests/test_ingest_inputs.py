"""Ingest of awkward inputs: missing cells, label typing, sizes, line lengths, wrong formats.

Each test writes a real file in tmp_path and runs the real ingest (or the real ``dkrr``
command in a subprocess) into a real Zarr store.
"""

from __future__ import annotations

import gc
import gzip
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import zarr

from dkrr.errors import (
    DkrrError,
    InputValidationError,
    InvalidParameterError,
    MissingValueError,
    NonFiniteInputError,
)
from dkrr.io import ingest

MiB = 2**20


def _read(path):
    group = zarr.open_group(str(path), mode="r")
    return group["X"][...], group["y"][...], dict(group.attrs), group


def _numeric_rows(n: int, missing: dict[int, tuple[int, str]] | None = None) -> list[str]:
    """n data rows 'a,b,y' with y = 1000 + 0.37 i; missing maps row -> (column, cell)."""
    rows = []
    for i in range(n):
        cells = [f"{i}.25", f"{-i}", f"{1000 + 0.37 * i:.2f}"]
        if missing and i in missing:
            j, cell = missing[i]
            cells[j] = cell
        rows.append(",".join(cells))
    return rows


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _peak(fn):
    """Peak traced allocation (bytes) while running fn(); returns (peak, result or error)."""
    gc.collect()
    tracemalloc.start()
    try:
        try:
            out = fn()
        except DkrrError as exc:
            out = exc
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, out


def dkrr(*args):
    return subprocess.run([sys.executable, "-m", "dkrr.cli", *map(str, args)],
                          check=False, capture_output=True, text=True, timeout=120)


@pytest.fixture(autouse=True)
def _warm(tmp_path_factory):
    # lazy imports and codec set-up happen once, outside any traced peak
    d = tmp_path_factory.mktemp("warm")
    _write(d / "w.csv", ["1,2", "3,4"])
    ingest(d / "w.csv", d / "w.zarr")


# ----------------------------------------------------------------- missing values


def test_numeric_target_with_an_empty_cell_is_an_error_naming_rows(tmp_path):
    # line 1 is the header, so data row i is on line i + 2
    src = _write(tmp_path / "d.csv", ["a,b,y"] + _numeric_rows(40, {3: (2, ""), 25: (2, " ")}))
    with pytest.raises(MissingValueError) as info:
        ingest(src, tmp_path / "d.zarr", chunk_rows=7)
    msg = str(info.value)
    assert "2 rows" in msg and "line 5, column 2 ('y')" in msg and "line 27, column 2 ('y')" in msg
    assert "missing='drop'" in msg and "--missing drop" in msg
    assert isinstance(info.value, InputValidationError)
    assert not (tmp_path / "d.zarr").exists()


def test_missing_cell_in_the_first_row_is_not_a_header(tmp_path):
    # header detection once took a first row with an empty cell for column names
    src = _write(tmp_path / "d.csv", _numeric_rows(5, {0: (2, "")}))
    with pytest.raises(MissingValueError, match=r"1 row has .*line 1, column 2 \('column_2'\): ''"):
        ingest(src, tmp_path / "d.zarr")
    s = ingest(src, tmp_path / "d.zarr", missing="drop")
    assert s.n_rows == 4 and s.feature_names == ["column_0", "column_1"]


def test_many_missing_rows_show_the_first_few_and_the_count(tmp_path):
    missing = {i: (2 if i % 2 else 0, "NA" if i % 3 else "") for i in range(5, 70, 5)}
    src = _write(tmp_path / "d.csv", ["a,b,y"] + _numeric_rows(100, missing))
    with pytest.raises(MissingValueError) as info:
        ingest(src, tmp_path / "d.zarr", chunk_rows=16)
    msg = str(info.value)
    assert f"{len(missing)} rows" in msg
    assert "line 7, column 2 ('y'): 'NA'" in msg and "line 12, column 0 ('a'): 'NA'" in msg
    assert "line 17, column 2 ('y'): ''" in msg
    assert "line 67" not in msg  # only the first few rows are listed
    assert "'a' (6 rows)" in msg and "'y' (7 rows)" in msg


@pytest.mark.parametrize("chunk_rows", [4, 65536])
def test_missing_drop_leaves_out_those_rows(tmp_path, chunk_rows):
    missing = {0: (2, ""), 3: (2, "NA"), 9: (0, ""), 10: (1, "?"), 29: (2, "")}
    src = _write(tmp_path / "d.csv", ["a,b,y"] + _numeric_rows(30, missing))
    summary = ingest(src, tmp_path / "d.zarr", missing="drop", chunk_rows=chunk_rows,
                     dtype="float64")
    keep = [i for i in range(30) if i not in missing]
    X, y, attrs, _ = _read(tmp_path / "d.zarr")
    assert summary.n_rows == len(keep) == X.shape[0] == y.shape[0]
    np.testing.assert_array_equal(X, [[i + 0.25, -i] for i in keep])
    np.testing.assert_allclose(y, [1000 + 0.37 * i for i in keep], rtol=0, atol=1e-9)
    assert y.dtype == np.float64 and summary.classes is None and "classes" not in attrs


def test_missing_drop_also_drops_nan_cells_but_the_default_refuses_them(tmp_path):
    src = _write(tmp_path / "d.csv", ["a,b,y", "1,2,3", "nan,5,6", "7,8,NaN", "9,10,11"])
    with pytest.raises(NonFiniteInputError, match=r"line 3, column 0 \('a'\).*missing='drop'"):
        ingest(src, tmp_path / "e.zarr")
    ingest(src, tmp_path / "d.zarr", missing="drop")
    X, y, _, _ = _read(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X, [[1, 2], [9, 10]])
    np.testing.assert_array_equal(y, [3, 11])


@pytest.mark.parametrize("chunk_rows", [2, 65536])
def test_the_missing_cells_error_counts_the_nan_rows_drop_also_drops(tmp_path, chunk_rows):
    """The error said "1 row has missing values" and --missing drop then dropped 3: the
    rows holding a literal NaN were counted nowhere (a NaN after a missing cell was not
    even looked at)."""
    rows = ["a,b,y", "1,2,3", "NaN,5,6", "7,,9", "nan,8,9", "10,11,12", "13,NaN,"]
    src = _write(tmp_path / "d.csv", rows)
    with pytest.raises(MissingValueError) as info:
        ingest(src, tmp_path / "e.zarr", chunk_rows=chunk_rows)
    msg = str(info.value)
    assert "2 rows have missing values" in msg and "line 7, column 2 ('y'): ''" in msg, msg
    assert msg.endswith("Besides these, 2 rows hold NaN (first line 3, column 0 ('a')), which --missing drop "
                        "leaves out too"), msg
    summary = ingest(src, tmp_path / "d.zarr", missing="drop", chunk_rows=chunk_rows)
    assert summary.rows_dropped == 4 and summary.n_rows == 2


def test_npy_rows_with_nan_dropped_on_request(tmp_path):
    m = np.arange(30.0).reshape(10, 3)
    m[[2, 7], [0, 2]] = np.nan
    np.save(tmp_path / "m.npy", m)
    with pytest.raises(NonFiniteInputError, match="missing='drop'"):
        ingest(tmp_path / "m.npy", tmp_path / "e.zarr")
    s = ingest(tmp_path / "m.npy", tmp_path / "m.zarr", missing="drop", chunk_rows=3,
               dtype="float64")
    X, y, _, _ = _read(tmp_path / "m.zarr")
    keep = [0, 1, 3, 4, 5, 6, 8, 9]
    assert s.n_rows == 8
    np.testing.assert_array_equal(X, m[keep, :2])
    np.testing.assert_array_equal(y, m[keep, 2])


def test_missing_label_cell_is_missing_not_a_class(tmp_path):
    src = _write(tmp_path / "d.csv", ["a,cls", "1,g", "2,h", "3,", "4,g"])
    with pytest.raises(MissingValueError, match=r"line 4, column 1 \('cls'\): ''"):
        ingest(src, tmp_path / "e.zarr")
    s = ingest(src, tmp_path / "d.zarr", missing="drop")
    X, y, attrs, _ = _read(tmp_path / "d.zarr")
    assert s.classes == attrs["classes"] == ["g", "h"]
    np.testing.assert_array_equal(y, [0, 1, 0])
    np.testing.assert_array_equal(X[:, 0], [1, 2, 4])


def test_bad_missing_option(tmp_path):
    src = _write(tmp_path / "d.csv", ["1,2"])
    with pytest.raises(InvalidParameterError, match="missing must be 'error' or 'drop'"):
        ingest(src, tmp_path / "d.zarr", missing="impute")


# -------------------------------------------------------------------- label typing


def test_text_labels_still_become_classes(tmp_path):
    src = _write(tmp_path / "d.csv", ["a,b,kind"] + [f"{i},{i * 2},{'cat' if i % 3 else 'dog'}"
                                                     for i in range(20)])
    s = ingest(src, tmp_path / "d.zarr", chunk_rows=6)
    _, y, attrs, _ = _read(tmp_path / "d.zarr")
    assert s.classes == attrs["classes"] == ["cat", "dog"]
    np.testing.assert_array_equal(y, [0 if i % 3 else 1 for i in range(20)])


def test_numeric_labels_only_on_request_and_sorted_as_numbers(tmp_path):
    src = _write(tmp_path / "d.csv", ["x,digit"] + [f"{i},{[10, 2, 1][i % 3]}" for i in range(9)])
    s = ingest(src, tmp_path / "num.zarr")
    assert s.classes is None and _read(tmp_path / "num.zarr")[1].dtype == np.float64
    s = ingest(src, tmp_path / "lab.zarr", target_type="labels")
    _, y, attrs, _ = _read(tmp_path / "lab.zarr")
    assert s.classes == attrs["classes"] == ["1", "2", "10"]
    np.testing.assert_array_equal(y, [[2, 1, 0][i % 3] for i in range(9)])


def test_target_type_numeric_refuses_text_and_labels_hint_on_late_text(tmp_path):
    src = _write(tmp_path / "d.csv", ["x,kind", "1,cat", "2,dog"])
    with pytest.raises(InputValidationError, match=r"line 2, target column 1 \('kind'\).*'cat'"):
        ingest(src, tmp_path / "d.zarr", target_type="numeric")
    late = _write(tmp_path / "late.csv", ["x,t"] + [f"{i},{i}" for i in range(10)] + ["3,x"])
    with pytest.raises(InputValidationError, match="target_type='labels'.*--labels"):
        ingest(late, tmp_path / "late.zarr", chunk_rows=4)
    with pytest.raises(InvalidParameterError, match="target_type must be"):
        ingest(src, tmp_path / "e.zarr", target_type="classes")
    with pytest.raises(InvalidParameterError, match="one target column"):
        ingest(_write(tmp_path / "m.csv", ["x,y,z", "1,2,3"]), tmp_path / "e.zarr",
               target=[1, 2], target_type="labels")


# --------------------------------------------------------------------------- sizes


def test_libsvm_huge_feature_index_refused_up_front(tmp_path):
    src = _write(tmp_path / "d.svm", ["1 1:0.5 3:2", "-1 100000000000:1", "1 2:1"])
    peak, err = _peak(lambda: ingest(src, tmp_path / "d.zarr"))
    assert isinstance(err, InputValidationError), err
    msg = str(err)
    assert "line 2" in msg and "100000000000" in msg
    assert "3 rows x 100000000000 columns = 1.1 TiB" in msg
    assert "372.5 GiB" in msg  # one float32 row
    assert "n_features" in msg
    assert peak < 16 * MiB
    assert not (tmp_path / "d.zarr").exists()
    with pytest.raises(InvalidParameterError, match=r"n_features=100000000000.*372.5 GiB"):
        ingest(_write(tmp_path / "s.svm", ["1 1:2"]), tmp_path / "s.zarr",
               n_features=100_000_000_000)


def test_wide_csv_chunk_rows_follow_a_byte_budget(tmp_path):
    # 50 x 20,000 at the default chunk_rows (65536) once made a 5 GB chunk
    rng = np.random.default_rng(0)
    data = np.round(rng.standard_normal((50, 20_000)), 3)
    src = tmp_path / "wide.csv"
    np.savetxt(src, data, fmt="%.3f", delimiter=",")
    peak, s = _peak(lambda: ingest(src, tmp_path / "wide.zarr"))
    assert not isinstance(s, Exception), s
    X, y, _, group = _read(tmp_path / "wide.zarr")
    rows, cols = group["X"].chunks
    assert cols == 19_999 and 1 <= rows < 65536
    assert rows * cols * 4 <= 64 * MiB
    assert group["y"].chunks == (rows,)
    np.testing.assert_array_equal(X, data[:, :-1].astype(np.float32))
    np.testing.assert_array_equal(y, data[:, -1])
    assert peak < 512 * MiB


def test_wide_libsvm_and_npy_chunks_follow_the_byte_budget(tmp_path):
    # 900 rows of 10,000 float64 columns (80 kB a row): 838 rows fill 64 MiB
    lines = [f"{i % 2} {i % 9000 + 1}:1.5 10000:{i}" for i in range(900)]
    ingest(_write(tmp_path / "w.svm", lines), tmp_path / "svm.zarr", dtype="float64")
    X = zarr.open_group(str(tmp_path / "svm.zarr"), mode="r")["X"]
    assert X.shape == (900, 10_000)
    assert X.chunks[0] == 64 * MiB // 80_000 == 838
    np.testing.assert_array_equal(X[:, 9_999], np.arange(900))
    np.testing.assert_array_equal(X[:, :902], np.eye(900, 902) * 1.5)

    m = np.zeros((600, 15_001))
    m[:, 0] = np.arange(600)
    np.save(tmp_path / "w.npy", m)
    ingest(tmp_path / "w.npy", tmp_path / "npy.zarr", target=0, dtype="float64")
    g = zarr.open_group(str(tmp_path / "npy.zarr"), mode="r")
    assert g["X"].chunks[0] == 64 * MiB // (15_001 * 8) == 559
    np.testing.assert_array_equal(g["y"][...], np.arange(600))


@pytest.mark.parametrize("suffix", ["", ".gz"])
@pytest.mark.parametrize("fmt", ["csv", "libsvm"])
def test_input_without_line_breaks_refused_without_reading_it_all(tmp_path, suffix, fmt):
    size = 96 * MiB
    body = b"1" * size
    src = tmp_path / f"one_line.{fmt}{suffix}"
    src.write_bytes(gzip.compress(body, compresslevel=1) if suffix else body)
    del body
    peak, err = _peak(lambda: ingest(src, tmp_path / "o.zarr", format=fmt))
    assert isinstance(err, InputValidationError), err
    assert "line 1 is longer than" in str(err) and "line breaks" in str(err)
    assert peak < 0.75 * size
    assert not (tmp_path / "o.zarr").exists()


# ------------------------------------------------------------------ wrong formats


def test_binary_file_named_csv_is_not_text(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((4, 3)))
    src = tmp_path / "a.csv"
    src.write_bytes((tmp_path / "a.npy").read_bytes())
    with pytest.raises(InputValidationError, match=r"not a text file.*format='npy'"):
        ingest(src, tmp_path / "a.zarr")
    nul = tmp_path / "nul.csv"
    nul.write_bytes(b"\x00" * 5000)
    with pytest.raises(InputValidationError, match="not a text file.*NUL"):
        ingest(nul, tmp_path / "n.zarr")


def test_text_file_named_npy_or_gz(tmp_path):
    fake = _write(tmp_path / "f.npy", ["1,2,3", "4,5,6"])
    with pytest.raises(InputValidationError, match=r"not a \.npy file.*format='csv'"):
        ingest(fake, tmp_path / "f.zarr")
    gz = _write(tmp_path / "g.csv.gz", ["1,2,3", "4,5,6"])
    with pytest.raises(InputValidationError, match="not a gzip file"):
        ingest(gz, tmp_path / "g.zarr")


@pytest.mark.parametrize("bad", ["oops", '"1,234.5"'])
def test_a_numeric_target_with_one_text_cell_is_refused_not_read_as_labels(tmp_path, bad):
    """One text cell (a typo, a thousands separator) in a column of numbers made the whole
    target labels: 12 one-row classes and exit 0. Numbers and text in the first rows of an
    "auto" target are now an error naming the cell; a column of text alone is labels as
    before; target_type='labels' reads the mixed column as labels."""
    rows = _numeric_rows(12)
    rows[7] = rows[7].rsplit(",", 1)[0] + "," + bad
    src = _write(tmp_path / "d.csv", ["a,b,y"] + rows)
    cell = bad.strip('"')
    with pytest.raises(InputValidationError, match=(
            rf"^line 9, target column 2 \('y'\): cannot parse {re.escape(repr(cell))} as a number, while 11 "
            r"other cell\(s\) of the column's first rows are numbers; fix that cell, or pass target_type='labels'")):
        ingest(src, tmp_path / "d.zarr")
    assert not (tmp_path / "d.zarr").exists()
    ingest(src, tmp_path / "l.zarr", target_type="labels")
    assert len(zarr.open_group(str(tmp_path / "l.zarr"), mode="r").attrs["classes"]) == 12
    words = _write(tmp_path / "w.csv", ["a,b,y"] + [f"{i},{i},{'yes' if i % 2 else 'no'}" for i in range(6)])
    ingest(words, tmp_path / "w.zarr")
    assert zarr.open_group(str(tmp_path / "w.zarr"), mode="r").attrs["classes"] == ["no", "yes"]


@pytest.mark.parametrize("nan", ["nan", "NaN", "NAN"])
def test_a_nan_cell_among_text_labels_is_a_missing_label_as_na_is(tmp_path, nan):
    """Labels cat, dog, nan (what df.astype(str) writes for a missing label) were refused
    as "cannot parse 'cat' as a number, while 1 other cell(s) ... are numbers" even with
    missing='drop', where an NA cell in its place is a missing label: the nan cell counted
    as a number in telling labels from numbers. It is now a missing label as NA is;
    infinities beside text alone are labels (pandas reads them as text there), beside
    finite numbers numbers; a numeric target's nan cell is a NaN value as before."""
    rows = ["1,cat", "2,dog", f"3,{nan}", "4,cat", "5, dog "]
    src = _write(tmp_path / "d.csv", ["a,y"] + rows)
    na = _write(tmp_path / "na.csv", ["a,y"] + [r.replace(nan, "NA") for r in rows])
    for path in (src, na):
        with pytest.raises(MissingValueError, match=(
                rf"1 row has missing values.*line 4, column 1 \('y'\): {re.escape(repr(nan if path is src else 'NA'))}"
                r".*--missing drop")):
            ingest(path, tmp_path / f"{path.stem}.zarr")
        assert not (tmp_path / f"{path.stem}.zarr").exists()
        ingest(path, tmp_path / f"{path.stem}.zarr", missing="drop")
        X, y, attrs, _ = _read(tmp_path / f"{path.stem}.zarr")
        assert attrs["classes"] == ["cat", "dog"] and attrs["rows_dropped"] == 1
        np.testing.assert_array_equal(X[:, 0], [1, 2, 4, 5])
        np.testing.assert_array_equal(y, [0, 1, 0, 1])
    first = _write(tmp_path / "first.csv", ["a,y", f"1,{nan}", f"2,{nan}", "3,dog", "4,cat"])
    ingest(first, tmp_path / "first.zarr", missing="drop")
    assert _read(tmp_path / "first.zarr")[2]["classes"] == ["cat", "dog"]
    inf = _write(tmp_path / "inf.csv", ["a,y", "1,cat", "2,inf", "3,-inf", "4,dog"])
    ingest(inf, tmp_path / "inf.zarr")
    assert _read(tmp_path / "inf.zarr")[2]["classes"] == ["-inf", "cat", "dog", "inf"]
    typo = _write(tmp_path / "typo.csv", ["a,y", "1,1.5", "2,inf", f"3,{nan}", "4,oops"])
    with pytest.raises(InputValidationError, match=(
            r"line 5, target column 1 \('y'\): cannot parse 'oops' as a number, while 2 other cell\(s\)")):
        ingest(typo, tmp_path / "typo.zarr")
    numeric = _write(tmp_path / "num.csv", ["a,y", "1,1.5", "2,2.5", f"3,{nan}", "4,3"])
    with pytest.raises(NonFiniteInputError, match=r"line 4, column 1 \('y'\): value is nan.*--missing drop"):
        ingest(numeric, tmp_path / "num.zarr")
    ingest(numeric, tmp_path / "num.zarr", missing="drop")
    X, y, attrs, _ = _read(tmp_path / "num.zarr")
    assert "classes" not in attrs and y.dtype == np.float64
    np.testing.assert_array_equal(y, [1.5, 2.5, 3.0])


def test_errors_a_command_line_user_meets_name_the_flag_too(tmp_path):
    """Messages that named only the Python parameter (target_type='labels', format='csv'
    with delimiter=None, cv=None) also name the dkrr flag (found by a CLI probe)."""
    from dkrr.linalg._cv import check_rows_for_folds

    npy = tmp_path / "d.npy"
    np.save(npy, np.ones((4, 3)))
    with pytest.raises(InvalidParameterError, match=r"target_type='labels' \(--labels\) is for CSV and Parquet"):
        ingest(npy, tmp_path / "n.zarr", target_type="labels")
    svm = _write(tmp_path / "d.svm", ["1 1:0.5", "2 3 4"])
    with pytest.raises(InputValidationError, match=r"\(--format csv --delimiter whitespace\)"):
        ingest(svm, tmp_path / "s.zarr")
    csv = _write(tmp_path / "d.csv", ["1,2", "3,4"])
    with pytest.raises(InvalidParameterError, match=r"\(--delimiter whitespace\); got 'ab'"):
        ingest(csv, tmp_path / "c.zarr", delimiter="ab")
    with pytest.raises(InputValidationError, match=r"Use cv=None \(no cross-validation; --no-cv\)"):
        check_rows_for_folds(3, 5)


def test_csv_given_as_libsvm_suggests_csv(tmp_path):
    src = _write(tmp_path / "d.txt", ["1.5,2,3", "4,5,6"])
    with pytest.raises(InputValidationError, match=r"line 1: label '1.5,2,3'.*format='csv'"):
        ingest(src, tmp_path / "d.zarr")


# ---------------------------------------------------------------------------- CLI


def test_cli_missing_values_error_then_drop(tmp_path):
    src = _write(tmp_path / "d.csv", ["a,b,y"] + _numeric_rows(12, {4: (2, "")}))
    out = tmp_path / "d.zarr"
    proc = dkrr("ingest", src, "--out", out, "-q")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "line 6, column 2 ('y')" in proc.stderr and "--missing drop" in proc.stderr
    assert not out.exists()
    proc = dkrr("ingest", src, "--out", out, "--missing", "drop", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "1 row(s) with missing values dropped (--missing drop)" in proc.stdout  # said, not only recorded
    assert _read(out)[2]["rows_dropped"] == 1
    X, y, _, _ = _read(out)
    assert X.shape == (11, 2)
    np.testing.assert_allclose(y, [1000 + 0.37 * i for i in range(12) if i != 4], rtol=1e-6)


def test_cli_labels_flag(tmp_path):
    src = _write(tmp_path / "d.csv", ["x,digit", "1,3", "2,1", "3,3"])
    proc = dkrr("ingest", src, "--out", tmp_path / "d.zarr", "--labels", "-q")
    assert proc.returncode == 0, proc.stderr
    assert "classes ['1', '3']" in proc.stdout
    np.testing.assert_array_equal(_read(tmp_path / "d.zarr")[1], [1, 0, 1])


def test_input_not_found_error_lives_in_errors(tmp_path):
    import dkrr.errors
    import dkrr.io

    assert dkrr.io.InputNotFoundError is dkrr.errors.InputNotFoundError
    with pytest.raises(dkrr.errors.InputNotFoundError, match="does not exist"):
        ingest(tmp_path / "nope.csv", tmp_path / "o.zarr")


@pytest.mark.parametrize("header", [True, False])
@pytest.mark.parametrize("blocksize", [None, 64])  # one pass, or segments converted in parallel
def test_lines_ending_with_the_delimiter_are_named_not_sent_to_missing_drop(tmp_path, header, blocksize):
    # '1,2,3,' on every line: an empty last column, the default target; missing='drop'
    # (the general fix) would leave no row
    rows = [f"{i},{i + 0.5},{2 * i}," for i in range(40)]
    src = _write(tmp_path / "d.csv", (["a,b,y,"] if header else []) + rows)
    kw = {} if blocksize is None else {"blocksize": blocksize, "chunk_rows": 8}
    with pytest.raises(MissingValueError) as info:
        ingest(src, tmp_path / "d.zarr", **kw)
    msg = str(info.value)
    assert "end with the delimiter" in msg and "'column_3'" in msg and "taken as the target" in msg
    assert "missing='drop'" not in msg
    ingest(src, tmp_path / "d.zarr", target=2, features=[0, 1], dtype="float64", **kw)
    X, y, _, _ = _read(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X, [[i, i + 0.5] for i in range(40)])
    np.testing.assert_array_equal(y, 2.0 * np.arange(40))


def test_a_sparse_last_column_keeps_the_missing_drop_fix(tmp_path):
    # the first lines end with values: the last column's missing cells are data's
    src = _write(tmp_path / "d.csv", ["a,b,y"] + _numeric_rows(10, {4: (2, ""), 7: (2, "")}))
    with pytest.raises(MissingValueError, match="missing='drop'") as info:
        ingest(src, tmp_path / "d.zarr")
    assert "end with the delimiter" not in str(info.value)


@pytest.mark.parametrize(("first", "header", "doubt"), [
    ("0.5,1.5,2", True, "takes line 1 (0.5,1.5,2) for the column names"),  # data as names
    ("0,1,2", None, "line 1 (0,1,2) is read as a row of data"),  # df.to_csv(index=False)
    ("1,2,3", None, None),  # counting from 1: as likely a toy file's first row
    ("0,1,2", False, None),  # said: no doubt
    ("0.5,1.5,2", None, None),  # a row of data, detected
    ("x0,x1,y", None, None),
    ("x0,x1,y", True, None),
    ("0,1", None, None),  # two columns: as likely data (a binary row)
])
def test_a_first_line_of_numbers_in_a_doubtful_role_is_warned_of(tmp_path, first, header, doubt):
    import warnings

    from dkrr.errors import HeaderWarning

    src = _write(tmp_path / "d.csv", [first] + [",".join(["5", "6", "7"][: first.count(",") + 1])] * 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ingest(src, tmp_path / "d.zarr", header=header, overwrite=True)
    said = [str(w.message) for w in caught if issubclass(w.category, HeaderWarning)]
    if doubt is None:
        assert said == []
    else:
        assert len(said) == 1 and doubt in said[0], said


def test_the_header_doubt_is_one_warning_line_of_the_command(tmp_path):
    src = _write(tmp_path / "d.csv", ["0.5,1.5,2", "5,6,7", "8,9,10"])
    result = dkrr("ingest", src, "--out", tmp_path / "d.zarr", "--header")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if "warning" in line]
    assert lines == [f"dkrr ingest: warning: {src}: header=True (--header) takes line 1 (0.5,1.5,2) for the "
                     "column names, though each of its cells is a number; if it is a row of data, ingest "
                     "again with header=False (--no-header), or leave the header to detection"]
    assert "X 2 x 2" in result.stdout


def test_a_header_of_column_counts_over_a_text_target_is_warned_of(tmp_path):
    # pandas' to_csv(index=False) of a frame from a matrix plus a 'label' column: '0,1,2,label'
    # over '0.1,0.2,0.3,cat' has no text over a number, so it reads as data (a class 'label')
    import warnings

    from dkrr.errors import HeaderWarning

    src = _write(tmp_path / "d.csv", ["0,1,2,label", "0.1,0.2,0.3,cat", "0.4,0.5,0.6,dog", "0.7,0.8,0.9,cat"])
    with pytest.warns(HeaderWarning, match=r"line 1 \(0,1,2,label\) is read as a row of data"):
        s = ingest(src, tmp_path / "d.zarr")
    assert s.n_rows == 4 and s.classes == ["cat", "dog", "label"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", HeaderWarning)
        s = ingest(src, tmp_path / "h.zarr", header=True)
    assert s.n_rows == 3 and s.classes == ["cat", "dog"] and s.feature_names == ["0", "1", "2"]


@pytest.mark.parametrize(("target", "rows"), [
    (None, ["0.5,1.5,other", "0.7,1.1,1", "0.2,0.3,2", "0.9,0.4,other"]),
    (0, ["other,0.5,1.5", "1,0.7,1.1", "2,0.2,0.3", "other,0.9,0.4"]),
    ("0", ["other,0.5,1.5", "1,0.7,1.1", "2,0.2,0.3", "other,0.9,0.4"]),
])
def test_labels_text_over_a_numeric_label_is_not_a_header(tmp_path, target, rows):
    # target_type='labels' (--labels), as the README advises for labels mixing text and
    # numbers: line 1's label 'other' over line 2's '1' made line 1 the header (a row lost)
    src = _write(tmp_path / "d.csv", rows)
    s = ingest(src, tmp_path / "d.zarr", target=target, target_type="labels", dtype="float64")
    assert s.n_rows == 4 and s.classes == ["1", "2", "other"]
    assert s.feature_names == (["column_0", "column_1"] if target is None else ["column_1", "column_2"])
    X, y, _, _ = _read(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X[0], [0.5, 1.5])
    assert [s.classes[c] for c in y] == ["other", "1", "2", "other"]
    headed = _write(tmp_path / "h.csv", ["a,b,y" if target is None else "y,a,b"] + rows)  # a header is still one
    s = ingest(headed, tmp_path / "h.zarr", target=target, target_type="labels")
    assert s.n_rows == 4 and s.target_names == ["y"]


def test_a_carriage_return_inside_the_second_line_is_named(tmp_path):
    # the first line was checked, the second went to Python's csv module: a raw _csv.Error
    src = tmp_path / "d.csv"
    src.write_bytes(b"a,b,y\r\n1,2,3\r4,5,6\n7,8,9\n")
    with pytest.raises(InputValidationError, match=r"line 2 holds a carriage return inside it"):
        ingest(src, tmp_path / "d.zarr")


def test_pandas_row_index_in_a_csv_is_warned_of(tmp_path):
    """``df.to_csv()`` writes the row index as a first column without a name: with named
    columns it was read as a feature (0, 1, 2, ...) without a word; with pandas' own column
    names (``,0,1,2``) line 1 was read as data, and its empty cell was the error."""
    import warnings

    import pandas as pd

    from dkrr.errors import HeaderWarning

    rng = np.random.default_rng(0)
    pd.DataFrame(rng.normal(size=(20, 3)), columns=["a", "b", "y"]).to_csv(tmp_path / "named.csv")
    with pytest.warns(HeaderWarning, match=r"column 0 has no name in the header \(line 1\) and its first value "
                                           r"is 0: it looks like the row index pandas writes"):
        s = ingest(tmp_path / "named.csv", tmp_path / "named.zarr")
    assert s.feature_names == ["column_0", "a", "b"]
    with warnings.catch_warnings():  # the fix it names: no warning
        warnings.simplefilter("error", HeaderWarning)
        assert ingest(tmp_path / "named.csv", tmp_path / "f.zarr", features=["a", "b"]).feature_names == ["a", "b"]
    pd.DataFrame(rng.normal(size=(20, 3))).to_csv(tmp_path / "counted.csv")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with pytest.raises(MissingValueError, match=r"line 1, column 0 \('column_0'\): ''"):
            ingest(tmp_path / "counted.csv", tmp_path / "counted.zarr")
    said = [str(w.message) for w in got if w.category is HeaderWarning]
    assert len(said) == 1 and "line 1 (,0,1,2) is read as a row of data" in said[0], said
    assert "pass header=True (--header) and leave the index column out" in said[0]
    s = ingest(tmp_path / "counted.csv", tmp_path / "counted.zarr", header=True, features=["0", "1"])
    assert s.n_rows == 20 and s.feature_names == ["0", "1"] and s.target_names == ["2"]
    result = dkrr("ingest", tmp_path / "counted.csv", "--out", tmp_path / "cli.zarr")
    lines = [line for line in result.stderr.splitlines() if line.startswith("dkrr ingest:")]  # not progress
    assert result.returncode == 1 and len(lines) == 2, result.stderr  # the warning explains the error after it
    assert lines[0].startswith("dkrr ingest: warning: ") and "(,0,1,2)" in lines[0]
    assert lines[1].startswith("dkrr ingest: error: ") and "missing values" in lines[1]


def test_a_npy_array_without_columns_is_named_so(tmp_path):
    # it was "target column index -1 is out of range: ... (0-based indices 0..-1)"
    np.save(tmp_path / "e.npy", np.zeros((5, 0)))
    with pytest.raises(InputValidationError, match=r"holds an array of shape \(5, 0\): it has no columns"):
        ingest(tmp_path / "e.npy", tmp_path / "e.zarr")


@pytest.mark.parametrize("spelled", ["TAB", "Tab", "WHITESPACE"])
def test_the_delimiters_names_are_read_in_any_case(tmp_path, spelled):
    src = _write(tmp_path / "d.tsv", ["a\tb\ty", "1\t2\t3", "4\t5\t6"])
    result = dkrr("ingest", src, "--out", tmp_path / "d.zarr", "--delimiter", spelled, "--format", "csv", "-q")
    assert result.returncode == 0, result.stderr
    X, y, _, _ = _read(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X, [[1, 2], [4, 5]])
