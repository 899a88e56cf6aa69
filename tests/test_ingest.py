"""Tests of dkrr.io.ingest: CSV, LIBSVM and .npy into Zarr, streamed and atomic."""

from __future__ import annotations

import bz2
import gc
import gzip
import hashlib
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import zarr
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from dkrr.errors import (
    FeatureMismatchError,
    InputValidationError,
    InvalidParameterError,
    NonFiniteInputError,
    OutputExistsError,
)
from dkrr.io import IngestSummary, InputNotFoundError, ingest, open_dataset

# magic04 ships with the package (dkrr/data, source and licence in its README); other
# real files come through dkrr.datasets without downloading: the cache or the offline
# mirror ($DKRR_DATA_MIRROR; conftest.py points it at ../shared/data when CI has it)
SHIPPED = Path(__file__).resolve().parents[1] / "dkrr" / "data"


# ----------------------------------------------------------------------------- utils


def _read_store(path):
    group = zarr.open_group(str(path), mode="r")
    return group["X"][...], group["y"][...], dict(group.attrs), group


def _snapshot(path: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under `path`."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def _write_csv(path: Path, data: np.ndarray, header: list[str] | None = None, *,
               labels=None, sep=","):
    rows = []
    if header is not None:
        rows.append(sep.join(header))
    for i, row in enumerate(data):
        cells = [repr(float(v)) for v in row]
        if labels is not None:
            cells.append(str(labels[i]))
        rows.append(sep.join(cells))
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def data(rng):
    # 50 rows so that chunk_rows=7 gives 8 chunks, the last one partial
    return rng.standard_normal((50, 4)) * np.array([1.0, 10.0, 1e-3, 1e5])


# -------------------------------------------------------------------------------- CSV


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_csv_with_header_round_trip(tmp_path, data, dtype):
    src = _write_csv(tmp_path / "d.csv", data, ["a", "b", "c", "price"])
    calls = []
    summary = ingest(src, tmp_path / "d.zarr", dtype=dtype, chunk_rows=7,
                     progress=lambda *a: calls.append(a))
    X, y, attrs, group = _read_store(tmp_path / "d.zarr")
    want = np.loadtxt(src, delimiter=",", skiprows=1)
    # y stays float64 whatever the dtype of X (y_dtype)
    assert X.dtype == np.dtype(dtype) and y.dtype == np.float64
    assert X.shape == (50, 3) and y.shape == (50,)
    np.testing.assert_array_equal(X, want[:, :3].astype(dtype))
    np.testing.assert_array_equal(y, want[:, 3])
    assert group["X"].chunks == (7, 3) and group["y"].chunks == (7,)
    assert attrs["dkrr_layout"] == 1
    assert attrs["feature_names"] == ["a", "b", "c"]
    assert attrs["target_names"] == ["price"]
    assert attrs["format"] == "csv" and attrs["source"] == str(src)
    assert attrs["n_features"] == 3 and attrs["delimiter"] == "," and attrs["header"] is True
    assert attrs["target_columns"] == [3]
    assert "classes" not in attrs
    assert summary == IngestSummary(50, 3, 1, ["a", "b", "c"], ["price"], None,
                                    str(tmp_path / "d.zarr"))
    # one progress call per chunk, rows increasing to n, bytes reaching the file size
    assert [c[0] for c in calls] == [7, 14, 21, 28, 35, 42, 49, 50]
    assert calls[-1][1] == calls[-1][2] == src.stat().st_size


def test_csv_without_header_target_by_index(tmp_path, data):
    src = _write_csv(tmp_path / "d.csv", data)
    summary = ingest(src, tmp_path / "d.zarr", target=1, chunk_rows=7, dtype="float64")
    X, y, attrs, _ = _read_store(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X, data[:, [0, 2, 3]])
    np.testing.assert_array_equal(y, data[:, 1])
    assert attrs["feature_names"] == ["column_0", "column_2", "column_3"]
    assert attrs["target_names"] == ["column_1"]
    assert summary.n_rows == 50
    # default target: last column; a digit string is an index when there is no header
    ingest(src, tmp_path / "e.zarr", chunk_rows=7, dtype="float64")
    ingest(src, tmp_path / "f.zarr", target="-1", chunk_rows=7, dtype="float64")
    for name in ("e.zarr", "f.zarr"):
        X, y, _, _ = _read_store(tmp_path / name)
        np.testing.assert_array_equal(X, data[:, :3])
        np.testing.assert_array_equal(y, data[:, 3])


