"""Tests of ORF and SORF projections (dkrr.features._orthogonal)."""

import numpy as np
import pytest
import scipy.stats

from dkrr.errors import InvalidParameterError
from dkrr.features import PROJECTIONS
from dkrr.features._orthogonal import (
    ORFProjection,
    SORFProjection,
    haar_orthogonal,
    prefer_dense,
)

SHAPES = [(d, D) for d in (1, 3, 5, 8, 17, 64) for D in sorted({1, 7, d, 3 * d + 1})]


def _gen(cls, d, D, seed=0, scale=0.7, **opts):
    return cls.generate(d, D, scale, np.random.default_rng(seed), **opts)


def test_registered():
    assert PROJECTIONS["orf"] is ORFProjection
    assert PROJECTIONS["sorf"] is SORFProjection


# -- ORF ------------------------------------------------------------------------------
@pytest.mark.parametrize("d, D", SHAPES)
@pytest.mark.parametrize("row_norms", ["chi", "fixed"])
def test_orf_project_matches_matrix(d, D, row_norms):
    p = _gen(ORFProjection, d, D, row_norms=row_norms)
    W = p.matrix()
    assert W.shape == (D, d)
    X = np.random.default_rng(1).standard_normal((11, d))
    np.testing.assert_allclose(p.project(X), X @ W.T, rtol=1e-10, atol=1e-12)
    Z32 = p.project(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, X @ W.T, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("row_norms", ["chi", "fixed"])
def test_orf_blocks_orthogonal(row_norms):
    d, D = 6, 20  # 4 blocks, the last one partial
    p = _gen(ORFProjection, d, D, row_norms=row_norms, scale=1.3)
    W = p.matrix()
    for start in range(0, D, d):
        B = W[start : start + d]
        G = B @ B.T
        np.testing.assert_allclose(G - np.diag(np.diag(G)), 0, atol=1e-12)
    if row_norms == "fixed":
        np.testing.assert_allclose(np.linalg.norm(W, axis=1), 1.3 * np.sqrt(d), rtol=1e-12)


def test_orf_row_norms_follow_chi():
    d, scale = 5, 0.5
    p = _gen(ORFProjection, d, 4000, seed=3, scale=scale)
    norms = np.linalg.norm(p.matrix(), axis=1) / scale
    assert scipy.stats.kstest(norms, scipy.stats.chi(d).cdf).pvalue > 0.01
    # E||w||^2 = d scale^2; sd of the mean is sqrt(2 / (d N)) ~ 0.01 relative
    assert abs(np.mean(norms**2) / d - 1) < 0.05
    # and not chi with another dimension
    assert scipy.stats.kstest(norms, scipy.stats.chi(2 * d).cdf).pvalue < 1e-6


def test_orf_rows_marginally_gaussian():
    # Haar Q times chi norms: every entry of W / scale is N(0, 1); without the sign
    # correction of the QR the (0, 0) entry of each block is biased.
    d = 4
    p = _gen(ORFProjection, d, 4 * 3000, seed=5, scale=2.0)
    W = p.matrix() / 2.0
    first = W[::d, 0]  # entry (0, 0) of each block
    assert scipy.stats.kstest(first, "norm").pvalue > 0.01
    assert abs(first.mean()) < 0.06  # sd of the mean 1/sqrt(3000) = 0.018
    assert scipy.stats.kstest(W.ravel(), "norm").pvalue > 0.01


def test_haar_orthogonal():
    Q = haar_orthogonal(7, np.random.default_rng(0))
    np.testing.assert_allclose(Q @ Q.T, np.eye(7), atol=1e-12)


# -- SORF -----------------------------------------------------------------------------
@pytest.mark.parametrize("d, D", SHAPES)
@pytest.mark.parametrize("path", ["fast", "dense", "auto"])
@pytest.mark.parametrize("opts", [{}, {"row_norms": "chi"}, {"n_hd_blocks": 1}, {"n_hd_blocks": 2, "row_norms": "chi"}])
def test_sorf_project_matches_matrix(d, D, path, opts):
    p = _gen(SORFProjection, d, D, **opts)
    W = p.matrix()
    assert W.shape == (D, d)
    X = np.random.default_rng(1).standard_normal((13, d))
    Z = p.project(X, path=path)
    assert Z.dtype == np.float64 and Z.shape == (13, D)
    np.testing.assert_allclose(Z, X @ W.T, rtol=1e-10, atol=1e-10)
    Z32 = p.project(X.astype(np.float32), path=path)
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, X @ W.T, rtol=1e-4, atol=1e-4 * np.abs(W).max() * np.sqrt(d))


def test_sorf_matrix_is_explicit_product():
    # one block, d = d' = 4, k = 3: W = sqrt(4) * scale * Hn D1 Hn D2 Hn D3
    from scipy.linalg import hadamard

    p = _gen(SORFProjection, 4, 4, scale=0.3)
    Hn = hadamard(4) / 2.0
    D1, D2, D3 = (np.diag(p.signs[0, j].astype(float)) for j in range(3))
    np.testing.assert_allclose(p.matrix(), 2 * 0.3 * Hn @ D1 @ Hn @ D2 @ Hn @ D3, atol=1e-14)


