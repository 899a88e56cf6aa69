"""The folds of the one-pass cross-validation, from what a user has: ``cv=K``, a
scikit-learn splitter (with ``fit(X, y, groups=...)`` for group splitters) or explicit
``(train, test)`` splits.

The one-pass CV keeps statistics per fold and trains fold k's model on every row outside
fold k (docs/ALGORITHMS.md 3.6), so it needs **one fold id per row**: splits whose test
sets partition the rows and whose training sets are the rest. This module turns ``cv``
into a :class:`FoldPlan` (the folds' number and, unless they come from the row-index
hash, a dask array of per-row keys aligned with X, streamed like sample weights); the
block tasks turn keys into folds in one place, :func:`dkrr.linalg._stats.row_folds`.

- ``cv=K``: rows hashed to folds by their global index (no per-row array).
- A splitter (``KFold``, ``StratifiedKFold``, ``GroupKFold``, ``PredefinedSplit``, ...)
  or an iterable of ``(train, test)`` index arrays: the splits are drawn on the client
  (``split(X, y, groups)``; only the row count of a dask X is read, a dask y is not
  gathered) and checked to be a partition; the fold ids (n int8..int64) go to the workers
  once. Splits that are not a partition (``TimeSeriesSplit``, ``ShuffleSplit``,
  ``PredefinedSplit`` with ``-1`` rows, ``LeavePGroupsOut`` with P > 1, ...) are refused
  with the reason: they need one pass per split (fit one model per split instead).
- ``GroupKFold`` with ``groups`` a dask array (integer group codes aligned with X): the
  groups are never gathered; each row's fold is a seeded hash of its group (the fold seed
  ``fold_seed_``), so every group lies in one fold, as GroupKFold promises, but the folds
  are not balanced by size as GroupKFold's own (with few groups a fold may be empty:
  refused after the pass, naming the fold sizes). numpy groups use GroupKFold itself.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import is_dask
from ..errors import InputValidationError, InvalidParameterError

__all__ = ["FoldPlan", "check_cv", "fold_plan", "folds_from_splits", "is_splitter", "uses_given_folds"]

#: why a split that is not a partition cannot be scored by the one pass
_ONE_PASS = ("the one-pass cross-validation trains fold k's model on every row outside fold k's test "
             "set, so it needs splits whose test sets partition the rows and whose training sets are "
             "the other rows")
_FIX = ("Splits like TimeSeriesSplit or ShuffleSplit need one fit per split: fit one model per "
        "split yourself (a fixed alpha, or cv=K inside each training set), or use KFold, GroupKFold, "
        "StratifiedKFold or explicit folds.")


@dataclasses.dataclass(frozen=True, eq=False)
class FoldPlan:
    """How rows get their folds: ``n_folds``; ``keys`` None (the row-index hash) or a dask
    array (n,) with X's row chunks; ``hashed``: ``keys`` are integer groups hashed to
    folds (True) or the fold ids themselves (False)."""

    n_folds: int
    keys: object = None
    hashed: bool = True


def is_splitter(cv) -> bool:
    """A scikit-learn cross-validation splitter (``split`` and ``get_n_splits``)."""
    return hasattr(cv, "split") and hasattr(cv, "get_n_splits")


def _is_splits(cv) -> bool:
    return not isinstance(cv, (str, bytes, dict)) and not is_splitter(cv) and hasattr(cv, "__iter__")


def check_cv(cv) -> None:
    """``cv`` is None, ``"evidence"``, an int >= 2, a splitter or an iterable of splits
    (the int is checked by :func:`~dkrr.estimators._ridge_params.check_ridge_params`)."""
    if cv is None or isinstance(cv, (str, int, np.integer)) or is_splitter(cv) or _is_splits(cv):
        return
    raise InvalidParameterError(
        f"cv must be None, an int (folds), 'evidence', a scikit-learn splitter (KFold, GroupKFold, ...) "
        f"or an iterable of (train, test) index arrays; got {cv!r} ({type(cv).__name__})")


def uses_given_folds(cv) -> bool:
    """Whether ``cv`` is a splitter or explicit splits (the folds are resolved in fit)."""
    return is_splitter(cv) or _is_splits(cv)


def folds_from_splits(splits, n: int, what: str) -> np.ndarray:
    """The fold id of each of ``n`` rows from ``(train, test)`` pairs (index arrays or
    boolean masks): ``k`` for the rows of the k-th test set. Refused (naming ``what`` and
    the reason) unless there are at least two splits, the test sets are disjoint and cover
    every row, and every training set is exactly the rows outside its test set."""
    fold = np.full(n, -1, dtype=np.int64)
    count = 0
    for k, split in enumerate(splits):
        try:
            train, test = split
        except (TypeError, ValueError):
            raise InvalidParameterError(f"cv={what}: split {k} is {split!r}, not a (train, test) pair") from None
        test, train = _indices(test, n, what, k, "test"), _indices(train, n, what, k, "train")
        if np.unique(test).size != test.size or (fold[test] >= 0).any():
            row = int(test[(fold[test] >= 0) | _repeated(test)][0])
            raise InvalidParameterError(
                f"cv={what}: row {row} is in more than one test set (split {k} and an earlier one); "
                f"{_ONE_PASS}. {_FIX}")
        fold[test] = k
        inside = np.zeros(n, dtype=bool)
        inside[train] = True
        if inside[test].any() or np.unique(train).size != train.size or train.size != n - test.size:
            raise InvalidParameterError(
                f"cv={what}: the training set of split {k} ({train.size} rows) is not the {n - test.size} rows "
                f"outside its test set; {_ONE_PASS}. {_FIX}")
        count = k + 1
    if count < 2:
        raise InvalidParameterError(f"cv={what} gives {count} split(s); cross-validation needs at least 2.")
    missing = np.nonzero(fold < 0)[0]
    if missing.size:
        raise InvalidParameterError(
            f"cv={what}: {missing.size} of {n} rows are in no test set (the first: row {int(missing[0])}); "
            f"{_ONE_PASS}. {_FIX}")
    return fold


def _repeated(a: np.ndarray) -> np.ndarray:
    seen = np.zeros(a.size, dtype=bool)
    _, first = np.unique(a, return_index=True)
    seen[first] = True
    return ~seen


def _indices(idx, n: int, what: str, k: int, name: str) -> np.ndarray:
    a = np.asarray(idx)
    if a.dtype == bool:
        if a.shape != (n,):
            raise InvalidParameterError(f"cv={what}: the {name} mask of split {k} has shape {a.shape}, X {n} rows")
        return np.flatnonzero(a)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise InvalidParameterError(f"cv={what}: the {name} indices of split {k} are {a.dtype}, not integers")
    a = a.astype(np.int64).reshape(-1)
    if a.size and (a.min() < 0 or a.max() >= n):
        raise InvalidParameterError(f"cv={what}: the {name} indices of split {k} leave [0, {n}) (X has {n} rows)")
    return a


def fold_plan(cv, Xd, y, groups) -> FoldPlan | None:
    """The :class:`FoldPlan` of ``cv`` (a splitter or explicit splits) for the row-chunked
    dask ``Xd``; ``y`` the user's targets (used by the splitter when not a dask array) and
    ``groups`` the user's groups (or None). None when ``cv`` is not a splitter or splits."""
    from .._rows import local_array

    n = int(Xd.shape[0])
    what = type(cv).__name__ if is_splitter(cv) else "<explicit splits>"
    if not uses_given_folds(cv):
        if groups is not None:
            raise InvalidParameterError(
                f"groups is given but cv={cv!r} does not use groups: pass a group splitter, e.g. "
                "cv=GroupKFold(n_splits=5), or drop groups.")
        return None
    if groups is not None and (is_dask(groups) or _is_zarr(groups)):
        return _hashed_groups(cv, Xd, groups, what)
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != (n,):
            raise InputValidationError(f"groups has shape {groups.shape} but X has {n} rows; pass one group per row")
    if is_splitter(cv):
        Xs = np.empty((n, 0))  # a splitter reads only the row count of X
        ys = None if y is None or is_dask(y) or _is_zarr(y) else np.asarray(y)
        try:
            splits = list(cv.split(Xs, ys, groups))
        except Exception as exc:  # noqa: BLE001 - the splitter's own error, named
            hint = " (a dask or zarr y is not gathered for the split: pass numpy y, or explicit splits)" if (
                y is not None and ys is None) else ""
            raise InvalidParameterError(f"cv={cv!r}: its split(X, y, groups) failed: {exc}{hint}") from None
    else:
        splits = cv
    fold = folds_from_splits(splits, n, what)
    K = int(fold.max()) + 1
    dtype = np.int8 if K <= 127 else np.int64
    return FoldPlan(K, local_array(fold.astype(dtype), (Xd.chunks[0],)), hashed=False)


