"""Structured random orthogonal matrices (``method="rom"``), row sampling and the linear
kernel, against dense matrices and the closed forms of [CRW17] (ALGORITHMS.md 2.8).

The MSE tests use one projection with many independent ``n x n`` blocks (each block is
one draw of ``M = sqrt(n) prod H_n D_i``, exactly the matrix a ``D < n`` map keeps rows
of) and select each block's rows with the library's own rule
(:func:`draw_block_rows`). Tolerances are 4 standard errors measured from the sample.
"""

import numpy as np
import pytest

from dkrr import RandomFeatureRidge, RandomFeatures
from dkrr.errors import InvalidParameterError
from dkrr.features import KERNELS, PROJECTIONS, build_random_feature_map, exact_kernel
from dkrr.features._orthogonal import ROW_SAMPLING, SORFProjection, draw_block_rows
from dkrr.features._rom import ROM_DIAGONALS, ROMProjection, is_complex_rom
from dkrr.io._model import load_model, save_model

# -- the fixed pair of the theorem tests: n = 32 coordinates, uneven ------------------
N, M = 32, 8
_I = np.arange(N)
XV = np.exp(-_I / 5.0) * (1 + (_I % 3))
YV = np.exp(-_I / 7.0) * np.cos(_I) + 0.3 * np.exp(-((_I - 3.0) ** 2))
XY, XX, YY, S4 = XV @ YV, XV @ XV, YV @ YV, np.sum(XV**2 * YV**2)
N_BLOCKS = 5000


def bracket_real(k):
    """The bracket of the theorem: the per-row variance of ``n (Mx)_j (My)_j``."""
    terms = sum((-1) ** r * 2**r / N**r * (2 * XY**2 + XX * YY) for r in range(1, k))
    return XY**2 + XX * YY + terms + (-1) ** k * 2**k / N ** (k - 1) * S4


def bracket_complex(k):
    """The same for a complex diagonal (derived in ALGORITHMS.md 2.8): ``(1/2)(|x|^2|y|^2
    + (x^T y)^2 - U_k - V_k)`` with ``U_1 = V_1 = sum x_i^2 y_i^2``,
    ``U' = ((x^T y)^2 + |x|^2 |y|^2 - U) / n``, ``V' = (2 (x^T y)^2 - V) / n``."""
    U = V = S4
    for _ in range(k - 1):
        U, V = (XY**2 + XX * YY - U) / N, (2 * XY**2 - V) / N
    return 0.5 * (XX * YY + XY**2 - U - V)


def without_replacement(bracket):
    return bracket / M * (N - M) / (N - 1)


@pytest.fixture(scope="module")
def row_sets():
    rng = np.random.default_rng(2017)
    return {rule: np.stack([draw_block_rows(rule, M, N, rng) for _ in range(N_BLOCKS)])
            for rule in ("with_replacement", "without_replacement")}


def _row_products(k, diagonal, seed):
    """(N_BLOCKS, n): ``Re(w_j^T x conj(w_j^T y))`` for every row j of every block."""
    p = ROMProjection.generate(N, N_BLOCKS * N, 1.0, np.random.default_rng(seed), n_hd_blocks=k,
                               rom_diagonal=diagonal)
    P = p.project(np.stack([XV, YV]), path="fast")
    if p.is_complex:
        D = N_BLOCKS * N
        prod = P[0, :D] * P[1, :D] + P[0, D:] * P[1, D:]
    else:
        prod = P[0] * P[1]
    return prod.reshape(N_BLOCKS, N)


def _mse(estimates):
    err = (estimates - XY) ** 2
    return err.mean(), err.std(ddof=1) / np.sqrt(err.size)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_real_rom_mse_without_replacement_is_the_theorem(k, row_sets):
    prod = _row_products(k, "rademacher", seed=k)
    mse, se = _mse(np.take_along_axis(prod, row_sets["without_replacement"], 1).mean(1))
    assert abs(mse - without_replacement(bracket_real(k))) < 4 * se
    # and the theorem's improvement over a Gaussian JLT, (1/m)((x^T y)^2 + |x|^2 |y|^2)
    assert mse + 4 * se < (XY**2 + XX * YY) / M


