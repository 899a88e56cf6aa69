"""Leverage sampling of random features: scores, resampling, ridge leverage, sampled fits."""

import dask.array as da
import numpy as np
import pytest

from dkrr.errors import InputValidationError, InvalidParameterError, NonFiniteInputError
from dkrr.estimators import RandomFeatureRidge, RandomFeatureRidgeClassifier
from dkrr.features import build_random_feature_map
from dkrr.features import feature_map_from_state
from dkrr.linalg import fold_ids
from dkrr.sampling import (
    SampledFeatureMap,
    fit_sampled_feature_map,
    fit_sampled_ridge_statistics,
    resample_feature_map,
    ridge_leverage_scores,
    streamed_score_statistics,
    surrogate_scores,
)

from test_one_pass import CountComputes, ROWS, counting_array, loads


def candidates(kernel="gaussian", method="rff", l=24, d=4, seed=1, gamma=0.4):
    return build_random_feature_map(
        kernel=kernel, method=method, n_components=l, gamma=gamma if kernel == "gaussian" else 1.0,
        n_features_in=d, random_state=seed, options={},
    )


def data(n=300, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n) + 3.0  # non-zero mean
    return X, y


def per_frequency(col, kernel, l):
    return col[:l] + col[l:] if kernel == "gaussian" else col


def dense_scores(Z, Y, kernel, l, eq12=False):
    col = ((Z.T @ Y) ** 2).sum(axis=1)
    if eq12:
        col = col + Z.shape[0] * (Z * Z).sum(axis=0)
    return per_frequency(col, kernel, l)


# ------------------------------------------------------------------ scores
@pytest.mark.parametrize("kernel,method", [("gaussian", "rff"), ("gaussian", "sorf"), ("arccos1", "orf"), ("angular", "rff")])
@pytest.mark.parametrize("chunks", [300, 41, 7])
def test_regression_scores_equal_dense_and_do_not_depend_on_chunking(kernel, method, chunks):
    X, y = data()
    m = candidates(kernel, method)
    Z = m.transform(X)
    ref = dense_scores(Z, (y - y.mean())[:, None], kernel, 24)
    st = streamed_score_statistics(da.from_array(X, chunks=(chunks, 4)), da.from_array(y, chunks=chunks), m)
    np.testing.assert_allclose(surrogate_scores(st, kernel, 24), ref, rtol=1e-10)
    # the square of the sum, not the sum of squares of the blocks: centring matters too
    unc = dense_scores(Z, y[:, None], kernel, 24)
    assert not np.allclose(surrogate_scores(st, kernel, 24), unc, rtol=1e-3)
    np.testing.assert_allclose(surrogate_scores(st, kernel, 24, center=False), unc, rtol=1e-10)


def test_scores_same_on_threads_and_local_cluster(scheduler):
    X, y = data(seed=3)
    Y = np.column_stack([y, np.cos(X[:, 2])])  # two targets: scores sum over them
    m = candidates()
    Z = m.transform(X)
    ref = dense_scores(Z, Y - Y.mean(0), "gaussian", 24)
    st = streamed_score_statistics(da.from_array(X, chunks=(37, 4)), da.from_array(Y, chunks=(37, 2)), m,
                                   with_norms=True, split_every=2)
    np.testing.assert_allclose(surrogate_scores(st, "gaussian", 24), ref, rtol=1e-10)
    np.testing.assert_allclose(surrogate_scores(st, "gaussian", 24, eq12=True),
                               dense_scores(Z, Y - Y.mean(0), "gaussian", 24, eq12=True), rtol=1e-10)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classification_scores_use_plus_minus_one_targets(n_classes):
    X, _ = data(seed=4)
    labels = np.array(["u", "v", "w"][:n_classes])
    y = labels[(X[:, 0] > 0).astype(int) + (n_classes == 3) * (X[:, 1] > 1).astype(int)]
    m = candidates()
    Z = m.transform(X)
    pm = np.where(y[:, None] == labels[None, :], 1.0, -1.0)
    Y = pm[:, 1:] if n_classes == 2 else pm
    st = streamed_score_statistics(X, y, m, labels_mode=True)
    np.testing.assert_allclose(surrogate_scores(st, "gaussian", 24), dense_scores(Z, Y, "gaussian", 24), rtol=1e-10)


