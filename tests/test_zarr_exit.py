"""A process that ends while Zarr's I/O thread is busy (a chunk read of a task cut short
by Ctrl-C) exits without a traceback: dkrr's exit handler, registered after Zarr's, stops
Zarr's loop and waits for its thread, where Zarr's own handler waits 0.2 s and then closes
the loop under the running read ("Cannot close a running event loop", seen when a Ctrl-C
test ran on a loaded machine). Each case is a real process whose Zarr I/O thread is
blocked for 0.8 s as it exits; without dkrr's handler the same process prints Zarr's
traceback (so the test can tell)."""

from __future__ import annotations

import subprocess
import sys

import pytest

# a real process with Zarr's loop and I/O thread running, and dkrr's exit handler when its
# first argument is "dkrr" (else Zarr's own alone)
START = r"""
import asyncio, sys, time
import numpy as np
import zarr
import zarr.core.sync as sync
from dkrr._worker_setup import let_zarr_io_finish_at_exit

if sys.argv[1] == "dkrr":
    let_zarr_io_finish_at_exit()
a = zarr.create_array(store={}, shape=(8,), dtype="f8")  # Zarr's loop and I/O thread now run
a[:] = np.arange(8.0)
"""

SCRIPT = START + r"""
started = []

async def busy():  # a read that holds the I/O thread, as a decode or a slow store does
    started.append(True)
    time.sleep(0.8)

asyncio.run_coroutine_threadsafe(busy(), sync.loop[0])
while not started:
    time.sleep(0.01)
print("exiting", flush=True)
"""


def _exited(script: str, handler: str) -> str:
    """The stderr of `script` run in a process of its own, which must exit 0 after "exiting"."""
    proc = subprocess.run([sys.executable, "-c", script, "dkrr" if handler == "dkrr" else "none"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "exiting\n", proc.stderr
    return proc.stderr


@pytest.mark.parametrize("handler", ["dkrr", "zarr's alone"])
def test_an_exit_during_a_zarr_read_has_no_traceback(handler):
    err = _exited(SCRIPT, handler)
    if handler == "dkrr":
        assert err == "", err
    else:  # the race this guards against, reproduced: the test would see it
        assert "Cannot close a running event loop" in err, err


def test_the_handler_is_registered_once(monkeypatch):
    import atexit

    import dkrr._worker_setup as setup

    calls = []
    monkeypatch.setattr(setup, "_REGISTERED", [])
    monkeypatch.setattr(atexit, "register", lambda fn: calls.append(fn))
    setup.let_zarr_io_finish_at_exit()
    setup.let_zarr_io_finish_at_exit()
    # once, and last: after Zarr's own handler where importing Zarr registered it just now
    assert calls.count(setup._finish_zarr_io) == 1 and calls[-1] is setup._finish_zarr_io


# a read left pending on Zarr's loop as the process ends: what a failed read leaves behind
# (Zarr reads a slice's chunks as concurrent tasks and returns the first error; the others
# go on, e.g. retrying an object store that went away)
PENDING = START + r"""
async def retrying():  # a chunk request that waits on a server that does not answer
    try:
        await asyncio.Event().wait()
    finally:
        await asyncio.sleep(0)  # its clean-up awaits too, as aiobotocore's does

for _ in range(3):
    asyncio.run_coroutine_threadsafe(retrying(), sync.loop[0])
print("exiting", flush=True)
"""


@pytest.mark.parametrize("handler", ["dkrr", "zarr's alone"])
def test_reads_left_pending_on_zarrs_loop_end_without_a_word(handler):
    err = _exited(PENDING, handler)
    if handler == "dkrr":  # cancelled in their tasks before the loop stops
        assert err == "", err
    else:  # destroyed pending when Zarr closes its loop: a line (and more) each
        assert err.count("Task was destroyed but it is pending!") == 3, err
