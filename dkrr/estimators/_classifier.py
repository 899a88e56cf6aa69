"""Classification by kernel ridge regression on +-1 targets: :class:`RandomFeatureRidgeClassifier`."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .._system import check_active_workers
from .._validation import _is_zarr, check_class_labels, check_first_label_block, is_dask
from ..errors import InputValidationError
from ._fitted import PlusMinusTargets
from ._inputs import frame_inputs, score_target
from ._ridge import _materialize, _RandomFeatureRidgeBase

__all__ = ["RandomFeatureRidgeClassifier"]


def _labels_block(scores, classes):
    if scores.ndim == 1:
        return classes[(scores > 0).astype(np.intp)]
    return classes[np.argmax(scores, axis=1)]


def _check_label_kind(y):
    """Refuse continuous or non-finite labels before the pass, for every input kind.

    numpy: every value (and ravel (n, 1) with a warning, as scikit-learn). dask and zarr:
    the first row block, read before the pass (the pass checks every block again, in its
    tasks). The rule is :func:`~dkrr._validation.check_class_labels`: float labels must be
    finite whole numbers; the error names the rows.
    """
    if y is None or not hasattr(y, "__len__") and not hasattr(y, "__array__"):
        return y
    if is_dask(y) or _is_zarr(y):
        check_first_label_block(y)
        return y
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        import warnings

        from sklearn.exceptions import DataConversionWarning

        warnings.warn("A column-vector y was passed when a 1d array was expected; it is raveled.",
                      DataConversionWarning, stacklevel=3)
        y = y[:, 0]
    if y.ndim == 1 or y.dtype == object:
        check_class_labels(y, "y")
    return y


class RandomFeatureRidgeClassifier(ClassifierMixin, _RandomFeatureRidgeBase):
    """Classifier using kernel ridge regression on random features, fitted in one pass.

    Labels are encoded as in scikit-learn's ``RidgeClassifier``: with two classes a
    single target, ``+1`` for ``classes_[1]`` and ``-1`` for ``classes_[0]``; with more,
    one ``+-1`` column per class (one-vs-rest). The targets are fitted by
    :class:`RandomFeatureRidge`'s streamed ridge regression; ``predict`` takes the sign
    (binary) or the argmax (multiclass) of the decision function.

    The classes are found in the same single pass over the data: each block task
    accumulates ``Z^T 1[y = label]`` and the count of every label it sees, and after the
    reduction the +-1 statistics are ``Z^T y_j = 2 Z^T 1[y = class_j] - Z^T 1``. Cross-
    validation (``cv``) scores alphas by the mean squared error of the +-1 targets
    (as ``RidgeClassifierCV`` does by default), not by accuracy.

    Parameters
    ----------
    Same as :class:`RandomFeatureRidge`.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Sorted labels.
    coef_ : ndarray of shape (p,) or (n_classes, p)
    intercept_ : ndarray of shape (1,) or (n_classes,)
        ``0.0`` when ``fit_intercept=False`` (as scikit-learn).
    alpha_, gamma_, mean_, scale_, feature_map_, n_features_in_, n_output_features_, cv_results_, best_score_, precision_, precision_error_, refinement_, solver_, solver_reason_, solver_info_
        As in :class:`RandomFeatureRidge` (with ``solver="pcg"`` one CG column per class).

    Examples
    --------
    >>> import numpy as np
    >>> from dkrr import RandomFeatureRidgeClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 2)); y = np.where(X[:, 0] * X[:, 1] > 0, "a", "b")
    >>> clf = RandomFeatureRidgeClassifier(method="rff", n_components=64, gamma=0.5,
    ...                                    alpha=0.1, random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), clf.score(X, y) > 0.9
    (['a', 'b'], True)
    """

    _labels_mode = True

    def fit(self, X, y, sample_weight=None, groups=None):
        """Fit from numpy, dask or zarr ``X`` (n, d) and 1-D labels ``y`` in one pass.

        Parameters
        ----------
        X : array-like, dask array, zarr array or DataFrame of shape (n, d)
            DataFrames as in :meth:`RandomFeatureRidge.fit` (``feature_names_in_``).
        y : array-like, dask array, zarr array or Series of shape (n,)
        sample_weight : float or array-like, dask array or zarr array of shape (n,), default=None
            Row weights on the ``+-1`` targets (as ``RidgeClassifier``): see
            :meth:`RandomFeatureRidge.fit`.
        groups : array-like or dask array of shape (n,), default=None
            Group labels for a group splitter ``cv``: see :meth:`RandomFeatureRidge.fit`.

        Raises
        ------
        InputValidationError
            Shapes, X/y length mismatch, fewer than two classes, too few rows for the folds;
            a continuous target ("Unknown label type: continuous": float labels that are
            not whole numbers, checked on all of numpy ``y``, on the first block of dask or
            zarr ``y`` before the pass and on every block in it; the message names the rows).
        NonFiniteInputError
            NaN or inf in X or in float labels (naming the rows, for every input kind).
        InvalidParameterError
            Invalid parameters, e.g. ``alpha < 0`` (checked before the pass).
        SingularSystemError
            The regularised system is singular (``alpha = 0`` with singular ``Z^T Z``).
        MemoryBudgetError
            The fit cannot be held in memory, or the active Client's workers have a memory
            limit below what a worker needs to run dkrr's tasks at all (about 375 MiB;
            checked before the first task).
        """
        check_active_workers()  # workers that cannot run a task at all: refused before the first
        X, y, sample_weight, groups, names = frame_inputs(X, y, sample_weight, groups, labels=True)
        y = _check_label_kind(y)
        self._set_fitted(self._fit_streamed(X, y, sample_weight, groups), 1, names)
        return self

    def _targets_fn(self):
        return PlusMinusTargets()  # the classes are found in the pass; the fit reports them

    def _coef_and_intercept(self, fit, y_ndim):
        beta = fit.beta
        # as RidgeClassifier: (p,) for two classes, (n_classes, p) otherwise
        coef = beta[:, 0].copy() if beta.shape[1] == 1 else np.ascontiguousarray(beta.T)
        return coef, (np.asarray(fit.intercept, dtype=np.float64) if self.fit_intercept else 0.0)

    def decision_function(self, X):
        """Scores: (n,) for two classes (positive means ``classes_[1]``), else (n, n_classes)."""
        check_is_fitted(self, "coef_")
        return self._decision(X, squeeze=self.coef_.ndim == 1)

    def predict(self, X):
        """Predicted labels: numpy, or a lazy dask array for dask/zarr X."""
        scores = self.decision_function(X)
        if not is_dask(scores):
            return _labels_block(scores, self.classes_)
        from dask.base import tokenize

        drop = {"drop_axis": 1} if scores.ndim == 2 else {}
        # scores.name already identifies the model and the input; the classes complete it
        name = f"dkrr-labels-{tokenize(_labels_block, scores.name, self.classes_)}"
        return scores.map_blocks(
            _labels_block, self.classes_, dtype=self.classes_.dtype, chunks=(scores.chunks[0],),
            meta=np.empty((0,), dtype=self.classes_.dtype), name=name, **drop,
        )

    def score(self, X, y, sample_weight=None):
        """Accuracy (the weighted fraction of rows predicted right), as scikit-learn's.

        A label never seen in fit can only be predicted wrong: such rows count as wrong
        (as in scikit-learn, so a learning curve or a search over small training sets
        scores them) and a :class:`~dkrr.errors.DkrrWarning` names those labels.
        """
        check_is_fitted(self, "coef_")
        y = score_target(y, self, labels=True)  # 1-D (or one column), of a label dtype, as in fit
        pred = _materialize(self.predict(X))
        if pred.shape[0] != y.shape[0]:
            raise InputValidationError(f"X has {pred.shape[0]} rows but y has {y.shape[0]}")
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            import warnings

            from ..errors import DkrrWarning

            bad = list(dict.fromkeys(y[unknown].tolist()))  # first-seen order: None and str do not sort
            warnings.warn(
                f"{int(unknown.sum())} row(s) of y hold labels not seen during fit: {bad[:10]}"
                f"{' ...' if len(bad) > 10 else ''} (known classes: {self.classes_.tolist()}); "
                "their rows count as predicted wrong", DkrrWarning, stacklevel=2)
        from sklearn.utils import check_consistent_length  # as the regressor's r2_score checks the weights

        if sample_weight is not None:
            sample_weight = np.asarray(_materialize(sample_weight), dtype=np.float64)
            check_consistent_length(y, pred, sample_weight)
            if sample_weight.ndim != 1:
                raise InputValidationError(f"sample_weight must be 1-D, got shape {sample_weight.shape}")
        # not accuracy_score: it refuses labels of object dtype holding numbers ("unknown")
        return float(np.average(pred == y, weights=sample_weight))
