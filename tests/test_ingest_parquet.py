"""Parquet ingest: a file or a directory, chosen columns, labels, missing cells, errors.

Every test writes real Parquet files (pandas/pyarrow) and runs the real ingest (or the
real ``dkrr`` command) into a real Zarr store.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pytest
import zarr

from dkrr.errors import InputValidationError, InvalidParameterError, MissingValueError, NonFiniteInputError
from dkrr.io import ingest, open_dataset


def _store(path):
    g = zarr.open_group(str(path), mode="r")
    return g["X"][...], g["y"][...], dict(g.attrs), g


def _frame(n=500, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "a": rng.standard_normal(n),
        "count": rng.integers(0, 50, n),
        "flag": rng.random(n) > 0.5,
        "city": rng.choice(["Lyon", "Oslo"], n),
        "y": rng.standard_normal(n) * 1e3 + 1e8 + np.arange(n),  # exact in float64 only
        "kind": rng.choice(["wolf", "bear", "lynx"], n),
    })


def _directory(path: Path, df: pd.DataFrame, parts: int = 11) -> Path:
    """`parts` files named part.0 .. part.{parts-1} (natural order), small row groups."""
    path.mkdir()
    bounds = np.linspace(0, len(df), parts + 1).astype(int)
    for k in range(parts):
        df.iloc[bounds[k]:bounds[k + 1]].to_parquet(path / f"part.{k}.parquet", row_group_size=17)
    (path / "_SUCCESS").write_text("")  # skipped, as pyarrow's dataset discovery does
    return path


def test_parquet_file_target_and_features(tmp_path):
    df = _frame()
    df.to_parquet(tmp_path / "d.parquet", row_group_size=64)
    s = ingest(tmp_path / "d.parquet", tmp_path / "d.zarr", target="y",
               features=["count", "a", "flag"], chunk_rows=100)
    X, y, attrs, g = _store(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X, df[["count", "a", "flag"]].to_numpy(np.float64).astype(np.float32))
    np.testing.assert_array_equal(y, df["y"].to_numpy())  # float64 by default: exact
    assert y.dtype == np.float64 and g["X"].chunks == (100, 3)
    assert attrs["feature_names"] == ["count", "a", "flag"] and attrs["target_names"] == ["y"]
    assert attrs["format"] == "parquet" and attrs["source"] == str(tmp_path / "d.parquet")
    assert s.n_rows == 500 and s.classes is None
    ds = open_dataset(tmp_path / "d.zarr")  # a complete dkrr store (manifest checked)
    assert ds.X.shape == (500, 3)


@pytest.mark.parametrize("blocksize", [2**30, 1000], ids=["one-task", "segments"])
def test_parquet_directory_in_natural_order_with_labels(tmp_path, blocksize):
    df = _frame(seed=1)
    src = _directory(tmp_path / "data.parquet", df)
    with dask.config.set(num_workers=3):
        s = ingest(src, tmp_path / "d.zarr", target="kind", features=["a", "count"], chunk_rows=32,
                   blocksize=blocksize)
    X, y, attrs, _ = _store(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X, df[["a", "count"]].to_numpy(np.float64).astype(np.float32))
    assert s.classes == attrs["classes"] == ["bear", "lynx", "wolf"]
    assert y.dtype == np.int32 and [s.classes[c] for c in y] == df["kind"].tolist()
    assert attrs["files"] == 11


def test_default_columns_a_pandas_index_and_a_numeric_target_as_labels(tmp_path):
    df = _frame()[["a", "count", "y"]]
    df.index = np.arange(1000, 1500)  # stored as a column: not a feature
    df.to_parquet(tmp_path / "d.parquet")
    s = ingest(tmp_path / "d.parquet", tmp_path / "d.zarr")
    assert s.feature_names == ["a", "count"] and s.target_names == ["y"]  # default: the last
    s = ingest(tmp_path / "d.parquet", tmp_path / "l.zarr", target="count", features=["a"],
               target_type="labels")
    _, y, _, _ = _store(tmp_path / "l.zarr")
    assert s.classes == sorted({str(v) for v in df["count"]}, key=int)  # sorted as numbers
    assert [int(s.classes[c]) for c in y] == df["count"].tolist()
    # a numeric target is numeric unless asked: never labels by itself
    s = ingest(tmp_path / "d.parquet", tmp_path / "n.zarr", target="count", features=["a"])
    assert s.classes is None and _store(tmp_path / "n.zarr")[1].dtype == np.float64


def test_non_numeric_features_are_refused_with_their_names(tmp_path):
    df = _frame()
    df["when"] = pd.Timestamp("2024-01-01") + pd.to_timedelta(np.arange(len(df)), "h")
    df.to_parquet(tmp_path / "d.parquet")
    with pytest.raises(InputValidationError, match=r"feature columns must be numeric, but 3 are not: "
                                                   r"'city' \(.*string\), 'kind' \(.*string\), "
                                                   r"'when' \(timestamp.*\); leave them out with features="):
        ingest(tmp_path / "d.parquet", tmp_path / "d.zarr", target="y")
    with pytest.raises(InputValidationError, match=r"target column 'kind' \(.*string\) is not numeric"):
        ingest(tmp_path / "d.parquet", tmp_path / "d.zarr", target="kind", features=["a"],
               target_type="numeric")
    with pytest.raises(InputValidationError, match=r"feature column 'nope' not found.*'a', 'count'"):
        ingest(tmp_path / "d.parquet", tmp_path / "d.zarr", target="y", features=["a", "nope"])
    with pytest.raises(InvalidParameterError, match="both a feature and a target"):
        ingest(tmp_path / "d.parquet", tmp_path / "d.zarr", target="y", features=["a", "y"])
    assert not (tmp_path / "d.zarr").exists()


def test_null_cells_are_missing_and_nan_is_not_finite(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"a": pa.array([1.0, 2.0, None, 4.0, 5.0, 6.0]),
                      "b": pa.array([1, 2, 3, None, 5, 6], pa.int64()),
                      "y": pa.array([1.0, 2.0, 3.0, 4.0, np.nan, 6.0])})  # a NaN, not a null
    pq.write_table(table, tmp_path / "d.parquet")
    df = table.to_pandas()
    with pytest.raises(MissingValueError, match=r"2 rows have missing values.*row 2 \(0-based\), column 0 "
                                                r"\('a'\): None; row 3 \(0-based\), column 1 \('b'\): None"):
        ingest(tmp_path / "d.parquet", tmp_path / "d.zarr")
    s = ingest(tmp_path / "d.parquet", tmp_path / "d.zarr", missing="drop")
    X, y, attrs, _ = _store(tmp_path / "d.zarr")
    assert s.n_rows == 3 and attrs["rows_dropped"] == 3  # the NaN row too
    np.testing.assert_array_equal(y, [1, 2, 6])
    pq.write_table(table.set_column(0, "a", pa.array([1.0] * 6)).set_column(
        1, "b", pa.array([1] * 6)), tmp_path / "nan.parquet")
    assert df["y"].isna().sum() == 1
    with pytest.raises(NonFiniteInputError, match=r"row 4 \(0-based\), column 2 \('y'\): value is nan"):
        ingest(tmp_path / "nan.parquet", tmp_path / "n.zarr")


def test_like_a_parquet_training_store(tmp_path):
    df = _frame(seed=2)
    df.iloc[:400].to_parquet(tmp_path / "train.parquet")
    ingest(tmp_path / "train.parquet", tmp_path / "train.zarr", target="kind", features=["count", "a"])
    test = df.iloc[400:][df.iloc[400:]["kind"] != "bear"]  # lacks a class
    test[["kind", "a", "city", "count"]].to_parquet(tmp_path / "test.parquet")  # columns reordered
    s = ingest(tmp_path / "test.parquet", tmp_path / "test.zarr", like=tmp_path / "train.zarr")
    X, y, attrs, _ = _store(tmp_path / "test.zarr")
    assert s.classes == ["bear", "lynx", "wolf"] and s.feature_names == ["count", "a"]
    np.testing.assert_array_equal(X, test[["count", "a"]].to_numpy(np.float64).astype(np.float32))
    assert [s.classes[c] for c in y] == test["kind"].tolist()


def test_bad_parquet_inputs(tmp_path):
    (tmp_path / "fake.parquet").write_text("a,b\n1,2\n")
    with pytest.raises(InputValidationError, match=r"fake\.parquet is not a readable Parquet file"):
        ingest(tmp_path / "fake.parquet", tmp_path / "o.zarr")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputValidationError, match="is a directory"):
        ingest(tmp_path / "empty", tmp_path / "o.zarr")
    with pytest.raises(InputValidationError, match="without Parquet files"):
        ingest(tmp_path / "empty", tmp_path / "o.zarr", format="parquet")
    d = tmp_path / "mixed"
    d.mkdir()
    _frame(20)[["a", "y"]].to_parquet(d / "part.0.parquet")
    _frame(20)[["count", "y"]].to_parquet(d / "part.1.parquet")
    with pytest.raises(InputValidationError, match=r"part\.1\.parquet has no column 'a', which the first "
                                                   r"file, part\.0\.parquet, has, and has column 'count', "
                                                   r"which it has not; every file"):
        ingest(d, tmp_path / "o.zarr")
    assert not (tmp_path / "o.zarr").exists()


@pytest.mark.parametrize("extra_in", ["first", "later"])
def test_a_file_with_a_column_the_others_lack_is_refused_in_either_order(tmp_path, extra_in):
    """A column only one file has is refused wherever that file comes (a later file's used
    to be left out unsaid), naming the file and the column."""
    d = tmp_path / "d"
    d.mkdir()
    df = _frame(30)
    wide, narrow = df[["a", "count", "y"]], df[["a", "y"]]
    first, later = (wide, narrow) if extra_in == "first" else (narrow, wide)
    first.to_parquet(d / "part.0.parquet")
    later.to_parquet(d / "part.1.parquet")
    said = ("has no column 'count', which the first file, part\\.0\\.parquet, has" if extra_in == "first"
            else "has column 'count', which the first file, part\\.0\\.parquet, has not")
    for features in (None, ["a"]):  # whether or not the column is asked for
        with pytest.raises(InputValidationError, match=rf"part\.1\.parquet {said}; every file of a "
                                                       "directory needs the same columns: write the files"):
            ingest(d, tmp_path / "o.zarr", target="y", features=features)
    assert not (tmp_path / "o.zarr").exists()
    r = subprocess.run([sys.executable, "-m", "dkrr.cli", "ingest", str(d), "--out", str(tmp_path / "c.zarr")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "part.1.parquet" in r.stderr and "'count'" in r.stderr
    assert not (tmp_path / "c.zarr").exists()


def test_cli_ingest_parquet_directory(tmp_path):
    df = _frame(seed=3)
    src = _directory(tmp_path / "d.parquet", df, parts=3)
    proc = subprocess.run([sys.executable, "-m", "dkrr.cli", "ingest", str(src), "--out",
                           str(tmp_path / "d.zarr"), "--target", "y", "--features", "a,count", "-q"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "X 500 x 2, 1 target(s)" in proc.stdout
    X, y, _, _ = _store(tmp_path / "d.zarr")
    np.testing.assert_array_equal(y, df["y"].to_numpy())
    proc = subprocess.run([sys.executable, "-m", "dkrr.cli", "ingest", str(src), "--out",
                           str(tmp_path / "e.zarr"), "--target", "y", "-q"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "'city'" in proc.stderr and "--features" in proc.stderr


def test_like_across_csv_and_parquet_takes_the_columns_by_name(tmp_path):
    """A CSV training store followed by a Parquet test file (or the reverse), whose columns
    come in another order: the store's target and features, by name. The options of one
    format were not taken for the other, so the test file's last column was the target
    and the training target a feature, with no word."""
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"kind": rng.choice(["cat", "dog"], 40), "a": rng.standard_normal(40),
                       "b": rng.standard_normal(40), "c": rng.standard_normal(40)})
    df.to_csv(tmp_path / "train.csv", index=False)
    ingest(tmp_path / "train.csv", tmp_path / "csv.zarr", target="kind")
    df.to_parquet(tmp_path / "train.parquet")
    ingest(tmp_path / "train.parquet", tmp_path / "pq.zarr", target="kind")
    shuffled = df[["c", "kind", "a", "b"]]
    shuffled.to_parquet(tmp_path / "test.parquet")
    shuffled.to_csv(tmp_path / "test.csv", index=False)
    for test, like in (("test.parquet", "csv.zarr"), ("test.csv", "pq.zarr")):
        s = ingest(tmp_path / test, tmp_path / f"{test}.zarr", like=tmp_path / like)
        assert s.feature_names == ["a", "b", "c"] and s.classes == ["cat", "dog"], test
        X, y = open_dataset(tmp_path / f"{test}.zarr").X.compute(), open_dataset(tmp_path / f"{test}.zarr").y.compute()
        np.testing.assert_allclose(X, df[["a", "b", "c"]].to_numpy(), rtol=1e-6)
        np.testing.assert_array_equal(y, (df["kind"] == "dog").to_numpy().astype(int))
    with pytest.raises(InvalidParameterError, match="contradicts like="):  # a different choice is still refused
        ingest(tmp_path / "test.parquet", tmp_path / "x.zarr", like=tmp_path / "csv.zarr", target="a")
    # a CSV without a header cannot be read by name: said so, with the two ways out
    shuffled.to_csv(tmp_path / "bare.csv", index=False, header=False)
    with pytest.raises(InputValidationError, match=r"bare\.csv has no header, but like=.*pq\.zarr gives its "
                                                   r"columns by name \('kind', 'a', 'b', 'c'\): give the file a header"):
        ingest(tmp_path / "bare.csv", tmp_path / "bare.zarr", like=tmp_path / "pq.zarr")
    assert not (tmp_path / "x.zarr").exists() and not (tmp_path / "bare.zarr").exists()


# --- hive partitions: the key=value/ folders are columns, as pandas and dask read them ----------

@pytest.mark.parametrize("blocksize", [None, 1024])
def test_hive_partition_folders_are_columns_as_pandas_reads_them(tmp_path, blocksize):
    """A table written with pandas' partition_cols lost its partition column: the folders'
    `label=g/` were not read, and the default target became another column (x3) without a
    word. The partition columns come after the files' own, in pandas' order."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({f"x{j}": rng.standard_normal(300) for j in range(3)})
    df["year"] = rng.choice([2023, 2024], 300)
    df["label"] = np.where(df.x0 > 0, "g", "h")
    df.to_parquet(tmp_path / "hive", partition_cols=["year", "label"], index=False, row_group_size=16)
    (tmp_path / "hive" / "_SUCCESS").write_text("")
    ref = pd.read_parquet(tmp_path / "hive")
    assert list(ref.columns) == ["x0", "x1", "x2", "year", "label"]
    kw = {} if blocksize is None else {"blocksize": blocksize}
    s = ingest(tmp_path / "hive", tmp_path / "d.zarr", chunk_rows=50, dtype="float64", **kw)
    X, y, attrs, _ = _store(tmp_path / "d.zarr")
    assert attrs["feature_names"] == ["x0", "x1", "x2", "year"] and attrs["target_names"] == ["label"]
    assert s.classes == ["g", "h"] and attrs["partition_columns"] == ["year", "label"]
    np.testing.assert_array_equal(X, ref[["x0", "x1", "x2", "year"]].to_numpy(np.float64))
    np.testing.assert_array_equal(np.array(s.classes)[y], ref["label"].astype(str).to_numpy())
    # an integer partition column is a number: a numeric target, or a feature by name
    ingest(tmp_path / "hive", tmp_path / "e.zarr", target="year", features=["x1", "x0"], dtype="float64")
    X, y, _, _ = _store(tmp_path / "e.zarr")
    np.testing.assert_array_equal(X, ref[["x1", "x0"]].to_numpy())
    np.testing.assert_array_equal(y, ref["year"].to_numpy(np.float64))
    # a text partition column is not a feature
    with pytest.raises(InputValidationError, match=r"feature columns must be numeric.*'label' \(string"):
        ingest(tmp_path / "hive", tmp_path / "f.zarr", target="x0")


