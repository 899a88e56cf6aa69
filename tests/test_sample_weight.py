"""``fit(X, y, sample_weight)``: scikit-learn's weighted ``Ridge``, streamed like y.

The weighted statistics equal dense numpy sums; the fits equal ``Ridge(sample_weight)``
on the same dense features; integer weights equal repeated rows, zero weights dropped
rows; the weighted K-fold CV equals a brute-force loop; bad weights are refused before
any task runs.
"""

import dask.array as da
import numpy as np
import pytest
import zarr
from sklearn.linear_model import Ridge

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.errors import InputValidationError, InvalidParameterError, NonFiniteInputError
from dkrr.features import build_random_feature_map
from dkrr.linalg import as_row_chunked, fold_ids

N, D_IN, D, K = 240, 3, 16, 3
ALPHAS = np.array([1e-3, 0.1, 10.0])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((N, D_IN))
    y = np.sin(2.0 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(N)
    w = rng.uniform(0.0, 3.0, N)
    w[::17] = 0.0
    return X, y, w


def features(X, gamma=0.5, seed=0):
    return RandomFeatures(method="rff", n_components=D, gamma=gamma, random_state=seed).fit(X).transform(X)


def ridge(**kw):
    return RandomFeatureRidge(method="rff", n_components=D, gamma=0.5, random_state=0, **kw)


def test_weighted_statistics_equal_dense_weighted_sums(data):
    from dkrr.linalg._weighted import check_sample_weight, streamed_statistics_maps

    X, y, w = data
    Y = np.column_stack([y, y**2])
    fmap = build_random_feature_map(kernel="gaussian", method="rff", n_components=D, gamma=0.5,
                                    n_features_in=D_IN, random_state=0, options={})
    Xd, Yd = as_row_chunked(X, Y, chunk_rows=50)
    (s,) = streamed_statistics_maps(Xd, Yd, [fmap], sample_weight=check_sample_weight(w, Xd),
                                    n_folds=K, fold_seed=4)
    Z = fmap.transform(X)
    folds = fold_ids(np.arange(N), K, 4)
    for k in range(K):
        m = folds == k
        Zk, Yk, wk = Z[m], Y[m], w[m]
        np.testing.assert_allclose(s.G[k], (Zk * wk[:, None]).T @ Zk, rtol=1e-12, atol=1e-12 * N)
        assert np.array_equal(s.G[k], s.G[k].T)
        np.testing.assert_allclose(s.c[k], (Zk * wk[:, None]).T @ Yk, rtol=1e-12, atol=1e-12 * N)
        np.testing.assert_allclose(s.zsum[k], wk @ Zk, rtol=1e-12, atol=1e-12 * N)
        np.testing.assert_allclose(s.ysum[k], wk @ Yk, rtol=1e-12)
        np.testing.assert_allclose(s.yy[k], wk @ Yk**2, rtol=1e-12)
        np.testing.assert_allclose(s.wsum[k], wk.sum(), rtol=1e-12)
        assert s.n[k] == (wk > 0).sum()  # row counts (of positive weight: a zero weight is no row), not weights


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("multi", [False, True])
def test_fit_equals_sklearn_ridge_with_sample_weight(data, fit_intercept, multi):
    X, y, w = data
    Y = np.column_stack([y, np.cos(X[:, 2])]) if multi else y
    est = ridge(alpha=0.3, fit_intercept=fit_intercept, chunk_rows=64).fit(X, Y, sample_weight=w)
    ref = Ridge(alpha=0.3, fit_intercept=fit_intercept, solver="cholesky").fit(features(X), Y, sample_weight=w)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-8, atol=1e-10)


def test_weights_of_ones_equal_no_weights(data):
    X, y, _ = data
    a = ridge(alpha=0.1, alphas=ALPHAS, cv=K).fit(X, y, sample_weight=np.ones(N))
    b = ridge(alpha=0.1, alphas=ALPHAS, cv=K).fit(X, y)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-12)
    np.testing.assert_allclose(a.cv_results_["fold_mse"], b.cv_results_["fold_mse"], rtol=1e-12)


