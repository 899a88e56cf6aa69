"""Mixed-precision refinement (dkrr.linalg._refine): float32 statistics refined by
streamed float64 passes reach the float64 ridge solution, by CG that iterates."""

import dask.array as da
import numpy as np
import pytest

from dkrr.features import build_feature_map
from dkrr.linalg import streamed_statistics
from dkrr.linalg._refine import DEFAULT_REFINE_TOL, RESIDUAL_FLOOR, refine_ridge, targets_stopped
from dkrr.linalg._solve import center_statistics, ridge_coefficients
from dkrr.linalg._evidence import posterior_factor


def _problem(n=6000, d=5, D=256, seed=0, chunks=1500):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.column_stack([np.sin(X[:, 0]) + X[:, 1] * X[:, 2], np.cos(X[:, 3])]) + 0.05 * rng.normal(size=(n, 2)) + 3.0
    fmap = build_feature_map(X[:500], kernel="gaussian", method="rff", n_components=D, gamma=0.2,
                             random_state=np.random.default_rng(seed), options={})
    return da.from_array(X, chunks=(chunks, d)), da.from_array(y, chunks=(chunks, 2)), X, y, fmap


def _start(Xd, yd, fmap, alpha, intercept):
    s32 = streamed_statistics(Xd, yd, fmap, precision="float32").total()
    beta0, _ = ridge_coefficients(s32, alpha, intercept)
    Gc, *_ = center_statistics(s32.G[0], s32.c[0], s32.zsum[0], s32.weights()[0], s32.ysum[0], intercept)
    return beta0, posterior_factor(Gc, alpha)


@pytest.mark.parametrize("intercept", [True, False])
def test_refined_float32_equals_the_float64_fit(intercept):
    Xd, yd, X, y, fmap = _problem()
    alpha = 1e-4  # small enough that float32 statistics move the coefficients visibly
    s64 = streamed_statistics(Xd, yd, fmap, precision="float64").total()
    beta64, icpt64 = ridge_coefficients(s64, alpha, intercept)
    beta0, L = _start(Xd, yd, fmap, alpha, intercept)
    before = np.linalg.norm(beta0 - beta64) / np.linalg.norm(beta64)
    res = refine_ridge(Xd, yd, None, fmap, beta0, L, alpha, intercept)
    after = np.linalg.norm(res.beta - beta64) / np.linalg.norm(beta64)
    assert before > 1e-6, before  # the float32 start is measurably off
    assert res.info["converged"] and res.info["passes"] >= 3  # CG iterated
    assert after < 1e-8, (before, after)  # float64's own error at this cond: measured 1.7e-10 to 5.5e-10
    np.testing.assert_allclose(res.intercept, icpt64, rtol=1e-9, atol=1e-9 * np.abs(icpt64).max())
    # the residual and error histories fall; the error estimate ends at most tol
    r, e = res.info["residuals"], res.info["errors"]
    assert r.shape == e.shape == (res.info["passes"], 2) and (r[-1] < 1e-6 * r[0]).all()
    # each target stops on its error estimate or, past what float64 resolves, on a float64 solve's residual
    assert res.info["tol"] == DEFAULT_REFINE_TOL and (e[0] > 1e-4).all()
    assert ((e[-1] <= DEFAULT_REFINE_TOL) | (r[-1] <= RESIDUAL_FLOOR)).all(), (e[-1], r[-1])
    # the true residual against the explicit float64 system (CG's history after its first row
    # is the recurrence's): measured 2e-15 to 7e-15, the float32 start 6e-8 to 1e-6
    Gc, cc, *_ = center_statistics(s64.G[0], s64.c[0], s64.zsum[0], s64.weights()[0], s64.ysum[0], intercept)
    true = np.linalg.norm(cc - (Gc + alpha * np.eye(Gc.shape[0])) @ res.beta, axis=0) / np.linalg.norm(cc, axis=0)
    assert (true <= 1e-12).all(), true


