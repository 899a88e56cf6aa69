"""Reading model files: every check the loader makes on ``model.json`` and ``arrays/``.

Nothing read from a model directory is trusted. The format constants, the whitelist of
fitted attributes per estimator class (:data:`FITTED_ATTRIBUTES`) and the validating
reader live here; :mod:`dkrr.io._model` writes, saves and loads.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError

__all__ = ["FITTED_ATTRIBUTES", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "dkrr-model"
#: 3: the ridge estimators' ``feature_map_`` is the map itself (``__feature_map__``), as on
#: RandomFeatures; 1 and 2 nested a fitted RandomFeatures there (still read: its map is
#: taken). 2: labels keep their type (``__labels__``); 1 stored non-numeric labels as text
FORMAT_VERSION = 3
_READABLE = (1, 2, 3)
_MAX_JSON_BYTES = 64 * 2**20
_MAX_DEPTH = 24
_MAX_NDIM = 8
_NPY_HEADER_MAX = 16 + 2**16  # magic, version, length field and the largest header numpy writes
_TOP_KEYS = {"format", "format_version", "dkrr_version", "numpy_version", "estimator"}
_REF_KEYS = {"__ndarray__", "sha256", "shape", "dtype"}
_LABEL_TYPES = {"bool": bool, "int": int, "float": float, "str": str}

_RIDGE = {
    "feature_map_": "ridge_map", "n_features_in_": "count", "n_output_features_": "count",
    "fold_seed_": "seed", "alpha_": "alpha", "coef_": "coef", "intercept_": "intercept",
    "cv_results_": "cv_results", "best_score_": "score", "gamma_": "gamma",
    "solver_": "solver", "solver_info_": "solver_info",  # the solver used; solver="pcg"
    "mean_": "columns", "scale_": "columns",  # standardize (None without it)
    "precision_": "precision", "precision_error_": "score",
}
#: class name -> {fitted attribute -> kind}: the only attributes a model file may set
FITTED_ATTRIBUTES: dict[str, dict[str, str]] = {
    "RandomFeatures": {"feature_map_": "map", "n_features_in_": "count", "n_output_features_": "count",
                       "gamma_": "gamma", "mean_": "columns", "scale_": "columns"},
    "RandomFeatureRidge": _RIDGE,
    # store_classes_: the label names of an ingested store, set by ``dkrr fit`` (CLI)
    "RandomFeatureRidgeClassifier": {**_RIDGE, "classes_": "labels", "store_classes_": "labels"},
}
_OPTIONAL = {"solver_", "solver_info_", "cv_results_", "best_score_", "store_classes_", "gamma_", "mean_", "scale_",
             "precision_", "precision_error_"}
_CV_KEYS = ("alphas", "fold_mse", "mean_mse", "std_mse", "fold_sizes")


def _model_classes() -> dict[str, type]:
    from ..estimators import MODEL_CLASSES

    return dict(MODEL_CLASSES)


def _read_doc(meta: Path) -> dict:
    """The parsed model.json: a dict with the format marker and a readable version."""
    size = os.path.getsize(meta)
    if size > _MAX_JSON_BYTES:
        raise ModelFormatError(f"{meta} has {size} bytes; a model.json is at most {_MAX_JSON_BYTES}")
    try:
        text = meta.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ModelFormatError(f"{meta} is corrupted: not UTF-8 text ({exc})") from None
    try:
        doc = json.loads(text, parse_constant=float)  # NaN/Infinity: refused by the field checks
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


class _Reader:
    def __init__(self, root: Path, meta: Path, version: int):
        self.root, self.meta, self.version = root, meta, version
        self.arrays_dir = (root / "arrays").resolve()

    def bad(self, where: str, msg: str) -> ModelFormatError:
        return ModelFormatError(f"{self.meta} is invalid: {where} {msg}")

    # ------------------------------------------------------------ arrays
    def array_path(self, rel: Any, where: str) -> Path:
        """The file of an array reference; anything not a file inside arrays/ is refused."""
        if not isinstance(rel, str):
            raise self.bad(where, f"must name an array file, got {rel!r}")
        file = (self.root / rel).resolve()
        if file.parent != self.arrays_dir or self.arrays_dir.parent != self.root.resolve():
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
        if not file.is_file():
            raise self.bad(where, f"refers to the file {rel}, which is missing")
        nbytes = math.prod(shape) * dtype.itemsize
        size = os.path.getsize(file)
        if not nbytes + 10 <= size <= nbytes + _NPY_HEADER_MAX:  # checked before reading
            raise self.bad(where, f"file {rel} has {size} bytes; shape {tuple(shape)} dtype {dtype_str} needs {nbytes} bytes plus a header")
        with open(file, "rb") as fh:  # never more than the size allows, even if it grew
            data = fh.read(nbytes + _NPY_HEADER_MAX + 1)
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
                problem = rule(est)
                if problem is not None:
                    raise self.bad(f"{where}.{key}", f"disagrees with the rest of the model: {problem}. The file "
                                                     "was changed after it was saved; fit and save the model again")

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

    def _f_solver(self, v, where):
        if v not in ("cholesky", "eigh", "pcg"):
            raise self.bad(where, f"must be 'cholesky', 'eigh' or 'pcg', got {v!r}")
        return v

    def _f_solver_info(self, v, where):
        keys = {"solver", "n_iter", "converged", "residuals", "tol", "rank", "passes"}
        # "persisted" (whether X was kept in memory) since pcg_persist; older files lack it
        if not isinstance(v, dict) or set(v) - {"persisted"} != keys or v["solver"] != "pcg":
            raise self.bad(where, f"must be the pcg solver's record with exactly the keys {sorted(keys)} "
                                  "(and 'persisted')")
        if not isinstance(v.get("persisted", False), bool):
            raise self.bad(f"{where}.persisted", f"must be true or false, got {v['persisted']!r}")
        for k in ("n_iter", "rank", "passes"):
            if not _is_int(v[k]) or not 0 <= v[k] <= 2**40:
                raise self.bad(f"{where}.{k}", f"must be a non-negative integer, got {v[k]!r}")
        if not isinstance(v["converged"], bool) or not _is_real(v["tol"]) or not 0 < v["tol"] < 1:
            raise self.bad(where, "must hold converged (true/false) and tol in (0, 1)")
        return {**v, "residuals": self.array(v["residuals"], f"{where}.residuals", ndim=(2,), finite=False)}

    def _f_precision(self, v, where):
        if v not in ("float64", "float32"):
            raise self.bad(where, f"must be 'float64' or 'float32', got {v!r}")
        return v

    def _f_gamma(self, v, where):
        if not _is_real(v) or not math.isfinite(v) or v <= 0:
            raise self.bad(where, f"must be a finite real number > 0, got {v!r}")
        return v

    def _f_cv_results(self, v, where):
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



# ---------------------------------------------------------------- agreement of the fields
#
# A model file stores fields that derive from one another (the chosen alpha from the CV
# scores, n_features_in_ from the map, ...). A file whose checksums were recomputed after a
# field was changed passes every check of the field alone, so each fitted attribute has a
# rule here tying it to what it derives from (parameters and the fields checked before
# it). A rule returns None when its field agrees, else what it disagrees with.


def _targets(est) -> int:
    """Coefficient rows: 1 for a 1-D coef_ (one target, or two classes)."""
    return 1 if est.coef_.ndim == 1 else est.coef_.shape[0]


def _inner(fm):
    from ..features._standardize import StandardizedMap

    return fm.inner if isinstance(fm, StandardizedMap) else fm


def _map_gamma(fm) -> float | None:
    """The gaussian width a map was drawn for, or None when the map does not record one
    (other kernels; a sampled map, whose W has the width folded in)."""
    from ..features._map import RandomFeatureMap
    from ..features._nystroem import NystroemMap

    fm = _inner(fm)
    if getattr(fm, "kernel", None) != "gaussian":
        return None
    if isinstance(fm, NystroemMap):
        return fm.gamma
    if type(fm) is RandomFeatureMap:  # W = sqrt(2 gamma) W_unit
        return float(fm.projection.scale) ** 2 / 2
    return None


def _chosen(est) -> tuple[int | None, int]:
    """(gamma index or None, alpha index) the fit chooses from ``cv_results_``'s mean_mse:
    the least mean, ties to the larger alpha, then the smaller gamma (the rule of
    :func:`~dkrr.linalg._cv.score_grid`, applied to the stored means)."""
    from ..linalg._cv import select_alpha, select_gamma_alpha

    r = est.cv_results_
    if "gammas" in r:
        gi, ai, _, _ = select_gamma_alpha(r["gammas"], r["alphas"], r["mean_mse"][:, None, :], [1.0])
        return gi, ai
    return None, select_alpha(r["alphas"], r["mean_mse"][None, :], [1.0])[0]


def _is_weighted_mean(fold_mse: np.ndarray, mean: np.ndarray, usable: np.ndarray) -> bool:
    """Whether ``mean`` is ``sum_k w_k fold_mse[k] / sum_k w_k`` for one set of weights
    ``w >= 0`` shared by every (gamma, alpha) (rows per fold, or weight sums with sample
    weights), over the usable (finite) columns: a non-negative least-squares fit."""
    from scipy.optimize import nnls

    F = np.moveaxis(fold_mse, -2, 0)[:, usable]  # (K, columns)
    m = mean[usable]
    s = max(float(np.abs(F).max(initial=0.0)), float(np.abs(m).max(initial=0.0)), 1e-300)
    A = np.vstack([F.T / s, np.ones((1, F.shape[0]))])
    b = np.concatenate([m / s, [1.0]])
    _, residual = nnls(A, b)
    return residual <= 1e-9 * math.sqrt(b.size)


def _agree_feature_map(est):
    """The map is of the parameters' kernel, method (``"auto"`` resolved at its input
    width) and n_components, standardized exactly when ``standardize`` is true."""
    from ..features._map import RandomFeatureMap
    from ..features._nystroem import NystroemMap
    from ..features._registry import resolve_method
    from ..features._sampled import SampledFeatureMap
    from ..features._standardize import StandardizedMap

    fm = est.feature_map_
    inner = _inner(fm)
    if isinstance(fm, StandardizedMap) != bool(est.standardize):
        return f"standardize={est.standardize!r}, but the map is{'' if isinstance(fm, StandardizedMap) else ' not'} standardized"
    if getattr(inner, "kernel", None) != est.kernel:
        return f"the map is of kernel {getattr(inner, 'kernel', None)!r}, the parameter kernel={est.kernel!r}"
    method = resolve_method(est.method, inner.n_features_in)
    if isinstance(inner, NystroemMap):
        found = "nystroem"
    elif isinstance(inner, SampledFeatureMap):
        found = inner.source_method or method  # files before source_method lack it
    else:
        found = inner.projection.method
    if found != method:
        return f"the map is drawn by method {found!r}, the parameter method={est.method!r} gives {method!r}"
    if isinstance(inner, RandomFeatureMap) and inner.n_components != est.n_components:
        return f"the map has {inner.n_components} frequencies, the parameter n_components={est.n_components!r}"
    return None


def _agree_n_features_in(est):
    """The map's input width."""
    n = est.feature_map_.n_features_in
    return None if est.n_features_in_ == n else f"is {est.n_features_in_}, but the feature map reads {n} columns"


