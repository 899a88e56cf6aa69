"""Tests of the fast Walsh-Hadamard transform (dkrr.features._hadamard)."""

import numpy as np
import pytest
import scipy.linalg

from dkrr.errors import InputValidationError, InvalidParameterError
from dkrr.features._hadamard import (
    FWHT_BACKENDS,
    available_fwht_backends,
    default_fwht_backend,
    fwht,
    pad_columns,
)

BACKENDS = available_fwht_backends()


def test_numba_and_numpy_available():
    # the two fallbacks must always be there; fht_cpu is optional
    assert "numba" in BACKENDS and "numpy" in BACKENDS
    assert default_fwht_backend() == BACKENDS[0]
    assert set(BACKENDS) <= set(FWHT_BACKENDS)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 4, 8, 32, 1024])
@pytest.mark.parametrize("m", [1, 5])
def test_fwht_matches_dense_hadamard(backend, dtype, n, m):
    rng = np.random.default_rng(n * 7 + m)
    a = rng.standard_normal((m, n)).astype(dtype)
    want = a.astype(np.float64) @ scipy.linalg.hadamard(n)
    got = fwht(a, backend=backend)
    assert got is a  # in place
    assert got.dtype == dtype
    rtol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * np.sqrt(n))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fwht_backends_agree_and_involution(backend):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 256))
    b = fwht(a.copy(), backend=backend)
    np.testing.assert_allclose(b, fwht(a.copy(), backend="numpy"), rtol=1e-12, atol=1e-12)
    # H H = n I
    np.testing.assert_allclose(fwht(b, backend=backend) / 256, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fwht_zero_rows(backend):
    a = np.empty((0, 16))
    assert fwht(a, backend=backend).shape == (0, 16)


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.zeros((3, 6)), "power of two"),
        (np.zeros((3, 0)), "power of two"),
        (np.zeros(8), "2-D"),
        (np.zeros((2, 2, 8)), "2-D"),
        (np.zeros((3, 8), dtype=np.int64), "dtype int64"),
        (np.zeros((3, 8), dtype=np.complex128), "dtype complex128"),
        (np.zeros((8, 3)).T.copy(order="F"), "C-contiguous"),
        (np.zeros((3, 16))[:, ::2], "C-contiguous"),
        ([[1.0, 2.0]], "ndarray"),
    ],
)
def test_fwht_bad_input(bad, match):
    with pytest.raises(InputValidationError, match=match):
        fwht(bad)


def test_fwht_read_only():
    a = np.zeros((2, 4))
    a.flags.writeable = False
    with pytest.raises(InputValidationError, match="read-only"):
        fwht(a)


def test_fwht_bad_backend():
    with pytest.raises(InvalidParameterError, match="unknown fwht backend"):
        fwht(np.zeros((2, 4)), backend="cuda")


def test_pad_columns():
    X = np.arange(6.0).reshape(2, 3)
    P = pad_columns(X, 4, dtype=np.float32)
    assert P.dtype == np.float32 and P.flags.c_contiguous
    np.testing.assert_array_equal(P, [[0, 1, 2, 0], [3, 4, 5, 0]])
    with pytest.raises(InvalidParameterError):
        pad_columns(X, 2)


def test_simd_kernel_is_the_default_where_the_dependency_marker_holds():
    """A plain install gets the SIMD FWHT wherever pyproject.toml's marker says wheels exist."""
    import tomllib
    from pathlib import Path

    from packaging.requirements import Requirement

    doc = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    (req,) = [Requirement(r) for r in doc["project"]["dependencies"] if Requirement(r).name == "fht_cpu"]
    assert req.marker is not None, "fht_cpu must be limited to the platforms with wheels"
    if req.marker.evaluate():
        assert default_fwht_backend() == "fht_cpu", BACKENDS
    else:  # elsewhere the verified numba kernel is the default
        assert default_fwht_backend() == "numba"
