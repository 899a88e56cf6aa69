"""Reading the arrays of a store as dask arrays, refusing metadata that lies.

Before a graph is built, the declared shape and chunks are checked against what a block
and a graph can hold; every block is read through :class:`_BlockReader`, which turns a
corrupted or unreadable chunk into a :class:`~dkrr.errors.StoreError` naming the array
and the store. Keys are tokens of the path, the array's metadata and the identity
(inode, modification time) of the metadata files, so a replaced store gets new keys.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import zarr
from dask.base import tokenize

from ..errors import StoreError

__all__ = ["MAX_BLOCKS", "MAX_BLOCK_BYTES", "read_array"]

#: Largest chunk (uncompressed bytes) a store may declare: one task reads it whole into
#: memory, and it is the most one Blosc frame can hold.
MAX_BLOCK_BYTES = 2**31
#: Most row blocks an array may declare: beyond that the graph itself does not fit.
MAX_BLOCKS = 1_000_000


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


class _BlockReader:
    """What a dask task needs to read one array of a store: the Zarr array, with read
    errors (a corrupted or unreadable chunk) turned into a :class:`StoreError` naming the
    array and the store."""

    def __init__(self, array: Any, name: str, path: Path):
        self.array, self.name, self.path = array, name, str(path)
        self.shape, self.dtype, self.ndim = array.shape, np.dtype(array.dtype), array.ndim

    def __getitem__(self, key):
        try:
            return self.array[key]
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - codecs raise many types
            rows = key[0] if isinstance(key, tuple) else key
            where = f"rows {rows.start}..{rows.stop} " if isinstance(rows, slice) else ""
            raise StoreError(
                f"cannot read {where}of array {self.name!r} of {self.path}: the store is "
                f"corrupted or unreadable ({type(exc).__name__}: {exc}); re-create it with "
                "`dkrr ingest` or restore it from a copy"
            ) from None


def read_array(group: zarr.Group, name: str, path: Path) -> da.Array:
    """Array `name` of `group` as a dask array chunked like the store (checked first)."""
    arr = group[name]
    _check_declared(name, arr, path)
    meta = json.dumps(arr.metadata.to_dict(), sort_keys=True, default=str)
    token = tokenize(str(path), name, meta, _metadata_identity(path, name))
    return da.from_array(
        _BlockReader(arr, name, path), chunks=arr.chunks, name=f"dkrr-read-{name}-{token}",
        asarray=True, fancy=False,
    )
