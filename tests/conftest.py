"""Shared fixtures: the same test on dask's threaded scheduler and on a real LocalCluster.

The cluster (2 worker processes x 1 thread, bound to 127.0.0.1) is started once per test
session and each ``scheduler="distributed"`` test connects its own Client to it, so the
threaded runs never see a default client.
"""

import os
import signal
import tempfile
from pathlib import Path

import dask
import pytest

# The project's offline data copies sit beside the checkout in CI (../shared/data): use
# them as dkrr.datasets' mirror unless one is named already. A clone without them skips
# the tests that need real data other than what dkrr/data ships.
_SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
if "DKRR_DATA_MIRROR" not in os.environ and _SHARED_DATA.is_dir():
    os.environ["DKRR_DATA_MIRROR"] = str(_SHARED_DATA)

# pytest-xdist's worker processes start with SIGINT ignored, a disposition that survives
# exec: Ctrl-C tests (in process, or of a `dkrr` subprocess) would then see no
# KeyboardInterrupt. Restore Python's handler, as an interactive run has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_under_basetemp(tmp_path_factory):
    """Every temporary file of the run goes under pytest's base temporary folder.

    ``tempfile`` in this process and ``TMPDIR`` for every process it starts (LocalCluster
    workers and their ``dask-scratch-space``, ``dkrr`` subprocesses, notebook kernels,
    scikit-learn's memmaps) point there; pytest deletes that folder after a run that
    passed (``tmp_path_retention_policy = "failed"`` in pyproject.toml), so the suite
    leaves nothing in /tmp.
    """
    tmp = str(tmp_path_factory.mktemp("tmp", numbered=False))
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = tmp
    try:
        yield tmp
    finally:
        if saved[0] is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]


@pytest.fixture(scope="session")
def local_cluster():
    """A real ``distributed.LocalCluster``: 2 worker processes with 1 thread each."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0", memory_limit="1GiB",
    ) as cluster:
        yield cluster


@pytest.fixture(params=["threads", "distributed"])
def scheduler(request):
    """Run the test with the threaded scheduler (no client) or a Client on the cluster."""
    if request.param == "threads":
        with dask.config.set(scheduler="threads"):
            yield "threads"
        return
    import distributed

    cluster = request.getfixturevalue("local_cluster")
    with distributed.Client(cluster) as client:
        yield client


def pytest_runtest_setup(item):
    """``@pytest.mark.classic_dask_array("what")``: the test's own code (not dkrr's) uses a
    part of dask.array that dask's array query planning does not implement (e.g. ``@``,
    ``map_blocks`` with ``block_info``, ``from_delayed``): skipped when query planning is
    on (``scripts/test.sh --query-planning``), with the reason. dkrr's own code must work
    either way."""
    marker = item.get_closest_marker("classic_dask_array")
    if marker is None:
        return
    import dask
    import dask.array  # noqa: F401  (the setting is read when dask.array is imported)

    if dask.config.get("array.query-planning", False):
        pytest.skip(f"the test uses {marker.args[0]}, which dask's array query planning does not implement")