def test_integer_weights_equal_repeated_rows_and_zero_weights_dropped_rows(data):
    X, y, _ = data
    counts = np.random.default_rng(1).integers(0, 4, N)
    rep = ridge(alpha=0.2).fit(np.repeat(X, counts, axis=0), np.repeat(y, counts))
    wtd = ridge(alpha=0.2).fit(X, y, sample_weight=counts)
    np.testing.assert_allclose(wtd.coef_, rep.coef_, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(wtd.intercept_, rep.intercept_, rtol=1e-9)
    labels = np.where(y > 0, "pos", "neg")
    crep = RandomFeatureRidgeClassifier(method="rff", n_components=D, gamma=0.5, random_state=0).fit(
        np.repeat(X, counts, axis=0), np.repeat(labels, counts))
    cwtd = RandomFeatureRidgeClassifier(method="rff", n_components=D, gamma=0.5, random_state=0).fit(
        X, labels, sample_weight=counts)
    np.testing.assert_allclose(cwtd.coef_, crep.coef_, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(cwtd.intercept_, crep.intercept_, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("use_gammas", [False, True])
def test_weighted_cv_equals_brute_force_weighted_mse(data, use_gammas):
    X, y, w = data
    gammas = [0.2, 2.0] if use_gammas else [0.5]
    extra = {"gammas": gammas} if use_gammas else {}
    # float64: the one-pass CV's scores equal the brute force ones to 1e-8
    est = ridge(alphas=ALPHAS, cv=K, chunk_rows=45, precision="float64", **extra).fit(X, y, sample_weight=w)
    folds = fold_ids(np.arange(N), K, est.fold_seed_)
    brute = np.empty((len(gammas), K, ALPHAS.size))
    for g, gamma in enumerate(gammas):
        Z = features(X, gamma)
        for k in range(K):
            tr, va = folds != k, folds == k
            for j, a in enumerate(ALPHAS):
                r = Ridge(alpha=a, solver="cholesky").fit(Z[tr], y[tr], sample_weight=w[tr])
                brute[g, k, j] = np.average((y[va] - r.predict(Z[va])) ** 2, weights=w[va])
    fold_w = np.array([w[folds == k].sum() for k in range(K)])
    mean = np.einsum("k,gka->ga", fold_w, brute) / w.sum()
    res = est.cv_results_
    np.testing.assert_allclose(res["fold_mse"], brute if use_gammas else brute[0], rtol=1e-8)
    np.testing.assert_allclose(res["mean_mse"], mean if use_gammas else mean[0], rtol=1e-8)
    np.testing.assert_array_equal(res["fold_sizes"], np.bincount(folds[w > 0], minlength=K))  # rows of weight
    gi, ai = np.unravel_index(np.argmin(mean), mean.shape)
    assert est.alpha_ == ALPHAS[ai] and (not use_gammas or est.gamma_ == gammas[gi])


def test_classifier_weights_the_plus_minus_one_targets(data):
    X, y, w = data
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))  # three classes
    clf = RandomFeatureRidgeClassifier(method="rff", n_components=D, gamma=0.5, alpha=0.2,
                                       random_state=0).fit(X, labels, sample_weight=w)
    T = np.where(labels[:, None] == np.arange(3)[None, :], 1.0, -1.0)
    ref = Ridge(alpha=0.2, solver="cholesky").fit(features(X), T, sample_weight=w)
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, rtol=1e-8, atol=1e-10)


