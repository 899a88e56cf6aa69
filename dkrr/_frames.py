"""DataFrames and dask arrays of unknown chunk sizes at dkrr's public boundary.

pandas and dask DataFrames and Series become numpy or dask arrays (a dask one with its
blocks' rows counted, as are those of a dask array whose chunk sizes are unknown), their
non-numeric columns refused with their names, and their column names checked as
scikit-learn's ``feature_names_in_`` rules have it. Neither pandas nor dask.dataframe is
imported here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validation import is_dask
from .errors import FeatureMismatchError, InputTypeError, InputValidationError

__all__ = ["check_feature_names", "feature_names", "frames_as_arrays", "is_frame", "unknown_rows"]


def is_frame(X: Any) -> bool:
    """True for a pandas or dask DataFrame or Series (neither library is imported)."""
    module = type(X).__module__.split(".")[0]
    return module in ("pandas", "dask") and hasattr(X, "dtypes") and hasattr(X, "shape")


def _is_dask_frame(X: Any) -> bool:
    return is_frame(X) and hasattr(X, "to_dask_array")


def feature_names(X: Any) -> np.ndarray | None:
    """The column names of a DataFrame when all are strings (scikit-learn's rule).

    Returns an object array of the names, or None for input without columns or whose
    names are not strings (integers, the default of ``pd.DataFrame(array)``).

    Raises
    ------
    InputTypeError
        The names mix strings and other types (scikit-learn's ``TypeError`` and words).
    InputValidationError
        Two string names are the same (scikit-learn refuses them too): the names could not
        tell the columns apart at predict.
    """
    columns = X.columns if is_frame(X) and X.ndim == 2 else None
    if columns is None or len(columns) == 0:
        return None
    names = np.asarray(list(columns), dtype=object)
    types = sorted(t.__qualname__ for t in {type(v) for v in names})
    if len(types) > 1 and "str" in types:
        raise InputTypeError(
            "Feature names are only supported if all input features have string names, but "
            f"your input has {types} as feature name / column name types. If you want feature "
            "names to be stored and validated, you must convert them all to strings, by using "
            "X.columns = X.columns.astype(str) for example. Otherwise you can remove feature / "
            "column names from your input data, or convert them all to a non-string data type."
        )
    if types != ["str"]:
        return None
    values, counts = np.unique(names.astype(str), return_counts=True)
    if (counts > 1).any():
        twice = [f"{str(v)!r} {c} times" for v, c in zip(values, counts) if c > 1]
        raise InputValidationError(
            f"X has duplicate column names: {', '.join(twice[:20])}{', ...' if len(twice) > 20 else ''}; "
            "give every column its own name (feature names must tell the columns apart at predict)")
    return names


def check_feature_names(estimator: Any, X: Any) -> None:
    """Compare the column names of `X` with those `estimator` was fitted with, as
    scikit-learn's estimators do at predict: a :class:`FeatureNamesWarning` (a
    ``UserWarning``) when only one side has names, a :class:`FeatureMismatchError` (a
    ``ValueError``, with scikit-learn's message) when both have names and they differ or
    come in another order."""
    import warnings

    from .errors import FeatureNamesWarning

    fitted = getattr(estimator, "feature_names_in_", None)
    names = feature_names(X)
    if fitted is None and names is None:
        return
    est = type(estimator).__name__
    if fitted is None:
        warnings.warn(f"X has feature names, but {est} was fitted without feature names",
                      FeatureNamesWarning, stacklevel=3)
        return
    if names is None:
        warnings.warn(f"X does not have valid feature names, but {est} was fitted with feature "
                      "names", FeatureNamesWarning, stacklevel=3)
        return
    if len(fitted) == len(names) and np.all(fitted == names):
        return
    unexpected = sorted(set(names) - set(fitted))
    missing = sorted(set(fitted) - set(names))

    def listed(items):
        shown = [f"- {n}\n" for n in items[:5]]
        return "".join(shown) + ("- ...\n" if len(items) > 5 else "")

    message = "The feature names should match those that were passed during fit.\n"
    if unexpected:
        message += "Feature names unseen at fit time:\n" + listed(unexpected)
    if missing:
        message += "Feature names seen at fit time, yet now missing:\n" + listed(missing)
    if not unexpected and not missing:
        message += "Feature names must be in the same order as they were in fit.\n"
    raise FeatureMismatchError(
        message + f"Pass the columns this {est} was fitted with, in that order: "
        "X[model.feature_names_in_]."
    )


def _refuse_non_numeric(X: Any, name: str) -> None:
    """Refuse a DataFrame (or Series) with columns that are not numbers or booleans."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    if X.ndim == 1:
        if not (is_numeric_dtype(X.dtype) or is_bool_dtype(X.dtype)):
            raise InputValidationError(
                f"{name} is a Series{'' if X.name is None else f' ({X.name!r})'} of dtype {X.dtype}, "
                "not numbers; dkrr needs numbers: convert "
                f"it ({name}.astype(float); a missing value then becomes NaN, which is refused by "
                "name) or encode it as numbers first"
            )
        return
    # by position: a name given twice is two columns (dict(X.dtypes) would merge them)
    dtypes = zip(X.columns, X.dtypes)
    bad = [f"{c!r} ({dt})" for c, dt in dtypes if not (is_numeric_dtype(dt) or is_bool_dtype(dt))]
    if bad:
        raise InputValidationError(
            f"{name} has {len(bad)} column(s) that are not numeric: {', '.join(bad[:20])}"
            f"{', ...' if len(bad) > 20 else ''}; dkrr needs numbers: leave them out "
            f"({name}[[...numeric columns...]]) or encode them as numbers first"
        )


def _same_block(block: np.ndarray) -> np.ndarray:
    return block


def _block_rows(block: np.ndarray) -> np.ndarray:
    return np.array([block.shape[0]], dtype=np.int64)


def unknown_rows(a: Any) -> bool:
    """Whether the dask array ``a`` has row blocks of unknown length (NaN chunk sizes)."""
    return any(isinstance(c, float) and np.isnan(c) for c in a.chunks[0])


def frames_as_arrays(*items: tuple[Any, str, bool]) -> list[Any]:
    """Arrays for DataFrames and Series, the rest as given.

    Each item is ``(value, name, numeric)``: pandas input becomes a numpy array, dask input
    a dask array with known chunk sizes: ``to_dask_array()``, then the rows of every block
    of every dask input counted in one compute (what ``to_dask_array(lengths=True)`` and
    ``compute_chunk_sizes()`` do for one input; ``lengths=True`` itself counts the
    partitions of another optimisation of the expression than the array's, and fails for
    ``read_parquet`` frames whose column selection merges partitions). A dask array whose
    row chunks are unknown (NaN: what a DataFrame's ``.values`` or ``to_dask_array()``, a
    boolean mask or a filtering ``map_blocks`` give) has its blocks' rows counted in the
    same compute, as a DataFrame's: a fit needs the rows, and under dask's array query
    planning a prediction from unknown chunks fails in dask's rechunk. With `numeric`,
    columns that are not numbers or booleans are refused with their names before anything
    is computed (labels of a classifier may be anything).

    Raises
    ------
    InputValidationError
        A non-numeric column.
    """
    out = [value for value, _, _ in items]
    arrays = {}
    for k, (value, name, numeric) in enumerate(items):
        if is_dask(value) and value.ndim >= 1 and unknown_rows(value):
            arrays[k] = value
            continue
        if not is_frame(value):
            continue
        if numeric:
            _refuse_non_numeric(value, name)
        if not _is_dask_frame(value):
            out[k] = value.to_numpy()
            continue
        from pandas.api.types import is_extension_array_dtype, is_numeric_dtype

        dtypes = list(dict(value.dtypes).values()) if value.ndim == 2 else [value.dtype]
        if any(is_extension_array_dtype(dt) for dt in dtypes):  # as a numpy dtype (NA: NaN, None)
            value = value.astype("float64" if all(is_numeric_dtype(dt) for dt in dtypes) else object)
        try:
            arrays[k] = value.to_dask_array()
        except AttributeError as exc:  # dask's array query planning cannot (dask 2026.8)
            raise InputValidationError(
                f"{name}: this dask cannot turn a dask DataFrame into a dask array with its "
                f"array query planning on ({exc.__class__.__name__}: {str(exc).splitlines()[0]}); "
                "set dask.config 'array.query-planning' to False, or ingest the data into a "
                "store (dkrr.io.ingest) and fit that"
            ) from None
    if arrays:
        import dask

        from ._failures import cluster_failures_named

        with cluster_failures_named("counting the rows of the blocks"):
            counts = dask.compute(*[
                a.map_blocks(_block_rows, dtype=np.int64, chunks=((1,) * a.numblocks[0],),
                             drop_axis=list(range(1, a.ndim)) or None)
                for a in arrays.values()
            ])
        for (k, a), rows in zip(arrays.items(), counts):
            chunks = (tuple(int(r) for r in rows),) + tuple(a.chunks[1:])
            # the same blocks, their lengths now known (map_blocks: also an array of dask's
            # array query planning, which has no graph-and-chunks constructor)
            out[k] = a.map_blocks(_same_block, chunks=chunks, meta=np.empty((0,) * a.ndim, dtype=a.dtype))
    return out
