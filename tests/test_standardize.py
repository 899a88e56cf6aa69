"""standardize=True: column moments from one streamed pass, applied per block by the map."""

import dask.array as da
import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures, load_model, save_model
from dkrr.errors import InvalidParameterError, NonFiniteInputError
from dkrr.features import feature_map_from_state
from dkrr.linalg._moments import column_moments


def _data(n=600, d=5, seed=0):
    """Columns on very different scales and far from 0, one of them constant."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * [1.0, 1e3, 1e-3, 5.0, 1.0] + [0.0, 1e6, -3.0, 40.0, 0.0]
    X[:, 4] = 7.25  # constant column
    y = np.sin(X[:, 0]) + 1e-3 * (X[:, 1] - 1e6) + rng.standard_normal(n) * 0.1
    return X, y


@pytest.mark.parametrize("chunk", [37, 128, 600])
def test_column_moments_equal_numpy_for_any_chunking(chunk):
    X, _ = _data()
    m = column_moments(da.from_array(X, chunks=(chunk, X.shape[1])))
    assert m.n == X.shape[0]
    np.testing.assert_allclose(m.mean, X.mean(axis=0), rtol=1e-14, atol=0)
    np.testing.assert_allclose(m.var, X.var(axis=0), rtol=1e-10, atol=1e-20)
    sk = StandardScaler().fit(X)
    np.testing.assert_allclose(m.scale(), sk.scale_, rtol=1e-10)
    assert m.scale()[4] == 1.0 and sk.scale_[4] == 1.0  # the constant column


@pytest.mark.parametrize("chunk", [37, 600])
@pytest.mark.parametrize("unit", [2.0**-1000, 1e-300, 1.0, 1e300])
def test_weighted_column_moments_are_standard_scalers_with_sample_weight_in_any_unit(chunk, unit):
    """The weighted means and standard deviations of ``StandardScaler().fit(X, sample_weight=w)``
    (its unit: weights of 1e-300 or 1e300 give those of w, no sum under- or overflows);
    rows of weight 0 count nowhere, not in the range of a column either (the far values of
    weight 0 in the constant column leave it constant)."""
    from dkrr.linalg._weighted import check_sample_weight

    X, _ = _data()
    w = np.random.default_rng(2).uniform(0.0, 3.0, len(X))
    w[::7] = 0.0
    X[::7, 4] = -1e9  # weight 0: the column stays the constant 7.25
    Xd = da.from_array(X, chunks=(chunk, X.shape[1]))
    m = column_moments(Xd, sample_weight=check_sample_weight(w * unit, Xd))
    sk = StandardScaler().fit(X[w > 0], sample_weight=w[w > 0])
    assert m.n == np.count_nonzero(w)
    np.testing.assert_allclose(m.mean, sk.mean_, rtol=1e-13, atol=0)
    np.testing.assert_allclose(m.scale(), sk.scale_, rtol=1e-10)
    assert m.mean[4] == 7.25 and m.scale()[4] == 1.0
    np.testing.assert_allclose(m.var, np.average((X - sk.mean_) ** 2, axis=0, weights=w), rtol=1e-10, atol=1e-20)
    # gamma="scale"'s variance over every entry, each entry weighted by its row's weight
    mu = (w @ X).sum() / (w.sum() * X.shape[1])
    assert m.total_variance() == pytest.approx((w @ (X - mu) ** 2).sum() / (w.sum() * X.shape[1]), rel=1e-10)


def test_weights_that_are_all_zero_are_named_by_the_moments_pass():
    from dkrr.errors import InputValidationError

    X, y = _data()
    Xd = da.from_array(X, chunks=(100, 5))
    with pytest.raises(InputValidationError, match="sample_weight sums to 0"):
        column_moments(Xd, sample_weight=da.zeros(len(X), chunks=100))


def test_standardized_features_equal_standard_scaler_then_the_same_map():
    X, _ = _data()
    rf = RandomFeatures(method="rff", n_components=32, standardize=True, random_state=3).fit(X)
    sk = StandardScaler().fit(X)
    np.testing.assert_allclose(rf.mean_, sk.mean_, rtol=1e-14)
    np.testing.assert_allclose(rf.scale_, sk.scale_, rtol=1e-10)
    ref = RandomFeatures(method="rff", n_components=32, random_state=3).fit(sk.transform(X))
    np.testing.assert_allclose(rf.transform(X), ref.transform(sk.transform(X)), rtol=1e-9, atol=1e-12)
    # dask input, other chunks: the same moments (to rounding) and lazy features
    rd = RandomFeatures(method="rff", n_components=32, standardize=True, random_state=3).fit(
        da.from_array(X, chunks=(101, 5)))
    np.testing.assert_allclose(rd.mean_, rf.mean_, rtol=1e-13)
    Zd = rd.transform(da.from_array(X, chunks=(77, 5)))
    np.testing.assert_allclose(Zd.compute(), rf.transform(X), rtol=1e-9, atol=1e-10)


def test_standardize_off_is_the_old_map_and_float32_keeps_its_dtype():
    X, _ = _data()
    a = RandomFeatures(method="sorf", n_components=16, random_state=0).fit(X)
    assert a.mean_ is None and a.scale_ is None and type(a.feature_map_).__name__ == "RandomFeatureMap"
    b = RandomFeatures(method="sorf", n_components=16, standardize=True, random_state=0).fit(X.astype(np.float32))
    assert b.transform(X.astype(np.float32)).dtype == np.float32


def test_ridge_with_standardize_equals_ridge_on_scaled_columns():
    X, y = _data()
    sk = StandardScaler().fit(X)
    kw = dict(method="orf", n_components=64, gamma=0.2, alpha=0.5, random_state=1)
    est = RandomFeatureRidge(standardize=True, **kw).fit(X, y)
    ref = RandomFeatureRidge(**kw).fit(sk.transform(X), y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(est.predict(X), ref.predict(sk.transform(X)), rtol=1e-8, atol=1e-8)
    assert est.score(X, y) > 0.9
    # the same fit from dask input with other chunks
    dd = RandomFeatureRidge(standardize=True, chunk_rows=97, **kw).fit(da.from_array(X, chunks=(150, 5)), y)
    np.testing.assert_allclose(dd.coef_, est.coef_, rtol=1e-8, atol=1e-10)


def test_nystroem_landmarks_are_standardized_rows():
    X, y = _data()
    est = RandomFeatureRidge(method="nystroem", n_components=40, gamma=0.3, standardize=True,
                             random_state=2).fit(X, y)
    lm = est.feature_map_.inner.landmarks
    assert np.abs(lm).max() < 10  # raw rows hold 1e6
    sk = StandardScaler().fit(X)
    ref = RandomFeatures(method="nystroem", n_components=40, gamma=0.3, random_state=2).fit(sk.transform(X))
    np.testing.assert_allclose(lm, ref.feature_map_.landmarks, rtol=1e-8, atol=1e-10)


def test_nan_is_refused_by_the_moments_pass_naming_the_block():
    X, y = _data()
    X[250, 1] = np.nan
    with pytest.raises(NonFiniteInputError, match="row 250"):
        RandomFeatureRidge(standardize=True, chunk_rows=100, random_state=0).fit(X, y)


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_standardize_must_be_a_bool(bad):
    X, y = _data(n=50)
    with pytest.raises(InvalidParameterError, match="standardize"):
        RandomFeatureRidge(standardize=bad).fit(X, y)


@pytest.mark.parametrize("make", [
    lambda: RandomFeatureRidge(method="sorf", n_components=32, standardize=True, gamma="median", cv=3,
                               random_state=4),
    lambda: RandomFeatureRidgeClassifier(method="rff", n_components=32, standardize=True, gamma="scale",
                                         alphas=[0.1, 1.0, 10.0], cv=3, random_state=4),
    lambda: RandomFeatures(method="nystroem", n_components=20, standardize=True, gamma="median", random_state=4),
])
def test_model_round_trip_keeps_mean_scale_gamma_and_predictions_bitwise(tmp_path, make):
    X, y = _data()
    est = make()
    est.fit(X, np.where(y > np.median(y), "hi", "lo") if isinstance(est, RandomFeatureRidgeClassifier) else y)
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    for name in ("mean_", "scale_"):
        np.testing.assert_array_equal(getattr(back, name), getattr(est, name))
    assert back.gamma_ == est.gamma_ and isinstance(back.gamma_, float)
    assert back.standardize is True and back.gamma == est.gamma
    out = "transform" if isinstance(est, RandomFeatures) else "predict"
    np.testing.assert_array_equal(getattr(back, out)(X), getattr(est, out)(X))
    Xd = da.from_array(X, chunks=(128, 5))
    np.testing.assert_array_equal(getattr(back, out)(Xd).compute(), getattr(est, out)(X))


def test_standardized_map_state_round_trips_and_rejects_bad_scale():
    X, _ = _data()
    fm = RandomFeatures(method="rff", n_components=8, standardize=True, random_state=0).fit(X).feature_map_
    back = feature_map_from_state(fm.get_state())
    np.testing.assert_array_equal(back.transform(X), fm.transform(X))
    state = fm.get_state()
    state["scale"] = np.zeros_like(state["scale"])
    with pytest.raises(InvalidParameterError, match="positive scale"):
        feature_map_from_state(state)


def test_pcg_solver_applies_the_standardization_at_predict():
    X, y = _data()
    kw = dict(method="rff", n_components=32, gamma=0.2, alpha=1.0, random_state=1)
    est = RandomFeatureRidge(solver="pcg", standardize=True, **kw).fit(X, y)
    ref = RandomFeatureRidge(standardize=True, **kw).fit(X, y)
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=1e-4, atol=1e-4)