def _agree_n_output_features(est):
    """The map's output width."""
    n = est.feature_map_.n_output_features
    return None if est.n_output_features_ == n else f"is {est.n_output_features_}, but the feature map outputs {n} features"


def _agree_columns(key: str):
    def rule(est):
        from ..features._standardize import StandardizedMap

        value, fm = getattr(est, key), est.feature_map_
        mine = getattr(fm, key[:-1]) if isinstance(fm, StandardizedMap) else None
        if value is None or mine is None:
            if value is None and mine is None:
                return None
            return "is None, but the map standardizes its input" if value is None else "is set, but the map does not standardize its input"
        if value.shape != mine.shape or not np.array_equal(value, mine):
            return f"differs from the {key[:-1]} the standardized feature map applies"
        return None

    rule.__doc__ = f"None without standardize, else the standardized map's {key[:-1]}, exactly."
    return rule


def _agree_coef(est):
    """(n_output_features_,) or (targets >= 1, n_output_features_)."""
    coef = est.coef_
    if coef.shape[-1] != est.n_output_features_ or coef.shape[0] < 1:
        return f"has shape {coef.shape}; its last axis must be n_output_features_={est.n_output_features_}"
    return None


def _agree_intercept(est):
    """0.0 with ``fit_intercept=False``; else one value per coef_ row: an array (targets,)
    for the classifier and a 2-D coef_, a number for a 1-D regression coef_."""
    b, t = est.intercept_, _targets(est)
    if isinstance(b, np.ndarray) and b.shape != (t,):
        return f"has shape {b.shape}; expected ({t},) for coef_ of shape {est.coef_.shape}"
    if not est.fit_intercept:
        return None if np.all(np.asarray(b) == 0) else f"is {np.asarray(b).tolist()!r}, but fit_intercept=False fits none (0.0)"
    array = "classes_" in FITTED_ATTRIBUTES[type(est).__name__] or est.coef_.ndim == 2
    if array != isinstance(b, np.ndarray):
        return f"must be {'an array of shape (%d,)' % t if array else 'a number'} for coef_ of shape {est.coef_.shape}"
    return None


