"""Predictive uncertainty and evidence-based selection of RandomFeatureRidge (issue 27):
the std against the closed form on the model's own features, dask = numpy, model files,
cv="evidence" against a brute-force choice, clear refusals."""

import dask.array as da
import numpy as np
import pytest
import scipy.linalg
from scipy.stats import multivariate_normal

from dkrr import RandomFeatureRidge
from dkrr.errors import InvalidParameterError


def _data(n=300, d=3, seed=0, t=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    y = f + 0.3 * rng.normal(size=n) + 4.0
    if t:
        y = np.column_stack([y, np.cos(X[:, 2]) + 0.1 * rng.normal(size=n)])
    return X, y


def _closed_form(est, X, y, Xt):
    """The predictive std recomputed from the model's own features (numpy, float64)."""
    Z, Zt = est.feature_map_.transform(X), est.feature_map_.transform(Xt)
    mu = Z.mean(0)
    Zc, yc = Z - mu, y - y.mean(0)
    A = Zc.T @ Zc + est.alpha_ * np.eye(Z.shape[1])
    beta = np.linalg.solve(A, Zc.T @ yc)
    s2 = ((yc - Zc @ beta) ** 2).sum(0) + est.alpha_ * (beta**2).sum(0)
    s2 = s2 / (len(y) - 1)
    D = Zt - mu
    quad = np.einsum("ij,ij->i", D, np.linalg.solve(A, D.T).T) + 1.0 / len(y)
    return s2, np.sqrt(np.multiply.outer(quad, np.atleast_1d(s2)) + np.atleast_1d(s2)), np.sqrt(np.multiply.outer(quad, np.atleast_1d(s2)))


def test_std_equals_the_closed_form_on_the_models_own_features():
    X, y = _data()
    Xt = np.random.default_rng(7).normal(size=(40, 3))
    est = RandomFeatureRidge(precision="float64", n_components=40, gamma=0.5, alpha=0.3, random_state=0).fit(X, y)
    mean, std = est.predict(Xt, return_std=True)
    _, latent = est.predict(Xt, return_std="latent")
    s2, want, want_latent = _closed_form(est, X, y, Xt)
    np.testing.assert_allclose(est.noise_variance_, s2, rtol=1e-8)
    np.testing.assert_allclose(std, want[:, 0], rtol=1e-8)
    np.testing.assert_allclose(latent, want_latent[:, 0], rtol=1e-8)
    np.testing.assert_allclose(mean, est.predict(Xt), rtol=1e-12)
    assert std.shape == mean.shape == (40,)


def test_multi_target_dask_input_and_chunking_agree_with_numpy():
    X, y = _data(t=2)
    Xt = np.random.default_rng(8).normal(size=(50, 3))
    est = RandomFeatureRidge(precision="float64", n_components=30, gamma=0.5, alpha=0.3, random_state=1).fit(X, y)
    mean, std = est.predict(Xt, return_std=True)
    assert std.shape == (50, 2) and np.shape(est.noise_variance_) == (2,)
    _, want, _ = _closed_form(est, X, y, Xt)
    np.testing.assert_allclose(std, want, rtol=1e-8)
    for chunks in (7, 25):
        dm, ds = est.predict(da.from_array(Xt, chunks=(chunks, 3)), return_std=True)
        assert isinstance(ds, da.Array) and isinstance(dm, da.Array)
        np.testing.assert_allclose(ds.compute(), std, rtol=1e-12)
        np.testing.assert_allclose(dm.compute(), mean, rtol=1e-12)
    # the same model on the same input shares its tasks (tokenized keys)
    Xd = da.from_array(Xt, chunks=(10, 3))
    assert est.predict(Xd, return_std=True)[1].name == est.predict(Xd, return_std=True)[1].name
    # a dask fit gives the same posterior as the numpy fit
    est_d = RandomFeatureRidge(precision="float64", n_components=30, gamma=0.5, alpha=0.3, random_state=1).fit(
        da.from_array(X, chunks=(70, 3)), da.from_array(y, chunks=(70, 2)))
    np.testing.assert_allclose(est_d.predict(Xt, return_std=True)[1], std, rtol=1e-8)


def test_log_marginal_likelihood_is_the_gaussian_density_of_the_contrasts():
    X, y = _data(n=120)
    est = RandomFeatureRidge(precision="float64", n_components=20, gamma=0.5, alpha=0.7, random_state=2).fit(X, y)
    Z = est.feature_map_.transform(X)
    Zc = Z - Z.mean(0)
    n = len(y)
    Q = scipy.linalg.null_space(np.ones((1, n)))
    K = est.noise_variance_ * (np.eye(n - 1) + Q.T @ Zc @ Zc.T @ Q / est.alpha_)
    ref = multivariate_normal(np.zeros(n - 1), K).logpdf(Q.T @ y)
    np.testing.assert_allclose(est.log_marginal_likelihood_, ref, rtol=1e-9)


def test_cv_evidence_chooses_the_largest_evidence_of_the_grid():
    X, y = _data(n=400)
    alphas = [1e-5, 1e-3, 1e-1, 1.0, 10.0, 100.0]
    gammas = [0.005, 0.02, 0.05, 0.2, 0.8]
    est = RandomFeatureRidge(n_components=30, gamma=0.5, cv="evidence", alphas=alphas, gammas=gammas,
                             random_state=3).fit(X, y)
    r = est.cv_results_
    assert r["log_evidence"].shape == (5, 6) and r["noise_variance"].shape == (5, 6, 1)
    # brute force: refit every (gamma, alpha) without selection and read its evidence
    best = max(((RandomFeatureRidge(n_components=30, gamma=g, alpha=a, random_state=3).fit(X, y)
                 .log_marginal_likelihood_, g, a) for g in gammas for a in alphas))
    assert (est.gamma_, est.alpha_) == (best[1], best[2])
    # the grid is scored from the float32 statistics (precision="auto"); the final model's
    # evidence from the refinement's float64 residual, as the brute-force fit's, and the log
    # determinant of the float32 factor: where the gamma grid's pass and the single map's
    # pass round their float32 statistics differently (the oldest dependencies on an
    # AVX-512 machine: 1.1e-5 apart) the two agree to that rounding, elsewhere to 1e-9
    np.testing.assert_allclose(est.best_score_, best[0], rtol=1e-4)
    np.testing.assert_allclose(est.log_marginal_likelihood_, best[0], rtol=1e-4)
    gi, ai = gammas.index(est.gamma_), alphas.index(est.alpha_)
    np.testing.assert_allclose(r["log_evidence"][gi, ai], best[0], rtol=1e-4)
    assert r["log_evidence"][gi, ai] == est.best_score_


def test_model_files_keep_the_posterior(tmp_path):
    from dkrr.io._model import load_model, save_model

    X, y = _data()
    Xt = np.random.default_rng(9).normal(size=(20, 3))
    for params in (dict(alpha=0.3), dict(cv="evidence", gammas="auto", gamma="median")):
        est = RandomFeatureRidge(n_components=20, random_state=4, **params).fit(X, y)
        path = save_model(est, tmp_path / f"m{len(params)}.model")
        back = load_model(path)
        for a, b in zip(est.predict(Xt, return_std=True), back.predict(Xt, return_std=True)):
            np.testing.assert_array_equal(a, b)
        assert back.log_marginal_likelihood_ == est.log_marginal_likelihood_


def test_return_std_takes_numpy_bools_as_bools_and_refuses_numbers():
    """np.True_ is True (the observation's std, not the latent one it gave when only
    ``is True`` was tested), np.False_ is False; 1 and 1.0, which equal True, are refused."""
    X, y = _data(n=200)
    est = RandomFeatureRidge(n_components=20, alpha=0.3, random_state=0).fit(X, y)
    obs, latent = est.predict(X[:5], return_std=True)[1], est.predict(X[:5], return_std="latent")[1]
    assert np.all(obs > latent)
    np.testing.assert_array_equal(est.predict(X[:5], return_std=np.True_)[1], obs)
    np.testing.assert_array_equal(est.predict(X[:5], return_std=np.False_), est.predict(X[:5]))
    for value in (1, 1.0, 0, "True"):
        with pytest.raises(InvalidParameterError, match="return_std must be False, True or 'latent'"):
            est.predict(X[:5], return_std=value)


def test_refusals_name_the_reason():
    X, y = _data(n=200)
    pcg = RandomFeatureRidge(n_components=20, alpha=1.0, solver="pcg", random_state=0).fit(X, y)
    with pytest.raises(InvalidParameterError, match="solver='pcg'"):
        pcg.predict(X[:5], return_std=True)
    with pytest.raises(InvalidParameterError, match="cv='evidence'"):
        RandomFeatureRidge(n_components=20, cv="evidence", solver="pcg").fit(X, y)
    with pytest.raises(InvalidParameterError, match="return_std"):
        RandomFeatureRidge(n_components=20).fit(X, y).predict(X[:3], return_std="yes")
    from dkrr import RandomFeatureRidgeClassifier

    with pytest.raises(InvalidParameterError, match="regression criterion"):
        RandomFeatureRidgeClassifier(n_components=20, cv="evidence").fit(X, y > 4)


@pytest.mark.parametrize("precision", ["float64", "auto"])
def test_zero_weight_rows_change_nothing_of_the_bayesian_reading(precision):
    """A row of weight 0 is no observation: n such rows beside the n rows leave the noise
    variance, the evidence, the std and cv="evidence"'s choice as without them. Before,
    the contrasts m counted them: s^2 was halved, the 95% coverage fell from 0.93 to 0.80
    and cv="evidence" chose alpha 3.2e-5 for 1.8e-4 (an adversarial review's case)."""
    import warnings

    rng = np.random.default_rng(6)
    n = 2000
    X = rng.normal(size=(n, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    Xt = rng.normal(size=(60, 3))
    Xg, yg = np.vstack([X, rng.normal(size=(n, 3))]), np.r_[y, rng.normal(size=n)]
    w = np.r_[np.ones(n), np.zeros(n)]
    kw = dict(n_components=128, gamma=0.5, random_state=0, precision=precision, cv="evidence",
              alphas=np.logspace(-5, 2, 29))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the grid's edges
        alone = RandomFeatureRidge(**kw).fit(X, y)
        padded = RandomFeatureRidge(**kw).fit(Xg, yg, sample_weight=w)
    assert padded.alpha_ == alone.alpha_
    rtol = 1e-9 if precision == "float64" else 3e-4  # float32 statistics (the factor): their rounding
    np.testing.assert_allclose(padded.noise_variance_, alone.noise_variance_, rtol=rtol)
    np.testing.assert_allclose(padded.log_marginal_likelihood_, alone.log_marginal_likelihood_, rtol=rtol)
    np.testing.assert_allclose(padded.predict(Xt, return_std=True)[1], alone.predict(Xt, return_std=True)[1],
                               rtol=rtol)
    np.testing.assert_allclose(padded.coef_, alone.coef_, rtol=1e-6, atol=1e-9 * np.abs(alone.coef_).max())
    if precision == "float64":
        # not continuous at 0 (ALGORITHMS 3.11): weight 1e-12 is an observation in m, so
        # at the same alpha (the coefficients barely move) s^2 is about halved
        fixed = {**{k: v for k, v in kw.items() if k not in ("cv", "alphas")}, "alpha": alone.alpha_}
        tiny = RandomFeatureRidge(**fixed).fit(Xg, yg, sample_weight=np.r_[np.ones(n), np.full(n, 1e-12)])
        np.testing.assert_allclose(tiny.coef_, alone.coef_, rtol=1e-6, atol=1e-9 * np.abs(alone.coef_).max())
        # s^2 = R / m, m the positive-weight rows less the intercept's: n - 1 against 2n - 1
        assert tiny.noise_variance_ == pytest.approx(alone.noise_variance_ * (n - 1) / (2 * n - 1), rel=1e-6)


def test_the_default_precisions_std_is_within_float32s_rounding_of_float64s():
    """ALGORITHMS 3.11: under the default precision the std's factor is the float32
    statistics', so the std differs from float64's by at most about eps32 ||G_c|| / alpha
    (relative), with the noise variance float64's; float64 itself to 1e-8."""
    rng = np.random.default_rng(0)
    n = 5000
    X = rng.normal(size=(n, 4))
    y = np.sin(X[:, 0]) * X[:, 1] + 0.05 * rng.normal(size=n)
    Xt = rng.normal(size=(200, 4))
    for alpha in (1e-3, 3e-5):
        kw = dict(n_components=256, gamma=0.3, alpha=alpha, random_state=0)
        auto = RandomFeatureRidge(**kw).fit(X, y)
        f64 = RandomFeatureRidge(precision="float64", **kw).fit(X, y)
        assert auto.precision_ == "mixed"
        s2, want, _ = _closed_form(f64, X, y, Xt)
        np.testing.assert_allclose(f64.predict(Xt, return_std=True)[1], want[:, 0], rtol=1e-8)
        np.testing.assert_allclose(auto.noise_variance_, f64.noise_variance_, rtol=1e-7)
        Z = f64.feature_map_.transform(X)
        Zc = Z - Z.mean(0)
        bound = np.finfo(np.float32).eps * np.linalg.norm(Zc.T @ Zc, 2) / alpha
        rel = np.abs(auto.predict(Xt, return_std=True)[1] / want[:, 0] - 1).max()
        assert rel <= bound, (alpha, rel, bound)


def test_a_missing_posterior_is_explained_by_its_cause():
    """A pcg fit, alpha 0, a target the features interpolate (a constant one): each error
    names its cause and the refit that helps; before, every one advised solver='cholesky',
    the solver already used. cv="evidence" names the constant target."""
    from dkrr.errors import SingularSystemError

    X, y = _data(n=300)
    Y = np.column_stack([y, np.full(300, 7.0)])
    constant = RandomFeatureRidge(n_components=64, gamma=0.5, alpha=0.1, random_state=0).fit(X, Y)
    with pytest.raises(InvalidParameterError, match=r"a target's residual is not positive .*constant target.*"
                                                    r"Refit with a larger alpha, or fit such a target apart") as e:
        constant.predict(X[:2], return_std=True)
    assert "cholesky" not in str(e.value)
    zero = RandomFeatureRidge(n_components=64, gamma=0.5, alpha=0, random_state=0, precision="float64").fit(X, y)
    with pytest.raises(InvalidParameterError, match=r"alpha_ = 0\.0: the Bayesian reading needs alpha > 0"):
        zero.predict(X[:2], return_std=True)
    with pytest.raises(SingularSystemError, match=r"target\(s\) \[1\] \(0-based\) have no positive residual"):
        RandomFeatureRidge(n_components=64, gamma=0.5, cv="evidence", random_state=0, precision="float64").fit(X, Y)


def test_a_target_constant_on_its_weighted_rows_has_no_posterior_with_zero_weight_rows_about():
    """A target constant on its rows of positive weight has no noise variance, as without
    the zero-weight rows; its residual of rounding (1e-15) gave a posterior of std 5e-8 in
    4 of 12 such fits under the default precision."""
    rng = np.random.default_rng(1)
    X_1, y_1 = rng.standard_normal((500, 3)), rng.standard_normal(500)
    y_1[:50] = 3.0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((500, 3))
        y = rng.standard_normal(500)
        y[:50] = 3.0
        w = np.r_[np.ones(50), np.zeros(450)]
        est = RandomFeatureRidge(n_components=64, gamma=0.3, alpha=0.1, random_state=0).fit(X, y, sample_weight=w)
        assert "noise_variance_" not in vars(est), (seed, est.noise_variance_)
    # the evidence reads the residual as the posterior does: no alpha is chosen on a residual of
    # rounding (seed 1 chose alpha 2.1 on a fake log evidence of 769)
    from dkrr.errors import SingularSystemError

    with pytest.raises(SingularSystemError, match=r"target\(s\) \[0\] \(0-based\) have no positive residual"):
        RandomFeatureRidge(n_components=64, gamma=0.3, cv="evidence", random_state=0).fit(X_1, y_1, sample_weight=w)
