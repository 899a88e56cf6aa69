"""A gamma grid scored jointly with the alphas by the one-pass K-fold CV (issue 13, item 3).

Every gamma's statistics come from the same single read of X; the fold errors equal a
brute-force K-fold loop of scikit-learn's Ridge on the dense features of each gamma's map.
"""

import threading

import dask.array as da
import numpy as np
import pytest
from sklearn.linear_model import Ridge

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.errors import InvalidParameterError
from dkrr.features import build_random_feature_map
from dkrr.linalg import as_row_chunked, fold_ids
from dkrr.linalg._memory import ridge_memory_estimate

N, D_IN, D, K = 300, 3, 16, 3
GAMMAS = np.array([0.05, 0.4, 3.0])
ALPHAS = np.array([1e-3, 0.1, 10.0])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, D_IN))
    y = np.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.standard_normal(N)
    return X, y


def dense_features(X, gamma, method="rff", seed=0):
    return RandomFeatures(method=method, n_components=D, gamma=gamma, random_state=seed).fit(X).transform(X)


def brute_force_cv(Z, y, folds, fit_intercept=True):
    """(K, n_alphas) validation MSE of sklearn Ridge, fold by fold."""
    out = np.empty((K, ALPHAS.size))
    for k in range(K):
        tr, va = folds != k, folds == k
        for j, a in enumerate(ALPHAS):
            r = Ridge(alpha=a, fit_intercept=fit_intercept, solver="cholesky").fit(Z[tr], y[tr])
            out[k, j] = np.mean((y[va] - r.predict(Z[va])) ** 2)
    return out


def test_streamed_statistics_of_every_gamma_equal_dense_numpy_sums(data):
    from dkrr.linalg._weighted import streamed_statistics_maps

    X, y = data
    base = build_random_feature_map(kernel="gaussian", method="sorf", n_components=D, gamma=1.0,
                                    n_features_in=D_IN, random_state=5, options={})
    maps = [base.with_gamma(g) for g in GAMMAS]
    Xd, yd = as_row_chunked(X, y, chunk_rows=70)
    stats = streamed_statistics_maps(Xd, yd, maps, n_folds=K, fold_seed=11)
    folds = fold_ids(np.arange(N), K, 11)
    for g, s in zip(GAMMAS, stats):
        # the rescaled map is the map drawn with this gamma and the same seed
        Z = build_random_feature_map(kernel="gaussian", method="sorf", n_components=D, gamma=g,
                                     n_features_in=D_IN, random_state=5, options={}).transform(X)
        for k in range(K):
            Zk, yk = Z[folds == k], y[folds == k]
            np.testing.assert_allclose(s.G[k], Zk.T @ Zk, rtol=1e-12, atol=1e-12 * N)
            np.testing.assert_allclose(s.c[k][:, 0], Zk.T @ yk, rtol=1e-12, atol=1e-12 * N)
            np.testing.assert_allclose(s.zsum[k], Zk.sum(0), rtol=1e-12, atol=1e-12 * N)
            assert s.n[k] == len(yk)
            np.testing.assert_allclose(s.yy[k], [(yk**2).sum()], rtol=1e-12)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_cv_error_of_every_gamma_alpha_pair_equals_brute_force_sklearn(data, fit_intercept):
    X, y = data
    est = RandomFeatureRidge(precision="float64", method="rff", n_components=D, gammas=GAMMAS, alphas=ALPHAS, cv=K,
                             fit_intercept=fit_intercept, random_state=0).fit(X, y)
    res = est.cv_results_
    assert res["fold_mse"].shape == (GAMMAS.size, K, ALPHAS.size)
    assert res["mean_mse"].shape == res["std_mse"].shape == (GAMMAS.size, ALPHAS.size)
    np.testing.assert_array_equal(res["gammas"], GAMMAS)
    folds = fold_ids(np.arange(N), K, est.fold_seed_)
    sizes = np.bincount(folds, minlength=K)
    np.testing.assert_array_equal(res["fold_sizes"], sizes)
    brute = np.stack([brute_force_cv(dense_features(X, g), y, folds, fit_intercept) for g in GAMMAS])
    np.testing.assert_allclose(res["fold_mse"], brute, rtol=1e-8)
    mean = np.einsum("k,gka->ga", sizes, brute) / N
    np.testing.assert_allclose(res["mean_mse"], mean, rtol=1e-8)
    gi, ai = np.unravel_index(np.argmin(mean), mean.shape)
    assert (est.gamma_, est.alpha_) == (GAMMAS[gi], ALPHAS[ai])
    assert est.best_score_ == pytest.approx(-mean[gi, ai], rel=1e-8)
    # the final model is the chosen gamma's map, refitted on all rows with the chosen alpha
    Z = dense_features(X, GAMMAS[gi])
    np.testing.assert_array_equal(est.feature_map_.transform(X), Z)
    ref = Ridge(alpha=ALPHAS[ai], fit_intercept=fit_intercept, solver="cholesky").fit(Z, y)
    np.testing.assert_allclose(est.predict(X), ref.predict(Z), rtol=1e-8, atol=1e-10)


