"""Tests of dkrr.io stores: atomic_output, open_dataset, write_predictions, write_dataset."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from dkrr.errors import (
    InputValidationError,
    OutputExistsError,
    StoreError,
    StoreNotFoundError,
)
from dkrr.io import atomic_output, open_dataset, write_dataset, write_predictions


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def _make_store(path, X, y=None, *, x_chunks=None, y_chunks=None, zarr_format=3,
                extra=()):
    group = zarr.open_group(str(path), mode="w", zarr_format=zarr_format,
                            attributes={"dkrr_layout": 1})
    _filled(group, "X", X, x_chunks)
    if y is not None:
        _filled(group, "y", y, y_chunks)
    for name in extra:
        _filled(group, name, np.zeros(3))
    return path


def _filled(group, name, data, chunks=None):
    # create, then write: Group.create_array(data=...) needs zarr >= 3.1, the range starts at 3.0
    group.create_array(name, shape=data.shape, dtype=data.dtype, chunks=chunks or data.shape)[...] = data


@pytest.fixture
def Xy():
    rng = np.random.default_rng(1)
    return rng.standard_normal((23, 4)).astype(np.float32), rng.standard_normal(23)


# ---------------------------------------------------------------------- atomic_output


def test_atomic_output_success_and_failure(tmp_path):
    out = tmp_path / "sub" / "model"
    with atomic_output(out) as tmp:
        assert tmp.parent == out.parent and tmp.name.startswith(".model.tmp-")
        assert not out.exists()
        tmp.mkdir()
        (tmp / "a.json").write_text("{}")
    assert (out / "a.json").read_text() == "{}"
    assert _leftovers(out.parent) == []

    with pytest.raises(RuntimeError, match="boom"), atomic_output(out, overwrite=True) as tmp:
        tmp.mkdir()
        (tmp / "b.json").write_text("half")
        raise RuntimeError("boom")
    assert sorted(p.name for p in out.iterdir()) == ["a.json"]
    assert _leftovers(out.parent) == []


def test_atomic_output_overwrite_rules(tmp_path):
    out = tmp_path / "result.txt"
    out.write_text("old")
    with pytest.raises(OutputExistsError, match="exists already"):
        with atomic_output(out):
            pytest.fail("the body must not run")
    with atomic_output(out, overwrite=True) as tmp:
        tmp.write_text("new")
        assert out.read_text() == "old"  # old output intact until the end
    assert out.read_text() == "new"
    with pytest.raises(OutputExistsError, match="refusing to overwrite.*no thanks"):
        with atomic_output(out, overwrite=True, can_replace=lambda p: "no thanks"):
            pass
    assert out.read_text() == "new"
    # an output that appears while the body runs is not clobbered without overwrite
    late = tmp_path / "late"
    with pytest.raises(OutputExistsError):
        with atomic_output(late) as tmp:
            tmp.write_text("mine")
            late.write_text("theirs")
    assert late.read_text() == "theirs"
    assert _leftovers(tmp_path) == []


def test_atomic_output_refuses_cwd(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "inner").mkdir(parents=True)
    monkeypatch.chdir(work / "inner")
    with pytest.raises(OutputExistsError, match="current working directory"):
        with atomic_output(work, overwrite=True):
            pass
    assert (work / "inner").is_dir()


def test_atomic_output_keyboard_interrupt(tmp_path):
    out = tmp_path / "o"
    with pytest.raises(KeyboardInterrupt), atomic_output(out) as tmp:
        tmp.mkdir()
        raise KeyboardInterrupt
    assert not out.exists() and _leftovers(tmp_path) == []


# ----------------------------------------------------------------------- open_dataset


def test_open_dataset_reads_rows_chunked(tmp_path, Xy):
    X, y = Xy
    path = _make_store(tmp_path / "s.zarr", X, y, x_chunks=(5, 4), y_chunks=(7,))
    ds = open_dataset(path)
    assert ds.X.chunks == ((5, 5, 5, 5, 3), (4,))
    assert ds.y.chunks == ds.X.chunks[:1]  # rechunked to X's rows
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), y)
    assert ds.X.dtype == np.float32 and ds.y.dtype == np.float64
    assert ds.attrs == {"dkrr_layout": 1} and ds.path == str(path)
    assert ds.n_samples == 23 and ds.n_features == 4
    assert ds.feature_names is None and ds.classes is None


def test_open_dataset_column_chunks_and_2d_y_and_zarr_v2(tmp_path, Xy):
    X, y = Xy
    Y = np.stack([y, 2 * y], axis=1)
    path = _make_store(tmp_path / "s.zarr", X, Y, x_chunks=(6, 2), y_chunks=(4, 1),
                       zarr_format=2)
    ds = open_dataset(path)
    assert ds.X.chunks == ((6, 6, 6, 5), (4,))
    assert ds.y.chunks == ((6, 6, 6, 5), (2,))
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), Y)


def test_open_dataset_without_y(tmp_path, Xy):
    path = _make_store(tmp_path / "s.zarr", Xy[0], extra=["z"])
    assert open_dataset(path, require_y=False).y is None
    with pytest.raises(StoreError, match=r"has no array 'y' \(found: 'X', 'z'\)"):
        open_dataset(path)


def test_open_dataset_missing_path(tmp_path):
    with pytest.raises(StoreNotFoundError, match="does not exist.*dkrr ingest") as info:
        open_dataset(tmp_path / "nope.zarr")
    assert isinstance(info.value, FileNotFoundError)


def test_open_dataset_not_a_store(tmp_path, Xy):
    f = tmp_path / "data.csv"
    f.write_text("1,2\n")
    with pytest.raises(StoreError, match="is a file, not a Zarr store"):
        open_dataset(f)
    d = tmp_path / "plain"
    d.mkdir()
    (d / "readme.txt").write_text("hi")
    with pytest.raises(StoreError, match=r"not a Zarr store.*no zarr.json \(found: readme.txt\)"):
        open_dataset(d)
    path = _make_store(tmp_path / "bad.zarr", *Xy)
    (path / "zarr.json").write_text("{not json")
    with pytest.raises(StoreError, match="metadata file is corrupted"):
        open_dataset(path)
    (path / "zarr.json").write_text('{"zarr_format": 3, "node_type": "banana"}')
    with pytest.raises(StoreError, match="cannot open .* as a Zarr group"):
        open_dataset(path)
    arr = zarr.create_array(str(tmp_path / "arr.zarr"), data=Xy[0])
    assert arr.shape == (23, 4)
    with pytest.raises(StoreError, match=r"is a Zarr array of shape \(23, 4\), not a group"):
        open_dataset(tmp_path / "arr.zarr")


def test_open_dataset_no_arrays(tmp_path):
    zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    with pytest.raises(StoreError, match=r"no array 'X' or 'y' \(found: no arrays\)"):
        open_dataset(tmp_path / "g.zarr")


def test_open_dataset_bad_shapes_and_dtypes(tmp_path, Xy):
    X, y = Xy
    p = _make_store(tmp_path / "a.zarr", X[:, 0], y)
    with pytest.raises(InputValidationError, match=r"'X' .* has shape \(23,\); expected 2"):
        open_dataset(p)
    p = _make_store(tmp_path / "b.zarr", X, y[:20])
    with pytest.raises(InputValidationError, match=r"X has shape \(23, 4\) but y has shape \(20,\)"):
        open_dataset(p)
    p = _make_store(tmp_path / "c.zarr", X, np.zeros((23, 2, 2)))
    with pytest.raises(InputValidationError, match=r"'y' .* has shape \(23, 2, 2\)"):
        open_dataset(p)
    with warnings.catch_warnings():  # fixed-length strings have no stable v3 spec: zarr
        warnings.simplefilter("ignore")  # warns (zarr.errors.UnstableSpecificationWarning from 3.1)
        p = _make_store(tmp_path / "d.zarr", X.astype(str), y)
    with pytest.raises(InputValidationError, match="'X' .* dtype .* not numeric"):
        open_dataset(p)
    p = _make_store(tmp_path / "e.zarr", X, y > 0)
    with pytest.raises(InputValidationError, match="'y' .* dtype bool.* not numeric"):
        open_dataset(p)


# ------------------------------------------------------------------ write_predictions


def _check_written(out, expected, chunks):
    group = zarr.open_group(str(out), mode="r")
    assert list(group.array_keys()) == ["y_pred"]
    np.testing.assert_array_equal(group["y_pred"][...], expected)
    assert group["y_pred"].chunks == chunks
    return dict(group.attrs)


def test_write_predictions_threaded(tmp_path):
    y_pred = da.arange(50, chunks=(7, 10, 10, 10, 13)).astype(np.float32) / np.float32(3)
    with dask.config.set(scheduler="threads"):
        path = write_predictions(y_pred, tmp_path / "p.zarr", attrs={"model": "m"})
    assert path == str(tmp_path / "p.zarr")
    attrs = _check_written(path, np.arange(50, dtype=np.float32) / 3, (13,))
    assert attrs == {"dkrr_layout": 1, "dkrr_predictions": 1, "model": "m",
                     "dkrr_arrays": {"y_pred": {"shape": [50], "chunks": [13]}}}
    # 2-D predictions; chunked along columns is fine
    Y = da.from_array(np.ones((30, 3)) * np.arange(3), chunks=(8, 1))
    with dask.config.set(scheduler="threads"):
        write_predictions(Y, tmp_path / "q.zarr")
    _check_written(tmp_path / "q.zarr", np.ones((30, 3)) * np.arange(3), (8, 3))
    assert _leftovers(tmp_path) == []


def test_write_predictions_overwrite_and_failure(tmp_path):
    out = tmp_path / "p.zarr"
    write_predictions(da.zeros(10, chunks=5), out)
    with pytest.raises(OutputExistsError, match="exists already"):
        write_predictions(da.ones(10, chunks=5), out)

    def explode(block, block_info=None):
        if block_info[0]["chunk-location"] == (1,):
            raise RuntimeError("worker failed")
        time.sleep(0.3)  # still writing when the other block fails
        return block

    failing = da.ones(10, chunks=5).map_blocks(explode, dtype=float)
    with pytest.raises(RuntimeError, match="worker failed"), dask.config.set(
        scheduler="threads", num_workers=2
    ):
        write_predictions(failing, out, overwrite=True)
    _check_written(out, np.zeros(10), (5,))  # old predictions intact
    write_predictions(da.ones(10, chunks=5), out, overwrite=True)
    _check_written(out, np.ones(10), (5,))
    assert _leftovers(tmp_path) == []
    with pytest.raises(InputValidationError, match=r"shape \(2, 2, 2\)"):
        write_predictions(da.ones((2, 2, 2)), tmp_path / "x.zarr")


def test_write_predictions_compute_hook_and_numpy(tmp_path):
    seen = []

    def run(tasks):
        seen.append(tasks)
        results = dask.compute(*tasks, scheduler="synchronous")
        # nothing but one byte per block comes back to the client
        assert all(np.asarray(r).nbytes == np.prod(t.numblocks) for r, t in zip(results, tasks))

    write_predictions(np.arange(5.0), tmp_path / "p.zarr", compute=run)
    assert len(seen) == 1 and len(seen[0]) == 1
    _check_written(tmp_path / "p.zarr", np.arange(5.0), (5,))


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as cluster, distributed.Client(cluster) as c:
        yield c


def test_write_predictions_distributed(tmp_path, client):
    # each block holds the pid of the process that computed it: the values in the
    # store prove the blocks were computed and written by the worker processes
    def pid_block(block):
        return np.full(block.shape, os.getpid(), dtype=np.int64)

    blocks = da.zeros(40, chunks=5, dtype=np.int64).map_blocks(pid_block, dtype=np.int64)
    write_predictions(blocks, tmp_path / "pids.zarr")
    stored = zarr.open_group(str(tmp_path / "pids.zarr"), mode="r")["y_pred"][...]
    worker_pids = set(client.run(os.getpid).values())
    assert set(np.unique(stored)) <= worker_pids and os.getpid() not in set(stored)

    # a failing block while others are still running: after the error nothing is
    # left behind (the running blocks are waited for before the cleanup)
    def slow_or_fail(block, block_info=None):
        if block_info[0]["chunk-location"] == (0,):
            raise RuntimeError("block 0 failed")
        time.sleep(0.5)
        return block

    failing = da.ones(40, chunks=10).map_blocks(slow_or_fail, dtype=float)
    with pytest.raises(RuntimeError, match="block 0 failed"):
        write_predictions(failing, tmp_path / "fail.zarr")
    assert not (tmp_path / "fail.zarr").exists()
    assert _leftovers(tmp_path) == []

    rng = da.random.default_rng(3)
    y_pred = rng.standard_normal((60, 2), chunks=(9, 2))
    expected = y_pred.compute()
    write_predictions(y_pred, tmp_path / "p.zarr", attrs={"classes": ["a", "b"]})
    attrs = _check_written(tmp_path / "p.zarr", expected, (9, 2))
    assert attrs["classes"] == ["a", "b"]
    assert _leftovers(tmp_path) == []


# ---------------------------------------------------------------------- write_dataset


@pytest.mark.parametrize("use_client", [False, True])
def test_write_dataset_round_trip(tmp_path, Xy, use_client, request):
    X, y = Xy
    dX = da.from_array(X, chunks=((5, 8, 10), (2, 2)))  # irregular rows, split columns
    dy = da.from_array(y, chunks=4)
    if use_client:
        request.getfixturevalue("client")
    path = write_dataset(dX, dy, tmp_path / "d.zarr", feature_names=list("abcd"),
                         attrs={"source": "synthetic"})
    ds = open_dataset(path)
    assert ds.X.chunks == ((10, 10, 3), (4,)) and ds.y.chunks == ((10, 10, 3),)
    np.testing.assert_array_equal(ds.X.compute(), X)
    np.testing.assert_array_equal(ds.y.compute(), y)
    assert ds.feature_names == list("abcd") and ds.target_names == ["target"]
    assert ds.attrs["source"] == "synthetic" and ds.attrs["dkrr_layout"] == 1
    with pytest.raises(OutputExistsError):
        write_dataset(dX, dy, path)
    with pytest.raises(InputValidationError, match=r"y has shape \(22,\) but X has shape \(23, 4\)"):
        write_dataset(dX, dy[:22], tmp_path / "e.zarr")


def test_write_dataset_refuses_what_a_fit_could_not_read_and_writes_nothing(tmp_path):
    """Text, complex numbers, a path where an array belongs, and class codes that are not
    codes were written (or failed with an IndexError) and only `dkrr fit` refused them."""
    X = np.ones((3, 2))
    out = tmp_path / "w.zarr"
    cases = [
        ((str(out), X, np.ones(3)), {}, r"X is the str '.*w\.zarr', not an array; the "
                                        r"arguments come in the order X, y, out"),
        ((np.array([["a", "b"]] * 3), None, out), {}, r"X has dtype <U1, which is not numeric"),
        ((X + 1j, None, out), {}, r"X has dtype complex128, which is not numeric"),
        ((X, np.array(list("xyz")), out), {}, r"y has dtype <U1.*classes= the labels"),
        ((X, 5, out), {}, r"y is a scalar \(int\)"),
        ((X, np.ones(3), out), {"classes": ["a"]}, r"y has dtype float64 but classes= was given"),
        ((X, None, out), {"classes": ["a"]}, r"classes= was given without y"),
        ((X, np.zeros(3, int), out), {"classes": ["a", "a"]}, r"name each class once"),
        ((X, np.zeros(3, int), out), {"classes": "ab"}, r"classes= is the str 'ab'"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(InputValidationError, match=message):
            write_dataset(*args, **kwargs)
        assert not out.exists()
    with pytest.raises(InputValidationError, match=r"y_pred is the str"):
        write_predictions(str(out), np.ones(3))
    # a code outside the classes is found as its block is written; nothing is left
    codes = da.from_array(np.r_[np.zeros(250, int), np.full(50, 3)], chunks=100)
    with pytest.raises(InputValidationError,
                       match=r"50 class code\(s\) outside 0\.\.1 in rows 200 to 299, first in "
                             r"row 250 \(code 3\).*nothing was written"):
        write_dataset(da.ones((300, 2), chunks=100), codes, out, classes=["a", "b"])
    assert not out.exists() and _leftovers(tmp_path) == []
    # codes within the classes are written and read back
    write_dataset(X, np.array([0, 1, 1]), out, classes=["a", "b"])
    ds = open_dataset(out)
    assert ds.attrs["classes"] == ["a", "b"]
    np.testing.assert_array_equal(ds.y.compute(), [0, 1, 1])
