"""What kind of output a directory is, and whether ``--overwrite`` may replace it.

dkrr replaces only what it can vouch for: a Zarr group carrying the ``dkrr_layout``
attribute of the version this dkrr writes, of the same kind as the new output (a dataset
holding ``X`` and ``y``, or predictions holding ``y_pred`` (and ``y_std``) and marked
``dkrr_predictions = 1``), and holding nothing but Zarr metadata and chunk files. In an
object store, the remains of a dkrr write that did not commit (its marker is there) are
replaceable too when they hold nothing else.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import zarr

from ._paths import Remote, within_remote
from ._remote import is_incomplete, remote_keys

__all__ = [
    "LAYOUT_VERSION",
    "PREDICTIONS_MARKER",
    "predictions_replace_check",
    "zarr_replace_check",
]

#: Version of the store layout written in the ``dkrr_layout`` group attribute.
LAYOUT_VERSION = 1

#: Group attribute marking a store of predictions (written by :func:`write_predictions`).
PREDICTIONS_MARKER = "dkrr_predictions"

#: the arrays a store of predictions may hold (``y_std`` with ``dkrr predict --std``)
PREDICTION_ARRAYS = frozenset({"y_pred", "y_std"})

_METADATA_FILES = frozenset({"zarr.json", ".zgroup", ".zarray", ".zattrs", ".zmetadata"})


def _is_chunk_name(name: str) -> bool:
    return all(part.isdigit() for part in name.split("."))


def _ours(parts: tuple[str, ...], arrays: set[str], is_dir: bool) -> bool:
    """Whether the entry ``/``.join(`parts`) of a store (a directory when `is_dir`) is
    one dkrr writes: group metadata, an array's folder, its metadata, and chunk files
    (``c/0/0`` in format 3, ``0.0`` in format 2)."""
    name = parts[-1]
    if len(parts) == 1:
        return name in arrays if is_dir else name in _METADATA_FILES
    if parts[0] not in arrays:
        return False
    if len(parts) == 2:
        return (name == "c" or _is_chunk_name(name)) if is_dir else (
            name in _METADATA_FILES or _is_chunk_name(name))
    return _is_chunk_name(name)


def _foreign_entries(path: Path, arrays: set[str]) -> list[str]:
    """Entries of a local store dkrr did not write (a foreign folder is named once)."""
    foreign: list[str] = []

    def walk(folder: Path, parts: tuple[str, ...]) -> None:
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            rel = parts + (entry.name,)
            is_dir = entry.is_dir(follow_symlinks=False)
            if entry.is_symlink() or not (is_dir or entry.is_file(follow_symlinks=False)) \
                    or not _ours(rel, arrays, is_dir):
                foreign.append("/".join(rel))
            elif is_dir:
                walk(Path(entry.path), rel)

    walk(path, ())
    return foreign


def _foreign_keys(keys: list[str], arrays: set[str]) -> list[str]:
    """Keys of an object store's prefix that dkrr did not write (as :func:`_foreign_entries`:
    each key's folders are checked as folders, the key itself as a file)."""
    foreign: list[str] = []
    for key in keys:
        parts = tuple(key.split("/"))
        for i in range(1, len(parts) + 1):
            if not _ours(parts[:i], arrays, i < len(parts)):
                rel = "/".join(parts[:i])
                if rel not in foreign:
                    foreign.append(rel)
                break
    return foreign