def test_training_fold_scores_use_only_training_rows():
    X, y = data(seed=5)
    m = candidates()
    K, seed = 4, 1234
    st = streamed_score_statistics(da.from_array(X, chunks=(53, 4)), da.from_array(y, chunks=53), m,
                                   n_folds=K, fold_seed=seed)
    folds = fold_ids(np.arange(len(X)), K, seed)
    for k in range(K):
        tr = folds != k
        Ztr = m.transform(X[tr])
        ref = dense_scores(Ztr, (y[tr] - y[tr].mean())[:, None], "gaussian", 24)
        np.testing.assert_allclose(surrogate_scores(st, "gaussian", 24, exclude_fold=k), ref, rtol=1e-10)


def test_fold_maps_do_not_see_their_validation_labels():
    X, y = data(seed=6)
    m = candidates(l=40)
    K, seed = 3, 99
    folds = fold_ids(np.arange(len(X)), K, seed)
    y2 = y.copy()
    y2[folds == 1] = np.random.default_rng(7).standard_normal((folds == 1).sum()) * 10
    a = fit_sampled_feature_map(X, y, candidate_map=m, sampling="surrogate_leverage", n_components=10,
                                rng=np.random.default_rng(0), n_folds=K, fold_seed=seed)
    b = fit_sampled_feature_map(X, y2, candidate_map=m, sampling="surrogate_leverage", n_components=10,
                                rng=np.random.default_rng(0), n_folds=K, fold_seed=seed)
    np.testing.assert_array_equal(a.fold_maps[1].projection.matrix(), b.fold_maps[1].projection.matrix())
    np.testing.assert_allclose(a.fold_maps[1].weights, b.fold_maps[1].weights, rtol=1e-9)  # subtraction rounding
    assert not np.allclose(a.scores, b.scores)  # the final map does see every label


# ------------------------------------------------------------------ resampling
def _kernel_estimate(fmap, X):
    Z = fmap.transform(X)
    return Z @ Z.T


def test_resampled_kernel_is_unbiased_only_with_the_weights():
    X, y = data(n=25, d=3, seed=8)
    l, s, R = 30, 20, 3000
    m = candidates(l=l, d=3, gamma=0.3)
    st = streamed_score_statistics(X, y, m)
    scores = surrogate_scores(st, "gaussian", l)
    pi = scores / scores.sum()
    assert pi.max() / pi.min() > 20  # far from uniform, or the test would prove nothing
    K_l = _kernel_estimate(m, X)
    rng = np.random.default_rng(2024)
    acc_w = np.zeros_like(K_l)
    acc_u = np.zeros_like(K_l)
    for _ in range(R):
        state = rng.bit_generator.state
        fw, idx = resample_feature_map(m, scores, s, rng)
        rng.bit_generator.state = state
        fu, idx_u = resample_feature_map(m, scores, s, rng, weighted=False)
        np.testing.assert_array_equal(idx, idx_u)
        acc_w += _kernel_estimate(fw, X)
        acc_u += _kernel_estimate(fu, X)
    err_w = np.linalg.norm(acc_w / R - K_l) / np.linalg.norm(K_l)
    err_u = np.linalg.norm(acc_u / R - K_l) / np.linalg.norm(K_l)
    assert err_w < 0.04, err_w  # measured 0.021 (Monte Carlo noise of R resamples)
    # dropping the importance weights biases the estimate: the same check fails
    assert err_u > 0.3, err_u  # measured 0.46
    # the diagonal of the weighted estimate: exactly 1 in expectation for the gaussian kernel
    assert abs(np.mean(np.diag(acc_w / R)) - 1.0) < 0.03


