"""precision="auto", the default (issue 26): float32 statistics and CV, the final model's
coefficients refined to the float64 solution by streamed float64 passes
(dkrr.estimators._mixed, docs/ALGORITHMS.md 3.10), and its fallback to a float64 pass."""

from __future__ import annotations

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from dask.callbacks import Callback

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier
from dkrr.datasets import load_casp, load_magic04
from dkrr.errors import PrecisionWarning, SourceChangedError
from dkrr.estimators._fitted import is_fitted_name
from dkrr.io._model import load_model, save_model
from dkrr.linalg._refine import DEFAULT_REFINE_TOL, targets_stopped


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def casp():
    X, y = load_casp()
    idx = np.random.default_rng(0).permutation(len(y))
    return X[idx[:5000]], y[idx[:5000]]


@pytest.fixture(scope="module")
def casp_full():
    return load_casp()


BASE = dict(n_components=128, gamma="median", standardize=True, random_state=0)


def _fit(cls, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # grid edges, unusable alphas of the default grid
        return cls(**{**BASE, **kw}).fit(X, y)


def test_the_default_is_float32_statistics_refined_to_the_float64_fit(casp):
    """cv=5 on the default grid: the default chooses float64's alpha (the same grid index,
    the same scores to float32's rounding) and its coefficients are float64's."""
    X, y = casp
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)  # no fallback here
        auto = _fit(RandomFeatureRidge, X, y, cv=5)
    f64 = _fit(RandomFeatureRidge, X, y, cv=5, precision="float64")
    assert RandomFeatureRidge().precision == "auto"
    assert auto.precision_ == "mixed" and f64.precision_ == "float64" and "refinement_" not in vars(f64)
    ia, ib = (int(np.argmin(m.cv_results_["mean_mse"])) for m in (auto, f64))
    assert ia == ib  # a different choice would fail here
    np.testing.assert_allclose(auto.alpha_, f64.alpha_, rtol=1e-6)  # the grid follows trace(G)
    np.testing.assert_allclose(auto.cv_results_["mean_mse"][ia], f64.cv_results_["mean_mse"][ia], rtol=1e-4)
    # the refined coefficients are the float64 fit's at the same alpha
    at = _fit(RandomFeatureRidge, X, y, alpha=auto.alpha_, precision="float64")
    assert _rel(auto.coef_, at.coef_) < 1e-9, _rel(auto.coef_, at.coef_)
    assert abs(auto.intercept_ - at.intercept_) < 1e-9 * abs(at.intercept_)
    # the default grid follows the float32 statistics' trace(G): alpha_ differs from
    # float64's by 2e-9 relative here, which moves the coefficients by 1.4e-8
    assert _rel(auto.coef_, f64.coef_) < 1e-7, _rel(auto.coef_, f64.coef_)
    # the float32 solution alone is measurably farther: the refinement did the work
    f32 = _fit(RandomFeatureRidge, X, y, cv=5, precision="float32")
    assert _rel(f32.coef_, f64.coef_) > 100 * _rel(auto.coef_, f64.coef_)
    info = auto.refinement_
    assert set(info) == {"passes", "residuals", "errors", "converged", "tol"} and info["converged"]
    assert info["tol"] == DEFAULT_REFINE_TOL and 2 <= info["passes"] <= 16
    r, e = info["residuals"], info["errors"]
    assert r.shape == e.shape == (info["passes"], 1) and r[0, 0] > 1e-9 and e[0, 0] > 1e-8
    assert targets_stopped(e, r, info["tol"]).all() and r[-1, 0] < 1e-3 * r[0, 0]
    # the estimate it stopped on bounds the coefficients' actual distance to float64's:
    # the iterate's estimate, or after the free final correction (which the last pass's
    # contraction allowed) that estimate times the contraction
    after = e[-1, 0] * min(1.0, e[-1, 0] / e[-2, 0])
    assert _rel(auto.coef_, at.coef_) < 10 * after + 1e-12, (_rel(auto.coef_, at.coef_), e[:, 0])
    assert auto.precision_error_ < 1e-6 * f32.precision_error_  # the float64 estimate


