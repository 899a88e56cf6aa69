"""Error messages that named the wrong problem (issue 23, item 11): each test asserts the
message now given and that the misleading one is gone."""

from __future__ import annotations

import socket

import dask.array as da
import numpy as np
import pytest

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.bandwidth import knn_gamma, knn_sigma
from dkrr.cli._main import main as dkrr_main
from dkrr.cluster import connect
from dkrr.errors import InputValidationError, InvalidParameterError, MemoryBudgetError, PrecisionWarning
from dkrr.linalg._memory import check_feature_map_budget, check_memory_budget, ridge_memory_estimate


def _xy(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, X[:, 0] + 0.1 * rng.standard_normal(n)


# --- gamma="median": overflow was reported as identical rows ----------------------------

@pytest.mark.parametrize("factor, what", [(1e200, "overflow"), (1e-200, "underflow")])
def test_median_rule_names_overflow_not_identical_rows(factor, what):
    X, y = _xy()
    with pytest.raises(InputValidationError) as exc:
        RandomFeatureRidge(gamma="median", n_components=8, random_state=0).fit(X * factor, y)
    msg = str(exc.value)
    assert "identical" not in msg
    assert f"squared distances of the gaussian kernel {what} float64" in msg
    assert "standardize=True" in msg
    # and the fix works: standardised columns have a representable width
    est = RandomFeatureRidge(gamma="median", standardize=True, n_components=8, random_state=0).fit(X * factor, y)
    assert 0 < est.gamma_ < np.inf


def test_knn_sigma_is_exact_at_magnitudes_whose_squares_overflow():
    X, _ = _xy(n=300)
    ref = knn_sigma(X, k=10, random_state=0)
    assert knn_sigma(X * 2.0**600, k=10, random_state=0) == ref * 2.0**600  # bitwise: power-of-two scaling
    assert knn_sigma(X * 2.0**-600, k=10, random_state=0) == ref * 2.0**-600
    assert knn_gamma(X * 1e150, k=10, random_state=0) == pytest.approx(1 / (2 * (ref * 1e150) ** 2), rel=1e-13)


# --- cv larger than the number of rows: was "0 rows, rows per fold [0, 0, ...]" ---------

def test_cv_larger_than_the_rows_names_both_numbers():
    X, y = _xy(n=60)
    with pytest.raises(InputValidationError, match=r"cv=100 is larger than the number of rows of X \(60\).*"
                                                   r"Use cv <= 30") as exc:
        RandomFeatureRidge(cv=100, n_components=8).fit(X, y)
    assert "0 rows" not in str(exc.value) and "[0, 0" not in str(exc.value)
    with pytest.raises(InputValidationError, match=r"cv=40 folds need n >= 2 \* cv = 80 rows, X has 60"):
        RandomFeatureRidgeClassifier(cv=40, n_components=8).fit(X, y > 0)


# --- memory sizes: small limits were "0.00 GiB" -------------------------------------------

def test_format_bytes_uses_the_unit_the_size_reaches():
    from dkrr.linalg._memory import format_bytes  # the one size formatter of the messages

    assert format_bytes(512) == "512 bytes"
    assert format_bytes(3.5 * 2**10) == "3.50 KiB"
    assert format_bytes(18.44 * 2**20) == "18.4 MiB"
    assert format_bytes(256 * 2**20) == "256 MiB"
    assert format_bytes(2**30) == "1.00 GiB"
    assert format_bytes(2048 * 2**30) == "2048 GiB"


def test_memory_messages_give_small_limits_in_mib():
    est = ridge_memory_estimate(kernel="gaussian", method="rff", n_components=512, n_features_in=8, block_rows=1000)
    with pytest.raises(MemoryBudgetError) as exc:  # a worker of 400 MiB leaves its tasks 20 MiB
        check_memory_budget(est, kernel="gaussian", n_components=512, limits=(400 * 2**20, 64 * 2**30))
    msg = str(exc.value)
    assert "0.00 GiB" not in msg and "80% of its 400 MiB memory limit" in msg and "(20.0 MiB)" in msg, msg
    assert "about 296 or fewer would fit" in msg, msg  # 1024 sqrt(20 / 59.8) / 2
    with pytest.raises(MemoryBudgetError) as exc:  # 3 MiB: below what a worker needs at all
        check_memory_budget(est, kernel="gaussian", n_components=512, limits=(3 * 2**20, 64 * 2**30))
    msg = str(exc.value)
    assert "80% of its 3.00 MiB memory limit" in msg and "(0 bytes)" in msg, msg
    assert "No smaller model would fit: give each worker more memory." in msg and "or fewer would fit" not in msg
    with pytest.raises(MemoryBudgetError) as exc:
        check_feature_map_budget("rff", 100, 4096, local=200 * 2**10)
    msg = str(exc.value)
    assert "needs about 3.12 MiB" in msg and "(200 KiB)" in msg and "0.00 GiB" not in msg, msg


# --- rom_diagonal for a method without a diagonal -----------------------------------------

@pytest.mark.parametrize("method", ["sorf", "rff"])
def test_rom_diagonal_on_another_method_says_it_does_not_apply(method):
    X, y = _xy()
    with pytest.raises(InvalidParameterError) as exc:
        RandomFeatureRidge(method=method, rom_diagonal="complex4", n_components=8).fit(X, y)
    msg = str(exc.value)
    assert f"option rom_diagonal='complex4' does not apply to method={method!r}" in msg and "['rom']" in msg
    assert "complex" not in msg.split("rom_diagonal='complex4'", 1)[1]  # not judged as a complex W
    # for rom itself the complex diagonal still needs the linear kernel
    with pytest.raises(InvalidParameterError, match="makes W complex, which only kernel='linear'"):
        RandomFeatureRidge(method="rom", rom_diagonal="complex4", n_components=8).fit(X, y)


# --- an invalid port: was "connection refused" ----------------------------------------------

@pytest.mark.parametrize("address", ["tcp://127.0.0.1:99999", "127.0.0.1:65536", "tcp://127.0.0.1:0"])
def test_invalid_port_is_named_as_such(address):
    port = address.rsplit(":", 1)[1]
    with pytest.raises(InvalidParameterError, match=rf"port {port} is not a valid TCP port \(1-65535\)") as exc:
        with connect(address, timeout=5, quiet=True):
            pass
    assert "refused" not in str(exc.value)


def test_cli_invalid_port_is_one_line(tmp_path, capsys):
    from dkrr.io import write_dataset

    X, y = _xy(n=20)
    write_dataset(da.from_array(X, chunks=10), da.from_array(y, chunks=10), tmp_path / "s")
    code = dkrr_main(["fit", str(tmp_path / "s"), "--out", str(tmp_path / "m"), "-q",
                      "--scheduler", "tcp://127.0.0.1:99999"])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip().splitlines() == [
        "dkrr fit: error: port 99999 is not a valid TCP port (1-65535) in the scheduler address "
        "'tcp://127.0.0.1:99999'; a Dask scheduler listens on port 8786 by default (tcp://127.0.0.1:8786)."
    ]


def test_valid_port_with_nothing_listening_still_says_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(OSError, match="refused"):
        with connect(f"tcp://127.0.0.1:{port}", timeout=5, quiet=True):
            pass


# --- sample_weight overflow: was a singular system ----------------------------------------

def test_numpy_weights_whose_sum_overflows_are_named():
    X, y = _xy()
    with pytest.raises(InputValidationError, match=r"sample_weight overflows float64: its 60 weights "
                                                   r"\(largest 1e\+308\).*divide sample_weight by a constant"):
        RandomFeatureRidge(n_components=8, random_state=0).fit(X, y, sample_weight=np.full(60, 1e308))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy reports the overflow it made
@pytest.mark.parametrize("cv", [None, 3])
def test_dask_weights_that_overflow_the_statistics_are_named(cv):
    X, y = _xy()
    w = da.full(60, 1e306, chunks=20)  # sum 6e307 fits; sum w z y with y ~ 1e5 does not
    with pytest.raises(InputValidationError) as exc:
        RandomFeatureRidge(precision="float64", n_components=8, cv=cv, random_state=0).fit(X, y * 1e5, sample_weight=w)
    msg = str(exc.value)
    assert "sample-weighted statistics overflow float64 (sum w z y" in msg and "weights sum to 6e+307" in msg
    assert "singular" not in msg
    with pytest.raises(InputValidationError, match=r"\(sum w, .* not finite\): the weights themselves sum"):
        RandomFeatureRidge(precision="float64", n_components=8, cv=cv, random_state=0).fit(X, y, sample_weight=da.full(60, 1e308, chunks=20))
    # the named fix: weights and alpha divided by the same constant give the same model
    a = RandomFeatureRidge(precision="float64", n_components=8, alpha=1e300, random_state=0).fit(X, y, sample_weight=np.full(60, 1e300))
    b = RandomFeatureRidge(precision="float64", n_components=8, alpha=1.0, random_state=0).fit(X, y, sample_weight=np.ones(60))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8)


