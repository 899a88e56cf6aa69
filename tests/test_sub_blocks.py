"""The one sub-block engine (``dkrr.linalg._stats.feature_sub_blocks``): every pass and
predict take their features from it, a sub-block at a time."""

import numpy as np
import pytest

from dkrr.features import build_random_feature_map
from dkrr.linalg._stats import feature_sub_blocks, fold_feature_blocks, prepare_block


def _map(d=3, D=8):
    return build_random_feature_map(kernel="gaussian", method="rff", n_components=D, gamma=0.5,
                                    n_features_in=d, random_state=0, options={})


@pytest.mark.parametrize("budget", [8 * 16, 8 * 16 * 7, 2**20])  # 1 row, 7 rows, all rows per sub-block
def test_sub_blocks_cover_the_rows_with_the_features_of_the_whole_block(budget):
    X = np.random.default_rng(0).standard_normal((50, 3))
    fmap = _map()
    Z = fmap.transform(X)
    seen, buffers = [], set()
    for start, stop, Zs in feature_sub_blocks(X, fmap, budget):
        assert Zs.shape == (stop - start, 16) and stop - start <= max(1, budget // (8 * 16))
        np.testing.assert_allclose(Zs, Z[start:stop], rtol=1e-13, atol=1e-15)  # BLAS may round per row count
        seen.append((start, stop))
        buffers.add(Zs.base.__array_interface__["data"][0] if Zs.base is not None else id(Zs))
    assert [s for s, _ in seen] == list(range(0, 50, seen[0][1])) and seen[-1][1] == 50
    assert len(buffers) == 1  # one reused buffer


def test_sub_blocks_cast_and_scale_rows():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 3))
    fmap = _map()
    w = rng.uniform(0, 2, 40)
    # float32 input and precision: features in float32, equal to the map of the float32 rows
    for start, stop, Zs in feature_sub_blocks(X.astype(np.float32)[:, :], fmap, 8 * 16 * 9, "float32"):
        assert Zs.dtype == np.float32
        np.testing.assert_allclose(Zs, fmap.transform(X[start:stop].astype(np.float32)), rtol=1e-6, atol=1e-7)
    # non-contiguous float32 rows read as float64; sqrt(w) scaling gives the weighted Gram
    Xnc = np.asfortranarray(X.astype(np.float32))
    G = sum(Zs.T @ Zs for _, _, Zs in feature_sub_blocks(Xnc, fmap, 8 * 16 * 9, row_scale=np.sqrt(w)))
    Z = fmap.transform(X.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(G, (Z * w[:, None]).T @ Z, rtol=1e-12, atol=1e-12)


def test_fold_feature_blocks_cut_the_engine_at_fold_boundaries():
    X = np.random.default_rng(2).standard_normal((60, 3))
    fmap = _map()
    Xf, Y, bounds, _ = prepare_block(X, X[:, 0], 0, 0, 3, 5, False)
    Z = fmap.transform(Xf)
    got = {k: [] for k in range(3)}
    for k, Zk, Yk in fold_feature_blocks(Xf, Y, bounds, fmap, 8 * 16 * 7):
        got[k].append(Zk.copy())
    for k in range(3):
        np.testing.assert_allclose(np.vstack(got[k]), Z[bounds[k]:bounds[k + 1]], rtol=1e-13, atol=1e-15)


def test_fold_sub_blocks_are_full_within_each_fold_and_use_one_buffer():
    """Sub-blocks do not cross a fold boundary, and each fold's rows are cut into full
    sub-blocks from its own start (before, sub-blocks cut at the boundaries left pieces:
    a float32 Gram of fewer rows is slower per row); empty folds are skipped."""
    X = np.random.default_rng(3).standard_normal((60, 3))
    fmap = _map()
    bounds = np.array([0, 0, 17, 17, 45, 60])  # folds 0 and 2 empty
    sizes, buffers = {k: [] for k in range(5)}, set()
    for start, stop, Zs in feature_sub_blocks(X, fmap, 8 * 16 * 7, bounds=bounds):  # 7 rows per sub-block
        k = int(np.searchsorted(bounds, start, side="right")) - 1
        assert bounds[k] <= start < stop <= bounds[k + 1]
        sizes[k].append(stop - start)
        buffers.add(Zs.__array_interface__["data"][0])
    assert sizes == {0: [], 1: [7, 7, 3], 2: [], 3: [7, 7, 7, 7], 4: [7, 7, 1]}
    assert len(buffers) == 1
    Y = X[:, :1]
    got = [(k, Yk[:, 0].copy()) for k, _, Yk in fold_feature_blocks(X, Y, bounds, fmap, 8 * 16 * 7)]
    assert [k for k, _ in got] == [1, 1, 1, 3, 3, 3, 3, 4, 4, 4]
    np.testing.assert_array_equal(np.concatenate([y for _, y in got]), X[:, 0])


@pytest.mark.parametrize("method", ["rff", "orf", "sorf"])
def test_sub_blocks_reuse_one_projection_buffer_with_the_same_features(method):
    """Every sub-block's projection is written into one buffer allocated per call (in dask
    workers, whose allocator returns freed memory at once, a fresh array per sub-block cost
    its page faults each time), and the features are those of a fresh projection."""
    from dkrr.features import RandomFeatureMap

    X = np.random.default_rng(2).standard_normal((70, 4))
    fmap = build_random_feature_map(kernel="gaussian", method=method, n_components=8, gamma=0.5,
                                    n_features_in=4, random_state=0, options={})
    assert isinstance(fmap, RandomFeatureMap) and fmap.projection_columns == 8
    works = []

    class Recording(type(fmap)):
        def transform(self, X, out=None, work=None):
            works.append(work)
            return super().transform(X, out=out, work=work)

    rec = Recording(**{f.name: getattr(fmap, f.name) for f in __import__("dataclasses").fields(fmap)})
    whole = fmap.transform(X)
    for precision, rtol in (("float64", 1e-13), ("float32", 1e-6)):
        works.clear()
        for start, stop, Zs in feature_sub_blocks(X, rec, 8 * 16 * 9, precision):
            np.testing.assert_allclose(Zs, whole[start:stop], rtol=rtol, atol=rtol)
            assert Zs.dtype == np.dtype(precision)
        assert len(works) > 2 and all(w is not None and w.dtype == np.dtype(precision) for w in works)
        assert len({w.__array_interface__["data"][0] for w in works}) == 1  # one buffer, reused
    # the dense projections (SORF's on its dense path) write into the buffer they are given
    P = np.empty((70, 8))
    dense = {"path": "dense"} if method == "sorf" else {}
    assert fmap.projection.project(X, out=P, **dense) is P
    np.testing.assert_array_equal(fmap.transform(X, work=np.empty((70, 8))), whole)
