"""Nyström features: phi(x) = k(x, C) K_CC^(-1/2) with landmarks sampled from the data."""

import dask.array as da
import numpy as np
import pytest
import scipy.linalg

from dkrr import RandomFeatures
from dkrr.errors import InvalidParameterError, NonFiniteInputError
from dkrr.estimators import RandomFeatureRidge
from dkrr.features import MAP_TYPES, feature_map_from_state
from dkrr.features._nonlinear import exact_kernel
from dkrr.features._nystroem import NystroemMap, nystroem_normalizer


def data(n=300, d=5, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d))


@pytest.mark.parametrize("kernel,gamma", [("gaussian", 0.3), ("arccos1", 1.0), ("angular", 1.0)])
def test_transform_equals_dense_formula(kernel, gamma):
    X = data()
    rf = RandomFeatures(kernel=kernel, method="nystroem", n_components=40, gamma=gamma, random_state=1).fit(X)
    fm = rf.feature_map_
    assert isinstance(fm, NystroemMap) and rf.n_output_features_ == 40
    C = fm.landmarks
    # the landmarks are 40 distinct training rows, drawn by the seeded generator
    rows = [int(np.nonzero((X == c).all(1))[0][0]) for c in C]
    assert len(set(rows)) == 40 and rows == sorted(rows)
    K_cc = exact_kernel(kernel, C, C, gamma)
    inv_sqrt = np.real(scipy.linalg.sqrtm(np.linalg.pinv(K_cc, rcond=1e-10, hermitian=True)))
    Z = rf.transform(X)
    Kxc = exact_kernel(kernel, X, C, gamma)
    # K^(-1/2) is defined up to a rotation: compare Z Z^T and the projection Z (Z^T Z)^+ ...
    np.testing.assert_allclose(Z @ Z.T, Kxc @ inv_sqrt @ inv_sqrt @ Kxc.T, rtol=1e-7, atol=1e-8)
    # ... and the map itself against V diag(lam)^(-1/2) formed here
    lam, V = np.linalg.eigh(K_cc)
    keep = lam > 1e-10 * lam.max()
    ref = Kxc @ (V[:, keep] / np.sqrt(lam[keep]))
    np.testing.assert_allclose(np.abs(Z[:, np.abs(Z).sum(0) > 0]), np.abs(ref), rtol=1e-7, atol=1e-9)


def test_exact_on_landmarks_and_approximate_elsewhere():
    X = data(n=400, d=3, seed=2)
    gamma = 0.5
    errs = []
    for m in (20, 80, 200):
        rf = RandomFeatures(method="nystroem", n_components=m, gamma=gamma, random_state=3).fit(X)
        C = rf.feature_map_.landmarks
        Zc = rf.transform(C)
        np.testing.assert_allclose(Zc @ Zc.T, exact_kernel("gaussian", C, C, gamma), atol=1e-9)
        Z = rf.transform(X)
        K = exact_kernel("gaussian", X, X, gamma)
        errs.append(np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K))
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 0.01 and errs[0] > 0.05, errs


def test_dask_numpy_float32_and_state_round_trip(scheduler):
    X = data(n=250, seed=4)
    Xd = da.from_array(X, chunks=(60, 5))
    rf_np = RandomFeatures(method="nystroem", n_components=30, gamma=0.2, random_state=5).fit(X)
    rf_da = RandomFeatures(method="nystroem", n_components=30, gamma=0.2, random_state=5).fit(Xd)
    np.testing.assert_array_equal(rf_np.feature_map_.landmarks, rf_da.feature_map_.landmarks)
    Z = rf_np.transform(X)
    np.testing.assert_allclose(rf_da.transform(Xd).compute(), Z, rtol=1e-12, atol=1e-14)
    Z32 = rf_np.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z, atol=2e-5)
    assert "nystroem" in MAP_TYPES
    back = feature_map_from_state(rf_np.feature_map_.get_state())
    np.testing.assert_array_equal(back.transform(X), Z)


