"""dkrr.bandwidth: the 50-NN rule of thumb and scikit-learn's "scale" gamma."""

import doctest

import dask.array as da
import numpy as np
import pytest
import zarr

from dkrr import bandwidth
from dkrr.bandwidth import knn_gamma, knn_sigma, scale_gamma
from dkrr.errors import InputValidationError, InvalidParameterError, NonFiniteInputError


def brute_force_sigma(X, k, n_points, seed):
    """Mean k-th neighbour distance by explicit differences, over the documented sample."""
    X = np.asarray(X, dtype=np.float64)
    idx = np.random.default_rng(seed).choice(len(X), size=min(n_points, len(X)), replace=False)
    S = X[idx]
    dist = np.sqrt(((S[:, None, :] - S[None, :, :]) ** 2).sum(axis=-1))
    kth = []
    for i in range(len(S)):
        others = np.sort(np.delete(dist[i], i))
        kth.append(others[k - 1])
    return float(np.mean(kth))


def _data(n=300, d=4, seed=1):
    return np.random.default_rng(seed).standard_normal((n, d))


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("k, n_points", [(1, 100), (5, 120), (50, 1000), (20, 300), (119, 120)])
def test_knn_sigma_matches_brute_force(k, n_points, seed):
    X = _data()
    got = knn_sigma(X, k=k, n_points=n_points, random_state=seed)
    assert got == pytest.approx(brute_force_sigma(X, k, n_points, seed), rel=1e-10)
    assert knn_gamma(X, k=k, n_points=n_points, random_state=seed) == pytest.approx(1 / (2 * got**2), rel=1e-14)


def test_k_equal_to_sample_size_minus_one_is_the_farthest_row():
    X = _data(n=30)
    got = knn_sigma(X, k=29, n_points=1000, random_state=0)
    dist = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    assert got == pytest.approx(dist.max(axis=1).mean(), rel=1e-12)


def test_duplicate_rows_are_neighbours_at_distance_zero():
    X = np.repeat(_data(n=40), 3, axis=0)  # every row three times
    with pytest.raises(InputValidationError, match="identical rows"):
        knn_sigma(X, k=2, n_points=120, random_state=0)  # two copies at distance 0 each
    got = knn_sigma(X, k=3, n_points=120, random_state=0)
    assert got == pytest.approx(brute_force_sigma(X, 3, 120, 0), rel=1e-10)
    assert got > 0


def test_columns_far_from_zero_in_float32_keep_float64_accuracy():
    X = _data(n=200, d=3) + 1e4
    got = knn_sigma(X.astype(np.float32), k=10, n_points=200, random_state=0)
    want = brute_force_sigma(X.astype(np.float32), 10, 200, 0)
    assert got == pytest.approx(want, rel=1e-9)


def test_dask_and_zarr_input_give_the_numpy_answer(tmp_path, scheduler):
    X = _data(n=500)
    want = knn_sigma(X, k=10, n_points=150, random_state=3)
    Xd = da.from_array(X, chunks=((100, 37, 200, 163), 4))
    assert knn_sigma(Xd, k=10, n_points=150, random_state=3) == want
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(64, 4), dtype="f8")
    z[:] = X
    assert knn_sigma(z, k=10, n_points=150, random_state=3) == want
    assert knn_gamma(Xd, k=10, n_points=150, random_state=3) == 1 / (2 * want**2)


def _weights(n, seed=4):
    """Positive unequal weights, every third row 0."""
    w = np.random.default_rng(seed).uniform(0.5, 3.0, n)
    w[::3] = 0.0
    return w


