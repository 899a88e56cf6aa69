"""The chain-then-tree reduction of dkrr.linalg.reduce_row_blocks (issue 16, item 1).

Blocks are cut into C contiguous chains whose fused tasks add the received running sum
into the block's new statistics; a tree of fan-in ``split_every`` merges the C sums. The
tests: same result as the plain tree (``n_chains >= n_blocks``) and numpy for every C and
chunking; the order of a non-commutative combine is kept; inputs are never changed; keys
name C; and the memory of a real ridge pass (G packed), traced, is what the per-worker
formula of dkrr.linalg._memory predicts, while the plain tree's is more than twice as much.
"""

from __future__ import annotations

import tracemalloc

import dask
import dask.array as da
import numpy as np
import pytest

from dkrr.errors import InvalidParameterError
from dkrr.features import RandomFeatureMap
from dkrr.linalg import as_row_chunked, reduce_row_blocks
from dkrr.linalg._memory import ridge_memory_estimate, statistics_bytes
from dkrr.linalg._packed import work_length
from dkrr.linalg._chains import SPLIT_MIN_FRACTION, SPLIT_MIN_ROWS, chain_steps
from dkrr.linalg._reduce import _accumulate_into, _chain_step, default_n_chains
from dkrr.linalg._stats import RidgeStatistics, block_statistics, combine_statistics, fold_ids


def _fmap(d, D, seed=0):
    from dkrr import RandomFeatures

    return RandomFeatures(method="rff", n_components=D, gamma=0.5, random_state=seed).fit(
        np.zeros((2, d))).feature_map_


