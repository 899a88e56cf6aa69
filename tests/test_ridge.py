"""RandomFeatureRidge: equal to scikit-learn's Ridge on the same features, for every input
kind, chunking and scheduler; one-pass cross-validation; clear errors."""

import dask.array as da
import numpy as np
import pytest
import zarr
from sklearn.base import clone
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score

from dkrr import RandomFeatures
from dkrr.errors import (
    FeatureMismatchError,
    InputValidationError,
    InvalidParameterError,
    NonFiniteInputError,
    SingularSystemError,
)
from dkrr.estimators import RandomFeatureRidge
from dkrr.linalg import fold_ids

N, D_IN = 600, 5


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D_IN))
    Y = np.column_stack([np.sin(2 * X[:, 0]) + X[:, 1] + 4.0, np.cos(X[:, 2]) * X[:, 3]])
    Y += 0.1 * rng.standard_normal(Y.shape)
    return X, Y


def make(**kw):
    params = dict(method="rff", n_components=24, gamma=0.3, alpha=0.5, random_state=3)
    params.update(kw)
    return RandomFeatureRidge(**params)


@pytest.mark.parametrize("method", ["rff", "orf", "sorf", "fastfood", "circulant"])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("ydim", [1, 2])
def test_equals_sklearn_ridge_on_the_features(data, method, fit_intercept, ydim):
    X, Y = data
    y = Y[:, 0] if ydim == 1 else Y
    est = make(method=method, fit_intercept=fit_intercept, chunk_rows=128).fit(X, y)
    Z = est.feature_map_.transform(X)
    ref = Ridge(alpha=0.5, fit_intercept=fit_intercept).fit(Z, y)
    assert est.coef_.shape == ref.coef_.shape and np.shape(est.intercept_) == np.shape(ref.intercept_)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(est.predict(X), ref.predict(Z), rtol=1e-8, atol=1e-10)
    assert est.alpha_ == 0.5 and est.n_features_in_ == D_IN and est.n_output_features_ == Z.shape[1]
    np.testing.assert_allclose(est.score(X, y), r2_score(y, ref.predict(Z)), rtol=1e-10)


def test_feature_map_is_the_one_randomfeatures_draws(data):
    X, Y = data
    est = make(method="sorf", random_state=12).fit(X, Y[:, 0])
    rf = RandomFeatures(method="sorf", n_components=24, gamma=0.3, random_state=12).fit(X)
    np.testing.assert_array_equal(est.feature_map_.transform(X), rf.transform(X))
    # one name per concept: the same attribute holds the same kind of map on both
    assert type(est.feature_map_) is type(rf.feature_map_)


CHUNKINGS = {"regular": 100, "irregular": (37, 250, 13, 200, 100), "single": N}


@pytest.fixture(scope="module")
def reference_cv_fit(data):
    X, Y = data
    return make(precision="float64", alphas=[0.01, 0.1, 1.0, 10.0], cv=4).fit(X, Y)


@pytest.mark.parametrize("chunks", list(CHUNKINGS), ids=list(CHUNKINGS))
@pytest.mark.parametrize("split_every", [None, 2])
def test_same_model_for_every_chunking_and_scheduler(data, reference_cv_fit, chunks, split_every, scheduler):
    X, Y = data
    ref = reference_cv_fit
    Xd = da.from_array(X, chunks=(CHUNKINGS[chunks], D_IN))
    est = make(precision="float64", alphas=[0.01, 0.1, 1.0, 10.0], cv=4, split_every=split_every).fit(Xd, da.from_array(Y, chunks=77))
    assert est.alpha_ == ref.alpha_
    np.testing.assert_allclose(est.cv_results_["fold_mse"], ref.cv_results_["fold_mse"], rtol=1e-10)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-10)
    pred = est.predict(Xd)
    assert isinstance(pred, da.Array) and pred.chunks == (Xd.chunks[0], (2,))
    np.testing.assert_allclose(pred.compute(), ref.predict(X), rtol=1e-10, atol=1e-12)


def test_cv_matches_brute_force_and_refits_the_best_alpha(data):
    X, Y = data
    y = Y[:, 0]
    alphas = [1e-3, 0.1, 3.0, 100.0]
    est = make(precision="float64", alphas=alphas, cv=3, chunk_rows=200).fit(X, y)
    Z = est.feature_map_.transform(X)
    folds = fold_ids(np.arange(N), 3, est.fold_seed_)
    brute = np.array([[np.mean((y[folds == k] - Ridge(alpha=a).fit(Z[folds != k], y[folds != k]).predict(Z[folds == k])) ** 2)
                       for a in alphas] for k in range(3)])
    res = est.cv_results_
    np.testing.assert_allclose(res["fold_mse"], brute, rtol=1e-8)
    sizes = np.bincount(folds)
    np.testing.assert_array_equal(res["fold_sizes"], sizes)
    mean = (brute * sizes[:, None]).sum(0) / N
    np.testing.assert_allclose(res["mean_mse"], mean, rtol=1e-8)
    np.testing.assert_allclose(res["std_mse"], brute.std(0), rtol=1e-8)
    assert est.alpha_ == alphas[int(np.argmin(mean))]
    assert est.best_score_ == pytest.approx(-mean.min(), rel=1e-8)
    ref = Ridge(alpha=est.alpha_).fit(Z, y)  # the refit uses all rows
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-10)


