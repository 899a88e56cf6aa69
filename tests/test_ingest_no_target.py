"""Ingest of a file without a target (``target=[]``, ``dkrr ingest --no-target``).

The file a user predicts has no target column. Ingest writes ``X`` alone: a store that
``predict`` reads and ``fit``/``evaluate`` refuse by name. With ``like=`` the columns are
the training store's features, found by name, or by position in the training file less
its target column(s). Each test writes a real file in tmp_path and runs the real ingest
(or the real ``dkrr`` commands against a real LocalCluster) into real Zarr stores.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import zarr

from dkrr.errors import FeatureMismatchError, InputValidationError, InvalidParameterError, StoreError
from dkrr.io import ingest, open_dataset

NAMES = ["a", "b", "c", "d"]


def _table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = np.round(rng.standard_normal((n, 4)), 6)
    return X, np.round(X[:, 0] - 2 * X[:, 2], 6)


def _csv(path, columns, header=True):
    """A CSV of the columns (name -> values) in their order."""
    names = list(columns)
    rows = np.column_stack([columns[c] for c in names])
    lines = ([",".join(names)] if header else []) + [",".join(repr(float(v)) for v in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def _X(store):
    group = zarr.open_group(str(store), mode="r")
    assert "y" not in group, "a store without a target holds no y"
    return group["X"][...], dict(group.attrs)


def test_a_csv_without_a_target_is_a_store_of_x_alone(tmp_path):
    X, _ = _table()
    src = _csv(tmp_path / "new.csv", dict(zip(NAMES, X.T)))
    s = ingest(src, tmp_path / "new.zarr", target=[], dtype="float64")
    assert (s.n_rows, s.n_features, s.n_targets, s.target_names) == (300, 4, 0, [])
    Xs, attrs = _X(tmp_path / "new.zarr")
    np.testing.assert_array_equal(Xs, X)
    assert attrs["feature_names"] == NAMES and attrs["target_names"] == []
    ds = open_dataset(tmp_path / "new.zarr", require_y=False)
    assert ds.y is None and ds.X.shape == (300, 4)
    with pytest.raises(StoreError, match="holds features alone .* fitting and scoring need y"):
        open_dataset(tmp_path / "new.zarr")


def test_parallel_segments_give_the_store_of_one_pass(tmp_path):
    X, _ = _table(3000)
    src = _csv(tmp_path / "new.csv", dict(zip(NAMES, X.T)))
    ingest(src, tmp_path / "one.zarr", target=[], dtype="float64")
    ingest(src, tmp_path / "many.zarr", target=[], dtype="float64", blocksize=4096, chunk_rows=256)
    np.testing.assert_array_equal(_X(tmp_path / "many.zarr")[0], _X(tmp_path / "one.zarr")[0])


@pytest.mark.parametrize("test_columns", [["d", "c", "b", "a"], ["a", "b", "c", "d", "y"],
                                          ["y", "x", "c", "a", "d", "b"]])
def test_like_finds_the_training_features_by_name_with_or_without_the_target(tmp_path, test_columns):
    X, y = _table()
    train = _csv(tmp_path / "train.csv", {**dict(zip(NAMES, X.T)), "y": y})
    ingest(train, tmp_path / "train.zarr", dtype="float64")
    values = {**dict(zip(NAMES, X.T)), "y": y, "x": -X[:, 0]}
    test = _csv(tmp_path / "test.csv", {c: values[c] for c in test_columns})
    s = ingest(test, tmp_path / "test.zarr", target=[], like=tmp_path / "train.zarr")
    assert s.n_targets == 0 and s.feature_names == NAMES
    np.testing.assert_array_equal(_X(tmp_path / "test.zarr")[0], X)


def test_like_on_a_file_without_the_target_column_names_no_target(tmp_path):
    """A new user's file to predict lacks the target column: like= alone refused it with
    "it has no column 'y'", naming no way to read it; the error now names target=[]."""
    X, y = _table()
    _csv(tmp_path / "train.csv", {**dict(zip(NAMES, X.T)), "y": y})
    ingest(tmp_path / "train.csv", tmp_path / "train.zarr")
    _csv(tmp_path / "new.csv", dict(zip(NAMES, X.T)))
    with pytest.raises(FeatureMismatchError, match=r"it has no column 'y'.*without the target column 'y': pass "
                                                   r"target=\[\] \(--no-target\)"):
        ingest(tmp_path / "new.csv", tmp_path / "new.zarr", like=tmp_path / "train.zarr")
    with pytest.raises(FeatureMismatchError) as e:  # a feature column missing: no such hint
        _csv(tmp_path / "short.csv", dict(zip(NAMES[:3], X.T[:3])))
        ingest(tmp_path / "short.csv", tmp_path / "short.zarr", target=[], like=tmp_path / "train.zarr")
    # the target, not read, is not listed among the missing columns ("nor 'y'" before)
    assert "no column 'd' (the store's" in str(e.value) and "--no-target" not in str(e.value), str(e.value)


@pytest.mark.parametrize("target", [0, 2, 4])
def test_like_by_position_reads_the_training_file_less_its_target(tmp_path, target):
    """A header-less training file with its target at `target`: the test file is the
    same columns without it, so each feature moves left past the target."""
    X, y = _table()
    train = np.insert(X, target, y, axis=1)
    _csv(tmp_path / "train.csv", {f"c{j}": train[:, j] for j in range(5)}, header=False)
    ingest(tmp_path / "train.csv", tmp_path / "train.zarr", target=target, header=False,
           dtype="float64")
    _csv(tmp_path / "test.csv", dict(zip(NAMES, X.T)), header=False)
    ingest(tmp_path / "test.csv", tmp_path / "test.zarr", target=[], header=False,
           like=tmp_path / "train.zarr")
    np.testing.assert_array_equal(_X(tmp_path / "test.zarr")[0], X)
    np.save(tmp_path / "train.npy", train)  # the same by position for .npy, and across formats
    ingest(tmp_path / "train.npy", tmp_path / "train_npy.zarr", target=target, dtype="float64")
    np.save(tmp_path / "test.npy", X)
    for like in ("train_npy.zarr", "train.zarr"):
        out = tmp_path / f"test_{like}"
        ingest(tmp_path / "test.npy", out, target=[], like=tmp_path / like)
        np.testing.assert_array_equal(_X(out)[0], X)


def test_like_parquet_by_name_and_a_single_feature_column(tmp_path):
    X, y = _table()
    pd.DataFrame({**dict(zip(NAMES, X.T)), "y": y}).to_parquet(tmp_path / "train.parquet")
    ingest(tmp_path / "train.parquet", tmp_path / "train.zarr", dtype="float64")
    pd.DataFrame(dict(zip(NAMES[::-1], X.T[::-1]))).to_parquet(tmp_path / "test.parquet")
    ingest(tmp_path / "test.parquet", tmp_path / "test.zarr", target=[], like=tmp_path / "train.zarr")
    np.testing.assert_array_equal(_X(tmp_path / "test.zarr")[0], X)
    # one column is a valid file to predict (with a target it is refused: no feature is left)
    pd.DataFrame({"a": X[:, 0]}).to_parquet(tmp_path / "one.parquet")
    assert ingest(tmp_path / "one.parquet", tmp_path / "one.zarr", target=[]).n_features == 1
    with pytest.raises(InputValidationError, match="has 1 column"):
        ingest(tmp_path / "one.parquet", tmp_path / "one_y.zarr")
    _csv(tmp_path / "one.csv", {"a": X[:, 0]})
    assert ingest(tmp_path / "one.csv", tmp_path / "one_csv.zarr", target=[]).n_features == 1


def test_a_one_column_csv_whose_lines_fit_another_delimiter_is_still_refused(tmp_path):
    X, _ = _table(20)
    (tmp_path / "semi.csv").write_text("\n".join(";".join(str(v) for v in r) for r in X) + "\n")
    with pytest.raises(InputValidationError, match=r"single field .* ';'-delimited|--delimiter"):
        ingest(tmp_path / "semi.csv", tmp_path / "semi.zarr", target=[])
    assert not (tmp_path / "semi.zarr").exists()


def test_missing_drop_drops_rows_by_their_features(tmp_path):
    X, _ = _table(50)
    cols = dict(zip(NAMES, X.T))
    src = _csv(tmp_path / "new.csv", cols)
    lines = src.read_text().splitlines()
    lines[5] = lines[5].replace(lines[5].split(",")[1], "NA", 1)  # data row 4, column b
    src.write_text("\n".join(lines) + "\n")
    s = ingest(src, tmp_path / "new.zarr", target=[], missing="drop", dtype="float64")
    assert s.rows_dropped == 1
    np.testing.assert_array_equal(_X(tmp_path / "new.zarr")[0], np.delete(X, 4, axis=0))


def test_libsvm_labels_are_not_stored(tmp_path):
    X, y = _table(40)
    lines = [f"{'nan' if i == 3 else t} " + " ".join(f"{j + 1}:{v}" for j, v in enumerate(r))
             for i, (r, t) in enumerate(zip(X, y))]
    (tmp_path / "d.svm").write_text("\n".join(lines) + "\n")
    with pytest.raises(Exception, match="NaN|nan"):  # read as a target, the NaN label is refused
        ingest(tmp_path / "d.svm", tmp_path / "with_y.zarr")
    s = ingest(tmp_path / "d.svm", tmp_path / "d.zarr", target=[], index_base=1, dtype="float64")
    assert s.n_targets == 0 and s.rows_dropped == 0
    np.testing.assert_array_equal(_X(tmp_path / "d.zarr")[0], X)
    with pytest.raises(InvalidParameterError, match=r"target=\[\] reads no target"):
        ingest(tmp_path / "d.svm", tmp_path / "e.zarr", target=0)


def test_a_store_without_a_target_as_like_reads_none(tmp_path):
    X, y = _table()
    _csv(tmp_path / "a.csv", dict(zip(NAMES, X.T)))
    ingest(tmp_path / "a.csv", tmp_path / "a.zarr", target=[])
    s = ingest(tmp_path / "a.csv", tmp_path / "b.zarr", like=tmp_path / "a.zarr")
    assert s.n_targets == 0
    _csv(tmp_path / "c.csv", {**dict(zip(NAMES, X.T)), "y": y})
    with pytest.raises(InvalidParameterError, match="contradicts like"):
        ingest(tmp_path / "c.csv", tmp_path / "c.zarr", target="y", like=tmp_path / "a.zarr")


def test_a_classifier_store_as_like_gives_no_classes_to_a_store_without_a_target(tmp_path):
    X, y = _table()
    labels = np.where(y > 0, "up", "down")
    frame = pd.DataFrame({**dict(zip(NAMES, X.T)), "label": labels})
    frame.to_csv(tmp_path / "train.csv", index=False)
    assert ingest(tmp_path / "train.csv", tmp_path / "train.zarr").classes == ["down", "up"]
    frame[NAMES].to_csv(tmp_path / "test.csv", index=False)
    s = ingest(tmp_path / "test.csv", tmp_path / "test.zarr", target=[], like=tmp_path / "train.zarr")
    assert s.classes is None and "classes" not in _X(tmp_path / "test.zarr")[1]
    with pytest.raises(InvalidParameterError, match="needs one target column"):
        ingest(tmp_path / "test.csv", tmp_path / "x.zarr", target=[], target_type="labels")


@pytest.mark.cluster
def test_cli_no_target_store_predicts_what_the_training_store_predicts(tmp_path, capsys, local_cluster):
    from dkrr.cli import main

    def run(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    X, y = _table(400)
    _csv(tmp_path / "train.csv", {**dict(zip(NAMES, X.T)), "y": y})
    _csv(tmp_path / "new.csv", dict(zip(NAMES[::-1], X.T[::-1])))  # no target, columns reordered
    addr = ["--scheduler", local_cluster.scheduler_address, "-q"]
    code, out, _ = run("ingest", tmp_path / "train.csv", "--out", tmp_path / "train.zarr", "-q")
    assert code == 0 and "X 400 x 4, 1 target(s) ('y')" in out, out  # the column taken as the target
    code, out, err = run("ingest", tmp_path / "new.csv", "--out", tmp_path / "new.zarr", "--no-target",
                         "--like", tmp_path / "train.zarr", "-q")
    assert code == 0, err
    assert "X 400 x 4, no target (a store to predict" in out
    fit = ["--method", "rff", "--n-components", 64, "--gamma", 0.5, "--alpha", 0.01, "--random-state", 0]
    assert run("fit", tmp_path / "train.zarr", "--out", tmp_path / "m", *fit, *addr)[0] == 0
    for store, out_ in (("new.zarr", "p_new"), ("train.zarr", "p_train")):
        code, _, err = run("predict", tmp_path / "m", tmp_path / store, "--out", tmp_path / out_, *addr)
        assert code == 0, err
    p_new = zarr.open_group(str(tmp_path / "p_new"), mode="r")["y_pred"][...]
    p_train = zarr.open_group(str(tmp_path / "p_train"), mode="r")["y_pred"][...]
    np.testing.assert_array_equal(p_new, p_train)
    # --missing drop: the store's rows are the file's less the dropped ones; predict says so
    lines = (tmp_path / "new.csv").read_text().splitlines()
    lines[3] = "," + lines[3].split(",", 1)[1]  # data row 2 loses its first cell
    (tmp_path / "gap.csv").write_text("\n".join(lines) + "\n")
    code, out, err = run("ingest", tmp_path / "gap.csv", "--out", tmp_path / "gap.zarr", "--no-target", "--like",
                         tmp_path / "train.zarr", "--missing", "drop", "-q")
    assert code == 0 and "1 row(s) with missing values dropped" in out and "do not line up" in out, (out, err)
    code, out, err = run("predict", tmp_path / "m", tmp_path / "gap.zarr", "--out", tmp_path / "p_gap", *addr)
    assert code == 0 and "y_pred for 399 rows" in out, err
    assert "note: " in err and "ingested with --missing drop: its 399 rows are its file's less 1 dropped" in err, err
    code, _, err = run("predict", tmp_path / "m", tmp_path / "new.zarr", "--out", tmp_path / "p_new2", *addr)
    assert code == 0 and "--missing drop" not in err, err
    for command in (["fit", tmp_path / "new.zarr", "--out", tmp_path / "m2"],
                    ["evaluate", tmp_path / "m", tmp_path / "new.zarr"]):
        code, _, err = run(*command, *addr)
        assert code == 1 and "holds features alone" in err and "Traceback" not in err, err
    code, _, err = run("ingest", tmp_path / "new.csv", "--out", tmp_path / "x.zarr", "--no-target",
                       "--labels", "-q")
    assert code == 1 and "--labels reads the target column" in err
    with pytest.raises(SystemExit):
        main(["ingest", str(tmp_path / "new.csv"), "--out", str(tmp_path / "x.zarr"), "--no-target",
              "--target", "a"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "x.zarr").exists()


@pytest.mark.parametrize("order", [["a", "b", "c", "d", "y"], ["y", "a", "b", "c", "d"], ["a", "y", "b", "c", "d"]])
def test_like_a_store_of_a_feature_subset_finds_its_columns_by_name(tmp_path, order):
    """A training store of features d, a (features=): its file's header was rebuilt as if
    its features were every other column in order, so a test file got columns c, d (or an
    IndexError traceback) without a word. Now each used column's name is placed where the
    store read it: with and without the target, CSV and Parquet test files."""
    X, y = _table()
    values = {**dict(zip(NAMES, X.T)), "y": y}
    _csv(tmp_path / "train.csv", {c: values[c] for c in order})
    ingest(tmp_path / "train.csv", tmp_path / "train.zarr", target="y", features=["d", "a"], dtype="float64")
    want = X[:, [3, 0]]
    _csv(tmp_path / "new.csv", {c: values[c] for c in ["d", "b", "a", "c"]})
    ingest(tmp_path / "new.csv", tmp_path / "new.zarr", target=[], like=tmp_path / "train.zarr")
    np.testing.assert_array_equal(_X(tmp_path / "new.zarr")[0], want)
    _csv(tmp_path / "test.csv", {c: values[c] for c in ["c", "y", "d", "b", "a"]})
    s = ingest(tmp_path / "test.csv", tmp_path / "test.zarr", like=tmp_path / "train.zarr")
    group = zarr.open_group(str(tmp_path / "test.zarr"), mode="r")
    assert s.target_names == ["y"] and s.feature_names == ["d", "a"]
    np.testing.assert_array_equal(group["X"][...], want)
    np.testing.assert_array_equal(group["y"][...], y)
    pd.DataFrame({c: values[c] for c in ["c", "a", "b", "d"]}).to_parquet(tmp_path / "new.parquet")
    ingest(tmp_path / "new.parquet", tmp_path / "new_pq.zarr", target=[], like=tmp_path / "train.zarr")
    np.testing.assert_array_equal(_X(tmp_path / "new_pq.zarr")[0], want)


def test_a_parquet_file_by_position_reads_the_training_file_less_its_target(tmp_path):
    """A Parquet file to predict, like a header-less CSV store (columns by position) whose
    target was first: the training positions were used without removing the target."""
    X, y = _table()
    _csv(tmp_path / "train.csv", {"y": y, "a": X[:, 0], "b": X[:, 1]}, header=False)
    ingest(tmp_path / "train.csv", tmp_path / "train.zarr", target=0, features=[1], header=False,
           dtype="float64")
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1]}).to_parquet(tmp_path / "new.parquet")
    ingest(tmp_path / "new.parquet", tmp_path / "new.zarr", target=[], like=tmp_path / "train.zarr")
    np.testing.assert_array_equal(_X(tmp_path / "new.zarr")[0], X[:, :1])


def test_a_file_read_by_position_with_another_width_is_refused(tmp_path):
    """Positions come from the store; a file of another width than its file (less the
    target without one) had its columns taken from the wrong places, silently: a file that
    still holds its first-column target read it as a feature and lost its last feature."""
    X, y = _table()
    train = np.column_stack([y, X])
    _csv(tmp_path / "train.csv", {f"c{j}": train[:, j] for j in range(5)}, header=False)
    ingest(tmp_path / "train.csv", tmp_path / "train.zarr", target=0, header=False)
    with pytest.raises(FeatureMismatchError, match=r"has 5 columns, but like=.* a file of 5 columns \(4 feature"
                                                   r".* leave target=\[\] \(--no-target\) out"):
        ingest(tmp_path / "train.csv", tmp_path / "a.zarr", target=[], header=False, like=tmp_path / "train.zarr")
    _csv(tmp_path / "new.csv", dict(zip(NAMES, X.T)), header=False)
    with pytest.raises(FeatureMismatchError, match=r"has 4 columns, .* so it needs 5: a file to predict without "
                                                   r"its target column\(s\): pass target=\[\] \(--no-target\)"):
        ingest(tmp_path / "new.csv", tmp_path / "b.zarr", header=False, like=tmp_path / "train.zarr")
    np.save(tmp_path / "wide.npy", np.column_stack([X, X]))
    with pytest.raises(FeatureMismatchError, match=r"has 8 columns, .* so it needs 4: give the file"):
        ingest(tmp_path / "wide.npy", tmp_path / "c.zarr", target=[], like=tmp_path / "train.zarr")
    for out in ("a.zarr", "b.zarr", "c.zarr"):
        assert not (tmp_path / out).exists()


def test_the_like_store_is_an_input_and_never_the_output(tmp_path, capsys):
    """ingest --like TRAIN --out TRAIN --overwrite replaced the training store with the
    test file's X alone (its y lost): like was not counted among the inputs that an output
    may not be, contain or lie inside. Refused now, in Python and on the command line, the
    training store left as it was."""
    from dkrr.cli import main
    from dkrr.errors import OutputExistsError

    X, y = _table()
    train = ingest(_csv(tmp_path / "train.csv", {**dict(zip(NAMES, X.T)), "y": y}), tmp_path / "train.zarr").path
    new = _csv(tmp_path / "new.csv", dict(zip(NAMES, X.T)))
    before = {p.relative_to(tmp_path): p.read_bytes() for p in sorted((tmp_path / "train.zarr").rglob("*"))
              if p.is_file()}
    for out, why in [(train, "it is an input of this command"),
                     (tmp_path / "train.zarr" / "inner.zarr", "inside"),
                     (tmp_path, "it contains the input")]:
        with pytest.raises(OutputExistsError, match=f"refusing to write .*{why}"):
            ingest(new, out, target=[], like=train, overwrite=True)
        code = main(["ingest", str(new), "--out", str(out), "--no-target", "--like", str(train), "--overwrite", "-q"])
        err = capsys.readouterr().err
        assert code == 1 and why in err and "Traceback" not in err, err
    after = {p.relative_to(tmp_path): p.read_bytes() for p in sorted((tmp_path / "train.zarr").rglob("*"))
             if p.is_file()}
    assert after == before
    assert open_dataset(train).y is not None
    # the file itself is an input too (a store written over the CSV it reads)
    with pytest.raises(OutputExistsError, match="it is an input of this command"):
        ingest(new, new, target=[], overwrite=True)