def _data(n=300, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.column_stack([np.sin(X[:, 0]), X[:, 1]])


def _pass(X, y, fmap, n_folds=3, **kw):
    Xd, yd = as_row_chunked(X, y, chunk_rows=kw.pop("chunk_rows", 37))
    out = reduce_row_blocks([Xd, yd], block_statistics, combine_statistics,
                            constants=(fmap, n_folds, 11, 1 << 20, False), **kw)
    assert out.packed  # the partial results keep G packed; the client unpacks it
    return out.symmetrized()


def _reference(X, y, fmap, n_folds=3):
    Z = fmap.transform(X)
    f = fold_ids(np.arange(len(X)), n_folds, 11)
    G = np.stack([Z[f == k].T @ Z[f == k] for k in range(n_folds)])
    c = np.stack([Z[f == k].T @ y[f == k] for k in range(n_folds)])
    return G, c


@pytest.mark.parametrize("n_chains", [1, 2, 3, 5, 9, 100])
@pytest.mark.parametrize("chunk_rows", [37, 64])
def test_chains_equal_the_tree_and_numpy(n_chains, chunk_rows):
    X, y = _data()
    fmap = _fmap(4, 32)
    tree = _pass(X, y, fmap, n_chains=10**6, chunk_rows=chunk_rows, split_every=3)
    chain = _pass(X, y, fmap, n_chains=n_chains, chunk_rows=chunk_rows, split_every=3)
    G, c = _reference(X, y, fmap)
    for got in (tree, chain):
        np.testing.assert_allclose(got.G, G, rtol=1e-12, atol=1e-12 * np.abs(G).max())
        np.testing.assert_allclose(got.c, c, rtol=1e-12, atol=1e-12 * np.abs(c).max())
    np.testing.assert_array_equal(chain.n, tree.n)
    np.testing.assert_allclose(chain.G, tree.G, rtol=1e-12, atol=1e-13 * np.abs(G).max())


def test_threaded_and_distributed_runs_agree():
    distributed = pytest.importorskip("distributed")
    from dkrr.linalg._memory import threads_per_worker

    X, y = _data(n=400)
    fmap = _fmap(4, 16)
    with dask.config.set(scheduler="threads", num_workers=2):
        assert default_n_chains() == 2 == threads_per_worker()
        threaded = _pass(X, y, fmap)
    with distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        assert default_n_chains() == 2 and threads_per_worker() == 1  # 2 workers x 1 thread
        dist = _pass(X, y, fmap)
    np.testing.assert_array_equal(dist.G, threaded.G)  # same chains, same order of sums
    G, _ = _reference(X, y, fmap)
    np.testing.assert_allclose(dist.G, G, rtol=1e-12, atol=1e-12 * np.abs(G).max())


def _collect(x, row_offset, block_index):
    return [(block_index, row_offset, x.shape[0])]


def _concat(parts):
    return [item for p in parts for item in p]


def _collect_rows(x, row_offset, block_index):
    return [(block_index, row_offset, [int(v) for v in x[:, 0]])]


@pytest.mark.parametrize("n_chains", [1, 2, 4, 7])
def test_order_of_the_rows_is_kept(n_chains):
    """A non-commutative combine sees the rows in order (chains are contiguous; a block
    split between two chains comes as its pieces, in order), each step the rows of its
    block it was given (a delivered block sliced right)."""
    n, b = 230_000, 30_000  # 8 blocks; every cut of 2, 4 or 7 chains falls inside one, away from its edges
    x = da.from_array(np.repeat(np.arange(float(n))[:, None], 2, axis=1), chunks=(b, 2))
    out = reduce_row_blocks([x], _collect_rows, _concat, n_chains=n_chains, split_every=2)
    assert [r for _, _, rows in out for r in rows] == list(range(n))
    for i, offset, rows in out:
        assert rows[0] == offset and b * i <= offset and offset + len(rows) <= min(n, b * i + b)
    assert len(out) == sum(len(c) for c in chain_steps(x.chunks[0], n_chains)) and (len(out) > 8) == (n_chains > 1)


K = SPLIT_MIN_ROWS


@pytest.mark.parametrize("chunks, n_chains", [
    ((65536,) * 30 + (33920,), 2), ((3 * K,) * 7 + (2 * K,), 4), ((10 * K,) * 3, 2), ((100 * K, K, K, K), 2),
    ((100 * K, K, K, K), 3), ((1000 * K,) + (K,) * 9, 9), ((5 * K,) * 4, 4), ((5 * K,) * 4, 9),
    ((7 * K,) * 5, 3), ((K,) * 9, 4), ((3,) * 7 + (2,), 4), ((100, 1, 1, 1), 2),
])
def test_chains_cut_the_rows_evenly_and_split_blocks_only_away_from_their_edges(chunks, n_chains):
    """chain_steps: the steps cover the rows once, in order; a cut inside a block lies at
    least SPLIT_MIN_FRACTION of the block and SPLIT_MIN_ROWS from its edges (small blocks
    are never split); n_chains chains get rows within that of n / C; n_chains at least the
    blocks: one block per chain."""
    chains = chain_steps(chunks, n_chains)
    starts = np.concatenate([[0], np.cumsum(chunks)])
    at = 0
    for chain in chains:
        assert chain
        for i, skip, rows in chain:
            assert starts[i] + skip == at and rows > 0 and skip + rows <= chunks[i]
            at += rows
        i, skip, rows = chain[-1]
        a = skip + rows  # the cut after this chain, within block i
        if 0 < a < chunks[i]:
            assert min(a, chunks[i] - a) >= max(SPLIT_MIN_ROWS, SPLIT_MIN_FRACTION * chunks[i])
    assert at == starts[-1]
    if n_chains >= len(chunks):
        assert chains == [[(i, 0, r)] for i, r in enumerate(chunks)]
    else:  # each cut moved at most SPLIT_MIN_FRACTION of its block (cuts that meet drop a chain)
        assert len(chains) <= n_chains
        if len(chains) == n_chains:
            for chain in chains:
                rows = sum(r for *_, r in chain)
                moved = max(SPLIT_MIN_ROWS, SPLIT_MIN_FRACTION * max(chunks), max(chunks) / 2 if max(chunks) < 2 * K else 0)
                assert abs(rows - starts[-1] / n_chains) <= 2 * moved + 1
    if chunks == (65536,) * 30 + (33920,):  # the 2M-row fit: 16 blocks against 15 before
        assert [sum(r for *_, r in c) for c in chains] == [1_000_000, 1_000_000]


def test_fused_step_adds_in_place_into_its_own_object_only():
    X, y = _data(n=80)
    fmap = _fmap(4, 8)
    args = (fmap, 2, 11, 1 << 20, False)
    acc = block_statistics(X[:40], y[:40], 0, 0, *args)
    assert acc.packed  # the running sums of a pass keep G packed
    before = acc.map_parts(np.copy)
    out = _chain_step(block_statistics, combine_statistics, acc, X[40:], y[40:], 40, 1, *args)
    for k in RidgeStatistics.PARTS:  # the received running sum is unchanged
        a, b = getattr(acc, k), getattr(before, k)
        assert (a is None and b is None) or np.array_equal(a, b)
    whole = block_statistics(X, y, 0, 0, *args)
    np.testing.assert_allclose(out.G, whole.G, rtol=1e-12)
    np.testing.assert_array_equal(out.n, whole.n)
    # tuples of statistics (the gamma grid, the weighted pass) are summed element-wise
    pair = (block_statistics(X[40:], y[40:], 40, 1, *args), block_statistics(X[40:], y[40:], 40, 1, *args))
    got = _accumulate_into(pair, (acc, acc), None)
    assert got is pair and np.allclose(got[1].G, whole.G, rtol=1e-12)


def test_statistics_with_different_labels_go_through_the_combine():
    X = np.random.default_rng(0).standard_normal((60, 3))
    labels = np.array(["a", "b", "c"])[np.arange(60) % 3]
    fmap = _fmap(3, 8)
    args = (fmap, 1, 0, 1 << 20, True)
    acc = block_statistics(X[:30], np.where(labels[:30] == "c", "a", labels[:30]), 0, 0, *args)
    part = block_statistics(X[30:], labels[30:], 30, 1, *args)
    out = _accumulate_into(part, acc, combine_statistics)
    assert out is not part and list(out.labels) == ["a", "b", "c"]
    np.testing.assert_array_equal(out.ysum[0], [10 + 10 + 10, 10 + 10, 10])


def test_keys_name_the_chains_and_bad_n_chains_is_refused():
    x = da.from_array(np.arange(40.0).reshape(20, 2), chunks=(5, 2))

    def key(n):
        return reduce_row_blocks([x], _collect, _concat, compute=False, n_chains=n).key

    assert key(2) == key(2) and key(2) != key(3)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InvalidParameterError, match="n_chains must be a positive integer"):
            reduce_row_blocks([x], _collect, _concat, n_chains=bad)