#: the two reasons a float32 start cannot be refined, on 300 rows at p = 512 (G_c singular)
FALLBACKS = {
    # alpha = 1e-6: the float32 rounding makes G_c + alpha I indefinite, no factor to refine with
    # (CG refines far below that where the factor exists: alpha = 0 on 5,000 rows in 5 passes)
    "no_factor": (1e-6, r"precision='auto': the float32 statistics' G_c \+ alpha I is not positive definite"
                        r".*repeated in float64.*precision='float64'"),
    # alpha = 5e-6, just above where the factor stops existing (3e-6 here): too far from
    # float64's G_c + alpha I for CG to reach the tolerance in a few passes (measured on one
    # machine: estimated error 1.1e-7 after DEFAULT_REFINE_MAX_PASSES = 16, tolerance 1e-10; on
    # another, with the oldest dependencies, 16 passes reached it), so the refinement is
    # given NOT_CONVERGED_PASSES passes, which no machine's rounding makes enough
    "not_converged": (5e-6, r"precision='auto': the float64 refinement at alpha=5e-06 did not converge in "
                            r"3 passes.*repeated in float64"),
}


NOT_CONVERGED_PASSES = 3


@pytest.mark.parametrize("case", sorted(FALLBACKS))
def test_a_start_that_cannot_be_refined_falls_back_to_a_float64_pass_with_a_warning(casp, case, monkeypatch):
    """The fit warns, says why, repeats the pass in float64 (the float64 fit, bitwise) and
    keeps no partial refinement."""
    import functools

    import dkrr.estimators._mixed as mixed

    if case == "not_converged":  # the real refinement, with fewer passes (FALLBACKS)
        monkeypatch.setattr(mixed, "refine_ridge", functools.partial(mixed.refine_ridge,
                                                                     max_passes=NOT_CONVERGED_PASSES))
    alpha, match = FALLBACKS[case]
    X, y = casp
    X, y = X[:300], y[:300]
    kw = dict(alpha=alpha, n_components=256)
    with pytest.warns(PrecisionWarning, match=match):
        auto = RandomFeatureRidge(**{**BASE, **kw}).fit(X, y)
    f64 = _fit(RandomFeatureRidge, X, y, precision="float64", **kw)
    assert auto.precision_ == "float64" and "refinement_" not in vars(auto)
    np.testing.assert_array_equal(auto.coef_, f64.coef_)
    np.testing.assert_array_equal(auto.intercept_, f64.intercept_)


def test_hopeless_passes_carries_the_mean_contraction_to_the_tolerance():
    """The estimates of the fallback case above with 40 passes allowed (300 CASP rows,
    p = 512, alpha = 5e-6: 0.39, 0.139, 0.0691, ... reached 1e-10 at pass 23): after 3
    passes the mean contraction (0.42 per pass) predicts 27 passes, beyond 1.5 x 16, so a
    refinement allowed 16 stops there instead of spending 13 more passes before its
    fallback. alpha = 1e-5 (converged at pass 14) predicts 13 at pass 3 and goes on. The
    contraction is the last three passes' (HOPELESS_WINDOW): a late stall counts."""
    from dkrr.linalg._refine import hopeless_passes

    slow = np.array([3.90e-01, 1.39e-01, 6.91e-02])[:, None]
    fast = np.array([1.31e-01, 2.06e-02, 3.47e-03])[:, None]
    assert hopeless_passes(slow[:2], 1e-10)[0] == 0.0  # two estimates: too early to say
    assert hopeless_passes(slow, 1e-10)[0] == 27.0
    assert hopeless_passes(fast, 1e-10)[0] == 13.0
    both = np.hstack([slow, fast, [[1.0], [1.0], [1.0]], [[1e-3], [1e-8], [1e-12]]])
    np.testing.assert_array_equal(hopeless_passes(both, 1e-10), [27.0, 13.0, np.inf, 0.0])  # stalled: inf; done: 0
    # fast at first, then stalled: the window sees the stall (the mean since pass 1 would not)
    late = np.array([10.0, 1.0, 0.1, 0.01, 0.009, 0.0085, 0.008])[:, None]
    assert hopeless_passes(late, 1e-10)[0] > 100


