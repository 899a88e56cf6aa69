"""Computing dask collections with an optional terminal progress bar.

With a distributed Client the bar follows the scheduler (so it works against a remote
cluster: :class:`distributed.diagnostics.progressbar.TextProgressBar` polls the scheduler
over its comm); without one, dask's local :class:`dask.diagnostics.ProgressBar` is used.
Progress goes to stderr, so piping a command's stdout stays clean. On a terminal the bar
redraws in place; when the stream is not a terminal (a batch job's log file, a pipe) the
redraws become plain lines (:class:`LogGate`): the bar's label when it starts, then a line
only once both :data:`LOG_STEP` percentage points of its tasks and :data:`LOG_INTERVAL`
seconds have passed since the previous one (whichever is rarer), and its last state when
it ends - so a bar leaves at most 11 lines in a log however long it runs, and a bar of
less than 30 s two, instead of one line of thousands of carriage returns. The
``DKRR_PROGRESS_INTERVAL`` environment variable (seconds, >= 0) sets another interval.

An iterative solve (PCG: a pass per iteration) is one line for all its passes
(:func:`solve_progress`), ``pcg: iteration 12, residual 3.1e-05``, redrawn in place on a
terminal; in a log a first line, then the same rule over the solve's progress, and its
last state: at most 11 lines a solve however many iterations it makes.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import sys
import threading
import time
from typing import Any

import dask

from ._failures import cluster_failures_named
from ._system import distributed_client

__all__ = ["INTERVAL_ENV", "LOG_INTERVAL", "LOG_STEP", "LogGate", "cluster_failures_named",
           "compute", "compute_limited", "log_interval", "progress_enabled", "progress_set",
           "set_progress", "solve_progress"]

#: whether bars are drawn, on which stream (None: stderr), and the solve whose line the
#: passes draw on (:func:`solve_progress`)
_STATE = {"enabled": False, "stream": None, "solve": None}

#: the least seconds between two progress lines when the stream is not a terminal
LOG_INTERVAL = 30.0
#: the least percentage points of the tasks between two progress lines in a log
LOG_STEP = 10.0
#: the environment variable that sets another :data:`LOG_INTERVAL` (seconds, >= 0)
INTERVAL_ENV = "DKRR_PROGRESS_INTERVAL"


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def log_interval() -> float:
    """The least seconds between two progress lines in a log: :data:`LOG_INTERVAL`, or the
    value of the ``DKRR_PROGRESS_INTERVAL`` environment variable when it is set.

    Raises
    ------
    InvalidParameterError
        If the variable is not a finite number >= 0.
    """
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return LOG_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        from .errors import InvalidParameterError

        raise InvalidParameterError(
            f"{INTERVAL_ENV}={raw!r}: the seconds between two progress lines in a log must be "
            f"a number >= 0 (unset: {LOG_INTERVAL:g})"
        )
    return value


class LogGate:
    """When a log gets its next progress line: once both ``step`` percentage points of the
    work and ``interval`` seconds have passed since the previous line (or the start),
    whichever is rarer; for work of unknown size (``percent=None``) the interval alone.

    Parameters
    ----------
    interval : float, default=None
        Seconds (``None``: :func:`log_interval`).
    step : float, default=LOG_STEP
        Percentage points.
    """

    def __init__(self, interval: float | None = None, step: float = LOG_STEP):
        self.interval = log_interval() if interval is None else float(interval)
        self.step = float(step)
        self._time = time.monotonic()
        self._percent = 0.0

    def due(self, percent: float | None = None) -> bool:
        """Whether a line is due now at ``percent`` of the work (then it counts as written)."""
        now = time.monotonic()
        if now - self._time < self.interval:
            return False
        if percent is not None and percent - self._percent < self.step:
            return False
        self._time = now
        if percent is not None:
            self._percent = float(percent)
        return True


class _LineLog(io.TextIOBase):
    """A text stream that turns a progress bar's in-place redraws (``\\r...``) into plain
    lines for a log, each prefixed with ``label``: the newest state when a
    :class:`LogGate` (``interval`` seconds, ``step`` points of the bar's ``NN%``) lets it
    through, and once more when the bar is closed."""

    _CLEAR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
    _PERCENT = re.compile(r"(\d+(?:\.\d+)?)% Completed")

    def __init__(self, out, label: str, interval: float | None = None, step: float = LOG_STEP):
        self._out, self._label = out, label
        self._gate = LogGate(interval, step)
        self._pending = ""
        self._written = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        for part in re.split(r"[\r\n]", self._CLEAR.sub("", text)):
            part = part.strip()
            if part:
                self._pending = part
        if self._pending != self._written:
            match = self._PERCENT.search(self._pending)
            if self._gate.due(None if match is None else float(match.group(1))):
                self._emit()
        return len(text)

    def _emit(self) -> None:
        if self._pending and self._pending != self._written:
            print(f"{self._label}: {self._pending}", file=self._out, flush=True)
            self._written = self._pending

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._emit()
        super().close()


class _SolveLine(io.TextIOBase):
    """The one progress line of an iterative solve (:func:`solve_progress`), ``NAME:
    iteration K, residual R`` (R the worst column's relative residual after K iterations),
    the stream its passes' bars draw on: on a terminal redrawn in place, the running pass
    (iteration K + 1) as a short bar; in a log the bars draw nothing, and after a first line
    a line is written when a :class:`LogGate` over :meth:`percent` lets it through, and at
    the end."""

    _WIDTH = 10  # the characters of the pass's bar on a terminal

    def __init__(self, out, name: str, tol: float, max_iter: int):
        self._out, self._name = out, name
        self._tol, self._max_iter = float(tol), int(max_iter)
        self._terminal = _is_terminal(out)
        self._gate = None if self._terminal else LogGate()
        self._iteration, self._residual = 0, None
        self._pass: float | None = None  # the percentage of the pass under way
        self._drawn = 0  # the length of the line on the terminal
        self._written = ""  # the last line of a log
        self._lock = threading.Lock()  # a pass's bar draws from dask's threads
        if not self._terminal:
            print(f"{name}: at most {self._max_iter} iterations to a relative residual of {self._tol:g}",
                  file=out, flush=True)

    def write(self, text: str) -> int:
        """A pass's bar drew ``text``: its percentage goes on the line (terminal)."""
        found = _LineLog._PERCENT.findall(text)
        if found and self._terminal:
            self._pass = float(found[-1])
            self._draw()
        return len(text)

    def _text(self, running: bool) -> str:
        if self._residual is None:
            return f"{self._name}: iteration {self._iteration + running}"
        text = f"{self._name}: iteration {self._iteration + running}, residual {self._residual:.2g}"
        if running and self._pass is not None:
            text += f" [{'#' * int(self._WIDTH * self._pass / 100):<{self._WIDTH}}] {self._pass:3.0f}%"
        return text

    def _draw(self, end: str = "") -> None:
        with self._lock:
            text = self._text(running=not end and self.percent() < 100)  # (at 100 it has ended)
            self._out.write("\r" + text + " " * max(0, self._drawn - len(text)) + end)
            self._out.flush()
            self._drawn = 0 if end else len(text)

    def percent(self) -> float:
        """How far the solve is, 0-100: its iterations' share of ``max_iter`` or, if further,
        ``log(residual) / log(tol)``; 100 only at its end (every column at tol, or max_iter)."""
        done = 100.0 * self._iteration / self._max_iter if self._max_iter > 0 else 100.0
        r, tol = self._residual, self._tol
        if r is not None and math.isfinite(r) and 0 < tol < 1:
            done = max(done, 100.0 if r <= tol else 100.0 * max(0.0, math.log(r) / math.log(tol)))
        return min(done, 100.0)

    def update(self, iteration: int, residual: float) -> None:
        """``iteration`` iterations done, the worst relative residual now ``residual``."""
        self._iteration, self._residual, self._pass = int(iteration), float(residual), None
        if self._terminal:
            self._draw()
        elif self._gate.due(self.percent()):
            self._log()

    def _log(self) -> None:
        text = self._text(running=False)
        if text != self._written:  # the end's line is not the last gated one again
            print(text, file=self._out, flush=True)
            self._written = text

    def finish(self) -> None:
        """The solve ended: its last state, on a line of its own."""
        if self._terminal:
            self._draw(end="\n")
        else:
            self._log()

    def abandon(self) -> None:
        """The solve failed: a terminal's line ends, so that the error starts its own."""
        if self._terminal:
            with contextlib.suppress(OSError, ValueError):
                print(file=self._out, flush=True)


@contextlib.contextmanager
def solve_progress(name: str, *, tol: float, max_iter: int):
    """One progress line for a whole iterative solve, ``name`` its label (:class:`_SolveLine`):
    every :func:`compute` in the block draws its bar on it, not a bar of its own. Yields
    ``update(iteration, residual)``, to call with 0 before the first iteration and after
    each, with the worst column's relative residual. Progress off, or inside another
    solve: nothing is drawn. An exception but a ``KeyboardInterrupt`` (whose ``dkrr`` line
    does it) ends the terminal's line, so that the error starts its own."""
    if not _STATE["enabled"] or _STATE["solve"] is not None:
        yield lambda iteration, residual: None
        return
    line = _SolveLine(_STATE["stream"] or sys.stderr, name, tol, max_iter)
    _STATE["solve"] = line
    try:
        yield line.update
    except Exception:
        line.abandon()
        raise
    else:
        line.finish()
    finally:
        _STATE["solve"] = None


@contextlib.contextmanager
def _bar_stream(label: str):
    """The stream a progress bar draws on: the line of the solve under way
    (:func:`solve_progress`), else the progress stream itself on a terminal, else a
    :class:`_LineLog` over it (closed, so its last state is written, on exit)."""
    if _STATE["solve"] is not None:
        yield _STATE["solve"]
        return
    stream = _STATE["stream"] or sys.stderr
    print(label, file=stream, flush=True)
    if _is_terminal(stream):
        yield stream
        return
    log = _LineLog(stream, label)
    try:
        yield log
    finally:
        log.close()


def _check_collections(collections) -> None:
    """``compute`` takes dask collections only: anything else (a plain integer, a numpy
    array) would reach the progress bar as a task key that never finishes."""
    for i, c in enumerate(collections):
        if not dask.is_dask_collection(c):
            raise TypeError(
                f"dkrr._progress.compute takes dask collections only; argument {i} is a "
                f"{type(c).__name__}: compute it separately or pass it as a dask collection"
            )


def set_progress(enabled: bool, stream=None) -> None:
    """Turn progress bars on or off for every later :func:`compute` in this process.

    Raises
    ------
    InvalidParameterError
        When turning them on with an invalid ``DKRR_PROGRESS_INTERVAL``
        (:func:`log_interval`): refused before any work, not at the first bar.
    """
    if enabled:
        log_interval()
    _STATE["enabled"] = bool(enabled)
    _STATE["stream"] = stream


def progress_enabled() -> bool:
    return bool(_STATE["enabled"])


@contextlib.contextmanager
def progress_set(enabled: bool, stream=None):
    """:func:`set_progress` for the ``with`` block only; the setting before it is restored
    on leaving (``dkrr.cli.main`` called in Python, from a notebook or a test, leaves its
    caller's setting as it was)."""
    previous = dict(_STATE)
    set_progress(enabled, stream)
    try:
        yield
    finally:
        _STATE.update(previous)


@contextlib.contextmanager
def _local_bar(label: str):
    from dask.diagnostics import ProgressBar

    with _bar_stream(label) as stream, ProgressBar(out=stream, dt=0.5):
        yield


def compute(*collections: Any, label: str = "computing", persist: bool = False, **kwargs) -> tuple:
    """``dask.compute(*collections)`` with a progress bar when progress is enabled.

    Uses the active distributed Client if there is one (then the bar tracks the
    scheduler's task states), else the scheduler configured in dask. Every argument must
    be a dask collection (``TypeError`` otherwise). ``persist=True``: ``dask.persist``
    instead, the results kept where they were computed (on a Client's workers: the
    returned collections name their Futures, and nothing is gathered; the bar, when
    shown, waits for them).
    """
    _check_collections(collections)
    with cluster_failures_named(label):
        return _compute(collections, label, persist, kwargs)


def _compute(collections: tuple, label: str, persist: bool, kwargs: dict) -> tuple:
    run = dask.persist if persist else dask.compute
    if not _STATE["enabled"]:
        return run(*collections, **kwargs)
    client = distributed_client()
    if client is None:
        with _local_bar(label):
            return run(*collections, **kwargs)
    from distributed import futures_of
    from distributed.diagnostics.progressbar import TextProgressBar

    if persist:
        persisted = client.persist(list(collections), **kwargs)
        futures = futures_of(persisted)
    else:
        futures = client.compute(list(collections), **kwargs)
    try:
        # futures carry their client, so the bar connects with its security settings (TLS)
        with _bar_stream(label) as stream, contextlib.redirect_stdout(stream):
            TextProgressBar(futures, scheduler=client.scheduler.address, complete=True)
        return tuple(persisted) if persist else tuple(client.gather(futures))
    except BaseException:  # Ctrl-C or a failed task: stop the rest of the work now
        client.cancel(futures)
        raise


def compute_limited(*collections, label: str = "computing", n_tasks: int | None = None, persist: bool = False,
                    **kwargs):
    """``dask.compute`` (with dkrr's optional progress bar) that keeps BLAS at one thread
    per dask thread when no distributed Client is active.

    ``n_tasks``: how many tasks can run at once; when they are fewer than the threaded
    scheduler's threads, each gets ``threads // n_tasks`` BLAS threads instead of one
    (a fit of one block uses every core). ``persist`` and ``kwargs`` (e.g. the threaded
    scheduler's ``num_workers``): as in :func:`compute`.
    """
    if distributed_client() is not None:
        return compute(*collections, label=label, persist=persist, **kwargs)
    from dask.system import CPU_COUNT

    from ._blas import limit_blas_threads

    blas_threads = max(1, CPU_COUNT // n_tasks) if n_tasks else 1
    with limit_blas_threads(blas_threads):
        return compute(*collections, label=label, persist=persist, **kwargs)
