"""Cross-validation's fold solves as tasks where the statistics are (dkrr.linalg._cv_tasks).

The fold errors equal the client-side computation (cross_validate_statistics on the pass's
gathered statistics) on the threaded scheduler and on a real LocalCluster; on the cluster
the fold solves run on both workers and the client receives one total Gram and small
results, never the K fold Grams (measured from the workers' own transfer logs).
"""

import dask
import numpy as np
import pytest

from dkrr._blas import limit_blas_threads
from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier
from dkrr.estimators._fitted import PlusMinusTargets
from dkrr.features import build_random_feature_map
from dkrr.linalg import as_row_chunked, cross_validate_statistics
from dkrr.linalg._cv_tasks import cross_validate_pass
from dkrr.linalg._weighted import check_sample_weight, streamed_statistics_maps

N, D_IN, K = 1200, 3, 4
ALPHAS = np.array([1e-4, 1e-2, 1.0])


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((N, D_IN))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(N)
    return X, y, rng.uniform(0.2, 3.0, N)


def _maps(gammas, n_components=24):
    return [build_random_feature_map(kernel="gaussian", method="rff", n_components=n_components, gamma=g,
                                     n_features_in=D_IN, random_state=0, options={}) for g in gammas]


CASES = {
    "plain": dict(gammas=[0.5]),
    "weighted": dict(gammas=[0.5], weighted=True),
    "two targets": dict(gammas=[0.5], targets=2),
    "gamma grid": dict(gammas=[0.25, 0.5, 1.0]),
    "classifier": dict(gammas=[0.5], labels=True),
    "weighted gamma grid, no intercept": dict(gammas=[0.3, 1.0], weighted=True, fit_intercept=False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fold_tasks_equal_the_client_side_cv(data, scheduler, case):
    spec = CASES[case]
    X, y, w = data
    Y = (np.where(y > 0.3, "b", np.where(y < -0.3, "a", "c")) if spec.get("labels")
         else np.column_stack([y, np.cos(X[:, 0])]) if spec.get("targets") == 2 else y)
    fit_intercept = spec.get("fit_intercept", True)
    maps = _maps(spec["gammas"])
    Xd, Yd = as_row_chunked(X, Y, chunk_rows=150, y_kind="labels" if spec.get("labels") else "numeric")
    wd = check_sample_weight(w, Xd) if spec.get("weighted") else None
    common = dict(sample_weight=wd, n_folds=K, fold_seed=7, labels_mode=bool(spec.get("labels")))
    root = streamed_statistics_maps(Xd, Yd, maps, persist=True, **common)
    fn = PlusMinusTargets() if spec.get("labels") else None
    cv = cross_validate_pass(root, len(maps), K, ALPHAS, fit_intercept, p=maps[0].n_output_features,
                             targets_fn=fn, weighted=wd is not None)
    del root
    # the reference: the pass's statistics gathered, every fold scored on the client
    ref_fn = PlusMinusTargets() if spec.get("labels") else None
    every = [s if ref_fn is None else ref_fn(s) for s in streamed_statistics_maps(Xd, Yd, maps, **common)]
    expected = np.stack([cross_validate_statistics(s, ALPHAS, fit_intercept) for s in every])
    assert cv.fold_mse.shape == (len(maps), K, ALPHAS.size) and np.isfinite(cv.fold_mse).all()
    np.testing.assert_allclose(cv.fold_mse, expected, rtol=1e-10, atol=0)  # BLAS blocking differs by thread count: 1e-12 to 1.4e-11 measured (oldest dependencies)
    np.testing.assert_array_equal(cv.alphas, ALPHAS)
    np.testing.assert_array_equal(cv.folds.n, every[0].n)
    np.testing.assert_array_equal(cv.folds.weights(), every[0].weights())
    if fn is not None:
        np.testing.assert_array_equal(fn.classes, ["a", "b", "c"])  # the client's targets_fn knows them
    j = len(maps) - 1
    total, ref = cv.total(j), every[j].total()
    cv.release()
    for part in ("G", "c", "zsum", "ysum", "n"):
        np.testing.assert_array_equal(getattr(total, part), getattr(ref, part))


def test_default_alpha_grid_is_computed_with_the_folds(data, scheduler):
    from dkrr.linalg._cv import default_alphas

    X, y, _ = data
    maps = _maps([0.25, 0.5, 1.0])
    Xd, yd = as_row_chunked(X, y, chunk_rows=300)
    root = streamed_statistics_maps(Xd, yd, maps, n_folds=K, persist=True)
    cv = cross_validate_pass(root, 3, K, None, True, p=maps[0].n_output_features, alpha_map=1)
    every = streamed_statistics_maps(Xd, yd, maps, n_folds=K)
    np.testing.assert_array_equal(cv.alphas, default_alphas(every[1], True))
    expected = np.stack([cross_validate_statistics(s, cv.alphas, True) for s in every])
    np.testing.assert_allclose(cv.fold_mse, expected, rtol=1e-10, atol=0)  # BLAS blocking differs by thread count: 1e-12 to 1.4e-11 measured (oldest dependencies)


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_estimator_cv_on_a_cluster_equals_threads(data, local_cluster, kind):
    import distributed

    X, y, w = data
    if kind == "classifier":
        est = RandomFeatureRidgeClassifier(method="rff", n_components=24, gammas=[0.3, 1.0], cv=K, random_state=0)
        target = np.where(y > 0, "p", "q")
    else:
        est = RandomFeatureRidge(method="rff", n_components=24, gamma=0.5, cv=K, random_state=0,
                                 precision="float64")
        target = y
    with dask.config.set(scheduler="threads"):
        ref = est.__class__(**est.get_params()).fit(X, target, sample_weight=w)
    with distributed.Client(local_cluster):
        got = est.fit(X, target, sample_weight=w)
    np.testing.assert_allclose(got.cv_results_["fold_mse"], ref.cv_results_["fold_mse"], rtol=1e-10, atol=0)  # BLAS blocking differs by thread count: 1e-12 to 1.4e-11 measured (oldest dependencies)
    # the same grid point. The default grid follows trace(G), summed in an order that depends
    # on the BLAS threads (a float64 block on one BLAS thread sums its Gram by the in-place
    # DSYRK, dkrr.linalg._packed): equal to rounding (1 ulp apart measured, oldest dependencies)
    np.testing.assert_allclose(got.cv_results_["alphas"], ref.cv_results_["alphas"], rtol=1e-13, atol=0)
    assert np.argmin(got.cv_results_["mean_mse"]) == np.argmin(ref.cv_results_["mean_mse"])
    assert got.alpha_ == pytest.approx(ref.alpha_, rel=1e-13, abs=0)
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


def _bytes_to_non_workers(client):
    """Bytes each worker sent to anything that is not a worker (the scheduler gathering for
    the client, the client itself), from the workers' own transfer logs."""
    addresses = set(client.scheduler_info(n_workers=-1)["workers"])
    logs = client.run(lambda dask_worker: list(dask_worker.transfer_outgoing_log))
    return sum(entry["total"] for log in logs.values() for entry in log if entry["who"] not in addresses)


def test_the_client_gathers_one_total_gram_not_the_fold_grams(data, local_cluster):
    import distributed

    X, y, _ = data
    (fmap,) = maps = _maps([0.5], n_components=128)
    p = fmap.n_output_features
    Xd, yd = as_row_chunked(X, y, chunk_rows=300)
    gram = p * p * 8
    with distributed.Client(local_cluster) as client:
        client.run(lambda dask_worker: dask_worker.transfer_outgoing_log.clear())
        with distributed.get_task_stream() as stream:
            root = streamed_statistics_maps(Xd, yd, maps, n_folds=K, persist=True)
            cv = cross_validate_pass(root, 1, K, ALPHAS, True, p=maps[0].n_output_features)
            del root
        to_client = _bytes_to_non_workers(client)
        solved_on = {t["worker"] for t in stream.data if "_score" in str(t["key"])}
        # the control: gathering the pass's statistics, as the client-side CV does, is measured
        client.run(lambda dask_worker: dask_worker.transfer_outgoing_log.clear())
        (stats,) = streamed_statistics_maps(Xd, yd, maps, n_folds=K)
        control = _bytes_to_non_workers(client)
    assert cv.total(0).G.shape == (1, p, p)
    assert gram <= to_client < gram + 64 * 2**10, (to_client, gram)  # one Gram and the small results
    assert control > 0.5 * K * gram, (control, gram)  # K packed Grams (half a Gram each)
    assert len(solved_on) == 2, solved_on  # the K fold solves were spread over both workers
    with limit_blas_threads(1):  # as the workers' (their eigh's rounding depends on the BLAS threads)
        expected = cross_validate_statistics(stats, ALPHAS, True)
    np.testing.assert_allclose(cv.fold_mse[0], expected, rtol=1e-10, atol=0)  # BLAS blocking differs by thread count: 1e-12 to 1.4e-11 measured (oldest dependencies)


def test_workers_too_small_for_a_fold_solve_leave_the_folds_to_the_client(data):
    """A worker memory limit below a fold solve's part (fold_part_bytes) keeps the previous
    path: the client gathers the statistics and solves the folds, with the same results.
    The limit is only read (spilling, pausing and restarts off), so the small fit runs."""
    import distributed

    from dkrr.linalg._cv_tasks import fold_part_bytes, folds_on_workers

    X, y, _ = data
    est = RandomFeatureRidge(method="rff", n_components=256, gamma=0.5, cv=3, alphas=ALPHAS, random_state=0,
                             precision="float64")
    p = 512
    limit = fold_part_bytes(p, 1, 3) - 2**20  # above the pass's part (13.9 MiB), below a fold solve's
    with dask.config.set(scheduler="threads"):
        ref = est.__class__(**est.get_params()).fit(X, y)
    off = {f"distributed.worker.memory.{k}": False for k in ("target", "spill", "pause", "terminate")}
    with dask.config.set(off), distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
            memory_limit=limit) as cluster, distributed.Client(cluster) as client:
        assert not folds_on_workers(p, 1, 3) and folds_on_workers(p // 2, 1, 3)
        client.run(lambda dask_worker: dask_worker.transfer_outgoing_log.clear())
        with distributed.get_task_stream() as stream, limit_blas_threads(1):  # the reference's fold solves' BLAS
            got = est.fit(X, y)
        assert not any("_score" in str(t["key"]) for t in stream.data)  # no fold solve ran on the worker
        assert _bytes_to_non_workers(client) > 0.5 * 3 * p * p * 8  # the K packed fold Grams were gathered
    np.testing.assert_allclose(got.cv_results_["fold_mse"], ref.cv_results_["fold_mse"], rtol=1e-10, atol=0)  # BLAS blocking differs by thread count: 1e-12 to 1.4e-11 measured (oldest dependencies)
    # the final solve at the chosen alpha (1e-4: ill-conditioned) ran with other BLAS threads
    assert got.alpha_ == ref.alpha_
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-6, atol=1e-9)


def _fold_solve_recorder(score):
    """``(recording, seen)``: ``recording`` calls the real ``score`` and appends to ``seen``,
    as each solve starts, the solves then running (itself included) and the BLAS threads."""
    import threading

    import threadpoolctl

    seen, running, lock = [], [0], threading.Lock()

    def recording(*args):
        with lock:
            running[0] += 1
            seen.append((running[0], [i["num_threads"] for i in threadpoolctl.threadpool_info()
                                      if i["user_api"] == "blas"]))
        try:
            return score(*args)
        finally:
            with lock:
                running[0] -= 1

    return recording, seen


@pytest.mark.parametrize("large", [True, False], ids=["p at the threaded bound", "p below it"])
@pytest.mark.parametrize("where", ["threads", "a worker of 2 threads"])
def test_fold_solves_run_one_at_a_time_with_every_thread_and_the_same_errors(data, monkeypatch, where, large):
    """Fold solves in one process do not overlap (two dsytrd in two threads take as long as
    one after the other), so each runs alone, with the threads of its scheduler or worker as
    BLAS threads where p reaches THREADED_SOLVE_MIN_P (here lowered to the test's p = 48)
    and one below it: K = 4 solves on dask's threaded scheduler and on one in-process
    worker of 2 threads, recorded as they start. The fold errors are the client-side ones."""
    import distributed
    from dask.system import CPU_COUNT

    import dkrr.linalg._cv_tasks as cv_tasks

    X, y, _ = data
    maps = _maps([0.5])
    recording, seen = _fold_solve_recorder(cv_tasks.score_fold)
    monkeypatch.setattr(cv_tasks, "score_fold", recording)
    p = maps[0].n_output_features
    monkeypatch.setattr(cv_tasks, "THREADED_SOLVE_MIN_P", p if large else p + 1)
    Xd, yd = as_row_chunked(X, y, chunk_rows=150)
    if where == "threads":
        threads = CPU_COUNT
        with dask.config.set(scheduler="threads", num_workers=threads):
            root = streamed_statistics_maps(Xd, yd, maps, n_folds=K, fold_seed=7, persist=True)
            cv = cross_validate_pass(root, 1, K, ALPHAS, True, p=maps[0].n_output_features)
    else:
        threads = 2
        with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=threads,
                                      dashboard_address=None) as cluster, distributed.Client(cluster):
            root = streamed_statistics_maps(Xd, yd, maps, n_folds=K, fold_seed=7, persist=True)
            cv = cross_validate_pass(root, 1, K, ALPHAS, True, p=maps[0].n_output_features)
            del root
    with dask.config.set(scheduler="threads"):
        (every,) = streamed_statistics_maps(Xd, yd, maps, n_folds=K, fold_seed=7)
    assert len(seen) == K
    assert max(r for r, _ in seen) == 1, seen  # one at a time
    assert all(blas and set(blas) == {threads if large else 1} for _, blas in seen), seen
    expected = cross_validate_statistics(every, ALPHAS, True)
    np.testing.assert_allclose(cv.fold_mse[0], expected, rtol=1e-10, atol=0)  # BLAS threads differ, as above


