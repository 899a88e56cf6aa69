"""Reading the arrays of a store as dask arrays, refusing metadata that lies.

Before a graph is built, the array metadata must parse (else a
:class:`~dkrr.errors.StoreError` names the array), the declared shape and chunks are
checked against what a block and a graph can hold, and a store written by dkrr is checked
to be complete: its group attribute :data:`MANIFEST` records the shape and chunks of each
array as written, and every chunk of that grid must be present (one ``stat`` per
chunk), since dkrr writes every chunk (also those that are all zeros) and Zarr would
read a missing one as zeros. Every block is read through :class:`_BlockReader`,
which turns a corrupted or unreadable chunk into a StoreError naming the array and the
store. Keys are tokens of the path, the array's metadata and the identity (inode,
modification time) of the metadata files, so a replaced store gets new keys.

A store given as a URL (:class:`~dkrr.io._paths.Remote`) is read the same way through a
Zarr ``FsspecStore``: the chunks present are found by one listing instead of a ``stat``
each, the identity of the metadata is its ETag (or modification time), a store whose commit
marker says it is incomplete is refused (:func:`~dkrr.io._remote.check_committed`), and
each block is read by the dask worker that runs its task, straight from the object store
(the store, with its storage options, travels in the task). A failure of the object store
(unreachable, credentials refused, a connection broken off) is an
:class:`~dkrr.errors.ObjectStoreError` naming the store and the cause.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import zarr
from dask.base import tokenize

from ..errors import InputValidationError, ObjectStoreError, StoreError, StoreNotFoundError
from ._paths import Remote, describe, is_storage_failure, within_remote, zarr_location
from ._remote import check_committed, missing, remote_keys, remote_listing

__all__ = [
    "MANIFEST", "MAX_BLOCKS", "MAX_BLOCK_BYTES", "array_names", "check_numeric", "check_written",
    "manifest",
    "open_array", "open_group", "read_array",
]

#: Largest chunk (uncompressed bytes) a store may declare: one task reads it whole into
#: memory, and it is the most one Blosc frame can hold.
MAX_BLOCK_BYTES = 2**31
#: Most row blocks an array may declare: beyond that the graph itself does not fit.
MAX_BLOCKS = 1_000_000
#: Group attribute in which dkrr records each array it wrote, as
#: ``{name: {"shape": [...], "chunks": [...]}}``; its presence also says that every
#: chunk was written (stores written before dkrr recorded it may lack all-zero chunks).
MANIFEST = "dkrr_arrays"
#: Chunks and row ranges named in a message.
_SHOWN = 5


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _bad_metadata(path: Path, name: str, exc: BaseException) -> StoreError:
    return StoreError(
        f"store {path}: the metadata of array {name!r} is corrupted or not supported "
        f"({_one_line(exc)}); re-create the store with `dkrr ingest` or restore it "
        "from a copy"
    )


def array_names(group: zarr.Group, path: Path) -> list[str]:
    """Names of the arrays in `group`; metadata that does not parse (bad JSON, an
    unknown dtype or codec) is a :class:`StoreError` naming the array and the store."""
    try:
        with warnings.catch_warnings():
            # zarr < 3.1 leaves a node whose metadata does not parse (an unknown codec) out
            # of the listing, with a warning: it is found below and named in a StoreError
            warnings.simplefilter("ignore", UserWarning)
            names = sorted(group.array_keys())
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - zarr raises many types for bad metadata
        if isinstance(path, Remote) and is_storage_failure(exc):
            raise ObjectStoreError(f"cannot read {path}: {describe(exc)}") from None
        _refuse_unreadable_nodes(group, path, listed=())
        raise StoreError(
            f"store {path}: cannot list its arrays ({_one_line(exc)}); the store is "
            "corrupted: re-create it with `dkrr ingest` or restore it from a copy"
        ) from None
    _refuse_unreadable_nodes(group, path, listed=names)
    return names


def _refuse_unreadable_nodes(group: zarr.Group, path: Path | Remote, listed) -> None:
    """A :class:`StoreError` for the first folder of `path` not in `listed` that holds
    Zarr metadata of the group's format but does not open; other folders are passed over
    (zarr < 3.1 raises a bare KeyError for an unknown codec, as for a missing node)."""
    files = ("zarr.json",) if group.metadata.zarr_format == 3 else (".zarray", ".zgroup")
    for name in _folders(path):
        if name in listed:
            continue
        remote = isinstance(path, Remote)
        if not remote and not any(os.path.isfile(os.path.join(path, name, f)) for f in files):
            continue  # not a Zarr node
        try:
            group[name]
        except KeyError:
            if remote:
                continue  # not a Zarr node (an object store has no folders to look into)
            raise _bad_metadata(path, name, KeyError(name)) from None
        except Exception as inner:  # noqa: BLE001 - zarr raises many types for bad metadata
            raise _bad_metadata(path, name, inner) from None


def _folders(path: Path | Remote) -> list[str]:
    """Names of the sub-folders of a store, sorted."""
    if isinstance(path, Remote):
        return sorted({k.split("/")[0] for k in remote_keys(path) or [] if "/" in k})
    return sorted(e.name for e in os.scandir(path) if e.is_dir())


def _missing_chunks(path: Path | Remote, name: str, arr: Any, chunks: list[tuple],
                    listing: dict | None) -> list[tuple]:
    """The chunks of `chunks` that are not stored: one ``stat`` each on a local disk (a
    listing costs a directory read per row chunk there: several times slower); in an
    object store, those absent from the array's `listing` (one request per 1,000 keys
    instead of one per chunk)."""
    encode = arr.metadata.encode_chunk_key
    if listing is not None:
        return [c for c in chunks if encode(c) not in listing]
    root = os.path.join(path, name)
    return [c for c in chunks if not os.path.exists(os.path.join(root, encode(c)))]


def manifest(arrays: Mapping[str, Any]) -> dict[str, dict[str, list[int]]]:
    """The :data:`MANIFEST` attribute recording `arrays` (name -> Zarr array) as written."""
    return {
        name: {"shape": [int(s) for s in a.shape], "chunks": [int(c) for c in a.chunks]}
        for name, a in arrays.items()
    }


def _row_ranges(blocks: list[int], rows: int, n: int) -> str:
    shown = [f"{b * rows}-{min((b + 1) * rows, n) - 1}" for b in blocks[:_SHOWN]]
    more = f" and {len(blocks) - _SHOWN} more chunk(s)" if len(blocks) > _SHOWN else ""
    return ", ".join(shown) + more


def _check_complete(group: zarr.Group, name: str, arr: Any, path: Path | Remote,
                    listing: dict | None = None) -> None:
    """Refuse a dkrr store whose array `name` differs from what dkrr recorded writing
    or lacks chunks of its grid. A store without the record (older dkrr, another
    program) is read by Zarr's rules: a missing chunk is the fill value."""
    record = group.attrs.get(MANIFEST)
    if record is None:
        return
    entry = record.get(name) if isinstance(record, dict) else None
    if not isinstance(entry, dict):
        raise StoreError(
            f"store {path}: its {MANIFEST} attribute (what dkrr wrote) has no valid entry "
            f"for array {name!r}; the store was changed after dkrr wrote it: re-create it "
            "with `dkrr ingest` or restore it from a copy"
        )
    shape, chunks = tuple(int(s) for s in arr.shape), tuple(int(c) for c in arr.chunks)
    written = (tuple(entry.get("shape") or ()), tuple(entry.get("chunks") or ()))
    if (shape, chunks) != written:
        raise StoreError(
            f"store {path}: array {name!r} declares shape {shape} in chunks {chunks}, but "
            f"dkrr wrote it with shape {written[0]} in chunks {written[1]}; its metadata "
            "was changed or corrupted: re-create the store with `dkrr ingest` or restore "
            "it from a copy"
        )
    grid = tuple(-(-s // c) for s, c in zip(shape, getattr(arr, "shards", None) or chunks))
    # the key encoding ("c/0/0", or "0.0" for format 2) is the array's
    missing = _missing_chunks(path, name, arr, list(itertools.product(*(range(g) for g in grid))), listing)
    if missing:
        blocks = sorted({c[0] for c in missing})
        raise StoreError(
            f"store {path}: array {name!r} is missing {len(missing)} of "
            f"{math.prod(grid)} chunk(s) ({arr.metadata.encode_chunk_key(missing[0])}"
            f"{', ...' if len(missing) > 1 else ''}): rows {_row_ranges(blocks, chunks[0], shape[0])} "
            f"of {shape[0]} (counted from 0) are not stored, and Zarr would read them as "
            "zeros; the store is incomplete or corrupted: re-create it with `dkrr ingest` "
            "or restore it from a copy"
        )


def check_written(group: zarr.Group, name: str, arr: Any, where: Remote) -> None:
    """Before an object store's output is committed: every chunk of the array `name` the
    workers wrote is in the store (one listing). A memory:// store written by worker
    processes (each has its own memory) fails here instead of committing empty arrays."""
    with within_remote("check", where.url):
        listing = remote_listing(where.child(name)) or {}
    try:
        _check_complete(group, name, arr, where, listing)
    except StoreError as exc:
        hint = (" (a memory:// store lives in one process: the dask workers wrote into their "
                "own; use the threaded scheduler, or a store the workers reach)"
                if where.process_local else "")
        raise StoreError(f"the blocks written to {where.url} are not all there{hint}: {exc}") from None


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def _check_declared(name: str, arr: Any, path: Path) -> None:
    """Refuse metadata declaring chunks or chunk counts no computer can hold."""
    shape, chunks = tuple(int(s) for s in arr.shape), tuple(int(c) for c in arr.chunks)
    itemsize = np.dtype(arr.dtype).itemsize
    elements = math.prod(chunks)
    if elements * itemsize > MAX_BLOCK_BYTES:
        raise StoreError(
            f"array {name!r} in {path} declares shape {shape} with chunks {chunks}: one "
            f"chunk holds {float(elements):.3g} elements ({_gib(elements * itemsize)}), "
            f"more than the {_gib(MAX_BLOCK_BYTES)} a chunk may hold (one task reads it "
            "whole into memory); the metadata is corrupted or the store was not written "
            "for dkrr: re-ingest it with a smaller --chunk-rows"
        )
    blocks = math.prod(-(-s // max(c, 1)) for s, c in zip(shape, chunks))
    if blocks > MAX_BLOCKS:
        raise StoreError(
            f"array {name!r} in {path} declares {shape[0]} rows in chunks of {chunks[0]} "
            f"rows: {blocks:,} blocks, more than the {MAX_BLOCKS:,} blocks one dask graph "
            "can schedule; the metadata is corrupted, or re-ingest with a larger "
            "--chunk-rows"
        )


def _metadata_identity(path: Path, name: str) -> tuple:
    """Inode and modification time of the metadata files: a replaced store (dkrr writes
    stores whole, then renames) gets new keys, so a scheduler that still holds blocks of
    the old one never serves them for the new one."""
    ident = []
    for rel in ("zarr.json", ".zgroup", f"{name}/zarr.json", f"{name}/.zarray"):
        with contextlib.suppress(OSError):
            st = os.stat(path / rel)
            ident.append((rel, st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(ident)


def _remote_identity(path: Remote, listing: dict[str, dict]) -> tuple:
    """:func:`_metadata_identity` in an object store: the root metadata and every object of
    the array (`listing`) by ETag (a digest of the content on S3), size and modification
    time, and the storage options (another endpoint is another store). A store rewritten
    with other values gets new keys even within the same second."""
    top = [i for i in path.fs.ls(path.path, detail=True)
           if i["name"].rsplit("/", 1)[-1] in ("zarr.json", ".zgroup", ".zattrs")]
    objects = [(i["name"].rsplit("/", 1)[-1], i) for i in top] + sorted(listing.items())
    ident = [(rel, str(i.get("ETag") or i.get("etag") or ""),
              str(i.get("LastModified") or i.get("mtime") or ""), i.get("size"))
             for rel, i in objects]
    return (tokenize(sorted(path.storage_options.items(), key=str), ident),)


class _BlockReader:
    """What a dask task needs to read one array of a store: the Zarr array, with read
    errors (a corrupted or unreadable chunk) turned into a :class:`StoreError` naming the
    array and the store."""

    def __init__(self, array: Any, name: str, path: Path | Remote):
        self.array, self.name, self.path = array, name, str(path)
        self.remote = isinstance(path, Remote)
        # a memory:// store lives in this process: another one would read its own, empty
        self.pid = os.getpid() if self.remote and path.process_local else None
        self.shape, self.dtype, self.ndim = array.shape, np.dtype(array.dtype), array.ndim

    def __getitem__(self, key):
        if self.pid is not None and os.getpid() != self.pid:
            raise StoreError(
                f"{self.path} is a memory:// store, which lives in the process that opened it; "
                "this block is read by another process (a dask worker): use the threaded "
                "scheduler, or a store the workers reach (a shared path, s3://, gs://...)"
            )
        try:
            return self.array[key]
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - codecs raise many types
            rows = key[0] if isinstance(key, tuple) else key
            where = f"rows {rows.start}..{rows.stop} " if isinstance(rows, slice) else ""
            if self.remote and is_storage_failure(exc):
                raise ObjectStoreError(
                    f"cannot read {where}of array {self.name!r} of {self.path}: {describe(exc)}"
                ) from None
            raise StoreError(
                f"cannot read {where}of array {self.name!r} of {self.path}: the store is "
                f"corrupted or unreadable ({type(exc).__name__}: {exc}); re-create it with "
                "`dkrr ingest` or restore it from a copy"
            ) from None


def open_array(group: zarr.Group, name: str, path: Path | Remote) -> Any:
    """The Zarr array `name` of `group`; metadata that does not parse is a StoreError."""
    try:
        return group[name]
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - zarr raises many types for bad metadata
        if isinstance(path, Remote) and is_storage_failure(exc) and not isinstance(exc, KeyError):
            raise ObjectStoreError(f"cannot read array {name!r} of {path}: {describe(exc)}") from None
        raise _bad_metadata(path, name, exc) from None


def read_array(group: zarr.Group, name: str, path: Path | Remote) -> da.Array:
    """Array `name` of `group` as a dask array with the store's row chunks and whole rows
    (checked first: plausible metadata, and for a store dkrr wrote, the recorded shape and
    every chunk). It is reader-backed (:mod:`dkrr._rows`): a pass reads each block by
    slice inside the step that consumes it (from a URL, the worker reads the object store)."""
    from .._rows import RowReader, row_array

    arr = open_array(group, name, path)
    _check_declared(name, arr, path)
    if isinstance(path, Remote):
        with within_remote("read", path.url):
            listing = remote_listing(path.child(name)) or {}
            _check_complete(group, name, arr, path, listing)
            identity = _remote_identity(path, listing)
    else:
        _check_complete(group, name, arr, path)
        identity = _metadata_identity(path, name)
    meta = json.dumps(arr.metadata.to_dict(), sort_keys=True, default=str)
    token = tokenize(str(path), name, meta, identity)
    return row_array(RowReader(_BlockReader(arr, name, path), f"dkrr-read-{name}-{token}"), arr.chunks[0])


def _check_remote_node(path: Remote) -> None:
    """The checks :func:`open_group` makes on a local path, for a URL (and the commit
    marker: a store still being written, or whose writer failed, is refused)."""
    fs = path.fs
    with within_remote("read", path.url):
        fs.invalidate_cache(path.path)
        if not fs.exists(path.path):
            raise missing(path, "Zarr store", StoreNotFoundError,
                          "; create one with `dkrr ingest` (dkrr.io.ingest) from a CSV, LIBSVM or .npy file")
        if fs.isfile(path.path):
            raise StoreError(
                f"{path} is an object (a file), not a Zarr store (a folder holding zarr.json); "
                "convert a CSV, LIBSVM or .npy file with `dkrr ingest` first"
            )
        check_committed(path, "Zarr store", StoreError)
        if not any(fs.exists(path.key(m)) for m in ("zarr.json", ".zgroup", ".zarray")):
            entries = sorted({k.split("/")[0] for k in remote_keys(path) or []})
            shown = ", ".join(entries[:10]) + (", ..." if len(entries) > 10 else "")
            raise StoreError(
                f"{path} is a folder but not a Zarr store: it has no zarr.json "
                f"(found: {shown or 'nothing'})"
            )


def _check_local_node(path: Path) -> None:
    if not os.path.lexists(path):
        raise StoreNotFoundError(
            f"Zarr store {path} does not exist; create one with `dkrr ingest` "
            "(dkrr.io.ingest) from a CSV, LIBSVM or .npy file"
        )
    if not path.is_dir():
        raise StoreError(
            f"{path} is a file, not a Zarr store (a directory holding zarr.json); "
            "convert a CSV, LIBSVM or .npy file with `dkrr ingest` first"
        )
    has_v3 = (path / "zarr.json").is_file()
    has_v2 = (path / ".zgroup").is_file() or (path / ".zarray").is_file()
    if not (has_v3 or has_v2):
        entries = sorted(p.name for p in path.iterdir())
        shown = ", ".join(entries[:10]) + (", ..." if len(entries) > 10 else "")
        raise StoreError(
            f"{path} is a directory but not a Zarr store: it has no zarr.json "
            f"(found: {shown or 'nothing'})"
        )


def open_group(path: Path | Remote) -> zarr.Group:
    """The Zarr group at ``path`` (a local path or a URL), or a one-line error saying what
    is there instead."""
    remote = isinstance(path, Remote)
    if remote:
        _check_remote_node(path)
    else:
        _check_local_node(path)
    try:
        node = zarr.open(store=zarr_location(path, read_only=True), mode="r")
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}: the Zarr metadata file is corrupted ({exc})") from exc
    except Exception as exc:  # zarr raises many types for broken metadata
        if remote and is_storage_failure(exc):
            raise ObjectStoreError(f"cannot read {path}: {describe(exc)}") from None
        raise StoreError(
            f"cannot open {path} as a Zarr group: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(node, zarr.Group):
        raise StoreError(
            f"{path} is a Zarr array of shape {node.shape}, not a group; a dkrr store "
            "is a group holding the arrays X and y"
        )
    return node


def check_numeric(name: str, arr: Any, path: Path | None, *,
                  fix: str = "store integers or floats (re-ingest with `dkrr ingest`)") -> None:
    """Refuse an array whose dtype is not integer or float (`path` None: not yet stored)."""
    dtype = np.dtype(arr.dtype)
    if dtype.kind not in "iuf":
        where = f"array {name!r} in {path}" if path is not None else name
        raise InputValidationError(f"{where} has dtype {dtype}, which is not numeric; {fix}")
