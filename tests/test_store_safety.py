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
import re
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from dkrr.errors import InvalidParameterError, OutputExistsError, OutputNotWritableError, StoreError
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
    foreign.create_array("X", shape=(4, 2), dtype="f8")[...] = 1.0  # no data=: zarr 3.0
    foreign.create_array("y", shape=(4,), dtype="f8")[...] = 1.0
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
    old.create_array("y_pred", shape=(4,), dtype="f8")[...] = 1.0
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
    stores = [{k for k in keys if k.startswith("dkrr-store-")} for keys in seen]
    if dask.config.get("array.query-planning", False):  # dask names the tasks after its own wrapper
        stores = [{k for k in keys if k.startswith("pass_extra_kwargs-")} for keys in seen]
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


# ------------------------------------------------------------- incomplete stores


def _cli(*args, cwd=None):
    """``python -m dkrr.cli`` as a real process: (exit status, stderr lines)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "dkrr.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr.strip().splitlines()


def _edit_metadata(path, edit):
    import json

    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def test_every_chunk_is_written_also_when_all_zeros(tmp_path):
    # a chunk of zeros (Zarr's fill value) used to be left out, so a missing chunk could
    # not tell corruption from zeros; dkrr now writes every chunk and records the arrays
    store = Path(write_dataset(da.zeros((20, 3), chunks=(7, 3)), da.zeros(20, chunks=7),
                               tmp_path / "zeros.zarr"))
    preds = Path(write_predictions(da.zeros(20, chunks=7), tmp_path / "p.zarr"))
    assert sorted(p.name for p in (store / "X" / "c").iterdir()) == ["0", "1", "2"]
    assert sorted(p.name for p in (store / "y" / "c").iterdir()) == ["0", "1", "2"]
    assert sorted(p.name for p in (preds / "y_pred" / "c").iterdir()) == ["0", "1", "2"]
    ds = open_dataset(store)
    assert ds.attrs["dkrr_arrays"] == {"X": {"shape": [20, 3], "chunks": [7, 3]},
                                       "y": {"shape": [20], "chunks": [7]}}
    assert float(ds.X.sum().compute()) == 0.0


def test_ingested_zero_rows_are_stored_and_read(tmp_path):
    from dkrr.io import ingest

    csv = tmp_path / "d.csv"
    csv.write_text("a,b,t\n" + "0,0,0\n" * 10 + "1,2,3\n")
    ingest(csv, tmp_path / "d.zarr", target="t", chunk_rows=4)
    assert sorted(p.name for p in (tmp_path / "d.zarr" / "X" / "c").iterdir()) == ["0", "1", "2"]
    ds = open_dataset(tmp_path / "d.zarr")
    assert ds.attrs["dkrr_arrays"]["X"] == {"shape": [11, 2], "chunks": [4, 2]}
    assert float(ds.y.sum().compute()) == 3.0


@pytest.mark.parametrize("name", ["X", "y"])
def test_missing_chunk_is_refused_when_opened(tmp_path, name):
    store = _dataset(tmp_path / "data.zarr")
    chunk = store / name / "c" / "1" / "0" if name == "X" else store / name / "c" / "1"
    chunk.unlink()
    with pytest.raises(StoreError, match=(
            rf"data.zarr: array '{name}' is missing 1 of 3 chunk\(s\) \(c/1.*\): rows 7-13 "
            r"of 20 .*not stored.*re-create it")):
        open_dataset(store)


def test_missing_chunk_in_a_format_2_store_is_refused(tmp_path):
    # the chunk key comes from the array's own encoding ("1.0" in Zarr format 2)
    group = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    X = group.create_array("X", shape=(20, 3), chunks=(7, 3), dtype="f8")
    y = group.create_array("y", shape=(20,), chunks=(7,), dtype="f8")
    X[:], y[:] = 1.0, 1.0
    from dkrr.io._reader import MANIFEST, manifest

    group.attrs[MANIFEST] = manifest({"X": X, "y": y})
    assert open_dataset(tmp_path / "v2.zarr").n_samples == 20
    (tmp_path / "v2.zarr" / "X" / "2.0").unlink()
    with pytest.raises(StoreError, match=r"'X' is missing 1 of 3 chunk\(s\) \(2.0\): rows 14-19"):
        open_dataset(tmp_path / "v2.zarr")


@pytest.mark.parametrize("rows", [21, 40])
def test_declared_shape_larger_than_written_is_refused(tmp_path, rows):
    # 21 rows stay inside the last chunk (its padding would be read as a zero row);
    # 40 rows declare chunks that were never written
    store = _dataset(tmp_path / "data.zarr")
    for name in ("X", "y"):
        _edit_metadata(store / name / "zarr.json", lambda d: d["shape"].__setitem__(0, rows))
    with pytest.raises(StoreError, match=rf"array 'X' declares shape \({rows}, 3\).*dkrr wrote "
                                         r"it with shape \(20, 3\)"):
        open_dataset(store)


def test_store_without_the_record_follows_zarr_rules(tmp_path):
    # another program's store (or an older dkrr's) may leave out chunks of zeros
    group = zarr.open_group(str(tmp_path / "foreign.zarr"), mode="w")
    group.create_array("X", shape=(20, 3), dtype="f8", chunks=(7, 3))[...] = 0.0
    group.create_array("y", shape=(20,), dtype="f8", chunks=(7,))[...] = 0.0
    assert not (tmp_path / "foreign.zarr" / "X" / "c").exists()
    assert float(open_dataset(tmp_path / "foreign.zarr").X.sum().compute()) == 0.0


def test_cli_fit_refuses_an_incomplete_store(tmp_path):
    from dkrr.io import ingest

    csv = tmp_path / "d.csv"
    csv.write_text("a,b,t\n" + "".join(f"{i},{i % 3},{i % 5}\n" for i in range(30)))
    store = Path(ingest(csv, tmp_path / "d.zarr", target="t", chunk_rows=8).path)
    (store / "y" / "c" / "2").unlink()
    code, err = _cli("fit", store, "--out", tmp_path / "m", "--scheduler", "tcp://127.0.0.1:9")
    assert code == 1 and len(err) == 1, err
    assert re.fullmatch(r"dkrr fit: error: store .*d.zarr: array 'y' is missing 1 of 4 "
                        r"chunk\(s\) \(c/2\): rows 16-23 of 30 .*", err[0]), err
    assert not (tmp_path / "m").exists()


# ------------------------------------------------------------- corrupt metadata


def _set_codec(doc):
    doc["codecs"][-1]["name"] = "no-such-codec"


@pytest.mark.parametrize("edit, why", [
    (lambda p: p.write_text("{not json"), "JSONDecodeError"),
    (lambda p: p.write_text(""), "JSONDecodeError"),
    (lambda p: _edit_metadata(p, lambda d: d.__setitem__("data_type", "banana")), "banana"),
    # zarr 3.0 reports an unknown codec as the array missing from its group (KeyError)
    (lambda p: _edit_metadata(p, _set_codec), "no-such-codec|KeyError: 'X'"),
], ids=["bad-json", "empty", "unknown-dtype", "unknown-codec"])
def test_corrupt_array_metadata_is_one_store_error(tmp_path, capsys, edit, why):
    from dkrr.cli import main

    store = _dataset(tmp_path / "data.zarr")
    edit(store / "X" / "zarr.json")
    with pytest.raises(StoreError, match=rf"store .*data.zarr: the metadata of array 'X' is "
                                         rf"corrupted or not supported \(.*({why}).*\)"):
        open_dataset(store)
    code = main(["fit", str(store), "--out", str(tmp_path / "m"), "--scheduler",
                 "tcp://127.0.0.1:9"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and "metadata of array 'X'" in err[0], err


def test_corrupt_format_2_array_metadata_is_one_store_error(tmp_path):
    group = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    group.create_array("X", shape=(4, 2), dtype="f8")[...] = 1.0
    group.create_array("y", shape=(4,), dtype="f8")[...] = 1.0
    (tmp_path / "v2.zarr" / "y" / ".zarray").write_text('{"zarr_format": 2, "shape": ')
    with pytest.raises(StoreError, match=r"v2.zarr: the metadata of array 'y' is corrupted"):
        open_dataset(tmp_path / "v2.zarr")


# ------------------------------------------------------------- one writer at a time

#: A real writer in its own process: write_dataset over `out` (--overwrite), whose
#: blocks wait until the test creates `go`; `started` says it is inside its write.
_BLOCKED_WRITER = """
import os, sys, time
import dask, dask.array as da, numpy as np
from dkrr.io import write_dataset
out, started, go = sys.argv[1:4]
def wait(block):
    open(started, "a").close()
    while not os.path.exists(go):
        time.sleep(0.02)
    return block
