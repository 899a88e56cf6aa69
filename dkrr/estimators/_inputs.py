"""Small input helpers of the estimators: refusing sparse input, DataFrames and their
column names, materializing results."""

from __future__ import annotations

import numpy as np

from .._frames import check_feature_names, feature_names, frames_as_arrays
from .._failures import cluster_failures_named
from .._validation import is_dask
from ..errors import InputValidationError

__all__ = ["_materialize", "_refuse_sparse", "frame_inputs", "frame_to_predict", "names_state"]


def frame_inputs(X, y=None, sample_weight=None, groups=None, *, labels: bool = False):
    """``(X, y, sample_weight, groups, names)`` for fit: pandas or dask DataFrames and
    Series as arrays (dask ones with known chunk sizes, their blocks' rows counted in one
    pass, as are those of dask arrays whose chunk sizes are unknown: ``ddf['g'].values``
    as groups was refused as of shape ``(nan,)``), non-numeric columns refused with their
    names (``y`` may hold any labels with `labels`, groups any values), and the column
    names of X when they are all strings (scikit-learn's ``feature_names_in_``), else None."""
    names = feature_names(X)
    X, y, sample_weight, groups = frames_as_arrays((X, "X", True), (y, "y", not labels),
                                                   (sample_weight, "sample_weight", True), (groups, "groups", False))
    return X, y, sample_weight, groups, names


def names_state(names) -> dict:
    """The fitted attribute ``feature_names_in_`` for the one-step fitted state (none
    without names: replacing the state drops an earlier fit's)."""
    return {} if names is None else {"feature_names_in_": names}


def frame_to_predict(est, X):
    """X for predict/transform: its column names checked against fit's (a warning when
    only one side has names, an error when they differ), a DataFrame as an array (a dask
    one, or a dask array of unknown chunk sizes, with its blocks' rows counted)."""
    check_feature_names(est, X)
    return frames_as_arrays((X, "X", True))[0]


def _refuse_sparse(*arrays):
    import scipy.sparse

    for a in arrays:
        if scipy.sparse.issparse(a):
            raise InputValidationError(
                "sparse input is not supported: random features are dense. Convert with "
                "X.toarray() (or stream dense row blocks from a dask/zarr array)."
            )


def _materialize(a):
    """numpy version of a numpy/dask/zarr array (computes dask input)."""
    if is_dask(a):
        from .._progress import compute_limited

        return np.asarray(compute_limited(a, label="computing")[0])
    return np.asarray(a)


def score_target(y, est, labels: bool = False):
    """The ``y`` of ``est.score(X, y)`` as numpy, or the error that names what was given:
    ``None`` and a scalar were an ``IndexError`` (``tuple index out of range``) from the
    row-count check; ``labels``: the classifier's labels (1-D, of a label dtype; a missing
    one as None: a label not seen in fit, scored wrong)."""
    if y is None:
        raise InputValidationError(f"{type(est).__name__}.score(X, y) needs the true targets y, got None")
    if labels:
        from ..linalg._blocks import _labels_as_array

        y = _labels_as_array(y)
    y = _materialize(y)
    if labels and y.dtype == object:
        from .._validation import missing_labels

        missing = missing_labels(y)
        if missing.any():  # NaN, pandas' NA: None, which np.isin and == compare (NA was a TypeError)
            y = y.copy()
            y[missing] = None
    if y.ndim == 0:
        raise InputValidationError(f"{type(est).__name__}.score(X, y) needs y as an array with one value per "
                                   f"row of X, got the scalar {y.item()!r}")
    return y


def _shifted_target(yd, numeric: bool, y=None):
    """``(y - s, s)`` with ``s`` the mean of y's first block (per target column), when the
    model has an intercept; else ``(y, 0)``.

    The statistics hold ``sum y``, ``sum y^2`` and ``Z^T y``; the fold errors and the
    centred solve subtract terms of the size of ``n ybar^2`` from them. For a target far
    from zero (``1e8 + sin x``) that cancellation lost every digit (negative fold MSEs).
    With an intercept the model and every fold's error are the same for ``y - s``, and
    the first block's mean is near enough to the mean to remove the cancellation; ``s``
    is added back to the intercept. ``y``: the target as given; numpy is read directly,
    a dask or zarr target costs one read of its first block before the pass.
    """
    t = 1 if yd.ndim == 1 else int(yd.shape[1])
    if not numeric or yd.shape[0] == 0:
        return yd, np.zeros(t)
    shift = first_block_mean(yd, y)
    if not np.any(shift):
        return yd, np.zeros(t)
    from .._rows import map_rows

    # y - s, inside the reader of a target dkrr reads from Zarr itself (no read-ahead)
    s = shift if yd.ndim > 1 else shift[0]
    return map_rows(yd, np.subtract, s, dtype=np.result_type(yd.dtype, shift.dtype)), shift


def first_block_mean(yd, y=None) -> np.ndarray:
    """The mean of the finite values of the first row block of the dask array ``yd``, per
    column (shape ``(t,)``; 0 where a column has none): the shift that keeps sums of
    squares of a target far from zero free of cancellation (the fit's statistics, ``dkrr
    evaluate``'s r2). ``y``: the same target as given, read directly when it is numpy;
    a dask or zarr target costs one read of its first block."""
    import dask

    t = 1 if yd.ndim == 1 else int(yd.shape[1])
    rows = yd.chunks[0][0]
    if isinstance(y, np.ndarray):
        first = y[:rows]
    else:
        with cluster_failures_named("reading the first block of y"):
            first = dask.compute(yd[:rows])[0]
    first = np.asarray(first, dtype=np.float64).reshape(-1, t)
    finite = np.isfinite(first)
    # NaN or inf rows are named by the checks that read them; they must not move the others
    return np.where(finite, first, 0.0).sum(axis=0) / np.maximum(finite.sum(axis=0), 1)


def _finite_block(block, name: str, where: str, block_info=None):
    from .._validation import check_finite_rows

    info = block_info[0]
    check_finite_rows(block, name, info["chunk-location"][0], info["array-location"][0][0], where)
    return block


def finite_rows_checked(yd, name: str = "y", where: str = ""):
    """The dask array ``yd`` with each row block checked for NaN or inf when it is computed
    (:func:`~dkrr._validation.check_finite_rows`: a :class:`~dkrr.errors.NonFiniteInputError`
    naming the block and the rows), for a target read outside the fit's pass (``dkrr
    evaluate``: its metrics were NaN, with exit 0, for a store whose y held one NaN)."""
    return yd.map_blocks(_finite_block, name, where, dtype=yd.dtype, meta=np.empty((0,) * yd.ndim, dtype=yd.dtype))
