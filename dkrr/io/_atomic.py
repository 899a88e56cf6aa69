"""Write outputs under a temporary name and rename them into place only on success.

Every output dkrr writes (an ingested Zarr store, a saved model directory, a store of
predictions) goes through :func:`atomic_output`, so an interrupted or failed run never
leaves something at the final path that looks complete, and two runs writing one output
at the same time never both report success: the writer holds an exclusive lock on the
output (see :func:`output_lock`) from before its work until its output is in place.

An output given as a URL (``s3://bucket/key``; see :mod:`dkrr.io._paths`) goes through
:mod:`dkrr.io._remote` instead: an object store has neither rename nor ``flock``, so a
commit marker and a lock object keep these promises there (said precisely in SECURITY.md).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock (documented)
    fcntl = None

from ..errors import OutputBusyError, OutputExistsError, OutputNotWritableError
from ._paths import COMMITTED, LEFT_BEHIND, Remote, locate
from ._remote import check_remote_output, remote_output

__all__ = ["atomic_output", "check_output", "interrupts_deferred", "output_lock"]

#: Files whose presence makes a directory a Zarr node (format 3, then format 2).
ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")


def _remove(path: Path) -> None:
    """Delete a file, link or directory tree if it exists (best effort)."""
    if path.is_symlink() or path.is_file():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def _sibling(path: Path, kind: str) -> Path:
    return path.parent / f".{path.name}.{kind}-{secrets.token_hex(4)}"



@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver them.

    Zarr writes metadata from its own I/O thread while the main thread waits; a Ctrl-C
    or SIGTERM raised in the main thread during that wait would let the cleanup delete
    the temporary store while the I/O thread is still creating it, leaving a hidden
    ``.tmp-`` directory behind. Short metadata writes run inside this block; a signal
    that arrives meanwhile is re-raised (to the handler in place before) when it ends.
    Outside the main thread, where Python runs no signal handler, it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    signums = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in signums}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)


def _is_within(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def _check_writable(path: Path) -> None:
    """Refuse an output that cannot be created: a path through a file, a location that
    does not accept new files. The nearest existing ancestor is probed with a real file
    (``os.access`` alone says yes to root on a read-only filesystem)."""
    anc = path.parent
    while not os.path.lexists(anc) and anc != anc.parent:
        anc = anc.parent
    if not os.path.isdir(anc):
        raise OutputNotWritableError(
            f"cannot write {path}: {anc} is not a directory (the path goes through a "
            "file); choose an output path inside a directory"
        )
    probe = anc / f".dkrr-probe-{secrets.token_hex(4)}"
    try:
        if not os.access(anc, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(probe)
    except OSError as exc:
        raise OutputNotWritableError(
            f"cannot write {path}: the directory {anc} does not accept new files "
            f"({exc.strerror or exc}); choose another output path or fix its permissions"
        ) from None


def _check_inputs(path: Path, inputs: Iterable[str | os.PathLike]) -> None:
    real = os.path.realpath(path)
    for item in inputs:
        inp = os.path.realpath(os.fspath(item))
        if real == inp:
            why = "it is an input of this command"
        elif _is_within(inp, real):
            why = f"it contains the input {inp}"
        elif _is_within(real, inp):
            why = f"it lies inside the input {inp}"
        else:
            continue
        raise OutputExistsError(
            f"refusing to write {path}: {why}; choose an output path apart from the inputs"
        )


def _check_not_in_zarr(path: Path) -> None:
    seen = set()
    for start in (path, Path(os.path.realpath(path))):
        for anc in start.parents:
            if anc in seen:
                continue
            seen.add(anc)
            if any(os.path.isfile(anc / marker) for marker in ZARR_MARKERS):
                raise OutputExistsError(
                    f"refusing to write {path}: it lies inside the Zarr store {anc}; "
                    "choose an output path outside any Zarr store"
                )


def _lock_path(path: Path) -> Path:
    return path.parent / f".{path.name}.lock"


def _holder(fd: int) -> str:
    """Who holds a lock, from what it wrote into the lock file."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(info['pid'])} on {info['host']}, since {info['since']}"
    except (OSError, ValueError, TypeError, KeyError):
        return "holder unknown"


