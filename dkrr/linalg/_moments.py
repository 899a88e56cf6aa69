"""Per-column mean and variance of X in one streamed pass: :func:`column_moments`.

What ``standardize=True`` and ``gamma="scale"`` need (docs/ALGORITHMS.md section 5). The
moments are kept in a *scaled representation* so that no step overflows or underflows
at any magnitude float64 holds (columns of 1e155 have variances of 1e310, columns of
1e-300 squared deviations of 1e-600): each column carries a power of two ``s``, at
least its largest ``|x|`` (up to ``2^1023``), and its mean and centred sum of squares are those of
``x / s``. Each row block gives its count, ``s`` (from the block's largest ``|x|``),
the column means and centred sums of squares ``M2`` of ``x / s`` (float64, two-pass
within the block) and the columns' minimum and maximum; partial results are brought to
the larger ``s`` of the two (exact: a power of two) and merged by Chan, Golub and
LeVeque's pairwise formula, which never subtracts large nearly equal sums::

    n = n_a + n_b,  delta = mean_b - mean_a
    mean = mean_a + delta n_b / n,   M2 = M2_a + M2_b + delta^2 n_a n_b / n

Scaling by a power of two is exact, so wherever the plain arithmetic neither overflows
nor underflows the results are bitwise those of the unscaled formulas. The standard
deviation is ``s sqrt(M2 / n)``, never formed from the (possibly unrepresentable)
variance.

With sample weights ``w`` (scikit-learn's ``StandardScaler().fit(X, sample_weight=w)``)
the means are weighted means and ``M2 = sum w (x / s - mean)^2``; ``n`` in the merge is the
weight total ``W``, the rows of weight 0 are left out of every part (of ``s``, the minimum
and maximum too), so integer weights give the moments of repeated rows and weight 0 those
of a dropped row. A block's weights are divided by a power of two ``u`` at least its
largest (exact), its ``W`` and ``M2`` kept in units of ``u``, and two parts brought to the
larger unit before the merge, as the columns to the larger ``s``: no weight sum over- or
underflows, and the moments do not depend on the weights' unit.

The pass is the generic row-block reduction (:func:`~dkrr.linalg.reduce_row_blocks`), so
its keys are tokens of X's name and the functions, and X's blocks are read once.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import check_finite_rows
from ..errors import InputValidationError
from ._reduce import reduce_row_blocks
from ._stats import _check_weight_block
from ._weighted import ZERO_WEIGHT_MESSAGE

__all__ = ["ColumnMoments", "column_moments"]

_EPS = np.finfo(np.float64).eps


def _pow2_at_least(a: np.ndarray) -> np.ndarray:
    """The smallest power of two ``>= a`` (elementwise, ``a >= 0``; 1.0 where ``a`` is 0),
    at most ``2^1023`` (the largest float64 power of two: above it ``|x| / 2^1023 < 2``)."""
    mant, exp = np.frexp(a)  # a = mant 2^exp, 0.5 <= mant < 1
    return np.where(a > 0, np.ldexp(1.0, np.minimum(exp, 1023)), 1.0)


@dataclasses.dataclass(eq=False)
class ColumnMoments:
    """Column moments of X in the scaled representation (all float64, shape (d,)).

    ``n`` rows (with sample weights: the rows of positive weight); ``shift`` the power of
    two per column by which ``x`` is divided (``|x| <= shift``, or ``< 2 shift`` for values
    above ``2^1023``); ``mean_s`` and ``m2_s`` the mean and centred sum of squares of
    ``x / shift``; ``lo`` and ``hi`` the columns' smallest and largest values. With
    sample weights the mean is weighted, ``m2_s`` is ``sum w (x / shift - mean_s)^2``,
    and ``wsum`` the weight total, both in units of the power of two ``wunit`` (``wsum``
    None without weights).
    """

    n: int
    shift: np.ndarray
    mean_s: np.ndarray
    m2_s: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    wsum: float | None = None
    wunit: float = 1.0

    @property
    def count(self):
        """What the means and variances divide by: the rows ``n``, or the weight total
        (in the units of ``m2_s``)."""
        return self.n if self.wsum is None else self.wsum

    @property
    def mean(self) -> np.ndarray:
        """Column means (representable: ``|mean| <= max |x|``); exactly the value of a
        column whose values are all equal (a rounded mean would leave ``x - mean`` at
        ``eps |x|``, not 0, after standardisation with scale 1)."""
        return np.where(self.lo == self.hi, self.lo, self.mean_s * self.shift)

    @property
    def m2(self) -> np.ndarray:
        """Centred sums of squares; ``inf`` or 0 where they leave float64's range."""
        with np.errstate(over="ignore", under="ignore"):
            return self.m2_s * self.shift * self.shift

    @property
    def var(self) -> np.ndarray:
        """Population variances (``ddof=0``); ``inf`` or 0 where they leave float64's range
        (use :meth:`std`, which does not)."""
        with np.errstate(over="ignore", under="ignore"):
            return self.m2_s / self.count * self.shift * self.shift

    def std(self) -> np.ndarray:
        """Population standard deviations, ``shift sqrt(M2_s / n)`` (never above max ``|x|``)."""
        return self.shift * np.sqrt(self.m2_s / self.count)

    def constant(self) -> np.ndarray:
        """Columns whose variance is within float rounding of 0: scikit-learn's
        ``StandardScaler`` rule, ``var <= n eps var + (n eps mean)^2``, evaluated on
        ``x / shift`` (the same rule, without under- or overflow): a variance of 1e-600
        among values of 1e-300 is not 0. ``n`` counts rows (of positive weight), also with
        weights: the rounding of a sum grows with its terms, not with their weights
        (scikit-learn puts the weight total there, so its rule depends on the weights' unit)."""
        var = self.m2_s / self.count
        return var <= self.n * _EPS * var + (self.n * _EPS * self.mean_s) ** 2

    def scale(self) -> np.ndarray:
        """Column standard deviations, ``1.0`` for constant columns (as ``StandardScaler``).

        Raises
        ------
        InputValidationError
            ``x - mean`` overflows float64 in a column (values near the float64 maximum
            on both sides of their mean): the message names the column and its range.
        """
        mean = self.mean
        with np.errstate(over="ignore"):
            bad = ~(np.isfinite(self.hi - mean) & np.isfinite(mean - self.lo))
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise InputValidationError(
                f"column {j} of X spans {self.lo[j]:.6g} to {self.hi[j]:.6g}: x - mean overflows "
                f"float64 (largest {np.finfo(np.float64).max:.4g}), so it cannot be standardized "
                f"({int(bad.sum())} column(s) like this); divide the column by a power of ten "
                "(e.g. 1e10) before fitting"
            )
        return np.where(self.constant(), 1.0, self.std())

    def total_variance(self, scale: np.ndarray | None = None) -> float:
        """Variance over every entry of X (or of ``(X - mean) / scale`` when ``scale`` is
        given): within-column plus between-column parts, computed on ``x / g`` with ``g``
        the largest ``shift`` and then multiplied by ``g^2``.

        Raises
        ------
        InputValidationError
            The variance of the unstandardised X is non-zero but outside float64's range
            (its magnitude is named; ``standardize=True`` is the fix).
        """
        if scale is not None:
            var = self.var
            with np.errstate(over="ignore", under="ignore"):
                # (std / scale)^2 where var itself leaves float64's normal range
                r = self.shift / scale * np.sqrt(self.m2_s / self.count)
                plain = np.isfinite(var) & ((var >= np.finfo(np.float64).tiny) | (self.m2_s == 0))
                return float(np.where(plain, var / np.where(plain, scale, 1.0) ** 2, r * r).mean())
        g = float(self.shift.max())
        r = self.shift / g
        means = self.mean_s * r
        t = float((self.m2_s / self.count * r * r).mean() + ((means - means.mean()) ** 2).mean())
        with np.errstate(over="ignore", under="ignore"):
            total = t * g * g
        if t > 0 and (not np.isfinite(total) or total < np.finfo(np.float64).tiny):
            exp10 = np.log10(t) + 2 * np.log10(g)
            e = int(np.floor(exp10))
            raise InputValidationError(
                f"the variance of X is about {10 ** (exp10 - e):.2f}e{e:+d}, outside float64's range "
                f"({np.finfo(np.float64).tiny:.3g} to {np.finfo(np.float64).max:.3g}), so "
                "gamma='scale' cannot be computed from it; pass standardize=True (gamma='scale' "
                "then uses the standardized columns) or rescale X"
            )
        return total


