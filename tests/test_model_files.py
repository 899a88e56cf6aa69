"""Saved models: plain data (JSON + .npy), identical predictions, precise errors."""

import hashlib
import json
import os
import re
import shutil
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.errors import DkrrError, ModelFormatError, OutputExistsError
from dkrr.features import PROJECTIONS
from dkrr.io._model import FORMAT_VERSION, load_model, save_model


@pytest.fixture
def X():
    return np.random.default_rng(0).standard_normal((30, 6))


@pytest.mark.parametrize("method", sorted(PROJECTIONS))
def test_feature_map_round_trip(tmp_path, X, method):
    rf = RandomFeatures(method=method, n_components=10, gamma=0.4, random_state=1).fit(X)
    save_model(rf, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert type(loaded) is RandomFeatures and loaded.get_params() == rf.get_params()
    np.testing.assert_array_equal(loaded.transform(X), rf.transform(X))
    # no pickle: every array file is a plain numeric .npy
    for f in (tmp_path / "m" / "arrays").iterdir():
        np.load(f, allow_pickle=False)


def test_model_dir_is_json_plus_npy(tmp_path, X):
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    save_model(rf, tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    assert doc["format"] == "dkrr-model" and doc["format_version"] == FORMAT_VERSION
    assert {p.suffix for p in (tmp_path / "m" / "arrays").iterdir()} == {".npy"}


def test_existing_output_refused_then_overwritten(tmp_path, X):
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    save_model(rf, tmp_path / "m")
    before = (tmp_path / "m" / "model.json").read_text()
    rf2 = RandomFeatures(method="rff", n_components=4, random_state=9).fit(X)
    with pytest.raises(OutputExistsError):
        save_model(rf2, tmp_path / "m")
    assert (tmp_path / "m" / "model.json").read_text() == before
    save_model(rf2, tmp_path / "m", overwrite=True)
    np.testing.assert_array_equal(load_model(tmp_path / "m").transform(X), rf2.transform(X))


def test_overwrite_refuses_a_directory_that_is_not_a_model(tmp_path, X):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("keep me")
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    with pytest.raises(OutputExistsError):
        save_model(rf, tmp_path / "data", overwrite=True)
    assert (tmp_path / "data" / "precious.txt").read_text() == "keep me"


def test_unfitted_is_refused(tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        save_model(RandomFeatures(), tmp_path / "m")
    assert not (tmp_path / "m").exists()


@pytest.fixture
def saved(tmp_path, X):
    rf = RandomFeatures(method="sorf" if "sorf" in PROJECTIONS else "rff", n_components=8, random_state=0).fit(X)
    save_model(rf, tmp_path / "m")
    return tmp_path / "m"


def test_missing_directory(tmp_path):
    with pytest.raises(ModelFormatError, match="does not exist"):
        load_model(tmp_path / "nope")


def test_not_a_model_directory(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(ModelFormatError, match="is a directory but not a dkrr model directory: it holds no model.json"):
        load_model(tmp_path / "d")


def test_a_file_is_said_to_be_a_file_not_missing(tmp_path, saved):
    (tmp_path / "some_file.txt").write_text("x")
    with pytest.raises(ModelFormatError, match="some_file.txt' is a file, not a dkrr model directory") as info:
        load_model(tmp_path / "some_file.txt")
    assert "does not exist" not in str(info.value)
    # the model.json itself: the message names the directory to give instead
    with pytest.raises(ModelFormatError, match=f"is a file.*give the directory that holds it, '{saved}'"):
        load_model(saved / "model.json")


def test_corrupted_json(saved):
    (saved / "model.json").write_text("{ not json")
    with pytest.raises(ModelFormatError, match="not valid JSON"):
        load_model(saved)


def test_foreign_format_and_future_version(saved):
    doc = json.loads((saved / "model.json").read_text())
    (saved / "model.json").write_text(json.dumps({**doc, "format": "something-else"}))
    with pytest.raises(ModelFormatError, match="not a dkrr model file"):
        load_model(saved)
    (saved / "model.json").write_text(json.dumps({**doc, "format_version": 99}))
    with pytest.raises(ModelFormatError, match="version 99.*upgrade"):
        load_model(saved)


def test_corrupted_array_file(saved):
    f = min((saved / "arrays").iterdir())
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match="corrupted: checksum"):
        load_model(saved)


def test_missing_array_file(saved):
    min((saved / "arrays").iterdir()).unlink()
    with pytest.raises(ModelFormatError, match="missing"):
        load_model(saved)


def test_unknown_class_is_not_instantiated(saved):
    doc = json.loads((saved / "model.json").read_text())
    doc["estimator"]["__estimator__"]["class"] = "os.system"
    (saved / "model.json").write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match="unknown estimator class"):
        load_model(saved)


# ---------------------------------------------------------------- array paths


def _first_array(saved):
    """(reference dict in the document, document) of the first array in model.json."""
    doc = json.loads((saved / "model.json").read_text())
    refs = []

    def walk(v):
        if isinstance(v, dict):
            if "__ndarray__" in v:
                refs.append(v)
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(doc)
    return refs[0], doc


def test_dotdot_reference_to_an_existing_file_outside_is_refused(saved, tmp_path):
    ref, doc = _first_array(saved)
    outside = tmp_path / "outside.npy"
    shutil.copy(saved / ref["__ndarray__"], outside)  # same bytes: the checksum would match
    ref["__ndarray__"] = "../outside.npy"
    (saved / "model.json").write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match="outside the model directory"):
        load_model(saved)


def test_symlink_to_a_file_outside_is_refused(saved, tmp_path):
    ref, _ = _first_array(saved)
    inside = saved / ref["__ndarray__"]
    outside = tmp_path / "outside.npy"
    shutil.copy(inside, outside)
    inside.unlink()
    inside.symlink_to(outside)
    with pytest.raises(ModelFormatError, match="outside the model directory"):
        load_model(saved)


def test_arrays_folder_symlinked_outside_is_refused(saved, tmp_path):
    shutil.copytree(saved / "arrays", tmp_path / "elsewhere")
    shutil.rmtree(saved / "arrays")
    (saved / "arrays").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ModelFormatError, match="outside the model directory"):
        load_model(saved)