def test_hive_folders_that_do_not_fit_are_refused(tmp_path):
    df = pd.DataFrame({"a": np.arange(10.0), "y": np.arange(10.0) * 2})
    (tmp_path / "d" / "k=1").mkdir(parents=True)
    df.to_parquet(tmp_path / "d" / "k=1" / "p.parquet")
    df.to_parquet(tmp_path / "d" / "loose.parquet")  # beside the k=... folders
    with pytest.raises(InputValidationError, match=r"loose\.parquet does not lie in a partition folder k=\.\.\."):
        ingest(tmp_path / "d", tmp_path / "d.zarr")
    (tmp_path / "e" / "a=1").mkdir(parents=True)
    df.to_parquet(tmp_path / "e" / "a=1" / "p.parquet")  # the folder's key is also a column of the file
    with pytest.raises(InputValidationError, match=r"'a' is both a column of p\.parquet and a partition folder"):
        ingest(tmp_path / "e", tmp_path / "e.zarr")


def test_a_parquet_schema_naming_two_columns_alike(tmp_path):
    """Two columns named alike were a KeyError traceback from the footer's schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.table([pa.array([1.0, 2.0, 3.0]), pa.array([4.0, 5.0, 6.0]), pa.array([7.0, 8.0, 9.0])],
                 names=["x", "x", "y"])
    pq.write_table(t, tmp_path / "d.parquet")
    with pytest.raises(InputValidationError, match=r"names 2 columns 'x' \(0-based columns \[0, 1\]\)"):
        ingest(tmp_path / "d.parquet", tmp_path / "d.zarr")


def test_text_labels_as_typed_na_is_a_class_and_null_is_missing(tmp_path):
    """A Parquet string column's 'NA' (North America) was read as a missing cell: refused by
    default, and with missing='drop' the class was gone without a word. A typed column
    marks missing values with nulls; a text file's markers do not apply to it."""
    df = pd.DataFrame({"a": np.arange(9.0), "region": ["EU", "NA", "APAC", "None", "n/a", None, "NA", "EU", "?"]})
    df.to_parquet(tmp_path / "d.parquet", index=False)
    s = ingest(tmp_path / "d.parquet", tmp_path / "d.zarr", missing="drop")
    assert s.classes == ["?", "APAC", "EU", "NA", "None", "n/a"] and s.n_rows == 8  # the null row only
    X, y, _, _ = _store(tmp_path / "d.zarr")
    np.testing.assert_array_equal(np.array(s.classes)[y], df["region"].dropna().to_numpy())
    # labels of a number column (target_type="labels"): its NaN is missing, not a class 'nan'
    pd.DataFrame({"a": np.arange(4.0), "k": [1.0, np.nan, 2.0, 1.0]}).to_parquet(tmp_path / "n.parquet")
    s = ingest(tmp_path / "n.parquet", tmp_path / "n.zarr", target_type="labels", missing="drop")
    assert s.n_rows == 3 and len(s.classes) == 2


