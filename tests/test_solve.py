"""Ridge solvers and one-pass cross-validation from statistics, against dense references."""

import warnings

import numpy as np
import pytest
from scipy.linalg import LinAlgWarning
from sklearn.linear_model import Ridge

from dkrr.errors import InputValidationError, SingularSystemError
from dkrr.linalg import (
    RidgeStatistics,
    TridiagonalGram,
    cross_validate_statistics,
    fold_ids,
    ridge_coefficients,
    select_alpha,
    solve_cholesky,
    solve_tridiagonal,
)
from dkrr.linalg._cv import check_folds


def stats_from_dense(Z, Y, folds, K):
    s = RidgeStatistics.zeros(K, Z.shape[1], Y.shape[1])
    for k in range(K):
        Zk, Yk = Z[folds == k], Y[folds == k]
        s.G[k], s.c[k], s.zsum[k], s.n[k] = Zk.T @ Zk, Zk.T @ Yk, Zk.sum(0), len(Zk)
        s.ysum[k], s.yy[k] = Yk.sum(0), (Yk**2).sum(0)
    return s


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(4)
    Z = rng.standard_normal((300, 15)) * rng.uniform(0.1, 3, 15) + rng.standard_normal(15)
    beta = rng.standard_normal((15, 2))
    Y = Z @ beta + 5.0 + 0.5 * rng.standard_normal((300, 2))
    return Z, Y


def test_cholesky_and_tridiagonal_agree_with_dense_solve(problem):
    Z, Y = problem
    G, c = Z.T @ Z, Z.T @ Y
    alphas = [1e-3, 0.5, 30.0]
    B = solve_tridiagonal(TridiagonalGram(G), c, alphas)
    for a, b in zip(alphas, B):
        ref = np.linalg.solve(G + a * np.eye(15), c)
        np.testing.assert_allclose(solve_cholesky(G, c, a), ref, rtol=1e-10)
        np.testing.assert_allclose(b, ref, rtol=1e-9)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("solver", ["cholesky", "eigh"])
def test_ridge_coefficients_equal_sklearn(problem, fit_intercept, solver):
    Z, Y = problem
    s = stats_from_dense(Z, Y, np.zeros(len(Z), int), 1)
    beta, b = ridge_coefficients(s, 2.0, fit_intercept, solver)
    ref = Ridge(alpha=2.0, fit_intercept=fit_intercept, solver="cholesky").fit(Z, Y)
    np.testing.assert_allclose(beta.T, ref.coef_, rtol=1e-9)
    np.testing.assert_allclose(b, ref.intercept_ if fit_intercept else 0.0, rtol=1e-9, atol=1e-12)


def test_singular_system_is_a_clear_error():
    Z = np.random.default_rng(0).standard_normal((5, 10))  # rank 5 < 10
    G, c = Z.T @ Z, Z.T @ np.ones((5, 1))
    for alpha in (0.0, -0.1):
        with pytest.raises(SingularSystemError, match=rf"alpha={alpha}.*larger alpha"):
            solve_cholesky(G, c, alpha)
        with pytest.raises(SingularSystemError, match=rf"alpha={alpha}"):
            solve_tridiagonal(TridiagonalGram(G), c, [1.0, alpha])
    with pytest.raises(SingularSystemError, match="not finite"):
        solve_cholesky(np.full((3, 3), np.nan), np.ones((3, 1)), 1.0)


def test_alpha_zero_is_allowed_when_positive_definite(problem):
    Z, Y = problem
    G, c = Z.T @ Z, Z.T @ Y
    np.testing.assert_allclose(solve_cholesky(G, c, 0.0), np.linalg.solve(G, c), rtol=1e-9)
    np.testing.assert_allclose(solve_tridiagonal(TridiagonalGram(G), c, [0.0])[0], np.linalg.solve(G, c), rtol=1e-8)


def test_ill_conditioned_system_warns_with_condition_number():
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.standard_normal((6, 6)))
    G = Q @ np.diag([1e-2, 1, 1, 1, 1, 1e11]) @ Q.T
    c = np.ones((6, 1))
    with pytest.warns(LinAlgWarning, match=r"condition number 1\.\d+e\+1[34]"):
        solve_cholesky(G, c, 1e-4)
    # (1e11 + a) / (1e-2 + a) = 9.90e12, lam_min +- eps 1e11: "9.9e+12" where it rounds to 9.90
    with pytest.warns(LinAlgWarning, match=r"condition number 9\.[89]\d?e\+12 .*alpha=0\.0001"):
        solve_tridiagonal(TridiagonalGram(G), c, [1e-4, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve_cholesky(G, c, 10.0)  # cond 1e10: no warning


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("t", [1, 2])
def test_cv_errors_equal_brute_force_refits(problem, fit_intercept, t):
    Z, Y = problem
    Y = Y[:, :t]
    K = 4
    folds = fold_ids(np.arange(len(Z)), K, 11)
    s = stats_from_dense(Z, Y, folds, K)
    alphas = np.array([1e-2, 1.0, 10.0, 300.0])
    mse = cross_validate_statistics(s, alphas, fit_intercept)
    assert mse.shape == (K, 4)
    for k in range(K):
        tr, va = folds != k, folds == k
        for j, a in enumerate(alphas):
            m = Ridge(alpha=a, fit_intercept=fit_intercept, solver="cholesky").fit(Z[tr], Y[tr])
            ref = np.mean((Y[va] - m.predict(Z[va]).reshape(-1, t)) ** 2)
            np.testing.assert_allclose(mse[k, j], ref, rtol=1e-8)


def test_select_alpha_weights_folds_and_breaks_ties_upwards():
    alphas = np.array([0.1, 1.0, 10.0])
    mse = np.array([[3.0, 1.0, 2.0], [1.0, 2.0, 2.0]])
    idx, mean, std = select_alpha(alphas, mse, np.array([30, 10]))
    np.testing.assert_allclose(mean, [2.5, 1.25, 2.0])
    np.testing.assert_allclose(std, [1.0, 0.5, 0.0])
    assert idx == 1
    idx, _, _ = select_alpha(alphas, np.array([[1.0, 2.0, 1.0]]), np.array([5]))
    assert idx == 2  # tie: the larger alpha


def test_too_few_rows_for_the_folds():
    with pytest.raises(InputValidationError, match=r"too few rows for 3-fold.*\[2, 0, 3\]"):
        check_folds(np.array([2, 0, 3]))
    with pytest.raises(InputValidationError, match="n >= 2 \\* cv = 10"):
        check_folds(np.array([1, 2, 1, 2, 1]))
