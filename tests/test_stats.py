"""Streamed sufficient statistics: equal to dense numpy sums, independent of chunking."""

import dask.array as da
import numpy as np
import pytest
import zarr

from dkrr.errors import InputValidationError, NonFiniteInputError
from dkrr.features import build_random_feature_map
from dkrr.linalg import (
    as_row_chunked,
    default_chunk_rows,
    fold_ids,
    reduce_row_blocks,
    streamed_statistics,
)

N, D_IN = 500, 4


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D_IN))
    Y = np.column_stack([np.sin(X[:, 0]) + 3.0, X[:, 1] ** 2])
    return X, Y


@pytest.fixture(scope="module")
def fmap():
    return build_random_feature_map(kernel="gaussian", method="rff", n_components=12, gamma=0.4,
                                    n_features_in=D_IN, random_state=0, options={})


def dense_stats(Z, Y, folds, K):
    out = {k: [] for k in ("G", "c", "zsum", "n", "ysum", "yy")}
    for k in range(K):
        Zk, Yk = Z[folds == k], Y[folds == k]
        out["G"].append(Zk.T @ Zk)
        out["c"].append(Zk.T @ Yk)
        out["zsum"].append(Zk.sum(0))
        out["n"].append(len(Zk))
        out["ysum"].append(Yk.sum(0))
        out["yy"].append((Yk**2).sum(0))
    return {k: np.array(v) for k, v in out.items()}


def assert_stats_close(s, ref, rtol=1e-12):
    for name in ("G", "c", "zsum", "ysum", "yy"):
        a, b = getattr(s, name), ref[name]
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max(), err_msg=name)
    np.testing.assert_array_equal(s.n, ref["n"])


def test_fold_ids_are_seeded_balanced_and_in_range():
    rows = np.arange(30000)
    f = fold_ids(rows, 5, 123)
    assert f.dtype == np.int64 and f.min() == 0 and f.max() == 4
    np.testing.assert_array_equal(f, fold_ids(rows, 5, 123))
    np.testing.assert_array_equal(f[1000:2000], fold_ids(rows[1000:2000], 5, 123))  # by index only
    counts = np.bincount(f, minlength=5)
    assert np.all(np.abs(counts - 6000) < 5 * np.sqrt(30000 * 0.2 * 0.8))
    assert (f != fold_ids(rows, 5, 124)).mean() > 0.7  # another seed, another assignment
    # consecutive rows are not striped: fold changes look independent
    assert 0.7 < (f[1:] != f[:-1]).mean() < 0.9


@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("ydim", [1, 2])
def test_statistics_equal_dense_numpy(data, fmap, K, ydim):
    X, Y = data
    y = Y[:, 0] if ydim == 1 else Y
    Xd, yd = as_row_chunked(X, y, chunk_rows=128)
    s = streamed_statistics(Xd, yd, fmap, n_folds=K, fold_seed=7)
    folds = fold_ids(np.arange(N), K, 7) if K > 1 else np.zeros(N, int)
    ref = dense_stats(fmap.transform(X), y.reshape(N, -1), folds, K)
    assert s.G.shape == (K, 24, 24) and s.c.shape == (K, 24, ydim)
    assert_stats_close(s, ref)
    np.testing.assert_array_equal(s.G, s.G.transpose(0, 2, 1))  # exactly symmetric


CHUNKINGS = {
    "regular": 100,
    "irregular": (37, 200, 13, 150, 100),
    "single": N,
}


@pytest.mark.parametrize("chunks", list(CHUNKINGS), ids=list(CHUNKINGS))
@pytest.mark.parametrize("split_every", [None, 2])
def test_statistics_independent_of_chunking_and_scheduler(data, fmap, chunks, split_every, scheduler):
    X, Y = data
    Xd = da.from_array(X, chunks=(CHUNKINGS[chunks], D_IN))
    yd = da.from_array(Y, chunks=(50, 2))  # rechunked to X's rows
    Xd, yd = as_row_chunked(Xd, yd)
    s = streamed_statistics(Xd, yd, fmap, n_folds=4, fold_seed=1, split_every=split_every)
    ref = dense_stats(fmap.transform(X), Y, fold_ids(np.arange(N), 4, 1), 4)
    assert_stats_close(s, ref, rtol=1e-11)


