"""standardize=True and gamma="scale" at extreme magnitudes (issue 23, item 7): the streamed
column moments are computed on x / (a power of two per column), so columns of 1e155 or
1e-300 get their true mean and standard deviation, not ``scale_ = 1``."""

import dask.array as da
import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler

from dkrr import RandomFeatureRidge, RandomFeatures
from dkrr.errors import InputValidationError
from dkrr.linalg._moments import column_moments


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4)) * [1.0, 2.0, 3.0, 1e-3] + [0.0, 5.0, 1e3, 7.0]
    X[:, 3] = 7.25  # constant column
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.05 * rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize("factor", [1.0, 1e155, 1e-300, 1e300])
@pytest.mark.parametrize("chunk", [37, 400])
def test_moments_equal_standard_scaler_at_any_magnitude(factor, chunk):
    X, _ = _data()
    Xf = X * factor
    m = column_moments(da.from_array(Xf, chunks=(chunk, 4)))
    # the reference: StandardScaler on the data brought back to magnitude 1, rescaled
    sk = StandardScaler().fit(Xf / factor)
    np.testing.assert_allclose(m.mean, sk.mean_ * factor, rtol=1e-12)
    np.testing.assert_array_equal(m.constant(), [False, False, False, True])
    scale = m.scale()
    np.testing.assert_allclose(scale[:3], sk.scale_[:3] * factor, rtol=1e-12)
    assert scale[3] == 1.0  # the constant column, as StandardScaler


def test_moments_of_a_column_mixing_magnitudes_across_blocks():
    """One block of 1e-300s, one of 1e155s: the merge rescales the small block's partial
    result to the large one's power of two (its contribution then lies below rounding)."""
    rng = np.random.default_rng(1)
    big = rng.standard_normal((50, 2)) * 1e155
    X = np.vstack([rng.standard_normal((50, 2)) * 1e-300, big])
    m = column_moments(da.from_array(X, chunks=(50, 2)))
    ref = StandardScaler().fit(X / 1e155)  # the 1e-300s become 0 there: below rounding
    np.testing.assert_allclose(m.mean, ref.mean_ * 1e155, rtol=1e-12)
    np.testing.assert_allclose(m.scale(), ref.scale_ * 1e155, rtol=1e-12)


def test_tiny_nonzero_variance_is_not_constant():
    X = np.array([[1e-300], [2e-300], [3e-300], [4e-300]])
    m = column_moments(da.from_array(X, chunks=(2, 1)))
    assert not m.constant()[0]
    assert m.scale()[0] == pytest.approx(np.sqrt(1.25) * 1e-300, rel=1e-14)


@pytest.mark.parametrize("factor", [1e155, 1e-300])
def test_ridge_with_standardize_fits_the_same_model_at_extreme_magnitudes(factor):
    X, y = _data()
    kw = dict(method="rff", n_components=64, gamma=0.3, alpha=0.1, standardize=True, random_state=2)
    ref = RandomFeatureRidge(**kw).fit(X, y)
    est = RandomFeatureRidge(**kw).fit(X * factor, y)
    np.testing.assert_allclose(est.scale_[:3], ref.scale_[:3] * factor, rtol=1e-12)
    np.testing.assert_allclose(est.predict(X * factor), ref.predict(X), rtol=1e-8, atol=1e-8)
    assert est.score(X * factor, y) > 0.9


def test_gamma_scale_with_standardize_at_tiny_magnitude():
    X, _ = _data()
    rf = RandomFeatures(method="rff", n_components=8, gamma="scale", standardize=True, random_state=0).fit(X * 1e-300)
    ref = RandomFeatures(method="rff", n_components=8, gamma="scale", standardize=True, random_state=0).fit(X)
    assert rf.gamma_ == pytest.approx(ref.gamma_, rel=1e-12)


@pytest.mark.parametrize("factor, exponent", [(1e-300, "e-595"), (1e155, r"e\+315")])
def test_gamma_scale_without_standardize_refuses_an_unrepresentable_variance(factor, exponent):
    X, _ = _data()
    # X.var() is 1.9e+05 (its columns' means differ by 1e3): 1.9e-595 and 1.9e+315 here
    with pytest.raises(InputValidationError, match=f"variance of X is about [0-9.]+{exponent}, outside float64's "
                                                   "range .* pass standardize=True"):
        RandomFeatures(method="rff", n_components=8, gamma="scale", random_state=0).fit(X * factor)


def test_a_column_whose_deviations_overflow_is_refused_naming_it():
    X, y = _data(n=20)
    X[:, 2] = 1.7e308
    X[0, 2] = -1.7e308  # mean ~ 1.5e308: x - mean = -3.2e308 overflows
    with pytest.raises(InputValidationError, match=r"column 2 of X spans -1\.7e\+308 to 1\.7e\+308: x - mean overflows"):
        RandomFeatureRidge(n_components=8, standardize=True, random_state=0).fit(X, y)


@pytest.mark.parametrize("k", [-1000, -600, 0, 40, 900])
def test_moments_scale_exactly_with_powers_of_two(k):
    """Scaling X by 2^k scales the mean and standard deviation by exactly 2^k (bitwise):
    the pass works on x / (a power of two), so no magnitude changes its rounding."""
    X, _ = _data()
    ref = column_moments(da.from_array(X, chunks=(37, 4)))
    m = column_moments(da.from_array(np.ldexp(X, k), chunks=(37, 4)))
    np.testing.assert_array_equal(m.mean, np.ldexp(ref.mean, k))
    np.testing.assert_array_equal(m.std(), np.ldexp(ref.std(), k))
    np.testing.assert_array_equal(m.constant(), ref.constant())


@pytest.mark.parametrize("factor", [1e150, 1e-150])
def test_public_scale_gamma_at_extreme_magnitudes(factor):
    """dkrr.bandwidth.scale_gamma uses the same streamed moments: X.var() of 1e150s is
    1e300 (not inf, which was reported as NaN in X), of 1e-150s 1e-300 (not 0, which gave
    gamma = 1 as for a constant X)."""
    from dkrr.bandwidth import scale_gamma

    X, _ = _data()
    assert scale_gamma(X * factor) == pytest.approx(scale_gamma(X) / factor**2, rel=1e-12)
    with pytest.raises(InputValidationError, match="variance of X is about"):
        scale_gamma(X * factor * (1e10 if factor > 1 else 1e-10))