@pytest.mark.parametrize("intercept", [True, False])
def test_the_error_estimate_it_stops_on_is_the_actual_error(intercept):
    """At alpha = 1 (cond small enough that float64's own solve is exact to ~1e-13) the
    estimate ``||M^-1 r|| / ||beta||`` it stops on is the actual distance of that iterate
    to float64's solution, it stops after two passes (the residual of the float32 start
    and one CG step, none spent only to confirm), and the free final correction by that
    same ``M^-1 r`` takes the coefficients to float64's rounding (measured 1.6e-11 to
    8.2e-11 before it, 1.7e-13 to 9.2e-13 after: the distance of two float64 solutions,
    each off by float64's own error at this cond, which is then the floor)."""
    Xd, yd, X, y, fmap = _problem()
    alpha = 1.0
    s64 = streamed_statistics(Xd, yd, fmap, precision="float64").total()
    beta64, _ = ridge_coefficients(s64, alpha, intercept)
    beta0, L = _start(Xd, yd, fmap, alpha, intercept)
    res = refine_ridge(Xd, yd, None, fmap, beta0, L, alpha, intercept)
    est = res.info["errors"][-1]
    assert res.info["converged"] and res.info["passes"] == 2 and (est <= DEFAULT_REFINE_TOL).all()
    # the iterate it stopped on (before the final correction) is as far from float64 as estimated
    last = refine_ridge(Xd, yd, None, fmap, beta0, L, alpha, intercept, final_correction=False).beta
    actual = np.linalg.norm(last - beta64, axis=0) / np.linalg.norm(beta64, axis=0)
    np.testing.assert_allclose(est, actual, rtol=0.5)  # the same number, not only a bound
    final = np.linalg.norm(res.beta - beta64, axis=0) / np.linalg.norm(beta64, axis=0)
    # float64's own error (2e-13 to 9e-13), at least 10x below the estimate it corrected: 9.2e-13 at
    # 1.75e-11 with the oldest dependencies on an AVX-512 machine, where the estimate is lowest
    assert (final < 0.1 * est).all() and (final < 2e-12).all(), (final, est)
    start = np.linalg.norm(beta0 - beta64, axis=0) / np.linalg.norm(beta64, axis=0)
    np.testing.assert_allclose(res.info["errors"][0], start, rtol=0.5)  # and for the float32 start


def test_weighted_refinement_and_chunking_do_not_change_the_answer():
    Xd, yd, X, y, fmap = _problem(n=4000)
    w = np.random.default_rng(1).uniform(0.1, 3.0, size=len(y))
    from dkrr.linalg._weighted import streamed_statistics_maps

    alpha = 1e-3
    out = {}
    for chunks in (1000, 1700):
        Xc, yc, wc = (da.from_array(a, chunks=chunks if a.ndim == 1 else (chunks, a.shape[1])) for a in (X, y, w))
        s64 = streamed_statistics_maps(Xc, yc, [fmap], sample_weight=wc, precision="float64")[0].total()
        beta64, _ = ridge_coefficients(s64, alpha, True)
        s32 = streamed_statistics_maps(Xc, yc, [fmap], sample_weight=wc, precision="float32")[0].total()
        beta0, _ = ridge_coefficients(s32, alpha, True)
        Gc, *_ = center_statistics(s32.G[0], s32.c[0], s32.zsum[0], s32.weights()[0], s32.ysum[0], True)
        res = refine_ridge(Xc, yc, wc, fmap, beta0, posterior_factor(Gc, alpha), alpha, True)
        assert res.info["converged"]
        assert np.linalg.norm(res.beta - beta64) / np.linalg.norm(beta64) < 1e-8
        out[chunks] = res.beta
    assert np.linalg.norm(out[1000] - out[1700]) / np.linalg.norm(out[1000]) < 1e-9


def test_a_poor_preconditioner_is_reported_not_converged():
    Xd, yd, X, y, fmap = _problem(n=3000)
    alpha = 1e-4
    beta0, _ = _start(Xd, yd, fmap, alpha, True)
    s32 = streamed_statistics(Xd, yd, fmap, precision="float32").total()
    Gc, *_ = center_statistics(s32.G[0], s32.c[0], s32.zsum[0], s32.weights()[0], s32.ysum[0], True)
    wrong = posterior_factor(Gc, 1e3)  # the factor of another alpha: far from A
    res = refine_ridge(Xd, yd, None, fmap, beta0, wrong, alpha, True, max_passes=3)
    assert not res.info["converged"] and res.info["passes"] == 3


def test_a_nan_start_is_never_converged():
    """NaN residuals end CG's columns (no comparison holds), which read as converged: a
    NaN start or factor (float32 statistics that overflowed) must come back not converged,
    never as a model."""
    Xd, yd, X, y, fmap = _problem(n=3000)
    beta0, L = _start(Xd, yd, fmap, 0.1, True)
    for start, factor in ((np.full_like(beta0, np.nan), L), (beta0, np.full_like(L, np.nan))):
        res = refine_ridge(Xd, yd, None, fmap, start, factor, 0.1, True)
        assert not res.info["converged"]
        assert not np.isfinite(res.beta).all()