def test_model_json_symlinked_outside_is_refused(saved, tmp_path):
    # as for the arrays: the model would be another file's (it loaded, arrays and all)
    (saved / "model.json").rename(tmp_path / "outside.json")
    (saved / "model.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(ModelFormatError, match="model.json is a symbolic link to .*outside.json', outside the "
                                               "model directory") as info:
        load_model(saved)
    assert "\n" not in str(info.value)


def test_model_json_symlinked_inside_the_directory_loads(saved):
    # a link that resolves to a file of the directory itself is followed, as for the arrays
    (saved / "model.json").rename(saved / "saved.json")
    (saved / "model.json").symlink_to("saved.json")
    assert load_model(saved).n_components == 8


def _load_within(path, seconds=60):
    """load_model(path) in a thread: the exception it raises, or a failure where it blocks
    (an open of a FIFO waits for a writer)."""
    import threading

    raised = []

    def run():
        try:
            load_model(path)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"load_model({path}) blocked"
    assert raised, "load_model loaded it"
    return raised[0]


@pytest.mark.parametrize("make, said", [
    (os.mkfifo, "is not a regular file: it is a FIFO \\(named pipe\\)"),
    (os.mkdir, "is not a regular file: it is a directory"),
    (lambda p: os.symlink("gone.json", p), "model.json is a symbolic link to 'gone.json', which does not exist"),
    (lambda p: os.symlink("model.json", p), "model.json cannot be read: Too many levels of symbolic links"),
])
def test_model_json_that_is_not_a_regular_file_is_said_as_such(saved, make, said):
    (saved / "model.json").unlink()
    make(saved / "model.json")
    exc = _load_within(saved)
    assert isinstance(exc, ModelFormatError), exc
    assert re.search(said, str(exc)), str(exc)
    assert "holds no model.json" not in str(exc) and "\n" not in str(exc)


