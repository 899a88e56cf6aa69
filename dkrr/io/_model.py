"""Saved models: a directory of plain data that loads without executing code.

Layout of a model directory::

    MODEL_DIR/
      model.json          format name and version, dkrr/numpy versions, estimator class,
                          constructor parameters and fitted attributes; every array is a
                          reference {"__ndarray__": "arrays/<name>.npy", "sha256", "shape",
                          "dtype"} to a file below; non-numeric labels are JSON lists
                          {"__labels__": [...], "dtype", "type"}
      arrays/*.npy        numeric arrays (loaded with allow_pickle=False)

The loader trusts nothing in the directory. Only estimator classes in the whitelist of
:data:`dkrr.estimators.MODEL_CLASSES` are built, their constructor receives
only JSON values, and only the fitted attributes listed in :data:`FITTED_ATTRIBUTES` for
that class are set, each checked for its type, dtype, shape and finiteness and then
against what it derives from (the rules of ``AGREEMENT`` in :mod:`dkrr.io._model_agreement`:
the chosen alpha against the CV scores, the classes' order, gamma against the map, ...),
so a changed field is refused even when its checksums were recomputed. An array file must lie in
the model directory, have the size its recorded shape and dtype imply (checked before it
is read), its recorded checksum, and a little-endian bool/int/float dtype. Every problem
is a :class:`~dkrr.errors.ModelFormatError` naming the field. No pickle anywhere.

A model may live in an object store (``s3://bucket/models/m``): it is written to a local
temporary directory, validated there, and uploaded inside
:func:`~dkrr.io._remote.remote_output` (commit marker, lock object; ``model.json`` is
uploaded after the arrays); it is read with the same checks, key by key.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from ._model_reader import (
    _TOP_KEYS,
    FITTED_ATTRIBUTES,
    FORMAT_NAME,
    FORMAT_VERSION,
    _array_refs,
    _model_classes,
    RemoteFiles,
    _read_doc,
    _Reader,
)
from ._paths import Remote, locate, within_remote

__all__ = ["FITTED_ATTRIBUTES", "FORMAT_NAME", "FORMAT_VERSION", "check_replaceable_model", "load_model", "save_model"]


# ---------------------------------------------------------------- writing


class _Writer:
    def __init__(self, root: Path):
        self.root = root
        (root / "arrays").mkdir(parents=True)
        self.count = 0

    def array(self, value: np.ndarray, name: str) -> dict:
        if value.dtype.kind not in "biuf" or value.dtype.itemsize > 8:
            raise ModelFormatError(f"cannot save {name}: arrays of dtype {value.dtype} are not plain numeric data")
        arr = np.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<"))
        self.count += 1
        rel = f"arrays/{self.count:03d}_{re.sub(r'[^A-Za-z0-9_.]', '_', name)[:60]}.npy"
        with open(self.root / rel, "wb") as fh:
            np.lib.format.write_array(fh, arr, allow_pickle=False)
        digest = hashlib.sha256((self.root / rel).read_bytes()).hexdigest()
        return {"__ndarray__": rel, "sha256": digest, "shape": list(arr.shape), "dtype": arr.dtype.str}

    def labels(self, value: Any, name: str) -> Any:
        if not isinstance(value, np.ndarray) or value.ndim != 1:
            raise ModelFormatError(f"cannot save {name}: labels must be a 1-D array, got {type(value).__name__}")
        kind = value.dtype.kind
        if kind == "f" and not np.isfinite(value).all():
            raise ModelFormatError(f"cannot save {name}: float labels must be finite, got {value.tolist()}")
        if kind in "biuf":
            return self.array(value, name)
        if kind == "U":
            return {"__labels__": value.tolist(), "dtype": value.dtype.newbyteorder("<").str, "type": "str"}
        if kind != "O":
            raise ModelFormatError(
                f"cannot save {name}: labels of dtype {value.dtype.name} cannot be stored; use "
                "int, float, bool or str labels"
            )
        found, items = set(), []
        for v in value.tolist():
            t = _label_type(v)
            if t is None:
                raise ModelFormatError(
                    f"cannot save {name}: a label of type {type(v).__name__} ({v!r}) cannot be "
                    "stored; use int, float, bool or str labels"
                )
            v = v.item() if isinstance(v, np.generic) else v
            if t == "float" and not math.isfinite(v):
                raise ModelFormatError(f"cannot save {name}: float labels must be finite, got {v!r}")
            found.add(t)
            items.append(v)
        if len(found) > 1:
            raise ModelFormatError(
                f"cannot save {name}: mixed label types {sorted(found)} would not load back "
                "as the same values; convert y to one type (e.g. y.astype(str)) and refit"
            )
        return {"__labels__": items, "dtype": "|O", "type": found.pop() if found else "str"}

    def plain(self, value: Any, name: str) -> Any:
        from ..features._map import FeatureMap

        if isinstance(value, FeatureMap):
            return {"__feature_map__": self.plain(value.get_state(), name)}
        if hasattr(value, "get_params") and hasattr(value, "__sklearn_tags__"):
            return {"__estimator__": self.estimator(value, name)}
        if isinstance(value, np.ndarray):
            return self.array(value, name)
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise ModelFormatError(f"cannot save {name}: dict keys must be strings")
            return {k: self.plain(v, f"{name}.{k}") for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.plain(v, f"{name}.{i}") for i, v in enumerate(value)]
        if isinstance(value, (np.integer, np.floating, np.bool_)):
            value = value.item()
        if value is None or isinstance(value, (bool, int, float, str)):
            if isinstance(value, float) and not math.isfinite(value):
                return {"__float__": repr(value)}
            return value
        raise ModelFormatError(f"cannot save {name} of type {type(value).__name__} as plain data")

    def estimator(self, est, name: str) -> dict:
        cls = type(est).__name__
        allowed = FITTED_ATTRIBUTES.get(cls, {})
        params = est.get_params(deep=False)
        rs = params.get("random_state")
        if rs is not None and not isinstance(rs, (int, np.integer)):
            # a Generator/RandomState is not plain data; the fitted arrays carry the draws
            params["random_state"] = None
        cv = params.get("cv")
        if cv is not None and not isinstance(cv, (int, np.integer, str)):
            # a splitter or explicit splits is not plain data: saved as its number of folds
            # (the fitted arrays do not depend on it; a refit from the file hashes rows to folds)
            results = getattr(est, "cv_results_", None)
            params["cv"] = None if results is None else int(np.shape(results["fold_mse"])[-2])
        fitted = {}
        for key, val in vars(est).items():
            if not key.endswith("_") or key.startswith("_"):
                continue
            if key not in allowed:
                raise ModelFormatError(
                    f"cannot save {name}.{key}: {cls} model files hold only {sorted(allowed)}"
                )
            where = f"{name}.{key}"
            if allowed[key] == "names":  # column names: a JSON list of strings
                fitted[key] = [str(v) for v in val]
            else:
                fitted[key] = self.labels(val, where) if allowed[key] == "labels" else self.plain(val, where)
        return {"class": cls, "params": self.plain(params, f"{name}.params"), "fitted": fitted}


def _label_type(v: Any) -> str | None:
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "int"
    if isinstance(v, (float, np.floating)):
        return "float"
    if isinstance(v, (str, np.str_)):
        return "str"
    return None


def save_model(estimator, path: str | os.PathLike, *, overwrite: bool = False,
               storage_options: dict | None = None) -> Path | str:
    """Save a fitted dkrr estimator to the directory ``path`` (atomically).

    The directory is read back and validated as :func:`load_model` would before it is
    moved into place, so what is saved loads.

    Parameters
    ----------
    estimator : RandomFeatureRidge, RandomFeatureRidgeClassifier or RandomFeatures
        A fitted dkrr estimator.
    path : str or os.PathLike
        The model directory to create, or its fsspec URL (``s3://bucket/models/m``).
    overwrite : bool, default=False
        Replace an existing dkrr model directory at `path` (nothing else).
    storage_options : dict, optional
        fsspec options when `path` is a URL (``endpoint_url``, credentials...).

    Returns
    -------
    path : pathlib.Path or str
        `path` as given (a URL: as a string).

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``overwrite`` is false, or it is not a dkrr model directory
        holding only its own files (see :func:`check_replaceable_model`).
    ModelFormatError
        The estimator is not a dkrr estimator, holds attributes model files do not know,
        non-plain data, or labels whose type cannot be stored (mixed types, objects other
        than int/float/bool/str, non-finite floats, bytes, dates).
    NotFittedError
        The estimator is not fitted.
    ObjectStoreError
        The object store of a URL failed while the model was uploaded (what was written is
        deleted, or left marked incomplete when the store cannot be reached).
    """
    from sklearn.utils.validation import check_is_fitted

    from ._atomic import atomic_output

    if type(estimator).__name__ not in _model_classes():
        raise ModelFormatError(
            f"{type(estimator).__name__} is not a dkrr estimator that can be saved; "
            f"supported: {sorted(_model_classes())}"
        )
    check_is_fitted(estimator)
    where = locate(path, storage_options, what="model directory")
    if isinstance(where, Remote):
        import tempfile

        with atomic_output(where, overwrite=overwrite, can_replace=check_replaceable_model) as tmp, \
                tempfile.TemporaryDirectory(prefix="dkrr-model-") as local:
            _write_model(estimator, Path(local) / "model")
            _upload(Path(local) / "model", tmp)
        return where.url
    path = Path(where)
    with atomic_output(path, overwrite=overwrite, can_replace=check_replaceable_model) as tmp:
        _write_model(estimator, tmp)
    return path


def _upload(local: Path, dest: Remote) -> None:
    """Upload a model directory: the arrays, then ``model.json``."""
    with within_remote("write", dest.url):
        for file in sorted((local / "arrays").iterdir()):
            dest.fs.put_file(str(file), dest.key(f"arrays/{file.name}"))
        dest.fs.put_file(str(local / "model.json"), dest.key("model.json"))


def _write_model(estimator, tmp: Path) -> None:
    """Write the model directory `tmp` and check that it loads back."""
    from .._version import __version__

    writer = _Writer(tmp)
    doc = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "dkrr_version": __version__,
        "numpy_version": np.__version__,
        "estimator": {"__estimator__": writer.estimator(estimator, "model")},
    }
    (tmp / "model.json").write_text(json.dumps(doc, indent=1, allow_nan=False), encoding="utf-8")
    try:
        _estimator(tmp, tmp / "model.json", _read_doc(tmp / "model.json"), saving=True)
    except ModelFormatError as exc:
        raise ModelFormatError(f"cannot save {type(estimator).__name__}: it does not load back: {exc}") from None



def check_replaceable_model(path: str | os.PathLike) -> str | None:
    """``None`` when `path` is a dkrr model directory holding nothing else, else why not.

    Used as the ``can_replace`` check of :func:`~dkrr.io._atomic.atomic_output` (and of
    ``check_output`` before a fit): ``overwrite`` replaces only a directory with a
    ``model.json`` carrying the dkrr-model format marker and a known version, plus an
    ``arrays/`` folder of regular files that ``model.json`` refers to. In an object store,
    the remains of a dkrr upload that did not commit (its marker is there) are replaceable
    when they hold nothing but ``model.json`` and ``arrays/*.npy``.
    """
    if isinstance(path, Remote):
        return _remote_replaceable(path)
    p = Path(path)
    if p.is_symlink():
        return "it is a symbolic link; give the directory it points to, or another path"
    if not p.is_dir():
        return "it is not a dkrr model directory (not a directory)"
    meta = p / "model.json"
    if meta.is_symlink():
        return "it is not a dkrr model directory (its model.json is a symbolic link)"
    if not meta.is_file():
        if meta.exists():  # (stat only: a FIFO is not opened)
            return f"it is not a dkrr model directory (its model.json is {_file_kind(os.stat(meta).st_mode)})"
        return "it is not a dkrr model directory (no model.json)"
    try:
        doc = _read_doc(meta)
    except (ModelFormatError, OSError) as exc:
        return f"it is not a dkrr model directory ({exc})"
    others = sorted(set(os.listdir(p)) - {"model.json", "arrays"})
    arrays = p / "arrays"
    if arrays.exists() or arrays.is_symlink():
        if arrays.is_symlink() or not arrays.is_dir():
            others.append("arrays")
        else:
            refs = _array_refs(doc)
            for f in sorted(os.listdir(arrays)):
                fp = arrays / f
                if fp.is_symlink() or not fp.is_file() or f"arrays/{f}" not in refs:
                    others.append(f"arrays/{f}")
    if others:
        return (
            f"it holds files that are not part of the dkrr model: {others[:5]}; move them "
            "away or choose another path"
        )
    return None


def _remote_replaceable(where: Remote) -> str | None:
    from ._remote import is_incomplete, remote_keys

    keys = remote_keys(where)
    if keys is None:
        return "it is not a dkrr model directory (an object, not a folder)"
    if is_incomplete(where):
        others = [k for k in keys if k != "model.json"
                  and not re.fullmatch(r"arrays/[^/]+\.npy", k)]
    else:
        if "model.json" not in keys:
            return "it is not a dkrr model directory (no model.json)"
        files = RemoteFiles(where)
        try:
            with within_remote("read", where.url):
                doc = _read_doc(files.meta(), files)
        except ModelFormatError as exc:
            return f"it is not a dkrr model directory ({exc})"
        others = sorted(set(keys) - {"model.json"} - _array_refs(doc))
    if others:
        return (
            f"it holds files that are not part of the dkrr model: {others[:5]}; move them "
            "away or choose another path"
        )
    return None


def load_model(path: str | os.PathLike, *, storage_options: dict | None = None):
    """Load a model saved by :func:`save_model`; executes no code from the directory.

    Parameters
    ----------
    path : str or os.PathLike
        The model directory, or its fsspec URL (``s3://bucket/models/m``).
    storage_options : dict, optional
        fsspec options when `path` is a URL (``endpoint_url``, credentials...).

    Raises
    ------
    ModelFormatError
        A path that does not exist, is a file, or is a directory without ``model.json``
        (each said as such); ``model.json`` a symbolic link that leads out of the
        directory, or not a regular file (a FIFO, a directory: said as such, never
        opened); ``model.json`` not UTF-8, not JSON, not an
        object, too deeply nested, of another format or a newer format version; an
        unknown estimator class, parameter or fitted attribute; a value of the wrong type,
        shape, dtype or not finite; an array file outside the model directory, missing,
        of the wrong size (checked before reading), corrupted, or inconsistent with the
        others. The message names the field. In an object store also a model whose upload
        has not committed (still writing, or failed).
    ObjectStoreError
        The object store of a URL cannot be reached, refuses the credentials or breaks
        off a read.
    """
    where = locate(path, storage_options, what="model directory")
    if isinstance(where, Remote):
        with within_remote("read the model", where.url):
            return _load_remote(where)
    root = Path(where)
    meta = root / "model.json"
    if not root.exists():
        raise ModelFormatError(f"model directory {str(root)!r} does not exist")
    if not root.is_dir():
        hint = f"; give the directory that holds it, {str(root.parent)!r}" if root.name == "model.json" else ""
        raise ModelFormatError(
            f"{str(root)!r} is a file, not a dkrr model directory (a directory holding model.json "
            f"and arrays/, written by save_model or dkrr fit){hint}"
        )
    _check_meta_file(root, meta)
    return _estimator(root, meta, _read_doc(meta))


#: what a path that is not a regular file is, by its ``stat`` mode
_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"))


def _file_kind(mode: int) -> str:
    """What a ``stat`` mode that is not a regular file's is: "a FIFO (named pipe)"..."""
    return next((kind for test, kind in _FILE_KINDS if test(mode)), "not a file")


def _check_meta_file(root: Path, meta: Path) -> None:
    """Refuse `meta` (``root/model.json``) unless it is a regular file of the model directory,
    looking only at its ``stat`` (a FIFO is never opened: the read would block).

    As for the arrays, a symbolic link is followed only where it resolves to a file in the
    directory itself; one that leads out is refused (the model would be another file's).
    """
    if meta.is_symlink():
        target = os.path.realpath(meta)
        if os.path.dirname(target) != os.path.realpath(root):
            raise ModelFormatError(
                f"{meta} is a symbolic link to {target!r}, outside the model directory; a model's files are "
                "read only from its own directory: copy the file in, in place of the link")
    try:
        mode = os.stat(meta).st_mode
    except FileNotFoundError:
        if meta.is_symlink():
            raise ModelFormatError(f"{meta} is a symbolic link to {os.readlink(meta)!r}, which does not exist") from None
        raise ModelFormatError(
            f"{str(root)!r} is a directory but not a dkrr model directory: it holds no model.json; "
            "give the directory that save_model or dkrr fit wrote"
        ) from None
    except OSError as exc:  # a symlink loop, no permission
        raise ModelFormatError(f"{meta} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise ModelFormatError(
            f"{meta} is not a regular file: it is {_file_kind(mode)}; a model's model.json is the file "
            "that save_model or dkrr fit wrote")


def _load_remote(root: Remote):
    from ._remote import check_committed, missing

    fs = root.fs
    fs.invalidate_cache(root.path)
    if not fs.exists(root.path):
        raise missing(root, "model directory", ModelFormatError)
    if fs.isfile(root.path):
        raise ModelFormatError(
            f"{root.url!r} is an object (a file), not a dkrr model directory (a folder holding "
            "model.json and arrays/, written by save_model or dkrr fit)"
        )
    check_committed(root, "model directory", ModelFormatError)
    files = RemoteFiles(root)
    meta = files.meta()
    if files.size(meta) is None:
        raise ModelFormatError(
            f"{root.url!r} is a folder but not a dkrr model directory: it holds no model.json; "
            "give the folder that save_model or dkrr fit wrote"
        )
    return _estimator(root, meta, _read_doc(meta, files), files)


def _estimator(root, meta, doc: dict, files=None, *, saving: bool = False):
    """The estimator of a parsed model.json, every field checked (`saving`: by save_model)."""
    for key in _TOP_KEYS - {"estimator"}:
        if key not in doc:
            raise ModelFormatError(f"{meta} is incomplete: missing key {key!r}")
    if "estimator" not in doc:
        raise ModelFormatError(f"{meta} is incomplete: missing key 'estimator'")
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise ModelFormatError(f"{meta} is invalid: unknown top-level key(s) {unknown}")
    return _Reader(root, meta, doc["format_version"], files, saving).estimator(doc["estimator"], "model")
