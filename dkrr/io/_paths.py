"""Where dkrr reads and writes: a local path, or the fsspec URL of an object store.

Every public entry point that takes a path (ingest, open_dataset, write_dataset,
write_predictions, save_model, load_model, check_output, atomic_output and the CLI through
them) calls :func:`locate` first, with the ``storage_options`` it was given. A local path
(or a ``file://`` URL, which names one) comes back as a local path and is handled as it
always was; any other URL (``s3://bucket/key``, ``gs://``, ``az://``, ``memory://``...)
becomes a :class:`Remote`: the fsspec filesystem, built once from the URL and the storage
options, and the path inside it. Without this check ``s3://bucket/d.zarr`` would be taken
as the relative path ``s3:/bucket/d.zarr``.

A scheme whose fsspec implementation is not installed is refused with the package to
install (``s3fs`` for ``s3://``: ``pip install 'dkrr[s3]'``); HTTP(S) is refused since it
can neither be listed (dkrr checks that every chunk of a store is present) nor written.
Errors of an object store (unreachable, credentials refused, no such bucket) become
:class:`~dkrr.errors.ObjectStoreError` naming the URL and the cause: :func:`store_error`.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import DkrrError, InvalidParameterError, ObjectStoreError

__all__ = ["Remote", "describe", "is_storage_failure", "locate", "store_error", "url_scheme",
           "within_remote", "zarr_location"]

#: ``scheme://`` with a scheme of two characters or more (``C:/data`` is a drive letter).
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")
#: Schemes recognised with a single slash too: ``pathlib.Path("s3://b/k")`` is ``s3:/b/k``.
_KNOWN_SCHEMES = frozenset({
    "s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "wasb", "wasbs", "oss", "r2",
    "hdfs", "webhdfs", "http", "https", "ftp", "sftp", "ssh", "file", "memory", "zip",
})
_KNOWN = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+):/")
#: Schemes that cannot hold a store dkrr reads or writes (no listing, no writes).
_NOT_STORES = {"http": "HTTP", "https": "HTTPS"}
#: Schemes of object stores whose paths begin with a bucket (or container) name.
_BUCKETS = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "wasb", "wasbs", "oss", "r2"})


#: the outputs this process has put in place (committed), in order: what the command line
#: names when a signal stops a command after its output was written in full
COMMITTED: list[str] = []

#: what is left of outputs that a signal stopped dkrr deleting after their replacements were
#: committed (the old output moved aside; an object store's spare copy): named by the
#: command line with the outputs, so that the user can delete them
LEFT_BEHIND: list[str] = []


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


#: a known scheme's name, then "//" (the colon left out), or a colon and a space, or a colon
#: and no slash: a URL mistyped, which would be a local folder named after the scheme
_MISTYPED = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)(//|:\s+|:(?=[^/\s]))")


def _refuse_mistyped_url(path, what: str) -> None:
    """Refuse a local path that reads as a mistyped URL (``s3//bucket/k``, ``s3: //bucket/k``,
    ``s3:bucket/k``): written, it would become a local folder ``./s3/bucket/k`` without a
    word. A local folder of such a name is reachable as ``./s3//...``."""
    if not isinstance(path, (str, bytes)):
        return  # pathlib has already made "s3//b" of it "s3/b": nothing to tell apart
    text = os.fsdecode(path)
    match = _MISTYPED.match(text)
    if match and match.group(1).lower() in _KNOWN_SCHEMES:
        name = match.group(1).lower()
        form = "file:///ABSOLUTE/PATH (a colon and three slashes)" if name == "file" else \
            f"{name}://BUCKET/KEY (a colon and two slashes)"
        raise InvalidParameterError(
            f"{what} {text!r} looks like a mistyped URL: write {form}; for a local folder named "
            f"{match.group(1)!r} write ./{text}"
        )


def _file_url_path(text: str, what: str) -> str:
    """The local path a ``file:`` URL names (RFC 8089): ``file:///abs`` and ``file:/abs``
    (what :class:`pathlib.Path` makes of the former) are ``/abs``, ``file://localhost/abs``
    too. ``file:/tmp/x`` was made ``file://tmp/x``, read as the relative path ``tmp/x``: an
    output written under the working directory. Another host, or a relative path, is
    refused (no local path)."""
    rest = text[len("file:"):]
    if rest.startswith("//"):
        host, _, tail = rest[2:].partition("/")
        if host.lower() not in ("", "localhost"):
            raise InvalidParameterError(
                f"{what} {text!r} names the host {host!r} (file://HOST/PATH): for the local path "
                f"/{host}/{tail} write file:///{host}/{tail} (three slashes) or the path itself"
            )
        return "/" + tail
    if rest.startswith("/"):
        return rest
    raise InvalidParameterError(
        f"{what} {text!r}: a file: URL names an absolute path (file:///abs/path); for a relative "
        "path leave out file:"
    )