def test_float_labels_that_are_whole_numbers_are_the_integers_classes(tmp_path):
    """A float column read as labels (target_type='labels') was cast to text as pyarrow
    writes floats: np.round(-0.4) == -0.0 made a class '-0' beside '0' (numpy and
    scikit-learn see 0 and 1), and an int column with a NaN (pandas writes it as float)
    made '1.23456789012e+11' beside another file's int '123456789012'. A float's whole
    number is now the integer's text: one class per number, in every file."""
    y = np.round(np.array([-0.4, 0.3, 1.2, 0.9, -0.1, 0.2]))
    assert np.signbit(y[0]) and np.unique(y).tolist() == [0.0, 1.0]
    pd.DataFrame({"a": np.arange(6.0), "y": y}).to_parquet(tmp_path / "r.parquet")
    s = ingest(tmp_path / "r.parquet", tmp_path / "r.zarr", target_type="labels")
    _, codes, attrs, _ = _store(tmp_path / "r.zarr")
    assert s.classes == attrs["classes"] == ["0", "1"]
    np.testing.assert_array_equal(codes, [0, 0, 1, 1, 0, 0])
    (tmp_path / "d").mkdir()
    pd.DataFrame({"a": [0.0, 1.0, 2.0], "y": [1, 2, 123456789012]}).to_parquet(tmp_path / "d" / "part.0.parquet")
    pd.DataFrame({"a": [3.0, 4.0, 5.0, 6.0, 7.0], "y": [1.0, np.nan, 123456789012.0, -0.0, 2.0]}).to_parquet(
        tmp_path / "d" / "part.1.parquet")
    pd.DataFrame({"a": [8.0], "y": np.array([0.0], dtype=np.float32)}).to_parquet(tmp_path / "d" / "part.2.parquet")
    s = ingest(tmp_path / "d", tmp_path / "d.zarr", target_type="labels", missing="drop")
    X, codes, attrs, _ = _store(tmp_path / "d.zarr")
    assert s.classes == attrs["classes"] == ["0", "1", "2", "123456789012"]
    np.testing.assert_array_equal(X[:, 0], [0, 1, 2, 3, 5, 6, 7, 8])
    np.testing.assert_array_equal(codes, [1, 2, 3, 1, 3, 0, 2, 0])


