"""The final solve on the client takes one p x p array besides the statistics' Gram.

``shifted_gram`` forms ``G - n mu mu^T + alpha I`` in column slabs inside the array that
LAPACK's Cholesky then factors in place; before, the centred Gram, its shifted copy and
LAPACK's own copy were three more p x p arrays (2 GB at p = 8192). The factors and the
coefficients are bitwise those of the formulas they replace (written out here), and
tracemalloc (which sees numpy's allocations) bounds each solve's peak.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.linalg

from dkrr.estimators._mixed import _start
from dkrr.linalg._evidence import bayes_posterior, posterior_factor
from dkrr.linalg._solve import center_statistics, ridge_coefficients, shifted_gram, solve_cholesky
from dkrr.linalg._stats import RidgeStatistics

P, ROWS = 700, 2000


def _stats(p=P, rows=ROWS, t=2, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((rows, p)) + 0.4
    Y = Z[:, :3] @ rng.standard_normal((3, t)) + rng.standard_normal((rows, t))
    return RidgeStatistics(n=np.array([rows]), G=(Z.T @ Z)[None], c=(Z.T @ Y)[None], zsum=Z.sum(0)[None],
                           ysum=Y.sum(0)[None], yy=(Y * Y).sum(0)[None])


def _old_coefficients(st, alpha, fit_intercept):
    """What ridge_coefficients computed before: center_statistics, G_c + alpha I, cho_factor."""
    Gc, cc, mu, ybar = center_statistics(st.G[0], st.c[0], st.zsum[0], st.weights()[0], st.ysum[0], fit_intercept)
    A = Gc + alpha * np.eye(Gc.shape[0])
    beta = scipy.linalg.cho_solve(scipy.linalg.cho_factor(A, lower=False, check_finite=False), cc, check_finite=False)
    return beta, ybar - mu @ beta


def _old_factor(st, alpha, fit_intercept):
    """What posterior_factor computed from center_statistics' G_c before."""
    Gc = center_statistics(st.G[0], st.c[0], st.zsum[0], st.weights()[0], st.ysum[0], fit_intercept)[0]
    A = np.array(Gc, copy=True)
    A[np.diag_indices_from(A)] += alpha
    return scipy.linalg.cholesky(A, lower=True, check_finite=False)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_coefficients_and_factors_are_bitwise_the_formulas_they_replace(fit_intercept, monkeypatch):
    import dkrr.linalg._solve as solve

    monkeypatch.setattr(solve, "_SLAB_BYTES", 8 * P * 64)  # 64 columns a slab: 11 slabs, the last short
    st, alpha = _stats(), 0.7
    beta, b = ridge_coefficients(st, alpha, fit_intercept)
    ref_beta, ref_b = _old_coefficients(st, alpha, fit_intercept)
    np.testing.assert_array_equal(beta, ref_beta)
    np.testing.assert_array_equal(b, ref_b)
    centre = (st.zsum[0], st.weights()[0]) if fit_intercept else None
    L = posterior_factor(st.G[0], alpha, centre)
    np.testing.assert_array_equal(L, _old_factor(st, alpha, fit_intercept))
    assert not np.triu(L, 1).any()  # the upper triangle cleaned, as scipy's cholesky leaves it
    post = bayes_posterior(st, alpha, fit_intercept)
    np.testing.assert_array_equal(post["factor"], L)

    class Passes:
        stats = st

    Passes.alpha = alpha
    beta0, factor = _start(Passes, fit_intercept)
    np.testing.assert_array_equal(factor, L)
    np.testing.assert_array_equal(beta0, scipy.linalg.cho_solve((L, True), center_statistics(
        None, st.c[0], st.zsum[0], st.weights()[0], st.ysum[0], fit_intercept)[1]))


def test_shifted_gram_is_the_centred_gram_plus_alpha():
    st = _stats(p=50, rows=300)
    G, zsum, n = st.G[0], st.zsum[0], float(st.n[0])
    A = shifted_gram(G, 2.5, (zsum, n))
    assert A.flags.f_contiguous and A.shape == (50, 50)
    np.testing.assert_array_equal(A, center_statistics(G, st.c[0], zsum, n, st.ysum[0], True)[0] + 2.5 * np.eye(50))
    np.testing.assert_array_equal(shifted_gram(G, 0.0), G)
    assert shifted_gram(G, 0.0) is not G


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_each_final_solve_takes_one_p_by_p_array(monkeypatch):
    """Peak numpy memory of the solves, above the statistics: one p x p array and a slab
    (an eighth of it here, as at p = 4096 with the default 16 MiB slabs; before 3 p x p
    arrays, with the centred Gram and two copies)."""
    import dkrr.linalg._solve as solve

    monkeypatch.setattr(solve, "_SLAB_BYTES", 8 * 1024 * 128)
    st, alpha = _stats(p=1024, rows=1100, t=1), 1.0

    class Passes:
        stats = st

    Passes.alpha = alpha
    gram = 8 * 1024 * 1024
    for name, fn in [("ridge_coefficients", lambda: ridge_coefficients(st, alpha, True)),
                     ("bayes_posterior", lambda: bayes_posterior(st, alpha, True)),
                     ("the refinement's start", lambda: _start(Passes, True)),
                     ("solve_cholesky", lambda: solve_cholesky(st.G[0], st.c[0], alpha))]:
        assert _peak(fn) < 1.3 * gram, name
    assert _peak(lambda: _old_coefficients(st, alpha, True)) > 2.5 * gram  # the test can tell


def test_a_one_fold_total_is_shared_only_when_asked():
    st = _stats(p=20, rows=100)
    assert st.total(shared=True) is st
    assert st.total() is not st and np.shares_memory(st.total().G, st.G) is False
    two = RidgeStatistics(**{k: np.concatenate([getattr(st, k)] * 2) for k in ("n", "G", "c", "zsum", "ysum", "yy")})
    np.testing.assert_array_equal(two.total(shared=True).G, 2 * st.G)  # K > 1: always the sum


@pytest.mark.parametrize("precision", ["float64", "auto"])
@pytest.mark.parametrize("cv", [None, 5])
def test_a_whole_fit_on_a_cluster_peaks_at_about_two_grams_on_the_client(local_cluster, precision, cv,
                                                                           monkeypatch):
    """The client of a LocalCluster fit holds the gathered Gram and one p x p array of the
    solve (the factor; the posterior's when float64), nothing more: numpy's peak on the
    client is about 2.1 p x p arrays (measured at p = 4096 with the default slabs, here at
    p = 1024 with slabs of an eighth of the Gram; before: 5.0 in float64 and 4.0 by default,
    with the total's copy, the centred Gram, LAPACK's copy and precision_error's sum)."""
    import dask.array as da
    import distributed

    import dkrr.linalg._solve as solve
    from dkrr import RandomFeatureRidge

    monkeypatch.setattr(solve, "_SLAB_BYTES", 8 * 1024 * 128)

    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 6))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(3000)
    Xd, yd = da.from_array(X, chunks=(750, 6)), da.from_array(y, chunks=750)
    gram = 8 * 1024 * 1024
    with distributed.Client(local_cluster):
        make = lambda: RandomFeatureRidge(n_components=512, precision=precision, cv=cv, random_state=0)  # noqa: E731
        make().fit(Xd[:1500], yd[:1500])  # first-use costs (imports, caches) outside the measurement
        est = make()
        peak = _peak(lambda: est.fit(Xd, yd))
    assert est.coef_.shape == (1024,)
    assert peak < 2.5 * gram, peak / gram
