"""The kernels of issue 28 in every path a gaussian model takes: the dense W behind each fast
transform, rescaling for gamma grids, model files, the streamed fit on dask, CV and gamma
grids (ARD: multipliers), PCG, float32, leverage sampling, Nystroem and the CLI.

The statistics of the maps against scikit-learn's kernels are in test_kernel_families.py.
"""

import json
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.fft

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.features import build_feature_map
from dkrr.features._map import RandomFeatureMap
from dkrr.features._sampled import SampledFeatureMap
from dkrr.io._model import load_model, save_model

rng0 = np.random.default_rng(0)
X = rng0.standard_normal((400, 5))
y = np.sin(X[:, 0]) + 0.5 * np.cos(X[:, 1] * X[:, 2]) + 0.05 * rng0.standard_normal(400)
ARD = np.array([0.5, 0.3, 0.3, 0.05, 0.05])

# (kernel, method, extra parameters): every new kernel, each family of construction
MAPS = [
    ("matern", "rff", {"nu": 0.5}), ("matern", "orf", {}), ("matern", "sorf", {"nu": 2.5}),
    ("matern", "fastfood", {}), ("matern", "toeplitz", {}), ("matern", "qmc", {}),
    ("matern", "rom", {"gamma": ARD}), ("gaussian", "sorf", {"gamma": ARD}),
    ("laplacian", "rff", {}), ("laplacian", "qmc", {"sequence": "sobol"}), ("laplacian", "circulant", {}),
    ("laplacian", "hankel", {"gamma": ARD}),
    ("polynomial", "tensorsketch", {"degree": 2}), ("polynomial", "tensor_srht", {"coef0": 0.5}),
]
MAP_IDS = [f"{k}-{m}" + ("-ard" if np.ndim(o.get("gamma", 0)) else "") for k, m, o in MAPS]


def _f(rf, X):
    """The features from the dense W of projection_matrix(): f(X W^T) (ALGORITHMS.md 1, 2.9)."""
    W = rf.projection_matrix()
    if rf.kernel == "polynomial":
        Xa = np.hstack([X, np.ones((X.shape[0], 1))])
        P = np.einsum("nj,ikj->ink", Xa, W)  # (degree, n, D)
        if rf.feature_map_.method == "tensorsketch":
            return np.real(scipy.fft.ifft(np.prod(scipy.fft.fft(P, axis=2), axis=0), axis=1))  # circular convolution
        Z = np.prod(P, axis=0) / np.sqrt(W.shape[1])
        return np.hstack([Z.real, Z.imag])
    P = X @ W.T
    return np.hstack([np.cos(P), np.sin(P)]) / np.sqrt(W.shape[0])


@pytest.mark.parametrize("d", [5, 300])  # 300: d' = 512, the FWHT/FFT paths
@pytest.mark.parametrize(("kernel", "method", "opts"), MAPS, ids=MAP_IDS)
def test_transform_is_f_of_x_w_from_projection_matrix(kernel, method, opts, d):
    opts = dict(opts)
    if np.ndim(opts.get("gamma", 0)):
        opts["gamma"] = np.resize(opts["gamma"], d)
    Xd = np.random.default_rng(1).standard_normal((6, d)) / np.sqrt(d)
    rf = RandomFeatures(kernel=kernel, method=method, n_components=600, random_state=3, **opts).fit(Xd)
    ref = _f(rf, Xd)
    np.testing.assert_allclose(rf.transform(Xd), ref, rtol=1e-9, atol=1e-11)
    Z32 = rf.transform(Xd.astype(np.float32))
    assert Z32.dtype == np.float32 and Z32.shape == ref.shape == (6, rf.n_output_features_)
    if kernel == "polynomial":
        np.testing.assert_allclose(Z32, ref, atol=2e-4)
    else:  # float32 rounding of the phase w^T x: heavy-tailed rows (Cauchy) give large phases
        W = rf.projection_matrix()
        phase = np.abs(Xd) @ np.abs(W).T
        bound = 16 * np.finfo(np.float32).eps * (1.0 + np.hstack([phase, phase])) / np.sqrt(W.shape[0])
        assert np.all(np.abs(Z32 - ref) <= bound), np.max(np.abs(Z32 - ref) / bound)