def _agree_classes(est):
    """The sorted distinct labels (as ``numpy.unique`` gives them, the order of the
    coefficient columns), two with a 1-D coef_, else one per coef_ row."""
    c, coef = est.classes_, est.coef_
    try:
        ordered = np.unique(c)
    except TypeError:
        ordered = None
    if ordered is None or not np.array_equal(ordered, c):
        return (f"{c.tolist()[:10]} are not the sorted distinct labels as numpy.unique orders them; the "
                "coefficient columns follow that order, so another order swaps the predicted labels")
    k = len(c)
    if (k == 2 and coef.ndim != 1) or (k > 2 and coef.shape != (k, est.n_output_features_)):
        return f"holds {k} classes, which does not match coef_ of shape {coef.shape}"
    return None


def _agree_store_classes(est):
    """The classes_ are codes into these names: integers ``0 <= code < len(store_classes_)``."""
    n = len(est.store_classes_)
    codes = getattr(est, "classes_", np.array([]))
    ok = all(_is_real(v) and float(v).is_integer() and 0 <= v < n for v in codes.tolist())
    return None if ok else f"names {n} labels, but classes_ {codes.tolist()[:10]} are not codes 0..{n - 1} into them"


def _agree_cv_results(est):
    """Only with ``cv``: fold axis of length cv, the parameters' alphas (or the default grid
    ``s * 10**(-7..1)``) and gammas; fold_sizes >= 1; fold_mse >= 0 or inf, never NaN, some
    alpha finite in every fold; mean_mse a weighted mean of fold_mse (finite where every
    fold is) and std_mse its standard deviation over the folds."""
    from ..linalg._cv import DEFAULT_ALPHA_EXPONENTS, check_alphas, check_gammas

    r = est.cv_results_
    if est.cv is None:
        return "is set, but cv=None scores no grid"
    K, A = int(est.cv), r["alphas"].shape[0]
    grid = () if "gammas" not in r else (r["gammas"].shape[0],)
    want = {"fold_mse": grid + (K, A), "mean_mse": grid + (A,), "std_mse": grid + (A,), "fold_sizes": (K,)}
    for key, shape in want.items():
        if r[key].shape != shape:
            return f"{key} has shape {r[key].shape}; cv={K} folds and {A} alphas{' x %d gammas' % grid[0] if grid else ''} give {shape}"
    if est.alphas is not None:
        if not np.array_equal(r["alphas"], check_alphas(est.alphas)):
            return f"alphas {r['alphas'].tolist()} differ from the parameter alphas={est.alphas!r}"
    elif A != DEFAULT_ALPHA_EXPONENTS.size or not (r["alphas"][7] > 0 and np.array_equal(r["alphas"], r["alphas"][7] * 10.0**DEFAULT_ALPHA_EXPONENTS)):
        return f"alphas {r['alphas'].tolist()} are not the default grid s * 10**(-7..1) that alphas=None scores"
    if (est.gammas is not None) != bool(grid):
        return "has gammas, but the parameter gammas=None" if grid else f"lacks the gammas of the parameter gammas={est.gammas!r}"
    if grid:
        try:
            same = np.array_equal(r["gammas"], check_gammas(est.gammas, kernel=est.kernel, n_folds=K, sampling=est.sampling))
        except Exception as exc:  # noqa: BLE001 - parameters that could not have fitted a grid
            return f"has gammas, but the parameters cannot score them: {exc}"
        if not same:
            return f"gammas {r['gammas'].tolist()} differ from the parameter gammas={est.gammas!r}"
    sizes = r["fold_sizes"]
    if sizes.dtype.kind not in "iu" or (sizes < 1).any():
        return f"fold_sizes {sizes.tolist()} must be integer row counts >= 1"
    F, mean, std = r["fold_mse"], r["mean_mse"], r["std_mse"]
    for key, v in (("fold_mse", F), ("mean_mse", mean)):
        if np.isnan(v).any() or (v < 0).any():
            return f"{key} holds NaN or negative values; a mean squared error is >= 0 (inf for an unusable alpha)"
    usable = np.isfinite(F).all(axis=-2)
    if not usable.any():
        return "fold_mse has no alpha with a finite error in every fold (such a fit raises instead)"
    if not np.array_equal(np.isfinite(mean), usable) or not _is_weighted_mean(F, mean, usable):
        return "mean_mse is not a weighted mean of fold_mse over the folds"
    with np.errstate(invalid="ignore"):
        if not np.allclose(std, F.std(axis=-2), rtol=1e-9, atol=0.0, equal_nan=True):
            return "std_mse is not the standard deviation of fold_mse over the folds"
    return None