@pytest.mark.parametrize("n_points", [150, 1000])
def test_weighted_sample_is_drawn_among_rows_of_positive_weight_and_its_mean_weighted(n_points):
    """The ranks drawn count only the rows of positive weight (those of weight 0, moved
    far away here, are never drawn: the sample is that of X without them), and sigma is
    the weight-weighted mean of the sampled rows' k-th neighbour distances."""
    X = _data(n=500)
    w = _weights(500)
    X[w == 0] += 1e3
    keep = w > 0
    got = knn_sigma(X, k=10, n_points=n_points, random_state=3, sample_weight=w)
    assert got == knn_sigma(X[keep], k=10, n_points=n_points, random_state=3, sample_weight=w[keep])
    idx = np.random.default_rng(3).choice(keep.sum(), size=min(n_points, keep.sum()), replace=False)
    S, ws = X[keep][idx], w[keep][idx]
    dist = np.sqrt(((S[:, None, :] - S[None, :, :]) ** 2).sum(axis=-1))
    kth = np.sort(dist, axis=1)[:, 10]  # column 0 is the row itself
    assert got == pytest.approx(np.average(kth, weights=ws), rel=1e-10)
    assert knn_gamma(X, k=10, n_points=n_points, random_state=3, sample_weight=w * 1e-300) == pytest.approx(
        1 / (2 * got**2), rel=1e-12)  # the weights' unit does not matter


def test_dask_weights_give_the_numpy_answer_for_any_chunking(tmp_path):
    X = _data(n=500)
    w = _weights(500)
    want = knn_sigma(X, k=10, n_points=150, random_state=3, sample_weight=w)
    for chunks in ((100, 37, 200, 163), (250, 250)):
        Xd = da.from_array(X, chunks=(chunks, 4))
        assert knn_sigma(Xd, k=10, n_points=150, random_state=3, sample_weight=da.from_array(w, chunks=chunks)) == want
        assert knn_sigma(Xd, k=10, n_points=150, random_state=3, sample_weight=da.from_array(w, chunks=50)) == want


def test_bad_weights_are_refused_naming_the_row():
    X = _data(n=50)
    w = _weights(50)
    w[7] = -1.0
    with pytest.raises(InputValidationError, match=r"sample_weight holds 1 negative value\(s\), first in row 7"):
        knn_sigma(X, k=5, sample_weight=w)
    with pytest.raises(InputValidationError, match=r"sample_weight holds 1 negative value\(s\) in row block 1, first in row 7"):
        knn_sigma(da.from_array(X, chunks=(5, 4)), k=5, sample_weight=da.from_array(w, chunks=5))
    with pytest.raises(InputValidationError, match=r"sample_weight has shape \(49,\) but X has 50 rows"):
        knn_sigma(X, k=5, sample_weight=np.ones(49))
    with pytest.raises(InputValidationError, match=r"k \+ 1 = 6 sampled rows, got 3 \(X has 3 rows of positive weight"):
        knn_sigma(X, k=5, sample_weight=np.r_[np.ones(3), np.zeros(47)])