@pytest.mark.parametrize("alpha", [0.3, 0.1, 0.01])
def test_a_fast_contraction_stops_a_pass_early_with_the_corrected_coefficients(alpha):
    """Where the last pass shrank the estimate 1,000-fold and the estimate after the free
    correction (``e_k^2 / e_(k-1)``, times the margin 10) is below tol, the refinement stops
    though ``e_k`` itself is above tol: one pass fewer than the plain rule (measured 2
    against 3 at alpha 0.3 and 0.1, 3 against 4 at 0.01), the same coefficients (float64's
    own distance, 7e-13 to 3e-11, either way). At 0.01 the third pass's estimate can already
    be below tol (the oldest dependencies on an AVX-512 machine: 3 passes both ways), and
    then the rule has nothing to save."""
    Xd, yd, X, y, fmap = _problem()
    s64 = streamed_statistics(Xd, yd, fmap, precision="float64").total()
    beta64, _ = ridge_coefficients(s64, alpha, True)
    beta0, L = _start(Xd, yd, fmap, alpha, True)
    fast = refine_ridge(Xd, yd, None, fmap, beta0, L, alpha, True)
    plain = refine_ridge(Xd, yd, None, fmap, beta0, L, alpha, True, final_correction=False)
    e = fast.info["errors"]
    by_correction = bool((e[-1] > DEFAULT_REFINE_TOL).any())
    assert by_correction or alpha == 0.01, e[:, 0]
    assert fast.info["converged"] and fast.info["passes"] == plain.info["passes"] - by_correction
    if by_correction:
        assert (e[-1] * (e[-1] / e[-2]) * 10 <= DEFAULT_REFINE_TOL).all()
    assert targets_stopped(e, fast.info["residuals"], DEFAULT_REFINE_TOL).all()
    dist = [np.linalg.norm(r.beta - beta64, axis=0) / np.linalg.norm(beta64, axis=0) for r in (fast, plain)]
    assert (dist[0] < 0.5 * DEFAULT_REFINE_TOL).all() and (dist[0] < 3 * dist[1] + 1e-12).all(), dist


def test_the_record_check_finds_each_targets_own_last_pass():
    """A model file's refinement record: a target that stopped before the others keeps its
    values in the later rows; its rule is judged at its own last pass."""
    tol = 1e-10
    # target 0 stopped at pass 2 by the corrected rule (1e-4 -> 1e-8: 1e-12 after the
    # correction), target 1 went on to pass 3 and met tol; rows repeat a stopped target
    errors = np.array([[1e-4, 1e-3], [1e-8, 1e-6], [1e-8, 1e-11]])
    residuals = np.array([[1e-6, 1e-5], [1e-10, 1e-8], [1e-10, 1e-13]])
    assert targets_stopped(errors, residuals, tol).all()
    slow = errors.copy()
    slow[1, 0] = 1e-6  # a contraction of only 100: no rule stopped target 0
    assert targets_stopped(slow, residuals, tol).tolist() == [False, True]
    floor = residuals.copy()
    floor[1, 0] = 1e-15  # but a float64 solve's own residual ends it
    floor[2, 0] = 1e-15
    assert targets_stopped(slow, floor, tol).all()
    assert not targets_stopped(np.array([[1e-8]]), np.array([[1e-9]]), tol).any()  # one pass: no contraction known


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("columns", [1, 3, 4])
def test_a_passs_block_products_equal_the_dense_float64_ones(columns, weighted, monkeypatch):
    """One row block of a refinement pass: ``Z^T W Z B`` and (first pass) ``Z^T W Y``,
    ``Z^T w`` equal the dense float64 products of the map's features, whether the compiled
    row loop takes them (up to REFINE_ROWS_MAX_COLUMNS columns) or BLAS does (beyond, or
    with the loop switched off), over several sub-blocks and a short last one."""
    from dkrr.linalg import _refine

    rng = np.random.default_rng(5)
    n, d, D = 1100, 4, 96
    X = rng.normal(size=(n, d))
    y = rng.normal(size=(n, columns)) + 1.0
    w = rng.uniform(0.2, 3.0, size=n) if weighted else None
    fmap = build_feature_map(X[:300], kernel="gaussian", method="rff", n_components=D, gamma=0.3,
                             random_state=np.random.default_rng(1), options={})
    B = rng.normal(size=(2 * D, columns))
    Z = fmap.transform(X)
    ww = np.ones(n) if w is None else w
    expected = (Z.T @ (ww[:, None] * (Z @ B)), Z.T @ (ww[:, None] * y), Z.T @ ww)
    monkeypatch.setattr(_refine, "REFINE_SUB_BLOCK_BYTES", 8 * 2 * D * 256)  # 256 rows: 4 full sub-blocks + 76
    results = {}
    for loop in (True, False):
        monkeypatch.setattr(_refine, "REFINE_ROWS_MAX_COLUMNS", 3 if loop else 0)
        for linear in (True, False):
            stats, out, sums = _refine._refine_weighted_block(X, y, w, 0, 7, fmap, B, False, 2**26, linear)
            assert list(sums) == [7] and out.shape == (2 * D, columns)
            np.testing.assert_allclose(out, expected[0], rtol=1e-12, atol=1e-12 * np.abs(expected[0]).max())
            assert (stats is None) == (not linear)
            if linear:
                np.testing.assert_allclose(stats.c[0], expected[1], rtol=1e-12, atol=1e-12 * np.abs(expected[1]).max())
                np.testing.assert_allclose(stats.zsum[0], expected[2], rtol=1e-12, atol=1e-12 * np.abs(expected[2]).max())
                assert stats.n[0] == n
            results[loop, linear] = out
    # the two ways agree to float64 rounding (summed in different orders)
    np.testing.assert_allclose(results[True, True], results[False, True], rtol=1e-13, atol=1e-13 * np.abs(expected[0]).max())


