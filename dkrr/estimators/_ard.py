"""Per-column widths (ARD) from a fitted model's gradients: :func:`ard_gamma`.

ALGORITHMS.md section 5.1. A fitted random-feature model ``f(x) = z(x)^T beta + b`` has
closed-form partial derivatives: for the cos/sin features of W (rows ``w_k``, importance
weights ``omega_k``), ``grad f(x) = sum_k omega_k / sqrt(D) (beta_sin,k cos(w_k^T x) -
beta_cos,k sin(w_k^T x)) w_k``. Their mean squares over the rows of X,

    g_j = mean_i (d f / d x_j (x_i))^2,

are the diagonal of the average gradient outer product (AGOP) that Recursive Feature
Machines (Radhakrishnan et al., Science 2024) use as the kernel's metric: a column the fit
does not use has ``g_j ~ 0``. One streamed pass over X (row blocks, the generic reduction)
gives every ``g_j`` and the column variances ``v_j``; the widths are

    gamma_j = c r_j^(2 power)  (gaussian, matern),   c r_j^power  (laplacian),   r_j = sqrt(g_j),

i.e. the frequency scale of column ``j`` proportional to ``r_j^power``, with ``c`` such that
the mean exponent over pairs of rows is the fitted model's, ``sum_j gamma_j v_j =
sum_j gamma_fit_j v_j`` (laplacian: ``v_j`` replaced by the standard deviations), and
every ``gamma_j`` at least ``1e-6`` of the largest (a zero width is not allowed). The
result is a gamma array to refit with (with ``gammas`` the grid scales it as a whole).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidParameterError

__all__ = ["ard_gamma"]

#: the smallest width relative to the largest (columns without gradient)
_FLOOR = 1e-6


def _gradient_block(X, row_offset, block_index, W, B_cos, B_sin, mean, scale, max_block_bytes):
    """``[n, sum_i g_ij (d), sum_i x_ij (d), sum_i x_ij^2 (d)]`` of one row block (float64)."""
    from .._validation import check_finite_rows

    check_finite_rows(X, "X", block_index, row_offset)
    n, d = X.shape
    out = np.zeros(1 + 3 * d)
    out[0] = n
    step = int(max(1, min(n, max_block_bytes // (8 * 2 * W.shape[0]))))
    for lo in range(0, n, step):
        Xs = np.asarray(X[lo:lo + step], dtype=np.float64)
        if mean is not None:
            Xs = (Xs - mean) / scale
        P = Xs @ W.T
        C, S = np.cos(P), np.sin(P)
        for t in range(B_cos.shape[1]):  # targets (classes): their squared gradients add up
            G = (C * B_sin[:, t] - S * B_cos[:, t]) @ W
            out[1:1 + d] += np.einsum("ij,ij->j", G, G)
        out[1 + d:1 + 2 * d] += Xs.sum(axis=0)
        out[1 + 2 * d:] += np.einsum("ij,ij->j", Xs, Xs)
    return out


def _sum(parts):
    return np.sum(parts, axis=0)


def ard_gamma(estimator, X, *, power: float = 1.0, split_every: int | None = None) -> np.ndarray:
    """ARD widths ``gamma_j`` from the gradients of a fitted model (the module docstring).

    Parameters
    ----------
    estimator : RandomFeatureRidge or RandomFeatureRidgeClassifier
        Fitted with a shift-invariant kernel (``gaussian``, ``matern``, ``laplacian``) and a
        random projection method (not ``nystroem``), e.g. isotropic with ``gamma="median"``
        and ``gammas="auto"``.
    X : array-like, dask array or zarr array of shape (n, d)
        Rows to average the gradients over (the training rows; one streamed pass, blocks
        of the estimator's ``chunk_rows`` for numpy input).
    power : float, default=1.0
        The frequency scale of column ``j`` is proportional to ``r_j^power``: 1 is the
        AGOP's diagonal (RFM); smaller values flatten the widths towards isotropy (0: the
        fitted widths' mean).
    split_every : int, optional
        Fan-in of the reduction tree.

    Returns
    -------
    gamma : ndarray of shape (n_features_in_,)
        Positive widths for the same kernel: refit with ``gamma=gamma`` (and ``gammas``
        to scale them as a whole by the one-pass CV).

    Raises
    ------
    InvalidParameterError
        An unfitted estimator, a kernel or map without a W of cos/sin features, or a
        negative ``power``.
    InputValidationError
        The fitted function has no gradient on X (a constant fit).
    """
    from sklearn.utils.validation import check_is_fitted

    from .._validation import check_input, check_n_features
    from ..errors import InputValidationError
    from ..features._map import RandomFeatureMap
    from ..features._nonlinear import FOURIER_KERNELS
    from ..features._standardize import StandardizedMap
    from ..linalg import as_row_chunked
    from ..linalg._reduce import reduce_row_blocks

    check_is_fitted(estimator, "coef_")
    if isinstance(power, bool) or not isinstance(power, (int, float)) or not np.isfinite(power) or power < 0:
        raise InvalidParameterError(f"power must be a finite number >= 0, got {power!r}")
    fmap = estimator.feature_map_
    inner = fmap.inner if isinstance(fmap, StandardizedMap) else fmap
    if estimator.kernel not in FOURIER_KERNELS or not isinstance(inner, RandomFeatureMap):
        raise InvalidParameterError(
            f"ard_gamma needs a fitted model of a shift-invariant kernel {list(FOURIER_KERNELS)} with random "
            f"cos/sin features, not kernel={estimator.kernel!r} with a {type(inner).__name__}"
        )
    X = check_input(X, name="X")
    check_n_features(X.shape, estimator.n_features_in_, estimator=estimator)
    W = inner.matrix()
    D = W.shape[0]
    coef = np.atleast_2d(estimator.coef_).T  # (2 D, targets)
    omega = np.ones(D) if inner.weights is None else np.asarray(inner.weights, dtype=np.float64)
    B_cos, B_sin = (coef[:D] * omega[:, None], coef[D:] * omega[:, None])
    B_cos, B_sin = B_cos / np.sqrt(D), B_sin / np.sqrt(D)
    mean, scale = (fmap.mean, fmap.scale) if isinstance(fmap, StandardizedMap) else (None, None)
    Xd, _ = as_row_chunked(X, chunk_rows=getattr(estimator, "chunk_rows", None))
    sums = reduce_row_blocks(
        [Xd], _gradient_block, _sum, split_every=split_every, label="ARD gradients",
        constants=(W, B_cos, B_sin, mean, scale, int(getattr(estimator, "max_block_bytes", 64 * 2**20))),
    )
    n, d = sums[0], W.shape[1]
    g = sums[1:1 + d] / n
    var = np.maximum(sums[1 + 2 * d:] / n - (sums[1 + d:1 + 2 * d] / n) ** 2, 0.0)
    if not np.any(g > 0):
        raise InputValidationError("the fitted function has no gradient on X (a constant fit): no column ranks above another")
    laplacian = estimator.kernel == "laplacian"
    gamma = np.sqrt(g) ** (power if laplacian else 2.0 * power)
    gamma = np.maximum(gamma, _FLOOR * gamma.max())
    weight = np.sqrt(var) if laplacian else var
    fitted = np.broadcast_to(np.asarray(estimator.gamma_, dtype=np.float64), (d,))
    if not weight.sum() > 0:
        weight = np.ones(d)
    return gamma * (np.dot(fitted, weight) / np.dot(gamma, weight))
