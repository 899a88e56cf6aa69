"""precision="float32": single-precision features and sub-block Grams summed in float64
(docs/ALGORITHMS.md, section 3.10), against the float64 statistics and models.
precision="auto" (the default: these statistics refined to the float64 solution) is
tested in tests/test_mixed_precision.py."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.datasets import load_casp, load_magic04
from dkrr.errors import InvalidParameterError, PrecisionWarning, SingularAlphaWarning, SingularSystemError
from dkrr.linalg import streamed_statistics
from dkrr.linalg._precision import AUTO_PRECISION_TOL, precision_error
from dkrr.linalg._stats import FLOAT32_SUB_ROWS, block_statistics, check_precision, sub_block_rows
from dkrr.linalg._weighted import streamed_statistics_maps

EPS32 = float(np.finfo(np.float32).eps)


def _rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def casp():
    X, y = load_casp()
    idx = np.random.default_rng(0).permutation(len(y))
    return X[idx[:5000]], y[idx[:5000]], X[idx[5000:7000]], y[idx[5000:7000]]


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((6000, 12))
    y = np.column_stack([np.sin(X[:, 0]) + 0.1 * rng.standard_normal(6000), X[:, 1] ** 2])
    return X, y


@pytest.mark.parametrize("method", ["rff", "orf", "sorf", "fastfood", "nystroem", "rom"])
def test_float32_statistics_equal_float64_within_eps32(blobs, method):
    """The bound: relative Frobenius error of G, of Z^T y and of the column sums at most 2
    eps32 (measured 0.4-1.2 eps32 here, the rounding of the float32 features included; the
    column sums up to 1.03 eps32, ROM, in the oldest dependencies on an AVX-512 machine),
    counts exact."""
    X, y = blobs
    kernel = "linear" if method == "rom" else "gaussian"
    gamma = {"gamma": 0.1} if kernel == "gaussian" else {}
    fm = RandomFeatures(method=method, kernel=kernel, n_components=128, random_state=0,
                        **gamma).fit(X[:500]).feature_map_
    s64 = block_statistics(X, y, 0, 0, fm, n_folds=3, fold_seed=7).symmetrized()  # G unpacked
    s32 = block_statistics(X, y, 0, 0, fm, n_folds=3, fold_seed=7, precision="float32").symmetrized()
    assert s32.G.dtype == np.float64 and s32.c.dtype == np.float64
    np.testing.assert_array_equal(s32.n, s64.n)
    for k in range(3):
        assert _rel(s32.G[k], s64.G[k]) <= 2 * EPS32
        assert _rel(s32.c[k], s64.c[k]) <= 2 * EPS32
        assert _rel(s32.zsum[k], s64.zsum[k]) <= 2 * EPS32
        assert _rel(s32.G[k], s64.G[k]) > 0  # really computed in float32
        np.testing.assert_array_equal(s32.G[k], s32.G[k].T)


def test_float32_sub_blocks_are_bounded():
    assert sub_block_rows(10**6, 256, 64 * 2**20, "float32") == FLOAT32_SUB_ROWS
    assert sub_block_rows(10**6, 256, 64 * 2**20, "float64") == 64 * 2**20 // (8 * 256)
    assert sub_block_rows(10**6, 2**16, 2**20, "float32") == 4  # the byte budget binds first
    assert sub_block_rows(3, 256, 64 * 2**20, "float32") == 3


def test_float32_sums_do_not_grow_with_the_number_of_sub_blocks(blobs):
    """Sub-block products are summed in float64: 24 sub-blocks of 250 rows have the same
    relative error level as one of 6,000 (no eps32 * sqrt(number of blocks) growth)."""
    X, y = blobs
    fm = RandomFeatures(method="rff", n_components=128, gamma=0.1, random_state=0).fit(X).feature_map_
    s64 = block_statistics(X, y, 0, 0, fm).symmetrized()
    small = block_statistics(X, y, 0, 0, fm, precision="float32", max_block_bytes=250 * 4 * 256).symmetrized()
    assert _rel(small.G[0], s64.G[0]) <= 2 * EPS32


def test_weighted_and_gamma_grid_passes_take_the_precision(blobs):
    X, y = blobs
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(X))
    fm = RandomFeatures(method="orf", n_components=64, gamma=0.1, random_state=0).fit(X).feature_map_
    maps = [fm.with_gamma(g) for g in (0.05, 0.2)]
    Xd, yd, wd = da.from_array(X, chunks=1500), da.from_array(y, chunks=(1500, 2)), da.from_array(w, chunks=1500)
    s64 = streamed_statistics_maps(Xd, yd, maps, sample_weight=wd, n_folds=2)
    s32 = streamed_statistics_maps(Xd, yd, maps, sample_weight=wd, n_folds=2, precision="float32")
    for a, b in zip(s32, s64):
        assert 0 < _rel(a.G, b.G) <= 2 * EPS32
        assert _rel(a.c, b.c) <= 2 * EPS32
        np.testing.assert_allclose(a.wsum, b.wsum, rtol=1e-15)


def test_dask_input_equals_numpy_input(blobs):
    X, y = blobs
    kw = dict(n_components=64, gamma=0.1, alpha=1.0, random_state=0, precision="float32", chunk_rows=1000)
    a = RandomFeatureRidge(**kw).fit(X, y[:, 0])
    b = RandomFeatureRidge(**kw).fit(da.from_array(X, chunks=(1000, 12)), da.from_array(y[:, 0], chunks=1000))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    # another chunking regroups the float32 sub-blocks: both fits stay within the estimate
    # of the float64 one, so within twice it of each other
    c = RandomFeatureRidge(**{**kw, "chunk_rows": 700}).fit(X, y[:, 0])
    assert 0 < _rel(c.coef_, a.coef_) <= 2 * a.precision_error_


def test_streamed_statistics_refuses_an_unknown_precision(blobs):
    X, y = blobs
    fm = RandomFeatures(method="rff", n_components=16, gamma=0.1, random_state=0).fit(X).feature_map_
    with pytest.raises(InvalidParameterError, match="precision must be one of 'float64', 'float32'.*'half'"):
        streamed_statistics(da.from_array(X, chunks=3000), da.from_array(y, chunks=(3000, 2)), fm, precision="half")
    with pytest.raises(InvalidParameterError):
        check_precision(np.float32)


@pytest.mark.parametrize("bad", ["float16", "double", 32, None])
def test_estimator_refuses_an_unknown_precision(blobs, bad):
    X, y = blobs
    with pytest.raises(InvalidParameterError, match="precision"):
        RandomFeatureRidge(n_components=16, precision=bad).fit(X[:100], y[:100, 0])


@pytest.mark.parametrize("extra", [{"solver": "pcg"}, {"sampling": "surrogate_leverage"}])
def test_float32_refused_where_the_passes_are_float64_only(blobs, extra):
    X, y = blobs
    with pytest.raises(InvalidParameterError, match="precision='float32' is not available with"):
        RandomFeatureRidge(n_components=16, precision="float32", **extra).fit(X[:200], y[:200, 0])


def test_error_estimate_bounds_the_actual_change_of_the_coefficients(casp):
    """precision_error_ (eps32 (||G||_F / alpha + 20)) is at least the measured relative
    change of the coefficients against the float64 fit, over eight decades of alpha."""
    X, y, _, _ = casp
    base = dict(n_components=256, gamma="median", standardize=True, random_state=0)
    for alpha in [1e-4, 1e-2, 1.0, 1e2, 1e4]:
        m64 = RandomFeatureRidge(alpha=alpha, precision="float64", **base).fit(X, y)
        m32 = RandomFeatureRidge(alpha=alpha, precision="float32", **base).fit(X, y)
        actual = _rel(m32.coef_, m64.coef_)
        assert m32.precision_ == "float32" and m64.precision_ == "float64"
        assert actual <= m32.precision_error_, (alpha, actual, m32.precision_error_)
        assert m64.precision_error_ < 1e-6 * m32.precision_error_


def test_coefficients_and_r2_at_a_regularised_alpha(casp):
    """Where the estimate is below 1e-2 (alpha >= about s * 1e-2 here) the coefficients
    move by less than 1e-3 (relative) and the test R^2 by less than 1e-4."""
    X, y, Xt, yt = casp
    base = dict(n_components=256, gamma="median", standardize=True, random_state=0, alpha=1.0)
    m64 = RandomFeatureRidge(precision="float64", **base).fit(X, y)
    m32 = RandomFeatureRidge(precision="float32", **base).fit(X, y)
    assert m32.precision_error_ <= AUTO_PRECISION_TOL
    assert _rel(m32.coef_, m64.coef_) < 1e-3
    assert abs(m32.score(Xt, yt) - m64.score(Xt, yt)) < 1e-4


def test_cv_chooses_the_same_alpha_on_casp_and_magic04(casp):
    Xc, yc, _, _ = casp
    Xm, ym = load_magic04()
    idx = np.random.default_rng(0).permutation(len(ym))[:5000]
    base = dict(n_components=256, gamma="median", standardize=True, cv=5, random_state=0)
    for est, X, y in [(RandomFeatureRidge, Xc, yc), (RandomFeatureRidgeClassifier, Xm[idx], ym[idx])]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = est(precision="float64", **base).fit(X, y)
            b = est(precision="float32", **base).fit(X, y)
        ia = int(np.argmin(a.cv_results_["mean_mse"]))
        ib = int(np.argmin(b.cv_results_["mean_mse"]))
        assert ia == ib
        np.testing.assert_allclose(b.alpha_, a.alpha_, rtol=1e-6)  # the grid follows trace(G)
        np.testing.assert_allclose(b.cv_results_["mean_mse"][ia], a.cv_results_["mean_mse"][ia], rtol=1e-4)


def test_classifier_float32_predicts_as_float64():
    Xm, ym = load_magic04()
    idx = np.random.default_rng(1).permutation(len(ym))
    X, y, Xt = Xm[idx[:4000]], ym[idx[:4000]], Xm[idx[4000:6000]]
    base = dict(n_components=128, gamma="median", standardize=True, alpha=1.0, random_state=0)
    a = RandomFeatureRidgeClassifier(precision="float64", **base).fit(X, y)
    b = RandomFeatureRidgeClassifier(precision="float32", **base).fit(X, y)
    assert np.mean(a.predict(Xt) == b.predict(Xt)) > 0.999
    assert b.precision_ == "float32"


def test_precision_error_formula():
    class S:
        G = np.array([[[3.0, 0.0], [0.0, 4.0]]])

    assert precision_error(S, 2.0, "float32") == pytest.approx(EPS32 * (5.0 / 2.0 + 20))
    assert precision_error(S, 0.0, "float32") == float("inf")
    S.G = None
    assert np.isnan(precision_error(S, 1.0, "float32"))


def test_model_files_keep_the_precision(tmp_path, casp):
    from dkrr.io._model import load_model, save_model

    X, y, Xt, _ = casp
    est = RandomFeatureRidge(n_components=32, gamma=0.1, random_state=0, precision="float32").fit(X, y)
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.precision == "float32" and back.precision_ == "float32"
    assert back.precision_error_ == est.precision_error_
    np.testing.assert_array_equal(back.predict(Xt), est.predict(Xt))


@pytest.fixture(scope="module")
def casp_wide():
    """8,000 CASP rows at D = 1024: the bottom of the default alpha grid (s 1e-7) is below
    the float32 statistics' rounding, which makes a training Gram indefinite there."""
    X, y = load_casp()
    idx = np.random.default_rng(0).permutation(len(y))[:8000]
    return X[idx], y[idx]


