"""Ingest: index base, ``like=`` a training store, stored dtypes, and one-line errors.

Every test writes real files in tmp_path and runs the real ingest (or the real ``dkrr``
command in a subprocess) into real Zarr stores.
"""

from __future__ import annotations

import bz2
import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from sklearn.datasets import load_svmlight_file

from dkrr.errors import (
    FeatureMismatchError,
    InputValidationError,
    InvalidParameterError,
    StoreNotFoundError,
)
from dkrr.io import ingest


def _read(path):
    group = zarr.open_group(str(path), mode="r")
    return group["X"][...], group["y"][...], dict(group.attrs)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def dkrr(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "dkrr.cli", *map(str, args)],
                          check=False, capture_output=True, text=True, timeout=120,
                          input=stdin)


# ------------------------------------------------------------------- LIBSVM index base

# zero-based files (as scikit-learn writes them) whose test half never uses index 0
TRAIN_0 = ["1 0:1.5 2:2 4:-1", "0 1:3 3:0.5", "1 0:2 4:7"]
TEST_0 = ["0 1:4 3:1", "1 2:-2 3:6"]


def test_libsvm_zero_based_test_file_is_not_shifted(tmp_path):
    """Issue 23 item 5: without index 0 and with n_features the base was guessed
    one-based, shifting every column; now the guess is refused and both explicit
    index_base=0 and like=TRAIN give the columns the file means."""
    train = _write(tmp_path / "train.svm", TRAIN_0)
    test = _write(tmp_path / "test.svm", TEST_0)
    want = load_svmlight_file(str(test), n_features=5, zero_based=True)[0].toarray()

    with pytest.raises(InputValidationError, match=r"index base cannot be guessed.*"
                       r"index_base=1 or 0 \(--index-base.*like=TRAIN_STORE"):
        ingest(test, tmp_path / "guess.zarr", n_features=5)
    assert not (tmp_path / "guess.zarr").exists()

    ingest(test, tmp_path / "explicit.zarr", n_features=5, index_base=0)
    X, _, attrs = _read(tmp_path / "explicit.zarr")
    np.testing.assert_array_equal(X, want)
    assert attrs["index_base"] == 0 and attrs["n_features"] == 5

    s = ingest(train, tmp_path / "train.zarr", dtype="float64")
    assert s.index_base == 0 and s.index_base_guessed  # index 0 occurs
    s = ingest(test, tmp_path / "test.zarr", like=tmp_path / "train.zarr")
    X, y, attrs = _read(tmp_path / "test.zarr")
    np.testing.assert_array_equal(X, want)
    assert X.dtype == np.float64  # the training store's dtype
    np.testing.assert_array_equal(y, [0, 1])
    assert s.index_base == 0 and not s.index_base_guessed
    assert attrs["index_base"] == 0 and attrs["n_features"] == 5
    assert attrs["like"] == str(tmp_path / "train.zarr")
    assert attrs["source"] == str(test) and attrs["format"] == "libsvm"


def test_libsvm_auto_base_is_one_where_only_one_reading_fits(tmp_path):
    src = _write(tmp_path / "d.svm", ["1 1:2 3:4", "0 2:1"])
    # no n_features: one-based (the LIBSVM convention), recorded and reported as guessed
    s = ingest(src, tmp_path / "a.zarr")
    X, _, attrs = _read(tmp_path / "a.zarr")
    assert X.shape == (2, 3) and attrs["index_base"] == 1
    assert s.index_base == 1 and s.index_base_guessed
    # largest index == n_features: zero-based would need 4 columns
    ingest(src, tmp_path / "b.zarr", n_features=3)
    np.testing.assert_array_equal(_read(tmp_path / "b.zarr")[0], X)
    with pytest.raises(InputValidationError, match="has feature index 0 but index_base=1"):
        ingest(_write(tmp_path / "z.svm", ["1 0:1"]), tmp_path / "z.zarr", index_base=1)
    for bad in (True, "0", 2):
        with pytest.raises(InvalidParameterError, match="index_base must be 0, 1 or 'auto'"):
            ingest(src, tmp_path / "x.zarr", index_base=bad)


