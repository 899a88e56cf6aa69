"""Statistical checks of every feature map against the exact kernel (docs/ALGORITHMS.md s. 1, 2, 6).

Seeded Monte-Carlo, deterministic (fixed seeds), with every tolerance derived from the
standard error (SE) measured in the test itself -- never a fixed allowance:

- unbiasedness: for each (method, kernel) the mean over ``S`` independent maps of the
  average error over 32 point pairs must lie within 4 SE of zero (SE = std over maps /
  sqrt(S)), and every single pair within 5 SE (Bonferroni over the pairs). Each test also
  checks its own power: a 5% error in the feature scale (estimate x 1.1025) must move the
  statistic by more than 8 SE, or the test fails as too weak;
- documented biases are tested as documented, not tolerated: SORF with fixed row norms
  estimates the ORF' kernel (fixed norm, uniform direction; closed form below), and dense
  ``toeplitz_like`` is biased upwards at tiny d' while its ``skew_nonzeros=1`` variant is not;
- the MSE ordering of the contract (ORF/SORF < QMC <= RFF < Fastfood-class at equal D) is
  tested on paired differences (same point pairs, per-seed MSE differences) with a
  margin of 3 SE of the difference.

The exact kernels are written out here from docs/ALGORITHMS.md section 1 (not taken from
``dkrr.features.exact_kernel``, which is checked against them), so a bandwidth error shared
by the maps and the library's exact kernel cannot cancel.
"""

import functools

import numpy as np
import pytest
import scipy.special

from dkrr import RandomFeatures
from dkrr.features import exact_kernel

KERNELS = ["gaussian", "angular", "arccos0", "arccos1"]
GAMMA = 0.5  # gaussian bandwidth of the unbiasedness tests (sigma = 1)

# (method, options) held to the unbiasedness bound at d' = 32: rows of W marginally
# N(0, I / sigma^2) (RFF; ORF with chi norms; Fastfood, whose rows have
# chi(d') norms and uniform directions; P-model rows are signed permutations of a Gaussian
# vector after an orthogonal densification; toeplitz_like exactly so with
# skew_nonzeros=1; scrambled QMC points are each uniform on the cube). SORF with chi norms
# has the Gaussian's norms but not its uniform directions: its O(1/sqrt(d)) bias (ALGORITHMS.md
# 2.3) is below the bound here and plain at d = 3 (test_sorf_chi_norms_are_biased_at_tiny_d...).
UNBIASED = [
    ("rff", {}),
    ("orf", {}),
    ("sorf", {"row_norms": "chi"}),
    ("fastfood", {}),
    ("circulant", {}),
    ("skew_circulant", {}),
    ("toeplitz", {}),
    ("hankel", {}),
    ("toeplitz_like", {"skew_nonzeros": 1}),
    ("qmc", {"sequence": "halton"}),
    ("qmc", {"sequence": "sobol"}),
]
# SORF with its default fixed row norms: biased for the gaussian kernel (tested against
# its closed-form expectation below). The row norm does not enter the angular and arccos0
# kernels (scale-free) and arccos1 needs only E||w||^2 = d, which fixed norms match, so
# for those kernels it is held to the same 4-SE bound.
SORF_FIXED = ("sorf", {})
# Dense toeplitz_like (the default, the paper's construction) is documented as biased at
# small d' (rows are a Gaussian scale mixture): excluded from the unbiasedness test, its
# bias is tested by test_dense_toeplitz_like_bias_is_the_documented_one.

N_MAPS = 300  # S: independent maps (seeds 0..S-1) per (method, kernel)
# QMC has the smallest SE of all (the power check still passes with 3x margin at 150) and
# each of its maps costs ~5 ms of scipy scrambling: half the maps
N_MAPS_QMC = 150
# d not a power of two (d' = 32); D = 5.5 blocks of d' (a partial last block). The P-model
# maps share their randomness across pairs within a block: more blocks, smaller SE.
D_IN, N_COMP, N_PAIRS = 24, 176, 32


def _ids(cases):
    return [m + "".join(f"-{k}={v}" for k, v in o.items()) for m, o in cases]


# -- exact kernels (ALGORITHMS.md section 1), one value per row pair --------------------
def _angle(x, y):
    nx, ny = np.linalg.norm(x, axis=1), np.linalg.norm(y, axis=1)
    cos = np.clip((x * y).sum(1) / (nx * ny), -1.0, 1.0)
    return np.arccos(cos), nx, ny


