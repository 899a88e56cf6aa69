"""CSV ingest with pyarrow's reader, in parallel: the same stores and errors as the
hand-written parser it replaced, whatever the number of workers.

``tests/data/csv_parity.json`` holds what the hand-written parser (dkrr before issue 24)
wrote for the shipped CSV files and for awkward small CSVs (blank and whitespace-only
lines, CRLF and a byte order mark, missing cells, labels, several targets, whitespace
delimiters, bad cells, ragged rows): the sha256 of ``X`` and ``y``, their shapes, dtypes
and chunks, the column attributes, or the error's type and message
(``tests/data/make_csv_parity.py`` made it; one message was extended since: the
``missing_error`` case's now also counts the row holding a literal NaN, which
``missing="drop"`` drops with the missing ones). Every store here is written by the real
ingest into a real Zarr store; the parallel tasks run in real threads or on a real
LocalCluster.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import threading
import time
import tracemalloc
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr

from dkrr.errors import InputValidationError, MissingValueError, NonFiniteInputError
from dkrr.io import ingest

DATA = Path(__file__).resolve().parent / "data"
PARITY = json.loads((DATA / "csv_parity.json").read_text())
_spec = importlib.util.spec_from_file_location("make_csv_parity", DATA / "make_csv_parity.py")
make_csv_parity = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_csv_parity)


def _store(path):
    g = zarr.open_group(str(path), mode="r")
    return g["X"][...], g["y"][...], dict(g.attrs), g


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("blocksize", [None, 2048], ids=["one-pass", "segments"])
@pytest.mark.parametrize("name", sorted(PARITY))
def test_csv_matches_the_hand_written_parser(tmp_path, name, blocksize):
    case = dict(PARITY[name])
    if "shipped" in case and blocksize is not None:
        pytest.skip("compressed: converted in one pass")
    if blocksize is not None:
        case["kwargs"] = {**case["kwargs"], "blocksize": blocksize}
    with dask.config.set(num_workers=3):
        assert make_csv_parity.run(case, tmp_path) == case["old"]
    assert _leftovers(tmp_path) == []


def _labelled_csv(path: Path, n: int = 3000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = np.round(rng.standard_normal((n, 3)), 4)
    kinds = np.array(["zebra", "ant", "moth", "emu"])[rng.integers(0, 4, n)]
    # "emu" first appears late, so per-segment codes differ from the final ones
    kinds[: n // 2][kinds[: n // 2] == "emu"] = "ant"
    lines = ["a,b,c,kind"] + [f"{r[0]},{r[1]},{r[2]},{k}" for r, k in zip(X, kinds)]
    lines.insert(700, "")  # a blank line inside a segment
    path.write_text("\n".join(lines) + "\n")
    return X


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_parallel_result_does_not_depend_on_the_number_of_workers(tmp_path, workers):
    src = tmp_path / "d.csv"
    X = _labelled_csv(src)
    ingest(src, tmp_path / "one.zarr", chunk_rows=100, blocksize=2**30)
    calls = []
    with dask.config.set(num_workers=workers):
        s = ingest(src, tmp_path / "par.zarr", chunk_rows=100, blocksize=5000,
                   progress=lambda *a: calls.append(a))
    X1, y1, a1, g1 = _store(tmp_path / "one.zarr")
    X2, y2, a2, g2 = _store(tmp_path / "par.zarr")
    np.testing.assert_array_equal(X2, X.astype(np.float32))
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert a1 == {**a2, "source": a1["source"]} and a2["classes"] == ["ant", "emu", "moth", "zebra"]
    assert g2["X"].chunks == (100, 3) and g2["X"].shape == (3000, 3)
    assert s.n_rows == 3000
    # progress, in this thread: one call per chunk at least, rows and bytes up to the totals
    assert len(calls) >= 30 and calls[-1] == (3000, src.stat().st_size, src.stat().st_size)
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(calls, calls[1:]))


def test_first_error_in_file_order_whatever_the_segments(tmp_path):
    rows = [f"{i}.5,{i},{i % 7}" for i in range(4000)]
    bad = list(rows)
    bad[3500] = "1,oops,2"  # a later segment
    bad[400] = "1,2,x3"  # the first segment: its error is the one reported
    src = tmp_path / "bad.csv"
    src.write_text("a,b,c\n" + "\n".join(bad) + "\n")
    for workers in (1, 3):
        with dask.config.set(num_workers=workers), pytest.raises(
                InputValidationError, match=r"^line 402, target column 2 \('c'\): cannot parse 'x3'"):
            ingest(src, tmp_path / "o.zarr", chunk_rows=50, blocksize=4000)
    assert not (tmp_path / "o.zarr").exists() and _leftovers(tmp_path) == []

    # a NaN before a missing cell is the error; a missing cell before a NaN gathers all
    nan_first = list(rows)
    nan_first[300], nan_first[3000] = "nan,1,2", "1,,2"
    src.write_text("a,b,c\n" + "\n".join(nan_first) + "\n")
    with pytest.raises(NonFiniteInputError, match=r"line 302, column 0 \('a'\): value is nan"):
        ingest(src, tmp_path / "o.zarr", chunk_rows=50, blocksize=4000)
    missing_first = list(rows)
    missing_first[300], missing_first[3000], missing_first[3900] = "1,,2", "nan,1,2", "3,NA,4"
    src.write_text("a,b,c\n" + "\n".join(missing_first) + "\n")
    with pytest.raises(MissingValueError, match=r"2 rows have missing values.*line 302, column 1 "
                                                r"\('b'\): ''; line 3902, column 1 \('b'\): 'NA'"):
        ingest(src, tmp_path / "o.zarr", chunk_rows=50, blocksize=4000)
    assert _leftovers(tmp_path) == []


def test_interrupted_parallel_ingest_leaves_nothing_and_stops_its_threads(tmp_path):
    src = tmp_path / "d.csv"
    _labelled_csv(src, n=20000)
    out = tmp_path / "out.zarr"
    ingest(src, out, chunk_rows=500, blocksize=2**30)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))

    def interrupt(rows, done, total):
        if rows >= 2000:
            raise KeyboardInterrupt

    with dask.config.set(num_workers=3), pytest.raises(KeyboardInterrupt):
        ingest(src, out, chunk_rows=500, blocksize=20000, overwrite=True, progress=interrupt)
    assert not [t for t in threading.enumerate() if t.name.startswith("dkrr-ingest")]
    time.sleep(0.2)  # nothing writes into a removed temporary store afterwards
    assert _leftovers(tmp_path) == [] and sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_parallel_memory_is_bounded_by_the_chunks_not_the_file(tmp_path):
    rng = np.random.default_rng(1)
    src = tmp_path / "big.csv"
    np.savetxt(src, np.round(rng.standard_normal((120_000, 10)), 4), fmt="%.4f", delimiter=",")
    size = src.stat().st_size
    small = tmp_path / "small.csv"
    small.write_text("1,2\n3,4\n")
    ingest(small, tmp_path / "small.zarr")  # lazy imports and codec set-up
    gc.collect()
    tracemalloc.start()
    try:
        with dask.config.set(num_workers=2):
            s = ingest(src, tmp_path / "big.zarr", chunk_rows=1000, blocksize=2**20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert s.n_rows == 120_000
    assert peak < size / 3, (peak, size)


@pytest.mark.cluster
def test_parallel_ingest_on_the_workers_of_a_local_cluster(tmp_path):
    from distributed import get_task_stream

    from dkrr.cluster import local_cluster

    src = tmp_path / "d.csv"
    _labelled_csv(src)
    ingest(src, tmp_path / "threads.zarr", chunk_rows=100, blocksize=5000)
    with local_cluster(n_workers=2, processes=False, dashboard=False, quiet=True) as client:
        with get_task_stream(client) as stream:
            ingest(src, tmp_path / "cluster.zarr", chunk_rows=100, blocksize=5000)
        workers = set(client.scheduler_info()["workers"])
    tasks = [t for t in stream.data if str(t["key"]).startswith("dkrr-ingest-")]
    assert len(tasks) >= 5 and {t["worker"] for t in tasks} <= workers
    a, b = _store(tmp_path / "threads.zarr"), _store(tmp_path / "cluster.zarr")
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert a[2]["classes"] == b[2]["classes"]


def test_csv_features_choose_and_order_columns_and_like_follows_them(tmp_path):
    src = tmp_path / "d.csv"
    src.write_text("id,a,b,c,y\n" + "".join(f"{i},{i}.5,{-i},{i % 3},{i * 2}\n" for i in range(40)))
    s = ingest(src, tmp_path / "d.zarr", target="y", features=["c", 1], chunk_rows=8,
               blocksize=100)  # segments too
    X, y, attrs, _ = _store(tmp_path / "d.zarr")
    assert s.feature_names == ["c", "a"] and attrs["feature_columns"] == [3, 1]
    np.testing.assert_array_equal(X, [[i % 3, i + 0.5] for i in range(40)])
    np.testing.assert_array_equal(y, [i * 2 for i in range(40)])
    test = tmp_path / "t.csv"
    test.write_text("id,a,b,c,y\n7,1.5,-1,2,9\n")
    s = ingest(test, tmp_path / "t.zarr", like=tmp_path / "d.zarr")
    assert s.feature_names == ["c", "a"] and _store(tmp_path / "t.zarr")[0].tolist() == [[2, 1.5]]
    with pytest.raises(InputValidationError, match=r"feature column 'zz' not found.*'id', 'a'"):
        ingest(src, tmp_path / "e.zarr", features=["zz"])
    with pytest.raises(InputValidationError, match=r"line 3, column 1 \('b'\): cannot parse 'x'"):
        bad = tmp_path / "bad.csv"
        bad.write_text("a,b,c\n1,2,3\n4,x,6\n")
        ingest(bad, tmp_path / "e.zarr", features=["a", "b"])  # a feature cell that is not a number
    # a column that is neither feature nor target is split (counted) but not read
    bad.write_text("a,b,c\n1,2,3\n4,x,6\n")
    assert ingest(bad, tmp_path / "ok.zarr", features=["a"], target="c").n_rows == 2