@pytest.mark.parametrize("k", [1, 2, 3])
def test_real_rom_mse_with_replacement_drops_the_finite_population_factor(k, row_sets):
    # rows i.i.d. uniform among the n rows of M, whose mean is exactly x^T y (M is
    # orthogonal): MSE = (1/m) * bracket, the theorem without (n - m) / (n - 1)
    prod = _row_products(k, "rademacher", seed=10 + k)
    mse, se = _mse(np.take_along_axis(prod, row_sets["with_replacement"], 1).mean(1))
    assert abs(mse - bracket_real(k) / M) < 4 * se


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("diagonal", ["complex4", "unit_circle"])
def test_complex_rom_mse_is_about_half(k, diagonal, row_sets):
    rows = row_sets["without_replacement"]
    real, real_se = _mse(np.take_along_axis(_row_products(k, "rademacher", seed=20 + k), rows, 1).mean(1))
    cplx, cplx_se = _mse(np.take_along_axis(_row_products(k, diagonal, seed=30 + k), rows, 1).mean(1))
    assert abs(cplx - without_replacement(bracket_complex(k))) < 4 * cplx_se
    ratio = cplx / real
    ratio_se = ratio * np.hypot(real_se / real, cplx_se / cplx)
    expected = bracket_complex(k) / bracket_real(k)  # exactly 1/2 for k = 1, 1/2 + O(1/n) after
    assert abs(ratio - expected) < 4 * ratio_se
    assert abs(expected - 0.5) < 0.02


def test_first_rows_k1_closed_form_and_unbiased():
    # k = 1, the first m = 2^q rows of Sylvester's H: the row average of
    # n h_jl h_jl' is 1 when l = l' (mod m) and 0 otherwise, so the estimate is
    # x^T y + sum_{l < l', l = l' mod m} eps_l eps_l' (x_l y_l' + x_l' y_l) and
    # MSE = sum_{l < l', l = l' mod m} (x_l y_l' + x_l' y_l)^2.
    expected = sum((XV[a] * YV[b] + XV[b] * YV[a]) ** 2
                   for a in range(N) for b in range(a + 1, N) if (a - b) % M == 0)
    for k in (1, 2, 3):
        est = _row_products(k, "rademacher", seed=40 + k)[:, :M].mean(1)
        assert abs(est.mean() - XY) < 4 * est.std(ddof=1) / np.sqrt(est.size)  # unbiased
        if k == 1:
            mse, se = _mse(est)
            assert abs(mse - expected) < 4 * se


def test_orthogonal_sign_features_beat_iid_for_the_angular_kernel():
    # [CRW17]: MSE of sign features of orthogonal Gaussian rows < i.i.d. rows, at equal m
    # (the gain is smallest at small angles: about 15% at theta = pi/8, 45% at pi/2)
    d, n_blocks = 8, 3000
    rng = np.random.default_rng(5)
    e1, e2 = np.eye(d)[0], np.eye(d)[1]
    maps = {method: PROJECTIONS[method].generate(d, n_blocks * d, 1.0, np.random.default_rng(6))
            for method in ("orf", "rff")}
    for theta in (np.pi / 4, np.pi / 3, np.pi / 2, 3 * np.pi / 4):
        xy = np.stack([e1, np.cos(theta) * e1 + np.sin(theta) * e2])
        xy = xy @ np.linalg.qr(rng.standard_normal((d, d)))[0]  # a generic pair at angle theta
        truth = exact_kernel("angular", xy[:1], xy[1:])[0, 0]
        mses = {}
        for method, p in maps.items():
            S = np.sign(p.project(xy))
            est = (S[0] * S[1]).reshape(n_blocks, d).mean(1)  # m = d rows per block
            err = (est - truth) ** 2
            mses[method] = (err.mean(), err.std(ddof=1) / np.sqrt(n_blocks))
        (orf, orf_se), (rff, rff_se) = mses["orf"], mses["rff"]
        assert abs(rff - (1 - truth**2) / d) < 4 * rff_se  # i.i.d. signs: Bernoulli variance
        assert orf + 4 * np.hypot(orf_se, rff_se) < rff, (theta, orf, rff)