def test_dask_and_zarr_weights_are_streamed_like_y(data, tmp_path):
    X, y, w = data
    ref = ridge(alpha=0.3).fit(X, y, sample_weight=w)
    z = zarr.open_array(str(tmp_path / "w.zarr"), mode="w", shape=(N,), chunks=(70,), dtype="f8")
    z[:] = w
    for weights in (da.from_array(w, chunks=33), z, list(w)):
        est = ridge(alpha=0.3, chunk_rows=50).fit(da.from_array(X, chunks=(60, D_IN)), y, sample_weight=weights)
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bad, error, match", [
    (-1.0, InputValidationError, "negative value"),
    (np.nan, NonFiniteInputError, "non-finite"),
    ("short", InputValidationError, "one weight per row"),
    ("2d", InputValidationError, "one weight per row"),
    ("zeros", InputValidationError, "sums to 0"),
])
def test_invalid_weights_are_refused_before_any_task(data, bad, error, match):
    X, y, w = data
    reads = []
    Xd = da.from_array(X, chunks=(60, D_IN)).map_blocks(lambda b: reads.append(1) or b, dtype=X.dtype,
                                                        meta=np.empty((0, 0)))
    weights = {"short": w[:-1], "2d": np.column_stack([w, w]), "zeros": np.zeros(N)}.get(bad)
    if weights is None:
        weights = w.copy()
        weights[7] = bad
    with pytest.raises(error, match=match):
        ridge().fit(Xd, y, sample_weight=weights)
    assert reads == []


def test_bad_dask_weights_are_named_by_block_in_the_pass(data):
    X, y, w = data
    bad = w.copy()
    bad[130] = -2.0
    with pytest.raises(InputValidationError, match="row block 2.*row 130"):
        ridge(chunk_rows=60).fit(X, y, sample_weight=da.from_array(bad, chunks=100))
    with pytest.raises(InputValidationError, match="sample_weight sums to 0"):
        ridge(chunk_rows=60).fit(X, y, sample_weight=da.zeros(N, chunks=100))


def test_a_fold_without_weight_is_refused(data):
    X, y, _ = data
    est = ridge(alphas=ALPHAS, cv=K)
    folds = fold_ids(np.arange(N), K, ridge(alphas=ALPHAS, cv=K).fit(X, y).fold_seed_)
    with pytest.raises(InputValidationError, match="zero total sample_weight"):
        est.fit(X, y, sample_weight=(folds != 1).astype(float))


def test_folds_count_rows_of_positive_weight(data):
    """One row of positive weight per fold: each fold has weight, but 3 observations
    cannot make 3 training sets of two; the error counts rows of positive weight."""
    X, y, _ = data
    folds = fold_ids(np.arange(N), K, ridge(alphas=ALPHAS, cv=K).fit(X, y).fold_seed_)
    w = np.zeros(N)
    w[[int(np.flatnonzero(folds == k)[0]) for k in range(K)]] = 1.0
    with pytest.raises(InputValidationError, match=r"too few rows of positive weight for 3-fold .*: 3 rows of "
                                                   r"positive weight, per fold \[1, 1, 1\]"):
        ridge(alphas=ALPHAS, cv=K).fit(X, y, sample_weight=w)


def test_weights_with_leverage_sampling_are_refused(data):
    X, y, w = data
    with pytest.raises(InvalidParameterError, match="sample_weight cannot be combined with sampling"):
        ridge(sampling="surrogate_leverage").fit(X, y, sample_weight=w)