with dask.config.set(scheduler="threads"):
    X = da.full((20, 3), 7.0, chunks=(7, 3)).map_blocks(wait, meta=np.empty((0, 0)))
    write_dataset(X, da.arange(20.0, chunks=7), out, overwrite=True)
print("writer done")
"""


def _blocked_writer(tmp_path, out):
    import subprocess
    import sys

    started, go = tmp_path / "started", tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-c", _BLOCKED_WRITER, str(out), str(started),
                             str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the writer never started writing"
        time.sleep(0.05)
    return proc, go


def test_concurrent_overwrite_second_writer_is_refused(tmp_path):
    # two runs writing one output: the second (a real `dkrr ingest --overwrite`) is
    # refused while the first holds the output; the first succeeds, and its store, whole,
    # is what is left (both used to report success over one of them)
    out = _dataset(tmp_path / "data.zarr", value=1.0)
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,c,t\n" + "5,5,5,1\n" * 8)
    proc, go = _blocked_writer(tmp_path, out)
    try:
        code, err = _cli("ingest", csv, "--out", out, "--target", "t", "--overwrite", "-q")
    finally:
        go.touch()
        stdout, stderr = proc.communicate(timeout=120)
    assert code == 1 and len(err) == 1, err
    assert re.fullmatch(rf"dkrr ingest: error: another process \(pid {proc.pid} on .*\) is "
                        r"writing .*data.zarr right now; .*wait for it to finish.*", err[0]), err
    assert proc.returncode == 0 and "writer done" in stdout, stderr
    _intact(out, value=7.0)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    # once the writer is done the lock is gone: the next run replaces its output
    write_dataset(np.zeros((8, 3)), np.zeros(8), out, overwrite=True)
    assert open_dataset(out).n_samples == 8


def test_a_fit_holds_its_output_from_before_the_fit(tmp_path):
    """dkrr fit took its output's lock only at the save: two fits of one output with
    --overwrite both reported success (the second's model left), or the second was refused
    after its whole fit. The first fit here waits on a real scheduler without workers,
    holding the lock; the second is refused at once; a worker joins, the first fit ends and
    its model is the one left."""
    import subprocess
    import sys

    from distributed import LocalCluster

    from dkrr.io._model import load_model

    data = _dataset(tmp_path / "data.zarr", value=1.0)
    model = tmp_path / "m.model"
    lock = tmp_path / ".m.model.lock"
    fit = ["fit", data, "--out", model, "--overwrite", "--n-components", 8, "--gamma", 0.5, "--alpha", 1, "--no-cv", "-q"]
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster:
        first = subprocess.Popen([sys.executable, "-m", "dkrr.cli", *map(str, fit), "--random-state", "1",
                                  "--scheduler", cluster.scheduler_address],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30  # the fit waits for a worker: it cannot end before
            while not lock.exists() and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert lock.exists(), f"the waiting fit holds no lock on its output (exit {first.poll()})"
            t0 = time.monotonic()
            code, err = _cli(*fit, "--random-state", 2)
            assert code == 1 and len(err) == 1, err
            assert re.fullmatch(rf"dkrr fit: error: another process \(pid {first.pid} on .*\) is writing "
                                r".*m.model right now; .*", err[0]), err
            # refused while the first fit waits (no worker joins before the refusal); the
            # limit only bounds a hang: it took 36 s at a load of 17 on 2 cores
            assert not model.exists() and time.monotonic() - t0 < 120
            cluster.scale(1)
            out, errs = first.communicate(timeout=120)
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate()
    assert first.returncode == 0, errs
    assert load_model(model).random_state == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_killed_writer_leaves_no_lock_that_blocks(tmp_path):
    import signal

    out = _dataset(tmp_path / "data.zarr", value=1.0)
    proc, go = _blocked_writer(tmp_path, out)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert (tmp_path / ".data.zarr.lock").exists()  # the file stays; its lock died
    write_dataset(da.full((20, 3), 3.0, chunks=(7, 3)), da.arange(20.0, chunks=7), out,
                  overwrite=True)
    _intact(out, value=3.0)
    assert not (tmp_path / ".data.zarr.lock").exists()


def test_an_output_being_written_is_refused_for_every_kind(tmp_path):
    from dkrr import RandomFeatureRidge
    from dkrr.errors import OutputBusyError
    from dkrr.io import ingest
    from dkrr.io._model import save_model

    csv = tmp_path / "d.csv"
    csv.write_text("a,t\n1,2\n3,4\n")
    est = RandomFeatureRidge(n_components=4, random_state=0).fit(np.ones((4, 2)), np.ones(4))
    out = tmp_path / "out"
    writers = {
        "dataset": lambda: write_dataset(np.ones((4, 2)), np.ones(4), out, overwrite=True),
        "ingest": lambda: ingest(csv, out, target="t", overwrite=True),
        "predictions": lambda: write_predictions(np.ones(4), out, overwrite=True),
        "model": lambda: save_model(est, out, overwrite=True),
        "check_output": lambda: check_output(out, overwrite=True),
    }
    with atomic_output(out, overwrite=True) as tmp:  # a writer of `out` at work
        tmp.mkdir()
        for kind, write in writers.items():
            with pytest.raises(OutputBusyError, match=r"another process \(pid \d+ on .*\) is "
                                                      r"writing .*out right now"):
                write()
            assert not out.exists(), kind
    assert out.is_dir() and not (tmp_path / ".out.lock").exists()


# ------------------------------------------------------------- URLs are not paths

# URLs dkrr cannot use here: no fsspec implementation installed (gcsfs, adlfs), or HTTP(S),
# which cannot be listed nor written. s3://, memory:// and file:// work: tests/test_object_store.py
URLS = ["gs://bucket/d.zarr", "https://host/d.zarr", "abfs://container/d.zarr",
        Path("gs://bucket/d.zarr")]
_REFUSED = r"'{scheme}://.*'(: the fsspec implementation of {scheme}:// is not installed| is an HTTPS URL)"


def _no_url_folders(directory):
    return sorted(p.name for p in Path(directory).iterdir() if p.name.endswith(":"))


@pytest.mark.parametrize("url", URLS, ids=str)
def test_unusable_urls_are_refused_by_every_python_entry_point(tmp_path, monkeypatch, url):
    # s3://bucket/d.zarr used to become the local folder ./s3:/bucket/d.zarr; a URL is
    # never a local path: it is an object store's, or refused with the fix
    from dkrr import RandomFeatureRidge
    from dkrr.errors import InvalidParameterError
    from dkrr.io import ingest
    from dkrr.io._model import load_model, save_model

    monkeypatch.chdir(tmp_path)
    csv = tmp_path / "d.csv"
    csv.write_text("a,t\n1,2\n3,4\n")
    est = RandomFeatureRidge(n_components=4, random_state=0).fit(np.ones((4, 2)), np.ones(4))
    calls = {
        "ingest input": lambda: ingest(url, tmp_path / "x.zarr", target="t"),
        "ingest output": lambda: ingest(csv, url, target="t"),
        "open_dataset": lambda: open_dataset(url),
        "write_dataset": lambda: write_dataset(np.ones((4, 2)), np.ones(4), url),
        "write_predictions": lambda: write_predictions(np.ones(4), url),
        "save_model": lambda: save_model(est, url),
        "load_model": lambda: load_model(url),
        "check_output": lambda: check_output(url),
        "check_output input": lambda: check_output(tmp_path / "o", inputs=[url]),
        "atomic_output": lambda: atomic_output(url).__enter__(),
    }
    scheme = str(url).split(":")[0]
    for name, call in calls.items():
        with pytest.raises(InvalidParameterError, match=_REFUSED.format(scheme=scheme)):
            call()
    assert _no_url_folders(tmp_path) == [] and not (tmp_path / "x.zarr").exists()


def test_what_is_not_a_url(tmp_path):
    from dkrr.io._paths import locate, url_scheme

    assert locate("file:///data/d.zarr") == "/data/d.zarr"  # a local path, as a URL
    for local in ["C:/data/d.zarr", "C:\\data\\d.zarr", "d.zarr", "./s3:/bucket/d.zarr",
                  "/data/s3://x", "data:set.zarr", b"/data/d.zarr", Path("a/b")]:
        assert url_scheme(local) is None, local
        assert locate(local) is local
    # a local name ending with a colon is still reachable as ./name:
    out = check_output(tmp_path / "s3:" / "d.zarr")
    assert out.parent.name == "s3:"


def test_file_urls_name_the_local_path_rfc_8089_gives(tmp_path, monkeypatch, capsys):
    """``file:/ABS`` (RFC 8089's one-slash form, and what pathlib makes of ``file:///ABS``)
    was made ``file://ABS``, read as a relative path: ``dkrr ingest d.csv --out
    file:/tmp/x.zarr`` wrote ``./tmp/x.zarr`` under the working directory, and reading
    ``file:/ABS`` named a path that does not exist."""
    from dkrr.cli import main
    from dkrr.io._paths import locate

    for url in ("file:/data/d.zarr", "file:///data/d.zarr", "FILE:///data/d.zarr", "file://localhost/data/d.zarr"):
        assert locate(url) == "/data/d.zarr", url
    for url, said in (("file://data/d.zarr", "names the host 'data'.*write file:///data/d.zarr"),
                      ("file:data/d.zarr", "mistyped URL: write file:///ABSOLUTE/PATH")):
        with pytest.raises(InvalidParameterError, match=said):
            locate(url)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "d.csv").write_text("a,t\n1,2\n3,4\n")
    out = tmp_path / "out.zarr"
    assert main(["ingest", "d.csv", "--out", f"file:{out}", "--target", "t", "-q"]) == 0
    assert out.is_dir() and f"wrote {out}:" in capsys.readouterr().out
    assert sorted(p.name for p in work.iterdir()) == ["d.csv"]  # nothing under the working directory
    assert open_dataset(f"file:{out}").X.shape == (2, 1)


@pytest.mark.parametrize("typo", ["s3//bucket/d.zarr", "s3: //bucket/d.zarr", "s3:bucket/d.zarr", "GS//bucket/d.zarr"])
def test_a_mistyped_url_is_not_made_a_local_folder(tmp_path, monkeypatch, capsys, typo):
    """``--out s3//bucket/d.zarr`` (the colon left out) wrote the local folder
    ``./s3/bucket/d.zarr`` without a word; a folder of that name is still ``./s3//...``."""
    from dkrr.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.csv").write_text("a,t\n1,2\n3,4\n")
    code = main(["ingest", "d.csv", "--out", typo, "--target", "t", "-q"])
    err = capsys.readouterr().err
    name = typo.split(":")[0].split("/")[0]
    assert code != 0 and f"looks like a mistyped URL: write {name.lower()}://BUCKET/KEY" in err, err
    assert f"error: --out {typo!r} looks like" in err  # the option, as the user wrote it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv"]
    assert main(["ingest", "d.csv", "--out", f"./{typo}", "--target", "t", "-q"]) == 0  # a local folder, said so
    assert (tmp_path / typo).is_dir()


@pytest.mark.parametrize("argv", [
    ["ingest", "{csv}", "--out", "gs://bucket/d.zarr", "--target", "t"],
    ["ingest", "gs://bucket/d.csv", "--out", "d.zarr", "--target", "t"],
    ["fit", "gs://bucket/d.zarr", "--out", "m"],
    ["fit", "{store}", "--out", "gs://bucket/m"],
    ["predict", "{model}", "{store}", "--out", "abfs://bucket/p.zarr"],
    ["predict", "gs://bucket/m", "{store}", "--out", "p.zarr"],
    ["evaluate", "{model}", "https://host/d.zarr"],
], ids=lambda a: " ".join(a[:1] + [x for x in a if "://" in x]))
def test_unusable_urls_are_refused_by_the_cli(tmp_path, monkeypatch, capsys, argv):
    from dkrr import RandomFeatureRidge
    from dkrr.cli import main
    from dkrr.io._model import save_model

    monkeypatch.chdir(tmp_path)
    csv = tmp_path / "d.csv"
    csv.write_text("a,t\n1,2\n3,4\n")
    store = _dataset(tmp_path / "data.zarr")
    model = tmp_path / "model"
    save_model(RandomFeatureRidge(n_components=4, random_state=0).fit(np.ones((4, 3)), np.ones(4)),
               model)
    args = [a.format(csv=csv, store=store, model=model) for a in argv]
    if argv[0] != "ingest":  # nothing may reach a scheduler
        args += ["--scheduler", "tcp://127.0.0.1:9"]
    code = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert re.fullmatch(rf"dkrr {argv[0]}: error: .* '\w+://.*'(: the fsspec implementation of "
                        r"\w+:// is not installed: .*(gcsfs|adlfs).*| is an HTTPS URL: .*)", err[0]), err
    assert _no_url_folders(tmp_path) == []
    assert not {"d.zarr", "m", "p.zarr"} & set(os.listdir(tmp_path))


def test_the_drain_waits_for_a_write_fused_into_its_finalize_task(tmp_path):
    """Computed on a Client, a store write of one block is fused (with dask's array query
    planning) into its finalize task, whose key names no token: the drain after a Ctrl-C
    found nothing running, the temporary store was removed, and the still-running write
    made it again (a hidden .NAME.tmp-* left by `dkrr predict`, 3 runs in 3). A real
    LocalCluster runs a write whose block takes a second; it is cancelled while it runs,
    and the drain returns only once the block is written."""
    from distributed import Client, LocalCluster

    from dkrr.io._drain import _drain, store_tasks

    def slow(block):
        time.sleep(1.5)
        return block + 1.0

    target = zarr.open_array(str(tmp_path / "a.zarr"), mode="w", shape=(8,), chunks=(8,), dtype="f8")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        tasks = store_tasks([da.zeros(8, chunks=8).map_blocks(slow, dtype="f8")], [target])
        futures = client.compute(tasks)
        deadline = time.monotonic() + 30
        while not any(client.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # the block is running
        client.cancel(futures)
        _drain(client, tasks)
        written = (tmp_path / "a.zarr" / "c" / "0").exists()
    assert written, "the drain returned while the write was still running"
