"""The statistics pass(es) of the ridge estimators and the choice of alpha (and gamma) by
the one-pass cross-validation: the Gram path of :meth:`_RandomFeatureRidgeBase._fit_streamed`."""

from __future__ import annotations

import warnings

import numpy as np

from ..features._nonlinear import output_width
from ..linalg import cross_validate_statistics, streamed_statistics
from ..errors import PrecisionWarning
from ..linalg._cv import default_alphas, score_grid, warn_grid_edge
from ..linalg._precision import AUTO_PRECISION_TOL, precision_error
from ..linalg._weighted import check_weight_total, streamed_statistics_maps

__all__ = ["statistics_and_alpha", "statistics_in_precision"]


def statistics_in_precision(self, pass_args):
    """:func:`statistics_and_alpha` in the estimator's ``precision``: ``(stats, fmap,
    alpha, precision_, precision_error_)``.

    ``"float32"`` warns (:class:`~dkrr.errors.PrecisionWarning`) when the estimate
    :func:`~dkrr.linalg._precision.precision_error` at the chosen alpha exceeds
    :data:`~dkrr.linalg._precision.AUTO_PRECISION_TOL`; ``"auto"`` then repeats the pass
    in float64 instead, and the warnings of the discarded float32 pass are dropped (they
    are re-issued when float32 is kept).
    """
    if self.precision != "auto":
        stats, fmap, alpha = statistics_and_alpha(self, *pass_args, self.precision)
        error = precision_error(stats, alpha, self.precision)
        if self.precision == "float32" and error > AUTO_PRECISION_TOL:
            warnings.warn(PrecisionWarning(
                f"precision='float32': the statistics' rounding may change the coefficients by up to "
                f"{error:.1e} (relative; the estimate eps32 (||G||_F / alpha + 20) at alpha={alpha:.3g}, an upper "
                f"estimate), above {AUTO_PRECISION_TOL:g}. precision='auto' would repeat the pass in float64; "
                "precision_error_ holds the estimate."), stacklevel=4)
        return stats, fmap, alpha, self.precision, error
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stats, fmap, alpha = statistics_and_alpha(self, *pass_args, "float32")
    error = precision_error(stats, alpha, "float32")
    if error <= AUTO_PRECISION_TOL:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return stats, fmap, alpha, "float32", error
    warnings.warn(PrecisionWarning(
        f"precision='auto': the float32 statistics' rounding may change the coefficients by "
        f"up to {error:.1e} (relative; eps32 (||G||_F / alpha + 20) at alpha={alpha:.3g}), above "
        f"{AUTO_PRECISION_TOL:g}: the pass is repeated in float64. Pass precision='float64' "
        "to skip the float32 pass, or a larger alpha."), stacklevel=4)
    stats, fmap, alpha = statistics_and_alpha(self, *pass_args, "float64")
    return stats, fmap, alpha, "float64", precision_error(stats, alpha, "float64")


def statistics_and_alpha(self, Xd, yd, wd, fmap, rng, n, K, alpha, alphas, gammas, fold_seed, precision):
    """The statistics pass(es) of estimator ``self`` in ``precision`` and, with ``cv``, the
    grid's scores: ``(stats, fmap, alpha)`` of the fit (sets ``cv_results_``,
    ``best_score_`` and, with ``gammas``, ``gamma_``)."""
    if self.sampling is not None:  # two passes: candidate scores, then statistics
        from ..sampling import fit_sampled_ridge_statistics

        if K > 1 and alphas is None:  # the Gram is not known yet: s = n / p (section 3.6)
            alphas = default_alphas(None, bool(self.fit_intercept), scale=n / output_width(self.kernel, self.n_components))
        fit = fit_sampled_ridge_statistics(
            Xd, yd, candidate_map=fmap, sampling=self.sampling,
            n_components=self.n_components, rng=rng, n_folds=K, fold_seed=fold_seed,
            labels_mode=self._labels_mode, ridge_alpha=alpha, alphas=alphas,
            fit_intercept=bool(self.fit_intercept), targets_fn=self._targets_from_statistics,
            max_block_bytes=int(self.max_block_bytes), split_every=self.split_every,
        )
        fmap = fit.maps.feature_map
        stats, fold_mse, fold_sizes = fit.stats, fit.fold_mse, fit.fold_sizes
    elif gammas is None and wd is None:
        stats = streamed_statistics(
            Xd, yd, fmap, n_folds=K, fold_seed=fold_seed,
            max_block_bytes=int(self.max_block_bytes), split_every=self.split_every,
            labels_mode=self._labels_mode, precision=precision,
        )
        stats = self._targets_from_statistics(stats)
        if K > 1:
            alphas = default_alphas(stats, self.fit_intercept) if alphas is None else alphas
            fold_mse = cross_validate_statistics(stats, alphas, bool(self.fit_intercept))
            fold_sizes = stats.n.copy()
    else:  # one pass for every gamma of the grid, weighted or not
        maps = [fmap] if gammas is None else [fmap.with_gamma(g) for g in gammas]
        every = streamed_statistics_maps(
            Xd, yd, maps, sample_weight=wd, n_folds=K, fold_seed=fold_seed,
            max_block_bytes=int(self.max_block_bytes), split_every=self.split_every,
            labels_mode=self._labels_mode, precision=precision,
        )
        every = [self._targets_from_statistics(s) for s in every]
        check_weight_total(every[0])
        stats = every[0]
        if K > 1:
            # the default alpha grid follows the Gram of the grid's middle width (the rule's
            # own with gammas="auto"), so that it scores every model the single gamma would
            middle = every[int(np.argsort(gammas)[len(gammas) // 2])] if gammas is not None else stats
            alphas = default_alphas(middle, self.fit_intercept) if alphas is None else alphas
            fold_mse = np.stack([cross_validate_statistics(s, alphas, bool(self.fit_intercept)) for s in every])
            fold_sizes = stats.n.copy()
            fold_mse = fold_mse if gammas is not None else fold_mse[0]
    if K > 1:
        fold_weights = fold_sizes if wd is None else stats.weights()
        gidx, idx, self.cv_results_, self.best_score_ = score_grid(
            alphas, gammas, fold_mse, fold_sizes, fold_weights)
        alpha = float(alphas[idx])
        warn_grid_edge("alpha", alphas, alpha)
        if gammas is not None:  # the chosen gamma's map and statistics
            stats, fmap, self.gamma_ = every[gidx], maps[gidx], float(gammas[gidx])
            warn_grid_edge("gamma", gammas, self.gamma_)
    return stats, fmap, alpha