@dataclass(frozen=True, eq=False)
class Remote:
    """A location in an fsspec filesystem other than the local one (an object store).

    Attributes
    ----------
    url : str
        The location as a URL (``s3://bucket/key``), as messages name it.
    fs : fsspec.AbstractFileSystem
        The filesystem (synchronous API), built from the URL and the storage options.
    path : str
        The path inside `fs` (``bucket/key``), without a trailing slash.
    storage_options : dict
        The options `fs` was built with (passed on to Zarr and to the workers).
    """

    url: str
    fs: Any
    path: str
    storage_options: dict

    def __str__(self) -> str:
        return self.url

    def __fspath__(self) -> str:  # pragma: no cover - guards against use as a local path
        raise TypeError(f"{self.url} is a URL, not a local path")

    @property
    def name(self) -> str:
        """The last component of the path."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def key(self, rel: str) -> str:
        """The path inside `fs` of `rel` below this location."""
        return f"{self.path}/{rel}" if rel else self.path

    def child(self, rel: str) -> Remote:
        """The location `rel` below this one."""
        return self._at(self.key(rel))

    def sibling(self, name: str) -> Remote:
        """The location `name` next to this one (in the same parent folder)."""
        parent = self.path.rstrip("/").rsplit("/", 1)[0] if "/" in self.path else ""
        return self._at(f"{parent}/{name}" if parent else name)

    def parents(self) -> list[Remote]:
        """The enclosing locations, nearest first (the bucket last)."""
        parts = self.path.split("/")
        return [self._at("/".join(parts[:i])) for i in range(len(parts) - 1, 0, -1)]

    @property
    def process_local(self) -> bool:
        """Whether the filesystem lives in this process's memory (``memory://``): other
        processes, dask workers among them, see their own, empty one."""
        protocol = self.fs.protocol
        return "memory" in ((protocol,) if isinstance(protocol, str) else tuple(protocol))

    def _at(self, path: str) -> Remote:
        return Remote(url=self.fs.unstrip_protocol(path), fs=self.fs, path=path,
                      storage_options=self.storage_options)

    def zarr_store(self, *, read_only: bool):
        """A Zarr store of this location; it pickles (with the storage options), so the
        dask workers that receive it open the object store themselves."""
        from zarr.storage import FsspecStore

        return FsspecStore.from_url(self.url, storage_options=dict(self.storage_options),
                                    read_only=read_only)


def zarr_location(where: str | os.PathLike | Remote, *, read_only: bool = False) -> Any:
    """What Zarr opens for `where`: the path of a local store, the store of a URL."""
    return where.zarr_store(read_only=read_only) if isinstance(where, Remote) else os.fspath(where)


def _check_options(storage_options: Any) -> dict:
    if storage_options is None:
        return {}
    if not isinstance(storage_options, Mapping) or not all(isinstance(k, str) for k in storage_options):
        raise InvalidParameterError(
            f"storage_options must be a dict of option names to values (as fsspec takes "
            f"them, e.g. {{'endpoint_url': 'http://...'}}), got {storage_options!r}"
        )
    return dict(storage_options)


def locate(path: str | os.PathLike | bytes | Remote, storage_options: Mapping[str, Any] | None = None,
           *, what: str = "path") -> str | os.PathLike | bytes | Remote:
    """Where `path` is: a local path (returned as given, or as the path a ``file://``
    URL names) or a :class:`Remote` for any other URL.

    Parameters
    ----------
    path : str, bytes, os.PathLike or Remote
        The path or URL as the caller gave it (before ``os.path.abspath``, which would turn
        ``s3://b/k`` into a local path).
    storage_options : dict, optional
        fsspec options of the filesystem (``endpoint_url``, ``key``, ``anon``...); ignored
        for a local path. Without them fsspec's defaults apply (for S3: the AWS_*
        environment variables, ``~/.aws``, an instance role).
    what : str
        What the path is, for messages (``"output"``, ``"input store"``, ...).

    Raises
    ------
    InvalidParameterError
        For a scheme fsspec does not know, one whose implementation is not installed
        (naming the package to install), HTTP(S), a URL without a bucket or key, or
        `storage_options` that is not a dict.
        It is also raised when the filesystem refuses the storage options.
    """
    if isinstance(path, Remote):
        return path
    options = _check_options(storage_options)
    scheme = url_scheme(path)
    if scheme is None:
        _refuse_mistyped_url(path, what)
        return path
    text = os.fsdecode(os.fspath(path))
    text = scheme + text[len(scheme):]  # a scheme is case-insensitive (RFC 3986); fsspec's are lower case
    if scheme == "file":
        return _file_url_path(text, what)
    if not _URL.match(text):  # pathlib.Path("s3://b/k") is "s3:/b/k"
        text = re.sub(r"^([A-Za-z][A-Za-z0-9+.\-]+):/", r"\1://", text)
    if scheme in _NOT_STORES:
        raise InvalidParameterError(
            f"{what} {text!r} is an {_NOT_STORES[scheme]} URL: dkrr reads and writes stores it "
            "can list and write (a local path, s3://, gs://, az://...); copy the data there"
        )
    import fsspec

    try:
        cls = fsspec.get_filesystem_class(scheme)
    except ImportError as exc:  # fsspec's message names the package ("Install s3fs ...")
        hint = str(exc)
        extra = " (pip install 'dkrr[s3]')" if "s3fs" in hint else ""
        raise InvalidParameterError(
            f"{what} {text!r}: the fsspec implementation of {scheme}:// is not installed: "
            f"{hint}{extra}"
        ) from None
    except ValueError:
        raise InvalidParameterError(
            f"{what} {text!r} is a URL of the unknown scheme {scheme}://; give a local path "
            "or the URL of a filesystem fsspec knows (s3://, gs://, az://, memory://...)"
        ) from None
    try:
        fs = cls(**options)
        if type(fs).__module__.split(".")[0] == "s3fs":  # s3fs builds its client at the first request:
            fs.connect()  # an option it refuses (an endpoint without http://) fails here, not in a traceback
    except Exception as exc:  # noqa: BLE001 - any filesystem's own refusal of its options
        hint = " (endpoint_url takes a scheme: http://host:port)" if "invalid endpoint" in str(exc).lower() else ""
        raise InvalidParameterError(
            f"{what} {text!r}: the {scheme}:// filesystem refused the storage options "
            f"({_one_line(exc)}){hint}; see its documentation (s3fs for s3://) for the options"
        ) from None
    inner = cls._strip_protocol(text).rstrip("/")
    if "//" in inner or (scheme in _BUCKETS and inner.startswith("/")):
        # an object store keeps the empty segment as part of its keys (s3://b//k is the key
        # "/k"): what is written there is not where the listing of the URL looks
        raise InvalidParameterError(
            f"{what} {text!r} has an empty path segment ('//' or a '/' before the bucket); "
            f"remove the extra slash ({scheme}://bucket/path/data.zarr)"
        )
    if not inner.strip("/") or ("/" not in inner.strip("/") and scheme != "memory"):
        raise InvalidParameterError(
            f"{what} {text!r} names a bucket, not a store in it; give a path inside the "
            f"bucket ({scheme}://bucket/data.zarr)"
        )
    return Remote(url=fs.unstrip_protocol(inner), fs=fs, path=inner, storage_options=options)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or repr(exc)
    return f"{type(exc).__name__}: {text}"


_TRANSPORT = {"ConnectionError", "EndpointConnectionError", "ClientConnectorError",
              "ConnectTimeoutError", "ReadTimeoutError", "ServerDisconnectedError",
              "ClientOSError", "TimeoutError", "ConnectionClosedError", "ClientPayloadError"}
_STORAGE_LIBRARIES = ("botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "adlfs", "azure",
                      "google", "fsspec")


def is_storage_failure(exc: BaseException) -> bool:
    """Whether `exc` is a failure of storage (an OSError, or an error of an object store's
    client library), rather than a dkrr error or a bug."""
    if isinstance(exc, DkrrError) or not isinstance(exc, Exception):
        return False
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in _STORAGE_LIBRARIES


def describe(exc: BaseException) -> str:
    """The cause of an object store's failure in words, with what usually fixes it."""
    text = _one_line(exc)
    low = text.lower()
    if isinstance(exc, PermissionError) or "forbidden" in low or "accessdenied" in low:
        return (f"access denied ({text}); check the credentials (--storage-options, the "
                "AWS_* / GOOGLE_* / AZURE_* environment variables) and their permissions")
    if isinstance(exc, FileNotFoundError) and "bucket" in low:
        return f"the bucket does not exist ({text}); create it first or fix the URL"
    if {c.__name__ for c in type(exc).__mro__} & _TRANSPORT:
        return (f"the object store cannot be reached or broke off the connection ({text}); "
                "check the endpoint and the network, then run again")
    return text


def store_error(exc: BaseException, doing: str, url: str,
                cls: type[DkrrError] = ObjectStoreError) -> DkrrError:
    """`exc`, an object store's failure while `doing` `url`, as a dkrr error (`cls`) with a
    one-line message naming the URL and the cause; a dkrr error passes unchanged."""
    if isinstance(exc, DkrrError):
        return exc
    return cls(f"cannot {doing} {url}: {describe(exc)}")


@contextlib.contextmanager
def within_remote(doing: str, url: str, cls: type[DkrrError] = ObjectStoreError) -> Iterator[None]:
    """Turn a storage failure in the block (an object store's request:
    :func:`is_storage_failure`) into :func:`store_error`; anything else propagates."""
    try:
        yield
    except Exception as exc:
        if not is_storage_failure(exc):
            raise
        raise store_error(exc, doing, url, cls) from None