def _busy(path: Path, fd: int) -> OutputBusyError:
    return OutputBusyError(
        f"another process ({_holder(fd)}) is writing {path} right now; only one run "
        "may write an output at a time: wait for it to finish, then run again "
        "(with --overwrite / overwrite=True to replace its output)"
    )


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            return True  # a filesystem without locks: as before, no lock (documented)
        raise
    return True


def _check_not_busy(path: Path) -> None:
    """Refuse `path` while another process holds its lock (without taking it)."""
    if fcntl is None or _held_for_nesting(path):
        return  # no locks here, or this thread's own, held for the writer inside it (output_lock)
    try:
        fd = os.open(_lock_path(path), os.O_RDWR)
    except OSError:
        return  # no lock file: nobody is writing
    try:
        if not _try_lock(fd):
            raise _busy(path, fd)
    finally:
        os.close(fd)  # closing releases a lock this probe took


@contextlib.contextmanager
def output_lock(path: str | os.PathLike, *, nested: bool = False) -> Iterator[None]:
    """Hold the exclusive lock on writing the output `path`, or refuse at once.

    The lock is an ``flock`` on the hidden file ``.{name}.lock`` beside `path`, which
    records the holder's pid, host and start time for the message of a refused run.
    The kernel releases it when the holder exits, however it exits (SIGKILL included),
    so a lock is never stale; a lock file left by a killed run is reused and removed by
    the next writer. On a filesystem without file locks (or off POSIX) no lock is held.

    Taken with ``nested=True``, the lock may be taken again by the thread that holds it
    (``dkrr fit`` holds it from before the fit, and the model's save inside takes it);
    the outer release frees it. Otherwise a second writer in this process is refused too.

    Raises
    ------
    OutputBusyError
        If another process (or another writer in this process) holds the lock.
    """
    path = Path(os.path.abspath(os.fspath(path)))
    if fcntl is None:  # pragma: no cover
        yield
        return
    if _held_for_nesting(path):  # this thread holds it, for writers inside
        yield
        return
    lock = _lock_path(path)
    deadline = time.monotonic() + 0.25  # a preflight probe holds it for an instant
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
        except OSError as exc:
            raise OutputNotWritableError(
                f"cannot create the lock file {lock} for {path}: {exc.strerror or exc}"
            ) from None
        try:
            locked = _try_lock(fd)
            if locked:
                # the previous holder removes the file when it ends: a lock taken on a
                # file no longer at `lock` locks nothing, so take it on the current file
                mine, now = os.fstat(fd), os.stat(lock)
                if (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino):
                    break
            elif time.monotonic() > deadline:
                raise _busy(path, fd)
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        if not locked:
            time.sleep(0.05)
    try:
        if nested:
            _HELD[path] = threading.get_ident()
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        yield
    finally:
        _HELD.pop(path, None)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # while still holding it: the next writer makes a new one
        os.close(fd)


#: the outputs whose lock a thread of this process holds for writers inside it, and that
#: thread (:func:`output_lock` with ``nested=True``)
_HELD: dict[Path, int] = {}


def _held_for_nesting(path: str | os.PathLike) -> bool:
    return _HELD.get(Path(os.path.abspath(path))) == threading.get_ident()


