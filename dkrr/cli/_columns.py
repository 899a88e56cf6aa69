"""Feature columns in the commands: a model scores the columns it was fitted on, by name.

A store records its feature columns' names (``feature_names``: a CSV header's, a Parquet
file's; ``column_{j}`` where the source had none). ``dkrr fit`` on a store with real names
records them on the model as scikit-learn's ``feature_names_in_``; ``dkrr predict`` and
``dkrr evaluate`` compare them with the store's before any work, so a test file whose
columns come in another order, or are other columns of the same count, is refused with
the fix (``dkrr ingest --like TRAIN_STORE`` or ``--features``) instead of being scored by
position with no word
(an r2 of -1.1 where the model's is 0.99). Here:

* :func:`record_store_columns` sets the names on a model ``dkrr fit`` fitted (with the
  store's labels, ``store_classes_``, :mod:`dkrr.cli._labels`);
* :func:`store_columns_checked` is the check, and the context in which the command
  predicts: the names having been compared here, scikit-learn's warning that the store's
  arrays carry none (:class:`~dkrr.errors.FeatureNamesWarning`) is not repeated. A store
  without real names scored by a model with names gets a note: its columns are taken by
  position.

Targets likewise: ``dkrr fit`` records a regression store's target names
(``store_target_names_``), ``dkrr evaluate`` refuses a store holding them in another order
(each would be scored against another target's predictions) and notes other names, and
``dkrr predict`` writes them as the ``target_names`` of its predictions.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import sys
import warnings

import numpy as np

from ..errors import FeatureMismatchError, FeatureNamesWarning

__all__ = ["record_store_columns", "store_columns_checked", "store_feature_names"]

_GENERATED = re.compile(r"(column|feature)_\d+")  # ingest's for a CSV or .npy, for LIBSVM
#: target names that say nothing: ingest's for a CSV without header or .npy (``column_j``),
#: LIBSVM's ``label``, write_dataset's default ``target`` / ``target_j``
_GENERATED_TARGET = re.compile(r"(column|target)_\d+|target|label")


def _own_names(names, n: int, generated: re.Pattern, source_named: bool = False) -> list[str] | None:
    """``names`` as strings, or None where they are not ``n`` names or all are ``generated``
    (unless `source_named`: a header's or a Parquet file's names, whatever they look like)."""
    if not names or len(names) != n or (not source_named and all(
            isinstance(t, str) and generated.fullmatch(t) for t in names)):
        return None
    return [str(t) for t in names]


def _source_named(data) -> bool:
    """Whether ingest took the store's column names from its source: a CSV header or
    Parquet. A header of ``feature_0,feature_1,...`` (as many exports write) names columns
    whose order a test file may change; the same names made up by ingest do not."""
    attrs = getattr(data, "attrs", None) or {}
    return attrs.get("format") == "parquet" or (attrs.get("format") == "csv" and attrs.get("header") is True)


def store_feature_names(data) -> list[str] | None:
    """The store's feature column names, or None where it has none of its own: no
    ``feature_names`` attribute, or only the ``column_{j}`` that ingest gives a source
    without names (a CSV without header, a .npy file) or LIBSVM's ``feature_{j}``, which
    number the columns and say nothing about what they hold (such names in a CSV header or
    a Parquet file are the source's own: :func:`_source_named`)."""
    return _own_names(data.feature_names, data.n_features, _GENERATED, _source_named(data))


def store_target_names(data) -> list[str] | None:
    """The store's target column names, or None where they say nothing (:data:`_GENERATED_TARGET`)."""
    n = 0 if data.y is None else 1 if data.y.ndim == 1 else int(data.y.shape[1])
    return _own_names(data.target_names, n, _GENERATED_TARGET, _source_named(data))


def record_store_columns(est, data) -> None:
    """After ``dkrr fit``: the store's labels (``store_classes_``, a classifier on an
    ingested labelled store), its feature names (``feature_names_in_``) and, for a
    regressor, its target names (``store_target_names_``) on the model."""
    if "classes" in data.attrs and hasattr(est, "classes_"):
        est.store_classes_ = np.asarray(data.attrs["classes"])
    targets = store_target_names(data)
    if targets is not None and not hasattr(est, "classes_"):
        est.store_target_names_ = np.asarray(targets, dtype=object)
    names = store_feature_names(data)
    if names is not None and getattr(est, "feature_names_in_", None) is None:
        est.feature_names_in_ = np.asarray(names, dtype=object)


def _mismatch(fitted: list[str], names: list[str]) -> str:
    from ..io._ingest._columns import names_hint  # (dkrr.io loads dask and zarr: not at import)

    missing = [n for n in fitted if n not in set(names)]
    unseen = [n for n in names if n not in set(fitted)]
    if not missing and not unseen and len(fitted) == len(names):
        return f"the same columns in another order ({_first_moved('column', fitted, names)})"
    parts = []
    if missing:
        parts.append(f"the model's column {names_hint(missing)} is missing" if len(missing) == 1 else
                     f"the model's columns {names_hint(missing)} are missing")
    if unseen:
        parts.append(f"column {names_hint(unseen)} is not the model's" if len(unseen) == 1 else
                     f"columns {names_hint(unseen)} are not the model's")
    return "; ".join(parts) or "a column appears more than once"


def _first_moved(what: str, fitted: list[str], names: list[str]) -> str:
    """Where the same names in another order first differ: "column 0 is 'b' where the model's is 'a'"."""
    j = next(j for j, (a, b) in enumerate(zip(fitted, names)) if a != b)
    return f"{what} {j} is {names[j]!r} where the model's is {fitted[j]!r}"


def _columns_option(flag: str, fitted: list[str], what: str) -> str:
    """``--features a,b,...`` (``flag``) quoted for a shell; where a name holds a comma (which
    the option splits on) or a character a terminal would act on, the option is only named."""
    if any("," in n or not n.isprintable() for n in fitted):
        return f"`{flag}` with the model's {what} in order (by 0-based index where a name holds a comma)"
    return f"`{flag} {shlex.quote(','.join(fitted))}`"


@contextlib.contextmanager
def store_columns_checked(est, data, command: str, model: str):
    """Refuse `data` (a store) whose feature names are not those `est` was fitted with, in
    that order, or whose width is not the model's, before any work; then predict in the ``with`` block without scikit-learn's
    name warning (the names were compared here). A store without names of its own, scored
    by a model with names, gets a note on stderr (its columns are taken by position)."""
    from ..io._ingest._columns import names_hint

    fitted = getattr(est, "feature_names_in_", None)
    names = store_feature_names(data)
    if fitted is not None and names is not None:
        fitted = [str(n) for n in fitted]
        if fitted != names:
            raise FeatureMismatchError(
                f"X in {data.path} does not hold the columns model {model} was fitted on: "
                f"{_mismatch(fitted, names)}. The model takes {len(fitted)} columns, in this "
                f"order: {names_hint(fitted)}. Ingest the file again with those columns: "
                "`dkrr ingest FILE --out STORE --like TRAIN_STORE` (the training store's columns, found by "
                "name in the file's header; add --no-target for a file without the target column), or "
                f"{_columns_option('--features', fitted, 'columns')} with --target or --no-target")
    elif getattr(est, "n_features_in_", None) is not None and int(est.n_features_in_) != int(data.n_features):
        # before the note (which would say the columns are taken by position) and the cluster
        width = int(est.n_features_in_)
        raise FeatureMismatchError(
            f"X in {data.path} has {int(data.n_features)} columns, but model {model} was fitted on {width}"
            + (f": {names_hint([str(n) for n in fitted])}" if fitted is not None else "")
            + ". Pass a store with the model's columns, in the same order (`dkrr ingest FILE --out STORE --like "
            "TRAIN_STORE` takes the training store's columns)")
    elif fitted is not None:
        print(f"dkrr {command}: note: X in {data.path} has no column names of its own; the "
              f"model was fitted on columns {names_hint(fitted)}, which are taken to be its "
              f"{len(fitted)} columns in that order", file=sys.stderr, flush=True)
    if command == "evaluate":
        _check_targets(est, data, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FeatureNamesWarning)
        yield


def _check_targets(est, data, model: str) -> None:
    """``dkrr evaluate``: the store's targets against those the model was fitted on, by
    name where both have names. The same names in another order is an error (each would
    be scored against another target's predictions); other names get a note (they are
    scored by position: a renamed column may be the same quantity)."""
    from ..io._ingest._columns import names_hint

    fitted = getattr(est, "store_target_names_", None)
    names = store_target_names(data)
    if fitted is None or names is None or len(fitted) != len(names):
        return  # (another count of targets: evaluate's own error follows)
    fitted = [str(t) for t in fitted]
    if fitted == names:
        return
    if sorted(fitted) == sorted(names):
        raise FeatureMismatchError(
            f"y in {data.path} holds the targets model {model} was fitted on in another order "
            f"({_first_moved('target', fitted, names)}). The model predicts {names_hint(fitted)}, in this "
            "order. Ingest the file again with the training store's targets: `dkrr ingest FILE --out STORE "
            f"--like TRAIN_STORE`, or {_columns_option('--target', fitted, 'targets')}")
    print(f"dkrr evaluate: note: y in {data.path} holds {names_hint(names)} where model {model} was "
          f"fitted on {names_hint(fitted)}; they are scored by position", file=sys.stderr, flush=True)
