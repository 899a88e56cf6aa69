"""What a store write may replace, what it refuses, and stores that lie about themselves.

``--overwrite`` (``overwrite=True``) replaces only an output that is verifiably dkrr's and
of the same kind (a dataset by a dataset, predictions by predictions), never an input,
never something inside another Zarr group, never a directory holding foreign files. An
output that cannot be written is refused before any work. A store whose metadata
declares an absurd shape is refused before anything is allocated; a corrupted chunk is a
:class:`StoreError` naming the array.
"""

from __future__ import annotations

import os
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from dkrr.errors import OutputExistsError, OutputNotWritableError, StoreError
from dkrr.io import atomic_output, open_dataset, write_dataset, write_predictions
from dkrr.io._atomic import check_output


@pytest.fixture(autouse=True)
def _threads():
    with dask.config.set(scheduler="threads"):
        yield


def _dataset(path, n=20, value=1.0):
    X = np.full((n, 3), value)
    y = np.arange(n, dtype=float)
    return Path(write_dataset(da.from_array(X, chunks=(7, 3)), da.from_array(y, chunks=7), path))


def _preds(path, n=20):
    return Path(write_predictions(da.arange(n, chunks=7).astype(float), path))


def _intact(path, n=20, value=1.0):
    ds = open_dataset(path)
    np.testing.assert_array_equal(ds.X.compute(), np.full((n, 3), value))
    np.testing.assert_array_equal(ds.y.compute(), np.arange(n, dtype=float))


def _explode(block):
    raise RuntimeError("the computation ran")


def _failing(n=20):
    """Predictions whose computation fails: an error other than this proves no work ran."""
    return da.ones(n, chunks=7).map_blocks(_explode, dtype=float)


# ------------------------------------------------------------- same kind, ours only


def test_predictions_never_replace_a_dataset(tmp_path):
    store = _dataset(tmp_path / "data.zarr")
    with pytest.raises(OutputExistsError, match="not a dkrr prediction store"):
        write_predictions(_failing(), store, overwrite=True)
    _intact(store)


def test_dataset_never_replaces_predictions(tmp_path):
    preds = _preds(tmp_path / "p.zarr")
    with pytest.raises(OutputExistsError, match="not a dkrr dataset"):
        write_dataset(np.ones((4, 2)), np.ones(4), preds, overwrite=True)
    assert zarr.open_group(str(preds), mode="r")["y_pred"][:].tolist() == list(range(20))
    # the marker that makes predictions recognisable
    assert zarr.open_group(str(preds), mode="r").attrs["dkrr_predictions"] == 1


def test_foreign_zarr_group_and_other_versions_are_refused(tmp_path):
    foreign = zarr.open_group(str(tmp_path / "foreign.zarr"), mode="w")
    foreign.create_array("X", data=np.ones((4, 2)))
    foreign.create_array("y", data=np.ones(4))
    with pytest.raises(OutputExistsError, match="no dkrr_layout"):
        write_dataset(np.ones((4, 2)), np.ones(4), tmp_path / "foreign.zarr", overwrite=True)
    newer = _dataset(tmp_path / "newer.zarr")
    g = zarr.open_group(str(newer), mode="r+")
    g.attrs["dkrr_layout"] = 99
    with pytest.raises(OutputExistsError, match="layout version 99"):
        write_dataset(np.ones((4, 2)), np.ones(4), newer, overwrite=True)
    assert zarr.open_group(str(tmp_path / "foreign.zarr"), mode="r")["X"].shape == (4, 2)


def test_directory_with_foreign_files_is_refused(tmp_path):
    store = _dataset(tmp_path / "data.zarr")
    (store / "notes.txt").write_text("my notes")
    with pytest.raises(OutputExistsError, match="notes.txt"):
        write_dataset(np.ones((4, 2)), np.ones(4), store, overwrite=True)
    assert (store / "notes.txt").read_text() == "my notes"
    (store / "notes.txt").unlink()
    (store / "X" / "c" / "backup").mkdir()
    with pytest.raises(OutputExistsError, match="backup"):
        write_dataset(np.ones((4, 2)), np.ones(4), store, overwrite=True)
    _intact(store)
    preds = _preds(tmp_path / "p.zarr")
    (preds / "model.json").write_text("{}")
    with pytest.raises(OutputExistsError, match="model.json"):
        write_predictions(np.ones(3), preds, overwrite=True)