def _record_fold_solves(dask_worker=None):  # runs in the worker process (client.run)
    import dkrr.linalg._cv_tasks as cv_tasks

    cv_tasks.score_fold, cv_tasks._SEEN = _fold_solve_recorder(cv_tasks.score_fold)


def _seen_fold_solves(dask_worker=None):
    import dkrr.linalg._cv_tasks as cv_tasks

    return list(getattr(cv_tasks, "_SEEN", []))


def test_a_worker_process_of_two_threads_solves_its_folds_in_turn_with_both(data):
    """On a real worker process (a nanny's: one BLAS thread per worker thread from its
    environment) with 2 threads, the fold solves of p >= THREADED_SOLVE_MIN_P take turns,
    each with 2 BLAS threads; the errors are the client-side CV's. The recording wraps the
    real score_fold inside the worker process."""
    import distributed

    import dkrr.linalg._cv_tasks as cv_tasks

    X, y, _ = data
    maps = _maps([0.5], n_components=cv_tasks.THREADED_SOLVE_MIN_P // 2)
    p = maps[0].n_output_features
    Xd, yd = as_row_chunked(X, y, chunk_rows=300)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        client.run(_record_fold_solves)
        root = streamed_statistics_maps(Xd, yd, maps, n_folds=K, fold_seed=7, persist=True)
        cv = cross_validate_pass(root, 1, K, ALPHAS, True, p=p)
        del root
        (seen,) = client.run(_seen_fold_solves).values()
        (stats,) = streamed_statistics_maps(Xd, yd, maps, n_folds=K, fold_seed=7)
    assert len(seen) == K and max(r for r, _ in seen) == 1, seen
    assert all(set(blas) == {2} for _, blas in seen), seen
    with dask.config.set(scheduler="threads"):
        expected = cross_validate_statistics(stats, ALPHAS, True)
    np.testing.assert_allclose(cv.fold_mse[0], expected, rtol=1e-10, atol=0)