def test_csv_target_by_name_in_middle_and_multi_target(tmp_path, data):
    src = _write_csv(tmp_path / "d.csv", data, ["a", "t", "b", "u"])
    ingest(src, tmp_path / "one.zarr", target="t", chunk_rows=7, dtype="float64")
    X, y, attrs, _ = _read_store(tmp_path / "one.zarr")
    np.testing.assert_array_equal(X, data[:, [0, 2, 3]])
    np.testing.assert_array_equal(y, data[:, 1])
    assert attrs["feature_names"] == ["a", "b", "u"]

    summary = ingest(src, tmp_path / "two.zarr", target=["u", 1], chunk_rows=7,
                     dtype="float64")
    X, y, attrs, group = _read_store(tmp_path / "two.zarr")
    assert y.shape == (50, 2) and group["y"].chunks == (7, 2)
    np.testing.assert_array_equal(y, data[:, [3, 1]])
    np.testing.assert_array_equal(X, data[:, [0, 2]])
    assert attrs["target_names"] == ["u", "t"] and summary.n_targets == 2


def test_csv_header_option_overrides_detection(tmp_path):
    # an all-numeric first line is data unless header=True says otherwise
    src = tmp_path / "d.csv"
    src.write_text("1,2,3\n4,5,6\n7,8,9\n")
    ingest(src, tmp_path / "auto.zarr")
    assert _read_store(tmp_path / "auto.zarr")[0].shape == (3, 2)
    from dkrr.errors import HeaderWarning

    with pytest.warns(HeaderWarning, match="each of its cells is a number"):
        s = ingest(src, tmp_path / "forced.zarr", header=True)
    X, y, attrs, _ = _read_store(tmp_path / "forced.zarr")
    assert X.shape == (2, 2) and attrs["feature_names"] == ["1", "2"]
    np.testing.assert_array_equal(y, [6, 9])
    assert s.target_names == ["3"]


def test_csv_class_labels_encoded_in_sorted_order(tmp_path, data):
    # first label seen is 'h', so incremental codes must be remapped to sorted order
    labels = np.where(np.arange(50) % 3 == 0, "h", "g").astype(object)
    labels[5] = "a b"  # a quoted label with a space
    src = tmp_path / "d.csv"
    lines = []
    for row, lab in zip(data, labels):
        cell = f'"{lab}"' if " " in lab else f" {lab}"  # leading space is stripped
        lines.append(",".join(repr(float(v)) for v in row) + "," + cell)
    src.write_text("\n".join(lines) + "\n")
    summary = ingest(src, tmp_path / "d.zarr", chunk_rows=7, dtype="float64")
    X, y, attrs, group = _read_store(tmp_path / "d.zarr")
    assert attrs["classes"] == ["a b", "g", "h"] == summary.classes
    assert y.dtype == np.int32 and group["y"].chunks == (7,)
    codes = {"a b": 0, "g": 1, "h": 2}
    np.testing.assert_array_equal(y, [codes[lab] for lab in labels])
    np.testing.assert_array_equal(X, data)


def test_magic04_real_file(tmp_path):
    # the shipped file is the UCI magic04.data, only gzip-compressed (sha256 in its README)
    src = SHIPPED / "magic04.csv.gz"
    summary = ingest(src, tmp_path / "m.zarr", chunk_rows=4000)
    df = pd.read_csv(src, header=None)
    X, y, attrs, _ = _read_store(tmp_path / "m.zarr")
    assert summary.n_rows == 19020 and X.shape == (19020, 10)
    np.testing.assert_array_equal(X, df.iloc[:, :10].to_numpy().astype(np.float32))
    np.testing.assert_array_equal(y, (df[10] == "h").to_numpy().astype(np.int32))
    assert attrs["classes"] == ["g", "h"]
    assert np.bincount(y).tolist() == [12332, 6688]