def test_resampled_map_is_dense_weighted_and_round_trips():
    X, y = data(seed=9)
    m = candidates(method="sorf", l=32)
    st = streamed_score_statistics(X, y, m)
    scores = surrogate_scores(st, "gaussian", 32)
    fmap, idx = resample_feature_map(m, scores, 8, np.random.default_rng(1))
    assert isinstance(fmap, SampledFeatureMap) and fmap.n_components == 8 and fmap.n_output_features == 16
    W = m.projection.matrix()[idx]
    P = X @ W.T
    w = np.sqrt(1.0 / (32 * scores[idx] / scores.sum()))
    ref = np.hstack([np.cos(P) * w, np.sin(P) * w]) / np.sqrt(8)
    np.testing.assert_allclose(fmap.transform(X), ref, rtol=1e-9, atol=1e-12)
    back = feature_map_from_state(fmap.get_state())
    np.testing.assert_array_equal(back.transform(X), fmap.transform(X))


# ------------------------------------------------------------------ ridge leverage
@pytest.mark.parametrize("kernel", ["gaussian", "arccos0"])
def test_ridge_leverage_equals_dense(kernel):
    X, y = data(n=120, seed=10)
    l, alpha = 20, 0.7
    m = candidates(kernel, l=l)
    Z = m.transform(X)
    Kinv = np.linalg.inv(Z @ Z.T + alpha * np.eye(len(X)))
    col = np.einsum("ij,ik,kj->j", Z, Kinv, Z)  # z_i^T (Z Z^T + alpha I)^-1 z_i
    st = streamed_score_statistics(da.from_array(X, chunks=(31, 4)), da.from_array(y, chunks=31), m, with_gram=True)
    np.testing.assert_allclose(st.G[0], Z.T @ Z, rtol=1e-10, atol=1e-12)
    got = ridge_leverage_scores(st.G[0], alpha, kernel, l)
    np.testing.assert_allclose(got, per_frequency(col, kernel, l), rtol=1e-8)