def test_sub_blocks_give_the_same_statistics(data, fmap):
    X, Y = data
    Xd, yd = as_row_chunked(X, Y, chunk_rows=250)
    whole = streamed_statistics(Xd, yd, fmap, n_folds=3, fold_seed=2)
    tiny = streamed_statistics(Xd, yd, fmap, n_folds=3, fold_seed=2, max_block_bytes=24 * 8 * 7)  # 7 rows
    for name in ("G", "c", "zsum", "ysum", "yy"):
        np.testing.assert_allclose(getattr(tiny, name), getattr(whole, name), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(tiny.n, whole.n)


def test_float32_blocks_are_accumulated_in_float64(data, fmap):
    X, Y = data
    X32 = X.astype(np.float32)
    s = streamed_statistics(*as_row_chunked(X32, Y.astype(np.float32), chunk_rows=100), fmap)
    assert s.G.dtype == np.float64
    ref = dense_stats(fmap.transform(X32.astype(np.float64)), Y.astype(np.float32).astype(np.float64),
                      np.zeros(N, int), 1)
    assert_stats_close(s, ref)


def test_labels_mode_gives_plus_minus_statistics(data, fmap):
    X, _ = data
    labels = np.array(["cat", "dog", "eel"])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 1)]
    Xd, yd = as_row_chunked(X, labels, chunk_rows=90, y_kind="labels")
    s = streamed_statistics(Xd, yd, fmap, n_folds=2, fold_seed=3, labels_mode=True)
    assert s.labels.tolist() == ["cat", "dog", "eel"]
    pm = s.plus_minus_targets(s.labels)
    Ypm = np.where(labels[:, None] == s.labels[None, :], 1.0, -1.0)
    ref = dense_stats(fmap.transform(X), Ypm, fold_ids(np.arange(N), 2, 3), 2)
    assert_stats_close(pm, ref)


def test_labels_missing_from_some_blocks_are_merged(fmap):
    X = np.random.default_rng(1).standard_normal((60, D_IN))
    labels = np.array([0] * 20 + [1] * 20 + [2] * 20)  # each block of 20 holds one label
    s = streamed_statistics(*as_row_chunked(X, labels, chunk_rows=20, y_kind="labels"), fmap,
                            labels_mode=True, split_every=2)
    assert s.labels.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(s.ysum[0], [20, 20, 20])
    Z = fmap.transform(X)
    np.testing.assert_allclose(s.c[0][:, 1], Z[20:40].sum(0), rtol=1e-12)


@pytest.mark.parametrize("where", ["X", "y"])
def test_non_finite_values_name_count_and_block(data, fmap, where):
    X, Y = data
    X, y = X.copy(), Y[:, 0].copy()
    target = X if where == "X" else y
    target[[210, 230]] = np.nan
    target[260] = np.inf
    Xd, yd = as_row_chunked(X, y, chunk_rows=100)
    n_bad = 3 * D_IN if where == "X" else 3
    with pytest.raises(NonFiniteInputError, match=rf"{where} contains {n_bad} non-finite value\(s\) \(NaN or inf\) in rows 200 to 299 \(row block 2\), in 3 row\(s\), first in row 210"):
        streamed_statistics(Xd, yd, fmap)


def _snapshot(stats):
    return {k: (None if v is None else np.array(v, copy=True)) for k, v in vars(stats).items()}


