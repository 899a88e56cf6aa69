"""Tests of the fast cos/sin kernel (dkrr.features._trig.cos_sin)."""

import numpy as np
import pytest

from dkrr.errors import InputValidationError
from dkrr.features._trig import HAVE_NUMBA, MAX_ARG32, MAX_ARG64, cos_sin


def _args(dtype, limit, rng):
    k = np.arange(-4000, 4001)
    parts = [
        rng.uniform(-limit, limit, 50_000),
        rng.uniform(-10.0, 10.0, 50_000),
        rng.uniform(-1e-3, 1e-3, 1000),
        k * (np.pi / 2),  # multiples of pi/2 (worst cancellation)
        k * (np.pi / 4),  # quadrant boundaries of the reduction
        np.array([0.0, -0.0, 1e-300, -1e-300, limit, -limit]),
    ]
    x = np.concatenate(parts).astype(dtype)
    x = np.concatenate([x, np.zeros(-x.size % 7, dtype=dtype)])
    return x.reshape(-1, 7)  # odd width: exercises the vector loop's remainder


@pytest.mark.parametrize("use_numba", [True, False])
def test_float64_accuracy(use_numba):
    rng = np.random.default_rng(0)
    P = _args(np.float64, MAX_ARG64, rng)
    out = cos_sin(P, 1.0, use_numba=use_numba)
    D = P.shape[1]
    assert out.dtype == np.float64 and out.shape == (P.shape[0], 2 * D)
    err_c = np.abs(out[:, :D] - np.cos(P))
    err_s = np.abs(out[:, D:] - np.sin(P))
    # absolute error a few ulps of 1, independent of |x| up to 1e5
    assert err_c.max() <= 1e-15
    assert err_s.max() <= 1e-15


def test_float32_accuracy():
    rng = np.random.default_rng(1)
    P = _args(np.float32, MAX_ARG32, rng)
    out = cos_sin(P, 1.0)
    D = P.shape[1]
    assert out.dtype == np.float32
    P64 = P.astype(np.float64)  # exact value of each float32 argument
    assert np.abs(out[:, :D] - np.cos(P64)).max() <= 1e-6
    assert np.abs(out[:, D:] - np.sin(P64)).max() <= 1e-6


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scale_and_layout(dtype):
    rng = np.random.default_rng(2)
    P = rng.normal(0, 3, (13, 5)).astype(dtype)
    out = np.full((13, 10), 7.0, dtype=dtype)
    res = cos_sin(P, 0.25, out=out)
    assert res is out
    tol = 1e-6 if dtype == np.float32 else 1e-15
    np.testing.assert_allclose(out[:, :5], 0.25 * np.cos(P.astype(np.float64)), atol=tol)
    np.testing.assert_allclose(out[:, 5:], 0.25 * np.sin(P.astype(np.float64)), atol=tol)


@pytest.mark.parametrize("dtype,limit", [(np.float64, MAX_ARG64), (np.float32, MAX_ARG32)])
def test_large_and_nonfinite_fall_back_to_numpy(dtype, limit):
    vals = np.array(
        [1e6, -3e7, 1e15, 2.5 * limit, np.inf, -np.inf, np.nan, 0.5, -1.0, 3.0], dtype=dtype
    ).reshape(2, 5)
    with np.errstate(invalid="ignore"):
        out = cos_sin(vals, 2.0)
        ref_c = 2.0 * np.cos(vals)
        ref_s = 2.0 * np.sin(vals)
    np.testing.assert_allclose(out[:, :5], ref_c, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out[:, 5:], ref_s, rtol=1e-6, atol=1e-6)
    assert np.isnan(out[:, :5]).sum() == 3 and np.isnan(out[:, 5:]).sum() == 3


def test_empty_and_single():
    out = cos_sin(np.empty((0, 4)))
    assert out.shape == (0, 8)
    out = cos_sin(np.array([[np.pi]]), 1.0)
    np.testing.assert_allclose(out, [[-1.0, 0.0]], atol=1e-15)


def test_numba_is_used_when_available():
    # the environment ships numba: the fast path must be the one under test above
    pytest.importorskip("numba")
    assert HAVE_NUMBA


def test_validation_errors():
    with pytest.raises(InputValidationError, match="2-D"):
        cos_sin(np.zeros(3))
    with pytest.raises(InputValidationError, match="float32 or float64"):
        cos_sin(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(InputValidationError, match="C-contiguous"):
        cos_sin(np.zeros((4, 4))[:, ::2])
    with pytest.raises(InputValidationError, match="shape"):
        cos_sin(np.zeros((2, 3)), out=np.zeros((2, 3)))
    with pytest.raises(InputValidationError, match="dtype"):
        cos_sin(np.zeros((2, 3)), out=np.zeros((2, 6), dtype=np.float32))
    buf = np.zeros((2, 6))
    with pytest.raises(InputValidationError, match="overlap"):
        cos_sin(buf.reshape(-1)[:6].reshape(2, 3), out=buf)