def _moments_block(X: np.ndarray, row_offset: int, block_index: int) -> ColumnMoments:
    check_finite_rows(X, "X", block_index, row_offset)
    return _block_moments(X, None)


def _weighted_moments_block(X: np.ndarray, w: np.ndarray, row_offset: int, block_index: int) -> ColumnMoments:
    """The block's moments with its sample weights (checked here, as in every pass),
    from its rows of positive weight only."""
    check_finite_rows(X, "X", block_index, row_offset)
    w = _check_weight_block(w, block_index, row_offset)
    keep = w > 0
    return _block_moments(X[keep], w[keep])


def _block_moments(X: np.ndarray, w: np.ndarray | None) -> ColumnMoments:
    """Moments of the (finite) rows of X, weighted by ``w`` (positive) when given."""
    n, d = X.shape
    if n == 0:
        z = np.zeros(d)
        return ColumnMoments(0, np.ones(d), z, z.copy(), np.full(d, np.inf), np.full(d, -np.inf),
                             None if w is None else 0.0)
    lo = X.min(axis=0).astype(np.float64)
    hi = X.max(axis=0).astype(np.float64)
    shift = _pow2_at_least(np.maximum(hi, -lo))
    Xs = np.divide(X, shift, dtype=np.float64)  # exact: shift is a power of two
    if w is None:
        mean_s = Xs.mean(axis=0)
        Xs -= mean_s
        return ColumnMoments(n, shift, mean_s, np.einsum("ij,ij->j", Xs, Xs), lo, hi)
    unit = float(_pow2_at_least(w.max()))
    wu = w / unit  # exact: a power of two; in (0, 2)
    wsum = float(wu.sum())
    mean_s = (wu @ Xs) / wsum
    Xs -= mean_s
    return ColumnMoments(n, shift, mean_s, np.einsum("i,ij,ij->j", wu, Xs, Xs), lo, hi, wsum, unit)


