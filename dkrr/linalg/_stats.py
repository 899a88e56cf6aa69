"""Streamed sufficient statistics of ridge regression on random features.

For each row block ``X_b, y_b`` one task computes ``Z_b = phi(X_b)`` and accumulates, in
float64 and per cross-validation fold (ALGORITHMS.md section 3)::

    G[k]    = sum Z_i^T Z_i        (K, p, p)    gram (packed in a pass: (K, L))
    c[k]    = sum Z_i^T y_i        (K, p, t)    targets (or one column per class label)
    zsum[k] = sum Z_i              (K, p)       for the intercept
    n[k]    = rows                 (K,)         of positive weight, with weights
    ysum[k] = sum y_i              (K, t)
    yy[k]   = sum y_i ** 2         (K, t)       diagonal of y^T y

with the sums over the rows i of fold k. Without cross-validation K = 1. With sample
weights ``w`` (``sample_weight``) every sum but ``n`` is weighted (``G = sum w_i Z_i^T
Z_i``, ...) and ``wsum[k] = sum w_i`` is kept beside ``n``, which counts the rows of positive
weight (a row of weight 0 is no observation: every statistic is as without it). Folds come from
a seeded hash of the *global* row index (:func:`fold_ids`), so they do not depend on the
chunking. Z exists for one sub-block of at most ``max_block_bytes`` at a time, in one
reused buffer. Inside a pass ``G`` is packed, each fold's upper triangle in panels
(:mod:`dkrr.linalg._packed`); the pass's result is unpacked (:meth:`RidgeStatistics.symmetrized`).

Classification (``labels`` mode): instead of numeric targets the block's labels are
one-hot encoded, ``c[k][:, j] = sum_{i in k, y_i = label_j} Z_i`` and ``ysum[k][j]`` is
the count of ``label_j``; :meth:`RidgeStatistics.plus_minus_targets` turns that into the
statistics of +-1 targets after the pass, when the set of labels is known. So the
classes are found in the same single pass over the data.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from .._validation import check_class_labels, check_finite_rows, label_union
from ..errors import InputValidationError, InvalidParameterError
from ._folds import fold_ids, row_folds  # noqa: F401 - re-exported (the fold assignment's one place)
from ._packed import PackedGramSum, direct_gram, packed_length, unpack_gram
from ._precision import FLOAT32_SUB_ROWS, PRECISIONS, check_precision, sub_block_rows  # noqa: F401 - re-exported
from ._precision import _cross64, cast_buffer, float32_weight_unit, scale_weighted_sums
from ._wire import register_statistics_type

__all__ = [
    "DEFAULT_MAX_BLOCK_BYTES",
    "FLOAT32_SUB_ROWS",
    "PRECISIONS",
    "RidgeStatistics",
    "block_statistics",
    "check_precision",
    "combine_statistics",
    "feature_sub_blocks",
    "fold_feature_blocks",
    "fold_ids",
    "prepare_block",
    "row_folds",
    "sub_block_rows",
]

#: memory budget of the Z buffer of one block task (bytes)
DEFAULT_MAX_BLOCK_BYTES = 64 * 2**20

@dataclasses.dataclass(eq=False)
class RidgeStatistics:
    """Per-fold streamed statistics of features and targets (float64), with optional parts.

    The one statistics type of dkrr: the ridge pass fills every part but ``zsq``; the
    scoring pass of leverage sampling (:mod:`dkrr.sampling`) keeps the linear parts and,
    when asked, ``zsq`` and ``G``. Every method returns a new object and leaves ``self``
    unchanged (a partial result a scheduler holds may be used twice).

    Attributes
    ----------
    G : ndarray (K, p, p), ndarray (K, L) or None
        Gram ``Z^T Z``: full, or packed (2-D: the partial results of a pass, see
        :mod:`dkrr.linalg._packed`; :attr:`packed` says which, :meth:`symmetrized` unpacks).
    c : ndarray (K, p, t)
        ``Z^T y`` (labels mode: ``Z^T 1[y = label_j]``, one column per label).
    zsum : ndarray (K, p)
        ``Z^T 1``.
    n : ndarray (K,) int64
        Rows.
    ysum : ndarray (K, t)
        ``sum y`` (labels mode: the count of each label).
    yy : ndarray (K, t) or None
        ``sum y**2`` (labels mode: unused, zeros).
    labels : ndarray (t,) or None
        In labels mode, the label of each column of ``c`` (sorted).
    zsq : ndarray (K, p) or None
        Column sums of squares ``sum Z**2`` (scores of eq. 12).
    wsum : ndarray (K,) or None
        With sample weights: ``sum w`` (the other parts are then weighted sums; ``n``
        counts the rows of positive weight, for the fold checks and the evidence).
    """

    G: np.ndarray | None
    c: np.ndarray
    zsum: np.ndarray
    n: np.ndarray
    ysum: np.ndarray
    yy: np.ndarray | None = None
    labels: np.ndarray | None = None
    zsq: np.ndarray | None = None
    wsum: np.ndarray | None = None

    #: the summed parts (``labels`` is not summed)
    PARTS: ClassVar[tuple[str, ...]] = ("G", "c", "zsum", "n", "ysum", "yy", "zsq", "wsum")

    @property
    def n_folds(self) -> int:
        return self.n.shape[0]

    @property
    def packed(self) -> bool:
        """Whether ``G`` is in packed form, ``(K, L)`` (the partial results of a pass)."""
        return self.G is not None and self.G.ndim == 2

    def weights(self) -> np.ndarray:
        """Weight of each fold (K,) float64: ``wsum``, or the row counts without weights."""
        return self.n.astype(np.float64) if self.wsum is None else self.wsum

    @classmethod
    def zeros(cls, n_folds: int, p: int, t: int, labels=None, *, with_gram: bool = True,
              with_squares: bool = True, with_norms: bool = False,
              with_weights: bool = False, packed: bool = False) -> RidgeStatistics:
        """Zero statistics; ``with_*`` choose the optional parts ``G``, ``yy``, ``zsq``,
        ``wsum``; ``packed``: ``G`` in packed form (what a block task accumulates into)."""
        gram = (n_folds, packed_length(p)) if packed else (n_folds, p, p)
        return cls(
            np.zeros(gram) if with_gram else None,
            np.zeros((n_folds, p, t)),
            np.zeros((n_folds, p)),
            np.zeros(n_folds, dtype=np.int64),
            np.zeros((n_folds, t)),
            np.zeros((n_folds, t)) if with_squares else None,
            labels,
            np.zeros((n_folds, p)) if with_norms else None,
            np.zeros(n_folds) if with_weights else None,
        )

    def map_parts(self, fn) -> RidgeStatistics:
        """New statistics with ``fn(part)`` for every present part (labels kept)."""
        return RidgeStatistics(
            **{k: None if getattr(self, k) is None else fn(getattr(self, k)) for k in self.PARTS},
            labels=self.labels,
        )

    def training(self, exclude_fold: int | None = None) -> RidgeStatistics:
        """One-fold statistics of all rows, or of all rows but fold ``exclude_fold``."""
        if exclude_fold is None:
            return self.map_parts(lambda a: a.sum(0, keepdims=True))
        if not 0 <= exclude_fold < self.n_folds:
            raise InvalidParameterError(f"exclude_fold must be in [0, {self.n_folds}), got {exclude_fold!r}")
        k = slice(exclude_fold, exclude_fold + 1)
        return self.map_parts(lambda a: a.sum(0, keepdims=True) - a[k])

    def total(self, *, shared: bool = False) -> RidgeStatistics:
        """Statistics of all rows (sum over folds), as a one-fold object; ``shared``: a
        one-fold object itself, not a copy (for a caller that only reads it: its Gram
        is ``p x p``)."""
        return self if shared and self.n_folds == 1 else self.training(None)

    def fold(self, k: int) -> RidgeStatistics:
        """Statistics of the rows of fold ``k``."""
        return self.map_parts(lambda a: a[k : k + 1])

    def aligned(self, labels: np.ndarray) -> RidgeStatistics:
        """The statistics with their label columns re-indexed onto the sorted superset ``labels``."""
        if self.labels is not None and np.array_equal(self.labels, labels):
            return self
        pos = np.searchsorted(labels, self.labels)
        K, p, _ = self.c.shape
        c = np.zeros((K, p, len(labels)))
        ysum = np.zeros((K, len(labels)))
        c[:, :, pos] = self.c
        ysum[:, pos] = self.ysum
        yy = None if self.yy is None else np.zeros_like(ysum)
        return dataclasses.replace(self, c=c, ysum=ysum, yy=yy, labels=labels)

    def classes(self) -> np.ndarray:
        """Labels mode: the classes seen in the pass (at least two are needed)."""
        if self.labels is None or len(self.labels) < 2:
            found = [] if self.labels is None else self.labels.tolist()
            raise InputValidationError(
                f"a classifier needs at least two classes in y, found {len(found)} class ({found})"
            )
        return self.labels

    def plus_minus_targets(self, classes: np.ndarray) -> RidgeStatistics:
        """Statistics of +-1 targets from labels-mode statistics.

        One column per class (``+1`` for the class, ``-1`` otherwise); with two classes a
        single column, ``+1`` for ``classes[1]`` (scikit-learn's ``LabelBinarizer``
        with ``neg_label=-1``). Uses ``Z^T (2 1[y=j] - 1) = 2 c_j - zsum``; with sample
        weights the counts are weight sums and ``n`` below is ``wsum``.
        """
        src = self.aligned(np.asarray(classes))
        cols = [1] if len(classes) == 2 else list(range(len(classes)))
        c = 2.0 * src.c[:, :, cols] - src.zsum[:, :, None]
        counts = src.ysum[:, cols]
        nn = src.weights()[:, None]
        ysum = 2.0 * counts - nn
        yy = np.broadcast_to(nn, ysum.shape).copy()
        return RidgeStatistics(src.G, c, src.zsum, src.n, ysum, yy, None, src.zsq, src.wsum)

    def symmetrized(self) -> RidgeStatistics:
        """The statistics with each G[k] a full, exactly symmetric ``p x p`` matrix: a packed
        G unpacked (its upper triangle mirrored), a full one averaged with its transpose."""
        if self.G is None:
            return self
        if self.packed:
            return dataclasses.replace(self, G=unpack_gram(self.G, self.zsum.shape[1]))
        return dataclasses.replace(self, G=0.5 * (self.G + self.G.transpose(0, 2, 1)))


register_statistics_type(RidgeStatistics)  # how Dask sends and counts it (dkrr.linalg._wire)


def combine_statistics(parts: list) -> RidgeStatistics:
    """Sum of a list of :class:`RidgeStatistics`: a new object, the inputs unchanged.

    The combine task of every streamed pass. Label columns (labels mode) are re-indexed
    onto the sorted union of the parts' labels first.
    """
    labelled = [s.labels for s in parts if s.labels is not None]
    if labelled:
        labels = label_union(labelled)
        parts = [s.aligned(labels) for s in parts]
    out = parts[0].map_parts(np.copy)
    for other in parts[1:]:
        for k in RidgeStatistics.PARTS:
            a = getattr(out, k)
            if a is not None:
                a += getattr(other, k)
    return out


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
    Xf, Y, _, bounds, labels = _prepare(X, y, None, row_offset, block_index, n_folds, fold_seed, labels_mode)
    return Xf, Y, bounds, labels


def _prepare(X, y, w, row_offset, block_index, n_folds, fold_seed, labels_mode, keys=None, hashed=True):
    """:func:`prepare_block` with the block's sample weights ``w`` (or None), checked and
    sorted like the rows: ``(Xf, Y, w, bounds, labels)``; ``keys``, ``hashed``: the
    block's fold keys (:func:`row_folds`)."""
    n_rows = X.shape[0]
    check_finite_rows(X, "X", block_index, row_offset)
    if w is not None:
        w = _check_weight_block(w, block_index, row_offset)
    if labels_mode:
        check_class_labels(y, "y", block_index, row_offset)
        labels, codes = np.unique(y, return_inverse=True)
        Y = np.zeros((n_rows, len(labels)))
        Y[np.arange(n_rows), codes.reshape(-1)] = 1.0
    else:
        check_finite_rows(y, "y", block_index, row_offset)
        labels = None
        Y = np.asarray(y, dtype=np.float64).reshape(n_rows, -1)
    Xf = X.astype(np.float64, copy=False)
    if n_folds > 1:
        folds = row_folds(row_offset, n_rows, n_folds, fold_seed, keys, hashed, block_index)
        order = np.argsort(folds, kind="stable")
        Xf = np.take(Xf, order, axis=0)
        Y = np.take(Y, order, axis=0)
        w = None if w is None else np.take(w, order)
        bounds = np.searchsorted(folds[order], np.arange(n_folds + 1))
    else:
        bounds = np.array([0, n_rows])
    return np.ascontiguousarray(Xf), np.ascontiguousarray(Y), w, bounds, labels