def test_cv_without_alphas_scores_the_default_grid_and_alphas_without_cv_is_an_error(data):
    X, Y = data
    est = make(alpha=2.0, cv=3).fit(X, Y[:, 0])  # alpha is not used: the default grid is (issue 13)
    grid = est.cv_results_["alphas"]
    assert grid.shape == (9,) and est.cv_results_["fold_mse"].shape == (3, 9) and est.alpha_ in grid
    np.testing.assert_allclose(grid[1:] / grid[:-1], 10.0, rtol=1e-12)
    with pytest.raises(InvalidParameterError, match="cv is None.*pass cv"):
        make(alphas=[1.0, 2.0]).fit(X, Y[:, 0])
    with pytest.raises(InvalidParameterError, match="cv must be None or an integer >= 2"):
        make(cv=1).fit(X, Y[:, 0])


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_float32_input_gives_the_float64_model(data, fit_intercept):
    X, Y = data
    X32 = X.astype(np.float32)
    e32 = make(alphas=[0.1, 1.0], cv=3, fit_intercept=fit_intercept).fit(X32, Y.astype(np.float32))
    e64 = make(alphas=[0.1, 1.0], cv=3, fit_intercept=fit_intercept).fit(X, Y)
    assert e32.alpha_ == e64.alpha_ and e32.coef_.dtype == np.float64
    scale = np.abs(e64.coef_).max()
    np.testing.assert_allclose(e32.coef_, e64.coef_, rtol=0, atol=5e-5 * scale)
    p32, p64 = e32.predict(X32), e64.predict(X)
    assert p32.dtype == np.float64
    np.testing.assert_allclose(p32, p64, rtol=0, atol=1e-5 * np.abs(p64).max())
    # and it is exactly the model of the float64 values of the float32 data
    e = make(alphas=[0.1, 1.0], cv=3, fit_intercept=fit_intercept).fit(X32.astype(np.float64), Y.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(e32.coef_, e.coef_, rtol=1e-12, atol=1e-14)


def test_tiny_max_block_bytes_gives_the_same_model(data):
    X, Y = data
    a = make(cv=3, alphas=[0.1, 1.0]).fit(X, Y)
    b = make(cv=3, alphas=[0.1, 1.0], max_block_bytes=48 * 8 * 10).fit(X, Y)  # 10 rows per sub-block
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-10, atol=1e-10 * np.abs(a.coef_).max())
    np.testing.assert_allclose(b.predict(X), a.predict(X), rtol=1e-10, atol=1e-12)


def test_zarr_input_fits_and_predicts_lazily(tmp_path, data):
    X, Y = data
    zX = zarr.create_array(str(tmp_path / "X.zarr"), shape=X.shape, chunks=(150, D_IN), dtype="f4")
    zX[:] = X
    zy = zarr.create_array(str(tmp_path / "y.zarr"), shape=(N,), chunks=(100,), dtype="f8")
    zy[:] = Y[:, 0]
    est = make().fit(zX, zy)
    ref = make().fit(X.astype(np.float32), Y[:, 0])
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    pred = est.predict(zX)
    assert isinstance(pred, da.Array) and pred.shape == (N,) and pred.chunks == ((150,) * 4,)
    np.testing.assert_allclose(pred.compute(), ref.predict(X.astype(np.float32)), rtol=1e-10, atol=1e-12)
    assert est.score(zX, zy) == pytest.approx(ref.score(X.astype(np.float32), Y[:, 0]), rel=1e-10)


def test_predict_in_memory_large_input_block_by_block(data):
    X, Y = data
    est = make(max_block_bytes=48 * 8 * 16).fit(X, Y[:, 0])
    Z = est.feature_map_.transform(X)
    np.testing.assert_allclose(est.predict(X), Z @ est.coef_ + est.intercept_, rtol=1e-10)


def test_sklearn_parameters_and_clone(data):
    X, Y = data
    est = make(alphas=[1.0, 2.0], cv=3, chunk_rows=100, n_hd_blocks=None)
    params = est.get_params()
    assert params["alphas"] == [1.0, 2.0] and params["max_block_bytes"] == 64 * 2**20
    c = clone(est).set_params(alpha=3.0, cv=None, alphas=None)
    assert c.alpha == 3.0 and not hasattr(c, "coef_")
    c.fit(X, Y[:, 0])
    assert c.alpha_ == 3.0 and not hasattr(c, "cv_results_")
    with pytest.raises(InvalidParameterError, match="option n_hd_blocks=2 does not apply to method='rff'"):
        make(n_hd_blocks=2).fit(X, Y)


