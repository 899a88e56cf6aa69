"""Ridge leverage scores of candidate frequencies: the leverage-RFF baseline.

Li et al. (the "leverage-RFF" that Liu et al. 2020 compare against) sample frequencies
from ``q*(w) ∝ z_w^T (K + n lambda I)^-1 z_w`` with ``K ≈ Z Z^T`` approximated by the
candidates. With the Gram ``G = Z^T Z`` of the candidates (p x p, accumulated in one
streamed pass) and ``alpha = n lambda`` (scikit-learn's penalty), Woodbury gives, for
every feature column ``z_i`` of ``Z``::

    z_i^T (Z Z^T + alpha I)^-1 z_i = [G (G + alpha I)^-1]_ii
                                   = sum_j V_ij^2 lam_j / (lam_j + alpha)

(``G = V diag(lam) V^T``): the per-column ridge leverage, computed in O(p^3) from G, never
forming an n x n matrix. This is the formula of docs/ALGORITHMS.md section 4 and of the
authors' reference code (``diag(Z^T Z (Z^T Z + n lambda I)^-1)``). G is uncentred, the
penalty is the estimator's ``alpha`` (not one chosen by cross-validation), and one set of
candidates scored on all rows serves every fold.
Per frequency the cos and sin columns' values are summed (gaussian kernel).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidParameterError
from ._scores import frequency_totals

__all__ = ["ridge_leverage_scores"]


def ridge_leverage_scores(G, alpha: float, kernel: str, n_components: int) -> np.ndarray:
    """Ridge leverage score of each candidate frequency from the candidates' Gram.

    Parameters
    ----------
    G : ndarray of shape (p, p)
        ``Z^T Z`` of the candidate features (uncentred).
    alpha : float
        ``n lambda`` (> 0), the ridge penalty in scikit-learn's convention.
    kernel : str
        Kernel of the candidate map (``gaussian``: cos + sin columns per frequency).
    n_components : int
        l, the number of candidate frequencies.

    Returns
    -------
    ndarray of shape (n_components,), float64, >= 0.
    """
    G = np.asarray(G, dtype=np.float64)
    if G.ndim != 2 or G.shape[0] != G.shape[1]:
        raise InvalidParameterError(f"G must be a square matrix, got shape {G.shape}")
    alpha = float(alpha)
    if not np.isfinite(alpha) or alpha <= 0:
        raise InvalidParameterError(
            f"ridge leverage scores need a positive penalty alpha = n * lambda, got {alpha!r}"
        )
    lam, V = np.linalg.eigh(0.5 * (G + G.T))
    lam = np.maximum(lam, 0.0)
    col = (V * V) @ (lam / (lam + alpha))
    return frequency_totals(col, kernel, n_components)