def test_libsvm_like_refuses_a_contradicting_option(tmp_path):
    ingest(_write(tmp_path / "train.svm", TRAIN_0), tmp_path / "train.zarr")
    test = _write(tmp_path / "test.svm", TEST_0)
    with pytest.raises(InvalidParameterError, match=r"index_base=1 contradicts like=.*index_base=0"):
        ingest(test, tmp_path / "t.zarr", like=tmp_path / "train.zarr", index_base=1)
    with pytest.raises(InvalidParameterError, match=r"n_features=7 contradicts like"):
        ingest(test, tmp_path / "t.zarr", like=tmp_path / "train.zarr", n_features=7)
    with pytest.raises(StoreNotFoundError, match="does not exist"):
        ingest(test, tmp_path / "t.zarr", like=tmp_path / "nope.zarr")
    # a test file with an index beyond the training store's columns
    wide = _write(tmp_path / "wide.svm", ["1 6:1"])
    with pytest.raises(FeatureMismatchError, match=r"needs n_features >= 7.*n_features=5"):
        ingest(wide, tmp_path / "t.zarr", like=tmp_path / "train.zarr")
    assert not (tmp_path / "t.zarr").exists()


# -------------------------------------------------------------------- CSV like= a store


def test_csv_like_codes_labels_with_the_training_classes(tmp_path):
    train = _write(tmp_path / "train.csv", ["kind;a;b", "dog;1;2", "cat;3;4", "emu;5;6"])
    s = ingest(train, tmp_path / "train.zarr", delimiter=";", target="kind")
    assert s.classes == ["cat", "dog", "emu"]
    # the test file lacks 'cat': on its own its classes would be ['dog', 'emu']
    test = _write(tmp_path / "test.csv", ["kind;a;b", "emu;7;8", "dog;9;10"])
    s = ingest(test, tmp_path / "test.zarr", like=tmp_path / "train.zarr")
    X, y, attrs = _read(tmp_path / "test.zarr")
    np.testing.assert_array_equal(X, [[7, 8], [9, 10]])
    np.testing.assert_array_equal(y, [2, 1])  # codes of the training classes
    assert s.classes == attrs["classes"] == ["cat", "dog", "emu"]
    assert attrs["delimiter"] == ";" and attrs["target_columns"] == [0]
    assert attrs["header"] is True and attrs["feature_names"] == ["a", "b"]

    unknown = _write(tmp_path / "u.csv", ["kind;a;b", "yak;1;2", "dog;1;2", "cow;1;2"])
    with pytest.raises(InputValidationError,
                       match=r"u\.csv: 2 of its labels are not classes.*'yak', 'cow'"):
        ingest(unknown, tmp_path / "u.zarr", like=tmp_path / "train.zarr")
    # a header that orders the columns otherwise, or holds more: the store's, by name
    swapped = _write(tmp_path / "swapped.csv", ["b;id;a;kind", "1;7;2;dog", "3;8;4;emu"])
    ingest(swapped, tmp_path / "swapped.zarr", like=tmp_path / "train.zarr")
    X, y, attrs = _read(tmp_path / "swapped.zarr")
    assert X.tolist() == [[2, 1], [4, 3]] and y.tolist() == [1, 2]
    assert attrs["feature_names"] == ["a", "b"] and attrs["feature_columns"] == [2, 0]
    assert attrs["target_columns"] == [3] and attrs["target_names"] == ["kind"]
    for lines, what in ((["kind;a;c", "dog;1;2"], "it has no column 'b'"),
                        (["kind;a;a;b", "dog;1;2;3"], "it names 'a' 2 times")):
        with pytest.raises(FeatureMismatchError, match=rf"header does not name the columns of like=.*{what}"):
            ingest(_write(tmp_path / "s.csv", lines), tmp_path / "s.zarr", like=tmp_path / "train.zarr")
    # a test file without the header: its columns are taken by position
    bare = _write(tmp_path / "bare.csv", ["cat;0;1", "dog;2;3"])
    ingest(bare, tmp_path / "bare.zarr", like=tmp_path / "train.zarr")
    X, y, attrs = _read(tmp_path / "bare.zarr")
    assert X.tolist() == [[0, 1], [2, 3]] and y.tolist() == [0, 1]
    assert attrs["header"] is False and attrs["feature_names"] == ["column_1", "column_2"]
    with pytest.raises(InvalidParameterError, match=r"target='a' contradicts like=.*target=0"):
        ingest(test, tmp_path / "x.zarr", like=tmp_path / "train.zarr", target="a")
    assert not any((tmp_path / n).exists() for n in ("u.zarr", "s.zarr", "x.zarr"))


