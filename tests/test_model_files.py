"""Saved models: plain data (JSON + .npy), identical predictions, precise errors."""

import json

import numpy as np
import pytest

from dkrr import RandomFeatures
from dkrr.errors import ModelFormatError, OutputExistsError
from dkrr.features import PROJECTIONS
from dkrr.io._model import load_model, save_model


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
    assert doc["format"] == "dkrr-model" and doc["format_version"] == 1
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
    with pytest.raises(ModelFormatError, match="no model.json"):
        load_model(tmp_path / "d")


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
    f = sorted((saved / "arrays").iterdir())[0]
    data = bytearray(f.read_bytes())
    data[-1] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(ModelFormatError, match="corrupted: checksum"):
        load_model(saved)


def test_missing_array_file(saved):
    sorted((saved / "arrays").iterdir())[0].unlink()
    with pytest.raises(ModelFormatError, match="missing"):
        load_model(saved)


def test_unknown_class_is_not_instantiated(saved):
    doc = json.loads((saved / "model.json").read_text())
    doc["estimator"]["__estimator__"]["class"] = "os.system"
    (saved / "model.json").write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match="unknown estimator class"):
        load_model(saved)


def test_array_reference_outside_directory_refused(saved, tmp_path):
    doc = json.loads((saved / "model.json").read_text())
    text = json.dumps(doc).replace('"arrays/', '"../../')
    (saved / "model.json").write_text(text)
    with pytest.raises(ModelFormatError, match="outside the model directory|missing"):
        load_model(saved)