# ------------------------------------------------------------------ sampled fits
def test_sampled_cv_scores_each_fold_with_its_own_map():
    X, y = data(n=240, seed=11)
    m = candidates(l=40)
    K, seed, alphas = 3, 5, np.array([0.01, 0.1, 1.0])
    fit = fit_sampled_ridge_statistics(X, y, candidate_map=m, sampling="surrogate_leverage", n_components=12,
                                       rng=np.random.default_rng(3), n_folds=K, fold_seed=seed, alphas=alphas)
    folds = fold_ids(np.arange(len(X)), K, seed)
    for k in range(K):
        fm = fit.maps.fold_maps[k]
        tr, va = folds != k, folds == k
        Ztr, Zva = fm.transform(X[tr]), fm.transform(X[va])
        mu, ybar = Ztr.mean(0), y[tr].mean()
        for j, a in enumerate(alphas):
            beta = np.linalg.solve((Ztr - mu).T @ (Ztr - mu) + a * np.eye(Ztr.shape[1]), (Ztr - mu).T @ (y[tr] - ybar))
            pred = (Zva - mu) @ beta + ybar
            np.testing.assert_allclose(fit.fold_mse[k, j], np.mean((y[va] - pred) ** 2), rtol=1e-8)
    np.testing.assert_array_equal(fit.fold_sizes, np.bincount(folds, minlength=K))
    Z = fit.maps.feature_map.transform(X)
    np.testing.assert_allclose(fit.stats.G[0], Z.T @ Z, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("sampling", ["surrogate_leverage", "ridge_leverage"])
@pytest.mark.parametrize("classifier", [False, True])
def test_sampled_fit_reads_each_block_exactly_twice(tmp_path, scheduler, sampling, classifier):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((sum(ROWS), 4))
    y = np.where(X[:, 0] * X[:, 1] > 0, "a", "b") if classifier else np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(len(X))
    Xd = counting_array(X, str(tmp_path), "X")
    yd = counting_array(y, str(tmp_path), "y")
    cls = RandomFeatureRidgeClassifier if classifier else RandomFeatureRidge
    params = dict(method="rff", n_components=8, n_candidates=32, gamma=0.5, alphas=[0.01, 0.1, 1.0], cv=3,
                  random_state=0, sampling=sampling, split_every=2)
    counter = CountComputes()
    with counter:
        est = cls(**params).fit(Xd, yd)
    expected = {f"X-{i}": 2 for i in range(len(ROWS))} | {f"y-{i}": 2 for i in range(len(ROWS))}
    if not classifier:  # a numeric target's first block also gives the shift (ALGORITHMS 3.4)
        expected["y-0"] += 1
    assert dict(loads(tmp_path)) == expected
    if scheduler == "threads":
        assert counter.n == (2 if classifier else 3)
    ref = cls(**params).fit(X, y)
    assert est.alpha_ == ref.alpha_
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    assert isinstance(est.feature_map_, SampledFeatureMap)
    assert est.cv_results_["fold_mse"].shape == (3, 3)
    assert est.cv_results_["fold_sizes"].sum() == len(X)
    assert est.n_output_features_ == 16


def test_surrogate_leverage_helps_on_a_low_frequency_target():
    # the target depends on one direction at low frequency: scored frequencies find it
    rng = np.random.default_rng(12)
    X = rng.standard_normal((1200, 6))
    y = np.sin(1.5 * X[:, 0]) + 0.05 * rng.standard_normal(1200)
    kw = dict(method="rff", n_components=12, gamma=0.5, alphas=[1e-3, 1e-2, 0.1, 1.0], cv=3)
    r2 = {s: np.mean([RandomFeatureRidge(sampling=s, random_state=r, **kw).fit(X[:800], y[:800]).score(X[800:], y[800:])
                      for r in range(4)]) for s in [None, "surrogate_leverage"]}
    assert r2["surrogate_leverage"] > r2[None] + 0.05, r2


# ------------------------------------------------------------------ bad input
def test_bad_input_errors():
    X, y = data(n=60)
    with pytest.raises(InvalidParameterError, match="n_candidates=8 is smaller than n_components=16"):
        RandomFeatureRidge(method="rff", n_components=16, n_candidates=8, sampling="surrogate_leverage").fit(X, y)
    with pytest.raises(InvalidParameterError, match="sampling is None"):
        RandomFeatureRidge(n_candidates=8).fit(X, y)
    with pytest.raises(InvalidParameterError, match="sampling must be None or one of"):
        RandomFeatureRidge(sampling="leverage").fit(X, y)
    with pytest.raises(InvalidParameterError, match="nystroem"):
        RandomFeatureRidge(method="nystroem", n_components=10, sampling="ridge_leverage").fit(X, y)
    with pytest.raises(InputValidationError, match="all 32 candidate scores are zero.*constant"):
        RandomFeatureRidge(method="rff", n_components=8, n_candidates=32, sampling="surrogate_leverage").fit(X, np.full(60, 2.5))
    y_bad = y.copy()
    y_bad[17] = np.nan
    with pytest.raises(NonFiniteInputError, match=r"y contains .* in rows 0 to 59 \(row block 0\)"):
        RandomFeatureRidge(method="rff", n_components=8, sampling="surrogate_leverage").fit(X, y_bad)
    y_bad[17] = np.inf
    with pytest.raises(NonFiniteInputError, match="non-finite"):
        RandomFeatureRidge(method="rff", n_components=8, sampling="ridge_leverage").fit(da.from_array(X, chunks=(20, 4)),
                                                                                         da.from_array(y_bad, chunks=20))
    with pytest.raises(InputValidationError, match="at least two classes"):
        RandomFeatureRidgeClassifier(method="rff", n_components=8, sampling="surrogate_leverage").fit(X, np.full(60, "a"))
    m = candidates(l=10)
    with pytest.raises(InvalidParameterError, match="n_components=11 of n_candidates=10"):
        resample_feature_map(m, np.ones(10), 11, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match="positive penalty"):
        ridge_leverage_scores(np.eye(20), 0.0, "gaussian", 10)


def test_sampled_model_file_round_trip(tmp_path):
    from dkrr.io._model import load_model, save_model

    X, y = data(n=200, seed=13)
    est = RandomFeatureRidge(method="sorf", n_components=16, n_candidates=64, gamma=0.5, random_state=0,
                             sampling="surrogate_leverage").fit(X, y)
    back = load_model(save_model(est, tmp_path / "sampled.dkrr"))
    assert back.sampling == "surrogate_leverage" and back.n_candidates == 64
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
