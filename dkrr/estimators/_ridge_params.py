"""The parameter checks of the ridge estimators (one function: what ``fit`` and a model
file's loader validate before anything runs)."""

from __future__ import annotations

from .._params import check_bool, check_choice, check_int
from ..errors import InvalidParameterError
from ..linalg import check_alphas
from ._folds import check_cv, uses_given_folds
from ._pcg_fit import check_pcg_params
from ._random_features import check_gamma_param, kernel_params_of

__all__ = ["SOLVERS", "PRECISIONS", "check_ridge_params", "uses_evidence"]

SOLVERS = ("auto", "cholesky", "eigh", "pcg")
PRECISIONS = ("float64", "float32", "auto")


def uses_evidence(est) -> bool:
    """Whether ``cv="evidence"``: the grid is scored by the log marginal likelihood."""
    return isinstance(est.cv, str) and est.cv == "evidence"


def check_ridge_params(est):
    """Check the parameters of ``est``: ``(alpha, K, alphas)`` with ``K`` the folds of the
    pass (1 without CV and for ``cv="evidence"``, 0 for a splitter or explicit splits, whose
    folds :func:`~dkrr.estimators._folds.fold_plan` resolves in fit) and ``alphas`` the grid
    (None: the default)."""
    from ..linalg._solve import check_alpha

    alpha = check_alpha(est.alpha)
    if est.cv is None:
        if est.alphas is not None:
            raise InvalidParameterError(
                f"alphas={est.alphas!r} is given but cv is None: a grid of alphas is "
                "scored by K-fold cross-validation, so pass cv (e.g. cv=5), or drop "
                "alphas and set alpha for a single fit."
            )
        K, alphas = 1, None
    elif uses_evidence(est):
        # one pass without folds; the grid is scored by the log evidence (ALGORITHMS 3.11)
        if est.solver == "pcg" or est.sampling is not None:
            what = "solver='pcg'" if est.solver == "pcg" else f"sampling={est.sampling!r}"
            raise InvalidParameterError(
                f"cv='evidence' is not available with {what}: the evidence needs the "
                "p x p Gram and its tridiagonal reduction (use cv=K, or solver='cholesky' without sampling)."
            )
        if est._labels_mode:
            raise InvalidParameterError(
                "cv='evidence' is a regression criterion (a Gaussian likelihood of y); a "
                "classifier chooses alpha by cv=K."
            )
        K = 1
        alphas = None if est.alphas is None else check_alphas(est.alphas)
    elif uses_given_folds(est.cv):
        # a splitter or explicit splits: their folds (and K) are resolved in fit (_folds.fold_plan)
        if est.solver == "pcg" or est.sampling is not None:
            what = "solver='pcg'" if est.solver == "pcg" else f"sampling={est.sampling!r}"
            raise InvalidParameterError(
                f"cv as a splitter or explicit splits is not available with {what}: its passes assign "
                "folds by the row-index hash; use cv=K (an int), or the Gram path (solver='cholesky').")
        K = 0
        alphas = None if est.alphas is None else check_alphas(est.alphas)
    else:
        check_cv(est.cv)
        K = check_int(est.cv, "cv", minimum=2, allow_none=True)
        alphas = None if est.alphas is None else check_alphas(est.alphas)  # None: default grid
    check_gamma_param(est.gamma, est.kernel)
    kernel_params_of(est)
    check_bool(est.standardize, "standardize")
    check_choice(est.solver, "solver", SOLVERS)
    check_choice(est.precision, "precision", PRECISIONS)
    check_pcg_params(est)
    if est.precision == "float32" and (est.solver == "pcg" or est.sampling is not None):
        what = "solver='pcg'" if est.solver == "pcg" else f"sampling={est.sampling!r}"
        raise InvalidParameterError(
            f"precision='float32' is not available with {what} (its passes compute in float64); use "
            "precision='float64' or 'auto' (the default, float64 there)."
        )
    check_bool(est.fit_intercept, "fit_intercept")
    check_int(est.max_block_bytes, "max_block_bytes")
    return alpha, K, alphas