def _is_zarr(a) -> bool:
    return type(a).__module__.split(".")[0] == "zarr"


def _hashed_groups(cv, Xd, groups, what: str) -> FoldPlan:
    """``GroupKFold`` with dask (or zarr) groups: integer codes hashed to folds in the
    block tasks, never gathered."""
    import dask.array as da
    from sklearn.model_selection import GroupKFold

    from .._rows import rechunk_rows

    if not isinstance(cv, GroupKFold):
        raise InvalidParameterError(
            f"cv={what} with dask groups: only GroupKFold is computed without gathering the groups "
            "(each group hashed to a fold); pass numpy groups for other splitters.")
    g = groups if is_dask(groups) else da.from_array(groups, chunks=(Xd.chunks[0],))
    if g.ndim != 1 or g.shape[0] != Xd.shape[0]:
        raise InputValidationError(f"groups has shape {g.shape} but X has {Xd.shape[0]} rows; pass one group per row")
    if not np.issubdtype(g.dtype, np.integer):
        raise InputValidationError(
            f"dask groups must be integer codes (got dtype {g.dtype}): factorize them first, e.g. "
            "ddf[col].astype('category').cat.codes, or pass numpy groups")
    K = int(cv.get_n_splits())
    return FoldPlan(K, rechunk_rows(g, {0: Xd.chunks[0]}), hashed=True)
