"""Row blocks read inside the reduction step that consumes them (no read-ahead).

A fit from a Zarr store used to run every block's read as its own root task; the
scheduler ran those reads whenever a thread was free, ahead of the chains that consume
the blocks, and the blocks waited in worker memory (about 20 blocks of 32 MiB on 2
workers). The arrays dkrr reads from Zarr itself are reader-backed: a reduction step
receives the reader (one shared key) and reads its rows when it runs. These tests check,
on real stores and a real LocalCluster, that such an array stays reader-backed through
the operations dkrr applies before a pass, that no block read runs as a task of its own,
that other dask inputs (persisted results, a user's pipeline) stay dependencies, and that
the results equal the in-memory fit's.
"""

from __future__ import annotations

import numpy as np
import pytest

import dask
import dask.array as da
import zarr

from dkrr import RandomFeatureRidge
from dkrr.io import open_dataset, write_dataset
from dkrr.linalg import as_row_chunked, reduce_row_blocks
from dkrr._rows import astype_rows, map_rows, rechunk_rows, row_reader

N, D_IN, CHUNK = 24_000, 6, 2_000


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("inline") / "xy.zarr"
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D_IN)).astype("float32")
    y = np.sin(X[:, 0].astype(np.float64)) + X[:, 1]
    write_dataset(da.from_array(X, chunks=(CHUNK, D_IN)), da.from_array(y, chunks=CHUNK), path)
    return str(path), X, y


def _block_sum(x, row_offset, block_index):
    return x.sum(axis=0, dtype=np.float64)


def _add(parts):
    return sum(parts)


def _names(graph) -> set:
    return {k[0] if isinstance(k, tuple) else k for k in dict(graph)}


def test_store_arrays_are_read_inside_the_steps(store):
    path, X, y = store
    ds = open_dataset(path)
    assert row_reader(ds.X) is not None and row_reader(ds.y) is not None
    result = reduce_row_blocks([ds.X], _block_sum, _add, compute=False, n_chains=3)
    names = _names(result.__dask_graph__())
    assert ds.X.name not in names  # no task of the store's blocks: the steps read them
    assert sum(n.startswith("RowReader-") for n in names) == 1  # one shared key
    np.testing.assert_allclose(result.compute(), X.sum(axis=0, dtype=np.float64), rtol=1e-10)


def test_the_operations_before_a_pass_keep_the_reader(store):
    path, X, y = store
    ds = open_dataset(path)
    kept = {
        "astype": astype_rows(ds.X, np.float64),
        "map_rows": map_rows(ds.X, np.multiply, 2.0, dtype=np.float32),
        "rechunk": rechunk_rows(ds.X, {0: 3000}),
        "as_row_chunked": as_row_chunked(ds.X, ds.y, chunk_rows=5000)[0],
        "zarr array": as_row_chunked(zarr.open_group(path, mode="r")["X"])[0],
    }
    for what, a in kept.items():
        assert row_reader(a) is not None, what
    np.testing.assert_array_equal(kept["astype"].compute(), X.astype(np.float64))
    np.testing.assert_array_equal(kept["map_rows"].compute(), X * np.float32(2))
    assert kept["rechunk"].chunks[0] == (3000,) * 8
    np.testing.assert_array_equal(kept["rechunk"].compute(), X)
    # anything else is an ordinary dask array, whose blocks stay dependencies
    for other in (ds.X + 1, ds.X.persist(scheduler="threads"), da.from_array(X, chunks=(CHUNK, D_IN))):
        assert row_reader(other) is None
        assert row_reader(astype_rows(other, np.float64)) is None
    persisted = ds.X.persist(scheduler="threads")
    total = reduce_row_blocks([persisted], _block_sum, _add, n_chains=2)
    np.testing.assert_allclose(total, X.sum(axis=0, dtype=np.float64), rtol=1e-10)


@pytest.mark.parametrize("key", [
    (slice(None),), (slice(10, 4000, 7), slice(None)), (slice(3999, 10, -3),), (slice(5, 5),),
    (17,), (-1, 2), (slice(100, 300), slice(1, 4)), (slice(100, 300), 0),
])
def test_a_reader_indexes_as_numpy(store, key):
    path, X, _ = store
    r = row_reader(open_dataset(path).X)
    np.testing.assert_array_equal(r[key], X[key])


@pytest.mark.cluster
def test_fit_from_a_store_runs_no_read_tasks_and_equals_the_in_memory_fit(store):
    from distributed import get_task_stream

    from dkrr.cluster import local_cluster

    path, Xn, yn = store
    kw = dict(method="rff", n_components=64, gamma=0.2, alpha=1.0, cv=3, random_state=0)
    # the store's chunks: the same float32 sub-blocks as the store's fit (default precision)
    ref = RandomFeatureRidge(**kw).fit(da.from_array(Xn, chunks=(CHUNK, D_IN)), da.from_array(yn, chunks=CHUNK))
    ds = open_dataset(path)
    with local_cluster(n_workers=2, threads_per_worker=1, processes=False, dashboard=False, quiet=True):
        with get_task_stream() as ts:
            got = RandomFeatureRidge(**kw).fit(ds.X, ds.y)
    names = [str(t["key"]) for t in ts.data]
    assert not [k for k in names if ds.X.name in k], "a block read ran as a task of its own"
    # y's only read of its own: the first block, once, for the target's shift before the pass
    # (with query planning dask names that slice after the array itself)
    assert len([k for k in names if ds.y.name in k and not k.startswith("original-")]) <= 1
    steps = [k for k in names if k.startswith("dkrr-")]
    assert len(steps) >= N // CHUNK
    np.testing.assert_allclose(got.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.cv_results_["mean_mse"], ref.cv_results_["mean_mse"], rtol=1e-10)
    assert got.alpha_ == ref.alpha_


def test_a_step_reads_a_result_persisted_on_the_cluster(local_cluster):
    """A block task over a persisted array names a key that lives on the cluster: the step
    receives it as a dependency."""
    import distributed

    x = np.arange(40.0).reshape(20, 2)
    with distributed.Client(local_cluster):
        base = da.from_array(x, chunks=(5, 2)).persist()
        scaled = base * 2.0  # one task per block on top of a persisted block
        total = reduce_row_blocks([scaled], lambda b, offset, i: b.sum(axis=0), lambda parts: sum(parts))
        direct = reduce_row_blocks([base], lambda b, offset, i: b.sum(axis=0), lambda parts: sum(parts))
    np.testing.assert_array_equal(total, 2.0 * x.sum(axis=0))
    np.testing.assert_array_equal(direct, x.sum(axis=0))