def _agree_alpha(est):
    """With cv_results_: the alpha of the least mean_mse (ties to the larger alpha); without
    cv: the parameter alpha."""
    if "cv_results_" in vars(est):
        _, ai = _chosen(est)
        want, what = float(est.cv_results_["alphas"][ai]), "the alpha of the least mean_mse in cv_results_"
    elif est.cv is None:
        want, what = float(est.alpha), "the parameter alpha (no cv)"
    else:
        return None  # cv without its scores: nothing to choose from
    return None if est.alpha_ == want else f"is {est.alpha_!r}, but {what} is {want!r}"


def _agree_best_score(est):
    """Minus the least mean_mse of cv_results_ (at alpha_ and gamma_)."""
    if "cv_results_" not in vars(est):
        return "is set without cv_results_, the scores it is the best of"
    gi, ai = _chosen(est)
    mean = est.cv_results_["mean_mse"]
    want = -float(mean[ai] if gi is None else mean[gi, ai])
    return None if est.best_score_ == want else f"is {est.best_score_!r}, but the least mean_mse of cv_results_ gives {want!r}"


def _agree_gamma(est):
    """The gamma of the least mean_mse with a gamma grid, else the parameter gamma when it
    is a number; and the width the feature map is drawn for (where the map records one)."""
    g, want, what = est.gamma_, None, ""
    results = vars(est).get("cv_results_")
    if results is not None and "gammas" in results:
        gi, _ = _chosen(est)
        want, what = float(results["gammas"][gi]), "the gamma of the least mean_mse in cv_results_"
    elif getattr(est, "gammas", None) is None and not isinstance(est.gamma, str):
        want, what = float(est.gamma), "the parameter gamma"
    if want is not None and g != want:
        return f"is {g!r}, but {what} is {want!r}"
    drawn = _map_gamma(est.feature_map_)
    if drawn is not None and not math.isclose(drawn, g, rel_tol=1e-12):
        return f"is {g!r}, but the feature map is drawn for gamma={drawn!r}"
    return None


