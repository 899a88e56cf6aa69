"""The one check that a path given to dkrr is a local path, not a URL.

dkrr reads and writes the local filesystem (or a network filesystem mounted on it) only.
Without this check ``s3://bucket/d.zarr`` would be taken as the relative path
``s3:/bucket/d.zarr``: a folder named ``s3:`` created in the current directory, and a
success reported. Every public entry point that takes a path (ingest, open_dataset,
write_dataset, write_predictions, save_model, load_model, check_output, atomic_output
and the CLI through them) calls :func:`refuse_url` before it turns the path into an
absolute one.
"""

from __future__ import annotations

import os
import re

from ..errors import InvalidParameterError

__all__ = ["refuse_url"]

#: ``scheme://`` with a scheme of two characters or more (``C:/data`` is a drive letter).
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")
#: Schemes recognised with a single slash too: ``pathlib.Path("s3://b/k")`` is ``s3:/b/k``.
_KNOWN_SCHEMES = frozenset({
    "s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "wasb", "wasbs", "oss", "r2",
    "hdfs", "webhdfs", "http", "https", "ftp", "sftp", "ssh", "file", "memory", "zip",
})
_KNOWN = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):/")


def url_scheme(path: str | os.PathLike | bytes) -> str | None:
    """The URL scheme of `path` (``"s3"`` for ``s3://bucket/key``), or ``None`` for a
    local path. A drive letter (``C:/data``) is not a scheme; a known scheme followed by
    one slash (what :class:`pathlib.Path` makes of ``s3://...``) is one."""
    text = os.fsdecode(os.fspath(path))
    match = _URL.match(text)
    if match:
        return match.group(1).lower()
    match = _KNOWN.match(text)
    if match and match.group(1).lower() in _KNOWN_SCHEMES:
        return match.group(1).lower()
    return None


def refuse_url(path: str | os.PathLike | bytes, what: str) -> None:
    """Raise :class:`~dkrr.errors.InvalidParameterError` if `path` is a URL.

    Parameters
    ----------
    path : str, bytes or os.PathLike
        The path as the caller gave it (before ``os.path.abspath``, which would turn
        ``s3://b/k`` into a local path).
    what : str
        What the path is, for the message (``"output"``, ``"input store"``, ...).

    Raises
    ------
    InvalidParameterError
        If `path` starts with a URL scheme (``s3://``, ``gs://``, ``https://``,
        ``file://``, ...). Object stores are not supported yet; ``file://`` URLs are
        refused too (give the path itself). A local folder whose name ends with a colon
        can still be named as ``./name:/...``.
    """
    scheme = url_scheme(path)
    if scheme is None:
        return
    text = os.fsdecode(os.fspath(path))
    if scheme == "file":
        hint = "give the local path itself, without file://"
    else:
        hint = (
            "object stores and remote URLs are not supported yet; copy the data to a "
            "local or mounted path and give that path"
        )
    raise InvalidParameterError(f"{what} {text!r} is a URL ({scheme}://), not a local path: {hint}")