def combine_moments(parts: list) -> ColumnMoments:
    """Chan et al.'s merge of partial moments at the larger ``shift`` of each pair (and
    with weights at the larger ``wunit``); pure (returns a new object)."""
    acc = None
    for p in parts:
        if p.n == 0:
            continue
        if acc is None:
            acc = dataclasses.replace(p, shift=p.shift.copy(), mean_s=p.mean_s.copy(), m2_s=p.m2_s.copy(),
                                      lo=p.lo.copy(), hi=p.hi.copy())
            continue
        ca, cb, m2_b = acc.count, p.count, p.m2_s
        if acc.wsum is not None:  # weight totals and M2 in the larger unit (exact ratios of powers of two)
            unit = max(acc.wunit, p.wunit)
            ua, ub = acc.wunit / unit, p.wunit / unit
            ca, cb, m2_b = ca * ua, cb * ub, m2_b * ub
            acc.m2_s, acc.wunit = acc.m2_s * ua, unit
        total = ca + cb
        shift = np.maximum(acc.shift, p.shift)
        # ratios of powers of two: exact, or 0 where the smaller side is below rounding
        ra, rb = acc.shift / shift, p.shift / shift
        mean_a, mean_b = acc.mean_s * ra, p.mean_s * rb
        delta = mean_b - mean_a
        acc.mean_s = mean_a + delta * (cb / total)
        acc.m2_s = acc.m2_s * ra * ra + (m2_b * rb * rb + delta**2 * (ca * cb / total))
        acc.shift, acc.n = shift, acc.n + p.n
        if acc.wsum is not None:
            acc.wsum = total
        acc.lo, acc.hi = np.minimum(acc.lo, p.lo), np.maximum(acc.hi, p.hi)
    if acc is None:
        return parts[0]
    return acc


def column_moments(Xd, *, split_every: int | None = None, sample_weight=None) -> ColumnMoments:
    """Column moments of a row-chunked dask array in one pass.

    Parameters
    ----------
    Xd : dask array of shape (n, d)
        Row-chunked, one column block (:func:`~dkrr.linalg.as_row_chunked`).
    split_every : int, optional
        Fan-in of the combine tree.
    sample_weight : dask array of shape (n,), optional
        Row weights with Xd's row chunks (:func:`~dkrr.linalg._weighted.check_sample_weight`),
        streamed with X and checked block by block: weighted moments (the module's
        docstring).

    Returns
    -------
    ColumnMoments

    Raises
    ------
    NonFiniteInputError
        A block holds NaN or inf (the message names the block and the global rows).
    InputValidationError
        Negative weights (named by block and row), or every weight 0.
    """
    if sample_weight is None:
        return reduce_row_blocks(
            [Xd], _moments_block, combine_moments, split_every=split_every, label="column moments"
        )
    moments = reduce_row_blocks([Xd, sample_weight], _weighted_moments_block, combine_moments,
                                split_every=split_every, label="column moments")
    if moments.n == 0:
        raise InputValidationError(ZERO_WEIGHT_MESSAGE)
    return moments