def _agree_solver(est):
    """The parameter solver unless "auto"; "pcg" exactly when solver_info_ is stored."""
    s = est.solver_
    if est.solver != "auto" and s != est.solver:
        return f"is {s!r}, but the parameter solver={est.solver!r}"
    if (s == "pcg") != ("solver_info_" in vars(est)):
        return "is 'pcg' without solver_info_, the pcg solver's record" if s == "pcg" else f"is {s!r}, but solver_info_ records a pcg solve"
    return None


def _agree_solver_info(est):
    """The pcg record of these parameters: tol, rank ``min(pcg_rank or 256, p)``, n_iter <=
    max_iter, passes ``n_iter + 1`` (+1 more with cv), residuals (n_iter + 1, systems) with
    systems = targets, or (cv + 1) x alphas x targets, non-negative; converged exactly when
    the last residuals are <= tol (else n_iter = max_iter); persisted as pcg_persist when
    that is true or false."""
    from ..linalg._pcg import DEFAULT_PCG_RANK

    info = est.solver_info_
    res, n_iter, tol = info["residuals"], info["n_iter"], info["tol"]
    if getattr(est, "solver_", "pcg") != "pcg":
        return f"records a pcg solve, but solver_={est.solver_!r}"
    if tol != float(est.tol):
        return f"tol={tol!r} differs from the parameter tol={est.tol!r}"
    rank = min(DEFAULT_PCG_RANK if est.pcg_rank is None else int(est.pcg_rank), est.n_output_features_)
    if info["rank"] != rank:
        return f"rank={info['rank']!r}, but pcg_rank={est.pcg_rank!r} with {est.n_output_features_} features gives {rank}"
    if n_iter > est.max_iter:
        return f"n_iter={n_iter} exceeds the parameter max_iter={est.max_iter!r}"
    cv = est.cv is not None
    if info["passes"] != n_iter + (2 if cv else 1):
        return f"passes={info['passes']!r}, but {n_iter} iterations make {n_iter + (2 if cv else 1)}"
    t, results = _targets(est), vars(est).get("cv_results_")
    systems = t if not cv else None if results is None else (int(est.cv) + 1) * results["alphas"].shape[0] * t
    if systems is not None and res.shape != (n_iter + 1, systems):
        return f"residuals has shape {res.shape}; {n_iter} iterations of {systems} systems give {(n_iter + 1, systems)}"
    if (res < 0).any():
        return "residuals holds negative values; they are relative residual norms"
    converged = not bool((res[-1] > tol).any())
    if info["converged"] != converged:
        return f"converged={info['converged']!r}, but the last residuals are {'' if converged else 'not '}all <= tol={tol!r}"
    if not converged and n_iter != est.max_iter:
        return f"stops unconverged after n_iter={n_iter} iterations, before max_iter={est.max_iter!r}"
    persist = est.pcg_persist
    if isinstance(persist, bool) and info.get("persisted", persist) != persist:
        return f"persisted={info['persisted']!r}, but the parameter pcg_persist={persist!r}"
    return None