def _assert_same(stats, snap):
    for k, v in snap.items():
        got = getattr(stats, k)
        if v is None:
            assert got is None, k
        else:
            assert got.dtype == v.dtype and got.shape == v.shape, k
            np.testing.assert_array_equal(got, v, err_msg=k)


def _label_blocks(fmap, **kw):
    """Three block statistics whose label sets differ (so combining must re-index them)."""
    from dkrr.linalg._stats import block_statistics

    rng = np.random.default_rng(5)
    X = rng.standard_normal((60, D_IN))
    y = np.array(["b"] * 20 + ["a"] * 10 + ["c"] * 10 + ["b"] * 20)
    return [block_statistics(X[i:i + 20], y[i:i + 20], i, i // 20, fmap, 2, 7, labels_mode=True, **kw)
            for i in (0, 20, 40)]


@pytest.mark.parametrize("parts_kw", [{}, {"with_gram": False, "with_norms": True, "with_squares": False}])
def test_combine_is_pure(fmap, parts_kw):
    """A retried or shared input must not be summed twice: combine returns new objects."""
    from dkrr.linalg import combine_statistics

    parts = _label_blocks(fmap, **parts_kw)
    snaps = [_snapshot(p) for p in parts]
    first = combine_statistics(parts)
    second = combine_statistics(parts)  # a retry of the same task
    for p, snap in zip(parts, snaps):
        _assert_same(p, snap)
    _assert_same(second, _snapshot(first))
    assert all(first is not p for p in parts)
    assert first.labels.tolist() == ["a", "b", "c"]
    np.testing.assert_array_equal(first.ysum.sum(0), [10, 40, 10])
    # a single part is copied too: later in-place work on the result leaves the input alone
    one = combine_statistics(parts[:1])
    assert one is not parts[0] and one.c is not parts[0].c
    # the tree of combines equals the flat sum
    tree = combine_statistics([combine_statistics(parts[:2]), parts[2]])
    _assert_same(tree, _snapshot(first))
    for p, snap in zip(parts, snaps):
        _assert_same(p, snap)


def test_plus_minus_targets_and_totals_leave_the_statistics_unchanged(fmap):
    from dkrr.linalg import combine_statistics

    s = _label_blocks(fmap)[0]  # only label "b": plus_minus_targets must re-index onto 3 classes
    snap = _snapshot(s)
    pm = s.plus_minus_targets(np.array(["a", "b", "c"]))
    _assert_same(s, snap)
    assert pm.c.shape[2] == 3
    s.total(), s.fold(1), s.symmetrized()
    _assert_same(s, snap)
    both = combine_statistics([s, s])  # the same object twice
    _assert_same(s, snap)
    np.testing.assert_array_equal(both.c, 2 * s.c)


def test_score_statistics_are_the_ridge_statistics(data, fmap):
    """One statistics type: the scoring pass gives the ridge pass's parts (and its norms)."""
    from dkrr.sampling import streamed_score_statistics

    X, Y = data
    Xd, yd = as_row_chunked(X, Y, chunk_rows=90)
    ridge = streamed_statistics(Xd, yd, fmap, n_folds=3, fold_seed=2, split_every=2)
    score = streamed_score_statistics(Xd, yd, fmap, n_folds=3, fold_seed=2, with_norms=True, with_gram=True,
                                      split_every=2)
    assert type(score) is type(ridge)
    for part in ("G", "c", "zsum", "n", "ysum"):
        np.testing.assert_allclose(getattr(score, part), getattr(ridge, part), rtol=1e-12, atol=1e-12)
    Z = fmap.transform(X)
    np.testing.assert_allclose(score.zsq.sum(0), (Z**2).sum(0), rtol=1e-12)


def test_transform_names_the_global_rows_of_a_non_finite_value():
    """The message of a lazy transform names the block and the global rows (README)."""
    from dkrr import RandomFeatures

    X = np.ones((20, 3))
    X[13, 0] = np.nan
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(np.ones((5, 3)))
    Z = rf.transform(da.from_array(X, chunks=(5, 3)))
    with pytest.raises(NonFiniteInputError, match=r"X contains 1 non-finite value\(s\) \(NaN or inf\) in rows "
                       r"10 to 14 \(row block 2\), in 1 row\(s\), first in row 13"):
        Z.compute(scheduler="threads")


def test_in_memory_check_names_the_rows():
    from dkrr import RandomFeatures

    X = np.ones((9, 3))
    X[[4, 7], 1] = np.inf
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(np.ones((5, 3)))
    with pytest.raises(NonFiniteInputError, match=r"X contains 2 non-finite value\(s\) \(NaN or inf\) in 2 "
                       r"row\(s\), first in row 4"):
        rf.transform(X)


def test_length_mismatch_names_both_lengths(data):
    X, Y = data
    with pytest.raises(InputValidationError, match=r"X has 500 .* y has 499"):
        as_row_chunked(X, Y[:-1])
    with pytest.raises(InputValidationError, match=r"X has 500 .* y has 499"):
        as_row_chunked(da.from_array(X), da.from_array(Y[:-1, 0]))


def test_zarr_input_and_y_rechunked_to_x(tmp_path, data, fmap):
    X, Y = data
    zX = zarr.create_array(str(tmp_path / "X.zarr"), shape=X.shape, chunks=(120, D_IN), dtype="f8")
    zX[:] = X
    Xd, yd = as_row_chunked(zX, Y[:, 1])
    assert Xd.chunks[0] == (120, 120, 120, 120, 20) and yd.chunks == (Xd.chunks[0],)
    s = streamed_statistics(Xd, yd, fmap)
    ref = dense_stats(fmap.transform(X), Y[:, 1:], np.zeros(N, int), 1)
    assert_stats_close(s, ref)


def test_default_chunk_rows_budget():
    assert default_chunk_rows(100, 5) == 100  # small data: one block
    assert default_chunk_rows(80_000, 9) == 10_000  # 8 equal blocks
    assert default_chunk_rows(10_000, 8) == 5_000  # no block under 4,096 rows: 2 equal blocks
    assert default_chunk_rows(4_000, 8) == 4_000
    assert default_chunk_rows(10_000_000, 512) == 32 * 2**20 // (512 * 8)  # byte budget


def _collect(X, offset, index):
    return [(offset, index, X.shape[0], float(X[:, 0].sum()))]


def _concat(parts):
    return [item for part in parts for item in part]


@pytest.mark.parametrize("split_every", [2, 3, 8])
def test_reduce_row_blocks_is_generic(split_every):
    X = np.arange(46.0).reshape(23, 2)
    Xd = da.from_array(X, chunks=((5, 1, 7, 10), 2))
    out = reduce_row_blocks([Xd], _collect, _concat, split_every=split_every)
    assert sorted(out) == [(0, 0, 5, X[:5, 0].sum()), (5, 1, 1, X[5, 0]), (6, 2, 7, X[6:13, 0].sum()),
                           (13, 3, 10, X[13:, 0].sum())]
    with pytest.raises(ValueError, match="split_every"):
        reduce_row_blocks([Xd], _collect, _concat, split_every=1)


def _blas_threads(X, offset, index):
    from threadpoolctl import threadpool_info

    return [max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")]


@pytest.mark.parametrize("n_blocks", [1, 2, 16])
def test_threaded_scheduler_spreads_blas_threads_over_the_blocks(n_blocks):
    """Without a Client, each block task gets cores // blocks BLAS threads (at least 1)."""
    from dask.system import CPU_COUNT

    pytest.importorskip("threadpoolctl")
    X = da.zeros((16 * n_blocks, 2), chunks=(16, 2))
    out = reduce_row_blocks([X], _blas_threads, _concat, split_every=4)
    assert out == [max(1, CPU_COUNT // n_blocks)] * n_blocks
