"""The per-fold CV solve (docs/ALGORITHMS.md 3.5-3.6): one Householder tridiagonalisation
``G' = Q T Q^T`` of the centred training Gram serves the alpha grid. Checked against a
dense ``np.linalg.solve`` per alpha scored on the validation rows themselves, and its
singular-alpha rule against the one of numpy's eigenvalues."""

import warnings

import numpy as np
import pytest

from dkrr.errors import IllConditionedWarning, SingularAlphaWarning
from dkrr.linalg import RidgeStatistics, TridiagonalGram, cross_validate_statistics
from dkrr.linalg._cv import DEFAULT_ALPHA_EXPONENTS, fold_validation_mse, score_fold
from dkrr.linalg._solve import center_statistics, solve_tridiagonal

EPS = np.finfo(np.float64).eps


def _sums(Z, Y, w):
    Zw = Z * w[:, None]
    return Zw.T @ Z, Zw.T @ Y, w @ Z, w @ Y, w @ Y**2, float(w.sum())


def _fold(Z, Y, w, val):
    """(total, fold) tuples of score_fold: all rows' and the validation rows' sums."""
    G, c, zs, ys, _, n = _sums(Z, Y, w)
    return (G, c, zs, ys, n), _sums(Z[val], Y[val], w[val])


def _dense_mse(Z, Y, w, val, alpha, intercept):
    """Fit on the training rows by np.linalg.solve, score on the validation rows."""
    tr = ~val
    Zt, Yt, wt = Z[tr], Y[tr], w[tr]
    mu = wt @ Zt / wt.sum() if intercept else np.zeros(Z.shape[1])
    ybar = wt @ Yt / wt.sum() if intercept else np.zeros(Y.shape[1])
    Zc, Yc = Zt - mu, Yt - ybar
    beta = np.linalg.solve((Zc * wt[:, None]).T @ Zc + alpha * np.eye(Z.shape[1]), (Zc * wt[:, None]).T @ Yc)
    r = Y[val] - ybar - (Z[val] - mu) @ beta
    return float((w[val] @ r**2).sum() / (w[val].sum() * Y.shape[1]))


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("t", [1, 3])
def test_fold_mse_equals_a_dense_solve_per_alpha(intercept, weighted, t):
    rng = np.random.default_rng(7)
    n, p = 240, 30
    Z = rng.standard_normal((n, p)) * rng.uniform(0.2, 3.0, p) + rng.standard_normal(p)
    Y = Z @ rng.standard_normal((p, t)) + 4.0 + rng.standard_normal((n, t))
    w = rng.uniform(0.1, 3.0, n) if weighted else np.ones(n)
    val = rng.integers(0, 4, n) == 2
    total, fold = _fold(Z, Y, w, val)
    scale = np.trace(total[0]) / p
    alphas = scale * 10.0**DEFAULT_ALPHA_EXPONENTS  # the default grid's size and span
    mse, lam_min = score_fold(total, fold, alphas, intercept)
    ref = [_dense_mse(Z, Y, w, val, a, intercept) for a in alphas]
    np.testing.assert_allclose(mse, ref, rtol=1e-10)
    Gtr = _sums(Z[~val], Y[~val], w[~val])[0]
    if intercept:
        zt = w[~val] @ Z[~val]
        Gtr = Gtr - np.outer(zt, zt) / w[~val].sum()
    lam = np.linalg.eigvalsh(Gtr)
    assert abs(lam_min - lam[0]) <= p * EPS * lam[-1]


def _near_singular(intercept, seed=0):
    """Features of rank 20 plus 1e-7 noise in 40 more columns: the training Grams have
    eigenvalues at the rounding level of their largest (3e4)."""
    rng = np.random.default_rng(seed)
    n, p = 400, 60
    B = rng.standard_normal((n, 20))
    Z = np.hstack([B @ rng.standard_normal((20, p - 20)) + 1e-7 * rng.standard_normal((n, p - 20)), B]) + 0.5
    Y = Z[:, :3] @ rng.standard_normal((3, 2)) + 0.1 * rng.standard_normal((n, 2)) + 2.0
    folds = rng.integers(0, 3, n)
    return Z, Y, folds


