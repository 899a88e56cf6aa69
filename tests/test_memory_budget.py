"""Requests that cannot fit in memory are refused before any compute (issue 11, item 8).

Before the fix ``n_components=10**7`` drew a 381 MiB feature map, shipped it in the graph
and a worker died allocating the 2.8 PiB Gram; ``RandomFeatures(method="rff")`` with an
absurd ``n_components`` raised numpy's MemoryError (or allocated whatever it could).
"""

from __future__ import annotations

import numpy as np
import pytest

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.errors import DkrrError, InvalidParameterError, MemoryBudgetError
from dkrr.linalg import as_row_chunked
from dkrr.linalg._memory import (
    feature_map_bytes,
    ridge_memory_estimate,
    statistics_bytes,
)
from dkrr.linalg._stats import streamed_statistics

GiB = 2**30


def _data(n=200, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0])


def test_statistics_estimate_is_the_nbytes_of_a_real_statistics_object():
    X, y = _data(n=120, d=4)
    Y = np.column_stack([y, np.cos(X[:, 1])])  # t = 2 targets
    rf = RandomFeatures(method="rff", n_components=6, random_state=0).fit(X)
    Xd, yd = as_row_chunked(X, Y, chunk_rows=40)
    stats = streamed_statistics(Xd, yd, rf.feature_map_, n_folds=3, fold_seed=1)
    actual = sum(getattr(stats, k).nbytes for k in stats.PARTS if getattr(stats, k) is not None)
    assert statistics_bytes(p=rf.n_output_features_, n_targets=2, n_folds=3) == actual


@pytest.mark.parametrize("method", ["rff", "orf", "qmc"])
def test_dense_map_estimate_is_the_size_of_w(method):
    X, _ = _data(d=5)
    rf = RandomFeatures(method=method, n_components=37, random_state=0).fit(X)
    assert feature_map_bytes(method, n_features_in=5, n_components=37) == rf.feature_map_.projection.weights.nbytes


@pytest.mark.parametrize("method", ["sorf", "fastfood", "circulant", "toeplitz_like"])
def test_structured_map_estimate_bounds_its_stored_numbers(method):
    X, _ = _data(d=5)
    rf = RandomFeatures(method=method, n_components=37, random_state=0).fit(X)
    state = rf.feature_map_.projection.get_state()
    stored = sum(v.nbytes for v in state.values() if isinstance(v, np.ndarray))
    assert stored <= feature_map_bytes(method, n_features_in=5, n_components=37) <= 64 * stored


@pytest.mark.parametrize("cls", [RandomFeatureRidge, RandomFeatureRidgeClassifier])
def test_huge_n_components_is_refused_before_any_compute(cls, scheduler):
    import dask

    X, y = _data()
    if cls is RandomFeatureRidgeClassifier:
        y = y > 0
    est = cls(n_components=10**7, random_state=0)
    ran = []

    class Count(dask.callbacks.Callback):
        def _start(self, dsk):
            ran.append(len(dsk))

    if scheduler == "threads":
        with Count(), pytest.raises(MemoryBudgetError) as excinfo:
            est.fit(X, y)
        assert ran == []
        assert "available memory of this machine" in str(excinfo.value)
    else:
        from distributed import get_task_stream

        workers = set(scheduler.scheduler_info(n_workers=-1)["workers"])
        with get_task_stream(scheduler) as stream, pytest.raises(MemoryBudgetError) as excinfo:
            est.fit(X, y)
        assert stream.data == []  # no task ran
        assert set(scheduler.scheduler_info(n_workers=-1)["workers"]) == workers  # no worker died
        assert "memory limit of a Dask worker (1.00 GiB)" in str(excinfo.value)
    message = str(excinfo.value)
    assert isinstance(excinfo.value, DkrrError) and isinstance(excinfo.value, MemoryError)
    # the estimate of the Gram (2e7 x 2e7 float64, 2.8 PiB), and the fix
    gram = f"{statistics_bytes(p=2 * 10**7) / GiB:.0f} GiB"
    assert gram.startswith("298023") and gram in message and "n_components=10000000" in message
    assert "smaller n_components" in message
    assert not hasattr(est, "coef_")


