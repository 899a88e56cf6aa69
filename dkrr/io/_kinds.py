"""What kind of output a directory is, and whether ``--overwrite`` may replace it.

dkrr replaces only what it can vouch for: a Zarr group carrying the ``dkrr_layout``
attribute of the version this dkrr writes, of the same kind as the new output (a dataset
holding ``X`` and ``y``, or predictions holding ``y_pred`` and marked
``dkrr_predictions = 1``), and holding nothing but Zarr metadata and chunk files.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import zarr

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

_METADATA_FILES = frozenset({"zarr.json", ".zgroup", ".zarray", ".zattrs", ".zmetadata"})


def _is_chunk_name(name: str) -> bool:
    return all(part.isdigit() for part in name.split("."))


def _foreign_in_array(root: Path, rel: str) -> list[str]:
    """Entries of an array directory that are neither metadata nor chunks."""
    foreign = []
    for entry in os.scandir(root):
        name = f"{rel}/{entry.name}"
        if entry.is_symlink():
            foreign.append(name)
        elif entry.is_file():
            if entry.name not in _METADATA_FILES and not _is_chunk_name(entry.name):
                foreign.append(name)
        elif entry.is_dir() and (entry.name == "c" or _is_chunk_name(entry.name)):
            foreign += _foreign_chunks(Path(entry.path), name)
        else:
            foreign.append(name)
    return foreign


def _foreign_chunks(root: Path, rel: str) -> list[str]:
    foreign = []
    for entry in os.scandir(root):
        name = f"{rel}/{entry.name}"
        if entry.is_symlink() or not _is_chunk_name(entry.name):
            foreign.append(name)
        elif entry.is_dir():
            foreign += _foreign_chunks(Path(entry.path), name)
        elif not entry.is_file():
            foreign.append(name)
    return foreign


def _foreign_entries(path: Path, arrays: set[str]) -> list[str]:
    foreign = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.is_symlink():
            foreign.append(entry.name)
        elif entry.is_file() and entry.name in _METADATA_FILES:
            continue
        elif entry.is_dir() and entry.name in arrays:
            foreign += _foreign_in_array(Path(entry.path), entry.name)
        else:
            foreign.append(entry.name)
    return foreign


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
    try:
        with warnings.catch_warnings():  # foreign files are reported below
            warnings.simplefilter("ignore")
            group = zarr.open_group(str(path), mode="r")
            attrs = dict(group.attrs.asdict())
            arrays = set(group.array_keys())
    except Exception:  # noqa: BLE001 - any failure means: not a store we can vouch for
        return "it is a directory but not a readable Zarr group"
    layout = attrs.get("dkrr_layout")
    if layout is None:
        return "it is a Zarr group with no dkrr_layout attribute, so not written by dkrr"
    if isinstance(layout, bool) or layout != LAYOUT_VERSION:
        return (
            f"it has dkrr layout version {layout!r}; this dkrr writes version "
            f"{LAYOUT_VERSION} and replaces only that"
        )
    is_predictions = attrs.get(PREDICTIONS_MARKER) == 1 or arrays == {"y_pred"}
    if kind == "predictions" and not (is_predictions and arrays <= {"y_pred"}):
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
    foreign = _foreign_entries(path, arrays)
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        return f"it holds files dkrr did not write ({shown}); move them away first"
    return None


def zarr_replace_check(path: Path) -> str | None:
    """``can_replace`` callback for a dataset: only a dkrr dataset (or an empty directory).

    The group must carry ``dkrr_layout`` equal to :data:`LAYOUT_VERSION`, hold ``X``
    (and optionally ``y``), not be a prediction store, and hold nothing but Zarr
    metadata and chunk files. Returns ``None`` or the reason for refusing.
    """
    return _replace_check(Path(path), "dataset")


def predictions_replace_check(path: Path) -> str | None:
    """``can_replace`` callback for predictions: only a dkrr prediction store (or an
    empty directory) holding nothing but ``y_pred``'s metadata and chunks."""
    return _replace_check(Path(path), "predictions")