def _extended_solve(A, B):
    """``A^-1 B`` by Cholesky in numpy's extended precision (``np.longdouble``: 64-bit
    mantissa on x86-64, more elsewhere): the reference whose own error, ``cond * 5e-20``,
    is far below float64's ``cond * 1e-16`` at the condition numbers tested here."""
    A, B = A.astype(np.longdouble), B.astype(np.longdouble)
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        L[j, j] = np.sqrt(A[j, j] - L[j, :j] @ L[j, :j])
        L[j + 1:, j] = (A[j + 1:, j] - L[j + 1:, :j] @ L[j, :j]) / L[j, j]
    X = np.zeros_like(B)
    for j in range(n):
        X[j] = (B[j] - L[j, :j] @ X[:j]) / L[j, j]
    for j in reversed(range(n)):
        X[j] = (X[j] - L[j + 1:, j] @ X[j + 1:]) / L[j, j]
    return X


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_near_the_singular_floor_the_same_alphas_are_refused_and_the_rest_are_accurate(intercept, seed):
    """Alphas from below the floor ``p eps max|lam|`` up to 1e12 times it. Unusable (inf)
    exactly where numpy's eigenvalues put ``lam_min + alpha`` below the floor. The usable
    ones against the exact solve of the same float64 statistics (extended precision),
    scored by the same expansion: at 10x the floor (condition number ~7e12) every float64
    solve is off by ~1e-8 (measured against a 40-digit solve: this kernel 1e-11 to 3e-8,
    the eigendecomposition it replaces 6e-9 to 4e-8, a dense LU 3e-9 to 5e-8); at 100x
    (~7e11) by ~1e-10 (this kernel 4e-11 to 3e-10, eigh 1e-10 to 4e-10); above 1e4x
    (~7e9) both are within 1e-11."""
    Z, Y, folds = _near_singular(intercept, seed)
    w = np.ones(len(Z))
    val = folds == 0
    total, fold = _fold(Z, Y, w, val)
    (G, c, zs, ys, n), (Gk, ck, zk, yk, yyk, nk) = total, fold
    Gc, cc, mu, ybar = center_statistics(G - Gk, c - ck, zs - zk, n - nk, ys - yk, intercept)
    lam = np.linalg.eigvalsh(Gc)
    p = Z.shape[1]
    floor = p * EPS * np.abs(lam).max()
    assert lam[0] < 1e-3 * floor  # the Gram is singular at its rounding
    factors = np.array([1e-3, 0.5, 10.0, 1e2, 1e4, 1e6, 1e9, 1e12])
    alphas = floor * factors
    with warnings.catch_warnings():  # a fold says nothing of its condition number: on a worker the
        warnings.simplefilter("error", IllConditionedWarning)  # warning was a raw line on its stderr
        mse, lam_min = score_fold(total, fold, alphas, intercept)
    with pytest.warns(IllConditionedWarning, match="condition number"):  # the solve itself still warns
        solve_tridiagonal(TridiagonalGram(center_statistics(G - Gk, c - ck, zs - zk, n - nk, ys - yk, intercept)[0]),
                          cc, alphas[2:])
    np.testing.assert_array_equal(np.isfinite(mse), lam[0] + alphas > floor)
    assert np.isinf(mse[:2]).all() and abs(lam_min - lam[0]) < 0.1 * floor
    ref = []
    for a in alphas[2:]:
        Bx = _extended_solve(Gc + a * np.eye(p), cc)[None]
        quad = np.einsum("apt,pq,aqt->at", Bx, Gk.astype(np.longdouble), Bx)
        ref.append(fold_validation_mse(Bx, quad, ck, zk, yk, yyk, nk, mu if intercept else None, ybar)[0])
    rel = np.abs(mse[2:] / np.array(ref, dtype=np.float64) - 1.0)
    assert rel[0] < 2e-7 and rel[1] < 2e-9 and (rel[2:] < 1e-10).all(), rel


def test_cross_validation_reports_the_alphas_below_the_floor():
    """Through cross_validate_statistics: a SingularAlphaWarning names the refused alphas
    (inf in every fold), the others are finite."""
    Z, Y, folds = _near_singular(True, seed=1)
    K = 3
    s = RidgeStatistics.zeros(K, Z.shape[1], Y.shape[1])
    for k in range(K):
        s.G[k], s.c[k], s.zsum[k], s.ysum[k], s.yy[k], s.n[k] = _sums(Z[folds == k], Y[folds == k], np.ones((folds == k).sum()))
    floor = Z.shape[1] * EPS * np.linalg.eigvalsh(s.total().G[0]).max()
    alphas = floor * np.array([1e-4, 1e3, 1e8])
    with pytest.warns(SingularAlphaWarning, match=r"alphas \[[0-9.e-]+\] leave"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IllConditionedWarning)
            mse = cross_validate_statistics(s, alphas, fit_intercept=True)
    assert np.isinf(mse[:, 0]).all() and np.isfinite(mse[:, 1:]).all()


@pytest.mark.parametrize("p", [1, 2, 3, 70])
def test_tridiagonal_form_reconstructs_the_gram(p):
    """Q is orthogonal, Q T Q^T = G, and the spectrum ends are numpy's."""
    rng = np.random.default_rng(p)
    A = rng.standard_normal((p + 5, p))
    G = A.T @ A - 2.0 * np.eye(p)
    tri = TridiagonalGram(G.copy())
    Q = tri.unrotate(np.eye(p))
    T = np.diag(tri.d) + np.diag(tri.e, -1) + np.diag(tri.e, 1)
    np.testing.assert_allclose(Q.T @ Q, np.eye(p), atol=1e-13)
    np.testing.assert_allclose(Q @ T @ Q.T, G, atol=1e-12 * np.abs(G).max())
    np.testing.assert_allclose(tri.rotate(Q), np.eye(p), atol=1e-13)
    lam = np.linalg.eigvalsh(G)
    np.testing.assert_allclose([tri.lam_min, tri.lam_max], [lam[0], lam[-1]], atol=1e-12 * np.abs(lam).max())
    # overwrite=True may destroy its input and gives the same factorisation
    other = TridiagonalGram(G.copy(), overwrite=True)
    np.testing.assert_array_equal(other.d, tri.d)
    np.testing.assert_array_equal(other.unrotate(np.eye(p)), Q)
