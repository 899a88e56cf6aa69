"""The Bayesian reading of the ridge (dkrr.linalg._evidence) against brute force:
scipy's multivariate normal log-density of y (or of its contrasts) under the implied
Gaussian, and scikit-learn's GaussianProcessRegressor with a linear kernel on the same
features."""

import numpy as np
import pytest
import scipy.linalg
from scipy.stats import multivariate_normal

from dkrr.linalg import TridiagonalGram
from dkrr.linalg._evidence import evidence_from_tridiagonal, posterior_factor, predictive_variance


def _data(n=120, p=15, t=2, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, p)) + 0.3
    w = rng.normal(size=(p, t))
    y = Z @ w + 2.5 + 0.4 * rng.normal(size=(n, t))
    return Z, y


def _centred(Z, y, intercept):
    if intercept:
        return Z - Z.mean(0), y - y.mean(0)
    return Z, y


@pytest.mark.parametrize("intercept", [True, False])
def test_profiled_evidence_is_the_gaussian_log_density_at_its_noise_maximum(intercept):
    Z, y = _data()
    n = len(y)
    Zc, yc = _centred(Z, y, intercept)
    tri = TridiagonalGram(Zc.T @ Zc)
    alphas = np.array([0.05, 1.0, 30.0])
    m = n - 1 if intercept else n
    logev, s2 = evidence_from_tridiagonal(tri, tri.rotate(Zc.T @ yc), (yc**2).sum(0), m, alphas)
    # brute force: the m contrasts Q^T y (Q orthonormal, orthogonal to the constant) or y itself
    if intercept:
        Q = scipy.linalg.null_space(np.ones((1, n)))
    else:
        Q = np.eye(n)
    for i, a in enumerate(alphas):
        for j in range(y.shape[1]):
            K = s2[i, j] * (np.eye(m) + Q.T @ Zc @ Zc.T @ Q / a)
            ref = multivariate_normal(np.zeros(m), K).logpdf(Q.T @ y[:, j])
            np.testing.assert_allclose(logev[i, j], ref, rtol=1e-10)
            # s2 maximises the density over the noise variance
            for f in (0.9, 1.1):
                lower = multivariate_normal(np.zeros(m), f * K).logpdf(Q.T @ y[:, j])
                assert lower < ref


def test_evidence_refuses_alphas_not_positive_and_scores_singular_ones_minus_inf():
    Z, y = _data(n=10, p=30, t=1)  # p > n: G_c singular
    Zc, yc = _centred(Z, y, True)
    tri = TridiagonalGram(Zc.T @ Zc)
    q = tri.rotate(Zc.T @ yc)
    logev, s2 = evidence_from_tridiagonal(tri, q, (yc**2).sum(0), 9, [1e-30, 1.0])
    assert logev[0, 0] == -np.inf and np.isnan(s2[0, 0]) and np.isfinite(logev[1, 0])
    with pytest.raises(ValueError, match="alphas > 0"):
        evidence_from_tridiagonal(tri, q, (yc**2).sum(0), 9, [0.0])


def test_predictive_std_equals_gaussian_process_with_the_linear_kernel_on_the_features():
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, DotProduct, WhiteKernel

    Z, y = _data(n=80, p=10, t=1, seed=3)
    y = y[:, 0] - 2.5
    alpha, s2 = 2.0, 0.3
    Zt = np.random.default_rng(9).normal(size=(25, 10))
    L = posterior_factor(Z.T @ Z, alpha)
    var = predictive_variance(Zt, np.zeros(10), L, [s2], 0.0, observation=True)[:, 0]
    latent = predictive_variance(Zt, np.zeros(10), L, [s2], 0.0, observation=False)[:, 0]
    kernel = (ConstantKernel(s2 / alpha, "fixed") * DotProduct(sigma_0=0.0, sigma_0_bounds="fixed")
              + WhiteKernel(s2, "fixed"))
    gp = GaussianProcessRegressor(kernel, optimizer=None, alpha=1e-300).fit(Z, y)
    mean, std = gp.predict(Zt, return_std=True)
    np.testing.assert_allclose(var, std**2, rtol=1e-8)
    np.testing.assert_allclose(var - latent, s2, rtol=1e-12)
    np.testing.assert_allclose(mean, Zt @ scipy.linalg.solve(Z.T @ Z + alpha * np.eye(10), Z.T @ y), rtol=1e-8)
    # and the evidence at that fixed noise equals the GP's log marginal likelihood
    lam, V = np.linalg.eigh(Z.T @ Z)
    R = y @ y - ((V.T @ (Z.T @ y)) ** 2 / (lam + alpha)).sum()
    ll = -0.5 * len(y) * np.log(2 * np.pi * s2) - 0.5 * np.log1p(lam / alpha).sum() - R / (2 * s2)
    np.testing.assert_allclose(ll, gp.log_marginal_likelihood_value_, rtol=1e-10)