@pytest.mark.slow
def test_float32_cv_scores_alphas_below_its_rounding_as_inf(casp_wide):
    """Found by the speed benchmark: the float32 CV failed with SingularSystemError on the
    grid's smallest alpha. Those alphas are now scored inf and the choice is float64's. Of
    the default grid they are not warned about, the best alpha being far above them; the
    same alphas given explicitly are (SingularAlphaWarning)."""
    X, y = casp_wide
    base = dict(n_components=1024, cv=5, standardize=True, gamma="median", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m64 = RandomFeatureRidge(precision="float64", **base).fit(X, y)
    with warnings.catch_warnings(record=True) as quiet:
        warnings.simplefilter("always")
        m32 = RandomFeatureRidge(precision="float32", **base).fit(X, y)
    assert not [w for w in quiet if issubclass(w.category, SingularAlphaWarning)], [str(w.message) for w in quiet]
    mean = m32.cv_results_["mean_mse"]
    bad = ~np.isfinite(mean)
    assert bad[0] and not bad.all() and np.isfinite(m64.cv_results_["mean_mse"]).all()
    assert m32.alpha_ == pytest.approx(m64.alpha_, rel=1e-6)
    with pytest.warns(SingularAlphaWarning, match="scored inf") as rec:
        explicit = RandomFeatureRidge(precision="float32", alphas=list(m32.cv_results_["alphas"]), **base).fit(X, y)
    assert str(float(f"{m32.cv_results_['alphas'][0]:.4g}")) in str(rec[0].message)
    assert explicit.alpha_ == m32.alpha_
    # the alphas just above the float32 rounding score with a few % noise (far from the
    # best), those near the choice agree with float64's, within a rounding effect that grows
    # like 1 / alpha (the statistics' error against G + alpha I): measured about 1e-7 at the
    # choice, 3e-6, 2e-5 and 1.25e-4 one, two and three decades below it since 16d59f7 cut
    # each fold's rows into sub-blocks of their own (a flat 1e-4, which this test allowed,
    # had held for the earlier cuts by their rounding alone; found by the slow suite)
    alphas = m32.cv_results_["alphas"]
    near = alphas >= 1e-3 * m32.alpha_
    change = np.abs(mean[near] / m64.cv_results_["mean_mse"][near] - 1)
    np.testing.assert_array_less(change, 1e-6 * np.maximum(m32.alpha_ / alphas[near], 1.0))
    assert (mean[~bad & ~near] > 2 * mean.min()).all()


def test_float32_solve_failure_names_the_precision(casp_wide):
    X, y = casp_wide
    est = RandomFeatureRidge(n_components=1024, alpha=1e-7, standardize=True, gamma="median", random_state=0,
                             precision="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrecisionWarning)
        with pytest.raises(SingularSystemError, match="statistics are float32.*precision='float64' or 'auto'"):
            est.fit(X, y)


def test_explicit_float32_warns_when_the_estimate_is_large(casp):
    X, y, _, _ = casp
    est = RandomFeatureRidge(n_components=128, gamma="median", standardize=True, random_state=0, alpha=1e-5,
                             precision="float32")
    with pytest.warns(PrecisionWarning, match="precision='float32'.*above 0.01"):
        est.fit(X, y)
    assert est.precision_ == "float32" and est.precision_error_ > AUTO_PRECISION_TOL


def test_cross_validation_with_an_indefinite_fold():
    """A fold whose training Gram has a negative eigenvalue (rounding): the alphas below it
    are inf, the others scored as usual; no usable alpha at all is an error."""
    from dkrr.linalg import cross_validate_statistics
    from dkrr.linalg._stats import RidgeStatistics

    rng = np.random.default_rng(0)
    K, p = 3, 6
    stats = RidgeStatistics.zeros(K, p, 1)
    for k in range(K):
        Z = rng.standard_normal((20, p))
        yk = rng.standard_normal((20, 1))
        stats.G[k], stats.c[k], stats.zsum[k] = Z.T @ Z, Z.T @ yk, Z.sum(0)
        stats.n[k], stats.ysum[k], stats.yy[k] = 20, yk.sum(0), (yk**2).sum(0)
    good = cross_validate_statistics(stats, [1e-3, 1.0, 10.0], fit_intercept=False)
    # make the training Gram of fold 0 (G_1 + G_2) have eigenvalue -0.5 along one direction
    G_train = stats.G[1] + stats.G[2]
    lam, V = np.linalg.eigh(G_train)
    stats.G[1] -= (lam[0] + 0.5) * np.outer(V[:, 0], V[:, 0])
    with pytest.warns(SingularAlphaWarning, match=r"alphas \[0\.001\].*fold 0"):
        mse = cross_validate_statistics(stats, [1e-3, 1.0, 10.0], fit_intercept=False)
    assert mse[0, 0] == np.inf and np.isfinite(mse[:, 1:]).all() and np.isfinite(good).all()
    with pytest.raises(SingularSystemError, match="fold 0"):
        cross_validate_statistics(stats, [1e-3, 0.1], fit_intercept=False)


def test_the_default_grid_says_unscorable_alphas_only_when_the_best_is_next_to_them():
    """Of dkrr's default grid (``default_grid=True``) the alphas scored inf are said only
    when the best scored alpha is the least scored one (the best may lie below it);
    a grid the user gave is always warned about."""
    import warnings as _w

    from dkrr.linalg import cross_validate_statistics
    from dkrr.linalg._stats import RidgeStatistics

    rng = np.random.default_rng(0)
    K, p = 3, 6
    stats = RidgeStatistics.zeros(K, p, 1)
    for k in range(K):
        Z = rng.standard_normal((20, p))
        yk = Z @ rng.standard_normal((p, 1)) + 0.5 * rng.standard_normal((20, 1))
        stats.G[k], stats.c[k], stats.zsum[k] = Z.T @ Z, Z.T @ yk, Z.sum(0)
        stats.n[k], stats.ysum[k], stats.yy[k] = 20, yk.sum(0), (yk**2).sum(0)
    G_train = stats.G[1] + stats.G[2]
    lam, V = np.linalg.eigh(G_train)
    stats.G[1] -= (lam[0] + 0.5) * np.outer(V[:, 0], V[:, 0])  # fold 0's training Gram: eigenvalue -0.5
    dense = [1e-3] + [2.0**k for k in range(12)]  # a user's grid: the inf one is said
    with pytest.warns(SingularAlphaWarning, match=r"^alphas \[0\.001\] leave"):
        mse = cross_validate_statistics(stats, dense, fit_intercept=False)
    assert mse[0, 0] == np.inf and np.isfinite(mse[:, 1:]).all()
    b = dense[int(np.argmin(mse[:, 1:].mean(axis=0))) + 1]
    assert 1.0 < b < dense[-1]  # an interior best, above the least scored alpha (1)
    quiet_grid = [1e-3, 1.0, b, 1e4]  # the best has a scored alpha below it: not said
    with _w.catch_warnings():
        _w.simplefilter("error", SingularAlphaWarning)
        out = cross_validate_statistics(stats, quiet_grid, fit_intercept=False, default_grid=True)
    assert out[0, 0] == np.inf and int(np.argmin(out[:, 1:].mean(axis=0))) + 1 == 2
    edge_grid = [1e-3, b, 1e4]  # the best is the least scored alpha: said
    with pytest.warns(SingularAlphaWarning, match=r"best scored alpha of dkrr's default grid.*\[0\.001\]"):
        cross_validate_statistics(stats, edge_grid, fit_intercept=False, default_grid=True)
    with pytest.warns(SingularAlphaWarning, match=r"^alphas \[0\.001\].*precision='float64' scores smaller"):
        cross_validate_statistics(stats, quiet_grid, fit_intercept=False)


@pytest.mark.parametrize("weights, said", [((9.0, 1.0), True), ((1.0, 9.0), False)])
def test_the_default_grids_rule_takes_the_best_alpha_as_select_alpha_does(weights, said):
    """"The best scored alpha" of the default grid's rule is select_alpha's: the fold-weighted
    mean. Fold 0 (MSE 1.0 at 1e-3, 2.5 at 0.1) against fold 1 (10.0 and 1.0): by 9 : 1
    weights the least scored alpha is best and the inf one is said, by 1 : 9 it is not;
    the unweighted mean (5.5 against 1.75) would say neither."""
    from dkrr.linalg._cv import report_unusable, select_alpha

    alphas = np.array([1e-6, 1e-3, 1e-1])
    mse = np.array([[np.inf, 1.0, 2.5], [np.inf, 10.0, 1.0]])
    assert (select_alpha(alphas[1:], mse[:, 1:], weights)[0] == 0) == said
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        report_unusable(alphas, mse, np.array([-1.0, -1.0]), np.array(weights), default_grid=True)
    assert [issubclass(w.category, SingularAlphaWarning) for w in got] == ([True] if said else [])


def test_a_default_fit_says_nothing_of_alphas_unscored_at_gammas_it_did_not_choose():
    """The CLI's defaults (gammas="auto", cv=5, standardize, the median width) on float32
    data: four of the six gammas cannot score the two least alphas of the default grid, and
    two of them score best at their least scored alpha; the chosen gamma scores best inside
    its grid. The fit used to give two SingularAlphaWarnings (one per such gamma) that said
    the best alpha may be unscored, of gammas whose models were not chosen: now none."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 5))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(3000)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        est = RandomFeatureRidge(random_state=0, cv=5, gammas="auto", standardize=True, gamma="median").fit(
            X.astype(np.float32), y)
    mean = est.cv_results_["mean_mse"]
    g = list(est.cv_results_["gammas"]).index(est.gamma_)
    unscored = ~np.isfinite(mean)
    edge = [j for j in range(len(mean)) if unscored[j].any()
            and np.argmin(np.where(unscored[j], np.inf, mean[j])) == np.flatnonzero(~unscored[j])[0]]
    assert edge and g not in edge  # the case: unscored alphas might hold the best of other gammas only
    assert not any(issubclass(w.category, SingularAlphaWarning) for w in got), [str(w.message) for w in got]


def test_a_gamma_whose_every_alpha_is_unusable_does_not_fail_the_fit_of_the_others():
    """float32 statistics and alpha 1e-9: the smooth width (gamma 1e-4) cannot score it in
    any fold, the narrow one (gamma 10) can. The fit once raised SingularSystemError for the
    first map; it takes the second. Alone, the smooth width is still an error."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1500, 4))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(1500)

    def fit(gammas):
        return RandomFeatureRidge(random_state=0, n_components=128, gammas=gammas, alphas=[1e-9], cv=3,
                                  precision="float32").fit(X, y)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the grid's edge, float32's precision estimate
        est = fit([1e-4, 10.0])
    mean = est.cv_results_["mean_mse"]
    assert est.gamma_ == 10.0 and mean[0, 0] == np.inf and np.isfinite(mean[1, 0])
    with pytest.raises(SingularSystemError):
        fit([1e-4])


def test_a_gamma_grid_reports_the_chosen_gammas_unscored_alphas_once():
    """A grid of maps (gammas): the unscored alphas of the map the fit takes are said, once;
    those of the other maps are not (they once gave one warning per gamma, each naming an
    edge the chosen model did not have). The error only when no map has a usable alpha:
    one gamma whose every alpha is unusable no longer fails the fit of the others."""
    from dkrr.errors import SingularSystemError
    from dkrr.linalg._cv import report_unusable

    alphas = np.array([1e-6, 1e-3, 1e-1])
    inf = np.inf
    mse = np.array([[[inf, 1.0, 2.0], [inf, 1.0, 2.0]],  # map 0: its best is its least scored alpha
                    [[inf, 0.9, 0.5], [inf, 0.9, 0.5]],  # map 1, the grid's best: inside its scores
                    [[inf, inf, inf], [inf, inf, inf]]])  # map 2: nothing usable
    lam = np.array([[-1.0, -2.0], [-3.0, -1.0], [-5.0, -4.0]])
    w = np.array([1.0, 1.0])

    def said(chosen, default_grid):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            report_unusable(alphas, mse, lam, w, default_grid=default_grid, chosen=chosen)
        return [str(g.message) for g in got if issubclass(g.category, SingularAlphaWarning)]

    assert said(1, True) == []  # the chosen map's best alpha is scored within: nothing to say
    assert len(said(1, False)) == 1 and "fold 0" in said(1, False)[0]  # a user's grid: once, map 1's fold
    assert len(said(0, True)) == 1 and "[1e-06]" in said(0, True)[0]
    with pytest.raises(SingularSystemError, match="of 3 maps, none has one"):
        report_unusable(alphas, np.full_like(mse, inf), lam, w, chosen=0)
    with pytest.raises(SingularSystemError):  # one map: as before
        report_unusable(alphas, mse[2], lam[2], w)


@pytest.mark.parametrize("grid", ["given", "default"])
def test_evidence_says_the_alphas_below_float32s_rounding_as_the_k_fold_cv_does(grid):
    """cv='evidence' under the default precision scored the alphas below float32's rounding
    -inf and took the least scored one without a word, where float64 chose two decades lower
    with 100 nats more evidence (found by a probe of the API: a target without noise). It
    now says them as the K-fold CV does: always of a grid the user gives, of the default grid
    when the best scored alpha is the least scored one. float64, which scores them, says
    nothing of the kind. (Since the float32 choice is kept only where the float32 solution
    there is within 1e-2 of float64's, precision='auto' repeats such a fit in float64 and
    chooses as float64: the float32 statistics' own choice is precision='float32''s.)"""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 3))
    y = np.sin(2 * X[:, 0])
    alphas = [2.4e-7, 2.4e-6, 2.4e-5, 1e-3] if grid == "given" else None
    base = dict(n_components=60, gamma=0.5, random_state=0, cv="evidence", alphas=alphas)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        f32 = RandomFeatureRidge(precision="float32", **base).fit(X, y)
        said = [str(w.message) for w in got if issubclass(w.category, SingularAlphaWarning)]
    logev = f32.cv_results_["log_evidence"]
    assert np.isneginf(logev[:2]).all() and np.isfinite(logev[2:]).all()
    assert f32.alpha_ == f32.cv_results_["alphas"][2]  # the least scored alpha won
    assert len(said) == 1, said
    lead = "the best scored alpha of dkrr's default grid is the least one it could score, and " if grid == "default" else ""
    assert said[0].startswith(f"{lead}alphas [2.4"), said[0]
    assert "G_c + alpha*I" in said[0] and "-inf (log evidence)" in said[0] and "precision='float64'" in said[0]
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        f64 = RandomFeatureRidge(precision="float64", **base).fit(X, y)
    assert not [w for w in got if issubclass(w.category, SingularAlphaWarning)]
    assert np.isfinite(f64.cv_results_["log_evidence"]).all() and f64.alpha_ < f32.alpha_
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        auto = RandomFeatureRidge(**base).fit(X, y)
    precision = [str(w.message) for w in got if w.category is PrecisionWarning]
    assert len(precision) == 1 and not [w for w in got if issubclass(w.category, SingularAlphaWarning)]
    assert f"the cross-validation chose alpha={f32.alpha_:.3g}" in precision[0]  # float64's grid edge is said too
    assert auto.precision_ == "float64" and auto.alpha_ == f64.alpha_
    np.testing.assert_array_equal(auto.coef_, f64.coef_)