def _agree_precision(est):
    """The parameter precision unless "auto"; "float64" with the pcg solver."""
    p = est.precision_
    if est.precision != "auto" and p != est.precision:
        return f"is {p!r}, but the parameter precision={est.precision!r}"
    if getattr(est, "solver_", None) == "pcg" and p != "float64":
        return f"is {p!r}, but the pcg solver computes in float64"
    return None


def _agree_precision_error(est):
    """NaN exactly with the pcg solver; else the estimate ``eps (||G||_F / alpha_ + 20)`` of
    precision_: at least ``20 eps`` and finite for alpha_ > 0 (inf or 0 for alpha_ = 0), at
    most 1e-2 when precision="auto" kept float32."""
    from ..linalg._precision import AUTO_PRECISION_TOL

    e, pcg = est.precision_error_, getattr(est, "solver_", None) == "pcg"
    if math.isnan(e) or pcg:
        return None if math.isnan(e) and pcg else (
            f"is {e!r}, but the pcg solver keeps no Gram to estimate it from (NaN)" if pcg
            else "is NaN, which only the pcg solver (no Gram) records")
    precision = getattr(est, "precision_", "float64")
    low = 20 * float(np.finfo(np.dtype(precision)).eps)
    if est.alpha_ > 0 and not low <= e < math.inf:
        return f"is {e!r}; the estimate eps (||G||_F / alpha_ + 20) in {precision} is finite and >= {low:.3g}"
    if est.alpha_ == 0 and e not in (0.0, math.inf):
        return f"is {e!r}; at alpha_=0 the estimate is inf (0 for a zero Gram)"
    if est.precision == "auto" and precision == "float32" and e > AUTO_PRECISION_TOL:
        return f"is {e!r}, above {AUTO_PRECISION_TOL:g}, at which precision='auto' would not keep float32"
    return None


def _agree_fold_seed(est):
    """A draw ``0 <= seed < 2**63 - 1`` of the generator; nothing else derives it (the
    fold hash of a refit; prediction does not read it)."""
    return None if 0 <= est.fold_seed_ < 2**63 - 1 else f"is {est.fold_seed_}, outside the range 0 <= seed < 2**63 - 1 it is drawn from"


#: fitted attribute -> its agreement rule, in the order they are checked (a rule may use
#: the fields before it). Every attribute of FITTED_ATTRIBUTES has one (tests check this).
AGREEMENT = {
    "feature_map_": _agree_feature_map,
    "n_features_in_": _agree_n_features_in,
    "n_output_features_": _agree_n_output_features,
    "mean_": _agree_columns("mean_"),
    "scale_": _agree_columns("scale_"),
    "coef_": _agree_coef,
    "intercept_": _agree_intercept,
    "classes_": _agree_classes,
    "store_classes_": _agree_store_classes,
    "cv_results_": _agree_cv_results,
    "alpha_": _agree_alpha,
    "best_score_": _agree_best_score,
    "gamma_": _agree_gamma,
    "solver_": _agree_solver,
    "solver_info_": _agree_solver_info,
    "precision_": _agree_precision,
    "precision_error_": _agree_precision_error,
    "fold_seed_": _agree_fold_seed,
}
