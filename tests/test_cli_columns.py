"""Feature columns by name in the commands (dkrr.cli._columns).

``dkrr fit`` records a store's feature names on the model (``feature_names_in_``);
``dkrr predict`` and ``dkrr evaluate`` refuse a store whose columns are other ones or
come in another order, before any work, where they were once scored by position with
no word. Stores are ingested by the real ``dkrr ingest`` and the commands run in this
process against a real LocalCluster.
"""

import json

import numpy as np
import pandas as pd
import pytest
import zarr

from dkrr import load_model
from dkrr.errors import FeatureMismatchError, FeatureNamesWarning
from dkrr.io import open_dataset, write_dataset

pytestmark = pytest.mark.cluster

FIT = ["--method", "rff", "--n-components", 64, "--gamma", 0.5, "--alpha", 0.01, "--random-state", 0]
NAMES = ["a", "b", "c", "d"]


def _main(capsys, *args):
    from dkrr.cli import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    return X, np.sin(2 * X[:, 0]) + 0.5 * X[:, 1]  # the first two columns matter, unequally


def _ingest(capsys, path, header, X, y, *flags):
    """``dkrr ingest`` of a CSV with `header` (a list of names, or None for none)."""
    csv = path.with_suffix(".csv")
    lines = [] if header is None else [",".join(header)]
    lines += [",".join(f"{v:.9f}" for v in row) for row in np.column_stack([X, y])]
    csv.write_text("\n".join(lines) + "\n")
    target = ["--target", "y"] if header is not None else ["--target", X.shape[1], "--no-header"]
    code, _, err = _main(capsys, "ingest", csv, "--out", path, *target, "--dtype", "float64", "-q", *flags)
    assert code == 0, err
    return path


@pytest.fixture
def addr(local_cluster):
    return ["--scheduler", local_cluster.scheduler_address, "-q"]


@pytest.fixture
def model(tmp_path, capsys, addr):
    X, y = _rows(800, 0)
    train = _ingest(capsys, tmp_path / "train.zarr", [*NAMES, "y"], X, y)
    code, _, err = _main(capsys, "fit", train, "--out", tmp_path / "m", *FIT, *addr)
    assert code == 0, err
    return tmp_path / "m"


def test_fit_records_the_stores_column_names_on_the_model(model):
    est = load_model(model)
    assert list(est.feature_names_in_) == NAMES
    X, _ = _rows(20, 1)
    frame = pd.DataFrame(X, columns=NAMES)
    with pytest.warns(FeatureNamesWarning, match="does not have valid feature names"):  # scikit-learn's rule
        by_position = est.predict(X)
    np.testing.assert_array_equal(est.predict(frame), by_position)
    with pytest.raises(FeatureMismatchError, match="same order"):  # in Python too, after the file
        est.predict(frame[["b", "a", "c", "d"]])


def test_a_store_with_the_columns_in_another_order_is_refused(model, tmp_path, capsys, addr):
    X, y = _rows(300, 2)
    order = ["b", "a", "c", "d"]
    swapped = _ingest(capsys, tmp_path / "swapped.zarr", [*order, "y"], X[:, [1, 0, 2, 3]], y)
    for command in (["evaluate", model, swapped, "--json"], ["predict", model, swapped, "--out", tmp_path / "p"]):
        code, out, err = _main(capsys, *command, *addr)
        assert code == 1 and out == ""
        assert "error: X in" in err and "the same columns in another order (column 0 is 'b' where the " \
               "model's is 'a')" in err and "--features a,b,c,d" in err and "--like TRAIN_STORE" in err, err
    assert not (tmp_path / "p").exists()

    # the two fixes the message gives: the same file ingested with the model's columns, in order
    csv = swapped.with_suffix(".csv")
    est = load_model(model)
    r2 = lambda pred: 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)  # noqa: E731
    for name, flags in (("features", ["--target", "y", "--features", "a,b,c,d", "--dtype", "float64"]),
                        ("like", ["--like", tmp_path / "train.zarr", "--dtype", "float64"])):
        code, _, err = _main(capsys, "ingest", csv, "--out", tmp_path / f"{name}.zarr", *flags, "-q")
        assert code == 0, err
        code, out, err = _main(capsys, "evaluate", model, tmp_path / f"{name}.zarr", "--json", *addr)
        assert code == 0, err
        assert json.loads(out)["r2"] == pytest.approx(r2(est.predict(pd.DataFrame(X, columns=NAMES))), abs=1e-9)
    with pytest.warns(FeatureNamesWarning):  # what the swapped store once scored, with no word
        by_position = r2(est.predict(X[:, [1, 0, 2, 3]]))
    assert json.loads(out)["r2"] > 0.6 and by_position < 0, by_position


