"""RandomFeatures: dense ground truth, dtypes, dask equivalence and input validation."""

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.base import clone

from dkrr import RandomFeatures
from dkrr.errors import (
    ChunkingError,
    FeatureMismatchError,
    InputValidationError,
    InvalidParameterError,
    NonFiniteInputError,
)
from dkrr.features import PROJECTIONS

METHODS = sorted(PROJECTIONS)


@pytest.fixture(scope="module")
def local_client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
        yield client
KERNELS = ["gaussian", "angular", "arccos0", "arccos1"]


def dense_features(kernel, X, W):
    """The map f(X W^T) with ALGORITHMS.md section 1's scales, in float64."""
    P = X.astype(np.float64) @ W.T
    D = W.shape[0]
    if kernel == "gaussian":
        return np.hstack([np.cos(P), np.sin(P)]) / np.sqrt(D)
    if kernel == "angular":
        return np.sign(P) / np.sqrt(D)
    if kernel == "arccos0":
        return np.sqrt(2.0 / D) * (P > 0)
    return np.sqrt(2.0 / D) * np.maximum(P, 0)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("d,D", [(1, 3), (5, 7), (8, 8), (17, 40), (64, 33)])
def test_transform_equals_dense_map(method, d, D):
    X = np.random.default_rng(d * 100 + D).standard_normal((23, d))
    rf = RandomFeatures(method=method, n_components=D, gamma=0.3, random_state=0).fit(X)
    W = rf.projection_matrix()
    assert W.shape == (D, d) and W.dtype == np.float64
    assert rf.n_output_features_ == 2 * D
    np.testing.assert_allclose(rf.transform(X), dense_features("gaussian", X, W), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("method", ["rff", "sorf", "circulant"])
def test_each_kernel_nonlinearity(kernel, method):
    X = np.random.default_rng(1).standard_normal((31, 6))
    rf = RandomFeatures(kernel=kernel, method=method, n_components=10, random_state=4).fit(X)
    Z = rf.transform(X)
    expected = dense_features(kernel, X, rf.projection_matrix())
    # sign/step are discontinuous at 0: compare away from the boundary
    P = X @ rf.projection_matrix().T
    keep = np.abs(P).min(axis=1) > 1e-9
    np.testing.assert_allclose(Z[keep], expected[keep], rtol=1e-9, atol=1e-11)
    assert rf.n_output_features_ == (20 if kernel == "gaussian" else 10)


@pytest.mark.parametrize("method", METHODS)
def test_float32_in_float32_out(method):
    X = np.random.default_rng(2).standard_normal((40, 12))
    rf = RandomFeatures(method=method, n_components=24, gamma=0.2, random_state=1).fit(X)
    Z64 = rf.transform(X)
    Z32 = rf.transform(X.astype(np.float32))
    assert Z64.dtype == np.float64 and Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z64, atol=2e-5)


@pytest.mark.parametrize("method", METHODS)
def test_same_seed_same_map_different_seed_different_map(method):
    X = np.ones((2, 9))
    a = RandomFeatures(method=method, n_components=20, random_state=5).fit(X).projection_matrix()
    b = RandomFeatures(method=method, n_components=20, random_state=5).fit(X).projection_matrix()
    c = RandomFeatures(method=method, n_components=20, random_state=6).fit(X).projection_matrix()
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


CHUNKINGS = [(50, -1), ((13, 40, 7, 20), -1), (80, -1)]


@pytest.mark.parametrize("chunks", CHUNKINGS)
@pytest.mark.parametrize("method", ["rff", "sorf", "fastfood", "toeplitz"])
def test_dask_equals_numpy_threaded(method, chunks):
    X = np.random.default_rng(3).standard_normal((80, 10))
    rf = RandomFeatures(method=method, n_components=16, random_state=0).fit(X)
    Xd = da.from_array(X, chunks=chunks)
    Zd = rf.transform(Xd)
    assert isinstance(Zd, da.Array)
    assert Zd.chunks[0] == Xd.chunks[0] and Zd.shape == (80, 32)
    with dask.config.set(scheduler="threads"):
        np.testing.assert_allclose(Zd.compute(), rf.transform(X), rtol=1e-12, atol=1e-14)


@pytest.mark.classic_dask_array("map_blocks' low-level graph and its task names")
def test_dask_graph_embeds_map_once():
    X = da.ones((100, 8), chunks=(10, 8))
    rf = RandomFeatures(method="sorf", n_components=16, random_state=0).fit(X)
    # dask < 2024.12 keeps map_blocks's block_info as a small task per block: not a copy
    graph = {k: v for k, v in dict(rf.transform(X).__dask_graph__()).items()
             if not str(k[0] if isinstance(k, tuple) else k).startswith("block-info-")}
    feature_tasks = [k for k in graph if isinstance(k, tuple) and str(k[0]).startswith("dkrr-features")]
    assert len(feature_tasks) == 10
    # one task per block plus one key holding the map, no other per-block copies
    assert len(graph) == 10 + 10 + 1