# --- a target whose squares overflow: was a singular system of the cross-validation -------

@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy reports the overflow it made
@pytest.mark.parametrize("kw", [dict(), dict(precision="float64"), dict(solver="pcg")], ids=["auto", "float64", "pcg"])
def test_a_target_whose_squares_overflow_is_named(kw):
    X, y = _xy()
    with pytest.raises(InputValidationError) as exc:
        RandomFeatureRidge(n_components=8, cv=3, random_state=0, **kw).fit(X, y * 1e200)
    msg = str(exc.value)
    assert "the target's sums overflow float64 (sum y^2 not finite)" in msg and "Divide y by a constant" in msg
    assert "singular" not in msg
    # the named fix: y divided by a constant, the same alpha and the coefficients divided by it
    big = RandomFeatureRidge(n_components=8, cv=3, random_state=0, **kw).fit(X, y * 1e150)
    small = RandomFeatureRidge(n_components=8, cv=3, random_state=0, **kw).fit(X, y)
    assert big.alpha_ == pytest.approx(small.alpha_, rel=1e-6)
    np.testing.assert_allclose(big.coef_ / 1e150, small.coef_, rtol=1e-6, atol=1e-9)
    # without cross-validation sum y^2 is not used: a fixed alpha fits such a target
    fixed = RandomFeatureRidge(n_components=8, alpha=1.0, random_state=0, precision="float64").fit(X, y * 1e200)
    ref = RandomFeatureRidge(n_components=8, alpha=1.0, random_state=0, precision="float64").fit(X, y)
    np.testing.assert_allclose(fixed.coef_ / 1e200, ref.coef_, rtol=1e-9, atol=1e-12)
    if not kw:  # the default's refinement cannot take the norms: the float64 pass, saying why
        with pytest.warns(PrecisionWarning, match=r"the float64 refinement's residual norms at alpha=1 overflow "
                                                  r"float64 \(y, or the features of a linear or polynomial kernel, hold values too large.*repeated in float64"):
            auto = RandomFeatureRidge(n_components=8, alpha=1.0, random_state=0).fit(X, y * 1e200)
        np.testing.assert_array_equal(auto.coef_, fixed.coef_)


# --- an unknown kernel: was a hint about methods or "has no width" ------------------------

KERNEL_MESSAGE = ("kernel must be one of ['gaussian', 'angular', 'arccos0', 'arccos1', 'linear', 'matern', 'laplacian', "
                  "'polynomial'], got 'poly'")


@pytest.mark.parametrize("make", [
    lambda: RandomFeatureRidge(kernel="poly", n_components=8),
    lambda: RandomFeatureRidge(kernel="poly", gamma="median", n_components=8),
    lambda: RandomFeatureRidge(kernel="poly", gamma=2.0, n_components=8),
    lambda: RandomFeatures(kernel="poly", n_components=8),
])
def test_unknown_kernel_lists_the_kernels(make):
    X, y = _xy()
    est = make()
    with pytest.raises(InvalidParameterError) as exc:
        est.fit(X) if isinstance(est, RandomFeatures) else est.fit(X, y)
    msg = str(exc.value)
    assert msg == KERNEL_MESSAGE