def test_gamma_grid_is_independent_of_the_chunking(data):
    X, y = data
    kw = {"method": "sorf", "n_components": D, "gammas": GAMMAS, "alphas": ALPHAS, "cv": K, "random_state": 2}
    a = RandomFeatureRidge(precision="float64", chunk_rows=37, **kw).fit(X, y)
    b = RandomFeatureRidge(precision="float64", chunk_rows=300, split_every=2, **kw).fit(da.from_array(X, chunks=(91, D_IN)), y)
    np.testing.assert_allclose(a.cv_results_["fold_mse"], b.cv_results_["fold_mse"], rtol=1e-10)
    assert (a.gamma_, a.alpha_) == (b.gamma_, b.alpha_)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-12)


@pytest.mark.classic_dask_array("map_blocks with block_info")
def test_x_is_read_once_whatever_the_number_of_gammas(data):
    X, y = data
    lock, reads = threading.Lock(), []

    def counted(block, block_info=None):
        with lock:
            reads.append(block_info[0]["chunk-location"][0])
        return block

    Xd = da.from_array(X, chunks=(60, D_IN)).map_blocks(counted, dtype=X.dtype, meta=np.empty((0, 0)))
    est = RandomFeatureRidge(precision="float64", method="rff", n_components=D, gammas=GAMMAS, alphas=ALPHAS, cv=K,
                             random_state=0).fit(Xd, y)
    assert sorted(reads) == list(range(5))  # 5 blocks, each read once, for 3 gammas
    assert est.cv_results_["fold_mse"].shape[0] == 3


def test_classifier_gamma_grid_scores_the_plus_minus_one_targets(data):
    X, y = data
    labels = np.where(y > np.median(y), "hi", "lo")
    kw = {"method": "rff", "n_components": D, "gammas": GAMMAS, "alphas": ALPHAS, "cv": K, "random_state": 4}
    clf = RandomFeatureRidgeClassifier(**kw).fit(X, labels)
    reg = RandomFeatureRidge(**kw).fit(X, np.where(labels == "lo", 1.0, -1.0))  # classes_[1] = "lo"
    np.testing.assert_allclose(clf.cv_results_["fold_mse"], reg.cv_results_["fold_mse"], rtol=1e-10)
    assert (clf.gamma_, clf.alpha_) == (reg.gamma_, reg.alpha_)
    np.testing.assert_allclose(clf.decision_function(X), reg.predict(X), rtol=1e-9, atol=1e-12)


def test_ties_go_to_the_larger_alpha_then_the_smaller_gamma():
    from dkrr.linalg._cv import select_gamma_alpha

    mse = np.ones((3, 2, 4))
    mse[:, :, 0] = 0.5  # the best mean, tied over every gamma, at the smallest alpha
    gi, ai, mean, std = select_gamma_alpha([2.0, 0.5, 1.0], [0.1, 1.0, 10.0, 100.0], mse, [10, 30])
    assert (gi, ai) == (1, 0) and mean.shape == (3, 4) and np.all(std == 0)
    mse[:, :, 2] = 0.5  # now tied at alpha 10 too: the larger alpha wins first
    assert select_gamma_alpha([2.0, 0.5, 1.0], [0.1, 1.0, 10.0, 100.0], mse, [10, 30])[:2] == (1, 2)


def test_memory_estimate_holds_one_statistics_object_and_map_per_gamma():
    kw = {"kernel": "gaussian", "method": "rff", "n_features_in": 10, "n_components": 64, "n_folds": 5, "block_rows": 1000}
    one, three = ridge_memory_estimate(**kw), ridge_memory_estimate(n_gammas=3, **kw)
    assert three.statistics == 3 * one.statistics
    assert three.feature_map == 3 * one.feature_map


