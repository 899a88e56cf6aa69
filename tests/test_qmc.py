"""Tests of the quasi-Monte Carlo projection (dkrr.features._qmc)."""

import warnings

import numpy as np
import pytest
import scipy.special
from scipy.stats import qmc

from dkrr.errors import InvalidParameterError
from dkrr.features import PROJECTIONS
from dkrr.features._qmc import QMC_SEQUENCES, qmc_gaussian_points

TOL = {np.float64: dict(rtol=1e-10, atol=1e-10), np.float32: dict(rtol=1e-4, atol=1e-4)}


def _make(d, D, seed=0, scale=0.7, **options):
    return PROJECTIONS["qmc"].generate(d, D, scale, np.random.default_rng(seed), **options)


@pytest.mark.parametrize("sequence", QMC_SEQUENCES)
@pytest.mark.parametrize("d", [1, 3, 5, 8, 17, 64])
def test_project_matches_matrix(sequence, d):
    rng = np.random.default_rng(d)
    for D in sorted({1, 7, d, 3 * d + 1}):
        proj = _make(d, D, seed=D, sequence=sequence)
        W = proj.matrix()
        assert W.shape == (D, d) and np.all(np.isfinite(W))
        for dtype in (np.float64, np.float32):
            X = rng.standard_normal((6, d)).astype(dtype)
            got = proj.project(X)
            assert got.dtype == dtype and got.shape == (6, D)
            np.testing.assert_allclose(got, X.astype(np.float64) @ W.T, **TOL[dtype])


def test_points_follow_the_scrambled_sequence():
    # W / scale is Phi^-1 of the scrambled Halton points seeded with the drawn seed
    seed = int(np.random.default_rng(3).integers(0, 2**63 - 1))
    proj = _make(4, 10, seed=3, scale=2.0)
    U = qmc.Halton(4, scramble=True, rng=seed).random(10)
    np.testing.assert_allclose(proj.matrix() / 2.0, scipy.special.ndtri(U), rtol=1e-12)


def test_sobol_non_power_of_two_is_a_prefix_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = qmc_gaussian_points(7, 3, "sobol", seed=11)
        b = qmc_gaussian_points(8, 3, "sobol", seed=11)
        c = qmc_gaussian_points(1, 3, "sobol", seed=11)
        _make(5, 13, sequence="sobol")
    np.testing.assert_array_equal(a, b[:7])
    np.testing.assert_array_equal(c, b[:1])


@pytest.mark.parametrize("sequence", QMC_SEQUENCES)
def test_marginals_are_standard_gaussian(sequence):
    # low-discrepancy points: the moments are much more accurate than Monte Carlo's
    W = _make(3, 4096, seed=1, scale=1.0, sequence=sequence).matrix()
    assert np.abs(W.mean(axis=0)).max() < 0.02
    assert np.abs(W.var(axis=0) - 1.0).max() < 0.05
    cov = np.cov(W, rowvar=False)
    assert np.abs(cov - np.diag(np.diag(cov))).max() < 0.05
    # the scale multiplies every row
    W2 = _make(3, 4096, seed=1, scale=0.5, sequence=sequence).matrix()
    np.testing.assert_allclose(W2, 0.5 * W, rtol=1e-12)


@pytest.mark.parametrize("sequence", QMC_SEQUENCES)
def test_lower_discrepancy_than_monte_carlo(sequence):
    # the uniforms behind W are more evenly spread than i.i.d. ones of the same size
    proj = _make(2, 256, seed=2, scale=1.0, sequence=sequence)
    U = scipy.special.ndtr(proj.matrix())
    mc = np.random.default_rng(0).random((256, 2))
    assert qmc.discrepancy(U) < 0.5 * qmc.discrepancy(mc)


def test_seed_determinism_and_state_roundtrip():
    a, b, c = _make(6, 20, seed=4), _make(6, 20, seed=4), _make(6, 20, seed=5)
    np.testing.assert_array_equal(a.matrix(), b.matrix())
    assert not np.allclose(a.matrix(), c.matrix())
    assert not np.allclose(a.matrix(), _make(6, 20, seed=4, sequence="sobol").matrix())
    state = a.get_state()
    assert state["sequence"] == "halton"
    r = PROJECTIONS["qmc"].from_state(state)
    np.testing.assert_array_equal(r.matrix(), a.matrix())
    assert a.storage_size == 20 * 6


@pytest.mark.parametrize("value", ["random", "Halton", 1, None])
def test_sequence_validation(value):
    with pytest.raises(InvalidParameterError, match=r"sequence.*\('halton', 'sobol'\)"):
        _make(3, 4, sequence=value)


def test_unknown_option_and_sobol_dimension_limit():
    with pytest.raises(InvalidParameterError, match="unknown options.*scramble"):
        _make(3, 4, scramble=False)
    with pytest.raises(InvalidParameterError, match="at most 21201"):
        qmc_gaussian_points(2, qmc.Sobol.MAXDIM + 1, "sobol", seed=0)
    state = _make(3, 4).get_state()
    state["sequence"] = "niederreiter"
    with pytest.raises(InvalidParameterError, match="sequence"):
        PROJECTIONS["qmc"].from_state(state)