def test_worker_memory_limit_bounds_the_reduction(local_cluster):
    """p = 6800: one Gram is 370 MB; a chain step holds two of them and a p x p temporary
    (1.1 GB > 1 GiB). p = 4000 (122 MiB a Gram) now fits where the plain tree, a combine
    of 8 of them plus its output (1.1 GiB), did not. (The Gram path is asked for:
    solver="auto" would switch to "pcg" here, tests/test_solver_auto.py.)"""
    import distributed

    X, y = _data(n=64)
    with distributed.Client(local_cluster) as client:
        est = RandomFeatureRidge(method="rff", n_components=3400, chunk_rows=8, random_state=0,
                                 solver="cholesky")  # 8 blocks
        with distributed.get_task_stream(client) as stream, pytest.raises(MemoryBudgetError) as excinfo:
            est.fit(X, y)
        assert stream.data == []
    message = str(excinfo.value)
    assert "runs a chain step holding two of them" in message and "(1.00 GiB)" in message
    assert "Or use solver='pcg'" in message
    kw = dict(kernel="gaussian", method="rff", n_features_in=3, split_every=8, block_rows=8, n_blocks=8,
              threads=1)
    estimate = ridge_memory_estimate(n_components=3400, n_chains=2, **kw)
    S = estimate.statistics
    assert S == 8 * (6800 * 6800 + 6800 + 6800 + 1 + 2)
    assert estimate.worker == estimate.block_task > 3 * S > GiB
    assert estimate.reduction_task == 3 * S + 2**20  # the tree over 2 chains (+ 1 MiB a task)
    chains = ridge_memory_estimate(n_components=2000, n_chains=2, **kw)
    assert chains.worker < GiB
    tree = ridge_memory_estimate(n_components=2000, n_chains=8, **kw)  # one chain per block
    assert tree.reduction_task == 9 * tree.statistics + 2**20 > GiB
    assert tree.worker == tree.reduction_task


def test_cv_folds_multiply_the_statistics():
    one = ridge_memory_estimate(kernel="gaussian", method="sorf", n_features_in=10, n_components=512,
                                block_rows=1000)
    five = ridge_memory_estimate(kernel="gaussian", method="sorf", n_features_in=10, n_components=512,
                                 n_folds=5, block_rows=1000)
    assert five.statistics == statistics_bytes(p=1024, n_folds=5) == 5 * one.statistics


def test_random_features_with_absurd_n_components_is_refused_before_allocating():
    X, _ = _data(d=50)
    for method in ["rff", "sorf", "toeplitz_like"]:
        with pytest.raises(MemoryBudgetError, match=r"feature map.*GiB.*smaller n_components"):
            RandomFeatures(method=method, n_components=10**12, random_state=0).fit(X)
    # Nystroem: 10**6 landmarks of 10**6 rows need D x D matrices (8 TB each)
    X1 = np.zeros((10**6, 1))
    with pytest.raises(MemoryBudgetError, match=r"nystroem.*D x D.*smaller n_components"):
        RandomFeatures(method="nystroem", n_components=10**6, random_state=0).fit(X1)
    # more landmarks than rows keeps its own, more precise, error
    with pytest.raises(InvalidParameterError, match="has only 200 rows"):
        RandomFeatures(method="nystroem", n_components=np.int64(10**12), random_state=0).fit(X)


def test_normal_fits_still_work(scheduler):
    X, y = _data()
    est = RandomFeatureRidge(method="rff", n_components=32, gamma=0.5, alphas=[0.01, 0.1], cv=3,
                             random_state=0).fit(X, y)
    assert est.score(X, y) > 0.9


def test_cli_refuses_huge_n_components(tmp_path, capsys):
    from dkrr.cli._main import main

    X, y = _data(n=60)
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.column_stack([X, y]), delimiter=",", fmt="%.6f")
    assert main(["ingest", str(csv), "--out", str(tmp_path / "s"), "--no-header", "-q"]) == 0
    capsys.readouterr()
    code = main(["fit", str(tmp_path / "s"), "--out", str(tmp_path / "m"), "--n-components", "10000000",
                 "--workers", "1", "--memory-limit", "1GB", "-q"])
    err = capsys.readouterr().err
    assert code == 1
    assert "GiB" in err and "smaller n_components" in err and "Traceback" not in err
    assert not (tmp_path / "m").exists()


def test_ridge_leverage_candidates_gram_is_estimated_and_refused():
    est = ridge_memory_estimate(kernel="gaussian", method="rff", n_features_in=3, n_components=100,
                                sampling="ridge_leverage", n_candidates=4000, block_rows=100)
    assert est.statistics == statistics_bytes(p=8000)  # the candidates' Gram dominates
    X, y = _data()
    fit = RandomFeatureRidge(method="rff", n_components=100, sampling="ridge_leverage", n_candidates=10**6,
                             random_state=0)
    with pytest.raises(MemoryBudgetError, match=r"n_candidates=1000000 gives p=2000000 features.*smaller n_candidates"):
        fit.fit(X, y)


def test_surrogate_leverage_with_cv_counts_one_map_per_fold():
    p, K = 512, 5
    est = ridge_memory_estimate(kernel="gaussian", method="rff", n_features_in=3, n_components=p // 2,
                                n_folds=K, sampling="surrogate_leverage", block_rows=100)
    assert est.statistics == statistics_bytes(p, 1, 1) + K * statistics_bytes(p, 1, 2)