def test_a_retried_chain_reads_an_unchanged_running_sum():
    """Computing the graph twice from the same (persisted) upstream gives the same sums:
    no task changed an object the scheduler held."""
    X, y = _data(n=200)
    fmap = _fmap(4, 8)
    Xd, yd = as_row_chunked(X, y, chunk_rows=25)
    Xp, yp = dask.persist(Xd, yd, scheduler="threads")
    first = reduce_row_blocks([Xp, yp], block_statistics, combine_statistics, n_chains=2,
                              constants=(fmap, 1, 0, 1 << 20, False), compute=False)
    a, b = dask.compute(first, first, scheduler="sync")
    np.testing.assert_array_equal(a.G, b.G)
    c = dask.compute(first, scheduler="threads")[0]
    np.testing.assert_array_equal(a.G, c.G)


# -- memory --------------------------------------------------------------------------------
def _traced_peak(fn):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        out = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    del out
    return peak


@pytest.mark.parametrize("threads", [1, 2])
def test_traced_memory_of_a_ridge_pass_is_predicted_by_the_per_worker_formula(threads):
    """p = 1024, K = 5: a packed statistics object S is 23.6 MB (full Grams: S_full = 42
    MB), the data 0.1 MB. With C = threads chains the traced peak of the pass is the
    per-worker estimate within 10% (measured 2.40 S and 4.78 S against 2.43 S and 4.86 S):
    two packed objects, the 8 MiB work buffer of the Gram and the feature buffer per
    thread, 1.35 S_full, where two full objects alone were 2 S_full. The plain tree
    (fan-in 8 over 16 blocks) holds more than twice as much (10 S)."""
    d, D, n, rows, K = 4, 512, 1024, 64, 5
    X, y = _data(n=n, d=d)
    fmap = _fmap(d, D)
    Xd, yd = as_row_chunked(X, y[:, :1], chunk_rows=rows)
    S, S_full = statistics_bytes(2 * D, 1, K), statistics_bytes(2 * D, 1, K, packed=False)
    sched = "sync" if threads == 1 else "threads"

    def run(n_chains):
        with dask.config.set(scheduler=sched, num_workers=threads):
            return reduce_row_blocks([Xd, yd], block_statistics, combine_statistics, n_chains=n_chains,
                                     constants=(fmap, K, 0, 1 << 22, False))

    est = ridge_memory_estimate(kernel="gaussian", method="rff", n_features_in=d, n_components=D,
                                n_folds=K, block_rows=rows, n_blocks=n // rows, n_chains=threads,
                                threads=threads, max_block_bytes=1 << 22)
    run(threads), run(10**6)  # imports and caches of a first run are not the reduction's
    chain = _traced_peak(lambda: run(threads))
    tree = _traced_peak(lambda: run(10**6))
    assert 0.9 * est.worker <= chain <= est.worker, (chain / S, est.worker / S)
    assert chain < threads * 1.5 * S_full, chain / S_full
    assert S < 0.6 * S_full
    assert tree > 2 * chain, (tree / S, chain / S)