@pytest.mark.parametrize("suffix", ["", ".gz", ".bz2"])
def test_csv_whitespace_delimited_compressed(tmp_path, data, suffix):
    text = "\n".join("  ".join(repr(float(v)) for v in row) for row in data) + "\n"
    src = tmp_path / f"d.txt{suffix}"
    opener = {"": open, ".gz": gzip.open, ".bz2": bz2.open}[suffix]
    with opener(src, "wt") as f:
        f.write(text)
    ingest(src, tmp_path / "d.zarr", format="csv", delimiter=None, target=0,
           chunk_rows=7, dtype="float64")
    X, y, _, _ = _read_store(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X, data[:, 1:])
    np.testing.assert_array_equal(y, data[:, 0])


def test_csv_blank_lines_and_quoted_header(tmp_path):
    src = tmp_path / "d.csv"
    src.write_text('"x, one",y two,"z"\n\n1,2,3\n  \n4,5,6\n')
    summary = ingest(src, tmp_path / "d.zarr", target="z", chunk_rows=1)
    X, y, _, _ = _read_store(tmp_path / "d.zarr")
    assert summary.feature_names == ["x, one", "y two"]
    np.testing.assert_array_equal(X, [[1, 2], [4, 5]])
    np.testing.assert_array_equal(y, [3, 6])


# ----------------------------------------------------------------------------- LIBSVM


def _sparse_data(rng, n=40, d=12):
    X = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.3)
    X[3] = 0.0  # a row with no entries at all
    y = rng.integers(-1, 3, n).astype(float) * 1.5
    return X, y


@pytest.mark.parametrize("suffix", [".svm", ".svm.gz", ".svm.bz2"])
@pytest.mark.parametrize("zero_based", [False, True])
def test_libsvm_matches_sklearn(tmp_path, rng, suffix, zero_based):
    X, y = _sparse_data(rng)
    X[0, 0] = 2.5  # so that a zero-based file does contain index 0
    plain = tmp_path / "plain.svm"
    dump_svmlight_file(X, y, str(plain), zero_based=zero_based)
    src = tmp_path / f"d{suffix}"
    if suffix == ".svm.gz":
        src.write_bytes(gzip.compress(plain.read_bytes()))
    elif suffix == ".svm.bz2":
        src.write_bytes(bz2.compress(plain.read_bytes()))
    else:
        src = plain
    summary = ingest(src, tmp_path / "d.zarr", chunk_rows=7, dtype="float64")
    Xs, ys = load_svmlight_file(str(src))
    Xz, yz, attrs, group = _read_store(tmp_path / "d.zarr")
    assert Xz.shape == Xs.shape and group["X"].chunks == (7, Xs.shape[1])
    np.testing.assert_array_equal(Xz, Xs.toarray())
    np.testing.assert_array_equal(yz, ys)
    assert attrs["format"] == "libsvm" and attrs["target_names"] == ["label"]
    assert summary.n_features == Xs.shape[1]


def test_libsvm_records_no_name_per_index(tmp_path):
    """A 40-byte LIBSVM file whose one index is 20,000,000 took 67 s and 4.1 GB to ingest,
    and left a 486 MB zarr.json: one generated name ('feature_j') per index. LIBSVM's
    columns are indices: no names are recorded; the width is n_features."""
    src = tmp_path / "wide.svm"
    src.write_text("1 1:0.5 2000000:1.5\n-1 2:2.0\n")
    summary = ingest(src, tmp_path / "d.zarr")
    assert summary.n_features == 2_000_000 and summary.feature_names == []
    X, y, attrs, _ = _read_store(tmp_path / "d.zarr")
    assert "feature_names" not in attrs and attrs["n_features"] == 2_000_000
    assert (tmp_path / "d.zarr" / "zarr.json").stat().st_size < 4096
    assert X[0, 0] == 0.5 and X[0, -1] == 1.5 and X[1, 1] == 2.0 and X.sum() == 4.0
    np.testing.assert_array_equal(y, [1, -1])