def test_like_a_store_without_feature_columns_takes_features_by_name(tmp_path):
    """A store of an older dkrr records no 'feature_columns': features= given by name with
    like= and a header in another order raised a bare ValueError (int('a'))."""
    train = _write(tmp_path / "train.csv", ["a,b,c,y", "1,2,3,10", "4,5,6,20"])
    ingest(train, tmp_path / "train.zarr", target="y", features=["a", "b", "c"])
    group = zarr.open_group(str(tmp_path / "train.zarr"), mode="r+")
    attrs = dict(group.attrs)
    del attrs["feature_columns"]
    group.attrs.clear()
    group.attrs.update(attrs)
    test = _write(tmp_path / "test.csv", ["y,c,a,b", "30,9,7,8"])
    ingest(test, tmp_path / "test.zarr", like=tmp_path / "train.zarr", features=["a", "b", "c"])
    X, y, attrs = _read(tmp_path / "test.zarr")
    assert X.tolist() == [[7, 8, 9]] and y.tolist() == [30] and attrs["feature_names"] == ["a", "b", "c"]
    with pytest.raises(FeatureMismatchError, match=r"features names 'q', which is not a column of like="):
        ingest(test, tmp_path / "q.zarr", like=tmp_path / "train.zarr", features=["a", "q", "c"])
    assert not (tmp_path / "q.zarr").exists()


def test_csv_like_numeric_target_and_headerless(tmp_path):
    train = _write(tmp_path / "train.txt", ["1 2 10", "3 4 20"])
    ingest(train, tmp_path / "train.zarr", format="csv", delimiter=None, header=False,
           target=0, y_dtype="float32")
    test = _write(tmp_path / "test.data", ["5 6 30"])
    ingest(test, tmp_path / "test.zarr", like=tmp_path / "train.zarr")
    X, y, attrs = _read(tmp_path / "test.zarr")
    np.testing.assert_array_equal(X, [[6, 30]])
    assert y.dtype == np.float32 and y.tolist() == [5.0]
    assert attrs["delimiter"] is None and attrs["header"] is False


# ---------------------------------------------------------------------- stored dtypes


def test_numeric_target_is_stored_float64_by_default(tmp_path):
    """Issue 23 item 8: y was float32 (100000001 became 100000000)."""
    big = 100_000_001
    csv = _write(tmp_path / "d.csv", ["a,y", f"1,{big}", "2,3"])
    svm = _write(tmp_path / "d.svm", [f"{big} 1:1", "3 1:2"])
    npy = tmp_path / "d.npy"
    np.save(npy, np.array([[1.0, big], [2.0, 3.0]]))
    for src in (csv, svm, npy):
        ingest(src, tmp_path / f"{src.suffix[1:]}.zarr")
        X, y, _ = _read(tmp_path / f"{src.suffix[1:]}.zarr")
        assert X.dtype == np.float32 and y.dtype == np.float64, src
        assert y.tolist() == [big, 3.0], src
    ingest(csv, tmp_path / "f32.zarr", y_dtype="float32")
    assert _read(tmp_path / "f32.zarr")[1].dtype == np.float32
    with pytest.raises(InvalidParameterError, match="y_dtype must be float32 or float64"):
        ingest(csv, tmp_path / "i.zarr", y_dtype="int64")