def test_worker_estimate_counts_only_the_steps_that_can_run_at_once():
    """64 threads but 8 blocks: at most 8 chain steps (one block each, no running sum to
    receive) run at once, then one combine of the 8 sums."""
    kw = dict(kernel="gaussian", method="rff", n_features_in=4, n_components=256, n_folds=5,
              block_rows=64, n_blocks=8)
    S = statistics_bytes(512, 1, 5)
    wide = ridge_memory_estimate(n_chains=64, threads=64, **kw)
    assert wide.threads == 8 and wide.tree_tasks == 1
    step = wide.block_task - wide.feature_map
    work = 8 * work_length(512)  # the packed Gram's products: p x p at p <= 1024
    assert S + work < step < S + work + 2 * 2**20  # one statistics object, the work and buffers
    assert wide.worker == max(8 * step + wide.feature_map, 9 * S + 2**20)
    long = ridge_memory_estimate(n_chains=2, threads=2, **{**kw, "n_blocks": 16})
    assert 2 * S + work < long.block_task - long.feature_map < 2 * S + work + 2 * 2**20  # received sum + its own


# --------------------------------------------------------------------------- small chunks
def test_many_small_dask_chunks_are_merged_at_old_boundaries():
    """More than MERGE_ABOVE_BLOCKS row chunks of fewer than MIN_BLOCK_ROWS rows on average
    are joined, consecutive ones, into blocks of at least MIN_BLOCK_ROWS rows (wide X: at
    most CHUNK_BYTES); every new boundary is an old one; fewer or larger chunks are kept."""
    from dkrr.linalg._blocks import CHUNK_BYTES, MERGE_ABOVE_BLOCKS, MIN_BLOCK_ROWS, merged_row_chunks

    many = (100,) * (MERGE_ABOVE_BLOCKS + 1)
    merged = merged_row_chunks(many, 4)
    assert sum(merged) == sum(many) and min(merged) >= MIN_BLOCK_ROWS
    assert set(np.cumsum(merged)) <= set(np.cumsum(many))
    assert merged == (4100,) * 24 + (sum(many) - 4100 * 24,)  # the remainder joins the last block
    assert merged_row_chunks((100,) * MERGE_ABOVE_BLOCKS, 4) is None  # few enough: kept
    assert merged_row_chunks((MIN_BLOCK_ROWS,) * 2000, 4) is None  # not small
    wide = merged_row_chunks((10,) * 2000, 100_000)  # 10 rows of 100,000 float64 are 8 MB
    assert wide == (40,) * 500 and 40 * 100_000 * 8 <= CHUNK_BYTES < 50 * 100_000 * 8
    irregular = (1,) * 1500 + (9000,) + (3,) * 500
    out = merged_row_chunks(irregular, 2)
    assert set(np.cumsum(out)) <= set(np.cumsum(irregular)) and sum(out) == sum(irregular)


