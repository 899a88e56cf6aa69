"""Class labels in the commands: labels are the contract, codes are storage.

A store ingested from labelled data holds integer codes in ``y`` and the labels in its
``classes`` attribute (code ``i`` means ``classes[i]``), so two stores ingested
separately may give the same label different codes. ``dkrr fit --classifier`` on such a
store fits the codes and records the store's labels on the model (``store_classes_``);
its ``classes_`` are codes into them. Here:

* :func:`check_regression_target` refuses a regression (fit or evaluate) on class codes
  before any work;
* :func:`prediction_output` is what ``dkrr predict`` writes for a classifier: the labels
  themselves when they are numbers, else int32 codes with the model's labels in the
  ``classes`` attribute (as in a dataset);
* :func:`class_metrics` is the accuracy of ``dkrr evaluate``: the test store's ``y`` is
  translated to labels (through its own ``classes``) and compared with the model's
  labels, lazily, in the same pass that predicts. Rows whose label the model never saw
  count as wrong (they could only be wrong) and are named in a note.

Labels match as text when both sides are text; a number and a text label match when the
text reads as that number (a LIBSVM store's ``1.0`` is a CSV's ``1``).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import InputValidationError, ModelFormatError

__all__ = ["check_regression_target", "class_metrics", "prediction_output"]


def check_regression_target(est, data) -> None:
    """Refuse a regression (fit or evaluate) on a store whose ``y`` holds class codes (its
    ``classes`` attribute is present): the codes ``0 .. k-1`` would be taken for ordered
    numbers; and a classifier on a store of several targets. Checked before any work."""
    if getattr(est, "_labels_mode", False) and data.y is not None and data.y.ndim == 2 and data.y.shape[1] > 1:
        names = data.target_names or []
        raise InputValidationError(
            f"y in {data.path} holds {data.y.shape[1]} targets ({', '.join(map(repr, names))}); a classifier "
            "takes one column of labels: ingest the label column alone (`dkrr ingest FILE --target COLUMN`), "
            "or fit a regression of the targets (`dkrr fit` without --classifier)")
    classes = data.attrs.get("classes")
    if classes is not None and getattr(est, "_labels_mode", False):
        from ..io._labels import continuous_labels

        names = data.target_names or ["y"]
        why = continuous_labels(classes, repr(names[0]), int(data.y.shape[0]))
        if why:  # a store ingested with --labels before ingest refused such a column
            raise InputValidationError(f"{data.path} was ingested with --labels, but {why} (then ingest it again)")
    if classes is not None and not getattr(est, "_labels_mode", False):
        shown = list(classes)[:10]
        more = ", ..." if len(classes) > 10 else ""
        raise InputValidationError(
            f"y in {data.path} holds class codes (its 'classes' attribute lists "
            f"{len(classes)} labels: {str(shown)[1:-1]}{more}); a regression would take the "
            "codes 0..k-1 for ordered numbers: use a classifier (`dkrr fit --classifier`), or "
            "re-ingest the target as numbers (without --labels) if it is numeric"
        )


def _model_names(est) -> np.ndarray:
    """The label of each of ``est.classes_``: the store's labels for a model that
    ``dkrr fit`` fitted on codes (``store_classes_``), else ``classes_`` themselves."""
    classes = np.asarray(est.classes_)
    store = getattr(est, "store_classes_", None)
    if store is None:
        return classes
    store = np.asarray(store)
    if classes.dtype.kind not in "iu" or classes.size and (classes.min() < 0 or classes.max() >= store.size):
        raise ModelFormatError(
            f"the model's classes_ {classes.tolist()[:10]} are not codes of its store_classes_ "
            f"({store.size} labels); the model file is corrupted: fit it again"
        )
    return store[classes]


def _is_text(names: np.ndarray) -> bool:
    """Whether labels are text (strings, also as objects) rather than numbers or booleans."""
    if names.dtype.kind == "O":
        return all(isinstance(n, str) for n in names.tolist())
    return names.dtype.kind in "US"


def _as_number(label) -> float | None:
    """A label as a number (text that reads as a finite number, or a number), else None."""
    if isinstance(label, (bool, np.bool_)):
        return float(label)
    try:
        value = float(label)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def prediction_output(est, y_pred):
    """What ``dkrr predict`` writes for a classifier: ``(array, classes)``.

    Numeric labels (a model fitted on a store of numbers): the predicted labels, and
    ``classes`` None. Text labels: int32 codes ``y_pred == i`` meaning ``classes[i]``,
    ``classes`` being the model's labels (those of the store it was fitted on, for a
    model from ``dkrr fit``), as ``dkrr ingest`` lays out ``y``.
    """
    classes = np.asarray(est.classes_)
    store = getattr(est, "store_classes_", None)
    if store is not None:
        _model_names(est)  # checks that classes_ are codes of store_classes_
        return y_pred, [str(c) for c in store]  # the codes of the training store
    if not _is_text(classes):
        return y_pred, None
    codes = y_pred.map_blocks(_positions, classes=classes, dtype=np.int32, meta=np.empty((0,), np.int32))
    return codes, [str(c) for c in classes]


def _take(block, table):
    return table[block]


def _positions(block, classes):
    """Positions in the sorted ``classes`` of a block of predicted labels."""
    return np.searchsorted(classes, block).astype(np.int32)


def _codes_of_values(block, numbers, positions, block_info=None):
    """Positions in the model's classes of a block of numeric labels (-1: not a class).
    Float labels must be finite whole numbers (else the error names the rows)."""
    from .._validation import check_class_labels

    info = block_info[0] if block_info else None
    check_class_labels(block, "y", info["chunk-location"][0] if info else None,
                       info["array-location"][0][0] if info else 0)
    values = block.astype(np.float64)
    out = np.full(block.shape, -1, dtype=np.int64)
    if numbers.size:
        at = np.clip(np.searchsorted(numbers, values), 0, numbers.size - 1)
        hit = numbers[at] == values
        out[hit] = positions[at[hit]]
    return out


def class_metrics(est, data, y_pred) -> tuple[dict, str | None]:
    """Accuracy of the predicted labels against the labels of ``data.y``, and a note.

    ``y_pred`` are ``est.predict(data.X)`` (lazy). Returns ``({"accuracy": ...}, note)``,
    the note (or None) naming the labels in the store that the model never saw and how
    many rows hold them (counted as wrong). One compute: the predictions, the test
    labels translated to the model's classes, and the count of each test label.

    Raises
    ------
    InputValidationError
        A model with text labels on a store of numbers none of which reads as one of its
        labels, or a store of labels none of which is one of the model's (before any
        work); float labels that are not finite whole numbers (a regression store:
        "Unknown label type: continuous", naming the rows).
    StoreError
        A code outside the store's ``classes`` (see :mod:`dkrr.io._labels`).
    """
    from .._progress import compute
    from .._validation import check_first_label_block
    from ..io._labels import store_classes

    names = _model_names(est)
    classes = np.asarray(est.classes_)
    pred = y_pred.map_blocks(_positions, classes=classes, dtype=np.int32, meta=np.empty((0,), np.int32))  # 0 .. k-1
    y = data.y[:, 0] if data.y.ndim == 2 else data.y
    text = _is_text(names)
    by_number = {}  # the labels that read as numbers
    for i, name in enumerate(names.tolist()):
        value = _as_number(name)
        if value is not None:
            by_number.setdefault(value, i)
    keys = np.array(sorted(by_number), dtype=np.float64)
    positions = np.array([by_number[k] for k in keys.tolist()], dtype=np.int64)
    test_classes = store_classes(data.attrs, data.path)
    if test_classes is not None:
        if text:
            by_text = {str(n): i for i, n in enumerate(names.tolist())}
            table = [by_text.get(t, -1) for t in test_classes]
        else:
            table = [by_number.get(_as_number(t), -1) for t in test_classes]
        table = np.array(table, dtype=np.int64)
        if table.size and (table < 0).all():  # every row would count as wrong: another task's store
            raise InputValidationError(
                f"none of the labels of y in {data.path} ({list(test_classes)[:10]}) is one of the model's "
                f"classes ({names.tolist()[:10]}): the store holds another task's labels, or the model is "
                "another task's; evaluate on test data of the model's task, ingested with `dkrr ingest --like "
                "TRAIN_STORE` from a file with the same label column as the training data"
            )
        y_model = y.map_blocks(_take, table=table, dtype=np.int64, meta=np.empty((0,), np.int64))
        correct, counts = compute((pred == y_model).sum(), _code_counts(y, len(test_classes)),
                                  label="evaluating")
        unseen = {lab: int(c) for lab, c, t in zip(test_classes, counts, table) if c and t < 0}
    else:
        if text and keys.size == 0:
            raise InputValidationError(
                f"the model predicts the text labels {names.tolist()[:10]}, but y in {data.path} "
                "holds numbers (the store has no 'classes' attribute); ingest the test data with "
                "`dkrr ingest` from a file with the same label column as the training data"
            )
        check_first_label_block(y)  # a regression store: refused before the pass
        y_model = y.map_blocks(_codes_of_values, numbers=keys, positions=positions, dtype=np.int64,
                                 meta=np.empty((0,), np.int64))
        correct, (values, counts) = compute((pred == y_model).sum(), _value_counts(y), label="evaluating")
        found = _codes_of_values(np.asarray(values), keys, positions)
        unseen = {v: int(c) for v, c, f in zip(values.tolist(), counts, found) if f < 0}
    n = int(y.shape[0])
    metrics = {"accuracy": float(correct) / n if n else float("nan")}
    note = None
    if unseen:
        shown = list(unseen)[:10]
        note = (f"{sum(unseen.values())} of {n} row(s) hold label(s) the model never saw, counted "
                f"as wrong: {shown}{' ...' if len(unseen) > 10 else ''} (the model's classes: "
                f"{names.tolist()[:20]})")
    return metrics, note


# The counts of the test labels are row-block reductions (dkrr's engine) rather than
# da.bincount / da.unique, which dask's array query planning does not implement.

def _code_counts(y, n_codes: int):
    """Lazy count of each code ``0 .. n_codes - 1`` in the 1-D dask array ``y``."""
    from ..linalg._reduce import reduce_row_blocks

    return reduce_row_blocks([y], _block_code_counts, _sum_parts, constants=(n_codes,), compute=False,
                             label="evaluating")


def _block_code_counts(block, row_offset, block_index, n_codes):
    return np.bincount(np.asarray(block, dtype=np.int64), minlength=n_codes)


def _value_counts(y):
    """Lazy ``(values, counts)`` of the distinct values of the 1-D dask array ``y`` (sorted,
    as ``np.unique(..., return_counts=True)``)."""
    from ..linalg._reduce import reduce_row_blocks

    return reduce_row_blocks([y], _block_value_counts, _merge_value_counts, compute=False, label="evaluating")


def _block_value_counts(block, row_offset, block_index):
    return np.unique(np.asarray(block), return_counts=True)


def _sum_parts(parts):
    return sum(parts[1:], parts[0].copy())


def _merge_value_counts(parts):
    values = np.concatenate([v for v, _ in parts])
    counts = np.concatenate([c for _, c in parts])
    merged, inverse = np.unique(values, return_inverse=True)
    return merged, np.bincount(inverse.ravel(), weights=counts, minlength=merged.size).astype(np.int64)
