"""Input validation at dkrr's public boundary.

Arrays arrive as numpy arrays, array-likes, dask arrays or zarr arrays. Small helpers
here turn them into either a float numpy array or a row-chunked float dask array, and
raise errors that name the problem and the fix.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .errors import (
    ChunkingError,
    FeatureMismatchError,
    InputTypeError,
    InputValidationError,
    InvalidParameterError,
    MissingValueError,
    NonFiniteInputError,
)

__all__ = [
    "as_float_dtype",
    "check_class_labels",
    "check_first_label_block",
    "check_finite_rows",
    "check_input",
    "check_n_features",
    "check_object_labels",
    "check_random_state",
    "is_dask",
    "label_union",
    "missing_labels",
]


def is_dask(X: Any) -> bool:
    """True for a ``dask.array.Array``."""
    try:
        import dask.array as da
    except ImportError:  # pragma: no cover - dask is a core dependency
        return False
    return isinstance(X, da.Array)


def _is_zarr(X: Any) -> bool:
    try:
        import zarr
    except ImportError:  # pragma: no cover
        return False
    return isinstance(X, zarr.Array)


def as_float_dtype(dtype: np.dtype, name: str = "X") -> np.dtype:
    """The floating dtype dkrr computes in for input ``dtype``.

    float32 stays float32, float64 stays float64, float16 becomes float32, integers and
    booleans become float64; anything else (complex, strings, objects) is refused
    (:func:`check_input` converts numeric object arrays before it gets here).
    """
    dtype = np.dtype(dtype)
    if dtype == np.float32 or dtype == np.float64:
        return dtype
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype.kind in "biu":
        return np.dtype(np.float64)
    if dtype.kind == "c":  # scikit-learn's wording, which its estimator checks look for
        raise InputValidationError(
            f"Complex data not supported: {name} has dtype {dtype}; dkrr needs real numeric "
            f"data. Keep the real part ({name}.real) or split real and imaginary parts into "
            "columns."
        )
    raise InputValidationError(
        f"{name} has dtype {dtype}; dkrr needs real numeric data (float32, float64, "
        f"integer or bool). Convert it first, e.g. {name}.astype('float64')."
    )


def check_finite_rows(
    block: np.ndarray,
    name: str = "X",
    block_index: int | None = None,
    row_offset: int = 0,
    where: str = "",
) -> None:
    """Raise :class:`NonFiniteInputError` if ``block`` holds NaN or inf.

    The one finiteness check of dkrr: the message names the count of non-finite values,
    the row block (when ``block_index`` is given) and the *global* rows, ``row_offset``
    being the global index of the block's first row.

    Parameters
    ----------
    block : ndarray
        Rows along the first axis; non-float dtypes are always finite.
    name : str
        Name of the array in the message (``"X"``, ``"y"``).
    block_index : int, optional
        Position of the row block; ``None`` for a whole in-memory array.
    row_offset : int, default=0
        Global index of the block's first row.
    where : str
        Extra context after the name (e.g. ``" (Nystroem landmark rows)"``).
    """
    if block.dtype.kind != "f" or np.isfinite(block).all():
        return
    bad = ~np.isfinite(block)
    rows = np.nonzero(bad.reshape(bad.shape[0], -1).any(axis=1))[0]
    span = ""
    if block_index is not None:
        span = f" in rows {row_offset} to {row_offset + block.shape[0] - 1} (row block {block_index}),"
    raise NonFiniteInputError(
        f"{name}{where} contains {int(bad.sum())} non-finite value(s) (NaN or inf){span} in "
        f"{len(rows)} row(s), first in row {row_offset + int(rows[0])}; remove or impute "
        "them before fitting or predicting."
    )


def check_class_labels(
    block: np.ndarray,
    name: str = "y",
    block_index: int | None = None,
    row_offset: int = 0,
) -> None:
    """Refuse float class labels that are not finite whole numbers (a continuous target).

    The one rule for every input kind (numpy before the pass, dask and zarr on the first
    block before the pass and on every block inside it): float labels must be finite
    (else :class:`NonFiniteInputError` from :func:`check_finite_rows`) and integral, which
    is scikit-learn's ``type_of_target`` test for ``"continuous"``. Whole-number floats
    (LIBSVM's ``+1``/``-1``) are labels. Object labels: :func:`check_object_labels`. Other
    dtypes pass. Arguments as in :func:`check_finite_rows`.
    """
    if block.dtype == object:
        check_object_labels(block, name, block_index, row_offset)
    if block.dtype.kind != "f":
        return
    check_finite_rows(block, name, block_index, row_offset)
    flat = block.reshape(block.shape[0], -1)
    rows = np.nonzero((flat != np.trunc(flat)).any(axis=1))[0]
    if rows.size:
        span = ""
        if block_index is not None:
            span = f" in rows {row_offset} to {row_offset + block.shape[0] - 1} (row block {block_index}),"
        first = int(rows[0])
        raise InputValidationError(
            f"Unknown label type: continuous. {name} holds non-integer values{span} in "
            f"{rows.size} row(s), first in row {row_offset + first} ({float(flat[first, 0])!r}); "
            "a classifier needs class labels: fit a regression (RandomFeatureRidge, `dkrr fit` "
            "without --classifier), or make the target labels (round or bin it)."
        )


#: pandas' missing-value scalars (``pd.NA``, ``pd.NaT``), by type name: pandas is optional
_PANDAS_MISSING = ("NAType", "NaTType")


def _label_kind(v) -> str:
    if (v is None or (isinstance(v, (float, np.floating)) and not np.isfinite(v))
            or type(v).__name__ in _PANDAS_MISSING):
        return "missing"
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, float, np.integer, np.floating)):
        return "number"
    if isinstance(v, str):
        return "str"
    return type(v).__name__


def _mixed_kinds(found, where: str = "") -> InputValidationError | None:
    if len(found) > 1 or found[0] not in ("bool", "number", "str"):
        return InputValidationError(
            f"y mixes label types {found}{where}; class labels must be all numbers, all strings or "
            "all booleans (convert them, e.g. y.astype(str))."
        )
    return None


def _label_kinds(labels: np.ndarray) -> np.ndarray:
    """:func:`_label_kind` of every value of ``labels``, flattened."""
    return np.array([_label_kind(v) for v in labels.ravel()], dtype=object)


def missing_labels(labels: np.ndarray) -> np.ndarray:
    """The mask of missing values (None, NaN, pandas' NA or NaT) among object ``labels``."""
    return (_label_kinds(labels) == "missing").reshape(labels.shape)


def check_object_labels(block: np.ndarray, name: str = "y", block_index: int | None = None,
                        row_offset: int = 0) -> None:
    """Object-dtype labels (e.g. from pandas): no missing values, one kind of value; for a
    whole array or, in a pass, each row block (arguments as in :func:`check_finite_rows`).

    ``np.unique`` neither merges NaNs nor orders ``1`` against ``"a"``, so a missing label
    would become many classes and mixed labels a bare ``TypeError``.
    """
    if not block.size:  # an empty block (a DataFrame's empty partition) holds no label
        return
    kinds = _label_kinds(block)
    span = ""
    if block_index is not None:
        span = f" in rows {row_offset} to {row_offset + block.shape[0] - 1} (row block {block_index})"
    missing = np.nonzero(kinds == "missing")[0]
    if missing.size:
        raise InputValidationError(
            f"{name} holds {missing.size} missing label(s) (None, NaN or pandas' NA){span}, first in row(s) "
            f"{(missing[:5] + row_offset).tolist()}; drop or label those rows before fitting."
        )
    error = _mixed_kinds(sorted(set(kinds.tolist())), span)
    if error is not None:
        raise error


def label_union(labelled: list) -> np.ndarray:
    """The sorted union of the row blocks' label sets (each checked by
    :func:`check_class_labels`): refused where blocks hold labels of different kinds, which
    ``np.unique`` could not order (``'<' not supported between 'int' and 'str'``) or would
    merge (``True`` with ``1``)."""
    if any(a.dtype == object for a in labelled):
        error = _mixed_kinds(sorted({_label_kind(v) for a in labelled for v in a.tolist()}), " across row blocks")
        if error is not None:
            raise error
    return np.unique(np.concatenate(labelled))


def check_first_label_block(y: Any) -> None:
    """:func:`check_class_labels` on the first row block of dask or zarr float labels,
    read now: a continuous target is refused before a pass (whose tasks check every
    block again, in whatever order they run)."""
    if np.dtype(y.dtype).kind != "f" or y.ndim < 1 or not y.shape[0]:
        return
    if is_dask(y):
        import dask

        from ._failures import cluster_failures_named

        with cluster_failures_named("reading the first block of y"):
            (block,) = dask.compute(y[: y.chunks[0][0]])
    else:
        block = y[: max(1, int(y.chunks[0]))]
    check_class_labels(np.asarray(block), "y", 0, 0)


def check_input(
    X: Any,
    *,
    name: str = "X",
    ndim: int = 2,
    allow_dask: bool = True,
    check_finite: bool = True,
):
    """Validate ``X`` and return a float numpy array or a row-chunked float dask array.

    Parameters
    ----------
    X : array-like, dask array or zarr array
    name : str
        Name used in error messages.
    ndim : {1, 2} or None
        Required number of dimensions (``None`` accepts 1 or 2: targets).
    allow_dask : bool
        Whether dask (and zarr, wrapped as dask) input is accepted.
    check_finite : bool
        For numpy input, check for NaN/inf now. Dask input is checked lazily, block by
        block, by the functions that consume it (the error then names the block).

    Raises
    ------
    InputValidationError, ChunkingError, NonFiniteInputError
        Messages contain scikit-learn's phrases for the same problems ("Reshape your
        data", "0 sample(s)", "Complex data not supported", ...).
    InputTypeError
        An object array holds a value that is not a number (also a ``TypeError``).

    Notes
    -----
    scipy sparse input is refused (random features are dense); a numpy object array of
    numbers (e.g. from pandas) is converted to float64, as scikit-learn does.
    """
    _refuse_sparse_input(X, name)
    if _is_zarr(X):  # read by slice inside the steps of a pass (dkrr._rows)
        from ._rows import zarr_rows

        X = zarr_rows(X)
    if is_dask(X):
        if not allow_dask:
            raise InputValidationError(f"{name} must be an in-memory array here, got a dask array")
        _check_shape(X.shape, name, ndim)
        if X.ndim == 2 and X.numblocks[1] != 1:
            raise ChunkingError(
                f"{name} is chunked along columns (chunks {X.chunks[1]} over {X.shape[1]} "
                f"columns); dkrr streams row blocks that hold every column. Use "
                f"`{name}.rechunk({{1: -1}})`."
            )
        from ._rows import astype_rows

        return astype_rows(X, as_float_dtype(X.dtype, name))
    if hasattr(X, "__array__") or isinstance(X, (list, tuple)):
        try:
            arr = np.asarray(X)
        except (TypeError, ValueError) as exc:
            raise InputValidationError(f"{name} could not be converted to an array: {exc}") from exc
    else:
        raise InputValidationError(
            f"{name} must be a numpy array, array-like, dask array or zarr array; got "
            f"{type(X).__name__}"
        )
    _check_shape(arr.shape, name, ndim)
    if arr.dtype == object:
        arr = _object_to_float(arr, name)
    dtype = as_float_dtype(arr.dtype, name)
    arr = np.ascontiguousarray(arr, dtype=dtype)
    if check_finite:
        check_finite_rows(arr, name)
    return arr


def _refuse_sparse_input(X: Any, name: str) -> None:
    import scipy.sparse

    if scipy.sparse.issparse(X):
        raise InputValidationError(
            f"{name} is a scipy sparse {X.format} array: sparse input is not supported, as "
            f"random features are dense. Convert with {name}.toarray() (or stream dense row "
            "blocks from a dask/zarr array)."
        )


def _object_to_float(arr: np.ndarray, name: str) -> np.ndarray:
    """A numpy object array of numbers as float64 (scikit-learn converts them too)."""
    fix = f"make every value a number, e.g. {name}.astype('float64') after fixing or dropping the others"
    try:
        return arr.astype(np.float64)
    except TypeError as exc:
        # None and pandas' NA (nullable Int64/boolean columns) are missing cells, not types
        missing = np.array([v is None or type(v).__name__ == "NAType" for v in arr.ravel()]).reshape(arr.shape)
        if missing.any():
            rows = np.nonzero(missing.reshape(arr.shape[0], -1).any(axis=1))[0]
            raise MissingValueError(
                f"{name} holds {int(missing.sum())} missing value(s) (None or pandas NA), first in "
                f"row {int(rows[0])}; impute them or drop those rows before fitting or predicting."
            ) from exc  # numpy: "float() argument must be a string or a real number, not 'dict'"
        raise InputTypeError(f"{name} has dtype object and holds a value that is not a number: {exc}; {fix}.") from exc
    except ValueError as exc:  # numpy: "could not convert string to float: 'abc'"
        raise InputValidationError(f"{name} has dtype object and holds a value that is not a number: {exc}; {fix}.") from exc


def _check_shape(shape: tuple, name: str, ndim: int | None) -> None:
    allowed = (1, 2) if ndim is None else (ndim,)
    if len(shape) not in allowed:
        hint = ""
        if len(shape) == 1 and 2 in allowed:  # scikit-learn's words, which its checks look for
            hint = (
                f" Reshape your data: {name}.reshape(-1, 1) if it holds a single feature, "
                f"{name}.reshape(1, -1) if it is a single sample."
            )
        raise InputValidationError(
            f"{name} must be {' or '.join(map(str, allowed))}-dimensional, got shape "
            f"{shape}.{hint}"
        )
    # scikit-learn's phrases ("0 sample(s) (shape=...) while a minimum of 1 is required")
    if shape[0] == 0:
        raise InputValidationError(
            f"{name} is empty: 0 sample(s) (shape={shape}) while a minimum of 1 is required; "
            "pass at least one row."
        )
    if len(shape) == 2 and shape[1] == 0:
        raise InputValidationError(
            f"{name} is empty: 0 feature(s) (shape={shape}) while a minimum of 1 is required; "
            "pass at least one column."
        )


def check_n_features(X_shape: tuple, expected: int, name: str = "X", estimator: Any = None) -> None:
    """Raise :class:`FeatureMismatchError` when the column count differs from fit time.

    With ``estimator`` (an instance or a name) the message also carries scikit-learn's
    phrase ``"X has 3 features, but Est is expecting 4 features as input"``.
    """
    if X_shape[1] != expected:
        head = ""
        if estimator is not None:
            est_name = estimator if isinstance(estimator, str) else type(estimator).__name__
            head = f"{name} has {X_shape[1]} features, but {est_name} is expecting {expected} features as input: "
        raise FeatureMismatchError(
            f"{head}{name} has {X_shape[1]} columns but the model was fitted with {expected}; "
            "pass the same columns, in the same order, as in fit."
        )


def check_random_state(random_state: Any) -> np.random.Generator:
    """Turn ``None``, an int, a SeedSequence, a Generator or a RandomState (by one draw of it)
    into a numpy Generator."""
    if random_state is None or isinstance(random_state, (numbers.Integral, np.random.SeedSequence)):
        if isinstance(random_state, numbers.Integral) and random_state < 0:
            raise InvalidParameterError(f"random_state must be >= 0, got {random_state}")
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**63 - 1, dtype=np.int64))
    raise InvalidParameterError(
        f"random_state must be None, an int, a numpy SeedSequence, Generator or RandomState; got {random_state!r}"
    )