def test_other_columns_of_the_same_count_are_refused_and_named(model, tmp_path, capsys, addr):
    X, y = _rows(300, 3)
    other = _ingest(capsys, tmp_path / "other.zarr", ["a", "b", "c", "e", "y"], X, y)
    code, out, err = _main(capsys, "evaluate", model, other, *addr)
    assert code == 1 and out == ""
    assert "the model's column 'd' is missing; column 'e' is not the model's" in err, err


def test_a_store_without_names_is_scored_by_position_with_a_note(model, tmp_path, capsys, addr):
    X, y = _rows(300, 4)
    bare = _ingest(capsys, tmp_path / "bare.zarr", None, X, y)
    assert open_dataset(bare).feature_names == ["column_0", "column_1", "column_2", "column_3"]
    code, out, err = _main(capsys, "evaluate", model, bare, "--json", *addr)
    assert code == 0, err
    assert "dkrr evaluate: note: X in" in err and "has no column names of its own" in err, err
    assert "FeatureNamesWarning" not in err and "warning" not in err.lower(), err
    pred = load_model(model).predict(pd.DataFrame(X, columns=NAMES))
    expected = 1 - np.sum((y - pred) ** 2) / np.sum((y - y.mean()) ** 2)
    assert json.loads(out)["r2"] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_a_store_of_another_width_is_refused_before_the_note(model, tmp_path, capsys, addr, command):
    """A 5-column store without names, scored by a 4-column model, got the note that its
    columns are taken to be the model's 4, then scikit-learn's width error after the cluster."""
    X, y = _rows(50, 5)
    wide = _ingest(capsys, tmp_path / "wide.zarr", None, np.column_stack([X, X[:, 0]]), y)
    out = [] if command == "evaluate" else ["--out", tmp_path / "p.zarr"]
    code, _, err = _main(capsys, command, model, wide, *out, *addr)
    assert code == 1 and "note" not in err, err
    assert (f"dkrr {command}: error: X in {wide} has 5 columns, but model {model} was fitted on 4: 'a', 'b', 'c', "
            "'d'. Pass a store with the model's columns") in err, err
    assert not (tmp_path / "p.zarr").exists()


def test_a_model_fitted_on_a_store_without_names_records_none(tmp_path, capsys, addr):
    X, y = _rows(400, 5)
    bare = _ingest(capsys, tmp_path / "bare.zarr", None, X, y)
    code, _, err = _main(capsys, "fit", bare, "--out", tmp_path / "mb", *FIT, *addr)
    assert code == 0, err
    est = load_model(tmp_path / "mb")
    assert getattr(est, "feature_names_in_", None) is None
    named = _ingest(capsys, tmp_path / "named.zarr", [*NAMES, "y"], X, y)
    code, out, err = _main(capsys, "evaluate", tmp_path / "mb", named, *addr)
    assert code == 0 and err == "", err  # nothing to compare: scored by position, as always
    with pytest.warns(FeatureNamesWarning):  # Python: scikit-learn's warning, unchanged
        est.predict(pd.DataFrame(X, columns=NAMES))


def test_the_names_ingest_makes_up_are_no_names(tmp_path, capsys):
    """``column_{j}`` (a CSV without header, .npy) and LIBSVM's ``feature_{j}`` number the
    columns: a model records none of them, and a store holding them is taken by position."""
    from dkrr.cli._columns import store_feature_names

    svm = tmp_path / "t.svm"
    svm.write_text("1 1:0.5 3:1.0\n0 2:0.1\n")
    code, _, err = _main(capsys, "ingest", svm, "--out", tmp_path / "svm.zarr", "-q")
    assert code == 0, err
    X, y = _rows(10, 6)
    bare = _ingest(capsys, tmp_path / "bare.zarr", None, X, y)
    named = _ingest(capsys, tmp_path / "named.zarr", [*NAMES, "y"], X, y)
    assert open_dataset(tmp_path / "svm.zarr").feature_names is None  # LIBSVM: none recorded since 9c8cb0d
    assert store_feature_names(open_dataset(tmp_path / "svm.zarr")) is None
    # a LIBSVM store of an earlier dkrr, which recorded feature_{j}: no names either
    old = write_dataset(np.ones((2, 3), dtype=np.float32), np.ones(2), tmp_path / "old.zarr",
                        feature_names=["feature_0", "feature_1", "feature_2"])
    assert store_feature_names(open_dataset(old)) is None
    assert store_feature_names(open_dataset(bare)) is None
    assert store_feature_names(open_dataset(named)) == NAMES