def test_matern_radial_factors_and_laplacian_rows_have_their_laws():
    """The matern map is the gaussian map of the same draw with one Student-t radial factor
    sqrt(2 nu / chi2(2 nu)) per row; laplacian rows are i.i.d. Cauchy (gamma = scale)."""
    g = RandomFeatures(kernel="gaussian", method="orf", n_components=4000, gamma=0.5, random_state=0).fit(X)
    m = RandomFeatures(kernel="matern", method="orf", nu=1.5, n_components=4000, gamma=0.5, random_state=0).fit(X)
    ratio = np.linalg.norm(m.projection_matrix(), axis=1) / np.linalg.norm(g.projection_matrix(), axis=1)
    from scipy.stats import chi2, kstest

    assert kstest(3.0 / ratio**2, chi2(3.0).cdf).pvalue > 1e-3  # 2 nu / ratio^2 ~ chi2(2 nu)
    W = RandomFeatures(kernel="laplacian", method="rff", n_components=4000, gamma=0.3, random_state=0).fit(X)
    from scipy.stats import cauchy

    assert kstest(W.projection_matrix().ravel() / 0.3, cauchy.cdf).pvalue > 1e-3


@pytest.mark.parametrize(("kernel", "method", "opts"), MAPS + [("matern", "nystroem", {"gamma": ARD}),
                                                             ("polynomial", "nystroem", {"degree": 2})],
                         ids=MAP_IDS + ["matern-nystroem-ard", "polynomial-nystroem"])
