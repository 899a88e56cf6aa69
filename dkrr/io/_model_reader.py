"""Reading model files: every check the loader makes on ``model.json`` and ``arrays/``.

Nothing read from a model directory is trusted. The format constants, the whitelist of
fitted attributes per estimator class (:data:`FITTED_ATTRIBUTES`), the validating
reader and the check of every fitted attribute against what it derives from (the rules of
:data:`~dkrr.io._model_agreement.AGREEMENT`) live here; :mod:`dkrr.io._model` writes, saves and loads.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from ._json import strict_json
from ._model_agreement import AGREEMENT
from ._model_kinds import RecordKinds

__all__ = ["AGREEMENT", "FITTED_ATTRIBUTES", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "dkrr-model"
#: 7: what 6 gained unnumbered (store_target_names_, the refinement's stop rules): a 6-reader then says "upgrade";
#: a version-5 refinement_ (no errors) may come in it (a version-5 model saved again); 6 reads unchanged.
#: 6: refinement_ records the estimated coefficient errors it stops on (``errors``; a
#: version-5 record, which stopped on the residual at tol 1e-14, reads unchanged);
#: 5: precision_ "mixed" and its refinement_ (precision="auto", the default since issue 26);
#: 4: the kernels matern, laplacian and polynomial (the parameters nu, degree, coef0;
#: maps with radial factors, ARD column scales, the polynomial sketches) and ARD gammas
#: (arrays); a version-3 file reads unchanged. 3: the ridge estimators' ``feature_map_`` is
#: the map itself (``__feature_map__``), as on RandomFeatures; 1 and 2 nested a fitted
#: RandomFeatures there (still read: its map is taken). 2: labels keep their type (``__labels__``); 1: as text
FORMAT_VERSION = 7
_READABLE = (1, 2, 3, 4, 5, 6, 7)
_MAX_JSON_BYTES = 64 * 2**20
_MAX_DEPTH = 24
_MAX_NDIM = 8
_MAX_REASON = 2000  # characters of solver_reason_ (written: about 300)
_NPY_HEADER_MAX = 16 + 2**16  # magic, version, length field and the largest header numpy writes
_TOP_KEYS = {"format", "format_version", "dkrr_version", "numpy_version", "estimator"}
_REF_KEYS = {"__ndarray__", "sha256", "shape", "dtype"}
_LABEL_TYPES = {"bool": bool, "int": int, "float": float, "str": str}

_RIDGE = {
    "feature_map_": "ridge_map", "n_features_in_": "count", "n_output_features_": "count",
    "fold_seed_": "seed", "alpha_": "alpha", "coef_": "coef", "intercept_": "intercept",
    "cv_results_": "cv_results", "best_score_": "score", "gamma_": "gamma",
    "solver_": "solver", "solver_info_": "solver_info",  # the solver used; solver="pcg"
    "solver_reason_": "reason",  # why solver_ (a sentence; files saved before it lack it)
    "mean_": "columns", "scale_": "columns",  # standardize (None without it)
    "precision_": "precision", "precision_error_": "score", "refinement_": "refinement",  # precision="auto"
    # the regressor's Bayesian reading on the Gram path (ALGORITHMS 3.11); absent after pcg
    "noise_variance_": "noise", "log_marginal_likelihood_": "score", "posterior_": "posterior",
    "feature_names_in_": "names", "store_target_names_": "names",  # a DataFrame's columns; a store's targets
}
#: class name -> {fitted attribute -> kind}: the only attributes a model file may set
FITTED_ATTRIBUTES: dict[str, dict[str, str]] = {
    "RandomFeatures": {"feature_map_": "map", "n_features_in_": "count", "n_output_features_": "count",
                       "gamma_": "gamma", "mean_": "columns", "scale_": "columns",
                       "feature_names_in_": "names"},
    "RandomFeatureRidge": _RIDGE,
    # store_classes_: the label names of an ingested store, set by ``dkrr fit`` (CLI)
    "RandomFeatureRidgeClassifier": {**_RIDGE, "classes_": "labels", "store_classes_": "labels"},
}
_OPTIONAL = {"solver_", "solver_reason_", "solver_info_", "cv_results_", "best_score_", "store_classes_", "gamma_",
             "mean_", "scale_", "precision_", "precision_error_", "noise_variance_", "log_marginal_likelihood_",
             "posterior_", "feature_names_in_", "refinement_", "store_target_names_"}
_CV_KEYS = ("alphas", "fold_mse", "mean_mse", "std_mse", "fold_sizes")


def _model_classes() -> dict[str, type]:
    from ..estimators import MODEL_CLASSES

    return dict(MODEL_CLASSES)


class _LocalFiles:
    """The files of a model directory on a local path, as the reader sees them."""

    def __init__(self, root: Path):
        self.root = root
        self.arrays_dir = (root / "arrays").resolve()

    def meta(self) -> Path:
        return self.root / "model.json"

    def array_file(self, rel: str) -> Path | None:
        """The file `rel` names, or None when it is not a file inside ``arrays/``."""
        file = (self.root / rel).resolve()
        if file.parent != self.arrays_dir or self.arrays_dir.parent != self.root.resolve():
            return None
        return file

    def size(self, file: Path) -> int | None:
        """Bytes of `file`, or None when it is not a regular file."""
        return os.path.getsize(file) if file.is_file() else None

    def read(self, file: Path, limit: int) -> bytes:
        """At most `limit` bytes of `file` (never more, even if it grew)."""
        with open(file, "rb") as fh:
            return fh.read(limit)


class RemoteFiles:
    """The files of a model directory in an object store (a :class:`~dkrr.io._paths.Remote`
    prefix): the same checks, with keys for paths. An array reference must name a plain
    ``arrays/<name>`` key (no ``..``, no deeper folder)."""

    def __init__(self, root):
        self.root = root

    def meta(self):
        return self.root.child("model.json")

    def array_file(self, rel: str):
        parts = rel.split("/")
        if len(parts) != 2 or parts[0] != "arrays" or parts[1] in ("", ".", ".."):
            return None
        return self.root.child(rel)

    def size(self, file) -> int | None:
        try:
            info = file.fs.info(file.path)
        except FileNotFoundError:
            return None
        return int(info["size"]) if info.get("type") == "file" else None

    def read(self, file, limit: int) -> bytes:
        return file.fs.cat_file(file.path, start=0, end=limit)


def _read_doc(meta, files=None) -> dict:
    """The parsed model.json (a local path, or the location of `files`' meta): a dict
    with the format marker and a readable version."""
    files = files or _LocalFiles(Path(meta).parent)
    size = files.size(meta)
    if size is None:
        raise ModelFormatError(f"{meta} is not a file")
    if size > _MAX_JSON_BYTES:
        raise ModelFormatError(f"{meta} has {size} bytes; a model.json is at most {_MAX_JSON_BYTES}")
    try:
        text = files.read(meta, size + 1).decode("utf-8")  # (a limit allocates its size)
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"{meta} is corrupted: not UTF-8 text ({exc})") from None
    try:
        doc = strict_json(text)  # NaN/Infinity: refused by the field checks; a key given twice here
    except RecursionError:
        raise ModelFormatError(f"{meta} is corrupted: JSON nested too deeply") from None
    except ValueError as exc:
        raise ModelFormatError(f"{meta} is corrupted: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ModelFormatError(f"{meta} is not a dkrr model file: it must hold a JSON object, not {type(doc).__name__}")
    if doc.get("format") != FORMAT_NAME:
        raise ModelFormatError(f"{meta} is not a dkrr model file (format {doc.get('format')!r}, expected {FORMAT_NAME!r})")
    version = doc.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ModelFormatError(f"{meta}: format_version must be an integer, got {version!r}")
    if version not in _READABLE:
        raise ModelFormatError(
            f"{meta} has model format version {version!r}; this dkrr reads versions "
            f"{list(_READABLE)} (the file was saved by dkrr {doc.get('dkrr_version')!r}); "
            "upgrade dkrr to load it"
        )
    return doc


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class _Reader(RecordKinds):
    def __init__(self, root: Path, meta: Path, version: int, files=None, saving: bool = False):
        self.root, self.meta, self.version, self.saving = root, meta, version, saving
        self.files = files or _LocalFiles(root)

    def bad(self, where: str, msg: str) -> ModelFormatError:
        return ModelFormatError(f"{self.meta} is invalid: {where} {msg}")

    # ------------------------------------------------------------ arrays
    def array_path(self, rel: Any, where: str):
        """The file of an array reference; anything not a file inside arrays/ is refused."""
        if not isinstance(rel, str):
            raise self.bad(where, f"must name an array file, got {rel!r}")
        file = self.files.array_file(rel)
        if file is None:
            raise self.bad(where, f"refers to {rel!r}, which points outside the model directory's arrays/")
        return file

    def array(self, ref: Any, where: str, *, ndim: tuple[int, ...] | None = None, finite: bool = True) -> np.ndarray:
        if not isinstance(ref, dict) or set(ref) != _REF_KEYS:
            raise self.bad(where, f"must be an array reference with keys {sorted(_REF_KEYS)}")
        shape, dtype_str, digest = ref["shape"], ref["dtype"], ref["sha256"]
        if not isinstance(shape, list) or len(shape) > _MAX_NDIM or not all(_is_int(s) and s >= 0 for s in shape):
            raise self.bad(where, f"has an invalid shape {shape!r}: expected a list of at most {_MAX_NDIM} non-negative integers")
        if ndim is not None and len(shape) not in ndim:
            raise self.bad(where, f"has shape {tuple(shape)}; expected {' or '.join(map(str, ndim))} dimension(s)")
        try:
            dtype = np.dtype(dtype_str) if isinstance(dtype_str, str) else None
        except (TypeError, ValueError):
            dtype = None
        if dtype is None or dtype.kind not in "biuf" or dtype.str != dtype_str or dtype.byteorder == ">" or dtype.itemsize > 8:
            raise self.bad(where, f"has dtype {dtype_str!r}; expected a little-endian bool, int or float dtype such as '<f8'")
        if not isinstance(digest, str):
            raise self.bad(where, f"has an invalid sha256 {digest!r}")
        rel = ref["__ndarray__"]
        file = self.array_path(rel, where)
        size = self.files.size(file)
        if size is None:
            raise self.bad(where, f"refers to the file {rel}, which is missing")
        nbytes = math.prod(shape) * dtype.itemsize
        if not nbytes + 10 <= size <= nbytes + _NPY_HEADER_MAX:  # checked before reading
            raise self.bad(where, f"file {rel} has {size} bytes; shape {tuple(shape)} dtype {dtype_str} needs {nbytes} bytes plus a header")
        # never more than the size allows, even if it grew
        data = self.files.read(file, nbytes + _NPY_HEADER_MAX + 1)
        if len(data) > nbytes + _NPY_HEADER_MAX:
            raise self.bad(where, f"file {rel} is longer than shape {tuple(shape)} dtype {dtype_str} allows")
        if hashlib.sha256(data).hexdigest() != digest:
            raise self.bad(where, f"file {rel} is corrupted: checksum mismatch")
        try:
            arr = np.load(io.BytesIO(data), allow_pickle=False)
        except Exception as exc:  # noqa: BLE001 - any parse failure is a format error
            raise self.bad(where, f"file {rel} is not a plain numeric .npy: {exc}") from None
        if not isinstance(arr, np.ndarray) or list(arr.shape) != shape or arr.dtype.str != dtype_str:
            raise self.bad(where, f"file {rel} holds shape {getattr(arr, 'shape', None)} dtype {getattr(arr, 'dtype', None)}, expected {tuple(shape)} {dtype_str}")
        if finite and arr.dtype.kind == "f" and not np.isfinite(arr).all():
            raise self.bad(where, "holds values that are not finite (NaN or inf)")
        return arr

    # ------------------------------------------------------------ plain values
    def plain(self, value: Any, where: str, depth: int = 0) -> Any:
        """JSON scalars, lists, dicts, arrays and feature maps, at most _MAX_DEPTH deep."""
        if depth > _MAX_DEPTH:
            raise self.bad(where, f"is nested deeper than {_MAX_DEPTH} levels")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.bad(where, f"must be finite, got {value!r}")
        if isinstance(value, list):
            return [self.plain(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
        if not isinstance(value, dict):
            return value
        if "__ndarray__" in value:
            return self.array(value, where)
        if "__feature_map__" in value:
            return self.feature_map(value, where, depth)
        if any(k.startswith("__") for k in value):
            raise self.bad(where, f"holds an unexpected tag {sorted(k for k in value if k.startswith('__'))}")
        return {k: self.plain(v, f"{where}.{k}", depth + 1) for k, v in value.items()}

    def feature_map(self, value: dict, where: str, depth: int):
        from ..features import FeatureMap, feature_map_from_state

        if set(value) != {"__feature_map__"} or not isinstance(value["__feature_map__"], dict):
            raise self.bad(where, "must be {'__feature_map__': {...}}")
        state = self.plain(value["__feature_map__"], where, depth + 1)
        try:
            fm = feature_map_from_state(state)
            n_in, n_out = fm.n_features_in, fm.n_output_features
        except Exception as exc:  # noqa: BLE001 - a tampered state may fail in any way
            raise self.bad(where, f"is not a valid feature map: {type(exc).__name__}: {exc}") from None
        if not isinstance(fm, FeatureMap) or not (_is_int(n_in) and n_in >= 1 and _is_int(n_out) and n_out >= 1):
            raise self.bad(where, "is not a valid feature map")
        elements = sum(a.size for a in _arrays_in(state))
        if n_out > max(2**20, 16 * elements):
            raise self.bad(where, f"declares {n_out} output features, more than its saved arrays ({elements} values) can define")
        try:
            Z = fm.transform(np.zeros((1, n_in)))
        except Exception as exc:  # noqa: BLE001
            raise self.bad(where, f"does not transform a row: {type(exc).__name__}: {exc}") from None
        if not isinstance(Z, np.ndarray) or Z.shape != (1, n_out) or not np.isfinite(Z).all():
            raise self.bad(where, f"transforms a row into {getattr(Z, 'shape', None)}, expected (1, {n_out}) finite values")
        return fm

    # ------------------------------------------------------------ estimators
    def estimator(self, value: Any, where: str, allowed: tuple[str, ...] | None = None):
        classes = _model_classes()
        if not isinstance(value, dict) or set(value) != {"__estimator__"} or not isinstance(value["__estimator__"], dict):
            raise self.bad(where, "must be {'__estimator__': {'class', 'params', 'fitted'}}")
        state = value["__estimator__"]
        if set(state) != {"class", "params", "fitted"}:
            raise self.bad(where, f"must have the keys ['class', 'fitted', 'params'], has {sorted(state)}")
        name = state["class"]
        if not isinstance(name, str) or name not in classes or (allowed and name not in allowed):
            raise self.bad(f"{where}.class", f"names an unknown estimator class {name!r}; known: {list(allowed or sorted(classes))}")
        cls = classes[name]
        params, fitted = state["params"], state["fitted"]
        if not isinstance(params, dict) or not isinstance(fitted, dict):
            raise self.bad(where, "params and fitted must be JSON objects")
        known = set(cls._get_param_names())
        for key in params:
            if key not in known:
                raise self.bad(f"{where}.params.{key}", f"is not a parameter of {name}")
        try:
            est = cls(**self.plain(params, f"{where}.params"))
            if hasattr(est, "_check_params"):
                est._check_params()
        except ModelFormatError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise self.bad(f"{where}.params", f"are invalid for {name}: {exc}") from None
        spec = FITTED_ATTRIBUTES[name]
        for key in fitted:
            if key not in spec:
                raise self.bad(f"{where}.fitted", f"sets {key!r}, which is not a fitted attribute of {name}; allowed: {sorted(spec)}")
        for key, kind in spec.items():
            if key not in fitted:
                if key in _OPTIONAL:
                    continue
                raise self.bad(where, f"lacks the fitted attribute {key}")
            setattr(est, key, getattr(self, f"_f_{kind}")(fitted[key], f"{where}.{key}"))
        self.consistent(est, where)
        return est

    def consistent(self, est, where: str) -> None:
        """Every fitted attribute against what it derives from: the rules of :data:`AGREEMENT`."""
        for key, rule in AGREEMENT.items():
            if key in vars(est):
                try:
                    problem = rule(est)
                except Exception as exc:  # noqa: BLE001 - a tampered field may break a rule in any way
                    problem = f"it cannot be checked against them ({type(exc).__name__}: {exc})"
                if problem is not None:
                    why = ("The estimator's fitted attributes were changed after its fit, or this is a dkrr bug: "
                           "please report it" if self.saving else "The file was changed after it was saved; fit "
                           "and save the model again")
                    raise self.bad(f"{where}.{key}", f"disagrees with the rest of the model: {problem}. {why}")

    # one method per kind of fitted attribute (see FITTED_ATTRIBUTES)
    def _f_ridge_map(self, v, where):
        if self.version <= 2 and isinstance(v, dict) and "__estimator__" in v:
            # formats 1-2 nested a fitted RandomFeatures here; its feature_map_ is the map
            return self.estimator(v, where, allowed=("RandomFeatures",)).feature_map_
        return self._f_map(v, where)

    def _f_map(self, v, where):
        if not isinstance(v, dict) or "__feature_map__" not in v:
            raise self.bad(where, "must be a saved feature map {'__feature_map__': ...}")
        return self.feature_map(v, where, 0)

    def _f_names(self, v, where):
        if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
            raise self.bad(where, "must be a non-empty list of column names (strings)")
        return np.asarray(v, dtype=object)

    def _f_count(self, v, where):
        if not _is_int(v) or not 1 <= v <= 2**40:
            raise self.bad(where, f"must be a positive integer, got {v!r}")
        return v

    def _f_seed(self, v, where):
        if not _is_int(v) or not 0 <= v < 2**64:
            raise self.bad(where, f"must be a non-negative 64-bit integer, got {v!r}")
        return v

    def _f_alpha(self, v, where):
        if not _is_real(v) or not math.isfinite(v) or v < 0:
            raise self.bad(where, f"must be a finite real number >= 0, got {v!r}")
        return v

    def _f_score(self, v, where):
        if isinstance(v, dict) and set(v) == {"__float__"} and v["__float__"] in ("nan", "inf", "-inf"):
            return float(v["__float__"])
        if not _is_real(v):
            raise self.bad(where, f"must be a real number, got {v!r}")
        return v

    def _f_coef(self, v, where):
        arr = self.array(v, where, ndim=(1, 2))
        if arr.dtype.kind != "f":
            raise self.bad(where, f"has dtype {arr.dtype}; expected a float dtype")
        return arr

    def _f_intercept(self, v, where):
        if isinstance(v, dict):
            return self._f_coef(v, where)
        if not _is_real(v) or not math.isfinite(v):
            raise self.bad(where, f"must be a finite real number or a float array, got {v!r}")
        return v

    def _f_columns(self, v, where):
        return None if v is None else self.array(v, where, ndim=(1,))

    def _f_precision(self, v, where):
        if v not in ("float64", "float32", "mixed"):
            raise self.bad(where, f"must be 'float64', 'float32' or 'mixed', got {v!r}")
        return v

    def _f_gamma(self, v, where):
        if isinstance(v, dict):  # ARD: one width per input column
            arr = self.array(v, where, ndim=(1,))
            if arr.dtype.kind != "f" or arr.size == 0 or (arr <= 0).any():
                raise self.bad(where, "must be a float array of widths > 0 (ARD)")
            return arr
        if not _is_real(v) or not math.isfinite(v) or v <= 0:
            raise self.bad(where, f"must be a finite real number > 0 or an array of them (ARD), got {v!r}")
        return v

    def _f_cv_results(self, v, where):
        if isinstance(v, dict) and "log_evidence" in v:  # cv="evidence"
            keys = ("alphas", "log_evidence", "noise_variance") + (("gammas",) if "gammas" in v else ())
            if set(v) != set(keys):
                raise self.bad(where, f"must have exactly the keys {list(keys)} (cv='evidence')")
            g = int("gammas" in v)
            dims = {"alphas": (1,), "log_evidence": (1 + g,), "noise_variance": (2 + g,), "gammas": (1,)}
            return {k: self.array(v[k], f"{where}.{k}", ndim=dims[k], finite=False) for k in keys}
        # a gamma grid adds "gammas" and a leading gamma axis to the MSE arrays
        keys = _CV_KEYS + ("gammas",) if isinstance(v, dict) and "gammas" in v else _CV_KEYS
        if not isinstance(v, dict) or set(v) != set(keys):
            raise self.bad(where, f"must have exactly the keys {list(_CV_KEYS)} (and 'gammas' with a gamma grid)")
        g = int("gammas" in v)
        dims = {"alphas": (1,), "fold_mse": (2 + g,), "mean_mse": (1 + g,), "std_mse": (1 + g,), "fold_sizes": (1,),
                "gammas": (1,)}
        return {k: self.array(v[k], f"{where}.{k}", ndim=dims[k], finite=False) for k in keys}

    def _f_labels(self, v, where):
        if isinstance(v, dict) and "__ndarray__" in v:
            out = self.array(v, where, ndim=(1,))
        elif isinstance(v, dict) and "__labels__" in v:
            out = self._text_labels(v, where)
        elif isinstance(v, dict) and "__strarray__" in v and self.version == 1:
            out = self._v1_labels(v, where)
        else:
            raise self.bad(where, "must be saved labels (an array reference or {'__labels__': [...]})")
        if len(out) < 2 or len(set(out.tolist())) != len(out):
            raise self.bad(where, f"must hold at least two distinct labels, got {out.tolist()[:10]}")
        return out

    def _text_labels(self, v, where):
        if set(v) != {"__labels__", "dtype", "type"} or not isinstance(v["__labels__"], list):
            raise self.bad(where, "must be {'__labels__': [...], 'dtype': ..., 'type': ...}")
        values, dtype, kind = v["__labels__"], v["dtype"], v["type"]
        if kind not in _LABEL_TYPES:
            raise self.bad(where, f"has label type {kind!r}; expected one of {sorted(_LABEL_TYPES)}")
        want = _LABEL_TYPES[kind]
        for x in values:
            if type(x) is not want or (want is float and not math.isfinite(x)):
                raise self.bad(where, f"holds {x!r}, which is not a finite {kind} label")
        if dtype == "|O":
            out = np.empty(len(values), dtype=object)
            out[:] = values
            return out
        m = re.fullmatch(r"<U(\d{1,6})", dtype) if isinstance(dtype, str) else None
        if m is None or kind != "str" or any(len(x) > int(m.group(1)) for x in values):
            raise self.bad(where, f"has dtype {dtype!r}; expected '|O' or '<U<n>' wide enough for str labels")
        return np.asarray(values, dtype=dtype)

    def _v1_labels(self, v, where):
        values, dtype = v.get("__strarray__"), v.get("dtype")
        if not isinstance(values, list) or not all(isinstance(x, str) for x in values):
            raise self.bad(where, "must be a list of str labels")
        if dtype == "|O" and any(_could_be_number(x) for x in values):
            raise self.bad(where, f"holds labels {values[:5]} that format version 1 stored as text; their type (int, float, bool or str) is lost. Fit and save the model again with this dkrr")
        return self._text_labels({"__labels__": values, "dtype": dtype, "type": "str"}, where)


def _could_be_number(text: str) -> bool:
    """Whether str() of an int, float or bool could have produced `text`."""
    if text in ("True", "False"):
        return True
    for conv in (int, float):
        try:
            if str(conv(text)) == text:
                return True
        except (ValueError, OverflowError):
            pass
    return False


def _arrays_in(value: Any):
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, np.ndarray):
            yield v
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)


def _array_refs(doc: Any) -> set[str]:
    """Paths of every array reference in a parsed model.json."""
    refs, stack = set(), [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if isinstance(v.get("__ndarray__"), str):
                refs.add(v["__ndarray__"])
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return refs