@pytest.mark.parametrize("params, match", [
    ({"gammas": [0.1, 1.0], "alphas": [1.0]}, "cv is None"),
    ({"gammas": [0.1, -1.0], "cv": 3}, "positive"),
    ({"gammas": [], "cv": 3}, "non-empty"),
    ({"gammas": [0.1, np.nan], "cv": 3}, "finite"),
    ({"gammas": [0.1, 1.0], "cv": 3, "kernel": "angular"}, "kernel='angular'"),
    ({"gammas": [0.1, 1.0], "cv": 3, "sampling": "surrogate_leverage"}, "sampling"),
])
def test_invalid_gamma_grids_are_refused_before_any_task(data, params, match):
    X, y = data
    reads = []
    Xd = da.from_array(X, chunks=(100, D_IN)).map_blocks(lambda b: reads.append(1) or b, dtype=X.dtype,
                                                         meta=np.empty((0, 0)))
    with pytest.raises(InvalidParameterError, match=match):
        RandomFeatureRidge(method="rff", n_components=D, random_state=0, **params).fit(Xd, y)
    assert reads == []


def test_gamma_grid_model_survives_save_and_load(data, tmp_path):
    from dkrr.io._model import load_model, save_model

    X, y = data
    est = RandomFeatureRidge(method="sorf", n_components=D, gammas=GAMMAS, alphas=ALPHAS, cv=K,
                             random_state=0).fit(X, y)
    back = load_model(save_model(est, tmp_path / "m"))
    assert back.gamma_ == est.gamma_ and back.alpha_ == est.alpha_
    for key in ("gammas", "fold_mse", "mean_mse", "std_mse"):
        np.testing.assert_array_equal(back.cv_results_[key], est.cv_results_[key])
    np.testing.assert_array_equal(back.predict(X), est.predict(X))


def test_without_gammas_the_cv_results_keep_their_shapes(data):
    X, y = data
    est = RandomFeatureRidge(method="rff", n_components=D, alphas=ALPHAS, cv=K, random_state=0).fit(X, y)
    assert "gammas" not in est.cv_results_
    assert est.cv_results_["fold_mse"].shape == (K, ALPHAS.size)
    assert est.cv_results_["mean_mse"].shape == (ALPHAS.size,)


def test_a_gamma_on_the_edge_of_its_grid_warns_and_an_inner_one_does_not(data):
    import warnings

    from dkrr.errors import GridEdgeWarning

    X, y = data
    with pytest.warns(GridEdgeWarning, match=r"gamma=0\.001 is the largest value of gammas"):
        est = RandomFeatureRidge(method="rff", n_components=D, gammas=[1e-4, 1e-3], alphas=ALPHAS, cv=K,
                                 random_state=0).fit(X, y)
    assert est.gamma_ == 1e-3
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "the chosen gamma", GridEdgeWarning)  # (alpha may warn)
        est = RandomFeatureRidge(method="rff", n_components=D, gammas=[1e-4, 0.5, 300.0], alphas=ALPHAS,
                                 cv=K, random_state=0).fit(X, y)
    assert est.gamma_ == 0.5


def test_nystroem_gamma_grid_rebuilds_the_landmarks_map_for_each_gamma(data):
    X, y = data
    est = RandomFeatureRidge(precision="float64", method="nystroem", n_components=20, gammas=[0.1, 1.0], alphas=ALPHAS, cv=K,
                             random_state=1).fit(X, y)
    ref = RandomFeatures(method="nystroem", n_components=20, gamma=est.gamma_, random_state=1).fit(X)
    np.testing.assert_array_equal(est.feature_map_.transform(X), ref.transform(X))
    folds = fold_ids(np.arange(N), K, est.fold_seed_)
    brute = brute_force_cv(ref.transform(X), y, folds)
    gi = [0.1, 1.0].index(est.gamma_)
    np.testing.assert_allclose(est.cv_results_["fold_mse"][gi], brute, rtol=1e-7)


# --- gammas="auto": the grid around the (resolved) gamma (issue 29, item 4) ---------------

