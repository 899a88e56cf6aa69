"""Per-column mean and variance of X in one streamed pass: :func:`column_moments`.

What ``standardize=True`` and ``gamma="scale"`` need (docs/ALGORITHMS.md section 5). Each
row block gives its count, column means and centred sums of squares ``M2`` (float64,
two-pass within the block); partial results are merged by Chan, Golub and LeVeque's
pairwise formula, which never subtracts large nearly equal sums::

    n = n_a + n_b,  delta = mean_b - mean_a
    mean = mean_a + delta n_b / n,   M2 = M2_a + M2_b + delta^2 n_a n_b / n

The pass is the generic row-block reduction (:func:`~dkrr.linalg.reduce_row_blocks`), so
its keys are tokens of X's name and the functions, and X's blocks are read once.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import check_finite_rows
from ._reduce import reduce_row_blocks

__all__ = ["ColumnMoments", "column_moments"]


@dataclasses.dataclass(eq=False)
class ColumnMoments:
    """Row count ``n``, column means and centred sums of squares ``m2`` (float64, (d,))."""

    n: int
    mean: np.ndarray
    m2: np.ndarray

    @property
    def var(self) -> np.ndarray:
        """Population variances (``ddof=0``) of the columns."""
        return self.m2 / self.n

    def constant(self) -> np.ndarray:
        """Columns whose variance is within float rounding of 0: scikit-learn's
        ``StandardScaler`` rule, ``var <= n eps var + (n eps mean)^2``."""
        eps = np.finfo(np.float64).eps
        var = self.var
        return var <= self.n * eps * var + (self.n * eps * self.mean) ** 2

    def scale(self) -> np.ndarray:
        """Column standard deviations, ``1.0`` for constant columns (as ``StandardScaler``)."""
        return np.where(self.constant(), 1.0, np.sqrt(self.var))

    def total_variance(self, scale: np.ndarray | None = None) -> float:
        """Variance over every entry of X (or of ``(X - mean) / scale`` when ``scale`` is
        given): within-column plus between-column parts."""
        if scale is None:
            var, means = self.var, self.mean
        else:
            var, means = self.var / scale**2, np.zeros_like(self.mean)
        return float(var.mean() + ((means - means.mean()) ** 2).mean())


def _moments_block(X: np.ndarray, row_offset: int, block_index: int) -> ColumnMoments:
    check_finite_rows(X, "X", block_index, row_offset)
    n = X.shape[0]
    if n == 0:
        return ColumnMoments(0, np.zeros(X.shape[1]), np.zeros(X.shape[1]))
    mean = X.mean(axis=0, dtype=np.float64)
    dev = X - mean
    return ColumnMoments(n, mean, np.einsum("ij,ij->j", dev, dev))


def combine_moments(parts: list) -> ColumnMoments:
    """Chan et al.'s merge of partial moments; pure (returns a new object)."""
    n, mean, m2 = parts[0].n, parts[0].mean.copy(), parts[0].m2.copy()
    for p in parts[1:]:
        total = n + p.n
        if p.n == 0:
            continue
        delta = p.mean - mean
        mean += delta * (p.n / total)
        m2 += p.m2 + delta**2 * (n * p.n / total)
        n = total
    return ColumnMoments(n, mean, m2)


def column_moments(Xd, *, split_every: int | None = None) -> ColumnMoments:
    """Column moments of a row-chunked dask array in one pass.

    Parameters
    ----------
    Xd : dask array of shape (n, d)
        Row-chunked, one column block (:func:`~dkrr.linalg.as_row_chunked`).
    split_every : int, optional
        Fan-in of the combine tree.

    Returns
    -------
    ColumnMoments

    Raises
    ------
    NonFiniteInputError
        A block holds NaN or inf (the message names the block and the global rows).
    """
    return reduce_row_blocks(
        [Xd], _moments_block, combine_moments, split_every=split_every, label="column moments"
    )