# -- the construction against dense matrices ----------------------------------------------
@pytest.mark.parametrize("diagonal", ROM_DIAGONALS)
@pytest.mark.parametrize("row_sampling", ROW_SAMPLING)
@pytest.mark.parametrize("d, D", [(5, 3), (10, 16), (10, 21), (16, 40), (3, 1)])
def test_rom_transform_is_the_dense_matrix(diagonal, row_sampling, d, D):
    X = np.random.default_rng(1).standard_normal((7, d))
    rf = RandomFeatures(kernel="linear", method="rom", n_components=D, random_state=3, n_hd_blocks=2,
                        rom_diagonal=diagonal, row_sampling=row_sampling).fit(X)
    W = rf.projection_matrix()
    assert W.shape == (D, d)
    assert W.dtype == (np.float64 if diagonal == "rademacher" else np.complex128)
    P = X @ W.T
    expected = np.concatenate([P.real, P.imag], axis=1) if diagonal != "rademacher" else P
    expected = expected / np.sqrt(D)
    assert rf.n_output_features_ == expected.shape[1] == (D if diagonal == "rademacher" else 2 * D)
    np.testing.assert_allclose(rf.transform(X), expected, rtol=1e-10, atol=1e-12)
    proj = rf.feature_map_.projection
    for path in ("fast", "dense"):
        np.testing.assert_allclose(proj.project(X, path=path) / np.sqrt(D), expected, rtol=1e-10, atol=1e-12)
    Z32 = rf.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("diagonal", ROM_DIAGONALS)
def test_rom_block_is_sqrt_n_times_unitary(diagonal):
    for k in (1, 3):
        p = ROMProjection.generate(16, 16, 1.0, np.random.default_rng(0), rom_diagonal=diagonal, n_hd_blocks=k)
        W = p.matrix()
        np.testing.assert_allclose(W @ W.conj().T, 16 * np.eye(16), atol=1e-10)
    W1 = ROMProjection.generate(16, 16, 1.0, np.random.default_rng(0), rom_diagonal=diagonal, n_hd_blocks=1).matrix()
    np.testing.assert_allclose(np.abs(W1), 1.0, atol=1e-12)  # k = 1: entries +-lambda_l


@pytest.mark.parametrize("kernel", ["gaussian", "angular", "arccos0", "arccos1", "linear"])
@pytest.mark.parametrize("row_sampling", ROW_SAMPLING)
@pytest.mark.parametrize("k", [1, 3])
def test_rademacher_rom_is_sorf_with_fixed_norms(kernel, row_sampling, k):
    X = np.random.default_rng(2).standard_normal((9, 12))
    common = dict(kernel=kernel, n_components=21, random_state=11, n_hd_blocks=k, row_sampling=row_sampling)
    rom = RandomFeatures(method="rom", **common).fit(X)
    sorf = RandomFeatures(method="sorf", row_norms="fixed", **common).fit(X)
    np.testing.assert_array_equal(rom.transform(X), sorf.transform(X))
    np.testing.assert_array_equal(rom.projection_matrix(), sorf.projection_matrix())


@pytest.mark.parametrize("kernel", ["gaussian", "angular", "arccos0", "arccos1"])
@pytest.mark.parametrize("diagonal", ["complex4", "unit_circle"])
def test_complex_diagonal_needs_the_linear_kernel(kernel, diagonal):
    with pytest.raises(InvalidParameterError, match=rf"rom_diagonal='{diagonal}' makes W complex.*"
                                                    rf"not kernel='{kernel}'.*rom_diagonal='rademacher'"):
        RandomFeatures(kernel=kernel, method="rom", rom_diagonal=diagonal).fit(np.zeros((2, 3)))


def test_bad_options_are_refused():
    X = np.zeros((2, 3))
    with pytest.raises(InvalidParameterError, match=r"rom_diagonal must be one of .*got 'gauss'"):
        RandomFeatures(kernel="linear", method="rom", rom_diagonal="gauss").fit(X)
    with pytest.raises(InvalidParameterError, match=r"row_sampling must be one of .*got 'last'"):
        RandomFeatures(method="sorf", row_sampling="last").fit(X)
    with pytest.raises(InvalidParameterError, match=r"option row_sampling='first' does not apply to "
                                                    r"method='rff'; it is used by method\(s\) \['rom', 'sorf'\]"):
        RandomFeatures(method="rff", row_sampling="first").fit(X)
    with pytest.raises(InvalidParameterError, match=r"gamma applies only to the kernels \['gaussian'"):
        RandomFeatures(kernel="linear", gamma=2.0).fit(X)
    with pytest.raises(InvalidParameterError, match=r"sampling='surrogate_leverage' resamples rows of a real W"):
        RandomFeatureRidge(kernel="linear", method="rom", rom_diagonal="complex4", n_components=4,
                           sampling="surrogate_leverage").fit(np.ones((20, 3)), np.arange(20.0))


