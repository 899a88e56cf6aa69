"""How statistics objects travel between Dask processes (dkrr.linalg._wire).

distributed pickles a type it does not know, which cost the sending worker two extra
copies of a statistics object while it was gathered (a worker of 4 GB holding the 1.36 GB
statistics of D = 4096, cv = 5 was restarted by its nanny). The tests: the registered
serializer sends every array as a frame of its own memory and restores every part
(packed G, labels, absent parts); ``dask.sizeof`` reports the parts' bytes; and a worker
gathering a real block task's statistics by the client grows by far less than the object.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from dask.sizeof import sizeof

from dkrr.linalg._stats import RidgeStatistics, block_statistics


def _fmap(d, D):
    from dkrr import RandomFeatures

    return RandomFeatures(method="rff", n_components=D, gamma=0.3, random_state=0).fit(np.zeros((2, d))).feature_map_


def _labelled():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    y = np.array(["b", "a", "c", "a", "b"] * 10)
    return block_statistics(X, y, 0, 0, _fmap(3, 100), 3, 5, labels_mode=True, with_norms=True)


def test_sizeof_is_the_bytes_of_the_parts():
    s = _labelled()
    parts = [getattr(s, k) for k in s.PARTS if getattr(s, k) is not None]
    assert sizeof(s) == sum(a.nbytes for a in parts) > s.G.nbytes


def test_statistics_are_sent_as_frames_of_their_own_arrays():
    from distributed.protocol import deserialize, serialize

    s = _labelled()
    header, frames = serialize(s)
    assert header["serializer"] == "dask"
    views = [np.frombuffer(memoryview(f).cast("B"), dtype=np.uint8) for f in frames]
    assert any(np.shares_memory(v, s.G) for v in views)  # no copy of the Gram
    back = deserialize(header, frames)
    assert type(back) is RidgeStatistics and back.packed
    for k in ("G", "c", "zsum", "n", "ysum", "zsq"):
        np.testing.assert_array_equal(getattr(back, k), getattr(s, k))
        assert getattr(back, k).dtype == getattr(s, k).dtype
    assert back.yy is not None and back.wsum is None
    assert list(back.labels) == ["a", "b", "c"]


def _rss(pid):
    with open(f"/proc/{pid}/status") as f:
        return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.startswith(("VmRSS", "VmHWM"))}


def test_gathering_statistics_costs_the_worker_no_copy(local_cluster):
    """p = 2048, K = 10 (178 MB): the worker's peak RSS while the client gathers the object
    rises by less than a quarter of it (pickled whole, it rose by twice its size)."""
    distributed = pytest.importorskip("distributed")
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux /proc to reset a process's peak RSS")
    X = np.random.default_rng(1).standard_normal((40, 3))
    with distributed.Client(local_cluster) as client:
        f = client.submit(block_statistics, X, X[:, 0], 0, 0, _fmap(3, 1024), 10, 7, pure=False)
        size = client.submit(sizeof, f).result()
        (addr,) = client.who_has(f)[f.key]
        pid = client.run(os.getpid, workers=[addr])[addr]
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")  # the worker's VmHWM := its VmRSS
        before = _rss(pid)
        s = f.result()
        after = _rss(pid)
        del f
    assert size > 170e6 and s.packed and s.G.shape == (10, 2048 * 2049 // 2 + 16 * (128 * 127 // 2))
    assert after["VmHWM"] - before["VmRSS"] < 0.25 * size, (after["VmHWM"] - before["VmRSS"]) / size
