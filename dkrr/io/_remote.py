"""Outputs in an object store: commit markers instead of a rename, a lock object instead of
``flock``.

An object store has no atomic rename and no file locks, so :func:`remote_output` (what
:func:`~dkrr.io._atomic.atomic_output` does for a URL) keeps the promises of the local
path by other means:

* **Commit marker.** While an output is written, the object ``.{name}.incomplete`` lies
  beside it (who writes it, since when; :func:`marker_of`). It is written before anything
  else and deleted last, once every other object is stored: a reader of dkrr
  (``open_dataset``, ``load_model``) refuses an output with a marker
  (:func:`check_committed`), so a store or model whose writer failed, was killed or lost
  the connection is never read as complete. (The marker lies beside the output, not in
  it, as Zarr creates a group only in an empty prefix; a copy of the prefix alone does not
  carry it.)
  On failure the writer deletes what it wrote (the marker last); when even that fails (the
  store went away) the marker stays and the remains are refused, and ``--overwrite``
  replaces them (they are dkrr's own kind of output).
* **Replacing.** A new output is written in place. With ``overwrite`` over an existing
  output, the new one is written whole under the hidden sibling prefix
  ``.{name}.tmp-{random}``; only then is the old one marked incomplete, deleted, the new
  objects copied into place by the store itself (server-side copies: no data through this
  machine) and the marker removed. A failure before that leaves the old output untouched;
  one during the swap leaves the target marked incomplete (refused by dkrr's readers, and
  replaceable): the output must be written again.
* **Lock.** The writer creates the object ``.{name}.lock`` beside the output with an
  exclusive create (S3's ``If-None-Match: *``; other filesystems: check, create, read back)
  holding its pid, host and token, and deletes it at the end. A second writer is refused
  (:class:`~dkrr.errors.OutputBusyError`), and a writer whose lock was taken over does not
  commit. A lock left by a killed process on this host (its pid is gone) is taken over; one
  from another host is reported with the object to delete by hand, since nothing tells
  whether that process still runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..errors import (
    DkrrError,
    OutputBusyError,
    OutputExistsError,
    OutputNotWritableError,
)
from ._paths import COMMITTED, LEFT_BEHIND, Remote, is_storage_failure, locate, store_error, within_remote

__all__ = [
    "check_committed", "check_remote_output", "is_incomplete", "marker_of", "missing",
    "remote_keys", "remote_listing", "remote_output",
]

#: Zarr metadata objects whose presence in a folder makes it a Zarr node.
_ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")


def _exists(fs, path: str) -> bool:
    fs.invalidate_cache(path)
    return bool(fs.exists(path))


def remote_listing(where: Remote) -> dict[str, dict] | None:
    """Every object below `where` with its details (size, ETag, modification time), by
    key relative to `where` (one listing request per 1,000 objects); ``None`` when `where`
    is itself an object (a file), ``{}`` when nothing is there."""
    fs = where.fs
    fs.invalidate_cache(where.path)
    with within_remote("list", where.url):
        try:
            info = fs.info(where.path)
        except FileNotFoundError:
            return {}
        if info.get("type") == "file":
            return None
        found = fs.find(where.path, detail=True)
    prefix = where.path.rstrip("/") + "/"
    return {k[len(prefix):]: v for k, v in found.items() if k.startswith(prefix)}


def remote_keys(where: Remote) -> list[str] | None:
    """The keys below `where`, relative to it (sorted); ``None`` when `where` is itself an
    object (a file), ``[]`` when nothing is there."""
    listing = remote_listing(where)
    return None if listing is None else sorted(listing)


def _holder_started() -> float:
    import psutil

    return psutil.Process().create_time()


def _holder() -> dict[str, Any]:
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": _holder_started(),
            "token": secrets.token_hex(8), "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def _read_json(fs, path: str) -> dict | None:
    try:
        data = fs.cat_file(path, start=0, end=4096)
        info = json.loads(data)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError):
        return {}
    return info if isinstance(info, dict) else {}


#: tokens of the locks this process holds right now
_HELD: set[str] = set()


def _gone(holder: dict) -> bool:
    """Whether the writer that wrote `holder` is known to have ended: it ran on this host
    and its pid is free, or now belongs to a process started at another time, or it is
    this process and the lock is none it holds (a write whose clean-up failed)."""
    import psutil

    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    if holder["pid"] == os.getpid() and holder.get("started") == _holder_started():
        return holder.get("token") not in _HELD
    try:
        started = psutil.Process(holder["pid"]).create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return True
    except psutil.Error:
        return False
    return abs(started - float(holder.get("started") or 0)) > 1.0


def _who(holder: dict | None) -> str:
    if not holder:
        return "holder unknown"
    return f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('since')}"


def _lock_of(where: Remote) -> Remote:
    return where.sibling(f".{where.name}.lock")


def marker_of(where: Remote) -> Remote:
    """The commit marker of the output `where`: present while it is not committed."""
    return where.sibling(f".{where.name}.incomplete")


def is_incomplete(where: Remote) -> bool:
    """Whether the output `where` has a commit marker (its writer has not committed it)."""
    with within_remote("read", where.url):
        return _exists(where.fs, marker_of(where).path)


def _busy(where: Remote, holder: dict | None) -> OutputBusyError:
    lock = _lock_of(where)
    return OutputBusyError(
        f"another process ({_who(holder)}) is writing {where.url} right now, or was killed "
        "while writing it; only one run may write an output at a time: wait for it to "
        f"finish, then run again. If that process no longer runs, delete {lock.url} "
        "and run again (with --overwrite / overwrite=True to replace its remains)"
    )


class _Lock:
    """The lock object of one output, held by this process (see the module docstring)."""

    def __init__(self, where: Remote):
        self.where, self.lock = where, _lock_of(where)
        self.holder = _holder()

    def acquire(self) -> None:
        fs, path = self.lock.fs, self.lock.path
        data = json.dumps(self.holder).encode()
        for attempt in range(2):
            try:
                _create(fs, path, data)
                break
            except FileExistsError:
                held = _read_json(fs, path)
                if attempt == 0 and held is not None and _gone(held):
                    with contextlib.suppress(FileNotFoundError):
                        fs.rm_file(path)
                    continue
                raise _busy(self.where, held) from None
            except Exception as exc:
                if not is_storage_failure(exc):
                    raise
                raise store_error(exc, "create the lock object", self.lock.url,
                                  OutputNotWritableError) from None
        _HELD.add(self.holder["token"])
        if not self.ours():  # filesystems without an exclusive create: a writer raced us
            _HELD.discard(self.holder["token"])
            raise _busy(self.where, _read_json(fs, path))

    def ours(self) -> bool:
        fs = self.lock.fs
        fs.invalidate_cache(self.lock.path)
        held = _read_json(fs, self.lock.path)
        return bool(held) and held.get("token") == self.holder["token"]

    def release(self) -> None:
        _HELD.discard(self.holder["token"])
        with contextlib.suppress(Exception):  # best effort: a lock left behind is reported
            if self.ours():
                self.lock.fs.rm_file(self.lock.path)


def _create(fs, path: str, data: bytes) -> None:
    """Write `path` only if it does not exist (FileExistsError otherwise)."""
    try:
        fs.pipe_file(path, data, mode="create")
    except TypeError:  # a filesystem whose pipe_file knows no mode: check, then write
        if _exists(fs, path):
            raise FileExistsError(path) from None
        fs.pipe_file(path, data)


def check_committed(where: Remote, what: str, error: type[DkrrError]) -> None:
    """Refuse an output with a commit marker (:func:`marker_of`): its writer has not
    finished (or failed and could not clean up)."""
    marker = marker_of(where)
    with within_remote("read", where.url):
        if not _exists(where.fs, marker.path):
            return
        holder = _read_json(where.fs, marker.path)
    raise error(
        f"{what} {where.url} is incomplete: a dkrr run ({_who(holder)}) started writing it "
        f"and has not committed it (it is still writing, or it failed or was killed; "
        f"the marker {marker.url} says so). Write it again (with --overwrite / "
        "overwrite=True: its remains are replaced)"
    )


def _check_target(where: Remote, overwrite: bool, can_replace: Callable | None) -> bool:
    """Whether something is at `where`; refuse it unless it may be replaced."""
    with within_remote("check", where.url, OutputNotWritableError):
        present = _exists(where.fs, where.path)
    if not present:
        return False
    if not overwrite:
        raise OutputExistsError(
            f"output {where.url} exists already; choose another path or pass "
            "overwrite=True (--overwrite) to replace it"
        )
    if can_replace is not None:
        reason = can_replace(where)
        if reason:
            raise OutputExistsError(f"refusing to overwrite {where.url}: {reason}")
    return True


def _overlaps(a: Remote, b: Remote) -> str | None:
    if type(a.fs) is not type(b.fs):
        return None
    pa, pb = a.path.rstrip("/"), b.path.rstrip("/")
    if pa == pb:
        return "it is an input of this command"
    if pb.startswith(pa + "/"):
        return f"it contains the input {b.url}"
    if pa.startswith(pb + "/"):
        return f"it lies inside the input {b.url}"
    return None


def check_remote_output(where: Remote, *, overwrite: bool = False, can_replace: Callable | None = None,
                        inputs: Iterable[Any] = ()) -> Remote:
    """:func:`~dkrr.io._atomic.check_output` for a URL: the bucket exists and accepts a
    new object with these credentials (a probe object is written and deleted), the output
    does not overlap an input nor lie inside a Zarr store, no writer holds its lock, and
    what is there may be replaced."""
    fs = where.fs
    probe = where.sibling(f".dkrr-probe-{secrets.token_hex(4)}")
    with within_remote("write", where.url, OutputNotWritableError):
        fs.pipe_file(probe.path, b"")
        fs.rm_file(probe.path)
    for item in inputs:
        other = locate(item, where.storage_options, what="input")
        reason = _overlaps(where, other) if isinstance(other, Remote) else None
        if reason:
            raise OutputExistsError(
                f"refusing to write {where.url}: {reason}; choose an output path apart from the inputs"
            )
    with within_remote("check", where.url, OutputNotWritableError):
        for parent in where.parents():
            if any(_exists(fs, parent.key(m)) for m in _ZARR_MARKERS):
                raise OutputExistsError(
                    f"refusing to write {where.url}: it lies inside the Zarr store {parent.url}; "
                    "choose an output path outside any Zarr store"
                )
        lock = _lock_of(where)
        if _exists(fs, lock.path):
            held = _read_json(fs, lock.path)
            if held is not None and not _gone(held):
                raise _busy(where, held)
    _check_target(where, overwrite, can_replace)
    return where


def _delete(where: Remote) -> None:
    """Delete every object below `where`, then its commit marker (best effort)."""
    keys = remote_keys(where)
    keys = [where.path] if keys is None else [where.key(k) for k in keys]
    if keys:
        where.fs.rm(keys)
    with contextlib.suppress(FileNotFoundError):
        where.fs.rm_file(marker_of(where).path)
    where.fs.invalidate_cache(where.path)


def _commit(where: Remote) -> None:
    where.fs.rm_file(marker_of(where).path)
    where.fs.invalidate_cache(where.path)


def _swap_in(tmp: Remote, final: Remote, marker: bytes) -> None:
    """Replace the output at `final` by the complete one at `tmp` (see the module
    docstring: marked incomplete, emptied, filled by server-side copies), all but the
    commit, which :func:`remote_output` does."""
    fs = final.fs
    fs.pipe_file(marker_of(final).path, marker)
    old = remote_keys(final)
    old = [final.path] if old is None else [final.key(k) for k in old]
    if old:
        fs.rm(old)
    new = remote_keys(tmp) or []
    if new:
        fs.copy([tmp.key(k) for k in new], [final.key(k) for k in new])


@contextlib.contextmanager
def remote_output(where: Remote, overwrite: bool = False, *, can_replace: Callable | None = None,
                  inputs: Iterable[Any] = ()) -> Iterator[Remote]:
    """:func:`~dkrr.io._atomic.atomic_output` for a URL: yields the prefix to write (the
    output itself, or a temporary sibling when an existing output is replaced) and commits
    it when the block ends without an exception (see the module docstring)."""
    inputs = list(inputs)
    check_remote_output(where, overwrite=overwrite, can_replace=can_replace, inputs=inputs)
    lock = _Lock(where)
    lock.acquire()
    try:
        replacing = _check_target(where, overwrite, can_replace)
        dest = where.sibling(f".{where.name}.tmp-{secrets.token_hex(4)}") if replacing else where
        marker = json.dumps({**lock.holder, "writing": where.url}).encode()
        with within_remote("write", dest.url):
            where.fs.pipe_file(marker_of(dest).path, marker)
        committed = False
        try:
            yield dest
            with within_remote("commit", where.url):
                if not remote_keys(dest):
                    raise FileNotFoundError(f"remote_output: nothing was written at {dest.url}")
                if not lock.ours():
                    raise _busy(where, _read_json(where.fs, _lock_of(where).path))
                if replacing:
                    _check_target(where, overwrite, can_replace)
                    _swap_in(dest, where, marker)
                from ._atomic import interrupts_deferred

                with interrupts_deferred():  # the commit and its record: one step
                    _commit(where)
                    committed = True
                    COMMITTED.append(where.url)
                if replacing:  # the new output is in place; its copy is spare
                    with contextlib.suppress(Exception):
                        _delete(dest)
        except BaseException as exc:
            if committed:  # a signal after the commit: the output is whole, and stays
                if replacing:  # the spare copy may be left (its marker keeps it unread)
                    LEFT_BEHIND.extend([dest.url, marker_of(dest).url])
                raise
            with contextlib.suppress(Exception):  # the marker stays if the store is gone
                _delete(dest)
            if is_storage_failure(exc):
                raise store_error(exc, "write", where.url) from None
            raise
    finally:
        lock.release()


def missing(where: Remote, what: str, error: type[DkrrError], hint: str = "") -> DkrrError:
    """The error for a store or model that does not exist at `where`, naming the bucket
    when the bucket itself is missing (or hidden from these credentials)."""
    bucket = where.path.split("/", 1)[0]
    with within_remote("read", where.url):
        no_bucket = bool(bucket) and "/" in where.path and not _exists(where.fs, bucket)
    if no_bucket:
        return error(f"{what} {where.url} does not exist: the bucket {bucket!r} does not exist "
                     "(or these credentials cannot see it); check the URL")
    return error(f"{what} {where.url} does not exist{hint}")