def test_tampered_rom_state_is_refused():
    good = ROMProjection.generate(6, 5, 1.0, np.random.default_rng(0), rom_diagonal="complex4",
                                  row_sampling="without_replacement")
    for field, value, message in [
        ("signs", np.full_like(good.signs, 4), r"complex4 diagonals must hold only \[0, 1, 2, 3\], got values \[4\]"),
        ("rows", np.array([0, 1, 2, 3, 99]), r"rows must hold 5 row indices in \[0, 8\)"),
        ("rom_diagonal", "gaussian", r"rom_diagonal must be one of"),
    ]:
        state = {**good.get_state(), field: value}
        with pytest.raises(InvalidParameterError, match=message):
            ROMProjection.from_state(state)
    state = {**good.get_state(), "rom_diagonal": "rademacher"}  # codes 0..3 are not signs
    with pytest.raises(InvalidParameterError, match=r"rademacher diagonals must hold only \[-1, 1\]"):
        ROMProjection.from_state(state)


# -- row sampling -------------------------------------------------------------------------
def test_row_sampling_rules():
    rng = np.random.default_rng(0)
    assert draw_block_rows("first", 5, 8, rng).size == 0
    assert draw_block_rows("without_replacement", 16, 8, rng).size == 0  # D multiple of d'
    state = rng.bit_generator.state
    assert draw_block_rows("first", 5, 8, rng).size == 0 and rng.bit_generator.state == state  # no draw
    draws = np.stack([draw_block_rows("without_replacement", 8, 32, rng) for _ in range(2000)])
    assert all(len(set(r)) == 8 for r in draws) and draws.min() >= 0 and draws.max() < 32
    counts = np.bincount(draws.ravel(), minlength=32)  # each row kept with probability m / n
    assert np.all(np.abs(counts - 2000 * 8 / 32) < 5 * np.sqrt(2000 * 0.25 * 0.75))
    reps = np.stack([draw_block_rows("with_replacement", 8, 32, rng) for _ in range(2000)])
    repeated = np.mean([len(set(r)) < 8 for r in reps])
    assert abs(repeated - (1 - np.prod(1 - np.arange(8) / 32))) < 0.05  # birthday probability
    # D >= d': full blocks keep every row, only the partial block is sampled
    p = SORFProjection.generate(5, 19, 1.0, np.random.default_rng(1), row_sampling="without_replacement")
    assert p.rows.shape == (3,) and p._kept_rows()[:16].tolist() == list(range(16))


@pytest.mark.parametrize("row_sampling", ROW_SAMPLING)
@pytest.mark.parametrize("d, D", [(5, 3), (12, 21), (16, 40)])
def test_sorf_row_sampling_with_chi_norms_is_the_dense_matrix(row_sampling, d, D):
    p = SORFProjection.generate(d, D, 0.7, np.random.default_rng(8), row_norms="chi", row_sampling=row_sampling)
    X = np.random.default_rng(9).standard_normal((6, d))
    W = p.matrix()
    assert W.shape == (D, d)
    for path in ("fast", "dense"):
        np.testing.assert_allclose(p.project(X, path=path), X @ W.T, rtol=1e-10, atol=1e-12)
    # the kept rows are rows of the full stack of blocks, with their own chi norms
    full = SORFProjection(d, p.n_blocks * p.padded_features, 0.7, p.signs, p.norms)
    kept = p._kept_rows() if p.rows.size else np.arange(D)
    np.testing.assert_array_equal(W, full.matrix()[kept])


def test_sorf_default_draws_and_state_are_unchanged():
    a = SORFProjection.generate(12, 9, 0.5, np.random.default_rng(4))
    b = SORFProjection.generate(12, 9, 0.5, np.random.default_rng(4), row_sampling="first")
    np.testing.assert_array_equal(a.matrix(), b.matrix())
    assert set(a.get_state()) == {"n_features_in", "n_components", "scale", "signs", "norms"}
    c = SORFProjection.generate(12, 9, 0.5, np.random.default_rng(4), row_sampling="with_replacement")
    np.testing.assert_array_equal(c.signs, a.signs)  # row sampling draws after the SORF draws
    full = SORFProjection.generate(12, 16, 0.5, np.random.default_rng(4))  # the same d' x d' block
    np.testing.assert_array_equal(c.matrix(), full.matrix()[c.rows])
    back = SORFProjection.from_state(c.get_state())
    np.testing.assert_array_equal(back.matrix(), c.matrix())