def test_a_refinement_its_contraction_cannot_finish_is_given_up_early(casp, monkeypatch):
    """The not-converged fallback with 8 passes allowed: given up after 3 (its 0.42 per
    pass needs about 27), said in the warning, the float64 fit bitwise. Refinements that
    can finish are not touched: alpha = 1e-4 converges as before (6 passes of the 8)."""
    import functools

    import dkrr.estimators._mixed as mixed

    seen, real = [], functools.partial(mixed.refine_ridge, max_passes=8)

    def recorded(*args, **kwargs):
        res = real(*args, **kwargs)
        seen.append(res.info)
        return res

    monkeypatch.setattr(mixed, "refine_ridge", recorded)
    X, y = casp
    X, y = X[:300], y[:300]
    kw = dict(alpha=5e-6, n_components=256)
    with pytest.warns(PrecisionWarning, match=r"alpha=5e-06 was stopped after 3 passes, as its contraction so far "
                                              r"would need about \d+ passes \(at most 8\).*repeated in float64"):
        auto = RandomFeatureRidge(**{**BASE, **kw}).fit(X, y)
    assert seen[-1]["passes"] == 3 and seen[-1]["passes_needed"] > 16 and not seen[-1]["converged"]
    f64 = _fit(RandomFeatureRidge, X, y, precision="float64", **kw)
    np.testing.assert_array_equal(auto.coef_, f64.coef_)
    ok = _fit(RandomFeatureRidge, X, y, alpha=1e-4, n_components=256)
    assert ok.precision_ == "mixed" and ok.refinement_["converged"] and seen[-1]["passes_needed"] == 0


