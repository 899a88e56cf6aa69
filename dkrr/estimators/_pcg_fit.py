"""The ``solver="pcg"`` branch of the ridge estimators' fit (ALGORITHMS.md section 3.9).

Kept apart from :mod:`dkrr.estimators._ridge` so that the estimator shows one small
branch: parameter checks, the memory check, the map and the matrix-free solve
(:func:`dkrr.linalg._pcg.pcg_ridge`).
"""

from __future__ import annotations

import numbers

from ..features._registry import resolve_method
from ..features._rom import is_complex_rom
from ..errors import InvalidParameterError

__all__ = ["check_pcg_params", "fit_pcg"]


def check_pcg_params(est):
    """``(rank, tol, max_iter)`` of an estimator, validated (rank None -> the default)."""
    from ..linalg._pcg import DEFAULT_PCG_RANK

    rank, tol, max_iter = est.pcg_rank, est.tol, est.max_iter
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, numbers.Integral) or rank < 0):
        raise InvalidParameterError(
            f"pcg_rank must be an integer >= 0 or None (default {DEFAULT_PCG_RANK}, capped by the number "
            f"of features; 0 is CG without preconditioner), got {rank!r}"
        )
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not 0 < float(tol) < 1:
        raise InvalidParameterError(
            f"tol must be a real number in (0, 1), the relative residual at which CG stops (e.g. 1e-6), got {tol!r}"
        )
    if isinstance(max_iter, bool) or not isinstance(max_iter, numbers.Integral) or max_iter < 1:
        raise InvalidParameterError(f"max_iter must be a positive integer (CG iterations), got {max_iter!r}")
    return DEFAULT_PCG_RANK if rank is None else int(rank), float(tol), int(max_iter)


def _refuse_combinations(est, alpha, n_folds, gammas, sample_weight):
    if n_folds > 1 or gammas is not None:
        raise InvalidParameterError(
            f"solver='pcg' does not cross-validate yet (cv={est.cv!r}): choose alpha (and gamma) with "
            "cv on a row sub-sample using solver='auto' (the Gram path), then fit all rows with "
            "solver='pcg' and that alpha."
        )
    if est.sampling is not None:
        raise InvalidParameterError(
            f"solver='pcg' cannot be combined with sampling={est.sampling!r}; drop sampling or use "
            "solver='auto'."
        )
    if sample_weight is not None:
        raise InvalidParameterError(
            "solver='pcg' does not support sample_weight yet; use solver='auto' (the Gram path) for a "
            "weighted fit."
        )
    if alpha <= 0:
        raise InvalidParameterError(
            f"solver='pcg' needs alpha > 0, got alpha={alpha!r}: CG on the unregularised (possibly "
            "singular) Z^T Z does not converge reliably; use a positive alpha, or solver='cholesky' "
            "for least squares."
        )


def fit_pcg(est, Xd, yd, wd, n_folds, gammas, alpha):
    """Fit ``est`` with the matrix-free PCG solver; sets the fitted map attributes and
    ``solver_info_``. Returns ``(beta (p, t), intercept (t,))``."""
    from ..features._standardize import StandardizedMap
    from ..linalg._memory import check_fit_memory
    from ..linalg._pcg import pcg_ridge, sketch_seed
    from ._random_features import draw_ridge_map, standardized_input

    rank, tol, max_iter = check_pcg_params(est)
    _refuse_combinations(est, alpha, n_folds, gammas, wd)
    check_fit_memory(  # before the map is drawn or any task runs
        Xd, yd, kernel=est.kernel, method=resolve_method(est.method, Xd.shape[1]), n_components=est.n_components,
        split_every=est.split_every, max_block_bytes=est.max_block_bytes,
        displacement_rank=est.displacement_rank, solver="pcg", pcg_rank=rank,
        is_complex=is_complex_rom(est.method, est.rom_diagonal),
    )
    Xd, mean, scale, moments = standardized_input(est, Xd)  # a pass only when asked
    fmap, est.gamma_, fold_seed, _ = draw_ridge_map(est, Xd, moments, scale)
    res = pcg_ridge(
        Xd, yd, fmap, alpha=alpha, fit_intercept=bool(est.fit_intercept), rank=rank, tol=tol,
        max_iter=max_iter, seed=sketch_seed(fold_seed), max_block_bytes=int(est.max_block_bytes),
        split_every=est.split_every, labels_mode=est._labels_mode, targets_fn=est._targets_from_statistics,
    )
    est.feature_map_ = fmap if mean is None else StandardizedMap(fmap, mean, scale)  # as the Gram path
    est.mean_, est.scale_ = mean, scale
    est.n_features_in_ = fmap.n_features_in
    est.n_output_features_ = fmap.n_output_features
    est.fold_seed_ = fold_seed
    est.alpha_ = alpha
    est.solver_info_ = res.info
    return res.beta, res.intercept