def _exact(kernel, x, y, gamma=GAMMA):
    if kernel == "gaussian":
        return np.exp(-gamma * ((x - y) ** 2).sum(1))
    theta, nx, ny = _angle(x, y)
    if kernel == "angular":
        return 1.0 - 2.0 * theta / np.pi
    if kernel == "arccos0":
        return 1.0 - theta / np.pi
    if kernel == "arccos1":
        return nx * ny / np.pi * (np.sin(theta) + (np.pi - theta) * np.cos(theta))
    raise AssertionError(kernel)


def _orf_prime(x, y, gamma, d_pad):
    """E cos(w . (x - y)) for w = sqrt(d') sqrt(2 gamma) u, u uniform on the sphere S^(d'-1).

    The characteristic function of a uniform unit vector: Gamma(n/2) (2/t)^(n/2-1)
    J_(n/2-1)(t), n = d', t = ||w|| ||x - y||. This is the expectation of ORF' (fixed row
    norms sqrt(d') / sigma, Haar directions) in the padded dimension.
    """
    n = d_pad
    t = np.sqrt(n * 2.0 * gamma) * np.linalg.norm(x - y, axis=1)
    nu = n / 2.0 - 1.0
    return scipy.special.gamma(n / 2.0) * (2.0 / t) ** nu * scipy.special.jv(nu, t)