def test_dask_equals_numpy_on_local_cluster(local_client):
    X = np.random.default_rng(4).standard_normal((120, 20))
    rf = RandomFeatures(method="sorf", n_components=40, random_state=2).fit(X)
    Zd = rf.transform(da.from_array(X, chunks=(37, 20)))
    np.testing.assert_allclose(local_client.compute(Zd).result(), rf.transform(X), rtol=1e-12, atol=1e-14)


def test_zarr_input_is_lazy(tmp_path):
    import zarr

    X = np.random.default_rng(5).standard_normal((30, 4))
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(8, 4), dtype="f8")
    z[:] = X
    rf = RandomFeatures(method="rff", n_components=5, random_state=0).fit(X)
    Zd = rf.transform(z)
    assert isinstance(Zd, da.Array)
    np.testing.assert_allclose(Zd.compute(), rf.transform(X), rtol=1e-12)


# --- input validation -------------------------------------------------------------------

def test_wrong_number_of_columns():
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(np.ones((3, 5)))
    with pytest.raises(FeatureMismatchError, match="4 columns but the model was fitted with 5"):
        rf.transform(np.ones((3, 4)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_numpy(bad):
    X = np.ones((6, 3))
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    X[4, 1] = bad
    with pytest.raises(NonFiniteInputError, match="1 non-finite value.*row 4"):
        rf.transform(X)
    with pytest.raises(NonFiniteInputError, match="1 non-finite value.*row 4"):
        RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)  # as scikit-learn


def test_non_finite_dask_names_block():
    X = np.ones((20, 3))
    X[13, 0] = np.nan
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(da.from_array(X, chunks=(5, 3)))
    Z = rf.transform(da.from_array(X, chunks=(5, 3)))  # lazy: no error yet
    with pytest.raises(NonFiniteInputError, match="row block 2"):
        Z.compute(scheduler="threads")


@pytest.mark.parametrize(
    "X,match",
    [
        (np.ones(5), "2-dimensional.*reshape"),
        (np.ones((0, 3)), "empty"),
        (np.array([["a", "b"]]), "dtype"),
        (np.ones((2, 2), dtype=complex), "dtype"),
        ("not an array", "numpy array"),
    ],
)
def test_bad_arrays(X, match):
    with pytest.raises(InputValidationError, match=match):
        RandomFeatures(method="rff").fit(X)


def test_integer_input_becomes_float64():
    X = np.arange(12).reshape(4, 3)
    rf = RandomFeatures(method="rff", n_components=4, random_state=0).fit(X)
    assert rf.transform(X).dtype == np.float64


def test_column_chunked_dask_is_refused_with_fix():
    X = da.ones((10, 6), chunks=(5, 3))
    with pytest.raises(ChunkingError, match=r"rechunk\(\{1: -1\}\)"):
        RandomFeatures(method="rff").fit(X)


@pytest.mark.parametrize(
    "params,match",
    [
        ({"kernel": "laplace"}, "kernel must be one of"),
        ({"method": "magic"}, "method must be one of"),
        ({"n_components": 0}, "n_components must be a positive integer"),
        ({"n_components": 2.5}, "n_components must be a positive integer"),
        ({"gamma": -1.0}, "gamma must be a positive"),
        ({"gamma": np.nan}, "gamma must be a positive"),
        ({"kernel": "angular", "gamma": 2.0}, r"gamma applies only to the kernels \['gaussian'"),
        ({"method": "rff", "n_hd_blocks": 2}, "n_hd_blocks=2 does not apply to method='rff'.*sorf"),
        ({"method": "sorf", "displacement_rank": 2}, "displacement_rank=2 does not apply"),
        ({"random_state": "seed"}, "random_state must be"),
    ],
)
def test_invalid_parameters(params, match):
    with pytest.raises(InvalidParameterError, match=match):
        RandomFeatures(**params).fit(np.ones((3, 4)))


def test_clone_and_params():
    rf = RandomFeatures(method="orf", n_components=12, gamma=0.1, random_state=3)
    c = clone(rf)
    assert c.get_params() == rf.get_params()
    assert not hasattr(c, "feature_map_")


def test_not_fitted():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        RandomFeatures().transform(np.ones((2, 2)))