def test_libsvm_n_features_comments_and_qid(tmp_path):
    src = tmp_path / "d.txt"
    src.write_text(
        "# a comment line\n"
        "1 qid:3 1:0.5 3:-2 # trailing comment\n"
        "\n"
        "-1 2:1e-3\n"
        "+2\n"
    )
    ingest(src, tmp_path / "d.zarr", n_features=6, index_base=1)
    Xs, ys = load_svmlight_file(str(src), n_features=6, dtype=np.float32)
    X, y, _, _ = _read_store(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X, Xs.toarray())
    np.testing.assert_array_equal(y, ys)
    with pytest.raises(FeatureMismatchError, match="needs n_features >= 3"):
        ingest(src, tmp_path / "e.zarr", n_features=2, index_base=1)


def test_usps_real_file_matches_sklearn(tmp_path):
    from dkrr.datasets import DATASETS, fetch_file

    try:
        src = fetch_file(DATASETS["usps"].files["data"], download=False)
    except FileNotFoundError as exc:  # a fresh clone without the data copies
        pytest.skip(f"{exc} (or run dkrr.datasets.load_dataset('usps') once to download it)")
    summary = ingest(src, tmp_path / "u.zarr", chunk_rows=700)
    Xs, ys = load_svmlight_file(str(src), n_features=256, dtype=np.float32)
    X, y, _, _ = _read_store(tmp_path / "u.zarr")
    assert summary.n_rows == 2007 and X.shape == (2007, 256) and X.dtype == np.float32
    np.testing.assert_array_equal(X, Xs.toarray())
    np.testing.assert_array_equal(y, ys)


# -------------------------------------------------------------------------------- NPY


@pytest.mark.parametrize("order", ["C", "F"])
def test_npy_round_trip(tmp_path, data, order):
    src = tmp_path / "d.npy"
    np.save(src, np.asarray(data, order=order))
    ingest(src, tmp_path / "last.zarr", chunk_rows=7, dtype="float64")
    X, y, attrs, _ = _read_store(tmp_path / "last.zarr")
    np.testing.assert_array_equal(X, data[:, :3])
    np.testing.assert_array_equal(y, data[:, 3])
    assert attrs["format"] == "npy"
    ingest(src, tmp_path / "first.zarr", target=0, chunk_rows=7)
    X, y, _, _ = _read_store(tmp_path / "first.zarr")
    assert X.dtype == np.float32 and y.dtype == np.float64
    np.testing.assert_array_equal(X, data[:, 1:].astype(np.float32))
    np.testing.assert_array_equal(y, data[:, 0])
    ingest(src, tmp_path / "two.zarr", target=["column_2", 0], chunk_rows=7,
           dtype="float64")
    X, y, _, _ = _read_store(tmp_path / "two.zarr")
    np.testing.assert_array_equal(y, data[:, [2, 0]])


def test_npy_bad_arrays(tmp_path):
    np.save(tmp_path / "v.npy", np.arange(5.0))
    with pytest.raises(InputValidationError, match=r"shape \(5,\).*2-D"):
        ingest(tmp_path / "v.npy", tmp_path / "v.zarr")
    np.save(tmp_path / "o.npy", np.array([["a", "b"]], dtype=object), allow_pickle=True)
    with pytest.raises(InputValidationError, match="cannot read"):
        ingest(tmp_path / "o.npy", tmp_path / "o.zarr")
    m = np.ones((10, 3))
    m[8, 1] = np.nan
    np.save(tmp_path / "n.npy", m)
    with pytest.raises(NonFiniteInputError, match=r"row 8 \(0-based\), column 1"):
        ingest(tmp_path / "n.npy", tmp_path / "n.zarr", chunk_rows=3)
    assert _leftovers(tmp_path) == []


# ------------------------------------------------------------------------- bad inputs


@pytest.fixture
def existing(tmp_path):
    """An existing good store at out, and a snapshot of its files."""
    good = tmp_path / "good.csv"
    good.write_text("a,b\n1,2\n3,4\n")
    out = tmp_path / "out.zarr"
    ingest(good, out)
    return out, _snapshot(out)


def _numbered_csv(n=30):
    return [f"{i}.5,{i},{i % 2}" for i in range(n)]


