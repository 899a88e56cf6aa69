"""solver="pcg": matrix-free preconditioned CG (ALGORITHMS.md section 3.9).

The PCG answer equals the Gram path's (Cholesky of the accumulated p x p Gram) where
both fit; the Nystrom preconditioner cuts the iterations of plain CG; stopping at
``max_iter`` warns; no p x p array is allocated; the result does not depend on the
chunking; a worker killed mid-iteration on a real LocalCluster gives the same model.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import tracemalloc
import warnings

import dask
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier
from dkrr.errors import GridEdgeWarning, InvalidParameterError

MAP = {"method": "rff", "n_components": 64, "gamma": 0.3, "random_state": 5}


def _data(n=1500, d=4, t=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    Y = np.column_stack([np.sin(X[:, 0]) + 2.0, X[:, 1] ** 2 - X[:, 2]])[:, :t]
    return X, Y + 0.1 * rng.standard_normal(Y.shape)


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_pcg_equals_gram_path(fit_intercept):
    X, Y = _data()
    kw = dict(MAP, alpha=0.3, fit_intercept=fit_intercept)
    ref = RandomFeatureRidge(**kw).fit(X, Y)
    est = RandomFeatureRidge(**kw, solver="pcg", tol=1e-11, pcg_rank=32).fit(X, Y)
    assert est.solver_info_["converged"]
    # the sketch's seed is a child of the fold seed: the map and the folds are the Gram path's
    assert est.fold_seed_ == ref.fold_seed_
    np.testing.assert_array_equal(est.feature_map_.transform(X[:5]), ref.feature_map_.transform(X[:5]))
    assert _rel(est.coef_, ref.coef_) < 1e-6
    assert _rel(est.predict(X), ref.predict(X)) < 1e-6
    if fit_intercept:
        np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-6)
    else:
        assert est.intercept_ == 0.0
    # one target (1-D y) keeps scikit-learn's shapes
    one = RandomFeatureRidge(**kw, solver="pcg", tol=1e-11).fit(X, Y[:, 0])
    assert one.coef_.shape == (128,) and _rel(one.coef_, ref.coef_[0]) < 1e-6


def test_pcg_classifier_equals_gram_path():
    X, _ = _data(n=1200)
    y = np.array(["a", "b", "c"])[(X[:, 0] > 0.3).astype(int) + (X[:, 1] > 0.5).astype(int)]
    ref = RandomFeatureRidgeClassifier(**MAP, alpha=0.5).fit(X, y)
    est = RandomFeatureRidgeClassifier(**MAP, alpha=0.5, solver="pcg", tol=1e-11).fit(X, y)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    assert _rel(est.decision_function(X), ref.decision_function(X)) < 1e-6
    assert est.solver_info_["residuals"].shape[1] == 3  # one CG column per class


def test_preconditioner_cuts_iterations():
    X, Y = _data(n=2000)
    kw = {"method": "rff", "n_components": 64, "gamma": 0.5, "random_state": 1, "alpha": 0.5, "solver": "pcg",
          "tol": 1e-10}
    plain = RandomFeatureRidge(**kw, pcg_rank=0).fit(X, Y).solver_info_
    pre = RandomFeatureRidge(**kw, pcg_rank=64).fit(X, Y).solver_info_
    assert plain["converged"] and pre["converged"] and plain["rank"] == 0 and pre["rank"] == 64
    # measured: 33 iterations with the rank-64 preconditioner, 102 without
    assert 2 * pre["n_iter"] <= plain["n_iter"], (pre["n_iter"], plain["n_iter"])
    for info in (plain, pre):  # the history: one row per iteration plus the start
        assert info["residuals"].shape == (info["n_iter"] + 1, 2)
        assert info["residuals"][0].max() == pytest.approx(1.0) and info["residuals"][-1].max() <= 1e-10


def test_full_rank_preconditioner_is_exact():
    # rank >= p: the Nystrom factor is A itself and P^-1 (A + alpha I) = (lam_p + alpha) I
    X, Y = _data(n=800)
    est = RandomFeatureRidge(**MAP, alpha=0.01, solver="pcg", pcg_rank=10_000, tol=1e-10).fit(X, Y)
    assert est.solver_info_["rank"] == 128 and est.solver_info_["n_iter"] == 1


def test_convergence_warning_at_max_iter():
    X, Y = _data(n=600)
    with pytest.warns(ConvergenceWarning, match=r"max_iter=2 .*relative residual"):
        est = RandomFeatureRidge(**MAP, alpha=0.01, solver="pcg", pcg_rank=0, tol=1e-12, max_iter=2).fit(X, Y)
    info = est.solver_info_
    assert info["n_iter"] == 2 and not info["converged"] and info["residuals"].shape == (3, 2)
    assert info["residuals"][-1].max() > 1e-12


def test_results_do_not_depend_on_chunking():
    X, Y = _data(n=1500)
    fits = [RandomFeatureRidge(**MAP, alpha=0.3, solver="pcg", tol=1e-12, chunk_rows=c).fit(X, Y) for c in (250, 700)]
    assert _rel(fits[0].coef_, fits[1].coef_) < 1e-9
    np.testing.assert_allclose(fits[0].intercept_, fits[1].intercept_, rtol=1e-9)


def _peak_bytes(est, X, y):
    tracemalloc.start()
    try:
        est.fit(X, y)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_no_p_by_p_allocation():
    rng = np.random.default_rng(0)
    # 128 rows: PCG's own peak (its n x p feature blocks) measured 5.1 MB against the 8 MiB
    # bound; with 256 rows it measured 8.2-8.5 MB, at the bound, and failed once in a suite
    X = rng.standard_normal((128, 8))
    y = np.sin(X[:, 0])
    p = 2048  # gaussian kernel, D = 1024: 8 p^2 = 32 MiB
    kw = {"method": "sorf", "n_components": 1024, "gamma": 0.1, "alpha": 1.0, "random_state": 0}
    with dask.config.set(scheduler="sync"):
        gram = _peak_bytes(RandomFeatureRidge(**kw), X, y)
        pcg = _peak_bytes(RandomFeatureRidge(**kw, solver="pcg", pcg_rank=32, tol=1e-3), X, y)
    assert gram > 8 * p * p  # the measurement sees the Gram path's p x p arrays
    assert pcg < 8 * p * p / 4, (pcg, gram)


def test_invalid_combinations_are_refused():
    X, Y = _data(n=300)
    with pytest.raises(InvalidParameterError, match="sampling='surrogate_leverage' is not available with solver='pcg'"):
        RandomFeatureRidge(**MAP, solver="pcg", sampling="surrogate_leverage").fit(X, Y)
    with pytest.raises(InvalidParameterError, match="needs alpha > 0"):
        RandomFeatureRidge(**MAP, solver="pcg", alpha=0.0).fit(X, Y)
    for bad in ({"pcg_rank": -1}, {"tol": 0.0}, {"max_iter": 0}, {"tol": "x"}, {"pcg_persist": "yes"}):
        with pytest.raises(InvalidParameterError):
            RandomFeatureRidge(**MAP, solver="pcg", **bad).fit(X, Y)


def test_memory_estimate_has_no_quadratic_term():
    from dkrr.linalg._memory import ridge_memory_estimate
    from dkrr.linalg._pcg import pcg_memory_estimate

    common = {"kernel": "gaussian", "method": "sorf", "n_features_in": 16, "n_components": 32768, "n_targets": 1,
                  "split_every": None, "block_rows": 4000, "n_blocks": 40, "max_block_bytes": 64 * 2**20}
    pcg = pcg_memory_estimate(**common, rank=256)
    gram = ridge_memory_estimate(**common)
    p = 65536
    assert gram.block_task > 8 * p * p
    assert max(pcg.block_task, pcg.reduction_task, pcg.client) < 2 * 2**30  # O(p (rank + t)), no p^2
    assert pcg.block_task > 2 * 8 * p * 256  # two sketch partials


def test_solver_info_survives_save_and_load(tmp_path):
    from dkrr.io._model import load_model, save_model

    X, Y = _data(n=400)
    est = RandomFeatureRidge(**MAP, solver="pcg", pcg_rank=16, tol=1e-8).fit(X, Y)
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    info, got = est.solver_info_, back.solver_info_
    assert set(got) == set(info) and got["n_iter"] == info["n_iter"] and got["converged"] is True
    np.testing.assert_array_equal(got["residuals"], info["residuals"])
    np.testing.assert_array_equal(back.predict(X), est.predict(X))


@pytest.fixture()
def proc_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0", memory_limit="1GiB") as cluster, \
            distributed.Client(cluster) as client:
        yield client


@pytest.mark.slow  # ~30 s: a real 2-process cluster and ~40 distributed passes
@pytest.mark.cluster
@pytest.mark.parametrize("persist", [True, False])  # X kept on the workers (lost with one), or read each pass
def test_worker_killed_mid_iteration_gives_same_model(proc_client, tmp_path, persist):
    import dask.array as da

    X, Y = _data(n=12_000, d=6, t=1, seed=3)
    da.from_array(X, chunks=(2000, 6)).to_zarr(str(tmp_path / "X.zarr"))
    da.from_array(Y[:, 0], chunks=2000).to_zarr(str(tmp_path / "y.zarr"))
    Xz, yz = da.from_zarr(str(tmp_path / "X.zarr")), da.from_zarr(str(tmp_path / "y.zarr"))
    kw = {"method": "rff", "n_components": 64, "gamma": 0.3, "random_state": 2, "alpha": 10.0, "solver": "pcg",
              "pcg_rank": 32, "tol": 1e-10, "pcg_persist": persist}
    with dask.config.set(scheduler="threads"):
        ref = RandomFeatureRidge(**kw).fit(X, Y[:, 0])
    pids = proc_client.run(os.getpid)
    killed = {}

    def iterations_running(dask_scheduler):
        names = {str(k).split("-")[1] for k, ts in dask_scheduler.tasks.items()
                 if "matvec_block" in str(k) and ts.state in ("processing", "memory")}
        return len(names)

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline:
            if proc_client.run_on_scheduler(iterations_running) > 0 and not killed:
                time.sleep(0.5)  # a few iterations in
                victim = min(pids)
                os.kill(pids[victim], signal.SIGKILL)
                killed["at"] = time.time()
                return
            time.sleep(0.02)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    est = RandomFeatureRidge(**kw).fit(Xz, yz)
    done = time.time()
    thread.join(5)
    assert "at" in killed and killed["at"] < done, "the fit ended before a worker could be killed"
    assert est.solver_info_["converged"] and est.solver_info_["n_iter"] >= 5
    assert est.solver_info_["persisted"] is persist
    assert _rel(est.coef_, ref.coef_) < 1e-8
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-8)


def test_pcg_with_standardize_and_gamma_rule_equals_gram_path():
    X, Y = _data(n=800)
    X = X * np.array([1.0, 10.0, 0.1, 3.0]) + 5.0
    kw = dict(MAP, gamma="scale", standardize=True, alpha=0.3)
    ref = RandomFeatureRidge(**kw).fit(X, Y)
    est = RandomFeatureRidge(**kw, solver="pcg", tol=1e-11).fit(X, Y)
    assert est.gamma_ == ref.gamma_
    np.testing.assert_array_equal(est.mean_, ref.mean_)
    assert _rel(est.predict(X), ref.predict(X)) < 1e-6


@pytest.mark.parametrize("cv", [None, 3])
def test_traced_memory_is_within_the_estimate(cv):
    """One process (sync scheduler) runs both the block tasks and the client's work, one
    after the other: the traced peak lies between half and 1.1x the larger of the
    estimate's worker and client parts (measured 37.4 MiB against 40.5 MiB without CV,
    10.9 against 12.2 with it)."""
    import dask.array as da

    from dkrr.linalg._pcg import pcg_memory_estimate

    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 8))
    Xd, yd = da.from_array(X, chunks=(1000, 8)), da.from_array(np.sin(X[:, 0]), chunks=1000)
    rank = 128 if cv is None else 32
    kw = dict(method="sorf", n_components=2048, gamma=0.1, alpha=1.0, random_state=0, solver="pcg", pcg_rank=rank,
              tol=1e-4, cv=cv, alphas=None if cv is None else [0.1, 1.0], max_block_bytes=2**22)
    with dask.config.set(scheduler="sync"), warnings.catch_warnings():
        warnings.simplefilter("ignore", GridEdgeWarning)  # a two-value grid: any choice is on its edge
        RandomFeatureRidge(**kw).fit(Xd, yd)  # imports and caches of a first fit are not the fit's
        peak = _peak_bytes(RandomFeatureRidge(**kw), Xd, yd)
        est = pcg_memory_estimate(kernel="gaussian", method="sorf", n_features_in=8, n_components=2048, n_targets=1,
                                  rank=rank, split_every=None, block_rows=1000, n_blocks=4, max_block_bytes=2**22,
                                  n_folds=cv or 1, n_alphas=2)
    bound = max(est.worker, est.client)
    assert 0.5 * bound < peak < 1.1 * bound, (peak, est)