def _check_weight_block(w, block_index, row_offset) -> np.ndarray:
    """A block of sample weights as float64 (rows,), finite and >= 0 (dask/zarr weights
    are checked here, in the block task; numpy weights before the pass)."""
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    check_finite_rows(w, "sample_weight", block_index, row_offset)
    neg = np.nonzero(w < 0)[0]
    if neg.size:
        where = "" if block_index is None else f" in row block {block_index}"
        raise InputValidationError(
            f"sample_weight holds {neg.size} negative value(s){where}, first in row "
            f"{row_offset + int(neg[0])} ({float(w[neg[0]])!r}); weights must be >= 0 (0 drops a row)."
        )
    return w


def feature_sub_blocks(X: np.ndarray, fmap, max_block_bytes: int, precision: str = "float64", row_scale=None,
                       bounds=None):
    """Yield ``(start, stop, Z)``: the features of rows ``start:stop`` of ``X``, piece by piece.

    The one sub-block engine of every pass (statistics, PCG, PCG validation) and of
    prediction: at most :func:`sub_block_rows` rows have features at a time, in one reused
    buffer (a yielded ``Z`` is overwritten by the next). Each sub-block of ``X`` is cast to
    the ``precision``'s dtype as it is read; ``row_scale`` (rows,) multiplies the rows of
    ``Z`` (``sqrt(w)`` for sample weights ``w``: ``Z^T Z`` is then the weighted Gram).
    ``bounds`` (ascending row offsets from 0 to the rows, e.g. the folds' of
    :func:`prepare_block`): no sub-block crosses one, so each lies in one segment and a
    segment's rows are cut into full sub-blocks (not into the pieces that sub-blocks cut
    at the segments' ends would leave: a float32 Gram of fewer rows is slower per row).
    The caller checks the block's rows first (:func:`~dkrr._validation.check_finite_rows`).
    """
    n_rows = X.shape[0]
    p = fmap.n_output_features
    dtype = check_precision(precision)
    sub = sub_block_rows(n_rows, p, max_block_bytes, precision)
    # every buffer is allocated once per call: where freed memory goes back to the system
    # at once (dask workers' MALLOC_TRIM_THRESHOLD_), a fresh array per sub-block costs its
    # page faults again (measured: a worker's refinement pass 2.5x slower)
    Zbuf = np.empty((sub, p), dtype=dtype)
    Xbuf = np.empty((sub,) + X.shape[1:], dtype=dtype)
    width = getattr(fmap, "projection_columns", None)  # random feature maps take a projection buffer
    Pbuf = None if width is None else np.empty((sub, width), dtype=dtype)
    cuts = [0, n_rows] if bounds is None else [int(b) for b in bounds]
    for first, last in zip(cuts[:-1], cuts[1:]):
        for start in range(first, last, sub):
            stop = min(last, start + sub)
            m = stop - start
            np.copyto(Xbuf[:m], X[start:stop], casting="same_kind")
            Z = fmap.transform(Xbuf[:m], out=Zbuf[:m], **({} if Pbuf is None else {"work": Pbuf[:m]}))
            if row_scale is not None:
                Z *= row_scale[start:stop, None]
            yield start, stop, Z