def test_a_target_of_numbers_in_one_file_and_text_in_another_is_refused(tmp_path):
    """Read as labels, 1.0 and '1.0' made two classes ('1', '1.0') of one."""
    (tmp_path / "d").mkdir()
    pd.DataFrame({"a": [0.0, 1.0], "y": [1.0, 2.0]}).to_parquet(tmp_path / "d" / "part.0.parquet")
    pd.DataFrame({"a": [0.0, 1.0], "y": ["1.0", "2.0"]}).to_parquet(tmp_path / "d" / "part.1.parquet")
    with pytest.raises(InputValidationError, match=r"target column 'y' holds numbers in part\.0\.parquet \(double\) "
                                                   r"but not in part\.1\.parquet"):
        ingest(tmp_path / "d", tmp_path / "d.zarr")


@pytest.mark.parametrize("null_file", [0, 1], ids=["null-first", "null-later"])
def test_a_file_whose_column_is_all_null_fits_either_kind(tmp_path, null_file):
    """A directory with one file whose label column is all missing (pandas writes such a
    column as Arrow type null) was refused, even with missing='drop', as a target that
    "holds numbers in part.1.parquet (null) but not in part.0.parquet (large_string)";
    pandas reads the directory (NaN labels). A null column is now either kind: its cells
    are missing, refused naming the rows or dropped, beside text, numbers or a feature."""
    import pyarrow.parquet as pq

    def directory(name, full, empty, column="y"):
        (tmp_path / name).mkdir()
        for k, df in enumerate([empty, full] if null_file == 0 else [full, empty]):
            df.to_parquet(tmp_path / name / f"part.{k}.parquet")
        assert str(pq.read_schema(tmp_path / name / f"part.{null_file}.parquet").field(column).type) == "null"
        return tmp_path / name

    null_row = 0 if null_file == 0 else 2
    labels = directory("lab", pd.DataFrame({"a": [1.0, 2.0], "y": ["x", "y"]}),
                       pd.DataFrame({"a": [4.0], "y": [None]}))
    with pytest.raises(MissingValueError, match=rf"1 row has missing values.*row {null_row} \(0-based\), "
                                                r"column 1 \('y'\): None.*--missing drop"):
        ingest(labels, tmp_path / "lab.zarr")
    s = ingest(labels, tmp_path / "lab.zarr", missing="drop")
    X, y, attrs, _ = _store(tmp_path / "lab.zarr")
    assert s.classes == attrs["classes"] == ["x", "y"] and attrs["rows_dropped"] == 1
    np.testing.assert_array_equal(X[:, 0], [1.0, 2.0])
    np.testing.assert_array_equal(y, [0, 1])
    with pytest.raises(InputValidationError, match=r"target column 'y' \((large_)?string.*\) is not numeric; "
                                                   r"target_type='numeric' was asked"):
        ingest(labels, tmp_path / "n.zarr", target_type="numeric", missing="drop")
    numbers = directory("num", pd.DataFrame({"a": [1.0, 2.0], "y": [1.5, 2.5]}),
                        pd.DataFrame({"a": [4.0], "y": [None]}))
    ingest(numbers, tmp_path / "num.zarr", missing="drop")
    X, y, attrs, _ = _store(tmp_path / "num.zarr")
    assert "classes" not in attrs and y.dtype == np.float64
    np.testing.assert_array_equal(y, [1.5, 2.5])
    feature = directory("feat", pd.DataFrame({"a": [1.0, 2.0], "y": [1.5, 2.5]}),
                        pd.DataFrame({"a": pd.Series([None], dtype=object), "y": [3.0]}), "a")
    with pytest.raises(MissingValueError, match=rf"row {null_row} \(0-based\), column 0 \('a'\): None"):
        ingest(feature, tmp_path / "feat.zarr")
    ingest(feature, tmp_path / "feat.zarr", missing="drop")
    np.testing.assert_array_equal(_store(tmp_path / "feat.zarr")[1], [1.5, 2.5])
    # a text column of measurements: the fix names the text file's type, not the null one's
    measured = directory("m", pd.DataFrame({"a": np.arange(30.0), "y": [f"{v:.3f}" for v in np.linspace(0, 1, 30)]}),
                         pd.DataFrame({"a": [4.0], "y": [None]}))
    with pytest.raises(InputValidationError, match=r"holds continuous numbers.*its Parquet type is (large_)?string, "):
        ingest(measured, tmp_path / "m.zarr", missing="drop")


