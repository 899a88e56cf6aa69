"""Data-driven Gaussian bandwidths: the 50-NN rule of thumb and scikit-learn's ``"scale"``.

The implementation behind the public :mod:`dkrr.bandwidth` (which re-exports it); it sits
in the linalg layer so that the estimators' ``gamma="median"`` / ``"scale"`` use it.

The Gaussian kernel is ``exp(-gamma ||x - y||^2)``; ``gamma = 1 / (2 sigma^2)`` for a
length scale ``sigma``. Two rules pick it from the data:

- :func:`knn_gamma` (and :func:`knn_sigma`): the rule of thumb of the ORF paper
  [Yu16]_ (docs/ALGORITHMS.md section 5): sigma is the mean distance to the k-th
  (50th) nearest neighbour over a seeded sample of rows (1,000), neighbours searched
  within the sample. Only the sampled rows are read: on a dask or zarr array, the row
  blocks that hold no sampled row are never loaded.
- :func:`scale_gamma`: scikit-learn's ``SVC(gamma="scale")``, ``1 / (d Var(X))`` with
  the variance over every entry of X (one pass over the data).

Both expect features on comparable scales (standardised columns): a column measured in
larger units dominates every distance.

References
----------
.. [Yu16] F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice, S. Kumar,
   "Orthogonal Random Features", NeurIPS 2016.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from .._validation import check_input, check_random_state, is_dask
from ..errors import InputValidationError, InvalidParameterError, NonFiniteInputError
from ._moments import _pow2_at_least

__all__ = ["knn_gamma", "knn_sigma", "scale_gamma"]

#: Bytes of the distance rows computed at once by :func:`knn_sigma` (a 1,000-row sample
#: fits in one block, 8 MB).
_DISTANCE_BLOCK_BYTES = 64 * 2**20


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _sample_rows(X: Any, n_points: int, random_state: Any, sample_weight: Any = None):
    """``(S, w)``: the sampled rows of X as float64, in the order the generator drew them,
    and their weights (None without ``sample_weight``; with it the rows are drawn among
    those of positive weight, :class:`~dkrr._rows.RowPool`)."""
    from .._rows import row_pool
    from ._stats import _check_weight_block

    X = check_input(X, name="X")
    n = X.shape[0]
    if not isinstance(n, numbers.Integral) or np.isnan(n):
        raise InputValidationError(
            "X has an unknown number of rows (a dask array with unknown chunk sizes); "
            "call `X.compute_chunk_sizes()` first."
        )
    pool = row_pool(n, sample_weight, _check_weight_block)
    idx, w = pool.take(check_random_state(random_state).choice(pool.n, size=min(n_points, pool.n), replace=False))
    if is_dask(X):
        # Read in row order (each row block holding a sampled row is loaded once, the
        # others not at all), then put the rows back in the order they were drawn.
        from .._rows import gather_rows

        order = np.argsort(idx)
        rows = gather_rows(X, idx[order], label="sampling rows for the bandwidth")
        S = np.empty_like(rows)
        S[order] = rows
    else:
        S = X[idx]
    S = np.asarray(S, dtype=np.float64)
    bad = ~np.isfinite(S).all(axis=1)
    if bad.any():
        rows = np.sort(idx[bad])
        raise NonFiniteInputError(
            f"X contains NaN or inf in {len(rows)} of the {len(idx)} rows sampled for the "
            f"bandwidth, first in row {int(rows[0])}; remove or impute them first."
        )
    return S, w


def knn_sigma(X: Any, *, k: int = 50, n_points: int = 1000, random_state: Any = None,
              sample_weight: Any = None) -> float:
    """Mean distance to the k-th nearest neighbour over a seeded sample of rows.

    The rule of thumb of [Yu16]_ (docs/ALGORITHMS.md section 5): draw ``min(n_points,
    n_samples)`` distinct rows, find each one's k-th nearest neighbour among the other
    sampled rows (identical rows count as neighbours at distance 0), and average those
    Euclidean distances.

    Parameters
    ----------
    X : array-like, dask array or zarr array of shape (n_samples, n_features)
        Dask and zarr input is read lazily: only the row blocks holding sampled rows are
        loaded (one ``compute``, on the active dask client if there is one).
    k : int, default=50
        Which nearest neighbour (1 is the nearest other row).
    n_points : int, default=1000
        Rows sampled without replacement (all rows when X has fewer). The distances cost
        ``n_points^2 * n_features`` operations.
    random_state : int, numpy Generator, SeedSequence or None, default=None
        Seed of the row sample: the rows are
        ``numpy.random.default_rng(random_state).choice(n_samples, min(n_points,
        n_samples), replace=False)``, so an integer seed gives the same rows on numpy,
        dask and zarr input.
    sample_weight : array-like or dask array of shape (n_samples,), optional
        Row weights (finite, ``>= 0``). The rows are drawn uniformly among those of
        positive weight (the ranks above count only them, so a row of weight 0 is never
        drawn and X with such rows samples what X without them does), the neighbours are
        searched among the sampled rows as without weights, and sigma is the weighted mean
        of their k-th neighbour distances, weighted by the rows' weights (whose unit does
        not matter). "Sample weights" in docs/ALGORITHMS.md section 5.

    Returns
    -------
    sigma : float
        The mean k-th nearest neighbour distance, in the units of X.

    Raises
    ------
    InvalidParameterError
        ``k < 1``, ``n_points < 2`` or a non-integer.
    InputValidationError
        Fewer than ``k + 1`` rows are sampled (X or ``n_points`` too small for ``k``), or
        every sampled row has ``k`` identical copies (sigma would be 0).
    NonFiniteInputError
        A sampled row holds NaN or inf (numpy input: any row).

    See Also
    --------
    knn_gamma : ``1 / (2 sigma^2)``, the Gaussian kernel's gamma.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrr.bandwidth import knn_sigma
    >>> X = np.random.default_rng(0).standard_normal((2000, 5))
    >>> round(knn_sigma(X, random_state=0), 2)
    1.67
    """
    k = _check_int(k, "k", 1)
    n_points = _check_int(n_points, "n_points", 2)
    S, w = _sample_rows(X, n_points, random_state, sample_weight)
    m = S.shape[0]
    if m < k + 1:
        rows = f"{np.shape(X)[0]} rows" if w is None or m == n_points else f"{m} rows of positive weight"
        raise InputValidationError(
            f"the {k}-th nearest neighbour rule needs at least k + 1 = {k + 1} sampled rows, "
            f"got {m} (X has {rows}, n_points={n_points}); lower k or give more rows."
        )
    # Centring changes no distance and keeps |a|^2 + |b|^2 - 2 a.b accurate when the
    # columns sit far from 0. Dividing by a power of two s >= max |S| (exact) keeps the
    # squared distances from over- or underflowing at any magnitude (rows of 1e200 have
    # squared distances of 1e400): the distances are those of S / s, times s (s is taken
    # before centring too, so that the mean of values near 1e308 does not overflow).
    s = float(_pow2_at_least(np.abs(S).max()))
    S /= s
    S -= S.mean(axis=0)
    s2 = float(_pow2_at_least(np.abs(S).max()))
    S /= s2
    s *= s2
    sq = (S * S).sum(axis=1)
    # A squared distance under the formula's rounding error (a few d * eps * (|a|^2 +
    # |b|^2)) is that of identical rows: 0, so duplicates are neighbours at distance 0.
    tol = 4.0 * S.shape[1] * np.finfo(np.float64).eps
    step = max(1, _DISTANCE_BLOCK_BYTES // (8 * m))
    kth = np.empty(m)
    for lo in range(0, m, step):
        hi = min(m, lo + step)
        norms = sq[lo:hi, None] + sq[None, :]
        D2 = norms - 2.0 * S[lo:hi] @ S.T
        D2[D2 <= tol * norms] = 0.0
        D2[np.arange(hi - lo), np.arange(lo, hi)] = 0.0  # each row itself: column k skips it
        kth[lo:hi] = np.sqrt(np.partition(D2, k, axis=1)[:, k])
    if w is None:
        sigma = float(kth.mean()) * s
    else:  # the weights divided by a power of two near their largest: exact, and no sum overflows
        sigma = float(np.average(kth, weights=w / _pow2_at_least(w.max()))) * s
    if sigma == 0.0:
        raise InputValidationError(
            f"every one of the {m} sampled rows has at least k={k} identical rows in the "
            "sample, so the mean k-th neighbour distance is 0 and gamma would be infinite; "
            "drop duplicate rows, lower k or choose gamma yourself."
        )
    return sigma


def knn_gamma(X: Any, *, k: int = 50, n_points: int = 1000, random_state: Any = None,
              sample_weight: Any = None) -> float:
    """Gaussian ``gamma = 1 / (2 sigma^2)`` with sigma from :func:`knn_sigma`.

    Parameters
    ----------
    X : array-like, dask array or zarr array of shape (n_samples, n_features)
    k : int, default=50
    n_points : int, default=1000
    random_state : int, numpy Generator, SeedSequence or None, default=None
        As in :func:`knn_sigma` (the same arguments give the same rows).
    sample_weight : array-like or dask array of shape (n_samples,), optional
        As in :func:`knn_sigma`: rows of weight 0 are never drawn.

    Returns
    -------
    gamma : float

    Raises
    ------
    InvalidParameterError, InputValidationError, NonFiniteInputError
        As :func:`knn_sigma`; also ``InputValidationError`` when gamma is outside
        float64's normal range (X of magnitude beyond about 1e154 or below 1e-154: the
        squared distances over- or underflow), naming the distance and the fix.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrr.bandwidth import knn_gamma
    >>> X = np.random.default_rng(0).standard_normal((2000, 5))
    >>> round(knn_gamma(X, random_state=0), 4)
    0.1797
    """
    sigma = knn_sigma(X, k=k, n_points=n_points, random_state=random_state, sample_weight=sample_weight)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        gamma = float(1.0 / (2.0 * np.float64(sigma) ** 2))
    if not np.finfo(np.float64).tiny <= gamma < np.inf:
        exponent = -2 * np.log10(sigma) - np.log10(2.0)
        e = int(np.floor(exponent))
        what = "overflow" if sigma > 1 else "underflow"
        raise InputValidationError(
            f"the mean {k}-th nearest neighbour distance of X is {sigma:.3g}, so the squared "
            f"distances of the gaussian kernel {what} float64 and gamma = 1 / (2 sigma^2) = "
            f"{10 ** (exponent - e):.2f}e{e:+d} is outside its range "
            f"({np.finfo(np.float64).tiny:.3g} to {np.finfo(np.float64).max:.3g}); standardize "
            "the columns (standardize=True; dkrr fit does by default) or rescale X."
        )
    return gamma


def scale_gamma(X: Any) -> float:
    """scikit-learn's ``gamma="scale"``: ``1 / (n_features * X.var())``.

    The variance is over every entry of X (not per column), as in ``sklearn.svm.SVC``;
    a constant X gives 1.0, as there. It comes from the streamed column moments
    (:func:`~dkrr.linalg._moments.column_moments`: within-column plus between-column
    variance, computed without over- or underflow at any magnitude), so dask and zarr
    input is read once, blockwise.

    Parameters
    ----------
    X : array-like, dask array or zarr array of shape (n_samples, n_features)

    Returns
    -------
    gamma : float

    Raises
    ------
    NonFiniteInputError
        X holds NaN or inf (the message names the row block and the rows).
    InputValidationError
        The variance of X is outside float64's range (about beyond 1e308 or below
        1e-308: X of magnitude 1e155 or 1e-155), named with its magnitude.

    Examples
    --------
    >>> import numpy as np
    >>> from dkrr.bandwidth import scale_gamma
    >>> scale_gamma(np.array([[0.0, 2.0], [2.0, 0.0]]))
    0.5
    """
    from ._moments import column_moments
    from ._blocks import as_row_chunked

    Xd, _ = as_row_chunked(X)
    var = column_moments(Xd).total_variance()
    return 1.0 / (Xd.shape[1] * var) if var != 0 else 1.0
