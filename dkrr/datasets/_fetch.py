"""Finding a data file: the cache, then an offline mirror, then a verified download.

A file is used only when its sha256 equals the one recorded in the registry: a cached
copy that fails the check is fetched again, a mirror copy that fails it is an error (the
mirror is the user's, dkrr does not touch it), and a download that fails it is deleted.
Downloads go to a hidden temporary file in the cache folder and are renamed into place
only when complete and verified, so an interrupted download leaves nothing that looks
like data.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import secrets
import sys
import urllib.error
import urllib.request
from pathlib import Path

from ..errors import ChecksumMismatchError, DatasetUnavailableError
from ._registry import RemoteFile

__all__ = ["data_home", "fetch_file", "file_sha256", "mirror_dir"]

_CHUNK = 1 << 20


def data_home(path: str | os.PathLike | None = None) -> Path:
    """The cache directory: ``path``, else ``$DKRR_DATA``, else ``$XDG_CACHE_HOME/dkrr``
    (``~/.cache/dkrr`` when ``XDG_CACHE_HOME`` is unset)."""
    if path is not None:
        return Path(path).expanduser()
    env = os.environ.get("DKRR_DATA")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "dkrr"


def mirror_dir(path: str | os.PathLike | None = None) -> Path | None:
    """The offline mirror folder: ``path``, else ``$DKRR_DATA_MIRROR``, else None.

    A mirror holds files as ``<mirror>/<folder>/<filename>`` (the layout of the project's
    offline data copies); it is only read.
    """
    if path is not None:
        return Path(path).expanduser()
    env = os.environ.get("DKRR_DATA_MIRROR")
    return Path(env).expanduser() if env else None


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for piece in iter(lambda: fh.read(_CHUNK), b""):
            h.update(piece)
    return h.hexdigest()


def fetch_file(
    remote: RemoteFile,
    *,
    data_home: str | os.PathLike | None = None,
    mirror: str | os.PathLike | None = None,
    download: bool = True,
    timeout: float = 60.0,
    progress=None,
) -> Path:
    """Local path of a verified copy of ``remote``.

    Looks in the cache (``data_home``), then the mirror, then downloads ``remote.url`` into
    the cache.

    Parameters
    ----------
    remote : RemoteFile
    data_home : path, optional
        Cache directory (default :func:`data_home`).
    mirror : path, optional
        Offline mirror folder (default :func:`mirror_dir`).
    download : bool, default=True
        Whether a download may be tried.
    timeout : float, default=60
        Seconds without data after which a download is abandoned.
    progress : file-like, optional
        Where to report a download (default: standard error).

    Returns
    -------
    pathlib.Path
        The cached file or the mirror's file (mirror files are read in place).

    Raises
    ------
    ChecksumMismatchError
        The mirror's copy or the downloaded bytes do not have the recorded sha256.
    DatasetUnavailableError
        Neither the cache, the mirror nor a download provided the file; the message lists
        where dkrr looked and how to provide it.
    """
    home = globals()["data_home"](data_home)
    cached = home / remote.folder / remote.filename
    if cached.is_file() and file_sha256(cached) == remote.sha256:
        return cached
    tried = [f"cache {cached} ({'wrong sha256' if cached.is_file() else 'absent'})"]
    mdir = mirror_dir(mirror)
    if mdir is not None:
        candidate = mdir / remote.folder / remote.filename
        if candidate.is_file():
            got = file_sha256(candidate)
            if got != remote.sha256:
                raise ChecksumMismatchError(
                    f"{candidate} has sha256 {got}, expected {remote.sha256}: the mirror's copy "
                    "is not the recorded file; replace it or point DKRR_DATA_MIRROR elsewhere."
                )
            return candidate
        tried.append(f"mirror {candidate} (absent)")
    else:
        tried.append("no mirror (set DKRR_DATA_MIRROR or pass mirror=)")
    if remote.url is None:
        tried.append("no public download for this file")
    elif not download:
        tried.append(f"download of {remote.url} not allowed (download=False)")
    else:
        try:
            return _download(remote, cached, timeout, progress)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            if isinstance(exc, ChecksumMismatchError):
                raise
            reason = getattr(exc, "reason", None) or exc
            tried.append(f"download of {remote.url} failed: {reason}")
    where = "; ".join(tried)
    hint = f"download {remote.url} to {cached}" if remote.url else f"put it in a mirror folder as {remote.folder}/{remote.filename}"
    raise DatasetUnavailableError(
        f"data file {remote.folder}/{remote.filename} is not available: {where}. To fix: "
        f"{hint} (sha256 {remote.sha256}), or set DKRR_DATA_MIRROR to a folder holding it."
    )


def _download(remote: RemoteFile, dest: Path, timeout: float, progress) -> Path:
    """Stream ``remote.url`` into a hidden temporary sibling of ``dest``, verify, rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.part-{secrets.token_hex(4)}"
    out = sys.stderr if progress is None else progress
    h = hashlib.sha256()
    done = 0
    try:
        with urllib.request.urlopen(remote.url, timeout=timeout) as resp, open(tmp, "wb") as fh:
            total = resp.headers.get("Content-Length")
            print(f"dkrr: downloading {remote.url} ({total or '?'} bytes) to {dest}", file=out)
            for piece in iter(lambda: resp.read(_CHUNK), b""):
                fh.write(piece)
                h.update(piece)
                done += len(piece)
            if total is not None and done != int(total):
                raise OSError(f"connection closed after {done} of {total} bytes")
        if h.hexdigest() != remote.sha256:
            raise ChecksumMismatchError(
                f"the download of {remote.url} has sha256 {h.hexdigest()}, expected {remote.sha256}; "
                "nothing was kept. The source may have changed or the transfer was corrupted."
            )
        os.replace(tmp, dest)
        return dest
    finally:
        if tmp.exists():
            tmp.unlink()