def test_sorf_rows_fixed_norm_and_orthogonal():
    d, D, scale = 16, 40, 0.9
    p = _gen(SORFProjection, d, D, scale=scale)
    W = p.matrix()
    np.testing.assert_allclose(np.linalg.norm(W, axis=1), np.sqrt(16) * scale, rtol=1e-12)
    for start in range(0, D, d):
        B = W[start : start + d]
        np.testing.assert_allclose(B @ B.T, scale**2 * d * np.eye(len(B)), atol=1e-12)


def test_sorf_padded_rows_have_norm_sqrt_dpad():
    # d = 5 padded to 8: the full padded rows have norm sqrt(8) * scale
    p = _gen(SORFProjection, 5, 8, scale=1.0)
    norms_sq = (p.project(np.eye(5)) ** 2).sum(axis=0)  # visible part
    assert np.all(norms_sq <= 8 + 1e-9)
    # the average visible fraction is 5/8 of the squared norm
    assert abs(norms_sq.mean() / 8 - 5 / 8) < 1e-9


def test_sorf_chi_row_norms():
    d, scale = 8, 0.5
    p = _gen(SORFProjection, d, 8 * 500, seed=2, scale=scale, row_norms="chi")
    norms = np.linalg.norm(p.matrix(), axis=1) / scale
    np.testing.assert_allclose(norms, p.norms, rtol=1e-12)
    assert scipy.stats.kstest(norms, scipy.stats.chi(d).cdf).pvalue > 0.01
    assert abs(np.mean(norms**2) / d - 1) < 0.05


def test_sorf_rows_look_gaussian_in_distribution():
    # With chi norms and 3 HD blocks, entries of W / scale are close to N(0, 1): check
    # the second moment (would be off by 4 with a factor-2 scale error).
    p = _gen(SORFProjection, 32, 32 * 64, seed=4, scale=1.0, row_norms="chi")
    W = p.matrix()
    assert abs(np.mean(W**2) - 1) < 0.05
    assert abs(np.mean(W)) < 0.02


def test_sorf_storage_is_linear():
    for d, D, k in [(64, 1024, 3), (5, 7, 3), (100, 1000, 2), (1, 1, 1)]:
        p = _gen(SORFProjection, d, D, n_hd_blocks=k)
        dp = p.padded_features
        assert p.n_blocks * dp < D + dp
        assert p.storage_size == k * p.n_blocks * dp
        assert p.storage_size < (k + 1) * (D + dp)
        pc = _gen(SORFProjection, d, D, n_hd_blocks=k, row_norms="chi")
        assert pc.storage_size == (k + 1) * p.n_blocks * dp
    p = _gen(SORFProjection, 64, 1024)
    assert p.storage_size <= 3 * 1024  # versus D * d = 65536 for a dense W
    p.project(np.zeros((2, 64)), path="dense")  # fills the cache
    assert p.storage_size <= 3 * 1024  # the dense cache is not part of the state
    assert set(p.get_state()) == {"n_features_in", "n_components", "scale", "signs", "norms"}


@pytest.mark.parametrize("cls, opts", [(ORFProjection, {}), (SORFProjection, {}), (SORFProjection, {"row_norms": "chi", "n_hd_blocks": 2})])
def test_seed_determinism_and_state_roundtrip(cls, opts):
    a = _gen(cls, 10, 37, seed=11, **opts)
    b = _gen(cls, 10, 37, seed=11, **opts)
    c = _gen(cls, 10, 37, seed=12, **opts)
    for name, value in a.get_state().items():
        if isinstance(value, np.ndarray) and value.size:
            np.testing.assert_array_equal(value, b.get_state()[name])
            assert not np.array_equal(value, c.get_state()[name])
    r = cls.from_state(a.get_state())
    X = np.random.default_rng(0).standard_normal((4, 10))
    np.testing.assert_array_equal(r.project(X), a.project(X))
    np.testing.assert_array_equal(r.matrix(), a.matrix())
    assert not np.allclose(c.matrix(), a.matrix())


def test_bad_options():
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidParameterError, match="row_norms"):
        ORFProjection.generate(4, 4, 1.0, rng, row_norms="gauss")
    with pytest.raises(InvalidParameterError, match="row_norms"):
        SORFProjection.generate(4, 4, 1.0, rng, row_norms=None)
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(InvalidParameterError, match="n_hd_blocks"):
            SORFProjection.generate(4, 4, 1.0, rng, n_hd_blocks=bad)
    with pytest.raises(InvalidParameterError, match="unknown options"):
        SORFProjection.generate(4, 4, 1.0, rng, displacement_rank=2)
    p = SORFProjection.generate(4, 4, 1.0, rng)
    with pytest.raises(InvalidParameterError, match="path"):
        p.project(np.zeros((1, 4)), path="gpu")
    with pytest.raises(InvalidParameterError, match="signs"):
        SORFProjection(4, 4, 1.0, np.ones((1, 3, 8), np.int8), np.empty(0))


def test_path_rule():
    # measured crossover (see prefer_dense): dense for small d', FWHTs from d' = 256
    assert _gen(SORFProjection, 64, 1024).use_dense()
    assert _gen(SORFProjection, 128, 512).use_dense()
    assert not _gen(SORFProjection, 512, 512).use_dense()
    assert not _gen(SORFProjection, 512, 2048).use_dense()
    assert _gen(SORFProjection, 512, 128).use_dense()  # partial block
    assert prefer_dense(8, 8, 8, 1, 3.0) and not prefer_dense(1024, 4096, 1024, 4, 30.0)