def _sampled_blocks(n, n_points, seed, rows_per_chunk):
    idx = np.random.default_rng(seed).choice(n, size=n_points, replace=False)
    return set((idx // rows_per_chunk).tolist())


def test_only_the_chunks_holding_sampled_rows_are_read(tmp_path):
    """Every chunk file without a sampled row is overwritten with garbage: reading any of
    them would fail to decode, yet the answer is the in-memory one."""
    n, rows, n_points, seed = 2000, 50, 30, 5
    X = _data(n=n)
    path = tmp_path / "x.zarr"
    z = zarr.create_array(str(path), shape=X.shape, chunks=(rows, 4), dtype="f8")
    z[:] = X
    want = knn_sigma(X, k=5, n_points=n_points, random_state=seed)
    sampled = _sampled_blocks(n, n_points, seed, rows)
    unsampled = sorted(set(range(n // rows)) - sampled)
    assert len(unsampled) > 10
    for b in unsampled:
        (path / "c" / str(b) / "0").write_bytes(b"not a chunk")
    z = zarr.open_array(str(path), mode="r")
    assert knn_sigma(z, k=5, n_points=n_points, random_state=seed) == want
    # (dask.array.from_zarr does not exist with dask's array query planning; from_array does)
    assert knn_sigma(da.from_array(z, chunks=z.chunks), k=5, n_points=n_points, random_state=seed) == want
    # control: the corruption is detected when a sampled chunk is read
    (path / "c" / str(min(sampled)) / "0").write_bytes(b"not a chunk")
    with pytest.raises(Exception):
        knn_sigma(zarr.open_array(str(path), mode="r"), k=5, n_points=n_points, random_state=seed)


@pytest.mark.parametrize("k", [0, -1, 2.5, True, "50"])
def test_bad_k_is_refused(k):
    with pytest.raises(InvalidParameterError, match=r"k must be an integer >= 1"):
        knn_sigma(_data(), k=k)


@pytest.mark.parametrize("n_points", [0, 1, 10.0])
def test_bad_n_points_is_refused(n_points):
    with pytest.raises(InvalidParameterError, match=r"n_points must be an integer >= 2"):
        knn_sigma(_data(), n_points=n_points)


def test_fewer_rows_than_k_plus_one_is_a_clear_error():
    X = _data(n=10)
    assert knn_sigma(X, k=9, random_state=0) > 0
    with pytest.raises(InputValidationError, match=r"at least k \+ 1 = 11 sampled rows, got 10 \(X has 10 rows"):
        knn_sigma(X, k=10, random_state=0)
    with pytest.raises(InputValidationError, match=r"k \+ 1 = 51 sampled rows, got 40 .*n_points=40"):
        knn_sigma(_data(), k=50, n_points=40, random_state=0)


def test_identical_rows_give_a_clear_error_not_an_infinite_gamma():
    X = np.ones((100, 3))
    with pytest.raises(InputValidationError, match=r"mean k-th neighbour distance is 0"):
        knn_gamma(X, k=5, random_state=0)


def test_nan_in_a_sampled_row_names_the_global_row():
    X = _data(n=400)
    idx = np.random.default_rng(2).choice(400, size=50, replace=False)
    X[idx[7], 1] = np.nan
    with pytest.raises(NonFiniteInputError, match=rf"1 of the 50 rows sampled .* first in row {idx[7]};"):
        knn_sigma(da.from_array(X, chunks=(64, 4)), k=5, n_points=50, random_state=2)
    with pytest.raises(NonFiniteInputError):
        knn_sigma(X, k=5, n_points=50, random_state=2)


def test_numpy_input_is_checked_in_full():
    X = _data(n=400)
    X[399, 0] = np.inf
    with pytest.raises(NonFiniteInputError, match="row 399"):
        knn_sigma(X, k=5, n_points=50, random_state=0)


def test_one_dimensional_input_is_refused():
    with pytest.raises(InputValidationError, match="2-dimensional"):
        knn_sigma(np.arange(100.0))


def test_scale_gamma_is_scikit_learns():
    from sklearn.svm import SVC

    X = _data(n=200, d=5) * [1, 2, 3, 4, 5] + 3
    y = (X[:, 0] > 3).astype(int)
    assert scale_gamma(X) == pytest.approx(SVC(gamma="scale").fit(X, y)._gamma, rel=1e-12)
    Xd = da.from_array(X, chunks=(37, 5))
    assert scale_gamma(Xd) == pytest.approx(scale_gamma(X), rel=1e-12)
    constant = np.full((20, 3), 2.5)
    assert scale_gamma(constant) == 1.0 == SVC(gamma="scale").fit(constant, np.arange(20) % 2)._gamma


def test_scale_gamma_refuses_non_finite_input():
    X = _data()
    X[5, 2] = np.nan
    with pytest.raises(NonFiniteInputError):
        scale_gamma(X)
    with pytest.raises(NonFiniteInputError, match="row 5"):  # the streamed moments name the row
        scale_gamma(da.from_array(X, chunks=(64, 4)))


def test_docstring_examples():
    result = doctest.testmod(bandwidth)
    assert result.attempted >= 3 and result.failed == 0