# ------------------------------------------------------------------------- bad input

def test_length_mismatch(data):
    X, Y = data
    with pytest.raises(InputValidationError, match=r"X has 600 .*y has 599"):
        make().fit(X, Y[:-1])
    with pytest.raises(InputValidationError, match=r"X has 600 .*y has 599"):
        make().fit(da.from_array(X, chunks=100), da.from_array(Y[:-1, 0], chunks=100))


@pytest.mark.parametrize("where", ["X", "y"])
def test_non_finite_input_fails_before_a_model_exists(data, where):
    X, Y = data
    X, y = X.copy(), Y[:, 0].copy()
    (X if where == "X" else y)[[450, 451]] = [np.nan, np.inf] if where == "y" else np.nan
    n_bad = 2 if where == "y" else 2 * D_IN
    est = make(alphas=[0.1, 1.0], cv=3)
    with pytest.raises(NonFiniteInputError, match=rf"{where} contains {n_bad} non-finite value\(s\) \(NaN or inf\) in rows 400 to 499 \(row block 4\), in 2 row\(s\), first in row 450"):
        est.fit(da.from_array(X, chunks=(100, D_IN)), da.from_array(y, chunks=100))
    assert not hasattr(est, "coef_")
    with pytest.raises(NonFiniteInputError, match=f"{n_bad} non-finite"):
        make().fit(X, y)  # numpy input is checked the same way, block by block


def test_too_few_rows_for_the_folds(data):
    X, Y = data
    with pytest.raises(InputValidationError, match="too few rows for 5-fold"):
        make(cv=5).fit(X[:9], Y[:9, 0])
    with pytest.raises(InputValidationError, match="too few rows for 4-fold"):
        make(cv=4).fit(X[:8], Y[:8, 0])  # 8 = 2 * cv rows, but the hash leaves a fold empty


def test_predict_with_other_number_of_columns(data):
    X, Y = data
    est = make().fit(X, Y[:, 0])
    with pytest.raises(FeatureMismatchError, match="4 columns but the model was fitted with 5"):
        est.predict(X[:, :4])
    with pytest.raises(FeatureMismatchError):
        est.predict(da.from_array(X[:, :4]))
    with pytest.raises(NonFiniteInputError):
        est.predict(np.full((2, D_IN), np.nan))


def test_singular_alpha_is_a_clear_error(data):
    X, Y = data
    # 20 rows, 48 features: Z^T Z is singular, alpha = 0 cannot be solved
    with pytest.raises(SingularSystemError, match="alpha=0.0.*larger alpha"):
        make(alpha=0.0).fit(X[:20], Y[:20, 0])
    # a negative penalty is refused before the pass (issue 11 item 4; tests/test_params.py)
    with pytest.raises(InvalidParameterError, match=r"-1\.0.*>= 0"):
        make(alphas=[1.0, -1.0], cv=2).fit(X[:40], Y[:40, 0])
    est = make(alpha=0.0, n_components=4).fit(X, Y[:, 0])  # positive definite: allowed
    Z = est.feature_map_.transform(X)
    np.testing.assert_allclose(est.coef_, Ridge(alpha=0.0).fit(Z, Y[:, 0]).coef_, rtol=1e-7)


@pytest.mark.parametrize("bad", [dict(alpha=np.nan), dict(alpha="1"), dict(alphas=[]), dict(alphas=[1, np.inf]),
                                 dict(solver="lsqr"), dict(max_block_bytes=0), dict(split_every=1),
                                 dict(chunk_rows=0), dict(fit_intercept="yes")])
def test_invalid_parameters(data, bad):
    X, Y = data
    if "alphas" in bad:
        bad["cv"] = 3
    with pytest.raises(InvalidParameterError):
        make(**bad).fit(X, Y[:, 0])


def test_sparse_input_and_missing_y_are_refused(data):
    import scipy.sparse

    X, Y = data
    with pytest.raises(InputValidationError, match="sparse input is not supported"):
        make().fit(scipy.sparse.csr_matrix(X), Y[:, 0])
    with pytest.raises(InputValidationError, match="requires y to be passed"):
        make().fit(X, None)


def test_non_finite_rows_in_lazy_predict_name_the_block(data):
    X, Y = data
    est = make().fit(X, Y[:, 0])
    Xbad = X.copy()
    Xbad[333, 1] = np.inf
    pred = est.predict(da.from_array(Xbad, chunks=(150, D_IN)))
    with pytest.raises(NonFiniteInputError, match=r"1 non-finite value\(s\) .* rows 300 to 449 \(row block 2\).*first in row 333"):
        pred.compute(scheduler="threads")