def _pairs(d, n_pairs, seed):
    """Pairs (x, y): x unit, y at angles 0.3..1.8 rad from x with norms 0.8..1.25.

    Gaussian values (gamma = 0.5) range from 0.2 to 0.95; angles span the arc-cosine
    kernels' range; the norms make arccos1 depend on them.
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_pairs, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    dirs = rng.standard_normal((n_pairs, d))
    dirs -= (dirs * x).sum(1, keepdims=True) * x
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    angles = np.linspace(0.3, 1.8, n_pairs)
    y = np.cos(angles)[:, None] * x + np.sin(angles)[:, None] * dirs
    y *= np.linspace(0.8, 1.25, n_pairs)[:, None]
    return x, y


def _estimates(kernel, method, options, x, y, n_comp, n_maps, gamma=GAMMA):
    """(n_maps, n_pairs): z(x_i) . z(y_i) for maps drawn with seeds 0..n_maps-1."""
    kw = {"gamma": gamma} if kernel == "gaussian" else {}
    est = np.empty((n_maps, x.shape[0]))
    for s in range(n_maps):
        rf = RandomFeatures(kernel=kernel, method=method, n_components=n_comp, random_state=s,
                            **kw, **options).fit(x)
        est[s] = (rf.transform(x) * rf.transform(y)).sum(axis=1)
    return est


def _check_mean(est, target, what, gamma_power=None):
    """Mean error over pairs within 4 SE of 0; every pair within 5 SE; power against 5% scale.

    ``gamma_power``: the gaussian kernel values, to check that a 5% error in gamma
    (k -> k^1.05) moves the statistic by more than 6 SE.
    """
    S = est.shape[0]
    per_map = (est - target).mean(axis=1)  # one number per independent map
    bias = per_map.mean()
    se = per_map.std(ddof=1) / np.sqrt(S)
    # power: a 5% error in the feature scale multiplies the estimate by 1.05^2
    shift = 0.1025 * abs(target.mean())
    assert shift > 8 * se, f"{what}: too weak, 5% scale error = {shift / se:.1f} SE < 8 SE"
    if gamma_power is not None:
        shift = abs((gamma_power**1.05 - gamma_power).mean())
        assert shift > 6 * se, f"{what}: too weak, 5% gamma error = {shift / se:.1f} SE < 6 SE"
    assert abs(bias) <= 4 * se, f"{what}: mean bias {bias:+.5f}, SE {se:.5f} ({bias / se:+.1f} SE)"
    pair_se = est.std(axis=0, ddof=1) / np.sqrt(S)
    z = (est.mean(axis=0) - target) / pair_se
    worst = int(np.argmax(np.abs(z)))
    assert abs(z[worst]) <= 5, (
        f"{what}: pair {worst} estimate {est.mean(0)[worst]:.5f} vs exact {target[worst]:.5f} "
        f"({z[worst]:+.1f} SE)"
    )


# -- exact kernels and exact self-similarity -------------------------------------------
@pytest.mark.parametrize("kernel", KERNELS)
def test_library_exact_kernel_matches_the_contract(kernel):
    x, y = _pairs(D_IN, N_PAIRS, seed=1)
    lib = np.array([exact_kernel(kernel, x[i:i + 1], y[i:i + 1], GAMMA)[0, 0] for i in range(N_PAIRS)])
    np.testing.assert_allclose(lib, _exact(kernel, x, y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", ["gaussian", "angular"])
@pytest.mark.parametrize(("method", "options"), UNBIASED + [SORF_FIXED, ("toeplitz_like", {})],
                         ids=_ids(UNBIASED + [SORF_FIXED, ("toeplitz_like", {})]))
def test_self_similarity_is_exactly_one(method, options, kernel):
    """cos^2 + sin^2 = 1 and sign^2 = 1: ||z(x)||^2 = 1 exactly, so any error in the
    feature scale shows without Monte-Carlo noise."""
    x, _ = _pairs(D_IN, 8, seed=2)
    kw = {"gamma": GAMMA} if kernel == "gaussian" else {}
    for s in range(3):
        Z = RandomFeatures(kernel=kernel, method=method, n_components=N_COMP, random_state=s,
                           **kw, **options).fit_transform(3.0 * x)
        np.testing.assert_allclose((Z * Z).sum(axis=1), 1.0, rtol=1e-12)


# -- unbiasedness ----------------------------------------------------------------------
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(("method", "options"), UNBIASED, ids=_ids(UNBIASED))
def test_kernel_estimate_is_unbiased(method, options, kernel):
    x, y = _pairs(D_IN, N_PAIRS, seed=1)
    est = _estimates(kernel, method, options, x, y, N_COMP, N_MAPS_QMC if method == "qmc" else N_MAPS)
    exact = _exact(kernel, x, y)
    _check_mean(est, exact, f"{method}{options} {kernel}", exact if kernel == "gaussian" else None)


@pytest.mark.parametrize("kernel", KERNELS)
def test_sorf_fixed_norms_estimates_the_orf_prime_kernel(kernel):
    """Default SORF (fixed row norms sqrt(d') / sigma): for the gaussian kernel its
    expectation is ORF''s (Yu et al. 2016: SORF approximates ORF'), whose bias against
    exp(-gamma ||x-y||^2) is the fixed-norm bias; the other kernels do not see row norms
    beyond E||w||^2, so they are unbiased."""
    x, y = _pairs(D_IN, N_PAIRS, seed=1)
    est = _estimates(kernel, "sorf", {}, x, y, N_COMP, N_MAPS)
    if kernel == "gaussian":
        target = _orf_prime(x, y, GAMMA, d_pad=32)  # d' of D_IN = 24
        exact = _exact(kernel, x, y)
        # the documented bias is real at this d' (so the target is not just the kernel)
        per_map = (est - exact).mean(axis=1)
        assert per_map.mean() < -8 * per_map.std(ddof=1) / np.sqrt(N_MAPS)
    else:
        target = _exact(kernel, x, y)
    _check_mean(est, target, f"sorf(fixed) {kernel}")


def test_sorf_chi_norms_are_biased_at_tiny_d_by_their_directions():
    """SORF's rows with chi(d') norms have the Gaussian's norm law but not its uniform
    directions (products of Hadamard and sign matrices: finitely many directions at d' = 4):
    the bias of order 1 / sqrt(d) of ALGORITHMS.md 2.3, below this module's 4-SE bound at
    d' = 32 (it is in UNBIASED there) and plain at d = 3 (found by a probe of the API; the
    README's table had listed it with the exact methods). Per pair, z = (mean over maps -
    exact) / SE: RFF's mean z^2 is about 1, SORF-chi's in the hundreds on far pairs."""
    rng = np.random.default_rng(0)
    d, n_pairs, maps = 3, 40, 300
    x = rng.standard_normal((n_pairs, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = x + rng.standard_normal((n_pairs, d)) * np.linspace(0.2, 2.5, n_pairs)[:, None] / np.sqrt(d)
    exact = _exact("gaussian", x, y)
    chi2 = {}
    for method, options in (("rff", {}), ("sorf", {"row_norms": "chi"})):
        est = np.array([(lambda f: (f.transform(x) * f.transform(y)).sum(1))(
            RandomFeatures(method=method, n_components=64, gamma=GAMMA, random_state=s, **options).fit(x))
            for s in range(maps)])
        z = (est.mean(0) - exact) / (est.std(0, ddof=1) / np.sqrt(maps))
        chi2[method] = float((z**2).mean())
    assert chi2["rff"] < 2.0, chi2  # the test's own calibration: an unbiased map passes
    assert chi2["sorf"] > 20.0, chi2


def test_dense_toeplitz_like_bias_is_the_documented_one():
    """Dense skew-circulant generators make rows a Gaussian scale mixture: the gaussian
    estimate is biased upwards at tiny d' (docstring of dkrr.features._structured);
    ``skew_nonzeros=1`` (signed permutations) is exactly unbiased in the same setting."""
    d, D, S, gamma = 6, 256, 200, 1.0  # d' = 8, r = 1: the largest documented bias
    x, y = _pairs(d, N_PAIRS, seed=3)
    exact = _exact("gaussian", x, y, gamma)
    dense = _estimates("gaussian", "toeplitz_like", {}, x, y, D, S, gamma)
    per_map = (dense - exact).mean(axis=1)
    se = per_map.std(ddof=1) / np.sqrt(S)
    assert per_map.mean() > 4 * se, (per_map.mean(), se)
    sparse = _estimates("gaussian", "toeplitz_like", {"skew_nonzeros": 1}, x, y, D, S, gamma)
    _check_mean(sparse, exact, "toeplitz_like(skew_nonzeros=1) d'=8")


def test_rff_variance_matches_theory():
    """Var of the RFF estimate is (1 - exp(-z^2))^2 / (2D) (ORF paper, Lemma 1), within
    4 SE of the sample variance (SE from the fourth central moment)."""
    d, D, S = 16, 32, 2000
    x, y = _pairs(d, 3, seed=3)
    z2 = 2 * GAMMA * ((x - y) ** 2).sum(1)  # z = ||x - y|| / sigma
    est = _estimates("gaussian", "rff", {}, x, y, D, S)
    c = est - est.mean(0)
    var = (c**2).sum(0) / (S - 1)
    se_var = np.sqrt(((c**4).mean(0) - var**2) / S)
    theory = (1 - np.exp(-z2)) ** 2 / (2 * D)
    assert np.all(np.abs(var - theory) <= 4 * se_var), (var, theory, se_var)
    # sharp enough to see the variance of the other convention (D output columns, i.e.
    # D/2 frequencies: twice the variance)
    assert np.all(theory > 8 * se_var)


# -- MSE ordering at equal D (ALGORITHMS.md section 6) ---------------------------------
@functools.lru_cache(maxsize=None)
def _sphere_setting(d, n):
    """n points on the unit sphere in R^d, sigma = mean 50-NN distance (ORF paper, Fig. 4)."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    dist2 = np.maximum(2.0 - 2.0 * X @ X.T, 0.0)
    sigma = np.sort(np.sqrt(dist2), axis=1)[:, 50].mean()
    gamma = 1.0 / (2.0 * sigma**2)
    return X, gamma, np.exp(-gamma * dist2)


@functools.lru_cache(maxsize=None)
def _mse_per_map(method, options, d, n, D, S):
    """Per-map MSE over all distinct pairs, maps with seeds 1000..1000+S-1 (S values)."""
    X, gamma, K = _sphere_setting(d, n)
    iu = np.triu_indices(n, 1)
    out = np.empty(S)
    for s in range(S):
        Z = RandomFeatures(method=method, n_components=D, gamma=gamma, random_state=1000 + s,
                           **dict(options)).fit(X).transform(X)
        out[s] = np.mean(((Z @ Z.T) - K)[iu] ** 2)
    return out


def _assert_less(a, b, d, n, D, S, factor=1.0):
    """MSE(a) < factor * MSE(b) by more than 3 SE of the paired per-map difference."""
    ma = _mse_per_map(a[0], tuple(a[1].items()), d, n, D, S)
    mb = _mse_per_map(b[0], tuple(b[1].items()), d, n, D, S)
    diff = factor * mb - ma
    se = diff.std(ddof=1) / np.sqrt(S)
    assert diff.mean() > 3 * se, (
        f"MSE {a} = {ma.mean():.3e} not below {factor} x MSE {b} = {factor * mb.mean():.3e} "
        f"by 3 SE (difference {diff.mean():.2e}, SE {se:.2e}; d={d}, D={D})"
    )


def _assert_not_above(a, b, d, n, D, S):
    """MSE(a) <= MSE(b) up to 3 SE of the paired difference."""
    ma = _mse_per_map(a[0], tuple(a[1].items()), d, n, D, S)
    mb = _mse_per_map(b[0], tuple(b[1].items()), d, n, D, S)
    diff = ma - mb
    se = diff.std(ddof=1) / np.sqrt(S)
    assert diff.mean() <= 3 * se, (
        f"MSE {a} = {ma.mean():.3e} above MSE {b} = {mb.mean():.3e} by "
        f"{diff.mean() / se:.1f} SE (d={d}, D={D})"
    )


RFF = ("rff", {})
HALTON, SOBOL = ("qmc", {"sequence": "halton"}), ("qmc", {"sequence": "sobol"})
FASTFOOD_CLASS = [("fastfood", {}), ("circulant", {}), ("skew_circulant", {}), ("toeplitz", {}),
                  ("hankel", {}), ("toeplitz_like", {}), ("toeplitz_like", {"skew_nonzeros": 1})]
ORD_D, ORD_N, ORD_S = 32, 100, 64  # default setting: small d, D = d (one block)


@pytest.mark.parametrize("method", ["orf", "sorf"])
def test_orthogonal_maps_have_several_times_lower_mse_than_rff(method):
    """ORF paper: about 8x lower MSE than RFF; tested: below RFF / 4 by 3 SE."""
    _assert_less((method, {}), RFF, ORD_D, ORD_N, ORD_D, ORD_S, factor=0.25)


@pytest.mark.parametrize(("method", "options"), FASTFOOD_CLASS, ids=_ids(FASTFOOD_CLASS))
def test_rff_beats_the_fastfood_class_at_small_D(method, options):
    _assert_less(RFF, (method, options), ORD_D, ORD_N, ORD_D, ORD_S)


@pytest.mark.parametrize("qmc", [HALTON, SOBOL], ids=["halton", "sobol"])
def test_qmc_beats_rff_at_D_4d(qmc):
    _assert_less(qmc, RFF, ORD_D, ORD_N, 4 * ORD_D, ORD_S)


@pytest.mark.parametrize("qmc", [
    HALTON,
    pytest.param(SOBOL, marks=pytest.mark.xfail(strict=True, reason=(
        "contract says QMC < RFF at equal D, but at D = d = 32 scrambled Sobol's MSE is 10% "
        "above RFF's (6.82e-3 vs 6.19e-3, +9.8 SE over 256 maps; +6.5 SE over this test's "
        "128); Sobol wins from D = 4d (0.45x RFF). A property of the first d scrambled Sobol "
        "points (scipy), not a scale error: Sobol passes the unbiasedness test"))),
], ids=["halton", "sobol"])
def test_qmc_not_worse_than_rff_at_D_d(qmc):
    _assert_not_above(qmc, RFF, ORD_D, ORD_N, ORD_D, 2 * ORD_S)


@pytest.mark.slow
@pytest.mark.parametrize("mult", [1, 4])
def test_orf_paper_mse_ordering(mult):
    """ORF paper, Fig. 4 setting: unit sphere, d = 64, 400 points, D = d and 4d."""
    d, n, S = 64, 400, 32
    D = mult * d
    for m in ("orf", "sorf"):
        _assert_less((m, {}), RFF, d, n, D, S, factor=0.25)
    for m in FASTFOOD_CLASS:
        _assert_less(RFF, m, d, n, D, S)
    if mult > 1:
        _assert_less(HALTON, RFF, d, n, D, S)
        _assert_less(SOBOL, RFF, d, n, D, S)
    _assert_less(("orf", {}), HALTON, d, n, D, S)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(("method", "options"), UNBIASED, ids=_ids(UNBIASED))
def test_kernel_estimate_is_unbiased_large_d(method, options, kernel):
    """The same 4-SE bound at d = 100 (d' = 128), D = 300 (2.3 blocks)."""
    x, y = _pairs(100, N_PAIRS, seed=4)
    est = _estimates(kernel, method, options, x, y, 300, 300)
    _check_mean(est, _exact(kernel, x, y), f"{method}{options} {kernel} d=100")