@pytest.mark.parametrize("method, options", [
    ("rom", {"rom_diagonal": "complex4", "row_sampling": "without_replacement"}),
    ("rom", {"rom_diagonal": "unit_circle", "n_hd_blocks": 2}),
    ("sorf", {"row_sampling": "with_replacement", "row_norms": "chi"}),
])
def test_model_file_round_trip(method, options, tmp_path):
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((60, 6)), rng.standard_normal(60)
    kernel = "linear" if method == "rom" else "gaussian"
    est = RandomFeatureRidge(kernel=kernel, method=method, n_components=5, random_state=2, **options).fit(X, y)
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    assert back.n_output_features_ == est.n_output_features_ == (10 if method == "rom" else 10)
    np.testing.assert_array_equal(back.feature_map_.projection.matrix(), est.feature_map_.projection.matrix())


# -- the linear kernel ----------------------------------------------------------------------
def test_linear_kernel_basics():
    assert "linear" in KERNELS
    X, Y = np.random.default_rng(0).standard_normal((4, 3)), np.random.default_rng(1).standard_normal((5, 3))
    np.testing.assert_array_equal(exact_kernel("linear", X, Y), X @ Y.T)
    rf = RandomFeatures(kernel="linear", method="rff", n_components=6, random_state=0).fit(X)
    np.testing.assert_allclose(rf.transform(X), X @ rf.projection_matrix().T / np.sqrt(6), rtol=1e-12)
    assert rf.n_output_features_ == 6


@pytest.mark.parametrize("method", sorted(PROJECTIONS))
def test_linear_features_are_unbiased_for_x_dot_y(method):
    # E[Z Z^T] = X X^T: rows of W with E[w w^T] = I, for every projection method
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 6)) * np.array([3.0, 0.2, 1.0, 1.0, 0.5, 2.0])
    maps = [build_random_feature_map(kernel="linear", method=method, n_components=6, gamma=1.0,
                                     n_features_in=6, random_state=s, options={}) for s in range(200)]
    est = np.stack([(lambda Z: Z @ Z.T)(fmap.transform(X)) for fmap in maps])
    mean, se = est.mean(0), est.std(0, ddof=1) / np.sqrt(len(est))
    K = X @ X.T
    assert np.all(np.abs(mean - K) < 4 * se + 1e-9), (method, mean, K)


def test_ridge_on_a_jlt_sketch_is_ridge_on_the_features():
    rng = np.random.default_rng(7)
    X, y = rng.standard_normal((200, 12)), rng.standard_normal(200)
    est = RandomFeatureRidge(kernel="linear", method="rom", rom_diagonal="unit_circle", n_components=8,
                             alpha=0.5, fit_intercept=False, random_state=1).fit(X, y)
    Z = RandomFeatures(kernel="linear", method="rom", rom_diagonal="unit_circle", n_components=8,
                       random_state=1).fit(X).transform(X)
    assert Z.shape == (200, 16)
    coef = np.linalg.solve(Z.T @ Z + 0.5 * np.eye(16), Z.T @ y)
    np.testing.assert_allclose(est.coef_.ravel(), coef, rtol=1e-8, atol=1e-10)


def test_nystroem_linear_is_exact_when_landmarks_span_the_data():
    X = np.random.default_rng(3).standard_normal((40, 4))
    Z = RandomFeatures(kernel="linear", method="nystroem", n_components=10, random_state=0).fit(X).transform(X)
    np.testing.assert_allclose(Z @ Z.T, X @ X.T, atol=1e-8)



@pytest.mark.parametrize("diagonal", ["rademacher", "complex4", "unit_circle"])
def test_memory_estimate_counts_the_width_of_complex_features(diagonal):
    """A complex ROM's features are 2 D columns: the fit's memory estimate uses that p."""
    import dask.array as da

    from dkrr.errors import MemoryBudgetError
    from dkrr.linalg._memory import ridge_memory_estimate

    complex_ = is_complex_rom("rom", diagonal)
    rf = RandomFeatures(kernel="linear", method="rom", n_components=8, rom_diagonal=diagonal, random_state=0)
    rf.fit(np.zeros((64, 16)))
    est = ridge_memory_estimate(kernel="linear", method="rom", n_features_in=16, n_components=8, block_rows=64,
                                is_complex=complex_)
    assert est.p == rf.n_output_features_ == (16 if complex_ else 8)
    # the estimator passes the flag: the refusal names the true width (before any task runs)
    X, y = da.zeros((1000, 16), chunks=(100, 16)), da.zeros(1000, chunks=100)
    model = RandomFeatureRidge(kernel="linear", method="rom", n_components=40_000, rom_diagonal=diagonal,
                               solver="cholesky")  # "auto" would switch to the matrix-free pcg
    with pytest.raises(MemoryBudgetError, match=f"p={80_000 if complex_ else 40_000} features"):
        model.fit(X, y)
