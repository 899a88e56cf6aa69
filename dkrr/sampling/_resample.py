"""Resampling candidate frequencies by their scores, with importance weights.

Liu et al. 2020, Algorithm 1 steps 3-4 and eq. 9 (ALGORITHMS.md section 4): draw ``s``
of the ``l`` candidates multinomially with replacement, with probabilities
``pi_i = p_i / sum p``, and weight each kept frequency by ``sqrt(1 / (l pi_i))``. With the
``1 / sqrt(s)`` normalisation of the map this makes the kernel estimate unbiased for the
``l``-candidate estimate::

    E[Z_q Z_q^T] = (1/s) * s * sum_i pi_i * (1 / (l pi_i)) * z_i z_i^T = Z_l Z_l^T,

where ``z_i`` are the unnormalised feature column(s) of candidate ``i``.

Resampling breaks the fast structure of SORF/Fastfood/P-model projections, so the kept
frequencies are stored as a dense ``s x d`` matrix (rows of the candidate ``W``, scale
folded in) in a :class:`~dkrr.features._sampled.SampledFeatureMap` (a map type of the
features layer, listed in its registry; re-exported here).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputValidationError, InvalidParameterError
from ..features._map import RandomFeatureMap
from ..features._rff import DenseProjection
from ..features._sampled import SampledFeatureMap

__all__ = ["SampledFeatureMap", "importance_weights", "resample_feature_map", "sampling_probabilities"]


def sampling_probabilities(scores) -> np.ndarray:
    """``pi_i = p_i / sum p`` with clear errors for negative, non-finite or all-zero scores.

    Raises
    ------
    InputValidationError
        All scores are zero: with surrogate leverage this means ``y`` is constant (after
        centring) or uncorrelated with every candidate feature, so nothing ranks them.
    """
    p = np.asarray(scores, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise InvalidParameterError(f"scores must be a non-empty 1-D array, got shape {p.shape}")
    if not np.isfinite(p).all():
        raise InputValidationError(
            f"{int((~np.isfinite(p)).sum())} candidate score(s) are not finite (NaN or inf); "
            "check y and X for huge or non-finite values."
        )
    if (p < 0).any():
        raise InvalidParameterError(f"scores must be >= 0, got minimum {p.min()!r}")
    total = p.sum()
    if not total > 0:
        raise InputValidationError(
            f"all {p.size} candidate scores are zero, so there is no distribution to sample "
            "frequencies from: the targets are constant (after centring, for regression) or "
            "a single class. Fit without sampling, or check y."
        )
    return p / total


def importance_weights(pi, n_candidates: int) -> np.ndarray:
    """``sqrt(1 / (l pi_i))`` (eq. 9 with ``q = pi`` over the ``l`` candidates)."""
    pi = np.asarray(pi, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.sqrt(1.0 / (n_candidates * pi))


def resample_feature_map(
    candidate_map: RandomFeatureMap,
    scores,
    n_components: int,
    rng: np.random.Generator,
    *,
    weighted: bool = True,
) -> tuple[RandomFeatureMap, np.ndarray]:
    """Draw ``n_components`` (s) of the candidate frequencies and build their feature map.

    Parameters
    ----------
    candidate_map : RandomFeatureMap
        The ``l`` candidates (any projection method; unweighted).
    scores : array of shape (l,)
        Non-negative scores (surrogate or ridge leverage).
    n_components : int
        s, frequencies kept (with replacement; ``s <= l``).
    rng : numpy Generator
    weighted : bool, default=True
        Apply the importance weights. ``False`` gives the biased map (for comparisons and
        the test that the weights are needed).

    Returns
    -------
    fmap : SampledFeatureMap
        A RandomFeatureMap over a dense projection of the kept rows of W, ``weights`` the
        importance weights, normalised by ``1 / sqrt(s)``.
    indices : ndarray (s,) int
        Candidate index of each kept frequency.
    """
    if not isinstance(candidate_map, RandomFeatureMap):
        raise InvalidParameterError(
            f"leverage sampling needs a RandomFeatureMap of candidates, got {type(candidate_map).__name__}"
        )
    if candidate_map.weights is not None:
        raise InvalidParameterError("the candidate map is already weighted; resample from unweighted candidates")
    l = candidate_map.n_components
    s = int(n_components)
    if s < 1 or s > l:
        raise InvalidParameterError(
            f"cannot keep n_components={s} of n_candidates={l} candidate frequencies: need "
            f"1 <= n_components <= n_candidates. Raise n_candidates (e.g. to {4 * max(s, 1)})."
        )
    pi = sampling_probabilities(scores)
    if pi.shape[0] != l:
        raise InvalidParameterError(f"got {pi.shape[0]} scores for {l} candidate frequencies")
    idx = rng.choice(l, size=s, replace=True, p=pi)
    W = candidate_map.matrix()[idx]  # radial factors and ARD column scales folded in
    proj = DenseProjection(candidate_map.n_features_in, s, 1.0, W)
    weights = importance_weights(pi[idx], l) if weighted else None
    return SampledFeatureMap(candidate_map.kernel, proj, weights, nu=candidate_map.nu,
                             source_method=candidate_map.projection.method), idx
