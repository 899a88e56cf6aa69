"""What a fit computed, and the one place where an estimator's fitted state is set.

Every solve path of the ridge estimators (the Gram path, its leverage-sampled variant and
the matrix-free ``solver="pcg"``) computes without touching the estimator and returns a
:class:`RidgeFit`; the estimator sets its attributes from it in
:meth:`~dkrr.estimators._ridge._RandomFeatureRidgeBase._set_fitted`, through
:func:`replace_fitted_state`, after the whole fit succeeded. A fit that fails (invalid
input found in a pass, a singular system, a worker's error, a ``KeyboardInterrupt``)
leaves the estimator as it was: unfitted, or with its previous model intact.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..features._map import FeatureMap

__all__ = ["PlusMinusTargets", "RidgeFit", "is_fitted_name", "replace_fitted_state"]


@dataclasses.dataclass(frozen=True, eq=False)
class RidgeFit:
    """The outcome of one ridge fit, before any attribute of the estimator is set.

    Attributes
    ----------
    feature_map : FeatureMap
        The fitted map (with ``standardize``, wrapped in its ``StandardizedMap``).
    beta : ndarray (p, t)
        Coefficients, one column per target (or per +-1 class column).
    intercept : ndarray (t,)
        With the target's shift added back (0 without ``fit_intercept``).
    alpha, gamma : float
        The penalty and the gaussian width of the final fit (chosen by CV with ``cv``).
    fold_seed : int
    solver : {"cholesky", "eigh", "pcg"}
    solver_reason : str or None
        Why (:func:`~dkrr.estimators._solver.choose_solver`), set by the estimator once the
        path returned.
    precision : {"float64", "float32", "mixed"}
        ``"mixed"``: float32 statistics, coefficients refined to the float64 solution
        (``precision="auto"``, :mod:`dkrr.estimators._mixed`).
    precision_error : float
        ``nan`` for ``solver="pcg"``.
    refinement : dict or None
        With ``precision="mixed"`` only: the refinement's record (passes, residuals,
        converged, tol; :func:`~dkrr.estimators._mixed.refinement_record`).
    mean, scale : ndarray (d,) or None
        The column moments of ``standardize``.
    cv_results, best_score : dict, float or None
        With ``cv`` only.
    solver_info : dict or None
        ``solver="pcg"`` only.
    classes : ndarray or None
        The classifier's labels (what its +-1 targets were built from).
    posterior : dict or None
        The regressor's Bayesian reading at ``alpha`` (:func:`dkrr.linalg._evidence.bayes_posterior`:
        factor, mean, inv_weight, noise_variance, log_marginal_likelihood); None for the
        classifier and ``solver="pcg"``.
    """

    feature_map: FeatureMap
    beta: np.ndarray
    intercept: np.ndarray
    alpha: float
    gamma: float
    fold_seed: int
    solver: str
    precision: str
    precision_error: float
    mean: np.ndarray | None = None
    scale: np.ndarray | None = None
    cv_results: dict | None = None
    best_score: float | None = None
    solver_info: dict | None = None
    classes: np.ndarray | None = None
    posterior: dict | None = None
    solver_reason: str | None = None
    refinement: dict | None = None


class PlusMinusTargets:
    """The classifier's ``targets_fn``: labels-mode statistics to those of the +-1 targets.

    A fresh object per fit; it remembers the classes of the first statistics it converts
    (a pass over all rows) and aligns every later one (fold statistics) to them, so the
    fit reports its classes in its :class:`RidgeFit` instead of setting them on the
    estimator in the middle of a pass.
    """

    def __init__(self):
        self.classes: np.ndarray | None = None

    def __call__(self, stats):
        if self.classes is None:
            self.classes = stats.classes()
        return stats.plus_minus_targets(self.classes)


def is_fitted_name(name: str) -> bool:
    """scikit-learn's rule for a fitted attribute (``check_is_fitted``): a name ending in
    ``_`` that does not start with ``__``."""
    return name.endswith("_") and not name.startswith("__")


def replace_fitted_state(est, attributes: dict) -> None:
    """Make ``attributes`` the fitted state of ``est`` in one step.

    The fitted attributes of an earlier fit that the new one does not set (``cv_results_``
    of a cross-validated fit before a plain one, ``solver_info_`` of a PCG fit before a
    Gram one, ``store_classes_`` set by ``dkrr fit``) are dropped; parameters and private
    attributes are kept. The instance dictionary is swapped by one assignment, so an
    interruption leaves either the old state or the new one, never a mixture.
    """
    kept = {k: v for k, v in vars(est).items() if not is_fitted_name(k)}
    est.__dict__ = {**kept, **attributes}