def test_a_header_of_names_like_ingests_own_is_the_sources_names(tmp_path, capsys, addr):
    """A header ``feature_0,...,feature_3,y`` (as many exports write) was taken for names
    ingest made up: the model recorded none, and a test file with those columns reversed
    was scored by position without a word (r2 -1.15 against 0.99 in order). A CSV
    header's names, and a Parquet file's, are the source's own whatever they look like."""
    from dkrr.cli._columns import store_feature_names

    X, y = _rows(800, 7)
    names = [f"feature_{j}" for j in range(4)]
    train = _ingest(capsys, tmp_path / "train.zarr", [*names, "y"], X, y)
    assert store_feature_names(open_dataset(train)) == names
    code, _, err = _main(capsys, "fit", train, "--out", tmp_path / "m", *FIT, *addr)
    assert code == 0, err
    assert list(load_model(tmp_path / "m").feature_names_in_) == names
    swapped = _ingest(capsys, tmp_path / "swapped.zarr", [*names[::-1], "y"], X[:, ::-1], y)
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", swapped, *addr)
    assert code == 1 and out == "" and "the same columns in another order (column 0 is 'feature_3'" in err, err
    frame = pd.DataFrame(np.column_stack([X, y]), columns=[f"column_{j}" for j in range(5)])
    frame.to_parquet(tmp_path / "p.parquet")
    code, _, err = _main(capsys, "ingest", tmp_path / "p.parquet", "--out", tmp_path / "p.zarr", "-q")
    assert code == 0, err
    assert store_feature_names(open_dataset(tmp_path / "p.zarr")) == [f"column_{j}" for j in range(4)]


def test_the_features_fix_is_given_only_where_the_names_can_be_typed():
    from dkrr.cli._columns import _columns_option

    def _features_option(names):
        return _columns_option("--features", names, "columns")

    assert _features_option(["a", "b c"]) == "`--features 'a,b c'`"
    assert _features_option(["a", "x,y"]).startswith("`--features` with the model's columns")
    assert "\x1b" not in _features_option(["a", "\x1b[31mred"])


def _csv(path, header, table):
    path.write_text("\n".join([",".join(header)] + [",".join(f"{v:.9f}" for v in row) for row in table]) + "\n")
    return path