@pytest.mark.parametrize("gamma", ["median", "scale", 0.3])
@pytest.mark.parametrize("standardize", [True, False])
def test_auto_gamma_grid_is_the_explicit_grid_around_the_gamma_or_its_rule(data, gamma, standardize):
    from dkrr.linalg._cv import AUTO_GAMMA_FACTORS

    X, y = data
    params = dict(method="orf", n_components=D, gamma=gamma, standardize=standardize, cv=K, random_state=5)
    centre = RandomFeatureRidge(**params).fit(X, y).gamma_  # the rule's value (or gamma itself)
    auto = RandomFeatureRidge(gammas="auto", **params).fit(X, y)
    explicit = RandomFeatureRidge(gammas=list(centre * AUTO_GAMMA_FACTORS), **params).fit(X, y)
    assert len(AUTO_GAMMA_FACTORS) >= 3 and AUTO_GAMMA_FACTORS[len(AUTO_GAMMA_FACTORS) // 2] == 1.0
    np.testing.assert_array_equal(auto.cv_results_["gammas"], centre * AUTO_GAMMA_FACTORS)
    for key in ("alphas", "fold_mse", "mean_mse"):
        np.testing.assert_array_equal(auto.cv_results_[key], explicit.cv_results_[key])
    assert auto.gamma_ == explicit.gamma_ and auto.alpha_ == explicit.alpha_
    np.testing.assert_array_equal(auto.coef_, explicit.coef_)


def test_a_model_file_of_the_earlier_five_width_auto_grid_still_loads(tmp_path):
    """``gammas="auto"`` was ``2**(-2..2)`` before it became ``2**(-3..2)``: a model file
    written then (tests/data/models_v2/ridge_gammas_auto_5widths, saved by commit 83be4d9)
    records five widths. Its check accepts that grid, the model predicts as the same fit
    with those five widths given explicitly does today, and it saves again (a width off
    that grid is refused: tests/test_model_agreement.py)."""
    from pathlib import Path

    from dkrr.io._model import load_model, save_model

    src = Path(__file__).parent / "data" / "models_v2" / "ridge_gammas_auto_5widths"
    old = load_model(src)
    g = np.asarray(old.cv_results_["gammas"])
    assert old.gammas == "auto" and g.size == 5
    np.testing.assert_allclose(g, g[2] * 2.0 ** np.arange(-2, 3), rtol=1e-12)
    rng = np.random.default_rng(0)  # the rows the file was fitted on
    X = rng.standard_normal((120, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(120)
    params = {k: v for k, v in old.get_params().items() if k != "gammas"}
    today = RandomFeatureRidge(**{**params, "gammas": list(g)}).fit(X, y)
    # the same fit; the last digits may differ with another numpy (the oldest-dependency job),
    # and the default alpha grid follows the float32 statistics' trace, whose rounding
    # differs by CPU (3e-8 relative measured on an AVX-512 machine, oldest dependencies, and
    # the predictions at that alpha 2.5e-8)
    assert today.gamma_ == old.gamma_ and today.alpha_ == pytest.approx(old.alpha_, rel=1e-6)
    np.testing.assert_allclose(today.predict(X), old.predict(X), rtol=1e-6, atol=1e-12)
    save_model(old, tmp_path / "again")
    np.testing.assert_array_equal(load_model(tmp_path / "again").predict(X), old.predict(X))


def test_a_gamma_grid_scores_every_model_of_its_middle_gamma_alone(data):
    """The default alpha grid of a gamma grid follows the middle width's Gram: the single
    gamma's CV table is the middle row of the grid's (so the grid can only choose better
    by CV)."""
    X, y = data
    params = dict(method="rff", n_components=D, gamma="median", standardize=True, cv=K, random_state=1)
    single = RandomFeatureRidge(**params).fit(X, y)
    auto = RandomFeatureRidge(gammas="auto", **params).fit(X, y)
    np.testing.assert_array_equal(auto.cv_results_["alphas"], single.cv_results_["alphas"])
    middle = int(np.argsort(auto.cv_results_["gammas"])[len(auto.cv_results_["gammas"]) // 2])
    np.testing.assert_allclose(auto.cv_results_["mean_mse"][middle], single.cv_results_["mean_mse"], rtol=1e-12)
    assert auto.best_score_ >= single.best_score_


def test_unknown_gamma_grid_word_is_refused(data):
    X, y = data
    with pytest.raises(InvalidParameterError, match=r"gammas='wide' is neither 'auto'"):
        RandomFeatureRidge(method="rff", n_components=D, gammas="wide", cv=K).fit(X, y)
    with pytest.raises(InvalidParameterError, match="cv is None"):
        RandomFeatureRidge(method="rff", n_components=D, gammas="auto").fit(X, y)


def test_auto_grid_that_does_not_fit_names_the_way_to_one_gamma(data):
    """A Gram path too large for memory cannot fall back to PCG with a gamma grid: the
    refusal names gammas='auto' (not five numbers the user never wrote) and the fix."""
    from dkrr.errors import MemoryBudgetError
    from dkrr.estimators._solver import choose_solver
    from dkrr.linalg._cv import AUTO_GAMMA_FACTORS

    X, y = data
    Xd, yd = as_row_chunked(X, y)
    est = RandomFeatureRidge(n_components=512, cv=5, gamma="median", gammas="auto")
    with pytest.raises(MemoryBudgetError, match=r"gammas='auto' is not cross-validated by solver='pcg'.*--gammas none"):
        choose_solver(est, Xd, yd, None, 5, 1.0, None, AUTO_GAMMA_FACTORS, limits=(None, 30 * 2**20))


def test_a_noise_free_target_scores_no_negative_mse_and_its_model_saves(tmp_path):
    """y = sin(x0) without noise: the SSE expansion cancels, and one (gamma, fold, alpha)
    came out at -7.7e-10. It was kept, and the model failed its own check at save ("fold_mse
    holds NaN or negative values"): `dkrr fit` of such a store ended with an error."""
    import warnings

    from dkrr import load_model, save_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    X[:, 1] = 5.0
    y = np.sin(X[:, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the grid-edge warnings of a noise-free target
        model = RandomFeatureRidge(cv=5, gamma="median", gammas="auto", random_state=0,
                                   standardize=True).fit(X, y)
    fold_mse = np.asarray(model.cv_results_["fold_mse"])
    # the expansion fell below 0 here with the newest numpy and OpenBLAS (-7.7e-10, one fold
    # of one gamma); the oldest set rounds it to +2e-9. The kernel's rule itself: below.
    assert np.all(fold_mse >= 0)
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    np.testing.assert_array_equal(loaded.predict(X[:50]), model.predict(X[:50]))
    assert np.sqrt(np.mean((model.predict(X) - y) ** 2)) < 1e-3


def test_a_model_whose_attributes_disagree_is_not_saved_and_the_message_says_why(data, tmp_path):
    """save_model's check that the model loads back said "The file was changed after it
    was saved" of a model that was never saved (the file's own case is in
    test_model_agreement)."""
    from dkrr.errors import ModelFormatError
    from dkrr.io._model import save_model

    X, y = data
    est = RandomFeatureRidge(method="sorf", n_components=D, alphas=ALPHAS, cv=K, random_state=0).fit(X, y)
    kept = est.cv_results_["fold_mse"][0, 0]
    est.cv_results_["fold_mse"][0, 0] = -1.0
    with pytest.raises(ModelFormatError, match=r"cannot save RandomFeatureRidge: it does not load "
                       r"back: .*model\.cv_results_ disagrees with the rest of the model: .* The "
                       r"estimator's fitted attributes were changed after its fit, or this is a "
                       r"dkrr bug") as info:
        save_model(est, tmp_path / "m")
    assert "was changed after it was saved" not in str(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing half-written
    est.cv_results_["fold_mse"][0, 0] = kept
    save_model(est, tmp_path / "m")


def test_the_scoring_kernel_reads_an_sse_below_zero_as_zero():
    """``yy - 2 beta^T c + beta^T G beta`` of a fit exact to rounding: the three terms cancel,
    and a value below 0 is rounding alone (an SSE is >= 0); a positive one is kept as is."""
    from dkrr.linalg._cv import fold_validation_mse

    B = np.ones((2, 1, 1))  # two coefficient sets, p = 1, one target
    c, yy = np.array([[1.0 + 2**-50]]), np.array([1.0])
    quad = np.array([[1.0], [1.5]])
    raw = yy[0] - 2 * c[0, 0] + quad[:, 0]
    assert raw[0] < 0 and raw[1] == 0.5 - 2 * 2**-50  # the first expansion is below 0 by rounding
    mse = fold_validation_mse(B, quad, c, np.zeros(1), np.zeros(1), yy, 4.0)
    np.testing.assert_array_equal(mse, [0.0, raw[1] / 4.0])