def fold_feature_blocks(Xf: np.ndarray, Y: np.ndarray, bounds: np.ndarray, fmap, max_block_bytes: int,
                        precision: str = "float64"):
    """Yield ``(k, Z_k, Y_k)``: features and targets of fold ``k``'s rows, piece by piece:
    :func:`feature_sub_blocks` within the fold boundaries (``Xf``, ``Y`` and ``bounds``
    from :func:`prepare_block`)."""
    bounds = np.asarray(bounds)
    for start, stop, Z in feature_sub_blocks(Xf, fmap, max_block_bytes, precision, bounds=bounds):
        k = int(np.searchsorted(bounds, start, side="right")) - 1
        yield k, Z, Y[start:stop]


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
    with_gram: bool = True,
    with_squares: bool = True,
    with_norms: bool = False,
    precision: str = "float64",
) -> RidgeStatistics:
    """Statistics of one row block: the task body of every streamed pass.

    ``G`` (when asked) is packed. The signature follows
    :func:`dkrr.linalg.reduce_row_blocks`: ``(X_b, y_b, row_offset, block_index, *constants)``.

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
    with_gram, with_squares, with_norms : bool
        Accumulate the optional parts ``G``, ``yy`` (numeric targets only) and ``zsq``.
    precision : {"float64", "float32"}
        dtype of the features and of each sub-block's products; the sums are float64.

    Raises
    ------
    NonFiniteInputError
        NaN or inf in X or y; the message names the block and its global rows.
    """
    Xf, Y, _, bounds, labels = _prepare(X, y, None, row_offset, block_index, n_folds, fold_seed, labels_mode)
    stats = RidgeStatistics.zeros(n_folds, fmap.n_output_features, Y.shape[1], labels, with_gram=with_gram,
                                  with_squares=with_squares, with_norms=with_norms, packed=True)
    _accumulate(stats, Xf, Y, None, bounds, fmap, max_block_bytes, labels_mode, precision)
    return stats