@pytest.mark.parametrize("make, said", [
    (os.mkfifo, "its model.json is a FIFO"),
    (lambda p: os.symlink("saved.json", p), "its model.json is a symbolic link"),
])
def test_overwrite_says_what_a_model_json_that_is_not_a_file_is(saved, X, make, said):
    (saved / "model.json").rename(saved / "saved.json")
    make(saved / "model.json")
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    with pytest.raises(OutputExistsError, match=said):
        save_model(rf, saved, overwrite=True)
    assert (saved / "saved.json").is_file()


# ---------------------------------------------------------------- label types

_rows = np.random.default_rng(3).standard_normal((60, 3))
_pick = (_rows[:, 0] > 0).astype(int) + (_rows[:, 1] > 0.8).astype(int)  # 3 classes


def _labels(values, dtype=None):
    return np.asarray(values, dtype=dtype)[_pick]


LABEL_CASES = {
    "int64": lambda: _labels([1, 2, 5]),
    "uint8": lambda: _labels([1, 2, 5], np.uint8),
    "float64": lambda: _labels([1.0, 2.0, 5.0]),
    "bool": lambda: (_pick > 0),
    "str": lambda: _labels(["a", "bb", "ccc"]),
    "object_int": lambda: _labels([1, 2, 5], object),
    "object_big_int": lambda: _labels([1, 2**70, -3], object),
    "object_float": lambda: _labels([0.5, 2.0, 5.0], object),
    "object_bool": lambda: (_pick > 0).astype(object),
    "object_str": lambda: _labels(["a", "bb", "ccc"], object),
    "object_numpy_int": lambda: _labels([np.int64(1), np.int64(2), np.int64(5)], object),
    "pandas_object_int": lambda: __import__("pandas").Series(_labels([1, 2, 5]).tolist(), dtype=object),
}


def _python(v):
    return v.item() if isinstance(v, np.generic) else v