def test_targets_in_another_order_are_refused_and_other_names_noted(tmp_path, capsys, addr):
    """A store of two targets was scored by position: with y2,y1 where the model predicts
    y1,y2, each target was scored against the other's predictions, with no word."""
    X, y = _rows(800, 6)
    Y = np.column_stack([y, np.cos(X[:, 2])])
    train = _csv(tmp_path / "train.csv", [*NAMES, "y1", "y2"], np.column_stack([X, Y]))
    code, _, err = _main(capsys, "ingest", train, "--out", tmp_path / "train.zarr", "--target", "y1,y2",
                         "--dtype", "float64", "-q")
    assert code == 0, err
    code, _, err = _main(capsys, "fit", tmp_path / "train.zarr", "--out", tmp_path / "m", *FIT, *addr)
    assert code == 0, err
    est = load_model(tmp_path / "m")
    assert list(est.store_target_names_) == ["y1", "y2"]

    Xt, yt = _rows(300, 7)
    Yt = np.column_stack([yt, np.cos(Xt[:, 2])])
    test = _csv(tmp_path / "test.csv", ["y2", *NAMES, "y1"], np.column_stack([Yt[:, 1], Xt, Yt[:, 0]]))
    code, _, err = _main(capsys, "ingest", test, "--out", tmp_path / "rev.zarr", "--target", "y2,y1",
                         "--features", "a,b,c,d", "--dtype", "float64", "-q")
    assert code == 0, err
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "rev.zarr", "--json", *addr)
    assert code == 1 and out == ""
    assert ("holds the targets model" in err and "in another order (target 0 is 'y2' where the model's is "
            "'y1')" in err and "--target y1,y2" in err and "--like TRAIN_STORE" in err), err

    def r2(Y, P):  # scikit-learn's uniform average over the targets
        return np.mean(1 - np.sum((Y - P) ** 2, axis=0) / np.sum((Y - Y.mean(axis=0)) ** 2, axis=0))

    pred = est.predict(pd.DataFrame(Xt, columns=NAMES))
    for name, flags in (("target", ["--target", "y1,y2", "--features", "a,b,c,d"]),
                        ("like", ["--like", tmp_path / "train.zarr"])):
        code, _, err = _main(capsys, "ingest", test, "--out", tmp_path / f"{name}.zarr", *flags, "--dtype",
                             "float64", "-q")
        assert code == 0, err
        code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / f"{name}.zarr", "--json", *addr)
        assert code == 0 and err == "", err
        assert json.loads(out)["r2"] == pytest.approx(r2(Yt, pred), abs=1e-9) and json.loads(out)["r2"] > 0.8
    assert r2(Yt[:, ::-1], pred) < 0  # what the reversed store scored, once, with no word
    code, _, err = _main(capsys, "predict", tmp_path / "m", tmp_path / "like.zarr", "--out", tmp_path / "p", *addr)
    assert code == 0, err
    assert zarr.open_group(str(tmp_path / "p"), mode="r").attrs["target_names"] == ["y1", "y2"]

    # other names: scored by position (a renamed column may be the same quantity), with a note
    other = _csv(tmp_path / "other.csv", [*NAMES, "u", "v"], np.column_stack([Xt, Yt]))
    code, _, err = _main(capsys, "ingest", other, "--out", tmp_path / "other.zarr", "--target", "u,v",
                         "--dtype", "float64", "-q")
    assert code == 0, err
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "other.zarr", "--json", *addr)
    assert code == 0 and json.loads(out)["r2"] == pytest.approx(r2(Yt, pred), abs=1e-9)
    assert "note: y in" in err and "holds 'u', 'v' where model" in err and "scored by position" in err, err
    # another count of targets: evaluate's error alone, no note on the names before it
    code, _, err = _main(capsys, "ingest", test, "--out", tmp_path / "one.zarr", "--target", "y1", "--features",
                         "a,b,c,d", "-q")
    assert code == 0, err
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "one.zarr", *addr)
    assert code == 1 and "the model predicts 2 targets but y in" in err and "note" not in err, err


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_digit_column_names_are_names_before_indices(tmp_path, capsys, fmt):
    """pandas' default header names columns by digits (``df.to_csv()``: ``,0,1,2,3,4,y``).
    ``--features 0,1`` took the index column and column '0' (digits were always indices),
    without a word; a header name now comes first, an index where no column has the name."""
    frame = pd.DataFrame(np.arange(20.0).reshape(4, 5))
    frame["y"] = [1.0, 2.0, 3.0, 4.0]
    frame.columns = [str(c) for c in frame.columns]
    src = tmp_path / f"d.{fmt}"
    frame.to_csv(src) if fmt == "csv" else frame.to_parquet(src, index=False)
    code, _, err = _main(capsys, "ingest", src, "--out", tmp_path / "s", "--features", "0,1", "--target", "y", "-q")
    assert code == 0, err
    data = open_dataset(tmp_path / "s")
    assert list(data.feature_names) == ["0", "1"]
    np.testing.assert_array_equal(np.asarray(data.X), frame[["0", "1"]].to_numpy())
    # a number no column is named: an index (as for the target); negative from the end
    code, _, err = _main(capsys, "ingest", src, "--out", tmp_path / "t", "--features", "-2,3",
                         "--target", "2", "-q")
    assert code == 0, err
    data = open_dataset(tmp_path / "t")
    assert list(data.target_names) == ["2"] and list(data.feature_names) == ["4", "3"]
    code, _, err = _main(capsys, "ingest", src, "--out", tmp_path / "u", "--features", "9", "-q")
    assert code == 1 and "feature column index 9 is out of range" in err, err
