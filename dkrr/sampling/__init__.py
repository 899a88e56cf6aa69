"""Data-dependent random features: surrogate leverage (Liu et al. 2020) and ridge
leverage sampling of candidate frequencies, as streamed reductions (ALGORITHMS.md
section 4)."""

from ._fit import (
    SAMPLINGS,
    SampledFeatureMaps,
    SampledRidgeFit,
    check_sampling,
    cross_validate_fold_maps,
    fit_sampled_feature_map,
    fit_sampled_ridge_statistics,
    sampled_ridge_statistics,
)
from ._resample import (
    SampledFeatureMap,
    importance_weights,
    resample_feature_map,
    sampling_probabilities,
)
from ._ridge_leverage import ridge_leverage_scores
from ._scores import (
    frequency_totals,
    streamed_score_statistics,
    surrogate_scores,
    target_products,
)

__all__ = [
    "SAMPLINGS",
    "SampledFeatureMap",
    "SampledFeatureMaps",
    "SampledRidgeFit",
    "check_sampling",
    "cross_validate_fold_maps",
    "fit_sampled_feature_map",
    "fit_sampled_ridge_statistics",
    "frequency_totals",
    "importance_weights",
    "resample_feature_map",
    "ridge_leverage_scores",
    "sampled_ridge_statistics",
    "sampling_probabilities",
    "streamed_score_statistics",
    "surrogate_scores",
    "target_products",
]