def _main(capsys, *args):
    """The dkrr command, in process: (exit code, stdout, stderr)."""
    from dkrr.cli._main import main

    capsys.readouterr()
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_help_states_the_stored_dtypes_and_header_detection(capsys):
    code, out, _ = _main(capsys, "ingest", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert "stored dtype of X (default float32)" in flat
    assert "--y-dtype" in flat and "stored dtype of a numeric y (default float64" in flat
    assert "class labels are stored as int32 codes" in flat
    assert "default: detected" in flat
    assert "--index-base {0,1,auto}" in flat and "--like STORE" in flat


def test_cli_like_index_base_and_delimiter_words(tmp_path, capsys):
    train = _write(tmp_path / "train.svm", ["1 1:2 3:4", "0 2:1"])
    code, out, err = _main(capsys, "ingest", train, "--out", tmp_path / "train.zarr", "-q")
    assert code == 0, err
    assert "read as one-based (index 0 never occurs)" in out and "--index-base 0" in out
    test = _write(tmp_path / "test.svm", ["1 1:5"])
    code, out, err = _main(capsys, "ingest", test, "--out", tmp_path / "test.zarr",
                           "--like", tmp_path / "train.zarr", "-q")
    assert code == 0, err
    assert "one-based" not in out  # not guessed: taken from the store
    X, _, attrs = _read(tmp_path / "test.zarr")
    assert X.tolist() == [[5.0, 0.0, 0.0]] and attrs["index_base"] == 1
    code, _, err = _main(capsys, "ingest", test, "--out", tmp_path / "z.zarr", "--index-base", "0")
    assert code == 0, err
    assert _read(tmp_path / "z.zarr")[0].tolist() == [[0.0, 5.0]]
    code, _, err = _main(capsys, "ingest", test, "--out", tmp_path / "n.zarr", "--n-features", "4")
    assert code == 1 and err.startswith("dkrr ingest: error: ") and err.count("\n") == 1
    assert "--index-base 1 or 0" in err and "--like" in err
    ws = _write(tmp_path / "ws.csv", ["1  2\t3", "4 5 6"])
    code, _, err = _main(capsys, "ingest", ws, "--out", tmp_path / "ws.zarr",
                         "--delimiter", "whitespace", "-q")
    assert code == 0, err
    assert _read(tmp_path / "ws.zarr")[0].tolist() == [[1, 2], [4, 5]]


# ------------------------------------------------------------ one-line errors, not tracebacks


def _svm_text(n=20_000) -> bytes:
    return "".join(f"{i % 2} 1:{i}.5 3:{i}\n" for i in range(n)).encode()


@pytest.mark.parametrize("kind", ["gz", "bz2"])
def test_corrupt_compressed_input_is_one_error(tmp_path, kind):
    """Issue 23 item 10: a corrupt .svm.gz raised zlib.error (a traceback)."""
    data = (gzip if kind == "gz" else bz2).compress(_svm_text())
    src = tmp_path / f"c.svm.{kind}"
    src.write_bytes(data[:100] + bytes(50) + data[150:])
    with pytest.raises(InputValidationError,
                       match=rf"c\.svm\.{kind}: the {'gzip' if kind == 'gz' else 'bzip2'} "
                             r"data is corrupt or truncated"):
        ingest(src, tmp_path / "c.zarr")
    assert not (tmp_path / "c.zarr").exists()


def test_truncated_gzip_names_the_last_line_read(tmp_path):
    text = _svm_text()
    src = tmp_path / "t.csv.gz"
    src.write_bytes(gzip.compress(text.replace(b" 1:", b",").replace(b" 3:", b","))[:30_000])
    with pytest.raises(InputValidationError,
                       match=r"t\.csv\.gz: the gzip data is corrupt or truncated: it cannot be "
                             r"decompressed past line \d+ \(Compressed file ended"):
        ingest(src, tmp_path / "t.zarr", header=False)


def test_libsvm_index_beyond_int64_is_one_error(tmp_path):
    src = _write(tmp_path / "big.svm", ["1 1:2", "1 99999999999999999999:3"])
    with pytest.raises(InputValidationError,
                       match=r"line 2: feature index 99999999999999999999 is beyond the 64-bit"):
        ingest(src, tmp_path / "big.zarr")


def test_stdin_pipe_is_refused_in_one_line(tmp_path):
    """A pipe cannot be sized or read twice: refused before reading, not misread."""
    p = dkrr("ingest", "/dev/stdin", "--format", "libsvm", "--out", tmp_path / "p.zarr",
             stdin="1 1:2\n0 2:3\n")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert p.stderr.startswith("dkrr ingest: error: /dev/stdin is not a regular file")
    assert "save the stream to a file first" in p.stderr
    assert not (tmp_path / "p.zarr").exists()


def test_carriage_return_line_endings_are_refused_in_one_line(tmp_path):
    """Lines ended by \\r alone (old Mac OS): csv's "new-line character seen in unquoted
    field" came out as a traceback. Now one line that says how to convert the file;
    \\r\\n endings are read as before."""
    (tmp_path / "cr.csv").write_bytes(b"a,b,y\r1,2,3\r4,5,6\r")
    p = dkrr("ingest", tmp_path / "cr.csv", "--out", tmp_path / "cr.zarr")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "dkrr ingest: error: " in p.stderr and "ends its lines, or some of them, with \\r alone" in p.stderr, p.stderr
    assert not (tmp_path / "cr.zarr").exists()
    (tmp_path / "crlf.csv").write_bytes(b"a,b,y\r\n1,2,3\r\n4,5,6\r\n")
    assert ingest(tmp_path / "crlf.csv", tmp_path / "crlf.zarr").n_rows == 2


def test_a_header_naming_two_columns_alike_is_refused_where_they_are_read(tmp_path):
    """`a,a,y` was ingested as features 'a', 'a', and a model fitted on it passed the
    name check of a store whose two 'a' columns had traded places. Refused now, unless
    the duplicates are left out."""
    (tmp_path / "dup.csv").write_text("a,a,y\n1,2,3\n4,5,6\n")
    with pytest.raises(InputValidationError, match=r"its header \(or schema\) names 2 columns 'a' \(0-based columns \[0, 1\]\)"):
        ingest(tmp_path / "dup.csv", tmp_path / "dup.zarr")
    assert not (tmp_path / "dup.zarr").exists()
    (tmp_path / "unused.csv").write_text("a,x,x,y\n1,2,3,4\n4,5,6,7\n")
    s = ingest(tmp_path / "unused.csv", tmp_path / "unused.zarr", features=["a"])
    assert s.feature_names == ["a"] and s.n_rows == 2
    with pytest.raises(InputValidationError, match=r"'x' appears 2 times in the header"):  # split_columns' own
        ingest(tmp_path / "unused.csv", tmp_path / "x.zarr", features=["a", "x"])


# ------------------------------------------------------------------ hints and line numbers


@pytest.mark.parametrize(("sep", "hint"), [(";", r"delimiter=';' \(--delimiter ';'\)"),
                                           ("\t", r"delimiter='\\t' \(--delimiter tab\)")])
def test_one_field_csv_suggests_the_delimiter(tmp_path, sep, hint):
    """Issue 23 item 11: a ';'-delimited CSV said 'every column is a target'."""
    src = _write(tmp_path / "d.csv", [sep.join(["a", "b", "y"]), sep.join(["1", "2", "3"])])
    with pytest.raises(InputValidationError,
                       match=r"d\.csv: line 1 is a single field when split at ','.*" + hint):
        ingest(src, tmp_path / "d.zarr")


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_invalid_utf8_names_the_line_that_holds_it(tmp_path, suffix):
    """Issue 23 item 11: the decoder reads ahead, so the line reported was an earlier one."""
    lines = [f"{i},{i},{i}".encode() for i in range(3000)]
    lines[2000] = b"1,\xff,2"
    data = b"\n".join(lines) + b"\n"
    src = tmp_path / f"u.csv{suffix}"
    src.write_bytes(gzip.compress(data) if suffix else data)
    with pytest.raises(InputValidationError, match=r"line 2001 is not valid UTF-8"):
        ingest(src, tmp_path / "u.zarr")


def test_like_across_csv_and_npy_takes_the_columns_by_position(tmp_path):
    """A .npy test file like a CSV store whose target is its first column (or a CSV file like
    a .npy store): the store's target and feature positions. Across formats they were not
    taken, so the last column became the target and the training target a feature."""
    rows = np.arange(24, dtype=np.float64).reshape(6, 4)  # target first, then 3 features
    _write(tmp_path / "train.csv", ["t,a,b,c"] + [",".join(str(v) for v in r) for r in rows])
    ingest(tmp_path / "train.csv", tmp_path / "csv.zarr", target="t", dtype="float64")
    np.save(tmp_path / "test.npy", rows[::-1])
    ingest(tmp_path / "test.npy", tmp_path / "npy.zarr", like=tmp_path / "csv.zarr")
    X, y, attrs = _read(tmp_path / "npy.zarr")
    np.testing.assert_array_equal(y, rows[::-1, 0])
    np.testing.assert_array_equal(X, rows[::-1, 1:])
    assert attrs["target_columns"] == [0] and attrs["feature_columns"] == [1, 2, 3]
    # the reverse: a CSV file read like the .npy store (its header names are not the store's)
    _write(tmp_path / "test.csv", ["t,x,y,z"] + [",".join(str(v) for v in r) for r in rows])
    ingest(tmp_path / "test.csv", tmp_path / "back.zarr", like=tmp_path / "npy.zarr")
    X, y, attrs = _read(tmp_path / "back.zarr")
    np.testing.assert_array_equal(y, rows[:, 0])
    np.testing.assert_array_equal(X, rows[:, 1:])


def test_like_across_libsvm_and_a_table_names_the_store_in_its_errors(tmp_path):
    """A LIBSVM file like a CSV store (and a CSV file like a LIBSVM store): the store gives
    the width of X, and nothing else carries across. The errors named options the user had
    not given ("n_features=4 was given") or suggested the like= just given; they now name
    the store."""
    _write(tmp_path / "train.csv", ["a,b,c,d,e,y"] + [",".join(["1", "2", "3", "4", "5", str(i)]) for i in range(4)])
    ingest(tmp_path / "train.csv", tmp_path / "csv.zarr")  # 5 features
    # indices 1..4 fit the store's 5 columns one-based and zero-based: no base to guess from
    test = _write(tmp_path / "test.svm", ["1 1:1.5 4:2", "0 2:3"])
    with pytest.raises(InputValidationError, match=r"fits the 5 columns of like=.*csv\.zarr.*records no index "
                       r"base: pass index_base=1 or 0") as info:
        ingest(test, tmp_path / "t.zarr", like=tmp_path / "csv.zarr")
    assert "TRAIN_STORE" not in str(info.value)
    ingest(test, tmp_path / "t.zarr", like=tmp_path / "csv.zarr", index_base=1)
    X, y, _ = _read(tmp_path / "t.zarr")
    np.testing.assert_array_equal(X, [[1.5, 0, 0, 2, 0], [0, 3, 0, 0, 0]])
    np.testing.assert_array_equal(y, [1, 0])
    # a CSV of 5 features like a LIBSVM store of 4 columns
    _write(tmp_path / "train.svm", ["1 1:1 4:2", "0 2:3"])
    ingest(tmp_path / "train.svm", tmp_path / "svm.zarr", index_base=1)
    with pytest.raises(FeatureMismatchError, match=r"has 5 feature columns but like=.*svm\.zarr has 4 \(its X's "
                       r"columns, which this file's features must match\)") as info:
        ingest(tmp_path / "train.csv", tmp_path / "c.zarr", like=tmp_path / "svm.zarr")
    assert "n_features=" not in str(info.value)
    assert not (tmp_path / "c.zarr").exists()
