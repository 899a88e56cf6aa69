"""Streamed sufficient statistics of ridge regression on random features.

For each row block ``X_b, y_b`` one task computes ``Z_b = phi(X_b)`` and accumulates, in
float64 and per cross-validation fold (ALGORITHMS.md section 3)::

    G[k]    = sum Z_i^T Z_i        (K, p, p)    gram
    c[k]    = sum Z_i^T y_i        (K, p, t)    targets (or one column per class label)
    zsum[k] = sum Z_i              (K, p)       for the intercept
    n[k]    = rows                 (K,)
    ysum[k] = sum y_i              (K, t)
    yy[k]   = sum y_i ** 2         (K, t)       diagonal of y^T y

with the sums over the rows i of fold k. Without cross-validation K = 1. Folds come from
a seeded hash of the *global* row index (:func:`fold_ids`), so they do not depend on the
chunking. Z exists for one sub-block of at most ``max_block_bytes`` at a time, in one
reused buffer.

Classification (``labels`` mode): instead of numeric targets the block's labels are
one-hot encoded, ``c[k][:, j] = sum_{i in k, y_i = label_j} Z_i`` and ``ysum[k][j]`` is
the count of ``label_j``; :meth:`RidgeStatistics.plus_minus_targets` turns that into the
statistics of +-1 targets after the pass, when the set of labels is known. So the
classes are found in the same single pass over the data.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import InputValidationError, NonFiniteInputError

__all__ = [
    "DEFAULT_MAX_BLOCK_BYTES",
    "RidgeStatistics",
    "block_statistics",
    "check_finite_rows",
    "combine_statistics",
    "fold_feature_blocks",
    "fold_ids",
    "prepare_block",
]

#: memory budget of the Z buffer of one block task (bytes)
DEFAULT_MAX_BLOCK_BYTES = 64 * 2**20

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def fold_ids(rows: np.ndarray, n_folds: int, seed: int) -> np.ndarray:
    """Fold of each global row index: ``splitmix64(row + seed) mod n_folds``.

    Parameters
    ----------
    rows : ndarray of int
        Global row indices (>= 0).
    n_folds : int
    seed : int
        Any integer in ``[0, 2**64)``.

    Returns
    -------
    ndarray of int64, values in ``[0, n_folds)``.
    """
    z = np.asarray(rows).astype(np.uint64) + np.uint64(seed % 2**64) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    z ^= z >> np.uint64(31)
    return (z % np.uint64(n_folds)).astype(np.int64)


@dataclasses.dataclass(eq=False)
class RidgeStatistics:
    """Per-fold sufficient statistics (float64). See the module docstring.

    Attributes
    ----------
    G : ndarray (K, p, p)
    c : ndarray (K, p, t)
    zsum : ndarray (K, p)
    n : ndarray (K,) int64
    ysum : ndarray (K, t)
    yy : ndarray (K, t)
    labels : ndarray (t,) or None
        In labels mode, the label of each column of ``c`` (sorted); ``ysum`` then holds
        counts and ``yy`` is unused (zeros).
    """

    G: np.ndarray
    c: np.ndarray
    zsum: np.ndarray
    n: np.ndarray
    ysum: np.ndarray
    yy: np.ndarray
    labels: np.ndarray | None = None

    @property
    def n_folds(self) -> int:
        return self.G.shape[0]

    @classmethod
    def zeros(cls, n_folds: int, p: int, t: int, labels=None) -> "RidgeStatistics":
        return cls(
            np.zeros((n_folds, p, p)),
            np.zeros((n_folds, p, t)),
            np.zeros((n_folds, p)),
            np.zeros(n_folds, dtype=np.int64),
            np.zeros((n_folds, t)),
            np.zeros((n_folds, t)),
            labels,
        )

    def total(self) -> "RidgeStatistics":
        """Statistics of all rows (sum over folds), as a one-fold object."""
        return RidgeStatistics(
            self.G.sum(0, keepdims=True), self.c.sum(0, keepdims=True),
            self.zsum.sum(0, keepdims=True), self.n.sum(0, keepdims=True),
            self.ysum.sum(0, keepdims=True), self.yy.sum(0, keepdims=True), self.labels,
        )

    def fold(self, k: int) -> "RidgeStatistics":
        """Statistics of the rows of fold ``k``."""
        s = slice(k, k + 1)
        return RidgeStatistics(self.G[s], self.c[s], self.zsum[s], self.n[s], self.ysum[s], self.yy[s], self.labels)

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
        self.c, self.ysum, self.yy, self.labels = c, ysum, np.zeros_like(ysum), labels

    def add_(self, other: "RidgeStatistics") -> "RidgeStatistics":
        """Add ``other`` into ``self`` (in place) and return ``self``."""
        if self.labels is not None or other.labels is not None:
            labels = np.unique(np.concatenate([self.labels, other.labels]))
            self._align_labels(labels)
            other._align_labels(labels)
        self.G += other.G
        self.c += other.c
        self.zsum += other.zsum
        self.n += other.n
        self.ysum += other.ysum
        self.yy += other.yy
        return self

    def plus_minus_targets(self, classes: np.ndarray) -> "RidgeStatistics":
        """Statistics of +-1 targets from labels-mode statistics.

        One column per class (``+1`` for the class, ``-1`` otherwise); with two classes a
        single column, ``+1`` for ``classes[1]`` (scikit-learn's ``LabelBinarizer``
        with ``neg_label=-1``). Uses ``Z^T (2 1[y=j] - 1) = 2 c_j - zsum``.
        """
        self._align_labels(np.asarray(classes))
        cols = [1] if len(classes) == 2 else list(range(len(classes)))
        c = 2.0 * self.c[:, :, cols] - self.zsum[:, :, None]
        counts = self.ysum[:, cols]
        nn = self.n[:, None].astype(np.float64)
        ysum = 2.0 * counts - nn
        yy = np.broadcast_to(nn, ysum.shape).copy()
        return RidgeStatistics(self.G, c, self.zsum, self.n, ysum, yy, None)

    def symmetrize_(self) -> "RidgeStatistics":
        """Make each G[k] exactly symmetric (average with its transpose), in place."""
        for k in range(self.n_folds):
            g = self.G[k]
            g += g.T.copy()
            g *= 0.5
        return self


def combine_statistics(parts: list) -> RidgeStatistics:
    """Sum a list of :class:`RidgeStatistics` (into the first one, in place)."""
    out = parts[0]
    for other in parts[1:]:
        out.add_(other)
    return out


def check_finite_rows(block: np.ndarray, name: str, block_index: int, row_offset: int) -> None:
    """Raise :class:`NonFiniteInputError` naming the count, the block and the global rows."""
    if block.dtype.kind != "f" or np.isfinite(block).all():
        return
    bad = ~np.isfinite(block)
    rows = np.nonzero(bad.reshape(bad.shape[0], -1).any(axis=1))[0]
    raise NonFiniteInputError(
        f"{name} contains {int(bad.sum())} non-finite value(s) (NaN or inf) in row block "
        f"{block_index} (rows {row_offset} to {row_offset + block.shape[0] - 1}), in "
        f"{len(rows)} row(s), first in row {row_offset + int(rows[0])}; remove or impute "
        "them before fitting or predicting."
    )


def prepare_block(
    X: np.ndarray,
    y: np.ndarray,
    row_offset: int,
    block_index: int,
    n_folds: int,
    fold_seed: int,
    labels_mode: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Checks, target encoding and fold order of one row block (shared by the passes).

    Returns ``(Xf, Y, bounds, labels)``: ``Xf`` the rows as C-contiguous float64 and
    ``Y`` the targets as a C-contiguous ``(rows, t)`` float64 array (one-hot columns of
    the block's sorted ``labels`` in labels mode, else ``labels`` is None), both sorted by
    fold when ``n_folds > 1`` so that fold ``k`` is rows ``bounds[k]:bounds[k + 1]``.

    Raises
    ------
    NonFiniteInputError
        NaN or inf in X or y; the message names the block and its global rows.
    """
    n_rows = X.shape[0]
    check_finite_rows(X, "X", block_index, row_offset)
    if labels_mode:
        if y.dtype.kind == "f":
            check_finite_rows(y, "y", block_index, row_offset)
        labels, codes = np.unique(y, return_inverse=True)
        Y = np.zeros((n_rows, len(labels)))
        Y[np.arange(n_rows), codes.reshape(-1)] = 1.0
    else:
        check_finite_rows(y, "y", block_index, row_offset)
        labels = None
        Y = np.asarray(y, dtype=np.float64).reshape(n_rows, -1)
    Xf = X.astype(np.float64, copy=False)
    if n_folds > 1:
        folds = fold_ids(np.arange(row_offset, row_offset + n_rows), n_folds, fold_seed)
        order = np.argsort(folds, kind="stable")
        Xf = np.take(Xf, order, axis=0)
        Y = np.take(Y, order, axis=0)
        bounds = np.searchsorted(folds[order], np.arange(n_folds + 1))
    else:
        bounds = np.array([0, n_rows])
    return np.ascontiguousarray(Xf), np.ascontiguousarray(Y), bounds, labels


