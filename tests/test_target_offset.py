"""A target far from zero gives the same model as the centred target (the statistics used
to lose every digit to cancellation: negative fold MSEs, a model that cannot be saved)."""

import dask.array as da
import numpy as np
import pytest

from dkrr import RandomFeatureRidge, load_model, save_model


def _data(n=1500):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 3))
    return X, np.sin(X[:, 0]) + 0.01 * rng.normal(size=n)


@pytest.mark.parametrize("solver", ["cholesky", "pcg"])
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_offset_target_gives_the_centred_model(tmp_path, solver, kind):
    X, y = _data()
    offset = 1e8
    kw = dict(n_components=128, gamma=0.5, cv=3, alphas=[1e-4, 1e-2, 1], random_state=0,
              solver=solver)
    as_input = (lambda a: da.from_array(a, chunks=500)) if kind == "dask" else (lambda a: a)
    ref = RandomFeatureRidge(**kw).fit(as_input(X), as_input(y))
    far = RandomFeatureRidge(**kw).fit(as_input(X), as_input(y + offset))
    fold, fold_far = ref.cv_results_["fold_mse"], far.cv_results_["fold_mse"]
    assert np.all(fold_far >= 0)
    # equal up to the rounding of y + 1e8 itself (eps64 * 1e8 ~ 1.5e-8 per value)
    np.testing.assert_allclose(fold_far, fold, rtol=1e-3, atol=1e-9)
    assert far.alpha_ == ref.alpha_
    np.testing.assert_allclose(far.coef_, ref.coef_, rtol=1e-4, atol=1e-6)
    assert abs(far.intercept_ - offset - ref.intercept_) < 1e-6
    pred = np.asarray(far.predict(X[:50]))
    np.testing.assert_allclose(pred - offset, np.asarray(ref.predict(X[:50])), atol=1e-6)
    save_model(far, tmp_path / "m")  # a negative fold MSE made the saved model unloadable
    np.testing.assert_array_equal(np.asarray(load_model(tmp_path / "m").predict(X[:50])), pred)


def test_offset_is_not_applied_without_intercept():
    X, y = _data(600)
    a = RandomFeatureRidge(n_components=64, gamma=0.5, fit_intercept=False, random_state=0).fit(X, y + 5.0)
    b = RandomFeatureRidge(n_components=64, gamma=0.5, fit_intercept=False, random_state=0).fit(
        da.from_array(X, chunks=200), da.from_array(y + 5.0, chunks=200))
    assert a.intercept_ == 0.0 and b.intercept_ == 0.0
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10, atol=1e-12)


def test_multi_target_offsets_per_column():
    X, y = _data(900)
    Y = np.column_stack([y, -y])
    ref = RandomFeatureRidge(n_components=64, gamma=0.5, cv=3, random_state=0).fit(X, Y)
    far = RandomFeatureRidge(n_components=64, gamma=0.5, cv=3, random_state=0).fit(X, Y + [1e8, -3e7])
    np.testing.assert_allclose(far.intercept_ - [1e8, -3e7], ref.intercept_, atol=1e-6)
    np.testing.assert_allclose(far.cv_results_["mean_mse"], ref.cv_results_["mean_mse"], rtol=1e-3)


def test_cli_evaluate_r2_of_a_target_far_from_zero(tmp_path):
    """``dkrr evaluate`` printed r2 = -inf for y = 1e8 + sin x (sum y^2 - (sum y)^2 / n)."""
    import json
    import subprocess
    import sys

    from sklearn.metrics import r2_score

    from dkrr.io import open_dataset

    X, y = _data(1200)
    csv = tmp_path / "far.csv"
    np.savetxt(csv, np.column_stack([X, y + 1e8]), delimiter=",", fmt="%.17g")

    def run(*args):
        proc = subprocess.run([sys.executable, "-m", "dkrr.cli", *map(str, args), "-q"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    run("ingest", csv, "--out", tmp_path / "s", "--chunk-rows", 400, "--dtype", "float64")
    run("fit", tmp_path / "s", "--out", tmp_path / "m", "--n-components", 128, "--workers", 1)
    metrics = json.loads(run("evaluate", tmp_path / "m", tmp_path / "s", "--json", "--workers", 1))
    data = open_dataset(tmp_path / "s")
    pred = np.asarray(load_model(tmp_path / "m").predict(data.X.compute()))
    expected = r2_score(data.y.compute(), pred)
    assert 0.9 < expected < 1.0
    assert abs(metrics["r2"] - expected) < 1e-6, (metrics, expected)
