"""Tests of the P-model structured projections (dkrr.features._structured, _pmodel, _fft)."""

import numpy as np
import pytest
import scipy.linalg

from dkrr.errors import InputValidationError, InvalidParameterError
from dkrr.features import PROJECTIONS
from dkrr.features._fft import (
    circulant_multiply,
    hankel_multiply,
    skew_circulant_matrix,
    skew_circulant_multiply,
    toeplitz_like_multiply,
    toeplitz_multiply,
)

METHODS = ["circulant", "skew_circulant", "toeplitz", "hankel", "toeplitz_like"]
# (method, options) variants, Toeplitz-like with higher rank and the sparse setting
VARIANTS = [(m, {}) for m in METHODS] + [
    ("toeplitz_like", {"displacement_rank": 3}),
    ("toeplitz_like", {"skew_nonzeros": 1}),
    ("toeplitz_like", {"displacement_rank": 2, "skew_nonzeros": 2}),
]
VARIANT_IDS = [m + "".join(f"-{k}={v}" for k, v in o.items()) for m, o in VARIANTS]
TOL = {np.float64: dict(rtol=1e-10, atol=1e-10), np.float32: dict(rtol=1e-4, atol=1e-4)}


def _make(method, d, D, seed=0, scale=0.7, **options):
    return PROJECTIONS[method].generate(d, D, scale, np.random.default_rng(seed), **options)


# -- building blocks against scipy.linalg -------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5, 8, 16])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_building_blocks_match_scipy(n, dtype):
    rng = np.random.default_rng(n)
    X = rng.standard_normal((6, n)).astype(dtype)
    c, r = rng.standard_normal(n), rng.standard_normal(n)
    X64 = X.astype(np.float64)
    cases = [
        (circulant_multiply(c, X), scipy.linalg.circulant(c)),
        (skew_circulant_multiply(c, X), skew_circulant_matrix(c)),
        (toeplitz_multiply(c, r, X), scipy.linalg.toeplitz(c, r)),
        (hankel_multiply(c, r, X), scipy.linalg.hankel(c, r)),
    ]
    G, H = rng.standard_normal((3, n)), rng.standard_normal((3, n))
    M = sum(scipy.linalg.circulant(G[i]) @ skew_circulant_matrix(H[i]) for i in range(3))
    cases.append((toeplitz_like_multiply(G, H, X), M / np.sqrt(3)))
    for got, M in cases:
        assert got.dtype == dtype and got.shape == (6, n)
        np.testing.assert_allclose(got, X64 @ M.T, **TOL[dtype])


def test_skew_circulant_matrix_definition():
    c = np.array([1.0, 2.0, 3.0])
    expected = np.array([[1.0, -3.0, -2.0], [2.0, 1.0, -3.0], [3.0, 2.0, 1.0]])
    np.testing.assert_array_equal(skew_circulant_matrix(c), expected)


def test_building_block_shape_errors():
    X = np.zeros((2, 4))
    with pytest.raises(InvalidParameterError, match="length 4"):
        circulant_multiply(np.zeros(3), X)
    with pytest.raises(InvalidParameterError, match=r"shape \(r, 4\)"):
        toeplitz_like_multiply(np.zeros((2, 4)), np.zeros((1, 4)), X)
    with pytest.raises(InputValidationError, match="2-D float32/float64"):
        circulant_multiply(np.zeros(4), np.zeros(4))


# -- block structure ------------------------------------------------------------------
def test_block_structure_conventions():
    dp = 8
    circ = _make("circulant", 8, 8)
    g = circ.gen[0]
    M = circ.block_matrix(0)
    np.testing.assert_array_equal(M[0], g)  # first row g
    np.testing.assert_array_equal(M[1], np.roll(g, 1))  # shifted cyclically right
    skew = _make("skew_circulant", 8, 8)
    g = skew.gen[0]
    M = skew.block_matrix(0)
    np.testing.assert_array_equal(M[0], g)
    np.testing.assert_array_equal(M[1], np.concatenate([[-g[-1]], g[:-1]]))  # wrapped negated
    toep = _make("toeplitz", 8, 8)
    g, M = toep.gen[0], toep.block_matrix(0)
    j, k = np.indices((dp, dp))
    np.testing.assert_array_equal(M, g[j - k + dp - 1])
    hank = _make("hankel", 8, 8)
    g, M = hank.gen[0], hank.block_matrix(0)
    np.testing.assert_array_equal(M, g[j + k])
    tl = _make("toeplitz_like", 8, 8, displacement_rank=2)
    np.testing.assert_allclose(np.linalg.norm(tl.skew, axis=-1), 1.0, rtol=1e-12)
    assert set(np.unique(np.abs(tl.skew))) == {1 / np.sqrt(dp)}
    sparse = _make("toeplitz_like", 8, 16, displacement_rank=2, skew_nonzeros=3)
    assert np.all(np.count_nonzero(sparse.skew, axis=-1) == 3)
    np.testing.assert_allclose(np.linalg.norm(sparse.skew, axis=-1), 1.0, rtol=1e-12)