def test_a_text_typed_target_of_measurements_says_to_cast_it(tmp_path):
    """The refusal said to leave out --labels, which was not given."""
    pd.DataFrame({"a": np.arange(6.0), "price": [f"{v:.2f}" for v in np.linspace(1, 9, 6)]}).to_parquet(
        tmp_path / "d.parquet")
    with pytest.raises(InputValidationError) as info:
        ingest(tmp_path / "d.parquet", tmp_path / "d.zarr")
    msg = str(info.value)
    assert "holds continuous numbers" in msg and "its Parquet type is" in msg and "cast it to a number type" in msg
    assert "--labels" not in msg, msg


# --- row groups: read a chunk at a time, whatever their size --------------------------------------

def test_a_file_of_one_huge_row_group_is_read_a_chunk_at_a_time(tmp_path):
    """A file of one row group (older pandas and pyarrow wrote them so) was read by every
    segment from the row group's start, each holding the whole row group: pyarrow's memory
    grew with the threads times the row group (3x its size here), not with a chunk (and a
    few pages per column: some MB)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n, width = 3_000_000, 4
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({f"x{j}": rng.standard_normal(n) for j in range(width)}),
                   tmp_path / "one.parquet", row_group_size=n)
    assert pq.ParquetFile(tmp_path / "one.parquet").metadata.num_row_groups == 1
    code = ("import sys, dask, pyarrow as pa; from dkrr.io import ingest\n"
            "with dask.config.set(num_workers=2):\n"
            "    ingest(sys.argv[1], sys.argv[2], chunk_rows=10_000, blocksize=1 << 22)\n"
            "print(pa.default_memory_pool().max_memory())")  # pyarrow's peak, in a process of its own
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "one.parquet"), str(tmp_path / "o.zarr")],
                       capture_output=True, text=True, check=True)
    peak = int(r.stdout.split()[-1])
    assert peak < n * width * 8 / 4, f"pyarrow held {peak} bytes at once; the row group has {n * width * 8}"
    X, y, _, _ = _store(tmp_path / "o.zarr")
    assert X.shape == (n, width - 1) and y.shape == (n,)


@pytest.mark.parametrize("groups", [500, 64, 17], ids=["one-row-group", "groups-of-two-chunks", "groups-in-a-chunk"])
def test_the_store_does_not_depend_on_the_row_groups(tmp_path, groups):
    """The same rows in row groups of any size make the same store, byte for byte, chunk by
    chunk, converted in one segment or several; progress reaches the totals either way."""
    df = _frame(seed=4)[["a", "count", "flag", "kind"]]
    df.to_parquet(tmp_path / "ref.parquet", row_group_size=500)
    ingest(tmp_path / "ref.parquet", tmp_path / "ref.zarr", chunk_rows=32, blocksize=2**30)
    df.to_parquet(tmp_path / "d.parquet", row_group_size=groups)
    calls = []
    with dask.config.set(num_workers=3):
        s = ingest(tmp_path / "d.parquet", tmp_path / "d.zarr", chunk_rows=32, blocksize=1000,
                   progress=lambda *a: calls.append(a))
    assert s.n_rows == 500 and s.classes == ["bear", "lynx", "wolf"]
    _, _, ref_attrs, _ = _store(tmp_path / "ref.zarr")
    _, _, attrs, _ = _store(tmp_path / "d.zarr")
    assert {**attrs, "source": None} == {**ref_attrs, "source": None}
    for name in ("X", "y"):
        ref = sorted(p.relative_to(tmp_path / "ref.zarr") for p in (tmp_path / "ref.zarr" / name).rglob("*") if p.is_file())
        got = sorted(p.relative_to(tmp_path / "d.zarr") for p in (tmp_path / "d.zarr" / name).rglob("*") if p.is_file())
        assert got == ref and len(ref) > 16
        assert all((tmp_path / "d.zarr" / p).read_bytes() == (tmp_path / "ref.zarr" / p).read_bytes() for p in ref)
    size = (tmp_path / "d.parquet").stat().st_size
    assert len(calls) >= 16 and calls[-1] == (500, size, size)
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(calls, calls[1:]))