def _accumulate(stats, Xf, Y, w, bounds, fmap, max_block_bytes, labels_mode, precision="float64",
                products=None) -> None:
    """Add the prepared block's sums into ``stats`` (its parts say which); ``w`` the
    block's sorted weights or None. Weighted: the rows of ``Z`` and ``Y`` are scaled by
    ``sqrt(w)`` (``Z`` in its buffer), so ``G`` is still one symmetric product (packed:
    :class:`~dkrr.linalg._packed.PackedGramSum`). With ``precision="float32"`` ``Z`` is float32: its Gram
    products are float32, added into the float64 sums; ``Z^T Y`` and the column sums are
    float64. ``products``: ``(B, out)`` adds ``Z^T W Z B`` of fold k into ``out[k]`` (the
    refinement passes' operator, without forming the Gram), or of every fold into a 2-D
    ``out`` (the PCG preconditioner's sketch, :mod:`dkrr.linalg._pcg`)."""
    t = Y.shape[1]
    p, dtype = fmap.n_output_features, check_precision(precision)
    unit = float32_weight_unit(w, dtype) if products is None else 1.0  # stats: this block's, zeroed
    w = w if unit == 1.0 else w / unit
    gram = None if stats.G is None else PackedGramSum(
        stats.G, p, dtype, direct_gram(p, Xf.shape[0], len(bounds) - 1, dtype, max_block_bytes))
    cast = cast_buffer(p, precision)  # _cross64's, reused
    YW = Y if w is None else np.ascontiguousarray(np.column_stack([Y, w]))
    for k, Zk, Yk in fold_feature_blocks(Xf, YW, bounds, fmap, max_block_bytes, precision):
        if w is None:
            r = None
            stats.n[k] += Zk.shape[0]
            stats.ysum[k] += Yk.sum(axis=0)
        else:
            wk = Yk[:, t]
            Yk = Yk[:, :t]
            r = np.sqrt(wk)
            stats.n[k] += np.count_nonzero(wk)  # a zero-weight row is no observation
            stats.wsum[k] += wk.sum()
            stats.zsum[k] += wk @ Zk if Zk.dtype == np.float64 else _cross64(Zk, wk[:, None], cast)[:, 0]
            stats.ysum[k] += wk @ Yk
            if stats.yy is not None and not labels_mode:
                stats.yy[k] += wk @ (Yk * Yk)
            Zk *= r[:, None]
            Yk = Yk * r[:, None]
        if gram is not None:
            gram.add(k, Zk)
        if products is not None:
            B, out = products
            target = out if out.ndim == 2 else out[k]
            target += Zk.T @ (Zk @ B)
        stats.c[k] += _cross64(Zk, Yk, cast, sums=stats.zsum[k] if r is None else None)  # and Z's column sums
        if r is None and stats.yy is not None and not labels_mode:
            stats.yy[k] += np.einsum("ij,ij->j", Yk, Yk)
        if stats.zsq is not None:
            stats.zsq[k] += np.einsum("ij,ij->j", Zk, Zk, dtype=np.float64)
    if gram is not None:
        gram.close()
    if unit != 1.0:
        scale_weighted_sums(stats, unit)


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
    precision: str = "float64",
) -> RidgeStatistics:
    """One pass over the row blocks of dask arrays ``X``, ``y``: the summed statistics.

    ``X`` and ``y`` must have identical row chunks (see
    :func:`dkrr.linalg.as_row_chunked`). The feature map is embedded once in the graph;
    each block task computes features and statistics together (the data is read once);
    the chains and the tree of fan-in ``split_every`` sum them (``G`` packed); the result's
    G is unpacked to full, exactly symmetric matrices. ``precision="float32"`` computes the
    features and each sub-block's products in float32 and sums them in float64
    (docs/ALGORITHMS.md, section 3.10).
    """
    from ._reduce import reduce_row_blocks

    if isinstance(max_block_bytes, bool) or not isinstance(max_block_bytes, (int, np.integer)) or max_block_bytes < 1:
        raise InvalidParameterError(f"max_block_bytes must be a positive integer, got {max_block_bytes!r}")
    check_precision(precision)
    stats = reduce_row_blocks(
        [X, y],
        block_statistics,
        combine_statistics,
        split_every=split_every,
        constants=(fmap, int(n_folds), int(fold_seed), int(max_block_bytes), bool(labels_mode),
                   True, True, False, str(precision)),
        label="accumulating ridge statistics",
    )
    return stats.symmetrized()

