"""How much the precision of the statistics can move the ridge coefficients.

With ``precision="float32"`` the features and each sub-block's products ``Z^T Z`` and
``Z^T y`` are computed in float32 and summed in float64 (:mod:`dkrr.linalg._stats`). The
computed Gram is then ``G + E`` and the features are rounded too, so the coefficients
``beta = (G + alpha I)^-1 c`` move by (first order)::

    ||d beta|| / ||beta||  <=  (||E||_2 + ||e|| / ||beta||) / (lambda_min(G) + alpha)

where ``e`` is the error of ``c``. :func:`precision_error` estimates it as
``eps (||G||_F / alpha + 20)`` with ``eps`` the machine epsilon of the precision
(``2**-23`` for float32): the float32 Gram's measured error is ``||E||_F ~ 0.3 eps
||G||_F`` and ``||E||_2 ~ 0.02 eps ||G||_2`` (the worst-case ``m eps`` per sub-block of
``m`` rows is never met by BLAS's blocked sums), and the rounding of the features alone
moves the coefficients by ~7 eps even at a large alpha (the ``+ 20``). Measured on CASP
and magic04 (20,000 rows, D = 512, alpha from 1e-4 to 1e5; docs/ALGORITHMS.md, section
3.10) the estimate is 1.3x to 8,500x the actual change: an upper estimate, not a proof.
``precision="float32"`` warns when the estimate at the fitted alpha exceeds
:data:`AUTO_PRECISION_TOL`; ``precision="auto"`` (the default) does not rely on it: it
refines the float32 solution to the float64 one (:mod:`dkrr.linalg._refine`).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidParameterError

__all__ = ["AUTO_PRECISION_TOL", "FLOAT32_SUB_ROWS", "PRECISIONS", "cast_buffer", "check_precision", "float32_weight_unit",
           "gram_underflowed", "precision_error", "scale_weighted_sums", "sub_block_rows"]

#: the values of ``precision``: the dtype of the features and of each sub-block's products
PRECISIONS = ("float64", "float32")

#: most rows one float32 sub-block Gram sums before it is added into the float64
#: accumulator. The rounding error of a float32 sum of m products grows with m (like
#: ``sqrt(m) eps32`` for random rounding, ``m eps32`` worst case) while SSYRK needs m in
#: the thousands for its full speed. Measured (one block of 32,768 rows, SORF p = 2048,
#: BLAS 1 thread; float64 3.77 s): m = 1024 / 2048 / 4096 / 8192 took 2.21 / 1.90 / 1.79
#: / 1.74 s with relative Frobenius errors of G of 2.7 / 3.0 / 3.6 / 4.9e-8.
FLOAT32_SUB_ROWS = 4096


def check_precision(precision) -> np.dtype:
    """The numpy dtype of a ``precision`` value ("float64" or "float32")."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise InvalidParameterError(
            f"precision must be one of {', '.join(map(repr, PRECISIONS))}, got {precision!r}: "
            "'float64' computes everything in double precision, 'float32' computes the features and "
            "each sub-block's Gram in single precision and sums them in double precision."
        )
    return np.dtype(precision)


