"""One registry of methods and map types, one place for parameter checks, model format 3."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dkrr import RandomFeatureRidge, RandomFeatures
from dkrr._params import check_choice, check_int, check_options
from dkrr.errors import InvalidParameterError, ModelFormatError
from dkrr.features import MAP_TYPES, METHODS, PROJECTIONS, SKETCH_METHODS, FeatureMap, Projection
from dkrr.io._model import FORMAT_VERSION, load_model, save_model

ROOT = Path(__file__).resolve().parents[1]
X = np.random.default_rng(0).standard_normal((30, 5))
y = np.sin(X[:, 0])


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_registry_lists_every_method_and_map_type():
    __import__("dkrr.sampling")  # every module that defines a map type is loaded

    named = {c.method: c for c in _subclasses(Projection) if c.method}
    assert named == PROJECTIONS
    maps = {c.map_type: c for c in _subclasses(FeatureMap) if c.map_type}
    assert maps == MAP_TYPES
    assert SKETCH_METHODS == ("tensorsketch", "tensor_srht")
    assert METHODS == (*PROJECTIONS, *SKETCH_METHODS, "nystroem")


def test_map_types_do_not_depend_on_which_modules_were_imported():
    # the sampled map type is known without importing the sampling layer: a model fitted
    # with leverage sampling loads and predicts with dkrr.sampling made unimportable
    code = (
        "import sys; sys.modules['dkrr.sampling'] = None\n"
        "import numpy as np\n"
        "from dkrr.io._model import load_model\n"
        f"m = load_model({str(ROOT / 'tests/data/models_v2/ridge_sampled')!r})\n"
        "print(type(m.feature_map_).__name__, m.predict(np.zeros((1, 5))).shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["SampledFeatureMap", "(1,)"]


@pytest.mark.parametrize("method", sorted(PROJECTIONS))
def test_unknown_option_is_refused_the_same_way_by_every_projection(method):
    cls = PROJECTIONS[method]
    with pytest.raises(InvalidParameterError, match=rf"^unknown options for method '{method}': \['bogus'\]; "):
        cls.generate(4, 4, 1.0, np.random.default_rng(0), bogus=1)


@pytest.mark.parametrize("method", ["rff", "sorf", "nystroem"])
@pytest.mark.parametrize("make", [RandomFeatures, RandomFeatureRidge])
def test_a_bad_parameter_gets_one_message_whatever_the_method_or_estimator(make, method):
    est = make(kernel="angular", method=method, n_components=4, gamma=0.5)
    with pytest.raises(InvalidParameterError) as err:
        est.fit(X, y)
    assert str(err.value) == (
        "gamma applies only to the kernels ['gaussian', 'matern', 'laplacian', 'polynomial']; "
        "kernel='angular' has no width, so leave gamma at its default (got 0.5)"
    )
    with pytest.raises(InvalidParameterError, match=r"^n_components must be a positive integer, got 0$"):
        make(method=method, n_components=0).fit(X, y)


def test_unknown_method_message_lists_every_method():
    with pytest.raises(InvalidParameterError) as err:
        RandomFeatures(method="nope").fit(X)
    assert str(err.value) == f"method must be one of {list(METHODS)}, got 'nope'"
    assert "nystroem" in str(err.value)


def test_parameter_checks():
    assert check_int(3, "k") == 3 and check_int(None, "k", allow_none=True) is None
    for bad in (0, True, 2.0, "3", None):
        with pytest.raises(InvalidParameterError, match="k must be a positive integer"):
            check_int(bad, "k")
    with pytest.raises(InvalidParameterError, match=r"^cv must be None or an integer >= 2, got 1$"):
        check_int(1, "cv", minimum=2, allow_none=True)
    with pytest.raises(InvalidParameterError, match=r"r must be an integer in \[1, 8\] \(d'\), got 9"):
        check_int(9, "r", maximum=8, note=" (d')")
    assert check_choice("a", "x", ("a", "b")) == "a"
    for bad in (["a"], np.array(["a", "b"]), True, None):
        with pytest.raises(InvalidParameterError, match=r"x must be one of \('a', 'b'\)"):
            check_choice(bad, "x", ("a", "b"))
    assert check_options("m", {"a": 1, "b": None}, {"b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(InvalidParameterError, match=r"option c=3 does not apply to method='m'; it is used by method\(s\) \['z'\]"):
        check_options("m", {"a": 1}, {"c": 3}, takers=lambda name: ["z"])


def test_ridge_model_files_hold_the_map_itself(tmp_path):
    est = RandomFeatureRidge(method="sorf", n_components=8, random_state=0).fit(X, y)
    save_model(est, tmp_path / "m")
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    assert doc["format_version"] == FORMAT_VERSION >= 4
    fitted = doc["estimator"]["__estimator__"]["fitted"]
    assert set(fitted["feature_map_"]) == {"__feature_map__"}
    np.testing.assert_array_equal(load_model(tmp_path / "m").predict(X), est.predict(X))


def test_nested_randomfeatures_is_read_only_from_formats_1_and_2(tmp_path):
    # a format-2 file written by the old code, relabelled as format 3, is refused: format
    # 3 holds the map itself
    old = ROOT / "tests/data/models_v2/ridge_sorf_cv"
    doc = json.loads((old / "model.json").read_text())
    assert "__estimator__" in doc["estimator"]["__estimator__"]["fitted"]["feature_map_"]
    import shutil

    shutil.copytree(old, tmp_path / "m")
    doc["format_version"] = 3
    (tmp_path / "m" / "model.json").write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match=r"feature_map_.*__feature_map__"):
        load_model(tmp_path / "m")


def test_feature_and_estimator_modules_stay_small():
    for folder in ("dkrr/features", "dkrr/estimators"):
        for f in sorted((ROOT / folder).glob("*.py")):
            n = len(f.read_text().splitlines())
            assert n <= 500, f"{f.relative_to(ROOT)} has {n} lines"
