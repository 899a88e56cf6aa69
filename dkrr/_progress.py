"""Computing dask collections with an optional terminal progress bar.

With a distributed Client the bar follows the scheduler (so it works against a remote
cluster: :class:`distributed.diagnostics.progressbar.TextProgressBar` polls the scheduler
over its comm); without one, dask's local :class:`dask.diagnostics.ProgressBar` is used.
Progress goes to stderr, so piping a command's stdout stays clean.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import dask

__all__ = ["active_client", "compute", "compute_limited", "progress_enabled", "set_progress"]

_STATE = {"enabled": False, "stream": None}


def set_progress(enabled: bool, stream=None) -> None:
    """Turn progress bars on or off for every later :func:`compute` in this process."""
    _STATE["enabled"] = bool(enabled)
    _STATE["stream"] = stream


def progress_enabled() -> bool:
    return bool(_STATE["enabled"])


@contextlib.contextmanager
def _local_bar(label: str):
    from dask.diagnostics import ProgressBar

    stream = _STATE["stream"] or sys.stderr
    print(label, file=stream, flush=True)
    with ProgressBar(out=stream, dt=0.5):
        yield


def active_client():
    """The default distributed Client if one is active, else ``None``."""
    try:
        from distributed import default_client
    except ImportError:  # pragma: no cover
        return None
    try:
        return default_client()
    except ValueError:
        return None


def compute(*collections: Any, label: str = "computing", **kwargs) -> tuple:
    """``dask.compute(*collections)`` with a progress bar when progress is enabled.

    Uses the active distributed Client if there is one (then the bar tracks the
    scheduler's task states), else the scheduler configured in dask.
    """
    if not _STATE["enabled"]:
        return dask.compute(*collections, **kwargs)
    client = active_client()
    if client is None:
        with _local_bar(label):
            return dask.compute(*collections, **kwargs)
    from distributed.diagnostics.progressbar import TextProgressBar

    futures = client.compute(list(collections), **kwargs)
    try:
        stream = _STATE["stream"] or sys.stderr
        print(label, file=stream, flush=True)
        # futures carry their client, so the bar connects with its security settings (TLS)
        with contextlib.redirect_stdout(stream):
            TextProgressBar(futures, scheduler=client.scheduler.address, complete=True)
        return tuple(client.gather(futures))
    except BaseException:  # Ctrl-C or a failed task: stop the rest of the work now
        client.cancel(futures)
        raise


def compute_limited(*collections, label: str = "computing", n_tasks: int | None = None):
    """``dask.compute`` (with dkrr's optional progress bar) that keeps BLAS at one thread
    per dask thread when no distributed Client is active.

    ``n_tasks``: how many tasks can run at once; when they are fewer than the threaded
    scheduler's threads, each gets ``threads // n_tasks`` BLAS threads instead of one
    (a fit of one block uses every core).
    """
    if active_client() is not None:
        return compute(*collections, label=label)
    from dask.system import CPU_COUNT

    from ._blas import limit_blas_threads

    blas_threads = max(1, CPU_COUNT // n_tasks) if n_tasks else 1
    with limit_blas_threads(blas_threads):
        return compute(*collections, label=label)
