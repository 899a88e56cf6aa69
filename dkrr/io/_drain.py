"""The tasks that write a store, running them, and waiting for them when they fail.

:func:`store_tasks` makes the writes: one ``map_blocks`` task per block of each source,
named ``dkrr-store-<token>`` (the token of the source and of the target array's path), that
writes the block into its region of the Zarr array and returns an empty array
(``dask.array.store`` is not available with dask's array query planning).

When a store write fails or is interrupted (Ctrl-C, SIGTERM), blocks already running
keep writing for a moment; the temporary store may be deleted only once none is left.
This is the one place that knows how to wait: with the threaded scheduler by shutting
down a private thread pool, with a distributed client (the one
:func:`dkrr._system.distributed_client` returns) by cancelling and polling the scheduler
and the workers for tasks of the write layers (the names of the write arrays' keys).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dask
import dask.threaded
import numpy as np
from dask.base import get_scheduler, tokenize
from dask.system import CPU_COUNT

from .._failures import cluster_failures_named
from .._system import distributed_client

__all__ = ["drain_keys", "run_store_tasks", "store_tasks"]


def _key_name(key: Any) -> str:
    return str(key[0] if isinstance(key, tuple) else key)


def _write_block(block, target, token, block_info=None):
    """Write one block into its region of ``target``; a one-element array of the block's
    rank (a write array of empty blocks lost its writes with query planning on a Client:
    dask skipped blocks of a result with no elements). ``token`` (the target's path) only
    makes the task's key: dask's array query planning names the task from its arguments,
    and a Zarr array's token covers its metadata, not its path."""
    region = tuple(slice(start, stop) for start, stop in block_info[0]["array-location"])
    target[region] = block
    return np.ones((1,) * block.ndim, dtype=np.int8)


def store_tasks(sources: list, targets: list) -> list:
    """One dask array per source whose blocks write it into ``targets[i]`` (a Zarr array
    chunked so that every block covers whole chunks: no two tasks write one chunk);
    computing them writes the store and returns an array of ones, one per block."""
    tasks = []
    for src, target in zip(sources, targets):
        token = tokenize(src.name, str(target.store_path), target.shape, target.chunks)
        tasks.append(src.map_blocks(
            _write_block, target, token, dtype=np.int8, chunks=tuple((1,) * n for n in src.numblocks),
            meta=np.empty((0,) * src.ndim, dtype=np.int8), name=f"dkrr-store-{token}",
        ))
    return tasks


def _running_store_tasks(dask_worker, names):  # runs on each worker via Client.run
    # Graph optimisation may fuse layers into a renamed key ("arange-dkrr-store-<token>"
    # for "dkrr-store-<token>"), so a key matches when it contains one of the names.
    tasks = set(dask_worker.state.executing) | set(dask_worker.state.long_running)
    return sum(any(n in _key_name(ts.key) for n in names) for ts in tasks)


def _store_layer_names(tasks: list) -> set[str]:
    """Key names of the tasks that write into the store (the output keys of the write
    arrays, :func:`store_tasks`); the inputs' own keys are left out, so the wait never
    follows unrelated work that shares them."""
    from ..linalg._reduce import flat_keys

    # computed on a Client with dask's array query planning, a graph of one block is fused
    # into its finalize task, "dkrr-dkrr-store-finalize-hlgfinalizecompute-<hash>", which
    # names no token: left out, a cancelled predict's write went on after the temporary
    # store was removed and made it again (a Ctrl-C at a terminal, 3 runs in 3)
    return {_key_name(key) for t in tasks for key in flat_keys(t.__dask_keys__())} | {_FINALIZE}


#: what the fused finalize task of a store write has in its key (:func:`_store_layer_names`)
_FINALIZE = "dkrr-store-finalize"


def _drain(client, tasks: list, timeout: float = 60.0) -> None:
    """Wait until no task of `tasks` is still pending on the scheduler or running."""
    drain_keys(client, _store_layer_names(tasks), timeout)


def drain_keys(client, names: set[str], timeout: float = 60.0) -> None:
    """Wait until no task whose key contains one of `names` is still pending on the
    scheduler or running on a worker.

    The caller has cancelled or released the futures; until the scheduler has processed
    that, queued tasks may still be started, so both the scheduler's pending tasks and
    the workers' running ones are polled.
    """

    def pending_store_tasks(dask_scheduler, names):
        # Runs on the scheduler; self-contained (pickled by value) so that the scheduler
        # need not import dkrr.
        pending = ("waiting", "queued", "no-worker", "processing")
        return sum(
            ts.state in pending and any(n in str(ts.key[0] if isinstance(ts.key, tuple) else ts.key) for n in names)
            for ts in dask_scheduler.tasks.values()
        )

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pending = client.run_on_scheduler(pending_store_tasks, names=names)
            running = client.run(_running_store_tasks, names=names)
        except Exception:  # noqa: BLE001 - workers gone or client closing: nothing more to do
            return
        if not pending and not any(running.values()):
            return
        time.sleep(0.05)


def run_store_tasks(tasks: Any, compute: Callable[[list], Any] | None) -> None:
    """Run the store tasks (dask collections whose results are small arrays, :func:`store_tasks`).

    When it fails, blocks that were already running keep writing for a moment; to
    let the caller delete the temporary store afterwards, this waits for them: with
    the threaded scheduler by shutting down its own thread pool, with a distributed
    client by cancelling the rest and polling the workers until none still runs a
    block. A custom `compute` must cancel or release its futures when it fails; the
    wait that follows is done here when a distributed client is the default.
    """
    tasks = list(tasks) if isinstance(tasks, (list, tuple)) else [tasks]
    if compute is not None:
        try:
            compute(tasks)
        except BaseException:  # KeyboardInterrupt included: stop the blocks still writing
            client = distributed_client()
            if client is not None:
                _drain(client, tasks)
            raise
        return
    client = distributed_client()
    if client is not None:
        futures = client.compute(tasks)
        try:
            with cluster_failures_named("writing the store"):
                client.gather(futures)
        except BaseException:
            client.cancel(futures)
            _drain(client, tasks)
            raise
    elif get_scheduler(collections=tasks) is dask.threaded.get:
        pool = ThreadPoolExecutor(max(1, dask.config.get("num_workers", None) or CPU_COUNT))
        try:
            dask.compute(*tasks, scheduler="threads", pool=pool)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        dask.compute(*tasks)