BAD_INPUTS = [
    # (file name, lines or text, kwargs, error, message regex)
    ("cell.csv", ["a,b,c"] + _numbered_csv()[:3] + ["1,oops,0"],
     {}, InputValidationError, r"line 5, column 1 \('b'\): cannot parse 'oops'"),
    ("late.csv", ["a,b,c"] + _numbered_csv()[:18] + [""] + ["1,2,3", "4,,6"],
     {"chunk_rows": 7}, InputValidationError, r"line 22, column 1 \('b'\).*''"),
    ("ragged.csv", ["a,b,c", "1,2,3", "4,5,6", "7,8,9", "1,2", "3,4,5"],
     {}, InputValidationError, r"line 5 has 2 fields but the header \(line 1\) has 3"),
    ("longer.csv", _numbered_csv()[:10] + ["1,2,3,4"],
     {"chunk_rows": 4}, InputValidationError, r"line 11 has 4 fields but line 1 has 3"),
    ("nan.csv", ["a,b,c", "1,2,3", "nan,2,3"],
     {}, NonFiniteInputError, r"line 3, column 0 \('a'\): value is nan"),
    ("inf.csv", ["a,b,c", "1,2,3", "1,2,-inf"],
     {}, NonFiniteInputError, r"line 3, column 2 \('c'\): value is -inf"),
    ("big.csv", ["a,b,c", "1,2,3", "1,1e39,3"],
     {}, NonFiniteInputError, r"line 3, column 1.*too large for float32.*float64"),
    ("target.csv", ["a,b,c", "1,2,3"],
     {"target": "price"}, InputValidationError, r"target column 'price' not found.*'a', 'b', 'c'"),
    ("index.csv", ["1,2,3"],
     {"target": 3}, InputValidationError, r"index 3 is out of range: the input has 3 columns"),
    ("mixed.csv", ["a,b,c"] + _numbered_csv()[:10] + ["1,2,x"],
     {"chunk_rows": 5}, InputValidationError, r"line 12, target column 2 \('c'\): cannot parse 'x'"),
    ("empty.csv", ["a,b,c"], {}, InputValidationError, "has a header but no data rows"),
    ("data.xyz", ["1,2,3"], {}, InputValidationError, "cannot infer the format of data.xyz"),
    ("fmt.csv", ["1,2,3"], {"format": "xlsx"}, InvalidParameterError, "format must be one of"),
    ("dt.csv", ["1,2,3"], {"dtype": "int64"}, InvalidParameterError, "float32 or float64"),
    ("bad.svm", ["1 1:2 3:4", "2 1:x"], {}, InputValidationError, r"line 2: cannot parse '1:x'"),
    ("dense.svm", ["1 2 3"], {}, InputValidationError, r"line 1: cannot parse '2'.*format='csv'"),
    ("label.svm", ["1 1:2", "abc 2:3"], {}, InputValidationError, r"line 2: label 'abc' is not a number"),
    ("multilabel.svm", ["1,3 1:2", "2 2:3"], {}, InputValidationError,
     r"line 1: label '1,3' is not a number.*LIBSVM's multilabel form, which dkrr does not read"),
    ("comma.svm", ["1,2,3", "4,5,6"], {"format": "libsvm"}, InputValidationError, r"looks like CSV"),
    ("dup.svm", ["1 1:2", "1 2:3 2:4"], {}, InputValidationError, r"line 2: feature index 2 appears twice"),
    ("nan.svm", ["1 1:2", "1 2:nan"], {}, NonFiniteInputError, r"line 2, feature index 2.*nan"),
    ("tgt.svm", ["1 1:2"], {"target": 0}, InvalidParameterError, "label first"),
]


