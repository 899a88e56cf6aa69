"""The ridge penalty follows scikit-learn's ``Ridge``: ``alpha >= 0`` (issue 11, item 4).

A negative alpha makes ``Z^T Z + alpha I`` indefinite or nearly singular and gives a
model worse than a constant; it is refused before any pass over the data, in Python (single
alpha and the cross-validation grid) and on the command line.
"""

from __future__ import annotations

import numpy as np
import pytest

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier
from dkrr.errors import InvalidParameterError
from dkrr.linalg import check_alphas
from dkrr.linalg._solve import check_alpha


def _data(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("alpha", [-1.0, -1e-12, -5])
@pytest.mark.parametrize("cls", [RandomFeatureRidge, RandomFeatureRidgeClassifier])
def test_negative_alpha_is_refused(cls, alpha):
    X, y = _data()
    if cls is RandomFeatureRidgeClassifier:
        y = y > 0
    est = cls(method="rff", n_components=16, alpha=alpha, random_state=0)
    with pytest.raises(InvalidParameterError, match=r"alpha=-.*>= 0") as excinfo:
        est.fit(X, y)
    assert repr(alpha) in str(excinfo.value)
    assert not hasattr(est, "coef_")


@pytest.mark.parametrize("cls", [RandomFeatureRidge, RandomFeatureRidgeClassifier])
def test_negative_alpha_in_the_cv_grid_is_refused(cls):
    X, y = _data()
    if cls is RandomFeatureRidgeClassifier:
        y = y > 0
    est = cls(method="rff", n_components=16, alphas=[0.1, -2.0, 1.0], cv=3, random_state=0)
    with pytest.raises(InvalidParameterError, match=r"alphas.*-2\.0.*>= 0"):
        est.fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"alpha=-1.*>= 0"):
        cls(method="rff", n_components=16, alpha=-1.0, cv=3, random_state=0).fit(X, y)


def test_zero_alpha_is_allowed_as_in_scikit_learn():
    # n >> p: Z^T Z is positive definite, so alpha = 0 is ordinary least squares.
    X, y = _data(n=400)
    est = RandomFeatureRidge(method="rff", n_components=8, gamma=0.5, alpha=0.0, random_state=0).fit(X, y)
    Z = est.feature_map_.transform(X)
    A = np.column_stack([Z, np.ones(len(X))])
    ref = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(est.coef_, ref[:-1], rtol=1e-6, atol=1e-8)
    cv = RandomFeatureRidge(method="rff", n_components=8, gamma=0.5, alphas=[0.0, 1.0], cv=3,
                            random_state=0).fit(X, y)
    assert cv.alpha_ in (0.0, 1.0)


def test_check_alpha_and_check_alphas():
    assert check_alpha(0) == 0.0 and check_alpha(2.5) == 2.5
    with pytest.raises(InvalidParameterError, match=r"alpha=-0\.5.*>= 0"):
        check_alpha(-0.5)
    np.testing.assert_array_equal(check_alphas([0, 1]), [0.0, 1.0])
    with pytest.raises(InvalidParameterError, match=r">= 0"):
        check_alphas([1.0, -1.0])


def _store(tmp_path):
    from dkrr.cli._main import main

    X, y = _data(n=200)
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt="%.6f")
    store = tmp_path / "store"
    assert main(["ingest", str(csv), "--out", str(store), "--no-header", "-q"]) == 0
    return store


def test_cli_refuses_negative_alphas_before_fitting(tmp_path, capsys):
    from dkrr.cli._main import main

    store = _store(tmp_path)
    capsys.readouterr()
    model = tmp_path / "model"
    with pytest.raises(SystemExit) as excinfo:
        main(["fit", str(store), "--out", str(model), "--cv", "3", "--alphas", "1,-1", "-q"])
    assert excinfo.value.code == 2
    err = capsys.readouterr().err
    assert "--alphas" in err and "-1" in err and ">= 0" in err
    assert not model.exists()
    # an empty item (a typo) was skipped: "1,,2" fitted the grid [1, 2] without a word
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,c\n1,2,3\n4,5,6\n")
    for flag, value in (("--alphas", "1,,2"), ("--gammas", "0.1,,1"), ("--alphas", "1,2,"), ("--features", "0,,1")):
        with pytest.raises(SystemExit) as excinfo:
            if flag == "--features":
                main(["ingest", str(csv), "--out", str(tmp_path / "d.zarr"), flag, value, "-q"])
            else:
                main(["fit", str(store), "--out", str(model), "--cv", "3", flag, value, "-q"])
        assert excinfo.value.code == 2, (flag, value)
        err = capsys.readouterr().err
        assert flag in err and repr(value) in err, err
    assert not model.exists()


def test_cli_refuses_negative_alpha_without_a_model(tmp_path, capsys):
    from dkrr.cli._main import main

    store = _store(tmp_path)
    capsys.readouterr()
    model = tmp_path / "model"
    code = main(["fit", str(store), "--out", str(model), "--method", "rff", "--n-components", "8",
                 "--alpha", "-1", "--workers", "1", "--memory-limit", "1GB"])
    assert code == 1
    err = capsys.readouterr().err
    assert "alpha=-1.0" in err and ">= 0" in err and "Traceback" not in err
    assert "LocalCluster" not in err  # refused before a cluster was started
    assert not model.exists()
