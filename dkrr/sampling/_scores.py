"""Column scores of candidate random features, as one streamed reduction.

Liu et al. 2020, Algorithm 1 and eq. 15 (ALGORITHMS.md section 4): for ``l`` candidate
frequencies with features ``Z_l = phi_l(X)`` the surrogate leverage score of frequency
``i`` is ::

    p_i = sum over targets t of (y_t^T z_i)^2          (real nonlinearities)
    p_i = sum_t (y_t^T cos(X w_i))^2 + (y_t^T sin(X w_i))^2    (gaussian, eq. 15)

and the variant of eq. 12 adds ``n ||z_i||^2`` (``n (||cos||^2 + ||sin||^2)``).

The statistic that is *streamed* is linear in the data: one task per row block computes
``Z_b^T y_b``, ``Z_b^T 1``, ``n_b``, ``sum y_b`` (and, if asked, the column sums of
squares ``sum Z_b**2`` and the Gram ``Z_b^T Z_b``), per cross-validation fold, and a tree
of combine tasks sums them (:func:`dkrr.linalg.reduce_row_blocks`). The squares are taken
only at the end, of the *summed* statistic: ``(sum_b Z_b^T y_b)^2``, never
``sum_b (Z_b^T y_b)^2``.

Targets
    Regression targets are centred with the streamed mean:
    ``Z^T (y - ybar) = Z^T y - Z^T 1 ybar^T`` with ``ybar = sum y / n``, so no second pass
    is needed. Classification targets are +-1: the block task one-hot encodes the labels
    it sees (the classes are found in the same pass) and after the pass
    ``Z^T (2 * 1[y = j] - 1) = 2 Z^T 1[y = j] - Z^T 1``; two classes give one column
    (+1 for the larger label), more give one-vs-rest columns.

Cross-validation
    Rows are assigned to folds by :func:`dkrr.linalg.fold_ids` (a seeded hash of the global
    row index, the same assignment the ridge statistics use), the statistics are kept per
    fold, and the scores of the training rows of fold ``k`` are computed from the totals
    minus fold ``k`` (:meth:`ScoreStatistics.training`), so the labels of the validation
    rows never enter the features that are scored on them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import InputValidationError, InvalidParameterError
from ..linalg._stats import DEFAULT_MAX_BLOCK_BYTES, fold_feature_blocks, prepare_block

__all__ = [
    "ScoreStatistics",
    "block_score_statistics",
    "combine_score_statistics",
    "frequency_totals",
    "streamed_score_statistics",
    "surrogate_scores",
]

#: centred products below this fraction of their terms are taken as exactly zero (constant y)
_CANCEL_RTOL = 1e-11


@dataclasses.dataclass(eq=False)
class ScoreStatistics:
    """Per-fold linear statistics of the candidate features (float64).

    Attributes
    ----------
    c : ndarray (K, p, t)
        ``Z^T y`` per fold (labels mode: ``Z^T 1[y = label_j]``, one column per label).
    zsum : ndarray (K, p)
        ``Z^T 1``.
    n : ndarray (K,) int64
        Rows.
    ysum : ndarray (K, t)
        ``sum y`` (labels mode: counts of each label).
    zsq : ndarray (K, p) or None
        Column sums of squares ``sum Z**2`` (for the eq. 12 variant).
    G : ndarray (K, p, p) or None
        Gram ``Z^T Z`` (for ridge leverage scores).
    labels : ndarray (t,) or None
        Labels mode: the sorted labels of the columns of ``c``.
    """

    c: np.ndarray
    zsum: np.ndarray
    n: np.ndarray
    ysum: np.ndarray
    zsq: np.ndarray | None = None
    G: np.ndarray | None = None
    labels: np.ndarray | None = None

    @property
    def n_folds(self) -> int:
        return self.c.shape[0]

    @classmethod
    def zeros(cls, n_folds, p, t, *, with_norms=False, with_gram=False, labels=None):
        return cls(
            np.zeros((n_folds, p, t)),
            np.zeros((n_folds, p)),
            np.zeros(n_folds, dtype=np.int64),
            np.zeros((n_folds, t)),
            np.zeros((n_folds, p)) if with_norms else None,
            np.zeros((n_folds, p, p)) if with_gram else None,
            labels,
        )

    def _align_labels(self, labels: np.ndarray) -> None:
        """Re-index the label columns (in place) onto the sorted superset ``labels``."""
        if self.labels is not None and np.array_equal(self.labels, labels):
            return
        pos = np.searchsorted(labels, self.labels)
        K, p, _ = self.c.shape
        c = np.zeros((K, p, len(labels)))
        ysum = np.zeros((K, len(labels)))
        c[:, :, pos] = self.c
        ysum[:, pos] = self.ysum
        self.c, self.ysum, self.labels = c, ysum, labels

    def add_(self, other: "ScoreStatistics") -> "ScoreStatistics":
        """Add ``other`` into ``self`` in place; returns ``self``."""
        if self.labels is not None or other.labels is not None:
            labels = np.unique(np.concatenate([self.labels, other.labels]))
            self._align_labels(labels)
            other._align_labels(labels)
        self.c += other.c
        self.zsum += other.zsum
        self.n += other.n
        self.ysum += other.ysum
        if self.zsq is not None:
            self.zsq += other.zsq
        if self.G is not None:
            self.G += other.G
        return self

    def training(self, exclude_fold: int | None = None) -> "ScoreStatistics":
        """One-fold statistics of all rows, or of all rows but fold ``exclude_fold``."""

        def tot(a):
            if a is None:
                return None
            s = a.sum(0, keepdims=True)
            if exclude_fold is not None:
                s = s - a[exclude_fold : exclude_fold + 1]
            return s

        if exclude_fold is not None and not 0 <= exclude_fold < self.n_folds:
            raise InvalidParameterError(
                f"exclude_fold must be in [0, {self.n_folds}), got {exclude_fold!r}"
            )
        return ScoreStatistics(
            tot(self.c), tot(self.zsum), tot(self.n), tot(self.ysum), tot(self.zsq), tot(self.G), self.labels
        )

    def classes(self) -> np.ndarray:
        """Labels mode: the classes seen in the pass (at least two are needed)."""
        if self.labels is None or len(self.labels) < 2:
            found = [] if self.labels is None else self.labels.tolist()
            raise InputValidationError(
                f"a classifier needs at least two classes in y, found {len(found)} ({found})"
            )
        return self.labels

    def target_products(self, *, center: bool = True, classes=None) -> np.ndarray:
        """``Z^T y`` of the (one-fold) statistics, shape (p, t), with the targets of the task.

        Numeric targets are centred (``center=True``) with the streamed mean; labels become
        +-1 columns (one column for two classes, one-vs-rest otherwise). Centred products
        whose norm is below ``1e-11`` of the terms they are the difference of are rounding
        noise (the targets are constant) and are returned as exact zeros.
        """
        if self.n_folds != 1:
            raise InvalidParameterError("call training() first: target_products needs one fold")
        if float(self.n[0]) == 0:
            raise InputValidationError("no rows to score the candidate features on")
        if self.labels is not None:
            classes = self.classes() if classes is None else np.asarray(classes)
            self._align_labels(np.unique(np.concatenate([self.labels, classes])))
        c, zsum, n, ysum = self.c[0], self.zsum[0], float(self.n[0]), self.ysum[0]
        if self.labels is not None:
            pos = np.searchsorted(self.labels, classes)
            cols = pos[1:] if len(classes) == 2 else pos
            return 2.0 * c[:, cols] - zsum[:, None]
        if center:
            centred = c - np.outer(zsum, ysum / n)
            # constant targets: the centred products are rounding noise of the subtraction
            scale = np.linalg.norm(c) + np.linalg.norm(np.outer(zsum, ysum / n))
            if np.linalg.norm(centred) <= _CANCEL_RTOL * scale:
                return np.zeros_like(centred)
            return centred
        return c


def frequency_totals(values: np.ndarray, kernel: str, n_components: int) -> np.ndarray:
    """Per-frequency totals of per-column values: cos + sin columns for ``gaussian``."""
    values = np.asarray(values, dtype=np.float64)
    if kernel == "gaussian":
        if values.shape[0] != 2 * n_components:
            raise InvalidParameterError(
                f"expected {2 * n_components} column values for {n_components} gaussian "
                f"frequencies, got {values.shape[0]}"
            )
        return values[:n_components] + values[n_components:]
    return values


def surrogate_scores(
    stats: ScoreStatistics,
    kernel: str,
    n_components: int,
    *,
    exclude_fold: int | None = None,
    center: bool = True,
    eq12: bool = False,
    classes=None,
) -> np.ndarray:
    """Surrogate leverage scores ``p_i`` of the ``n_components`` candidate frequencies.

    Parameters
    ----------
    stats : ScoreStatistics
        From :func:`streamed_score_statistics` (``with_norms=True`` for ``eq12``).
    kernel : str
        Kernel of the candidate map (``gaussian`` sums the cos and sin columns, eq. 15).
    n_components : int
        l, the number of candidate frequencies.
    exclude_fold : int, optional
        Score on the training rows of this cross-validation fold only.
    center : bool, default=True
        Centre numeric targets (ignored for labels, which are +-1).
    eq12 : bool, default=False
        Add ``n ||z_i||^2`` (eq. 12) to ``(y^T z_i)^2`` (eq. 15), ``n`` the rows scored.
    classes : array-like, optional
        Labels mode: the classes (default: those seen in the scored rows).

    Returns
    -------
    ndarray of shape (n_components,), float64, >= 0.
    """
    tr = stats.training(exclude_fold)
    C = tr.target_products(center=center, classes=classes)
    col = np.einsum("pt,pt->p", C, C)
    if eq12:
        if tr.zsq is None:
            raise InvalidParameterError("eq12 scores need the column norms: stream with with_norms=True")
        col = col + float(tr.n[0]) * tr.zsq[0]
    return frequency_totals(col, kernel, n_components)


def block_score_statistics(
    X: np.ndarray,
    y: np.ndarray,
    row_offset: int,
    block_index: int,
    fmap,
    n_folds: int = 1,
    fold_seed: int = 0,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    labels_mode: bool = False,
    with_norms: bool = False,
    with_gram: bool = False,
) -> ScoreStatistics:
    """Score statistics of one row block: the task body of the scoring pass.

    The signature follows :func:`dkrr.linalg.reduce_row_blocks`: ``(X_b, y_b,
    row_offset, block_index, *constants)``.

    Raises
    ------
    NonFiniteInputError
        NaN or inf in X or y; the message names the block and its global rows.
    """
    Xf, Y, bounds, labels = prepare_block(X, y, row_offset, block_index, n_folds, fold_seed, labels_mode)
    stats = ScoreStatistics.zeros(
        n_folds, fmap.n_output_features, Y.shape[1], with_norms=with_norms, with_gram=with_gram, labels=labels
    )
    for k, Zk, Yk in fold_feature_blocks(Xf, Y, bounds, fmap, max_block_bytes):
        stats.c[k] += Zk.T @ Yk
        stats.zsum[k] += Zk.sum(axis=0)
        stats.n[k] += Zk.shape[0]
        stats.ysum[k] += Yk.sum(axis=0)
        if with_norms:
            stats.zsq[k] += np.einsum("ij,ij->j", Zk, Zk)
        if with_gram:
            stats.G[k] += Zk.T @ Zk
    return stats


def combine_score_statistics(parts: list) -> ScoreStatistics:
    """Sum a list of :class:`ScoreStatistics` (into the first one, in place)."""
    out = parts[0]
    for other in parts[1:]:
        out.add_(other)
    return out


def streamed_score_statistics(
    X,
    y,
    fmap,
    *,
    n_folds: int = 1,
    fold_seed: int = 0,
    labels_mode: bool = False,
    with_norms: bool = False,
    with_gram: bool = False,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    split_every: int | None = None,
) -> ScoreStatistics:
    """One pass over the row blocks of ``X``, ``y``: the summed :class:`ScoreStatistics`.

    Parameters
    ----------
    X, y : dask arrays with identical row chunks
        See :func:`dkrr.linalg.as_row_chunked` (numpy input is accepted and chunked by it).
    fmap : FeatureMap
        The candidate map (l frequencies).
    n_folds, fold_seed : int
        Cross-validation folds (:func:`dkrr.linalg.fold_ids`); ``1`` = no folds.
    labels_mode : bool
        ``y`` holds class labels (any dtype); classes are found in the same pass.
    with_norms : bool
        Also accumulate column sums of squares (eq. 12).
    with_gram : bool
        Also accumulate the Gram ``Z^T Z`` (ridge leverage scores).
    max_block_bytes, split_every : int
        Feature-buffer budget of a task; fan-in of the combine tree.
    """
    from ..linalg._reduce import as_row_chunked, reduce_row_blocks

    if not (hasattr(X, "chunks") and hasattr(y, "chunks")):
        X, y = as_row_chunked(X, y, y_kind="labels" if labels_mode else "numeric")
    return reduce_row_blocks(
        [X, y],
        block_score_statistics,
        combine_score_statistics,
        split_every=split_every,
        constants=(fmap, int(n_folds), int(fold_seed), int(max_block_bytes), bool(labels_mode),
                   bool(with_norms), bool(with_gram)),
        label="scoring candidate features",
    )