@pytest.mark.parametrize("case", sorted(LABEL_CASES))
def test_labels_round_trip_with_their_type(tmp_path, case):
    y = LABEL_CASES[case]()
    clf = RandomFeatureRidgeClassifier(method="rff", n_components=16, random_state=0).fit(_rows, y)
    save_model(clf, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.classes_.dtype == clf.classes_.dtype
    assert back.classes_.tolist() == clf.classes_.tolist()
    if clf.classes_.dtype == object:
        assert [type(v) for v in back.classes_] == [type(_python(v)) for v in clf.classes_]
    pred, pred_back = clf.predict(_rows), back.predict(_rows)
    assert pred_back.dtype == pred.dtype and pred_back.tolist() == pred.tolist()
    assert back.score(_rows, y) == clf.score(_rows, y)


def _fitted_classifier():
    return RandomFeatureRidgeClassifier(method="rff", n_components=8, random_state=0).fit(_rows, _pick)


@pytest.mark.parametrize(
    "classes, match",
    [
        (np.array([1, 2.0, 5], dtype=object), "mixed"),
        (np.array([True, 2, 5], dtype=object), "mixed"),
        (np.array([Fraction(1), Fraction(2), Fraction(5)], dtype=object), "Fraction"),
        (np.array([1.0, np.nan, 5.0], dtype=object), "finite"),
        (np.array([1.0, np.inf, 5.0]), "finite"),
        (np.array([b"a", b"b", b"c"]), "bytes"),
        (np.array(["2020-01-01", "2021-01-01", "2022-01-01"], dtype="datetime64[D]"), "datetime64"),
    ],
    ids=["int_float", "bool_int", "fraction", "nan", "inf", "bytes", "datetime"],
)
def test_labels_that_cannot_round_trip_are_refused(tmp_path, classes, match):
    clf = _fitted_classifier()
    clf.classes_ = classes
    with pytest.raises(DkrrError, match=f"classes_.*{match}|{match}.*classes_"):
        save_model(clf, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_mixed_int_float_labels_from_fit_are_refused(tmp_path):
    y = _labels([1, 2.0, 5], object)
    clf = RandomFeatureRidgeClassifier(method="rff", n_components=8, random_state=0).fit(_rows, y)
    with pytest.raises(DkrrError, match="mixed"):
        save_model(clf, tmp_path / "m")


def test_store_label_names_set_by_the_cli_round_trip(tmp_path):
    clf = _fitted_classifier()
    clf.store_classes_ = np.asarray(["g", "h", "k"])
    back = load_model(save_model(clf, tmp_path / "m"))
    assert back.store_classes_.tolist() == ["g", "h", "k"] and back.store_classes_.dtype == clf.store_classes_.dtype


def test_unknown_fitted_attribute_is_refused_at_save(tmp_path, X):
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    rf.surprise_ = 1
    with pytest.raises(ModelFormatError, match="surprise_"):
        save_model(rf, tmp_path / "m")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomFeatureRidge(method="sorf", n_components=8, cv=3, alphas=[0.1, 1.0], random_state=0).fit(_rows, _rows[:, 0]),
        lambda: RandomFeatureRidge(method="rff", n_components=8, fit_intercept=False, random_state=0).fit(_rows, _rows[:, :2]),
        lambda: RandomFeatureRidge(method="rff", n_components=8, random_state=0).fit(_rows, _rows[:, :2]),
        lambda: RandomFeatureRidge(method="nystroem", n_components=8, random_state=0).fit(_rows, _rows[:, 0]),
        lambda: RandomFeatureRidge(method="rff", n_components=8, sampling="ridge_leverage", random_state=0).fit(_rows, _rows[:, 0]),
        lambda: RandomFeatureRidgeClassifier(method="fastfood", kernel="arccos1", n_components=8, random_state=0).fit(_rows, _pick > 0),
        lambda: RandomFeatureRidgeClassifier(method="orf", n_components=8, fit_intercept=False, cv=2, random_state=0).fit(_rows, _pick),
    ],
    ids=["cv", "multi_no_intercept", "multi", "nystroem", "sampled", "binary", "multiclass_cv"],
)
def test_every_kind_of_fitted_model_round_trips(tmp_path, make):
    est = make()
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert type(back) is type(est) and back.get_params() == est.get_params()
    np.testing.assert_array_equal(back.predict(_rows), est.predict(_rows))


# ---------------------------------------------------------------- malformed model files


@pytest.fixture
def clf_dir(tmp_path):
    clf = RandomFeatureRidgeClassifier(method="rff", n_components=8, random_state=0)
    clf.fit(_rows, _labels([1, 2, 5], object))
    save_model(clf, tmp_path / "clf")
    return tmp_path / "clf"


def _est(doc):
    return doc["estimator"]["__estimator__"]


def _fit(doc):
    return _est(doc)["fitted"]


def _rewrite(d, ref, arr):
    """Replace the array file behind `ref` by `arr`, with a matching checksum, shape, dtype."""
    f = d / ref["__ndarray__"]
    with open(f, "wb") as fh:
        np.lib.format.write_array(fh, arr, allow_pickle=False)
    ref.update(sha256=hashlib.sha256(f.read_bytes()).hexdigest(), shape=list(arr.shape), dtype=arr.dtype.str)


def _set(key, value):
    def corrupt(d, doc):
        _fit(doc)[key] = value
    return corrupt


def _nested(depth):
    v = [1.0]
    for _ in range(depth):
        v = [v]
    return v


def _text(text):
    def corrupt(d, doc):
        (d / "model.json").write_bytes(text if isinstance(text, bytes) else text.encode())
        return "written"
    return corrupt


def _duplicate_alpha(d, doc):
    """model.json with the fitted ``alpha_`` given twice, the first another value."""
    text = json.dumps(doc)
    assert text.count('"alpha_": ') == 1
    (d / "model.json").write_text(text.replace('"alpha_": ', '"alpha_": 1000.0, "alpha_": '))
    return "written"


