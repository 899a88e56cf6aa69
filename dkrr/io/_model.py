"""Saved models: a directory of plain data that loads without executing code.

Layout of a model directory::

    MODEL_DIR/
      model.json          format name and version, dkrr/numpy versions, estimator class,
                          constructor parameters and fitted attributes; every array is a
                          reference {"__ndarray__": "arrays/<name>.npy", "sha256", "shape",
                          "dtype"} to a file below
      arrays/*.npy        numeric arrays (loaded with allow_pickle=False)

Only estimator classes in :data:`MODEL_CLASSES` can be loaded, their constructor only
receives JSON values, and arrays are checked against the checksums, shapes and dtypes
recorded in ``model.json``, so a corrupted or foreign directory is reported precisely.
No pickle anywhere.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "load_model", "save_model"]

FORMAT_NAME = "dkrr-model"
FORMAT_VERSION = 1

#: fitted attributes never saved: derivable or runtime-only
_SKIP_ATTRS = {"n_iter_"}


def _model_classes() -> dict[str, type]:
    from ..estimators import _classes_for_model_files

    return _classes_for_model_files()


class _Writer:
    def __init__(self, root: Path):
        self.root = root
        (root / "arrays").mkdir(parents=True)
        self.count = 0

    def encode(self, value: Any, name: str) -> Any:
        from ..features._map import FeatureMap

        if isinstance(value, FeatureMap):
            return {"__feature_map__": self.encode(value.get_state(), name)}
        if hasattr(value, "get_params") and hasattr(value, "__sklearn_tags__"):
            return {"__estimator__": self.encode(_estimator_state(value), name)}
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                # string labels (classes_) are stored as JSON lists
                return {"__strarray__": [str(v) for v in value.tolist()], "dtype": value.dtype.str}
            self.count += 1
            rel = f"arrays/{self.count:03d}_{name[:60]}.npy"
            arr = np.ascontiguousarray(value)
            np.save(self.root / rel, arr, allow_pickle=False)
            digest = hashlib.sha256((self.root / rel).read_bytes()).hexdigest()
            return {"__ndarray__": rel, "sha256": digest, "shape": list(arr.shape), "dtype": arr.dtype.str}
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise ModelFormatError(f"cannot save {name}: dict keys must be strings")
            return {k: self.encode(v, f"{name}.{k}") for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.encode(v, f"{name}.{i}") for i, v in enumerate(value)]
        if isinstance(value, (np.integer, np.floating, np.bool_)):
            return value.item()
        if value is None or isinstance(value, (bool, int, float, str)):
            if isinstance(value, float) and not np.isfinite(value):
                return {"__float__": repr(value)}
            return value
        raise ModelFormatError(
            f"cannot save attribute {name} of type {type(value).__name__} as plain data"
        )


def _estimator_state(est) -> dict[str, Any]:
    params = est.get_params(deep=False)
    rs = params.get("random_state")
    if rs is not None and not isinstance(rs, (int, np.integer)):
        # a Generator/RandomState is not plain data; the fitted arrays carry the draws
        params["random_state"] = None
    fitted = {
        k: v
        for k, v in vars(est).items()
        if k.endswith("_") and not k.startswith("_") and k not in _SKIP_ATTRS
    }
    return {"class": type(est).__name__, "params": params, "fitted": fitted}


def save_model(estimator, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """Save a fitted dkrr estimator to the directory ``path`` (atomically).

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``overwrite`` is false.
    ModelFormatError
        The estimator is not fitted, not a dkrr estimator, or holds non-plain data.
    """
    from sklearn.utils.validation import check_is_fitted

    from .. import __version__
    from ._atomic import atomic_output

    if type(estimator).__name__ not in _model_classes():
        raise ModelFormatError(
            f"{type(estimator).__name__} is not a dkrr estimator that can be saved; "
            f"supported: {sorted(_model_classes())}"
        )
    check_is_fitted(estimator)
    path = Path(path)

    def is_model_dir(p: Path) -> str | None:
        return None if (p / "model.json").is_file() else "it is not a dkrr model directory"

    with atomic_output(path, overwrite=overwrite, can_replace=is_model_dir) as tmp:
        writer = _Writer(tmp)
        doc = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "dkrr_version": __version__,
            "numpy_version": np.__version__,
            "estimator": writer.encode(estimator, "model"),
        }
        (tmp / "model.json").write_text(json.dumps(doc, indent=1, allow_nan=False))
    return path


class _Reader:
    def __init__(self, root: Path):
        self.root = root

    def decode(self, value: Any, where: str) -> Any:
        if isinstance(value, list):
            return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, dict):
            return value
        if "__ndarray__" in value:
            return self._array(value, where)
        if "__strarray__" in value:
            return np.asarray(value["__strarray__"], dtype=value.get("dtype", "U"))
        if "__float__" in value:
            return float(value["__float__"])
        if "__feature_map__" in value:
            from ..features._map import feature_map_from_state

            try:
                return feature_map_from_state(self.decode(value["__feature_map__"], where))
            except (KeyError, TypeError, ValueError) as exc:
                raise ModelFormatError(f"feature map in {where} is invalid: {exc}") from exc
        if "__estimator__" in value:
            return self._estimator(self.decode(value["__estimator__"], where), where)
        return {k: self.decode(v, f"{where}.{k}") for k, v in value.items()}

    def _array(self, ref: dict, where: str) -> np.ndarray:
        rel = ref["__ndarray__"]
        file = (self.root / rel).resolve()
        if self.root.resolve() not in file.parents:
            raise ModelFormatError(f"array reference {rel!r} in {where} points outside the model directory")
        if not file.is_file():
            raise ModelFormatError(f"model file {rel} (for {where}) is missing")
        data = file.read_bytes()
        if hashlib.sha256(data).hexdigest() != ref.get("sha256"):
            raise ModelFormatError(f"model file {rel} (for {where}) is corrupted: checksum mismatch")
        try:
            arr = np.load(file, allow_pickle=False)
        except ValueError as exc:
            raise ModelFormatError(f"model file {rel} is not a plain numeric .npy: {exc}") from exc
        if list(arr.shape) != list(ref.get("shape", [])) or arr.dtype.str != ref.get("dtype"):
            raise ModelFormatError(
                f"model file {rel} has shape {arr.shape} dtype {arr.dtype.str}, expected "
                f"{tuple(ref.get('shape', []))} {ref.get('dtype')}"
            )
        return arr

    def _estimator(self, state: dict, where: str):
        classes = _model_classes()
        name = state.get("class")
        if name not in classes:
            raise ModelFormatError(f"{where}: unknown estimator class {name!r}; known: {sorted(classes)}")
        try:
            est = classes[name](**state["params"])
        except TypeError as exc:
            raise ModelFormatError(f"{where}: parameters do not match {name}: {exc}") from exc
        for key, val in state["fitted"].items():
            setattr(est, key, val)
        return est


def load_model(path: str | os.PathLike):
    """Load a model saved by :func:`save_model`; executes no code from the directory.

    Raises
    ------
    ModelFormatError
        Missing directory or ``model.json``, another format or a newer format version,
        a missing, corrupted or mismatched array file.
    """
    root = Path(path)
    meta = root / "model.json"
    if not root.is_dir():
        raise ModelFormatError(f"model directory {str(root)!r} does not exist")
    if not meta.is_file():
        raise ModelFormatError(f"{str(root)!r} is not a dkrr model directory (no model.json)")
    try:
        doc = json.loads(meta.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFormatError(f"{meta} is corrupted: not valid JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"{meta} is not a dkrr model file (format {doc.get('format') if isinstance(doc, dict) else None!r})")
    version = doc.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ModelFormatError(
            f"{meta} has model format version {version!r}; this dkrr reads versions up to "
            f"{FORMAT_VERSION} (saved by dkrr {doc.get('dkrr_version')}); upgrade dkrr"
        )
    try:
        return _Reader(root).decode(doc["estimator"], "model")
    except KeyError as exc:
        raise ModelFormatError(f"{meta} is incomplete: missing key {exc}") from exc