def test_weighted_classifier_cv_equals_weighted_regression_on_plus_minus_one(data):
    X, y, w = data
    labels = np.where(y > 0.3, 7, 3)
    kw = {"method": "rff", "n_components": D, "gamma": 0.5, "alphas": ALPHAS, "cv": K, "random_state": 0}
    clf = RandomFeatureRidgeClassifier(precision="float64", **kw).fit(X, labels, sample_weight=w)
    reg = RandomFeatureRidge(precision="float64", **kw).fit(X, np.where(labels == 7, 1.0, -1.0), sample_weight=w)
    np.testing.assert_allclose(clf.cv_results_["fold_mse"], reg.cv_results_["fold_mse"], rtol=1e-10)
    np.testing.assert_allclose(clf.decision_function(X), reg.predict(X), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- solver="pcg"
#: CG to 1e-12 with a preconditioner of rank below p, so that CG iterates; the weighted
#: Gram path (itself equal to scikit-learn above) is the reference
PCG = {"solver": "pcg", "tol": 1e-12, "pcg_rank": 4, "max_iter": 500}


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_weighted_pcg_equals_the_weighted_gram_path(data, fit_intercept):
    X, y, w = data
    Y = np.column_stack([y, np.cos(X[:, 2])])
    ref = ridge(alpha=0.3, fit_intercept=fit_intercept).fit(X, Y, sample_weight=w)
    est = ridge(alpha=0.3, fit_intercept=fit_intercept, chunk_rows=64, **PCG).fit(X, Y, sample_weight=w)
    assert est.solver_info_["n_iter"] > 1 and est.solver_info_["converged"]
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_weighted_pcg_iterates_to_a_true_residual_below_the_default_tol(data, fit_intercept):
    """At the tolerance users get (1e-6) and a preconditioner of rank 4 < p = 32, CG
    iterates, and the coefficients' residual in the explicit weighted system (zero-weight
    rows included, which add nothing) is below tol."""
    X, y, w = data
    est = ridge(alpha=0.3, fit_intercept=fit_intercept, chunk_rows=64, solver="pcg", pcg_rank=4).fit(
        X, y, sample_weight=w)
    info = est.solver_info_
    assert est.tol == 1e-6 and info["rank"] < est.n_output_features_
    assert info["converged"] and info["n_iter"] > 1, info["n_iter"]
    Z = features(X)
    mu, ybar = (np.average(Z, axis=0, weights=w), np.average(y, weights=w)) if fit_intercept else (0.0, 0.0)
    Zc, yc = Z - mu, y - ybar
    A, b = (Zc * w[:, None]).T @ Zc, (Zc * w[:, None]).T @ yc
    r = b - A @ est.coef_ - 0.3 * est.coef_
    assert np.linalg.norm(r) / np.linalg.norm(b) < est.tol


def test_weighted_pcg_cv_equals_the_weighted_gram_cv(data):
    X, y, w = data
    ref = ridge(alphas=ALPHAS, cv=K, precision="float64").fit(X, y, sample_weight=w)  # pcg's CV is float64
    est = ridge(alphas=ALPHAS, cv=K, chunk_rows=45, **PCG).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(est.cv_results_["fold_mse"], ref.cv_results_["fold_mse"], rtol=1e-7)
    np.testing.assert_allclose(est.cv_results_["mean_mse"], ref.cv_results_["mean_mse"], rtol=1e-7)
    np.testing.assert_array_equal(est.cv_results_["fold_sizes"], ref.cv_results_["fold_sizes"])
    assert est.alpha_ == ref.alpha_
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-9)


def test_weighted_pcg_classifier_and_dask_weights(data):
    X, y, w = data
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    kw = {"method": "rff", "n_components": D, "gamma": 0.5, "alpha": 0.2, "random_state": 0}
    ref = RandomFeatureRidgeClassifier(**kw).fit(X, labels, sample_weight=w)
    for weights, persist in ((w, True), (da.from_array(w, chunks=33), False)):
        clf = RandomFeatureRidgeClassifier(**kw, **PCG, pcg_persist=persist).fit(
            da.from_array(X, chunks=(60, D_IN)), labels, sample_weight=weights)
        np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(clf.intercept_, ref.intercept_, rtol=1e-7, atol=1e-9)
        assert clf.solver_info_["persisted"] is persist


def test_bad_dask_weights_are_named_by_pcg_too(data):
    X, y, w = data
    bad = w.copy()
    bad[130] = -2.0
    with pytest.raises(InputValidationError, match="row block 2.*row 130"):
        ridge(chunk_rows=60, **PCG).fit(X, y, sample_weight=da.from_array(bad, chunks=100))
    with pytest.raises(InputValidationError, match="sample_weight sums to 0"):
        ridge(chunk_rows=60, **PCG).fit(X, y, sample_weight=da.zeros(N, chunks=100))