def check_output(
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    can_replace: Callable[[Path], str | None] | None = None,
    inputs: Iterable[str | os.PathLike] = (),
    storage_options: dict | None = None,
) -> Path | Remote:
    """Check, before any work, that an output may be written at `path`.

    Parameters
    ----------
    path : str, os.PathLike or Remote
        Final location of the output (it need not exist; missing parents are fine): a
        local path or an fsspec URL (``s3://bucket/key``).
    overwrite : bool, default=False
        Whether an existing `path` may be replaced.
    can_replace : callable, optional
        ``can_replace(path)`` returns ``None`` when the existing `path` is an output
        of the same kind that may be replaced, else a short reason why not.
    inputs : iterable of path-like, default=()
        Paths (or URLs) the command reads. Real paths are compared (symbolic links resolved).
    storage_options : dict, optional
        fsspec options for URLs (``endpoint_url``, credentials...); unused for local paths.

    Returns
    -------
    path : pathlib.Path or Remote
        The absolute path, or the location of a URL.

    Raises
    ------
    OutputNotWritableError
        If the path goes through a file, or the nearest existing directory does not
        accept new files (read-only, no permission, full).
    OutputExistsError
        If the path is, contains or lies inside an input; lies inside a Zarr store;
        exists and `overwrite` is false; contains the working directory; or exists and
        `can_replace` refuses it.
    OutputBusyError
        If another process is writing `path` right now (it holds its lock).
    InvalidParameterError
        If `path` is a URL whose scheme is unknown or not installed (see
        :func:`~dkrr.io._paths.locate`).
    """
    where = locate(path, storage_options, what="output")
    inputs = [locate(item, storage_options, what="input") for item in inputs]
    if isinstance(where, Remote):
        return check_remote_output(where, overwrite=overwrite, can_replace=can_replace, inputs=inputs)
    inputs = [item for item in inputs if not isinstance(item, Remote)]
    path = Path(os.path.abspath(os.fspath(where)))
    _check_writable(path)
    _check_inputs(path, inputs)
    _check_not_in_zarr(path)
    _check_not_busy(path)
    _check_target(path, overwrite, can_replace)
    return path


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike,
    overwrite: bool = False,
    *,
    can_replace: Callable[[Path], str | None] | None = None,
    inputs: Iterable[str | os.PathLike] = (),
    storage_options: dict | None = None,
) -> Iterator[Path | Remote]:
    """Context manager that yields a temporary path and moves it to `path` on success.

    The body of the ``with`` statement creates a file or a directory at the yielded
    temporary path, a hidden sibling of `path` named ``.{name}.tmp-{random}`` (same
    directory, hence same filesystem, so the final rename is atomic). When the body
    finishes without an exception the temporary path is renamed to `path`. When the
    body raises anything (``KeyboardInterrupt`` included) the temporary path is removed
    and the exception propagates; an existing output at `path` is left untouched.

    Parameters
    ----------
    path : str or os.PathLike
        Final location of the output. Missing parent directories are created.
    overwrite : bool, default=False
        Whether an existing `path` may be replaced. It is checked on entry, before the
        body does any work, and again just before the rename. The old output is moved
        aside only after the new one is complete, and deleted after the new one is in
        place.
    can_replace : callable, optional
        Called as ``can_replace(path)`` when `path` exists and `overwrite` is true. It
        returns ``None`` when the existing output may be replaced, or a short reason
        why not (for example ``"it is not a Zarr store"``), which guards against
        deleting an unrelated file or directory by a mistyped ``--out``.
    inputs : iterable of path-like, default=()
        Paths the work reads; an output that is, contains or lies inside one of them
        is refused (see :func:`check_output`).
    storage_options : dict, optional
        fsspec options when `path` is a URL. A URL is written by
        :func:`~dkrr.io._remote.remote_output`: the yielded
        :class:`~dkrr.io._paths.Remote` is the output itself (a new output) or a
        temporary sibling prefix (a replacement), committed on success with a marker
        instead of a rename (see that module and SECURITY.md).

    Yields
    ------
    tmp : pathlib.Path or Remote
        The temporary path to write to. Nothing exists there yet (for a URL: nothing but
        the commit marker).

    Raises
    ------
    OutputExistsError, OutputNotWritableError, InvalidParameterError
        On entry, before the body runs, for the reasons of :func:`check_output`;
        ``OutputExistsError`` also before the rename if `path` appeared meanwhile.
    OutputBusyError
        On entry, if another writer holds the lock on `path` (:func:`output_lock`).
        The lock is held from then until the output is in place (or removed), so of
        two runs writing one output at the same time the second is refused before it
        does any work, and the first one's output is the one left at `path`.

    Notes
    -----
    Replacing an existing directory takes two renames (old output aside, new output
    in), so for a moment neither is at `path`; signals wait until both are done, and a
    crash in between leaves the old output at ``.{name}.old-{random}``. The old output
    is then deleted; a signal during that deletion (minutes for a store of many chunk
    files) stops it at once, the new output being in place, and what is left of the old
    one stays at ``.{name}.old-{random}``, named in the exception's note and in
    :data:`~dkrr.io._paths.LEFT_BEHIND` (the command line names it). A process killed with SIGKILL can leave a
    ``.{name}.tmp-{random}`` directory behind; it is never mistaken for the output.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "result.txt"
    >>> with atomic_output(out) as tmp:
    ...     _ = tmp.write_text("done")
    >>> out.read_text()
    'done'
    """
    inputs = list(inputs)
    where = locate(path, storage_options, what="output")
    if isinstance(where, Remote):
        with remote_output(where, overwrite, can_replace=can_replace,
                           inputs=[locate(i, storage_options, what="input") for i in inputs]) as tmp:
            yield tmp
        return
    path = check_output(where, overwrite=overwrite, can_replace=can_replace, inputs=inputs)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputNotWritableError(
            f"cannot create the directory {path.parent} for {path}: {exc.strerror or exc}"
        ) from None
    tmp = _sibling(path, "tmp")
    with output_lock(path):
        try:
            yield tmp
            if not os.path.lexists(tmp):
                raise FileNotFoundError(
                    f"atomic_output: nothing was written at the temporary path {tmp}"
                )
            _check_target(path, overwrite, can_replace)
            _swap_in(tmp, path)
        except BaseException:
            _remove(tmp)
            raise