@pytest.mark.parametrize("cv", [None, 3], ids=["alpha", "cv"])
@pytest.mark.parametrize("cls", [RandomFeatureRidge, RandomFeatureRidgeClassifier], ids=lambda c: c.__name__)
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_values_beyond_float32s_range_fall_back_to_float64_not_to_a_nan_model(cls, cv):
    """A column beyond float32's range (finite in float64) makes the float32 statistics
    NaN. The default fit says so and repeats the pass in float64 (the float64 fit,
    bitwise). Before, with alpha fixed, the NaN statistics' factor (a Cholesky of NaNs
    raises nothing) was "refined" into NaN coefficients with ``converged`` True."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 3))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    y = (y > 0).astype(int) if cls is RandomFeatureRidgeClassifier else y
    X[:, 2] *= 1e39  # float32 holds |x| < 3.4e38
    kw = dict(n_components=32, gamma=0.5, random_state=0, **({"cv": cv} if cv else {"alpha": 1.0}))
    with pytest.warns(PrecisionWarning, match=r"precision='auto': the float32 statistics cannot be solved \(the "
                                              r"accumulated statistics are not finite.*repeated in float64"):
        auto = cls(**kw).fit(X, y)
    f64 = cls(precision="float64", **kw).fit(X, y)
    assert auto.precision_ == "float64" and "refinement_" not in vars(auto)
    assert np.isfinite(auto.coef_).all()
    np.testing.assert_array_equal(auto.coef_, f64.coef_)
    np.testing.assert_array_equal(auto.intercept_, f64.intercept_)


def test_a_gram_that_underflows_float32_falls_back_to_float64_not_to_the_grids_edge():
    """A linear kernel of X times 1e-25: every product z_i z_j is below float32's smallest
    normal, so the float32 Gram is zeros while the column sums (float64) are not. Before,
    the CV scored that Gram of zeros and chose the grid's largest alpha without a word
    (R^2 0 against float64's 0.998); now the default repeats the pass in float64 and
    precision='float32' says its answer is not the data's. At 1e-17 float32 holds the
    products: no warning, the float64 fit's alpha."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((800, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(800)
    kw = dict(kernel="linear", n_components=32, random_state=0, cv=3)
    f64 = RandomFeatureRidge(precision="float64", **kw).fit(X * 1e-25, y)
    assert f64.score(X * 1e-25, y) > 0.99
    with pytest.warns(PrecisionWarning, match=r"precision='auto': the float32 statistics cannot be solved \(their "
                                              r"Gram underflowed float32.*repeated in float64"):
        auto = RandomFeatureRidge(**kw).fit(X * 1e-25, y)
    assert auto.precision_ == "float64" and auto.alpha_ == f64.alpha_
    np.testing.assert_array_equal(auto.coef_, f64.coef_)
    with pytest.warns(PrecisionWarning, match=r"precision='float32': the float32 Gram underflowed"):
        RandomFeatureRidge(precision="float32", **kw).fit(X * 1e-25, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        held = RandomFeatureRidge(**kw).fit(X * 1e-17, y)
    assert held.precision_ == "mixed"
    assert held.alpha_ == pytest.approx(RandomFeatureRidge(precision="float64", **kw).fit(X * 1e-17, y).alpha_, rel=1e-6)


def test_dask_and_numpy_input_and_the_chunking_give_the_float64_answer(casp):
    X, y = casp
    X, y = X[:3000], y[:3000]
    ref = _fit(RandomFeatureRidge, X, y, alpha=0.1, precision="float64", chunk_rows=1000)
    fits = {
        "numpy": _fit(RandomFeatureRidge, X, y, alpha=0.1, chunk_rows=1000),
        "dask": _fit(RandomFeatureRidge, da.from_array(X, chunks=(1000, -1)), da.from_array(y, chunks=1000),
                     alpha=0.1),
        "dask_1700": _fit(RandomFeatureRidge, da.from_array(X, chunks=(1700, -1)), da.from_array(y, chunks=1700),
                          alpha=0.1),
    }
    for name, est in fits.items():
        assert est.precision_ == "mixed", name
        assert _rel(est.coef_, ref.coef_) < 1e-9, (name, _rel(est.coef_, ref.coef_))
    # the same blocks: the same float32 statistics, so the same passes and numbers
    np.testing.assert_array_equal(fits["numpy"].coef_, fits["dask"].coef_)
    assert fits["numpy"].refinement_["passes"] == fits["dask"].refinement_["passes"]


def test_classifier_and_sample_weights_are_refined_too():
    Xm, ym = load_magic04()
    idx = np.random.default_rng(1).permutation(len(ym))[:3000]
    X, y = Xm[idx], ym[idx]
    w = np.random.default_rng(2).uniform(0.2, 2.0, len(y))
    for cls, target, kw in [(RandomFeatureRidgeClassifier, y, {}),
                            (RandomFeatureRidge, (y == y[0]).astype(float), {"sample_weight": w})]:
        est = cls(**BASE, alpha=0.05).fit(X, target, **kw)
        ref = cls(**BASE, alpha=0.05, precision="float64").fit(X, target, **kw)
        assert est.precision_ == "mixed" and est.refinement_["converged"], cls
        assert _rel(est.coef_, ref.coef_) < 1e-8, (cls, _rel(est.coef_, ref.coef_))


@pytest.mark.parametrize("extra", [{"solver": "pcg", "tol": 1e-8}, {"sampling": "surrogate_leverage"}])
def test_auto_is_float64_where_the_passes_are(casp, extra):
    X, y = casp
    est = _fit(RandomFeatureRidge, X[:1500], y[:1500], alpha=1.0, n_components=32, **extra)
    assert est.precision == "auto" and est.precision_ == "float64" and "refinement_" not in vars(est)


def test_model_files_keep_the_refinement(tmp_path, casp):
    X, y = casp
    est = _fit(RandomFeatureRidge, X[:2000], y[:2000], alpha=0.5, n_components=32)
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.precision == "auto" and back.precision_ == "mixed"
    assert back.refinement_["passes"] == est.refinement_["passes"] and back.refinement_["converged"]
    np.testing.assert_array_equal(back.refinement_["residuals"], est.refinement_["residuals"])
    np.testing.assert_array_equal(back.predict(X[:50]), est.predict(X[:50]))


class _RewriteAfter(Callback):
    """Rewrites rows of a Zarr store once the first refinement pass (tasks named
    ``dkrr-refine_...``) has finished: the second reads them differently."""

    def __init__(self, store, rows):
        super().__init__()
        self.store, self.rows, self.done = store, rows, False

    def _finish(self, dsk, state, errored):
        if not self.done and any("dkrr-refine_" in str(k) for k in dsk):
            self.done = True
            z = zarr.open_array(self.store, mode="r+")
            z[self.rows] = z[self.rows] * 1.5


def test_a_source_rewritten_between_refinement_passes_stops_the_fit_unfitted(tmp_path, casp):
    X, y = casp
    store = str(tmp_path / "X.zarr")
    zarr.create_array(store, shape=(1200, X.shape[1]), chunks=(300, X.shape[1]), dtype=X.dtype)[...] = X[:1200]
    est = RandomFeatureRidge(method="rff", n_components=64, gamma=0.05, alpha=1e-3, random_state=5)
    with dask.config.set(scheduler="threads"):
        with _RewriteAfter(store, slice(610, 620)):
            with pytest.raises(SourceChangedError, match=r"row block 2 \(rows 600 to 899\) read differently in pass 2 "
                                                         r"than in pass 1.*precision='auto' refines.*precision='float64'"):
                est.fit(zarr.open_array(store, mode="r"), y[:1200])
    assert not any(is_fitted_name(k) for k in vars(est)), vars(est)  # nothing fitted


@pytest.mark.parametrize("rewritten", [slice(10010, 10020), slice(16010, 16020)])
def test_a_block_split_between_two_chains_is_refined_and_checked_piece_by_piece(casp_full, tmp_path, rewritten):
    """27,000 rows in 3 Zarr blocks on 2 chains: the cut at row 13,500 splits block 1 (rows
    9,000 to 17,999) into two pieces, each read by its own step in every pass. The refined
    fit equals the unsplit one's (one chain) and its passes agree on the pieces'
    checksums; rows rewritten in either piece after pass 1 stop the fit, naming block 1."""
    X, y = casp_full
    n, b = 27_000, 9_000
    store = str(tmp_path / "X.zarr")
    zarr.create_array(store, shape=(n, X.shape[1]), chunks=(b, X.shape[1]), dtype=X.dtype)[...] = X[:n]
    kw = dict(method="rff", n_components=64, gamma=0.05, alpha=1e-3, random_state=5)
    from dkrr.linalg._chains import chain_steps

    assert [len(c) for c in chain_steps((b, b, b), 2)] == [2, 2]  # block 1 in both chains
    with dask.config.set(scheduler="threads", num_workers=2):
        split = RandomFeatureRidge(**kw).fit(zarr.open_array(store, mode="r"), y[:n])
    with dask.config.set(scheduler="sync"):
        whole = RandomFeatureRidge(**kw).fit(zarr.open_array(store, mode="r"), y[:n])
    assert split.refinement_["passes"] >= 2
    np.testing.assert_allclose(split.coef_, whole.coef_, rtol=1e-9, atol=1e-12 * np.abs(whole.coef_).max())
    est = RandomFeatureRidge(**kw)
    with dask.config.set(scheduler="threads", num_workers=2), _RewriteAfter(store, rewritten):
        with pytest.raises(SourceChangedError, match=r"row block 1 \(rows 9000 to 17999\) read differently in pass 2"):
            est.fit(zarr.open_array(store, mode="r"), y[:n])
    assert not any(is_fitted_name(k) for k in vars(est)), vars(est)



class _MoreThreadsAfter(Callback):
    """Raises dask's ``num_workers`` from 2 to 3 once the first pass of a multi-pass solve
    (tasks named ``prefix``) has finished, as a worker joining the cluster between two
    passes would: a later pass that resolved its chains anew would cut them differently."""

    def __init__(self, prefix):
        super().__init__()
        self.prefix, self.done = prefix, False

    def _finish(self, dsk, state, errored):
        if not self.done and any(self.prefix in str(k) for k in dsk):
            self.done = True
            dask.config.set({"num_workers": 3})  # undone by the test's enclosing config.set


@pytest.mark.parametrize("solver, prefix", [("cholesky", "dkrr-refine_block"), ("pcg", "dkrr-first_pass_block")])
def test_threads_added_between_passes_leave_the_chains_cut_as_in_the_first_pass(casp_full, tmp_path, solver, prefix):
    """27,000 rows in 3 Zarr blocks: 2 chains split block 1, 3 chains would not. With a
    third thread from the second pass on (of many: PCG's rank-8 preconditioner of p = 128
    makes CG iterate), the solve keeps the first pass's two chains
    (``fixed_n_chains``): the passes' checksums agree and the coefficients are those of an
    unchanged run. (Resolving the chains per pass makes this fit fail with a
    ``SourceChangedError`` on block 1: checked by hand.)"""
    from dkrr.linalg._chains import chain_steps

    X, y = casp_full
    n, b = 27_000, 9_000
    assert [len(c) for c in chain_steps((b, b, b), 2)] == [2, 2]  # block 1 split
    assert [len(c) for c in chain_steps((b, b, b), 3)] == [1, 1, 1]  # not split
    store = str(tmp_path / "X.zarr")
    zarr.create_array(store, shape=(n, X.shape[1]), chunks=(b, X.shape[1]), dtype=X.dtype)[...] = X[:n]
    kw = dict(method="rff", n_components=64, gamma=0.05, alpha=1e-3, random_state=5, solver=solver)
    if solver == "pcg":  # rank 8 of p = 128: CG iterates, one pass per iteration
        kw["pcg_rank"] = 8
    with dask.config.set(scheduler="threads", num_workers=2):
        steady = RandomFeatureRidge(**kw).fit(zarr.open_array(store, mode="r"), y[:n])
    added = _MoreThreadsAfter(prefix)
    with dask.config.set(scheduler="threads", num_workers=2), added:
        grown = RandomFeatureRidge(**kw).fit(zarr.open_array(store, mode="r"), y[:n])
    assert added.done and dask.config.get("num_workers", None) != 3
    if solver == "cholesky":
        assert grown.refinement_["passes"] >= 2
    else:
        info = grown.solver_info_
        # measured: 6 iterations (a full-rank preconditioner would stop CG after one)
        assert info["converged"] and info["n_iter"] > 3 and info["passes"] == steady.solver_info_["passes"], info
    np.testing.assert_allclose(grown.coef_, steady.coef_, rtol=1e-12, atol=1e-14 * np.abs(steady.coef_).max())


def test_a_fallback_whose_float64_cv_chooses_another_alpha_says_the_alpha_fitted():
    """A new user's fit: the float32 statistics' CV chose alpha 10x (here 100x) above
    float64's, its refinement was given up, and the float64 pass chose its own alpha; the
    warning named only the discarded float32 choice, next to "chosen: alpha_ = ..." of
    another value. It now names the alpha fitted too, which is float64's."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=3000)
    kw = dict(gamma=0.1, cv=5, standardize=True, random_state=0)
    with pytest.warns(PrecisionWarning, match="repeated in float64") as caught:
        auto = RandomFeatureRidge(**kw).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f64 = RandomFeatureRidge(precision="float64", **kw).fit(X, y)
    assert auto.precision_ == "float64" and auto.alpha_ == f64.alpha_
    said = [str(w.message) for w in caught if "repeated in float64" in str(w.message)]
    assert len(said) == 1 and f"whose cross-validation chose alpha_={auto.alpha_:.4g} (the float32" in said[0], said
    np.testing.assert_array_equal(auto.coef_, f64.coef_)


@pytest.mark.parametrize("seed", [2, 4])
def test_a_cv_choice_float32_does_not_resolve_is_float64s_for_any_chunking(seed):
    """A probe's smooth target: the default fit (cv=5, the default grid) chose alpha 10x
    above float64's from numpy input and float64's own from 100-row dask chunks, both
    refined and kept without a word (8 seeds of 12): the float32 statistics' solution at
    those alphas is 2-23% off float64's, and the scores there carried that rounding, which
    followed the sub-blocks. Such a choice (first refinement estimate above 1e-2) is now
    made again on float64 statistics, with a PrecisionWarning; a resolved one is kept."""
    from dkrr.estimators._mixed import CHOICE_START_LIMIT

    rng = np.random.RandomState(seed)
    X = rng.rand(2000, 4)
    y = np.sin(3 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.randn(2000)
    kw = dict(n_components=32, gamma=0.5, random_state=seed, cv=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f64 = RandomFeatureRidge(precision="float64", **kw).fit(X, y)
    for Xi, yi in [(X, y), (da.from_array(X, chunks=(100, 4)), da.from_array(y, chunks=100)),
                   (da.from_array(X, chunks=(700, 4)), da.from_array(y, chunks=700))]:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            auto = RandomFeatureRidge(**kw).fit(Xi, yi)
        said = [str(w.message) for w in got if w.category is PrecisionWarning]
        assert auto.alpha_ == pytest.approx(f64.alpha_, rel=1e-6)  # the default grid follows trace(G)
        assert _rel(auto.coef_, f64.coef_) < 1e-6
        if auto.precision_ == "mixed":  # kept: resolved (100-row chunks' rounding is smaller)
            assert auto.refinement_["errors"][0].max() <= CHOICE_START_LIMIT and not said
        else:
            assert len(said) == 1 and "the cross-validation chose alpha=" in said[0], said
            assert "off float64's, above 0.01" in said[0]
    # no choice, no limit: the same alpha given alone is refined as before (or given up
    # where CG cannot reach the tolerance: seed 4)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        one = RandomFeatureRidge(**{**kw, "cv": None, "alpha": float(f64.alpha_)}).fit(X, y)
    assert not [w for w in got if "cross-validation chose" in str(w.message)]
    if one.precision_ == "mixed":
        assert one.refinement_["errors"][0].max() > CHOICE_START_LIMIT
