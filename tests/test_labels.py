"""Class labels end to end: labels are the contract, codes are storage (issue 23).

Stores are ingested by the real ``dkrr ingest`` (in-process ``main``) and the commands
run against a real LocalCluster; the estimator checks run on numpy, dask and zarr input.
"""

import json

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from dkrr import load_model
from dkrr.errors import InputValidationError, NonFiniteInputError, StoreError
from dkrr.estimators import RandomFeatureRidgeClassifier
from dkrr.io import open_dataset, write_dataset

pytestmark = pytest.mark.cluster

FIT = ["--method", "rff", "--n-components", 32, "--gamma", 0.5, "--alpha", 0.1, "--random-state", 0]


def _main(capsys, *args):
    from dkrr.cli import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _data(n, seed, labels):
    """Rows whose label (one of ``labels``) is the region of the first feature."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 2))
    edges = np.quantile(rng.standard_normal(10_000), np.linspace(0, 1, len(labels) + 1)[1:-1])
    y = np.asarray(labels)[np.searchsorted(edges, X[:, 0])]
    return X, y


def _write_csv(path, X, y):
    with open(path, "w") as fh:
        fh.write("f0,f1,label\n")
        for row, label in zip(X, y):
            fh.write(f"{row[0]:.6f},{row[1]:.6f},{label}\n")


def _ingest(capsys, tmp_path, name, X, y, *flags):
    _write_csv(tmp_path / f"{name}.csv", X, y)
    code, _, err = _main(capsys, "ingest", tmp_path / f"{name}.csv", "--out", tmp_path / name,
                         "--target", "label", "--dtype", "float64", "--chunk-rows", 100, "-q", *flags)
    assert code == 0, err
    return tmp_path / name


@pytest.fixture
def addr(local_cluster):
    return ["--scheduler", local_cluster.scheduler_address, "-q"]


@pytest.fixture
def abc_model(tmp_path, capsys, addr):
    """A classifier fitted by ``dkrr fit`` on a store ingested with the labels a, b, c."""
    X, y = _data(600, 0, ["a", "b", "c"])
    train = _ingest(capsys, tmp_path, "train", X, y)
    assert open_dataset(train).classes == ["a", "b", "c"]
    code, _, err = _main(capsys, "fit", train, "--out", tmp_path / "m", "--classifier", *FIT, *addr)
    assert code == 0, err
    return tmp_path / "m"


def _true_labels(model, X):
    """What the model predicts, as labels, computed in numpy."""
    est = load_model(model)
    return np.asarray(est.store_classes_)[est.predict(X)]


def test_evaluate_and_predict_compare_labels_across_stores(abc_model, tmp_path, capsys, addr):
    # the test store holds only b and c: its codes are 0, 1 where the model's are 1, 2
    X, y = _data(400, 1, ["a", "b", "c"])
    keep = y != "a"
    X, y = X[keep], y[keep]
    test = _ingest(capsys, tmp_path, "test", X, y)
    assert open_dataset(test).classes == ["b", "c"]
    pred = _true_labels(abc_model, X)
    true_acc = float(np.mean(pred == y))
    assert true_acc > 0.8  # the model is good; comparing codes would give about 0.1

    code, out, err = _main(capsys, "evaluate", abc_model, test, "--json", *addr)
    assert code == 0, err
    assert json.loads(out)["accuracy"] == pytest.approx(true_acc, abs=1e-12)
    assert "note" not in err  # every label of the test store is a class of the model

    code, _, err = _main(capsys, "predict", abc_model, test, "--out", tmp_path / "p", *addr)
    assert code == 0, err
    g = zarr.open_group(str(tmp_path / "p"), mode="r")
    classes = list(g.attrs["classes"])  # the model's labels: y_pred == i means classes[i]
    assert classes == ["a", "b", "c"]
    np.testing.assert_array_equal(np.asarray(classes)[g["y_pred"][:]], pred)


def test_labels_the_model_never_saw_count_as_wrong_and_are_named(abc_model, tmp_path, capsys, addr):
    X, y = _data(300, 2, ["b", "c", "d"])
    test = _ingest(capsys, tmp_path, "test", X, y)
    pred = _true_labels(abc_model, X)
    code, out, err = _main(capsys, "evaluate", abc_model, test, "--json", *addr)
    assert code == 0, err
    assert json.loads(out)["accuracy"] == pytest.approx(float(np.mean(pred == y)), abs=1e-12)
    n_d = int(np.sum(y == "d"))
    assert n_d > 0
    assert f"dkrr evaluate: note: {n_d} of 300 row(s) hold label(s) the model never saw, counted " \
           "as wrong: ['d']" in err, err


def test_a_store_whose_labels_are_none_of_the_models_is_refused(abc_model, tmp_path, capsys, addr):
    """Every row would count as wrong (accuracy 0 and a note, before): the store holds
    another task's labels, text (yes/no against a/b/c) or text against a model of numbers.
    Refused before any work, naming both label sets."""
    X, y = _data(300, 6, ["yes", "no"])
    other = _ingest(capsys, tmp_path, "other", X, y)
    code, out, err = _main(capsys, "evaluate", abc_model, other, *addr)
    assert code == 1 and out == "", out
    assert err.startswith("dkrr evaluate: error: none of the labels of y in ") and "['no', 'yes']" in err, err
    assert "is one of the model's classes (['a', 'b', 'c'])" in err and "--like" in err, err
    X2, y2 = _data(300, 7, [-1, 1])
    num = _ingest(capsys, tmp_path, "num", X2, y2)
    code, _, err = _main(capsys, "fit", num, "--out", tmp_path / "mn", "--classifier", *FIT, *addr)
    assert code == 0, err
    code, out, err = _main(capsys, "evaluate", tmp_path / "mn", other, *addr)
    assert code == 1 and out == "" and "is one of the model's classes ([-1.0, 1.0])" in err, err


def test_a_store_whose_classes_are_not_sorted_is_fitted_and_scored_by_its_labels(tmp_path, capsys, addr):
    """write_dataset keeps the order its classes= are given in (so may another program that
    writes a store): dkrr fit records them in that order as store_classes_, the model loads
    (their order is no agreement rule of a model file: only ingest sorts), and evaluate on
    an ingested test store, whose classes are sorted, compares labels."""
    X, y = _data(600, 0, ["a", "b", "c"])
    order = ["c", "a", "b"]
    codes = np.array([order.index(label) for label in y])
    write_dataset(X, codes, tmp_path / "train", classes=order, feature_names=["f0", "f1"], target_names=["label"])
    code, _, err = _main(capsys, "fit", tmp_path / "train", "--out", tmp_path / "m", "--classifier", *FIT, *addr)
    assert code == 0, err
    assert load_model(tmp_path / "m").store_classes_.tolist() == order
    Xt, yt = _data(400, 1, ["a", "b", "c"])
    test = _ingest(capsys, tmp_path, "test", Xt, yt)
    assert open_dataset(test).classes == ["a", "b", "c"]
    true_acc = float(np.mean(_true_labels(tmp_path / "m", Xt) == yt))
    assert true_acc > 0.8
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", test, "--json", *addr)
    assert code == 0, err
    assert json.loads(out)["accuracy"] == pytest.approx(true_acc, abs=1e-12)


def test_a_classifier_on_a_regression_store_is_refused(abc_model, tmp_path, capsys, addr):
    X, _ = _data(300, 3, ["a"])
    reg = _ingest(capsys, tmp_path, "reg", X, np.round(X[:, 0] * 1000 + 0.5) / 1000)
    assert open_dataset(reg).classes is None
    code, out, err = _main(capsys, "evaluate", abc_model, reg, *addr)
    assert code == 1 and out == ""
    assert err.startswith("dkrr evaluate: error: the model predicts the text labels ['a', 'b', 'c']"), err
    # a model with numeric labels: the values are compared, and a continuous y is refused
    X2, y2 = _data(300, 4, [-1, 1])
    num = _ingest(capsys, tmp_path, "num", X2, y2)
    code, _, err = _main(capsys, "fit", num, "--out", tmp_path / "mn", "--classifier", *FIT, *addr)
    assert code == 0, err
    code, out, err = _main(capsys, "evaluate", tmp_path / "mn", reg, *addr)
    assert code == 1 and out == "", out
    assert "Unknown label type: continuous" in err and "first in row 0" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    code, _, err = _main(capsys, "fit", reg, "--out", tmp_path / "mc", "--classifier", *FIT, *addr)
    assert code == 1 and "Unknown label type: continuous" in err, err
    assert not (tmp_path / "mc").exists()


def test_labels_of_a_continuous_column_are_refused_at_ingest_and_fit(tmp_path, capsys, addr):
    """--labels on a measured column made one class per distinct value (300 classes of 300
    rows), and fit --classifier fitted them without a word. Ingest refuses it now, leaving
    nothing; a store written so before (its classes set after) is refused by fit; integer
    labels written as floats ('0.0', '1.0') are classes."""
    X, _ = _data(300, 9, ["a"])
    _write_csv(tmp_path / "reg.csv", X, np.round(X[:, 0] + 0.1 * X[:, 1], 6))
    code, _, err = _main(capsys, "ingest", tmp_path / "reg.csv", "--out", tmp_path / "reg", "--target", "label",
                         "--labels", "-q")
    assert code == 1 and "Traceback" not in err, err
    assert "the target column 'label' holds continuous numbers, not class labels: 300 distinct values in 300 rows" in err
    assert "leave out --labels" in err
    assert not (tmp_path / "reg").exists() and not list(tmp_path.glob(".reg*"))
    ints = _ingest(capsys, tmp_path, "ints", X, np.where(X[:, 0] > 0, "1.0", "0.0"), "--labels")
    assert open_dataset(ints).classes == ["0.0", "1.0"]
    old = _store_with_codes(tmp_path / "old", np.arange(300, dtype=np.int32) % 150,
                            [f"{v:.3f}" for v in np.linspace(-1, 1, 150)])
    code, _, err = _main(capsys, "fit", old, "--out", tmp_path / "m", "--classifier", *FIT, *addr)
    assert code == 1 and "was ingested with --labels, but the target column" in err, err
    assert "150 distinct values in 300 rows" in err and not (tmp_path / "m").exists()


def test_numeric_labels_match_text_labels_that_read_as_those_numbers(tmp_path, capsys, addr):
    X, y = _data(400, 5, [-1, 1])
    num = _ingest(capsys, tmp_path, "num", X, y)  # numbers: y holds -1.0, 1.0
    assert open_dataset(num).classes is None
    code, _, err = _main(capsys, "fit", num, "--out", tmp_path / "m", "--classifier", *FIT, *addr)
    assert code == 0, err
    X2, y2 = _data(300, 6, [-1, 1])
    lab = _ingest(capsys, tmp_path, "lab", X2, y2, "--labels")  # text "-1", "1": codes 0, 1
    assert open_dataset(lab).classes == ["-1", "1"]
    est = load_model(tmp_path / "m")
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", lab, "--json", *addr)
    assert code == 0, err
    assert json.loads(out)["accuracy"] == pytest.approx(float(np.mean(est.predict(X2) == y2)), abs=1e-12)


def test_a_regression_on_class_codes_is_refused(tmp_path, capsys, addr):
    X, y = _data(300, 7, ["a", "b", "c"])
    store = _ingest(capsys, tmp_path, "s", X, y)
    code, out, err = _main(capsys, "fit", store, "--out", tmp_path / "m", *FIT, *addr)
    assert code == 1 and out == ""
    assert "holds class codes" in err and "'a', 'b', 'c'" in err
    assert "--classifier" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "m").exists()
    # nor is a regression model evaluated on the codes
    num = _ingest(capsys, tmp_path, "num", X, X[:, 0] + 0.5 * X[:, 1])
    code, _, err = _main(capsys, "fit", num, "--out", tmp_path / "r", *FIT, *addr)
    assert code == 0, err
    code, out, err = _main(capsys, "evaluate", tmp_path / "r", store, *addr)
    assert code == 1 and out == "" and "holds class codes" in err, err


def _store_with_codes(path, codes, classes):
    """A store of `codes` whose 'classes' attribute is `classes`, whatever the codes are
    (write_dataset refuses codes outside the classes, so the attribute is set after)."""
    X = np.random.default_rng(8).standard_normal((codes.size, 2))
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X, chunks=(100, 2)), da.from_array(codes, chunks=100), path,
                      feature_names=["f0", "f1"])  # the columns of the models' CSVs
    zarr.open_group(str(path), mode="r+").attrs["classes"] = list(classes)
    return path


def test_codes_outside_the_classes_are_a_store_error(abc_model, tmp_path, capsys, addr):
    codes = np.tile(np.array([0, 1], dtype=np.int32), 200)
    codes[237], codes[250] = 2, -1
    store = _store_with_codes(tmp_path / "s", codes, ["b", "c"])
    data = open_dataset(store)
    with dask.config.set(scheduler="sync"):
        with pytest.raises(StoreError, match=r"array 'y' of .* holds 2 class code\(s\) outside 0\.\.1 in "
                                             r"rows 200 to 299, first in row 237 \(code 2\)"):
            data.y.compute()
        data.y[:200].compute()  # the good blocks read
    for cmd in (["evaluate", abc_model, store], ["fit", store, "--out", tmp_path / "m2", "--classifier", *FIT]):
        code, out, err = _main(capsys, *cmd, *addr)
        assert code == 1 and out == ""
        assert "class code(s) outside 0..1" in err and "first in row 237" in err, err
        assert len(err.strip().splitlines()) == 1, err


def test_float_codes_or_a_bad_classes_attribute_are_refused_at_open(tmp_path):
    _store_with_codes(tmp_path / "f", np.tile([0.0, 1.0], 100), ["b", "c"])
    with pytest.raises(StoreError, match="dtype float64 but the store has a 'classes' attribute"):
        open_dataset(tmp_path / "f")
    _store_with_codes(tmp_path / "d", np.tile(np.array([0, 1], dtype=np.int32), 100), ["b", "c"])
    g = zarr.open_group(str(tmp_path / "d"), mode="r+")
    g.attrs["classes"] = ["b", "b"]
    with pytest.raises(StoreError, match="'classes' attribute of .* must be a non-empty list of distinct"):
        open_dataset(tmp_path / "d")


def test_predict_writes_codes_and_classes_for_text_labels_of_a_python_model(tmp_path, capsys, addr):
    from dkrr import save_model

    X, y = _data(300, 9, ["no", "yes"])
    clf = RandomFeatureRidgeClassifier(method="rff", n_components=16, gamma=0.5, random_state=0).fit(X, y)
    save_model(clf, tmp_path / "m")
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X, chunks=(100, 2)), None, tmp_path / "s")
    code, _, err = _main(capsys, "predict", tmp_path / "m", tmp_path / "s", "--out", tmp_path / "p", *addr)
    assert code == 0, err
    g = zarr.open_group(str(tmp_path / "p"), mode="r")
    assert g["y_pred"].dtype == np.int32 and list(g.attrs["classes"]) == ["no", "yes"]
    np.testing.assert_array_equal(np.asarray(g.attrs["classes"])[g["y_pred"][:]], clf.predict(X))


# --- the estimator: one rule for every input kind ----------------------------------------

def _clf():
    return RandomFeatureRidgeClassifier(method="rff", n_components=8, gamma=0.5, random_state=0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_numpy_labels_name_the_row(bad):
    X, _ = _data(200, 10, [0])
    y = (X[:, 0] > 0).astype(np.float64)
    y[57] = bad
    with pytest.raises(NonFiniteInputError, match=r"y contains 1 non-finite value\(s\).* first in row 57"):
        _clf().fit(X, y)
    # as for dask input
    with pytest.raises(NonFiniteInputError, match=r"first in row 57"):
        _clf().fit(da.from_array(X, chunks=(50, 2)), da.from_array(y, chunks=50))


@pytest.mark.classic_dask_array("da.from_delayed")
def test_continuous_labels_are_refused_for_every_input_kind(tmp_path):
    X, _ = _data(400, 11, [0])
    y = np.round(X[:, 0] * 2)  # whole numbers: labels
    y_cont = y.copy()
    y_cont[333] = 0.25  # one non-integer value, in the last block
    z = zarr.create_array(str(tmp_path / "y.zarr"), shape=y.shape, chunks=(100,), dtype=y.dtype)
    z[:] = X[:, 1]
    match = "Unknown label type: continuous"
    with pytest.raises(InputValidationError, match=match + r".* first in row 333 \(0\.25\)"):
        _clf().fit(X, y_cont)
    with dask.config.set(scheduler="sync"):
        # the first block, before the pass (the pass never starts: X is not read)
        X_never = da.from_delayed(dask.delayed(_fail)(), shape=X.shape, dtype=X.dtype)
        with pytest.raises(InputValidationError, match=match + r".* rows 0 to 99 \(row block 0\)"):
            _clf().fit(X_never, da.from_array(X[:, 1], chunks=100))
        with pytest.raises(InputValidationError, match=match):
            _clf().fit(X_never, z)
        # a later block, in the pass
        with pytest.raises(InputValidationError, match=match + r".* \(row block 3\).* first in row 333"):
            _clf().fit(da.from_array(X, chunks=(100, 2)), da.from_array(y_cont, chunks=100))
        clf = _clf().fit(da.from_array(X, chunks=(100, 2)), da.from_array(y, chunks=100))
    np.testing.assert_array_equal(clf.classes_, np.unique(y))


def _fail():
    raise AssertionError("X was read before the labels were checked")