def test_own_outputs_are_replaced(tmp_path):
    store = _dataset(tmp_path / "data.zarr")
    write_dataset(da.full((20, 3), 2.0, chunks=(7, 3)), da.arange(20.0, chunks=7), store,
                  overwrite=True)
    _intact(store, value=2.0)
    preds = _preds(tmp_path / "p.zarr")
    write_predictions(np.zeros(5), preds, overwrite=True)
    # predictions written before the marker existed are still recognised as ours
    old = zarr.open_group(str(tmp_path / "old.zarr"), mode="w", attributes={"dkrr_layout": 1})
    old.create_array("y_pred", data=np.ones(4))
    write_predictions(np.zeros(4), tmp_path / "old.zarr", overwrite=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    write_predictions(np.zeros(4), empty, overwrite=True)


# ------------------------------------------------------------- inputs and other groups


def test_output_inside_another_zarr_group_is_refused(tmp_path):
    store = _dataset(tmp_path / "data.zarr")
    with pytest.raises(OutputExistsError, match=r"inside the Zarr store .*data.zarr"):
        write_dataset(np.ones((4, 2)), np.ones(4), store / "X", overwrite=True)
    with pytest.raises(OutputExistsError, match=r"inside the Zarr store .*data.zarr"):
        write_predictions(np.ones(4), store / "pred")
    _intact(store)
    assert sorted(p.name for p in store.iterdir()) == ["X", "y", "zarr.json"]


@pytest.mark.parametrize("relation", ["is", "is-link", "contains", "inside"])
def test_output_overlapping_an_input_is_refused(tmp_path, relation):
    inputs = tmp_path / "in"
    inputs.mkdir()
    data = inputs / "data.csv"
    data.write_text("1,2\n")
    out, source = {
        "is": (data, data),
        "is-link": (tmp_path / "link", data),
        "contains": (inputs, data),
        "inside": (inputs / "sub" / "out.zarr", tmp_path / "alias"),  # input via a link
    }[relation]
    if relation == "is-link":
        out.symlink_to(data)
    if relation == "inside":
        source.symlink_to(inputs)
    with pytest.raises(OutputExistsError, match="input"):
        check_output(out, overwrite=True, inputs=[source])
    with pytest.raises(OutputExistsError, match="input"):
        with atomic_output(out, overwrite=True, inputs=[source]):
            pytest.fail("the body must not run")
    assert data.read_text() == "1,2\n"


def test_predictions_over_their_input_store_are_refused(tmp_path):
    store = _dataset(tmp_path / "data.zarr")
    link = tmp_path / "alias.zarr"
    link.symlink_to(store)
    for out in (store, link):
        with pytest.raises(OutputExistsError, match="input|not a dkrr prediction store"):
            write_predictions(_failing(), out, overwrite=True, inputs=[store])
    _intact(store)


# ------------------------------------------------------------- cannot be written


def test_output_through_a_file_is_refused_before_any_work(tmp_path):
    f = tmp_path / "somefile.txt"
    f.write_text("x")
    with pytest.raises(OutputNotWritableError, match="somefile.txt.*not a directory"):
        with atomic_output(f / "out.model"):
            pytest.fail("the body must not run")
    with pytest.raises(OutputNotWritableError, match="not a directory"):
        write_predictions(_failing(), f / "sub" / "p.zarr")
    assert f.read_text() == "x"


def test_output_on_a_read_only_filesystem_is_refused(tmp_path):
    # /proc refuses new files even to root (tests may run as root, for whom a chmod'ed
    # directory stays writable): the probe file, not os.access, decides
    with pytest.raises(OutputNotWritableError, match="cannot write"):
        write_predictions(_failing(), "/proc/dkrr-predictions.zarr")
    assert not os.path.exists("/proc/dkrr-predictions.zarr")


# ------------------------------------------------------------- stores that lie


def _declared(path, shape, chunks, dtype="f4"):
    g = zarr.open_group(str(path), mode="w", attributes={"dkrr_layout": 1})
    g.create_array("X", shape=shape, chunks=chunks, dtype=dtype)  # metadata only
    g.create_array("y", shape=shape[:1], chunks=chunks[:1], dtype=dtype)
    return path


def test_absurd_chunk_is_refused_up_front(tmp_path):
    p = _declared(tmp_path / "s.zarr", (10**6, 10**6), (10**6, 10**6))
    with pytest.raises(StoreError, match=r"'X'.*chunk.*1e\+12 elements|'X'.*chunk.*10\^12"):
        open_dataset(p)


def test_absurd_number_of_rows_is_refused_up_front(tmp_path):
    p = _declared(tmp_path / "s.zarr", (10**15, 10), (65536, 10))
    with pytest.raises(StoreError, match=r"'X'.*1000000000000000 rows.*blocks"):
        open_dataset(p)


def test_corrupted_chunk_is_a_store_error(tmp_path, scheduler):
    store = _dataset(tmp_path / "data.zarr", n=30)
    chunk = store / "X" / "c" / "1" / "0"
    assert chunk.is_file()
    chunk.write_bytes(b"this is not a blosc frame" * 4)
    ds = open_dataset(store)
    with pytest.raises(StoreError, match=r"array 'X' of .*data.zarr.*corrupted"):
        ds.X.sum().compute()
    assert float(ds.y.sum().compute()) == sum(range(30))


def test_replaced_store_gets_new_keys(tmp_path, local_cluster):
    distributed = pytest.importorskip("distributed")
    store = _dataset(tmp_path / "data.zarr", value=1.0)
    with distributed.Client(local_cluster) as client:
        held = open_dataset(store).X.persist()
        distributed.wait(held)
        write_dataset(da.full((20, 3), 5.0, chunks=(7, 3)), da.arange(20.0, chunks=7), store,
                      overwrite=True)
        again = open_dataset(store).X
        assert again.name != held.name
        np.testing.assert_array_equal(again.compute(), np.full((20, 3), 5.0))
        assert client.status == "running"


def test_store_write_keys_are_tokens_of_output_and_input(tmp_path):
    seen = []

    def run(tasks):
        seen.append({str(k[0] if isinstance(k, tuple) else k)
                     for t in tasks for k in dict(t.__dask_graph__())})
        dask.compute(*tasks)

    a = da.arange(10, chunks=5).astype(float)
    write_predictions(a, tmp_path / "p1.zarr", compute=run)
    write_predictions(a + 1, tmp_path / "p2.zarr", compute=run)
    stores = [{k for k in keys if "store-map-" in k} for keys in seen]
    assert all(len(s) == 1 for s in stores) and stores[0] != stores[1]
    assert all(len(next(iter(s)).rsplit("-", 1)[1]) == 32 for s in stores)


def test_every_error_survives_the_trip_from_a_worker():
    # distributed sends a worker's exception back through tblib, which recreates it
    # with cls.__new__(cls, *args); errors that are also OSErrors used to fail there
    # and reached the user as a bare "Exception: StoreError(...)" with a traceback
    import tblib.pickling_support
    from distributed.protocol.pickle import dumps, loads

    from dkrr import errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        tblib.pickling_support.install(cls)
        back = loads(dumps(cls("what went wrong")))
        assert type(back) is cls and str(back) == "what went wrong", name


def test_interrupts_wait_for_the_end_of_a_metadata_write():
    import signal

    from dkrr.io._atomic import interrupts_deferred

    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            signal.raise_signal(signal.SIGINT)
            done.append("the block went on")
    assert done == ["the block went on"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