def test_every_kind_of_pass_shares_one_compiled_signature(monkeypatch):
    """The first pass and the CG passes, weighted or not, with one or three targets over
    several sub-blocks (three targets sliced by sub-block once gave the classifier a second
    signature), call the compiled row loop with the same argument types: one signature,
    compiled once per machine rather than once per kind of pass."""
    from dkrr.linalg import _refine
    from dkrr.linalg._refine_numba import refine_rows

    monkeypatch.setattr(_refine, "REFINE_SUB_BLOCK_BYTES", 8 * 32 * 64)  # 64 rows: 5 sub-blocks
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    fmap = build_feature_map(X[:100], kernel="gaussian", method="rff", n_components=16, gamma=0.5,
                             random_state=np.random.default_rng(0), options={})
    for t in (1, 3):
        y = rng.normal(size=(300, t))
        for w in (None, rng.uniform(0.5, 2.0, size=300)):
            for linear in (True, False):
                _refine._refine_weighted_block(X, y, w, 0, 0, fmap, rng.normal(size=(32, t)), False, 2**26, linear)
    assert len(refine_rows.signatures) == 1, refine_rows.signatures


def test_a_constant_target_beside_another_records_a_finite_error_and_its_model_saves(tmp_path):
    """A target whose centred right-hand side is 0 (a constant y beside a real one) is solved
    by its start; CG never passes its column to the stop rule, and its error stayed at the
    record's initial inf, which the model's save refused ("refinement_.errors holds values
    that are not finite")."""
    from dkrr import RandomFeatureRidge, load_model, save_model

    Xd, yd, X, y, fmap = _problem(n=3000, chunks=1000)
    alpha = 1e-4
    yc = np.column_stack([y[:, 0], np.zeros(len(y))])
    ycd = da.from_array(yc, chunks=(1000, 2))
    beta0, L = _start(Xd, ycd, fmap, alpha, True)
    res = refine_ridge(Xd, ycd, None, fmap, beta0, L, alpha, True)
    r, e = res.info["residuals"], res.info["errors"]
    assert res.info["converged"] and res.info["passes"] >= 3  # the other target iterated
    assert (r[:, 1] == 0).all() and (e[:, 1] == 0).all() and np.isfinite(e).all()
    np.testing.assert_array_equal(res.beta[:, 1], 0.0)
    assert res.intercept[1] == 0.0
    s64 = streamed_statistics(Xd, ycd, fmap, precision="float64").total()
    beta64, _ = ridge_coefficients(s64, alpha, True)
    assert np.linalg.norm(res.beta[:, 0] - beta64[:, 0]) / np.linalg.norm(beta64[:, 0]) < 1e-8
    # end to end: the default fit of such targets (the estimator centres y: any constant)
    # saves and loads
    yc[:, 1] = 3.0
    est = RandomFeatureRidge(n_components=128, alpha=alpha, random_state=0).fit(X, yc)
    assert np.isfinite(est.refinement_["errors"]).all()
    back = load_model(save_model(est, tmp_path / "m"))
    np.testing.assert_array_equal(back.predict(X[:20]), est.predict(X[:20]))
