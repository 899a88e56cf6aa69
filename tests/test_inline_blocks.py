"""Row blocks read inside the reduction step that consumes them (no read-ahead).

A fit from a Zarr store used to run every block's read as its own root task; the
scheduler ran those reads whenever a thread was free, ahead of the chains that consume
the blocks, and the blocks waited in worker memory (about 20 blocks of 32 MiB on 2
workers). The reads now run inside the chain steps: these tests check, on real stores
and a real LocalCluster, that no block read runs as a task of its own, that the worker
holds no block between steps, and that the results equal the in-memory fit's.
"""

from __future__ import annotations

import numpy as np
import pytest

import dask
import dask.array as da

from dkrr import RandomFeatureRidge
from dkrr.linalg._inline_blocks import inline_block_recipes

N, D_IN, CHUNK = 24_000, 6, 2_000


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("inline") / "x.zarr")
    X = np.random.default_rng(0).standard_normal((N, D_IN)).astype("float32")
    da.from_array(X, chunks=(CHUNK, D_IN)).to_zarr(path)
    return path, X


def _name(key) -> str:
    return key[0] if isinstance(key, tuple) else key


def _keys(a):
    (a,) = dask.optimize(a)
    return a, [b.key for b in a.to_delayed(optimize_graph=False).reshape(-1)]


def test_zarr_reads_move_into_their_block_and_the_handle_stays_shared(store):
    path, _ = store
    X = da.from_zarr(path)
    y = X[:, 0] * 2.0
    (Xo, yo) = dask.optimize(X, y)
    graph = {**dict(Xo.__dask_graph__()), **dict(yo.__dask_graph__())}
    keys = [[b.key for b in a.to_delayed(optimize_graph=False).reshape(-1)] for a in (Xo, yo)]
    recipes = inline_block_recipes(graph, keys)
    assert recipes is not None and len(recipes) == N // CHUNK
    for i, r in enumerate(recipes):
        assert r.keys == (keys[0][i], keys[1][i])
        assert keys[0][i] in r.graph and keys[1][i] in r.graph  # the reads run in the step
        assert len(r.deps) == 1 and _name(r.deps[0]).startswith("original-from-zarr")  # the handle
        assert not set(r.graph) & set().union(*(set(q.graph) for q in recipes if q is not r))
    # the recipes give the blocks themselves
    handle = dict(graph)[recipes[3].deps[0]]
    xb, yb = recipes[3].values([handle.value if hasattr(handle, "value") else handle])
    np.testing.assert_array_equal(xb, X.blocks[3].compute())
    np.testing.assert_array_equal(yb, y.blocks[3].compute())


def test_in_memory_chunks_stay_as_they_were(store):
    _, Xn = store
    X, keys = _keys(da.from_array(Xn, chunks=(CHUNK, D_IN)))
    assert inline_block_recipes(dict(X.__dask_graph__()), [keys]) is None


def test_a_block_shared_by_two_steps_is_not_moved(store):
    path, _ = store
    # each new block reads two stored chunks, each stored chunk feeds two new blocks
    X = da.from_zarr(path).rechunk((3 * CHUNK // 2, D_IN))
    Xo, keys = _keys(X)
    graph = dict(Xo.__dask_graph__())
    recipes = inline_block_recipes(graph, [keys])
    assert recipes is not None
    moved = [k for r in recipes for k in r.graph]
    assert len(moved) == len(set(moved))  # nothing is moved into two steps
    shared = [d for r in recipes for d in r.deps if _name(d).startswith(("from-zarr", "rechunk"))]
    assert shared  # the stored chunks two blocks need stay tasks of their own
    counts = {d: sum(d in r.deps for r in recipes) for d in shared}
    assert max(counts.values()) == 2


@pytest.mark.cluster
def test_fit_from_zarr_runs_no_read_tasks_and_equals_the_in_memory_fit(store):
    from distributed import get_task_stream

    from dkrr.cluster import local_cluster

    path, Xn = store
    yn = np.sin(Xn[:, 0].astype(np.float64)) + Xn[:, 1]
    ypath = path.replace("x.zarr", "y.zarr")
    da.from_array(yn, chunks=CHUNK).to_zarr(ypath, overwrite=True)
    kw = dict(method="rff", n_components=64, gamma=0.2, alpha=1.0, cv=3, random_state=0)
    ref = RandomFeatureRidge(**kw).fit(Xn, yn)
    with local_cluster(n_workers=2, threads_per_worker=1, processes=False, dashboard=False, quiet=True):
        with get_task_stream() as ts:
            got = RandomFeatureRidge(**kw).fit(da.from_zarr(path), da.from_zarr(ypath))
    names = [str(t["key"]) for t in ts.data]
    assert not [k for k in names if "'from-zarr-" in k], "a block read ran as a task of its own"
    steps = [k for k in names if k.startswith("dkrr-")]
    assert len(steps) >= N // CHUNK
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.cv_results_["mean_mse"], ref.cv_results_["mean_mse"], rtol=1e-10)
    assert got.alpha_ == ref.alpha_


def test_a_step_reads_a_result_persisted_on_the_cluster(local_cluster):
    """A block task over a persisted array names a key that lives on the cluster, not in
    the graph: the step must receive it as a dependency (its recipe runs the task on it)."""
    import distributed

    from dkrr.linalg._reduce import reduce_row_blocks

    x = np.arange(40.0).reshape(20, 2)
    with distributed.Client(local_cluster):
        base = da.from_array(x, chunks=(5, 2)).persist()
        scaled = base * 2.0  # one task per block on top of a persisted block
        total = reduce_row_blocks([scaled], lambda b, offset, i: b.sum(axis=0), lambda parts: sum(parts))
    np.testing.assert_array_equal(total, 2.0 * x.sum(axis=0))