def _vouch(attrs: dict, arrays: set[str], kind: str) -> str | None:
    """Whether a group's attributes and arrays make it a dkrr output of `kind`."""
    layout = attrs.get("dkrr_layout")
    if layout is None:
        return "it is a Zarr group with no dkrr_layout attribute, so not written by dkrr"
    if isinstance(layout, bool) or layout != LAYOUT_VERSION:
        return (
            f"it has dkrr layout version {layout!r}; this dkrr writes version "
            f"{LAYOUT_VERSION} and replaces only that"
        )
    is_predictions = attrs.get(PREDICTIONS_MARKER) == 1 or arrays == {"y_pred"}
    if kind == "predictions" and not (is_predictions and arrays <= PREDICTION_ARRAYS):
        return (
            f"it is not a dkrr prediction store (it holds {sorted(arrays)}); "
            "predictions replace only predictions"
        )
    if kind == "dataset" and (is_predictions or "X" not in arrays or not arrays <= {"X", "y"}):
        return (
            f"it is not a dkrr dataset (it holds {sorted(arrays)}"
            + (", dkrr predictions" if is_predictions else "")
            + "); a dataset replaces only a dataset"
        )
    return None


def _group_contents(store) -> tuple[dict, set[str]] | None:
    try:
        with warnings.catch_warnings():  # foreign files are reported separately
            warnings.simplefilter("ignore")
            group = zarr.open_group(store, mode="r")
            return dict(group.attrs.asdict()), set(group.array_keys())
    except Exception:  # noqa: BLE001 - any failure means: not a store we can vouch for
        return None


def _foreign_reason(foreign: list[str]) -> str | None:
    if not foreign:
        return None
    shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
    return f"it holds files dkrr did not write ({shown}); move them away first"


def _replace_check(path: Path, kind: str) -> str | None:
    if path.is_symlink():
        return "it is a symbolic link, not a dkrr store"
    if not path.is_dir():
        return "it is not a Zarr store (a directory with zarr.json)"
    entries = sorted(p.name for p in path.iterdir())
    if not entries:
        return None
    if not any(name in _METADATA_FILES for name in entries):
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        return f"it is a directory that is not a Zarr store (it holds {shown})"
    contents = _group_contents(str(path))
    if contents is None:
        return "it is a directory but not a readable Zarr group"
    attrs, arrays = contents
    return _vouch(attrs, arrays, kind) or _foreign_reason(_foreign_entries(path, arrays))


def _remote_replace_check(where: Remote, kind: str) -> str | None:
    """:func:`_replace_check` for a URL. Remains of a dkrr write that did not commit (its
    marker :func:`~dkrr.io._remote.marker_of` is there) are dkrr's own: replaceable when
    they hold nothing but Zarr metadata and chunks."""
    keys = remote_keys(where)
    if keys is None:
        return "it is an object (a file), not a Zarr store (a folder with zarr.json)"
    if not keys:
        return None
    if is_incomplete(where):
        arrays = {k.split("/")[0] for k in keys if "/" in k}
        return _foreign_reason(_foreign_keys(keys, arrays))
    if not any(k in _METADATA_FILES for k in keys):
        entries = sorted({k.split("/")[0] for k in keys})
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        return f"it is a folder that is not a Zarr store (it holds {shown})"
    with within_remote("read", where.url):
        contents = _group_contents(where.zarr_store(read_only=True))
    if contents is None:
        return "it is a folder but not a readable Zarr group"
    attrs, arrays = contents
    return _vouch(attrs, arrays, kind) or _foreign_reason(_foreign_keys(keys, arrays))


def _check(path, kind: str) -> str | None:
    if isinstance(path, Remote):
        return _remote_replace_check(path, kind)
    return _replace_check(Path(path), kind)


def zarr_replace_check(path: Path) -> str | None:
    """``can_replace`` callback for a dataset: only a dkrr dataset (or an empty directory).

    The group must carry ``dkrr_layout`` equal to :data:`LAYOUT_VERSION`, hold ``X``
    (and optionally ``y``), not be a prediction store, and hold nothing but Zarr
    metadata and chunk files. Returns ``None`` or the reason for refusing.
    """
    return _check(path, "dataset")


def predictions_replace_check(path: Path) -> str | None:
    """``can_replace`` callback for predictions: only a dkrr prediction store (or an
    empty directory) holding nothing but the metadata and chunks of ``y_pred`` (and
    ``y_std``)."""
    return _check(path, "predictions")
