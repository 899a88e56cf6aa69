"""The ``solver="pcg"`` branch of the ridge estimators' fit (ALGORITHMS.md section 3.9).

Kept apart from :mod:`dkrr.estimators._ridge` so that the estimator shows one small
branch: parameter checks, the memory check, keeping X in memory across the passes, the
map, and the matrix-free solve (:func:`dkrr.linalg._pcg.pcg_ridge`) or the fold-masked
cross-validation (:func:`dkrr.linalg._pcg_cv.pcg_cross_validate`).
"""

from __future__ import annotations

import numbers

from ..errors import InvalidParameterError

__all__ = ["check_pcg_params", "fit_pcg", "keep_in_memory"]


def check_pcg_params(est):
    """``(rank, tol, max_iter, persist)`` of an estimator, validated (rank None -> the default)."""
    from ..linalg._pcg import DEFAULT_PCG_RANK

    rank, tol, max_iter, persist = est.pcg_rank, est.tol, est.max_iter, est.pcg_persist
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
    if not (persist is True or persist is False or persist == "auto"):
        raise InvalidParameterError(
            f"pcg_persist must be 'auto' (keep X in memory across the CG passes when it fits), True or False "
            f"(read X from its source at every pass), got {persist!r}"
        )
    return DEFAULT_PCG_RANK if rank is None else int(rank), float(tol), int(max_iter), persist


def keep_in_memory(persist, Xd, yd, estimate, wd=None, *, limits=None):
    """``(X, y, w, kept)``: the row blocks (and the sample weights ``wd``, or None)
    persisted (on the Client's workers, or in this process with the threaded scheduler)
    when ``persist`` is True, or ``"auto"`` and :func:`~dkrr.linalg._pcg.data_fits_in_memory`;
    else the arrays unchanged, read from their source at every pass."""
    import dask

    from ..linalg._pcg import data_fits_in_memory

    if persist is False:
        return Xd, yd, wd, False
    if persist == "auto":
        # dask arrays with query planning have no nbytes
        nbytes = sum(int(a.size) * a.dtype.itemsize for a in (Xd, yd, wd) if a is not None)
        block = max(Xd.chunks[0]) * nbytes // max(1, Xd.shape[0])
        if estimate is None or not data_fits_in_memory(nbytes, block, estimate, limits=limits):
            return Xd, yd, wd, False
    if wd is None:
        Xd, yd = dask.persist(Xd, yd)
    else:
        Xd, yd, wd = dask.persist(Xd, yd, wd)
    return Xd, yd, wd, True


def fit_pcg(est, Xd, yd, wd, n_folds, gammas, alpha, alphas, targets_fn=None):
    """Fit ``est``'s model with the matrix-free PCG solver: a
    :class:`~dkrr.estimators._fitted.RidgeFit` (``solver_info`` and, with ``cv``,
    ``cv_results`` and ``best_score``); the estimator is not changed. ``targets_fn`` as
    :func:`~dkrr.estimators._passes.fit_statistics_path`'s."""
    import numpy as np

    from ..features._standardize import StandardizedMap
    from ..linalg._cv import DEFAULT_ALPHA_EXPONENTS, score_grid, warn_grid_edge
    from ..linalg._pcg import pcg_ridge, sketch_seed
    from ..linalg._pcg_cv import pcg_cross_validate, warn_cv_not_converged
    from ._fitted import RidgeFit
    from ._random_features import draw_ridge_map, standardized_input
    from ._solver import pcg_memory_check, pcg_unavailable

    rank, tol, max_iter, persist = check_pcg_params(est)
    reason = pcg_unavailable(est, alpha, n_folds, gammas, alphas)
    if reason is not None:
        raise InvalidParameterError(reason + ".")
    n_alphas = len(DEFAULT_ALPHA_EXPONENTS) if alphas is None else len(alphas)
    estimate = pcg_memory_check(est, Xd, yd, n_folds, n_alphas, rank)  # before the map is drawn or any task runs
    Xd, yd, wd, kept = keep_in_memory(persist, Xd, yd, estimate, wd)
    Xd, mean, scale, moments = standardized_input(est, Xd, wd)  # a pass only when asked
    fmap, gamma, fold_seed, _ = draw_ridge_map(est, Xd, moments, scale, sample_weight=wd)
    common = dict(fit_intercept=bool(est.fit_intercept), rank=rank, tol=tol, max_iter=max_iter,
                  seed=sketch_seed(fold_seed), max_block_bytes=int(est.max_block_bytes), split_every=est.split_every,
                  labels_mode=est._labels_mode, targets_fn=targets_fn, sample_weight=wd)
    cv_results = best_score = None
    if n_folds > 1:
        res = pcg_cross_validate(Xd, yd, fmap, alphas=alphas, n_folds=n_folds, fold_seed=fold_seed, **common)
        _, idx, cv_results, best_score = score_grid(res.alphas, None, res.fold_mse, res.fold_sizes, res.fold_weights)
        alpha = float(res.alphas[idx])
        warn_cv_not_converged(res, idx, max_iter)
        warn_grid_edge("alpha", res.alphas, alpha)
        beta, intercept, info = res.betas[idx], res.intercepts[idx], res.info
    else:
        res = pcg_ridge(Xd, yd, fmap, alpha=alpha, **common)
        beta, intercept, info = res.beta, res.intercept, res.info
    return RidgeFit(
        feature_map=fmap if mean is None else StandardizedMap(fmap, mean, scale),  # as the Gram path
        beta=beta, intercept=np.atleast_1d(intercept), alpha=alpha, gamma=gamma, fold_seed=fold_seed,
        solver="pcg", precision="float64", precision_error=float("nan"), mean=mean, scale=scale,
        cv_results=cv_results, best_score=best_score, solver_info={**info, "persisted": bool(kept)},
        classes=getattr(targets_fn, "classes", None),
    )