def _check_target(
    path: Path, overwrite: bool, can_replace: Callable[[Path], str | None] | None
) -> None:
    if not os.path.lexists(path):
        return
    if not overwrite:
        raise OutputExistsError(
            f"output {path} exists already; choose another path or pass "
            "overwrite=True (--overwrite) to replace it"
        )
    cwd = Path(os.getcwd())
    if path == cwd or path in cwd.parents:
        raise OutputExistsError(
            f"refusing to overwrite {path}: it contains the current working directory"
        )
    if can_replace is not None:
        reason = can_replace(path)
        if reason:
            raise OutputExistsError(f"refusing to overwrite {path}: {reason}")


def _swap_in(tmp: Path, path: Path) -> None:
    """Rename `tmp` to `path`, replacing whatever is at `path` only at the very end, and
    record `path` in :data:`COMMITTED` in the same step (signals held meanwhile).

    The old output is deleted after that, with signals let through: a Ctrl-C there stops
    the deletion at once (a store of many chunk files takes minutes), and the exception
    names what is left of the old output, recorded in :data:`LEFT_BEHIND` for the command
    line. The new output is in place and named as written in full either way."""
    if not os.path.lexists(path):
        with interrupts_deferred():  # a signal after the rename: the output is still named
            os.replace(tmp, path)
            COMMITTED.append(str(path))
        return
    backup = _sibling(path, "old")
    swapped = False
    try:
        with interrupts_deferred():  # neither output is at `path` between the two renames
            os.replace(path, backup)
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(backup, path)
                raise
            COMMITTED.append(str(path))
            swapped = True
        _remove(backup)
    except BaseException as exc:
        if swapped and os.path.lexists(backup):
            LEFT_BEHIND.append(str(backup))
            exc.add_note(f"dkrr: {path} was written in full; the deletion of the output it "
                         f"replaced was cut short: delete its remains, {backup}")
        raise