def test_predictive_variance_with_intercept_is_the_posterior_of_slope_and_intercept():
    """Flat prior on the intercept: the latent variance of z^T w + b equals the brute-force
    posterior covariance of (w, b) with the intercept's prior variance taken to infinity."""
    Z, y = _data(n=60, p=6, t=1, seed=5)
    alpha, s2 = 0.7, 0.2
    mu = Z.mean(0)
    Zc = Z - mu
    L = posterior_factor(Zc.T @ Zc, alpha)
    Zt = np.random.default_rng(2).normal(size=(7, 6))
    got = predictive_variance(Zt, mu, L, [s2], 1.0 / len(y), observation=False)[:, 0]
    X1 = np.hstack([Z, np.ones((len(y), 1))])
    prior_prec = np.diag([alpha] * 6 + [1e-12])  # flat intercept prior, as the limit
    cov = s2 * np.linalg.inv(X1.T @ X1 + prior_prec)
    T1 = np.hstack([Zt, np.ones((7, 1))])
    np.testing.assert_allclose(got, np.einsum("ij,jk,ik->i", T1, cov, T1), rtol=1e-8)


@pytest.mark.parametrize("intercept", [True, False])
def test_posterior_from_streamed_statistics_matches_the_spectrum_and_brute_force(intercept):
    """bayes_posterior / evidence_grid read the one-pass statistics: the evidence at alpha
    equals the eigen form and the Gaussian log-density; the noise variance its maximiser."""
    import dask.array as da

    from dkrr.features import build_feature_map
    from dkrr.linalg import streamed_statistics
    from dkrr.linalg._evidence import bayes_posterior, evidence_grid

    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 3))
    y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2]) + 0.2 * rng.normal(size=(150, 2)) + 1.5
    fmap = build_feature_map(X, kernel="gaussian", method="rff", n_components=20, gamma=0.3,
                             random_state=np.random.default_rng(0), options={})
    tot = streamed_statistics(da.from_array(X, chunks=(40, 3)), da.from_array(y, chunks=(40, 2)), fmap).total()
    alphas = np.array([0.1, 2.0])
    grid, s2, usable, _ = evidence_grid(tot, alphas, intercept)
    assert usable.all()
    Z = fmap.transform(X)
    Zc, yc = _centred(Z, y, intercept)
    n, m = len(y), len(y) - (1 if intercept else 0)
    Q = scipy.linalg.null_space(np.ones((1, n))) if intercept else np.eye(n)
    for i, a in enumerate(alphas):
        post = bayes_posterior(tot, a, intercept)
        np.testing.assert_allclose(post["log_marginal_likelihood"], grid[i], rtol=1e-9)
        np.testing.assert_allclose(post["noise_variance"], s2[i], rtol=1e-9)
        ref = sum(multivariate_normal(np.zeros(m), s2[i, j] * (np.eye(m) + Q.T @ Zc @ Zc.T @ Q / a)).logpdf(Q.T @ y[:, j])
                  for j in range(2))
        np.testing.assert_allclose(grid[i], ref, rtol=1e-9)
        assert post["inv_weight"] == (1.0 / n if intercept else 0.0)