# -- fast path against the dense matrix -------------------------------------------------
@pytest.mark.parametrize("method,options", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("d", [1, 3, 5, 8, 17, 64])
def test_project_matches_matrix(method, options, d):
    rng = np.random.default_rng(d)
    dp = 1 << (d - 1).bit_length()
    for D in sorted({1, 7, d, 3 * d + 1}):
        if options.get("displacement_rank", 1) > dp or options.get("skew_nonzeros", 1) > dp:
            continue
        proj = _make(method, d, D, seed=D, **options)
        W = proj.matrix()
        assert W.shape == (D, d)
        for dtype in (np.float64, np.float32):
            X = rng.standard_normal((9, d)).astype(dtype)
            ref = X.astype(np.float64) @ W.T
            for path in ("fast", "dense", "auto"):
                got = proj.project(X, path=path)
                assert got.dtype == dtype and got.shape == (9, D), (path, dtype)
                np.testing.assert_allclose(got, ref, **TOL[dtype], err_msg=f"{path} D={D}")


@pytest.mark.parametrize("method", METHODS)
def test_large_dimension_fast_path(method):
    # d' = 256 with several blocks: the FFT path on a realistic width
    proj = _make(method, 200, 600, seed=3)
    X = np.random.default_rng(0).standard_normal((5, 200))
    np.testing.assert_allclose(proj.project(X, path="fast"), X @ proj.matrix().T, rtol=1e-10, atol=1e-10)


def test_bad_path_name():
    with pytest.raises(InvalidParameterError, match="path"):
        _make("circulant", 4, 4).project(np.zeros((1, 4)), path="fft")


# -- statistics: rows of W are N(0, I) marginally ----------------------------------------
@pytest.mark.parametrize("method,options", VARIANTS, ids=VARIANT_IDS)
def test_rows_are_standard_gaussian(method, options):
    d, D, scale, n_draws = 5, 20, 0.5, 2000  # d' = 8: three blocks, last one partial
    rows = [0, 7, 8, 13, 19]
    samples = np.empty((n_draws, len(rows), d))
    for s in range(n_draws):
        W = _make(method, d, D, seed=10_000 + s, scale=scale, **options).matrix() / scale
        samples[s] = W[rows]
    for i in range(len(rows)):
        x = samples[:, i, :]
        # mean 0: std of each sample mean is 1/sqrt(2000) = 0.022
        assert np.abs(x.mean(axis=0)).max() < 0.1
        # covariance I: std of the entries about 0.03 (diagonal) and 0.022 (off-diagonal);
        # a factor-2 scale error moves the diagonal to 4 or 0.25
        cov = np.cov(x, rowvar=False)
        assert np.abs(cov - np.eye(d)).max() < 0.15, cov
        # Gaussian fourth moment of single entries (3), not e.g. Rademacher (1); the sample
        # kurtosis has standard deviation about sqrt(24 / 2000) = 0.11
        kurt = (x**4).mean(axis=0) / x.var(axis=0) ** 2
        if method == "toeplitz_like" and options.get("skew_nonzeros") != 1:
            # dense / multi-sparse h: conditionally on h a row is N(0, C) with E[C] = I but
            # C random, so W's entries are a Gaussian scale mixture (excess kurtosis
            # O(1/d'), about 0.4 at d' = 8): covariance I, not exactly Gaussian
            assert np.all((kurt > 2.7) & (kurt < 4.5)), kurt
        else:
            assert np.all(np.abs(kurt - 3.0) < 0.45), kurt


def test_distinct_blocks_are_independent():
    # different blocks use different generating vectors (not copies of one block)
    proj = _make("circulant", 8, 24)
    assert not np.allclose(proj.gen[0], proj.gen[1])
    W = proj.matrix()
    assert not np.allclose(W[:8], W[8:16])


# -- densification ----------------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 5, 17, 64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_densification_is_orthogonal(d, dtype):
    proj = _make("circulant", d, 3, seed=d)
    P = proj.densify_matrix()
    dp = proj.padded_features
    np.testing.assert_allclose(P @ P.T, np.eye(dp), atol=1e-12)
    X = np.random.default_rng(1).standard_normal((7, d)).astype(dtype)
    Y = proj.densified(X)
    assert Y.dtype == dtype and Y.shape == (7, dp)
    np.testing.assert_allclose(
        np.linalg.norm(Y.astype(np.float64), axis=1),
        np.linalg.norm(X.astype(np.float64), axis=1),
        **TOL[dtype],
    )
    Xp = np.zeros((7, dp))
    Xp[:, :d] = X
    np.testing.assert_allclose(Y, Xp @ P.T, **TOL[dtype])


def test_densification_spreads_a_sparse_input():
    proj = _make("circulant", 64, 64, seed=2)
    e = np.zeros((1, 64))
    e[0, 5] = 1.0
    y = proj.densified(e)
    # H D_a H e_5 has all entries of magnitude O(1/sqrt(64)) on average: no single spike
    assert np.abs(y).max() < 0.9
    assert np.count_nonzero(np.abs(y) > 1e-12) > 8


# -- determinism, state, storage --------------------------------------------------------
@pytest.mark.parametrize("method,options", VARIANTS, ids=VARIANT_IDS)
def test_seed_determinism_and_state_roundtrip(method, options):
    a = _make(method, 17, 50, seed=5, **options)
    b = _make(method, 17, 50, seed=5, **options)
    c = _make(method, 17, 50, seed=6, **options)
    sa, sb, sc = a.get_state(), b.get_state(), c.get_state()
    assert sa.keys() == sb.keys()
    for k in sa:
        if isinstance(sa[k], np.ndarray):
            np.testing.assert_array_equal(sa[k], sb[k])
    assert not np.array_equal(sa["gen"], sc["gen"])
    for v in sa.values():
        assert isinstance(v, (int, float, str, np.ndarray))
    r = type(a).from_state(sa)
    X = np.random.default_rng(0).standard_normal((4, 17))
    np.testing.assert_array_equal(r.project(X, path="fast"), a.project(X, path="fast"))
    np.testing.assert_array_equal(r.matrix(), a.matrix())


def test_from_state_rejects_bad_shapes():
    state = _make("toeplitz", 5, 9).get_state()
    state["gen"] = state["gen"][:, :-1]
    with pytest.raises(InvalidParameterError, match="gen must have shape"):
        PROJECTIONS["toeplitz"].from_state(state)
    state = _make("circulant", 5, 9).get_state()
    state["densify"] = np.zeros((2, 8))
    with pytest.raises(InvalidParameterError, match="densify"):
        PROJECTIONS["circulant"].from_state(state)


@pytest.mark.parametrize(
    "method,options,per_block",
    [
        ("circulant", {}, lambda dp, r: dp),
        ("skew_circulant", {}, lambda dp, r: dp),
        ("toeplitz", {}, lambda dp, r: 2 * dp - 1),
        ("hankel", {}, lambda dp, r: 2 * dp - 1),
        ("toeplitz_like", {"displacement_rank": 2}, lambda dp, r: 2 * r * dp),
    ],
)
def test_storage_is_linear(method, options, per_block):
    for d, D in [(64, 256), (100, 1000), (1000, 1000)]:
        proj = _make(method, d, D, **options)
        dp = proj.padded_features
        nb = -(-D // dp)
        assert proj.storage_size == nb * per_block(dp, 2) + 2 * dp
        assert proj.storage_size <= 5 * (D + dp)
        assert proj.storage_size < D * d / 10


def test_dense_cache_is_not_state():
    proj = _make("circulant", 8, 16)
    before = proj.storage_size
    proj.project(np.ones((2, 8)), path="dense")
    proj.project(np.ones((2, 8)), path="fast")
    assert proj.storage_size == before
    assert set(proj.get_state()) == {"n_features_in", "n_components", "scale", "densify", "gen"}


def test_path_rule():
    # small inputs and partial blocks use the GEMM, wide inputs with several blocks FFTs,
    # and the dense cache is never built when W would exceed 2**24 entries
    assert _make("circulant", 16, 64).use_dense()
    assert _make("hankel", 256, 64).use_dense()
    assert not _make("circulant", 2048, 8192).use_dense()
    assert not _make("toeplitz", 5000, 4000).use_dense()


# -- option validation ------------------------------------------------------------------
@pytest.mark.parametrize("value", [0, -1, 9, 1.5, True, "2", None])
def test_displacement_rank_validation(value):
    with pytest.raises(InvalidParameterError, match=r"displacement_rank.*\[1, 8\]"):
        _make("toeplitz_like", 5, 10, displacement_rank=value)


@pytest.mark.parametrize("value", [0, 9, 2.0, False])
def test_skew_nonzeros_validation(value):
    with pytest.raises(InvalidParameterError, match=r"skew_nonzeros.*\[1, 8\]"):
        _make("toeplitz_like", 5, 10, skew_nonzeros=value)


@pytest.mark.parametrize("method", METHODS)
def test_unknown_option_rejected(method):
    with pytest.raises(InvalidParameterError, match="unknown options.*rank"):
        _make(method, 5, 10, rank=2)


def test_displacement_rank_upper_bound_is_padded_dimension():
    proj = _make("toeplitz_like", 5, 10, displacement_rank=8)
    assert proj.displacement_rank == 8
    X = np.random.default_rng(0).standard_normal((3, 5))
    np.testing.assert_allclose(proj.project(X, path="fast"), X @ proj.matrix().T, rtol=1e-10, atol=1e-10)