def test_with_gamma_is_the_map_drawn_with_that_gamma(kernel, method, opts):
    """A gamma grid rescales one draw: the result is the map drawn with that gamma."""
    opts = dict(opts)
    params = {k: opts.pop(k) for k in ("nu", "degree", "coef0") if k in opts}
    g0 = opts.pop("gamma", 0.7)
    g1 = 2.5 * g0
    kw = dict(kernel=kernel, method=method, n_components=40, options=opts, kernel_params=params)
    a = build_feature_map(X, gamma=g0, random_state=5, **kw).with_gamma(g1)
    b = build_feature_map(X, gamma=g1, random_state=5, **kw)
    np.testing.assert_allclose(a.transform(X[:7]), b.transform(X[:7]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("kernel", "method", "opts"), MAPS + [("matern", "nystroem", {"gamma": ARD})],
                         ids=MAP_IDS + ["matern-nystroem-ard"])
def test_model_files_round_trip_every_new_map(tmp_path, kernel, method, opts):
    rf = RandomFeatures(kernel=kernel, method=method, n_components=12, random_state=2, **opts).fit(X)
    save_model(rf, tmp_path / "rf")
    back = load_model(tmp_path / "rf")
    np.testing.assert_array_equal(back.transform(X), rf.transform(X))
    assert back.get_params()["kernel"] == kernel and np.array_equal(back.gamma_, rf.gamma_)
    doc = json.loads((tmp_path / "rf" / "model.json").read_text())
    assert doc["format_version"] >= 4  # 4 brought these kernels (5: precision_ "mixed")
    est = RandomFeatureRidge(kernel=kernel, method=method, n_components=12, random_state=2, alpha=0.1, **opts).fit(X, y)
    save_model(est, tmp_path / "ridge")
    np.testing.assert_array_equal(load_model(tmp_path / "ridge").predict(X), est.predict(X))


# -- the streamed fit ------------------------------------------------------------------------
FITS = [("matern", "sorf", {"nu": 1.5}), ("laplacian", "rff", {}), ("polynomial", "tensor_srht", {"degree": 2}),
        ("polynomial", "tensorsketch", {"degree": 2})]


@pytest.mark.parametrize(("kernel", "method", "opts"), FITS, ids=[f"{k}-{m}" for k, m, _ in FITS])
def test_dask_fit_with_a_gamma_grid_equals_numpy_and_the_refit_at_the_chosen_gamma(kernel, method, opts):
    """One streamed pass scores the width grid: on dask (threads) as on numpy; the chosen map
    is the one gamma_ draws, so the refit at (gamma_, alpha_) predicts the same."""
    kw = dict(kernel=kernel, method=method, n_components=48, random_state=4, cv=3, gammas="auto", gamma="scale",
              **opts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # grid-edge warnings
        est = RandomFeatureRidge(precision="float64", **kw).fit(X, y)
        with dask.config.set(scheduler="threads"):
            est_d = RandomFeatureRidge(precision="float64", chunk_rows=None, **kw).fit(da.from_array(X, chunks=(90, 5)),
                                                                  da.from_array(y, chunks=90))
    # gamma="scale" from the column moments: the chunks sum them in another order
    assert est_d.gamma_ == pytest.approx(est.gamma_, rel=1e-12) and est_d.alpha_ == pytest.approx(est.alpha_, rel=1e-9)
    np.testing.assert_allclose(est_d.predict(da.from_array(X, chunks=(90, 5))).compute(), est.predict(X),
                               rtol=1e-8, atol=1e-8)
    centre = est.cv_results_["gammas"][3]  # the rule's own value, the middle one (the default alphas follow it)
    np.testing.assert_allclose(est.cv_results_["gammas"], centre * 2.0 ** np.arange(-3, 3), rtol=1e-12)
    refit = RandomFeatureRidge(**{**kw, "cv": None, "gammas": None, "gamma": est.gamma_, "alpha": est.alpha_}).fit(X, y)
    np.testing.assert_allclose(refit.predict(X), est.predict(X), rtol=1e-9, atol=1e-9)
    assert est.score(X, y) > 0.8, est.score(X, y)


def test_ard_gamma_grid_scores_multipliers_of_the_array():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = RandomFeatureRidge(kernel="matern", method="orf", gamma=ARD, gammas=[0.5, 1.0, 2.0], cv=3,
                                 n_components=48, random_state=0).fit(X, y)
    t = est.cv_results_["gammas"][np.argmax([np.array_equal(est.gamma_, g * ARD) for g in (0.5, 1.0, 2.0)])]
    np.testing.assert_array_equal(est.gamma_, t * ARD)
    np.testing.assert_array_equal(est.cv_results_["gammas"], [0.5, 1.0, 2.0])
    refit = RandomFeatureRidge(kernel="matern", method="orf", gamma=est.gamma_, alpha=est.alpha_, n_components=48,
                               random_state=0).fit(X, y)
    np.testing.assert_allclose(refit.predict(X), est.predict(X), rtol=1e-9, atol=1e-9)
    # ARD that switches off the noise columns beats the isotropic kernel here
    iso = RandomFeatureRidge(kernel="matern", method="orf", gamma=float(ARD.mean()), gammas=[0.5, 1.0, 2.0], cv=3,
                             n_components=48, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert -iso.fit(X, y).best_score_ > -est.best_score_


@pytest.mark.parametrize("kernel", ["matern", "laplacian", "polynomial"])
def test_pcg_float32_and_cholesky_agree(kernel):
    kw = dict(kernel=kernel, n_components=64, random_state=1, alpha=0.1)
    ref = RandomFeatureRidge(solver="cholesky", precision="float64", **kw).fit(X, y)
    pcg = RandomFeatureRidge(solver="pcg", tol=1e-10, max_iter=500, **kw).fit(X, y)
    assert pcg.solver_info_["converged"]
    np.testing.assert_allclose(pcg.coef_, ref.coef_, rtol=1e-6, atol=1e-7 * np.abs(ref.coef_).max())
    f32 = RandomFeatureRidge(precision="float32", **kw).fit(X, y)
    change = np.linalg.norm(f32.coef_ - ref.coef_) / np.linalg.norm(ref.coef_)
    assert f32.precision_ == "float32" and change <= f32.precision_error_, (change, f32.precision_error_)


@pytest.mark.parametrize("kernel", ["matern", "laplacian"])
@pytest.mark.parametrize("sampling", ["surrogate_leverage", "ridge_leverage"])
def test_leverage_sampling_keeps_rows_of_the_kernels_w(kernel, sampling):
    est = RandomFeatureRidge(kernel=kernel, method="rff", n_components=32, n_candidates=128, sampling=sampling,
                             alpha=0.01, gamma=0.2, random_state=0).fit(X, y)
    fm = est.feature_map_
    assert isinstance(fm, SampledFeatureMap) and fm.kernel == kernel and fm.nu == (1.5 if kernel == "matern" else None)
    cand = build_feature_map(X, kernel=kernel, method="rff", n_components=128, gamma=0.2, random_state=0, options={})
    rows = {tuple(r) for r in np.round(cand.matrix(), 12)}
    assert all(tuple(r) in rows for r in np.round(fm.projection.matrix(), 12))  # radial factors folded in
    assert est.score(X, y) > 0.8  # measured 0.82-0.95 (plain rff: 0.90 matern, 0.95 laplacian)


def test_sampling_is_refused_for_the_polynomial_sketches():
    from dkrr.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="does not apply to the polynomial kernel's sketches"):
        RandomFeatureRidge(kernel="polynomial", sampling="surrogate_leverage").fit(X, y)


def test_gamma_rules_of_the_new_kernels():
    from dkrr.bandwidth import knn_gamma

    d, var = X.shape[1], X.var()
    lap = RandomFeatures(kernel="laplacian", gamma="scale", n_components=4, random_state=0).fit(X)
    assert lap.gamma_ == pytest.approx(1.0 / (d * np.sqrt(var)), rel=1e-12)
    poly = RandomFeatures(kernel="polynomial", gamma="scale", n_components=4, random_state=0).fit(X)
    assert poly.gamma_ == pytest.approx(1.0 / (d * var), rel=1e-12)
    m = RandomFeatures(kernel="matern", gamma="median", n_components=4, random_state=0).fit(X)
    seed = np.random.default_rng(0)
    build_feature_map(X, kernel="matern", method="orf", n_components=4, gamma=1.0, random_state=seed, options={})
    assert m.gamma_ == knn_gamma(X, random_state=int(seed.integers(0, 2**63 - 1)))


@pytest.mark.parametrize("kernel", ["matern", "polynomial"])
def test_nystroem_and_the_classifier(kernel):
    est = RandomFeatureRidge(kernel=kernel, method="nystroem", n_components=60, alpha=1e-3, random_state=0,
                             gamma=0.2).fit(X, y)
    assert est.feature_map_.kernel_params and est.score(X, y) > 0.85
    labels = np.where(y > 0, "up", "down")
    clf = RandomFeatureRidgeClassifier(kernel=kernel, n_components=64, gamma=0.2, alpha=0.1, random_state=0).fit(X, labels)
    assert clf.score(X, labels) > 0.85


# -- the command line -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from dkrr.io import write_dataset

    path = tmp_path_factory.mktemp("kernels") / "store"
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X, chunks=(100, 5)), da.from_array(y, chunks=100), path)
    return path