@pytest.mark.parametrize("precision", ["auto", "float32", "float64"])
@pytest.mark.parametrize("exponent", [-200, -40, 40, 200])
def test_the_weights_unit_does_not_change_the_fit(data, precision, exponent):
    """Multiplying every weight by ``k`` is the same ridge problem with alpha multiplied by
    ``k``: the CV's default grid follows (trace-based), and so must the usable alphas and
    the float32 statistics. With ``k`` a power of four the scaling is exact, so the fit is
    the same to the bit. Before: an absolute eigenvalue floor (1 x p eps) made small-scale
    Grams' small alphas unusable (another alpha at 2^-40), and in float32 ``sqrt(w) z``
    under- or overflowed (a Gram of zeros at 2^-200, of infs at 2^200)."""
    X, y, w = data
    k = 2.0 ** exponent
    ref = ridge(cv=K, precision=precision).fit(X, y, sample_weight=w)
    got = ridge(cv=K, precision=precision).fit(X, y, sample_weight=w * k)
    assert got.alpha_ == ref.alpha_ * k
    assert got.precision_ == ref.precision_
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)


def test_uniform_weights_of_any_unit_choose_alpha_times_that_unit(data):
    """Uniform weights ``s`` are no weights with alpha scaled by ``s``, down to s = 1e-100
    (not a power of two: to rounding)."""
    X, y, _ = data
    ref = ridge(cv=K, precision="float64").fit(X, y)
    for s in (1e-12, 1e-20, 1e-100, 1e100):
        got = ridge(cv=K, precision="float64").fit(X, y, sample_weight=np.full(N, s))
        assert got.alpha_ == pytest.approx(ref.alpha_ * s, rel=1e-9)
        np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


def test_a_gram_beyond_the_eigenvalue_bisections_range_is_named(data):
    X, y, w = data
    with pytest.raises(InputValidationError, match=r"the Gram's entries reach .*e\+2\d\d, beyond what float64's "
                                                   r"eigenvalue bisection .* divide sample_weight"):
        ridge(cv=K, precision="float64").fit(X, y, sample_weight=np.full(N, 1e250))


# --- the data-dependent steps before the ridge solve: moments, gamma rules, row draws ---

#: the fits whose steps before the solve read the data: the moments of standardize and
#: gamma="scale", the rows drawn by gamma="median" and by the Nyström landmarks
DATA_DEPENDENT = {
    "standardize": dict(method="rff", gamma=0.3, standardize=True),
    "scale": dict(method="rff", gamma="scale"),
    "laplacian_scale": dict(method="rff", kernel="laplacian", gamma="scale"),
    "median": dict(method="rff", gamma="median"),
    "nystroem": dict(method="nystroem", gamma=0.3),
    "nystroem_median_standardize": dict(method="nystroem", gamma="median", standardize=True),
}