def float32_weight_unit(w, dtype) -> float:
    """The unit a block's sample weights ``w`` are measured in for float32 features: a
    power of four near their largest (1 without weights or in float64). The rows are
    scaled by ``sqrt(w / unit)``, which neither overflows nor underflows float32 where
    ``sqrt(w)`` would (weights beyond about 1e+-35: 1e-100 gave a Gram of zeros, 1e100 one
    of infs), and the block's weighted sums are multiplied back by ``unit``
    (:func:`scale_weighted_sums`). A power of four scales ``sqrt`` by a power of two, so
    with weights float32 holds the sums are the same to the bit."""
    if w is None or np.dtype(dtype) != np.float32 or not w.size:
        return 1.0
    top = float(np.max(w))
    return float(4.0 ** min(int(np.frexp(top)[1]) // 2, 511)) if top > 0 else 1.0  # 4^512 is inf


def scale_weighted_sums(stats, unit: float) -> None:
    """Multiply every weighted sum of the block's ``stats`` (all but the row counts ``n``)
    by ``unit`` in place (:func:`float32_weight_unit`)."""
    for part in stats.PARTS:
        arr = getattr(stats, part)
        if part != "n" and arr is not None:
            arr *= unit


def sub_block_rows(n_rows: int, p: int, max_block_bytes: int, precision: str = "float64") -> int:
    """Rows of one feature sub-block: ``max_block_bytes // (itemsize p)``, at most
    :data:`FLOAT32_SUB_ROWS` in float32 (the rows one float32 Gram sums), at least 1."""
    dtype = check_precision(precision)
    sub = max(1, min(n_rows, max_block_bytes // (dtype.itemsize * p)))
    if dtype == np.float32:
        sub = min(sub, FLOAT32_SUB_ROWS)
    return int(sub)


#: ``precision="float32"`` warns when the estimated relative effect of its statistics on
#: the coefficients (:func:`precision_error`) exceeds this (before issue 26, ``"auto"``
#: kept float32 statistics up to it: model files of then are checked against it)
AUTO_PRECISION_TOL = 1e-2


def precision_error(stats, alpha: float, precision: str) -> float:
    """Estimated relative change of the coefficients from rounding the statistics in
    ``precision``: ``eps (||G||_F / alpha + 20)`` with ``G`` the total (uncentred) Gram.

    Returns ``inf`` for ``alpha = 0`` (the bound needs the penalty) and ``nan`` without a
    Gram (the matrix-free solver keeps none).
    """
    if stats.G is None:
        return float("nan")
    eps = float(np.finfo(np.dtype(precision)).eps)
    G = stats.G[0] if stats.G.shape[0] == 1 else stats.G.sum(axis=0)  # no p x p copy of one fold
    norm = float(np.sqrt(np.einsum("ij,ij->", G, G)))
    if alpha <= 0:
        return float("inf") if norm > 0 else 0.0
    return eps * (norm / float(alpha) + 20.0)


def gram_underflowed(stats) -> bool:
    """Whether float32 statistics lost their Gram to underflow: a column whose weighted
    sum of squares times the weight total falls below half its squared sum,
    ``W G_jj < (zsum_j)^2 / 2``, where Cauchy-Schwarz has ``W G_jj >= (zsum_j)^2`` (float32's
    rounding moves it by 1e-4 at most). Products ``z_i z_j`` below float32's smallest normal
    (features below about 1e-19: a linear or polynomial kernel of small X) sum to zero
    while the column sums, taken in float64, do not: the CV then scored a Gram of zeros
    and chose the grid's largest alpha without a word (measured: a linear kernel of X
    times 1e-25, R^2 0 against float64's 0.998)."""
    if stats.G is None:
        return False
    diag = np.einsum("kii->i", stats.G)  # summed over folds: O(K p), no p x p sum
    zsum, total = stats.zsum.sum(axis=0), float(stats.weights().sum())
    return bool(np.any(total * diag < 0.5 * zsum * zsum))


#: bytes of the float64 copy of a float32 feature slice that :func:`_cross64` makes at a time
_CAST_BYTES = 4 * 2**20


def cast_buffer(p: int, precision: str) -> np.ndarray | None:
    """The reusable float64 buffer of :func:`_cross64` for float32 features of width ``p``
    (None for float64 features, which need none)."""
    if np.dtype(precision) == np.float64:
        return None
    return np.empty((max(1, _CAST_BYTES // (8 * int(p))), int(p)))


#: most targets for which :func:`_cross64` widens float32 features row by row in one
#: compiled loop (:func:`dkrr.linalg._cross_numba.cross_rows`) rather than in slices for a
#: float64 GEMM. Measured (``benchmarks/results/row_loops``: 4096 rows, one thread, with
#: the column sums, median loop / slices): 0.44x / 0.35x / 0.54x at 1 / 2 / 4 targets at
#: p = 1024, 0.49x / 0.38x / 0.56x at p = 2048 (at 2575c2f, a faster period of this VM:
#: 0.33 / 0.29 / 0.46x and 0.48 / 0.44 / 0.66x); ad hoc, even at 8 targets and 1.6x slower
#: at 16 (the loop reads each row once per target, from L1)
CROSS_ROWS_MAX_TARGETS = 4


def _cross64(Z: np.ndarray, Y: np.ndarray, cast: np.ndarray | None = None, sums: np.ndarray | None = None) -> np.ndarray:
    """``Z^T Y`` in float64 for float64 ``Y`` (t columns, t small); ``sums`` (p,) float64,
    when given, gets ``Z``'s column sums added (in float64).

    A float32 ``Z`` is widened to float64 before any product: a float32 GEMM with the
    rounded targets sums thousands of products in single precision and measured 5 eps32
    relative error where the widened product has 0.3 eps32 (the features' own rounding).
    Up to :data:`CROSS_ROWS_MAX_TARGETS` targets the widening, the products and the column
    sums are one compiled pass over the rows (:func:`~dkrr.linalg._cross_numba.cross_rows`:
    2-3x faster than the slices at one target). With more targets ``Z`` is widened in row
    slices of at most :data:`_CAST_BYTES` (into ``cast``, from :func:`cast_buffer`, when
    given) for a float64 GEMM, the column sums taken from the same slices while they are in
    cache (a separate ``Z.sum(axis=0, dtype=float64)`` of the float32 ``Z``, numpy's
    buffered casting reduction, measured 5% of a float32 block at p = 1024). The cost is
    O(rows p t), against the Gram's O(rows p^2).
    """
    if Z.dtype == np.float64:
        if sums is not None:
            sums += Z.sum(axis=0)
        return Z.T @ Y
    if Y.shape[1] <= CROSS_ROWS_MAX_TARGETS and Z.flags.c_contiguous:
        from ._cross_numba import cross_rows  # numba is imported by the first use

        outT = np.zeros((Y.shape[1], Z.shape[1]))
        with_sums = sums is not None
        cross_rows(Z, np.ascontiguousarray(Y, dtype=np.float64), outT,
                    sums if with_sums else np.empty(0), with_sums)
        return outT.T
    if cast is None or cast.shape[1] != Z.shape[1]:
        cast = cast_buffer(Z.shape[1], "float32")
    out = np.zeros((Z.shape[1], Y.shape[1]))
    step = cast.shape[0]
    for a in range(0, Z.shape[0], step):
        m = min(step, Z.shape[0] - a)
        np.copyto(cast[:m], Z[a:a + m])
        out += cast[:m].T @ Y[a:a + m]
        if sums is not None:
            sums += cast[:m].sum(axis=0)
    return out