def test_a_stores_small_chunks_are_merged_to_a_few_megabytes():
    """A Zarr store's rows are read by slice, so more than MERGE_ABOVE_READER_BLOCKS of its
    chunks holding under an eighth of READER_BLOCK_BYTES are joined into blocks of that
    much: 1,000-row chunks of 8 float32 columns (a fit 3.7x slower, READER_BLOCK_BYTES'
    note) are; the 65,536-row chunks of ``dkrr ingest``, few chunks, or chunks of 256 KiB
    and more are kept."""
    from dkrr.linalg._blocks import MERGE_ABOVE_READER_BLOCKS, READER_BLOCK_BYTES, merged_row_chunks

    small = (1000,) * 1000
    merged = merged_row_chunks(small, 8, 4, reader=True)
    assert set(np.cumsum(merged)) <= set(np.cumsum(small)) and sum(merged) == sum(small)
    assert min(merged) * 8 * 4 >= READER_BLOCK_BYTES and len(merged) == 15
    assert merged_row_chunks(small, 8, 4) is None  # dask input: 1,000 chunks are kept
    assert merged_row_chunks((65536,) * 100, 8, 4, reader=True) is None  # ingest's chunks
    assert merged_row_chunks((100,) * MERGE_ABOVE_READER_BLOCKS, 8, 4, reader=True) is None  # few
    assert merged_row_chunks((8192,) * 1000, 8, 4, reader=True) is None  # 256 KiB each
    fewer = merged_row_chunks((500,) * 200, 4, 8, reader=True)  # 100,000 rows: MIN_BLOCKS blocks, not 1
    assert len(fewer) == 8 and set(np.cumsum(fewer)) <= set(np.cumsum((500,) * 200))


def test_a_fit_on_many_small_chunks_runs_on_the_merged_blocks():
    """``as_row_chunked`` (the fit's input step) gives X and y the merged chunks, and the
    fit equals, to the bit, the fit of the same data chunked that way by the user (and
    numpy's to rounding): the small chunks' per-task cost is gone, the result is the same."""
    from dkrr import RandomFeatureRidge
    from dkrr.linalg._blocks import merged_row_chunks

    rng = np.random.default_rng(3)
    n = 12_100
    X = rng.standard_normal((n, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    Xd, yd = da.from_array(X, chunks=(10, 3)), da.from_array(y, chunks=10)
    merged = merged_row_chunks(Xd.chunks[0], 3)
    assert merged is not None and len(merged) == 2
    Xm, ym = as_row_chunked(Xd, yd)
    assert Xm.chunks[0] == ym.chunks[0] == merged
    params = dict(n_components=32, gamma=0.3, alpha=0.1, random_state=0, precision="float64")
    with dask.config.set(scheduler="threads"):
        small = RandomFeatureRidge(**params).fit(Xd, yd)
        user = RandomFeatureRidge(**params).fit(Xd.rechunk({0: merged}), yd.rechunk(merged))
    ref = RandomFeatureRidge(**params).fit(X, y)
    np.testing.assert_array_equal(small.coef_, user.coef_)
    np.testing.assert_allclose(small.coef_, ref.coef_, rtol=1e-9, atol=1e-11)