def test_duplicate_landmarks_are_clipped_not_amplified():
    X = np.repeat(data(n=10, d=2, seed=6), 3, axis=0)  # every row three times: K_CC is singular
    rf = RandomFeatures(method="nystroem", n_components=30, gamma=1.0, random_state=0).fit(X)
    N = rf.feature_map_.normalizer
    assert np.isfinite(N).all() and (np.abs(N).sum(0) == 0).sum() >= 20
    Z = rf.transform(X)
    np.testing.assert_allclose(Z @ Z.T, exact_kernel("gaussian", X, X, 1.0), atol=1e-8)


def test_ridge_with_nystroem_matches_dense_solution():
    X = data(n=300, d=3, seed=7)
    y = np.sin(X[:, 0]) + X[:, 1] ** 2
    est = RandomFeatureRidge(method="nystroem", n_components=60, gamma=0.4, alpha=0.1, random_state=0).fit(X, y)
    Z = est.feature_map_.transform(X)
    Zc, yc = Z - Z.mean(0), y - y.mean()
    beta = np.linalg.solve(Zc.T @ Zc + 0.1 * np.eye(60), Zc.T @ yc)
    np.testing.assert_allclose(est.coef_, beta, rtol=1e-7, atol=1e-9)
    assert est.score(X, y) > 0.95


def test_errors():
    X = data(n=20)
    with pytest.raises(InvalidParameterError, match="only 20 rows"):
        RandomFeatures(method="nystroem", n_components=21).fit(X)
    with pytest.raises(InvalidParameterError, match="do not apply to method='nystroem'"):
        RandomFeatures(method="nystroem", n_components=5, n_hd_blocks=2).fit(X)
    with pytest.raises(InvalidParameterError, match="gamma"):
        RandomFeatures(method="nystroem", n_components=5, gamma=-1.0).fit(X)
    rf = RandomFeatures(method="nystroem", n_components=5, random_state=0).fit(X)
    with pytest.raises(InvalidParameterError, match="no projection matrix"):
        rf.projection_matrix()
    Xbad = X.copy()
    Xbad[:, 1] = np.nan
    with pytest.raises(NonFiniteInputError, match="X contains 20 non-finite"):  # numpy: checked up front
        RandomFeatures(method="nystroem", n_components=5, random_state=0).fit(Xbad)
    with pytest.raises(NonFiniteInputError, match="landmark"):  # dask: only the landmark rows are read
        RandomFeatures(method="nystroem", n_components=5, random_state=0).fit(da.from_array(Xbad, chunks=(5, -1)))
    assert np.all(nystroem_normalizer(np.zeros((3, 3))) == 0)


@pytest.mark.parametrize("chunks", [None, 7])
def test_landmarks_are_drawn_among_the_rows_of_positive_weight(chunks, scheduler):
    """``n_components`` equal to the rows of positive weight: the landmarks are exactly
    those rows, none of weight 0; one more landmark than such rows is refused, naming them."""
    X = Xn = data(n=60)
    y = X[:, 0]
    w = np.where(np.arange(60) % 4 == 0, 1.5, 0.0)
    if chunks is not None:
        X, y, w = da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=chunks), da.from_array(w, chunks=chunks)
    est = RandomFeatureRidge(method="nystroem", n_components=15, gamma=0.3, random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(est.feature_map_.landmarks, Xn[::4])
    with pytest.raises(InvalidParameterError, match=r"n_components=16 .* X has only 15 rows of positive weight"):
        RandomFeatureRidge(method="nystroem", n_components=16, random_state=0).fit(X, y, sample_weight=w)


def test_nystroem_model_file_round_trip(tmp_path):
    from dkrr.io._model import load_model, save_model

    X = data(n=200, d=3, seed=8)
    est = RandomFeatureRidge(method="nystroem", n_components=30, gamma=0.5, random_state=0).fit(X, X[:, 0] ** 2)
    back = load_model(save_model(est, tmp_path / "nys.dkrr"))
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