def _main(capsys, *args):
    from dkrr.cli import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.cluster
def test_cli_fits_matern_laplacian_ard_and_polynomial(store, tmp_path, capsys, local_cluster):
    cluster = ["--scheduler", local_cluster.scheduler_address, "-q"]
    common = ["--n-components", 16, "--cv", 3, "--json", *cluster]
    code, out, err = _main(capsys, "fit", store, "--out", tmp_path / "m", "--kernel", "matern", "--nu", 1.5, *common)
    assert code == 0, err
    m = load_model(tmp_path / "m")
    assert (m.kernel, m.nu, m.gamma, m.gammas) == ("matern", 1.5, "median", "auto")  # the CLI's rule and grid
    assert m.feature_map_.inner.nu == 1.5 and json.loads(out)["gamma"] == m.gamma_
    code, out, err = _main(capsys, "fit", store, "--out", tmp_path / "a", "--kernel", "laplacian", "--gamma",
                           "0.5,0.3,0.3,0.05,0.05", "--gammas", "0.5,1,2", *common)
    assert code == 0, err
    a = load_model(tmp_path / "a")
    np.testing.assert_array_equal(a.gamma, ARD)
    t = json.loads(out)["cv_results"]["gammas"]
    assert t == [0.5, 1.0, 2.0] and any(np.allclose(a.gamma_, g * ARD, rtol=1e-15) for g in t)
    code, out, err = _main(capsys, "fit", store, "--out", tmp_path / "p", "--kernel", "polynomial", "--degree", 2,
                           "--coef0", 0.5, "--n-components", 16, "--cv", 3, *cluster)
    assert code == 0, err
    p = load_model(tmp_path / "p")
    assert (p.degree, p.coef0, p.gamma, p.feature_map_.inner.method) == (2, 0.5, "scale", "tensor_srht")
    assert "gamma=" in out and "chosen: alpha_ =" in out
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "bad", "--kernel", "laplacian", "--method", "sorf",
                         *cluster)
    assert code != 0 and "does not approximate kernel='laplacian'" in err