@pytest.mark.parametrize(("name", "lines", "kwargs", "error", "message"), BAD_INPUTS,
                         ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_raises_and_leaves_existing_output(tmp_path, existing, name, lines,
                                                     kwargs, error, message):
    out, before = existing
    src = tmp_path / name
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(error, match=message):
        ingest(src, out, overwrite=True, **kwargs)
    assert _snapshot(out) == before
    assert _leftovers(tmp_path) == []
    # and nothing is created at a fresh path either
    with pytest.raises(error, match=message):
        ingest(src, tmp_path / "fresh.zarr", **kwargs)
    assert not (tmp_path / "fresh.zarr").exists()
    assert _leftovers(tmp_path) == []


def test_missing_input(tmp_path):
    with pytest.raises(InputNotFoundError, match="does not exist") as info:
        ingest(tmp_path / "nope.csv", tmp_path / "o.zarr")
    assert isinstance(info.value, FileNotFoundError)


# ----------------------------------------------------------------- overwrite semantics


def test_existing_output_refused_before_any_work(tmp_path, existing):
    out, before = existing
    src = tmp_path / "bad.csv"
    src.write_text("a,b\n1,oops\n")  # would fail to parse if it were read
    calls = []
    with pytest.raises(OutputExistsError, match="exists already.*overwrite"):
        ingest(src, out, progress=lambda *a: calls.append(a))
    assert calls == [] and _snapshot(out) == before


def test_overwrite_replaces_store(tmp_path, existing):
    out, before = existing
    src = tmp_path / "new.csv"
    src.write_text("p,q,r\n1,2,3\n4,5,6\n7,8,9\n")
    ingest(src, out, overwrite=True)
    X, y, attrs, _ = _read_store(out)
    assert X.shape == (3, 2) and attrs["feature_names"] == ["p", "q"]
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_overwrite_refuses_non_zarr_output(tmp_path, kind):
    src = tmp_path / "d.csv"
    src.write_text("1,2\n3,4\n")
    out = tmp_path / "precious"
    if kind == "file":
        out.write_text("keep me")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("keep me")
    with pytest.raises(OutputExistsError, match="refusing to overwrite.*not a Zarr store"):
        ingest(src, out, overwrite=True)
    assert (out.read_text() if kind == "file" else (out / "notes.txt").read_text()) == "keep me"
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("with_existing", [False, True])
def test_keyboard_interrupt_leaves_no_partial_output(tmp_path, data, with_existing):
    src = _write_csv(tmp_path / "d.csv", data)
    out = tmp_path / "out.zarr"
    if with_existing:
        ingest(src, out, chunk_rows=50)
        before = _snapshot(out)

    def interrupt(rows, done, total):
        if rows >= 21:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest(src, out, chunk_rows=7, overwrite=True, progress=interrupt)
    if with_existing:
        assert _snapshot(out) == before
    else:
        assert not out.exists()
    assert _leftovers(tmp_path) == []


def test_ingested_store_opens_as_dataset(tmp_path, data):
    src = _write_csv(tmp_path / "d.csv", data, ["a", "b", "c", "t"])
    ingest(src, tmp_path / "d.zarr", chunk_rows=7)
    ds = open_dataset(tmp_path / "d.zarr")
    assert ds.X.chunks == ((7,) * 7 + (1,), (3,))
    assert ds.y.chunks == ((7,) * 7 + (1,),)
    assert ds.feature_names == ["a", "b", "c"] and ds.target_names == ["t"]
    np.testing.assert_array_equal(ds.X.compute(), data[:, :3].astype(np.float32))


# ----------------------------------------------------------------------------- memory


def test_memory_bounded_by_chunk_rows(tmp_path, rng):
    """Peak traced allocation stays far below the file size (a 200k-row CSV).

    Reading the whole file at once would allocate more than the file size (the text
    alone); streaming holds one chunk of 1000 rows (about 80 kB of text) at a time.
    """
    n, d = 200_000, 10
    values = np.round(rng.standard_normal((n, d)), 4)
    src = tmp_path / "big.csv"
    np.savetxt(src, values, fmt="%.4f", delimiter=",")
    size = src.stat().st_size
    assert size > 14_000_000
    del values
    small = tmp_path / "small.csv"
    small.write_text("1,2\n3,4\n")
    ingest(small, tmp_path / "small.zarr")  # lazy imports and codec set-up
    gc.collect()
    tracemalloc.start()
    try:
        summary = ingest(src, tmp_path / "big.zarr", chunk_rows=1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert summary.n_rows == n
    assert peak < size / 8, (peak, size)
    # the data made it: check against an independent reader
    X, y, _, _ = _read_store(tmp_path / "big.zarr")
    want = pd.read_csv(src, header=None).to_numpy()
    np.testing.assert_array_equal(X, want[:, :9].astype(np.float32))
    np.testing.assert_array_equal(y, want[:, 9])