def fold_feature_blocks(Xf: np.ndarray, Y: np.ndarray, bounds: np.ndarray, fmap, max_block_bytes: int):
    """Yield ``(k, Z_k, Y_k)``: features and targets of fold ``k``'s rows, piece by piece.

    The features of at most ``max_block_bytes // (8 p)`` rows exist at a time, in one
    reused buffer (a yielded ``Z_k`` is overwritten by the next sub-block). ``Xf``, ``Y``
    and ``bounds`` come from :func:`prepare_block`.
    """
    n_rows = Xf.shape[0]
    p = fmap.n_output_features
    sub = int(max(1, min(n_rows, max_block_bytes // (8 * p))))
    Zbuf = np.empty((sub, p))
    for start in range(0, n_rows, sub):
        stop = min(n_rows, start + sub)
        Z = fmap.transform(Xf[start:stop], out=Zbuf[: stop - start])
        for k in range(len(bounds) - 1):
            a = max(start, bounds[k]) - start
            b = min(stop, bounds[k + 1]) - start
            if b > a:
                yield k, Z[a:b], Y[start + a : start + b]


def block_statistics(
    X: np.ndarray,
    y: np.ndarray,
    row_offset: int,
    block_index: int,
    fmap,
    n_folds: int = 1,
    fold_seed: int = 0,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    labels_mode: bool = False,
) -> RidgeStatistics:
    """Statistics of one row block: the task body of the streamed fit.

    Parameters
    ----------
    X : ndarray (rows, d)
    y : ndarray (rows,) or (rows, t)
        Numeric targets, or class labels (1-D) when ``labels_mode``.
    row_offset, block_index : int
        Global index of the block's first row and the block's position.
    fmap : FeatureMap
        The fitted feature map (``fmap.transform(X, out=...)``).
    n_folds : int
        K; ``1`` means no cross-validation.
    fold_seed : int
        Seed of :func:`fold_ids`.
    max_block_bytes : int
        Budget of the float64 feature buffer: ``rows x p x 8`` above it is processed in
        sub-blocks.
    labels_mode : bool

    Raises
    ------
    NonFiniteInputError
        NaN or inf in X or y; the message names the block and its global rows.
    """
    Xf, Y, bounds, labels = prepare_block(X, y, row_offset, block_index, n_folds, fold_seed, labels_mode)
    stats = RidgeStatistics.zeros(n_folds, fmap.n_output_features, Y.shape[1], labels)
    for k, Zk, Yk in fold_feature_blocks(Xf, Y, bounds, fmap, max_block_bytes):
        _add_gram(stats.G[k], Zk)
        stats.c[k] += Zk.T @ Yk
        stats.zsum[k] += Zk.sum(axis=0)
        stats.n[k] += Zk.shape[0]
        stats.ysum[k] += Yk.sum(axis=0)
        if not labels_mode:
            stats.yy[k] += np.einsum("ij,ij->j", Yk, Yk)
    return stats


def _add_gram(G: np.ndarray, Z: np.ndarray) -> None:
    """``G += Z^T Z`` for a C-contiguous row slice ``Z``.

    numpy recognises ``Z.T @ Z`` (the transpose of one buffer times itself) and calls BLAS
    ``syrk``, then mirrors the triangle, so the result is exactly symmetric. Unlike scipy's
    f2py ``dsyrk`` wrapper it releases the GIL, so the block tasks of the threaded
    scheduler run their Grams in parallel. ``benchmarks/bench_gram.py`` on the 2-core VM
    (4096 x 2048 sub-blocks, one BLAS thread per thread): in one thread numpy takes 1.05x
    the time of scipy's in-place ``dsyrk`` (the p x p temporary), in two threads 0.55x.
    """
    G += Z.T @ Z


def check_labels_statistics(stats: RidgeStatistics) -> np.ndarray:
    """The classes found in a labels-mode pass; at least two are needed."""
    classes = stats.labels
    if classes is None or len(classes) < 2:
        raise InputValidationError(
            f"a classifier needs at least two classes in y, found "
            f"{0 if classes is None else len(classes)} class ({[] if classes is None else classes.tolist()})"
        )
    return classes


def streamed_statistics(
    X,
    y,
    fmap,
    *,
    n_folds: int = 1,
    fold_seed: int = 0,
    max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
    split_every: int | None = None,
    labels_mode: bool = False,
) -> RidgeStatistics:
    """One pass over the row blocks of dask arrays ``X``, ``y``: the summed statistics.

    ``X`` and ``y`` must have identical row chunks (see
    :func:`dkrr.linalg.as_row_chunked`). The feature map is embedded once in the graph;
    each block task computes features and statistics together (the data is read once);
    a tree reduction of fan-in ``split_every`` sums them. The result's G is exactly
    symmetric.
    """
    from ._reduce import reduce_row_blocks

    if isinstance(max_block_bytes, bool) or not isinstance(max_block_bytes, (int, np.integer)) or max_block_bytes < 1:
        from ..errors import InvalidParameterError

        raise InvalidParameterError(f"max_block_bytes must be a positive integer, got {max_block_bytes!r}")
    stats = reduce_row_blocks(
        [X, y],
        block_statistics,
        combine_statistics,
        split_every=split_every,
        constants=(fmap, int(n_folds), int(fold_seed), int(max_block_bytes), bool(labels_mode)),
        label="accumulating ridge statistics",
    )
    return stats.symmetrize_()
