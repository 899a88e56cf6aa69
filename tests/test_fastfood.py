"""Tests of the Fastfood projection (dkrr.features._fastfood)."""

import numpy as np
import pytest
import scipy.stats
from scipy.linalg import hadamard

from dkrr.errors import InvalidParameterError
from dkrr.features import PROJECTIONS
from dkrr.features._fastfood import FastfoodProjection

SHAPES = [(d, D) for d in (1, 3, 5, 8, 17, 64) for D in sorted({1, 7, d, 3 * d + 1})]


def _gen(d, D, seed=0, scale=0.7):
    return FastfoodProjection.generate(d, D, scale, np.random.default_rng(seed))


def test_registered():
    assert PROJECTIONS["fastfood"] is FastfoodProjection


@pytest.mark.parametrize("d, D", SHAPES)
@pytest.mark.parametrize("path", ["fast", "dense", "auto"])
def test_project_matches_matrix(d, D, path):
    p = _gen(d, D)
    W = p.matrix()
    assert W.shape == (D, d)
    X = np.random.default_rng(1).standard_normal((13, d))
    Z = p.project(X, path=path)
    assert Z.dtype == np.float64 and Z.shape == (13, D)
    np.testing.assert_allclose(Z, X @ W.T, rtol=1e-10, atol=1e-10)
    Z32 = p.project(X.astype(np.float32), path=path)
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, X @ W.T, rtol=1e-4, atol=1e-4 * np.abs(W).max() * np.sqrt(d))


def test_matrix_is_explicit_product():
    p = _gen(4, 4, scale=0.3)
    H = hadamard(4).astype(float)
    B = np.diag(p.signs[0].astype(float))
    Pi = np.zeros((4, 4))
    Pi[np.arange(4), p.perm[0]] = 1.0
    G = np.diag(p.gaussian[0])
    S = np.diag(p.chi[0] / np.sqrt(np.sum(p.gaussian[0] ** 2)))
    np.testing.assert_allclose(p.matrix(), 0.3 / 2.0 * S @ H @ G @ Pi @ H @ B, atol=1e-14)
    assert sorted(p.perm[0]) == [0, 1, 2, 3]


def test_row_norms_are_chi_times_scale():
    d, scale = 16, 0.25
    p = _gen(d, 16 * 300, seed=7, scale=scale)
    norms = np.linalg.norm(p.matrix(), axis=1)
    # each row has norm exactly s_i * scale (ALGORITHMS.md)
    np.testing.assert_allclose(norms, scale * p.chi.ravel(), rtol=1e-10)
    assert scipy.stats.kstest(norms / scale, scipy.stats.chi(d).cdf).pvalue > 0.01
    assert abs(np.mean(norms**2) / (d * scale**2) - 1) < 0.05
    assert scipy.stats.kstest(norms / scale, scipy.stats.chi(2 * d).cdf).pvalue < 1e-6


def test_entries_second_moment():
    # rows behave like N(0, scale^2 I) in the second moment (a factor-2 scale error in
    # either normalization would show as a factor 4 here)
    p = _gen(32, 32 * 64, seed=8, scale=1.5)
    W = p.matrix() / 1.5
    assert abs(np.mean(W**2) - 1) < 0.05
    assert abs(np.mean(W)) < 0.02


def test_storage_is_linear_and_state():
    p = _gen(64, 1024)
    assert p.storage_size == 4 * 1024  # versus D * d = 65536 for a dense W
    p.project(np.zeros((2, 64)), path="dense")
    assert p.storage_size == 4 * 1024
    q = _gen(100, 7)
    assert q.storage_size == 4 * 128
    assert set(p.get_state()) == {
        "n_features_in", "n_components", "scale", "signs", "perm", "gaussian", "chi"
    }


def test_seed_determinism_and_state_roundtrip():
    a, b, c = _gen(10, 37, seed=11), _gen(10, 37, seed=11), _gen(10, 37, seed=12)
    for name in ("signs", "perm", "gaussian", "chi"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
        assert not np.array_equal(getattr(a, name), getattr(c, name))
    r = FastfoodProjection.from_state(a.get_state())
    X = np.random.default_rng(0).standard_normal((4, 10))
    for path in ("fast", "dense"):
        np.testing.assert_array_equal(r.project(X, path=path), a.project(X, path=path))
    np.testing.assert_array_equal(r.matrix(), a.matrix())


def test_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="no options"):
        FastfoodProjection.generate(4, 4, 1.0, rng, row_norms="chi")
    p = _gen(4, 4)
    state = p.get_state()
    state["perm"] = state["perm"][:, :2]
    with pytest.raises(InvalidParameterError, match="perm"):
        FastfoodProjection.from_state(state)
    state = p.get_state()
    state["perm"] = np.zeros_like(state["perm"])
    with pytest.raises(InvalidParameterError, match="permutation"):
        FastfoodProjection.from_state(state)