def test_evidence_says_nothing_of_unscored_alphas_of_the_default_grid_far_below_its_choice():
    """With noise the evidence's best alpha lies far above float32's rounding: the default
    grid's unscored bottom is not said (as for the K-fold CV), and the choice is float64's."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 3))
    y = np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(400)
    base = dict(n_components=60, gamma=0.5, random_state=0, cv="evidence")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        auto = RandomFeatureRidge(**base).fit(X, y)
    assert not [w for w in got if issubclass(w.category, SingularAlphaWarning)], [str(w.message) for w in got]
    logev = auto.cv_results_["log_evidence"]
    assert np.isneginf(logev[:2]).all() and np.argmax(logev) > 2  # unscored, and far below the choice
    f64 = RandomFeatureRidge(precision="float64", **base).fit(X, y)
    assert auto.alpha_ == pytest.approx(f64.alpha_, rel=1e-6)


@pytest.mark.parametrize("targets", [1, 2, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_product_adds_the_column_sums_over_every_widened_slice(dtype, targets):
    """``_cross64(..., sums=)``: ``Z^T Y`` and Z's column sums, for float32 ``Z`` up to
    CROSS_ROWS_MAX_TARGETS targets by the compiled row loop, beyond from several slices of
    the cast buffer, and in one product for float64: the sums equal float64's of the same
    numbers to float64 rounding, and are added to what ``sums`` held."""
    from dkrr.linalg._precision import CROSS_ROWS_MAX_TARGETS, _cross64, cast_buffer

    assert (targets <= CROSS_ROWS_MAX_TARGETS) == (targets < 5)  # both float32 paths are covered
    rng = np.random.default_rng(3)
    p = 96
    cast = cast_buffer(p, "float32")
    rows = 2 * cast.shape[0] + 37  # two full slices and a short one
    Z = (rng.standard_normal((rows, p)) + 0.5).astype(dtype)
    Y = rng.standard_normal((rows, targets))
    Z64 = Z.astype(np.float64)
    sums = np.full(p, 3.0)
    out = _cross64(Z, Y, cast, sums=sums)
    assert out.shape == (p, targets) and out.dtype == np.float64
    np.testing.assert_allclose(out, Z64.T @ Y, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(sums, 3.0 + Z64.sum(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(_cross64(Z, Y, cast), out)  # without sums: the same product