# -- ARD widths from the gradients (ALGORITHMS.md 5.1) ---------------------------------------
def test_ard_gamma_is_the_mean_squared_gradient_of_the_fitted_function():
    from dkrr.estimators import ard_gamma

    est = RandomFeatureRidge(kernel="matern", method="orf", n_components=48, gamma=0.3, standardize=True, alpha=0.01,
                             random_state=0).fit(X, y)
    h = 1e-6 * X.std(axis=0)
    grads = np.stack([(est.predict(X + h[j] * np.eye(5)[j]) - est.predict(X - h[j] * np.eye(5)[j])) / (2 * h[j])
                      for j in range(5)], axis=1)
    g = (grads * X.std(axis=0)) ** 2  # with respect to the standardised columns
    want = g.mean(axis=0)
    want *= 0.3 * 5 / want.sum()  # standardised columns: v_j = 1, sum_j gamma_j = 5 * 0.3
    got = ard_gamma(est, X)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    with dask.config.set(scheduler="threads"):
        np.testing.assert_allclose(ard_gamma(est, da.from_array(X, chunks=(70, 5))), got, rtol=1e-12)
    lap = RandomFeatureRidge(kernel="laplacian", n_components=48, gamma=0.2, alpha=0.01, random_state=0).fit(X, y)
    g_lap = ard_gamma(lap, X, power=1.0)
    assert np.dot(g_lap, X.std(axis=0)) == pytest.approx(0.2 * X.std(axis=0).sum(), rel=1e-12)


def test_ard_gamma_finds_the_relevant_columns_and_refuses_what_it_cannot_use():
    """y depends on columns 0-2 only: their widths dominate, and the ARD refit scores a
    lower CV error than the isotropic fit it came from."""
    from dkrr.errors import InvalidParameterError
    from dkrr.estimators import ard_gamma

    kw = dict(kernel="matern", method="orf", n_components=64, cv=3, gammas="auto", standardize=True, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        iso = RandomFeatureRidge(gamma="median", **kw).fit(X, y)
        g = ard_gamma(iso, X)
        ard = RandomFeatureRidge(gamma=g, **kw).fit(X, y)
    assert g[:3].min() > 5 * g[3:].max(), g
    assert -ard.best_score_ < -iso.best_score_
    with pytest.raises(InvalidParameterError, match="shift-invariant kernel"):
        ard_gamma(RandomFeatureRidge(kernel="polynomial", n_components=8, random_state=0).fit(X, y), X)
    with pytest.raises(InvalidParameterError, match="power must be"):
        ard_gamma(iso, X, power=-1)