CORRUPTIONS = {
    "invalid_json": (_text("{ not json"), r"model\.json.*not valid JSON"),
    "non_utf8": (_text(b'{"format": "\xff\xfe"}'), r"model\.json.*UTF-8"),
    "list_not_object": (_text("[1, 2, 3]"), r"model\.json.*JSON object"),
    # json keeps the last of two equal keys, other readers the first: two models in one file
    "duplicate_key": (_duplicate_alpha, r"model\.json.*not valid JSON.*'alpha_' is given twice"),
    "deep_json": (_text("[" * 100_000 + "]" * 100_000), r"model\.json.*nest"),
    "nan_literal": (lambda d, doc: _fit(doc).__setitem__("alpha_", float("nan")), r"alpha_.*finite"),
    "missing_estimator": (lambda d, doc: doc.pop("estimator"), r"estimator"),
    "unknown_top_key": (lambda d, doc: doc.__setitem__("evil", 1), r"evil"),
    "future_version": (lambda d, doc: doc.__setitem__("format_version", 99), r"format version 99.*upgrade"),
    "version_str": (lambda d, doc: doc.__setitem__("format_version", "1"), r"format_version"),
    "unknown_class": (lambda d, doc: _est(doc).__setitem__("class", "os.system"), r"class.*os\.system"),
    "dunder_attr": (_set("__class__", "x"), r"__class__"),
    "method_attr": (_set("predict", 1), r"predict"),
    "unknown_param": (lambda d, doc: _est(doc)["params"].__setitem__("evil", 1), r"evil"),
    "str_for_int": (_set("n_features_in_", "3"), r"n_features_in_"),
    "bool_for_int": (_set("n_features_in_", True), r"n_features_in_"),
    "missing_coef": (lambda d, doc: _fit(doc).pop("coef_"), r"coef_"),
    "ref_not_str": (lambda d, doc: _fit(doc)["coef_"].__setitem__("__ndarray__", 5), r"coef_"),
    "shape_mismatch": (lambda d, doc: _fit(doc)["coef_"].__setitem__("shape", [3, 7]), r"coef_"),
    "shape_negative": (lambda d, doc: _fit(doc)["coef_"].__setitem__("shape", [-3, 16]), r"coef_.*shape"),
    "dtype_object": (lambda d, doc: _fit(doc)["coef_"].__setitem__("dtype", "|O"), r"coef_.*dtype"),
    "dtype_big_endian": (lambda d, doc: _rewrite(d, _fit(doc)["coef_"], np.zeros((3, 16), ">f8")), r"coef_.*dtype"),
    "dtype_structured": (lambda d, doc: _rewrite(d, _fit(doc)["coef_"], np.zeros(3, "f8,f8")), r"coef_.*dtype"),
    "coef_wrong_width": (lambda d, doc: _rewrite(d, _fit(doc)["coef_"], np.zeros((3, 5))), r"coef_"),
    "coef_nan": (lambda d, doc: _rewrite(d, _fit(doc)["coef_"], np.full((3, 16), np.nan)), r"coef_.*finite"),
    "intercept_length": (lambda d, doc: _rewrite(d, _fit(doc)["intercept_"], np.zeros(2)), r"intercept_"),
    "label_type": (lambda d, doc: _fit(doc)["classes_"].__setitem__("type", "complex"), r"classes_"),
    "label_values": (lambda d, doc: _fit(doc)["classes_"].__setitem__("__labels__", ["1", "2", "5"]), r"classes_"),
    "label_count": (lambda d, doc: _fit(doc)["classes_"].__setitem__("__labels__", [1, 2]), r"classes_"),
    "map_type": (lambda d, doc: _fit(doc)["feature_map_"]["__feature_map__"].__setitem__("map_type", "evil"), r"feature_map_"),
    "map_weights_shape": (
        lambda d, doc: _rewrite(d, _fit(doc)["feature_map_"]["__feature_map__"]["projection"]["weights"], np.zeros((8, 5))),
        r"feature_map_",
    ),
    "nested_param": (lambda d, doc: _est(doc)["params"].__setitem__("alphas", _nested(60)), r"alphas"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_malformed_model_file_is_a_model_format_error(clf_dir, name):
    corrupt, field = CORRUPTIONS[name]
    doc = json.loads((clf_dir / "model.json").read_text())
    if corrupt(clf_dir, doc) != "written":
        (clf_dir / "model.json").write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match=field):
        load_model(clf_dir)


def test_oversized_array_file_is_refused_before_it_is_read(clf_dir):
    doc = json.loads((clf_dir / "model.json").read_text())
    coef = clf_dir / _fit(doc)["coef_"]["__ndarray__"]
    with open(coef, "r+b") as fh:  # sparse: costs no disk
        fh.truncate(3 * 2**30)
    tracemalloc.start()
    try:
        with pytest.raises(ModelFormatError, match=r"coef_.*bytes"):
            load_model(clf_dir)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20  # the 3 GiB file was never read into memory


# ---------------------------------------------------------------- overwrite


def _tree(d):
    return sorted((str(p.relative_to(d)), p.read_bytes() if p.is_file() else None) for p in d.rglob("*"))


def test_overwrite_refuses_a_fake_model_json(tmp_path, X):
    d = tmp_path / "data"
    d.mkdir()
    (d / "model.json").write_text("{}")
    (d / "precious.txt").write_text("keep me")
    before = _tree(d)
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    with pytest.raises(OutputExistsError, match="not a dkrr model"):
        save_model(rf, d, overwrite=True)
    assert _tree(d) == before


@pytest.mark.parametrize("extra, named", [("notes.txt", "notes.txt"), ("arrays/notes.npy", "arrays/notes.npy"), ("sub/file.txt", "sub")])
def test_overwrite_refuses_a_model_directory_holding_other_files(tmp_path, X, extra, named):
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    d = save_model(rf, tmp_path / "m")
    (d / extra).parent.mkdir(exist_ok=True)
    (d / extra).write_text("keep me")
    before = _tree(d)
    with pytest.raises(OutputExistsError, match=named):
        save_model(rf, d, overwrite=True)
    assert _tree(d) == before


def test_overwrite_refuses_a_symlink_to_a_model(tmp_path, X):
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    real = save_model(rf, tmp_path / "real")
    os.symlink(real, tmp_path / "link")
    with pytest.raises(OutputExistsError, match="symbolic link"):
        save_model(rf, tmp_path / "link", overwrite=True)
    assert (tmp_path / "link").is_symlink()


def _as_format_1(d, strarray):
    """Rewrite a saved classifier as format 1 wrote it: labels as text in __strarray__."""
    doc = json.loads((d / "model.json").read_text())
    doc["format_version"] = 1
    _fit(doc)["classes_"] = strarray
    (d / "model.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("dtype", ["|O", "<U3"])
def test_format_1_text_labels_still_load(tmp_path, dtype):
    y = _labels(["a", "bb", "ccc"], object if dtype == "|O" else None)
    clf = RandomFeatureRidgeClassifier(method="rff", n_components=8, random_state=0).fit(_rows, y)
    d = save_model(clf, tmp_path / "m")
    _as_format_1(d, {"__strarray__": ["a", "bb", "ccc"], "dtype": dtype})
    back = load_model(d)
    assert back.classes_.dtype == clf.classes_.dtype
    assert back.predict(_rows).tolist() == clf.predict(_rows).tolist()


def test_format_1_labels_whose_type_was_lost_are_refused(clf_dir):
    _as_format_1(clf_dir, {"__strarray__": ["1", "2", "5"], "dtype": "|O"})
    with pytest.raises(ModelFormatError, match="classes_.*format version 1.*save the model again"):
        load_model(clf_dir)