def outlier_data(n=400, n_out=120, seed=3):
    """X, y and weights whose first ``n_out`` rows, far away and wide, have weight 0 (with
    them counted, every moment, gamma rule and landmark would move); the other weights
    positive and unequal."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D_IN))
    y = np.sin(2.0 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(n)
    X[:n_out] = X[:n_out] * 10 + 50
    w = rng.uniform(0.5, 2.0, n)
    w[:n_out] = 0.0
    return X, y, w


def _fitted(cls, kw, X, y, w, chunk=None):
    est = cls(n_components=D, random_state=0, precision="float64", alpha=0.1, **kw)
    Xi = X if chunk is None else da.from_array(X, chunks=(chunk, X.shape[1]))
    wi = w if chunk is None or w is None else da.from_array(w, chunks=chunk)
    return est.fit(Xi, y if cls is RandomFeatureRidge else y > 0.5, sample_weight=wi)


def _inner(est):
    fmap = est.feature_map_
    return getattr(fmap, "inner", fmap)


@pytest.mark.parametrize("cls", [RandomFeatureRidge, RandomFeatureRidgeClassifier])
@pytest.mark.parametrize("config", sorted(DATA_DEPENDENT))
@pytest.mark.parametrize("chunk", [None, 64, 150])
def test_rows_of_weight_zero_are_dropped_rows_in_every_data_dependent_step(cls, config, chunk):
    X, y, w = outlier_data()
    kw = DATA_DEPENDENT[config]
    keep = w > 0
    got = _fitted(cls, kw, X, y, w, chunk)
    ref = _fitted(cls, kw, X[keep], y[keep], w[keep])  # numpy, the rows removed
    np.testing.assert_allclose(got.gamma_, ref.gamma_, rtol=1e-12)
    if kw.get("standardize"):
        np.testing.assert_allclose(got.mean_, ref.mean_, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got.scale_, ref.scale_, rtol=1e-12)
    if kw["method"] == "nystroem":  # the same landmark rows (standardised: to rounding)
        np.testing.assert_allclose(_inner(got).landmarks, _inner(ref).landmarks, rtol=1e-12, atol=1e-13)
    score = "predict" if cls is RandomFeatureRidge else "decision_function"
    np.testing.assert_allclose(getattr(got, score)(X[keep]), getattr(ref, score)(X[keep]), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("config", ["median", "nystroem"])
def test_the_rows_drawn_with_weights_are_those_without_the_zero_weight_rows_for_any_chunking(config):
    """One random_state, one draw: the ranks among the rows of positive weight, whatever
    the blocks that count them (numpy, dask of two chunkings), so the bandwidth and the
    landmarks are exactly those of the data without the rows of weight 0."""
    X, y, w = outlier_data()
    ref = _fitted(RandomFeatureRidge, DATA_DEPENDENT[config], X[w > 0], y[w > 0], w[w > 0])
    for chunk in (None, 64, 150):
        got = _fitted(RandomFeatureRidge, DATA_DEPENDENT[config], X, y, w, chunk)
        assert got.gamma_ == ref.gamma_
        if config == "nystroem":
            np.testing.assert_array_equal(_inner(got).landmarks, _inner(ref).landmarks)


@pytest.mark.parametrize("cls", [RandomFeatureRidge, RandomFeatureRidgeClassifier])
@pytest.mark.parametrize("config", ["standardize", "scale", "laplacian_scale", "scale_standardized"])
def test_integer_weights_give_the_moments_and_the_fit_of_repeated_rows(cls, config):
    X, y, _ = outlier_data()
    counts = np.random.default_rng(5).integers(0, 4, len(X))
    kw = dict(DATA_DEPENDENT["scale"], standardize=True) if config == "scale_standardized" else DATA_DEPENDENT[config]
    got = _fitted(cls, kw, X, y, counts.astype(float), chunk=70)
    rep = _fitted(cls, kw, np.repeat(X, counts, axis=0), np.repeat(y, counts), None)
    np.testing.assert_allclose(got.gamma_, rep.gamma_, rtol=1e-12)
    if kw.get("standardize"):
        np.testing.assert_allclose(got.mean_, rep.mean_, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(got.scale_, rep.scale_, rtol=1e-12)
    score = "predict" if cls is RandomFeatureRidge else "decision_function"
    np.testing.assert_allclose(getattr(got, score)(X), getattr(rep, score)(X), rtol=1e-9, atol=1e-10)


def test_weighted_pcg_standardizes_and_draws_as_the_gram_path():
    X, y, w = outlier_data()
    kw = dict(method="nystroem", gamma="median", standardize=True)
    pcg = _fitted(RandomFeatureRidge, dict(kw, solver="pcg", tol=1e-12), X, y, w, chunk=100)
    ref = _fitted(RandomFeatureRidge, kw, X[w > 0], y[w > 0], w[w > 0])
    np.testing.assert_allclose(pcg.mean_, ref.mean_, rtol=1e-12, atol=1e-14)
    assert pcg.gamma_ == pytest.approx(ref.gamma_, rel=1e-12)
    np.testing.assert_allclose(pcg.predict(X), ref.predict(X), rtol=1e-7, atol=1e-8)
