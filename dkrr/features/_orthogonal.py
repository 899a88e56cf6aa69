"""Orthogonal random features: ORF, ORF' and structured SORF (Yu et al. 2016).

* :class:`ORFProjection` (``method="orf"``): dense blocks ``W = S Q * scale`` (eq. 2).
* :class:`SORFProjection` (``method="sorf"``): ``W = sqrt(d') * scale * H_n D1 H_n D2 H_n D3``
  per block (eq. 5), applied with fast Walsh-Hadamard transforms, O(D) stored numbers.

Also :class:`HadamardBlockProjection`, the shared machinery of the projections built from
Hadamard transforms on zero-padded inputs (SORF here, Fastfood in ``_fastfood.py``): it
picks per input shape between the FWHT path and a dense GEMM with ``W`` regenerated
from the stored numbers (see :func:`prefer_dense`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import scipy.linalg

from .._params import check_choice, check_int
from ..errors import InvalidParameterError
from ._base import Projection, next_power_of_two
from ._hadamard import fwht
from ._rff import DenseProjection

__all__ = [
    "HadamardBlockProjection",
    "ORFProjection",
    "SORFProjection",
    "haar_orthogonal",
    "ROW_SAMPLING",
    "draw_block_rows",
    "prefer_dense",
]

_ROW_NORMS = ("chi", "fixed")
#: rules that pick the rows of a partial block (ALGORITHMS.md section 2.8, [CRW17])
ROW_SAMPLING = ("first", "with_replacement", "without_replacement")


def _check_row_norms(value: Any) -> str:
    return str(check_choice(value, "row_norms", list(_ROW_NORMS)))


def draw_block_rows(row_sampling: Any, n_components: int, padded: int, rng: np.random.Generator) -> np.ndarray:
    """Rows kept from the last, partial ``d' x d'`` block under a row-sampling rule.

    Full blocks keep all their ``d'`` rows; the partial block (``r = D mod d'`` rows,
    the whole map when ``D < d'``) keeps ``r`` of its ``d'`` rows: the first ``r``
    (``"first"``: no draw, an empty array is returned), ``r`` uniform with repetitions
    (``"with_replacement"``) or ``r`` distinct uniform rows, sorted
    (``"without_replacement"``). Nothing is drawn when ``D`` is a multiple of ``d'``.
    """
    rule = check_choice(row_sampling, "row_sampling", list(ROW_SAMPLING))
    r = int(n_components) % int(padded)
    if rule == "first" or r == 0:
        return np.empty(0, dtype=np.int64)
    if rule == "with_replacement":
        return rng.integers(0, padded, size=r, dtype=np.int64)
    return np.sort(rng.choice(padded, size=r, replace=False)).astype(np.int64)


def haar_orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-distributed ``d x d`` orthogonal matrix.

    QR of a Gaussian matrix with the signs of ``diag(R)`` folded into the columns of
    ``Q`` (without that correction ``Q`` is not Haar-distributed).
    """
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    signs = np.sign(np.diag(R))
    signs[signs == 0] = 1.0
    return Q * signs


# -- ORF ------------------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class ORFProjection(DenseProjection):
    """Orthogonal random features (Yu et al. 2016, eq. 2), stored densely.

    Per ``d x d`` block ``W = S Q * scale`` with ``Q`` Haar orthogonal and ``S``
    diagonal. ``ceil(D / d)`` independent blocks are stacked and the first ``D`` rows
    kept (the first ``D`` rows of one block when ``D < d``). No padding. Time
    O(n D d) per data block (one GEMM); stores the ``D x d`` matrix.

    Options
    -------
    row_norms : {"chi", "fixed"}, default "chi"
        ``"chi"``: ``S_ii`` i.i.d. chi(d) (norms of Gaussian rows, so each row of ``W``
        is distributed like a Gaussian row ``N(0, scale^2 I)``); ``"fixed"``:
        ``S = sqrt(d) I`` (ORF' in the paper).
    """

    method = "orf"
    options = {"row_norms": "chi"}

    @classmethod
    def _draw(cls, n_features_in, n_components, scale, rng, *, row_norms):
        row_norms = _check_row_norms(row_norms)
        d, D = n_features_in, n_components
        n_blocks = -(-D // d)
        blocks = []
        for _ in range(n_blocks):
            Q = haar_orthogonal(d, rng)
            if row_norms == "chi":
                s = np.sqrt(rng.chisquare(d, size=d))
            else:
                s = np.full(d, np.sqrt(d))
            blocks.append(s[:, None] * Q)
        weights = np.concatenate(blocks, axis=0)[:D]
        return cls(d, D, scale, weights)


# -- shared machinery of the Hadamard-based projections --------------------------------
#: relative cost of one FWHT-path element operation (per padded column and pass) versus
#: one GEMM multiply-add; fitted to measurements (benchmarks/README.md; see :func:`prefer_dense`).
_FWHT_PASS_COST = 8.5


def prefer_dense(
    n_features_in: int, n_components: int, padded: int, n_blocks: int, n_passes: float
) -> bool:
    """Whether a dense GEMM beats the FWHT path for one projection shape.

    Cost model per input row: the dense path does ``D * d`` multiply-adds (one BLAS
    GEMM); the FWHT path ``n_blocks * d' * n_passes`` element operations, where
    ``n_passes`` counts the log2(d') butterfly stages of every transform plus the
    elementwise passes (padding, sign flips, gathers, scaling), each weighted 8.5 GEMM
    multiply-adds. Dense is chosen when its cost is strictly lower.

    The weight 8.5 was fitted to measurements (``benchmarks/bench_fwht.py --paths``;
    the table is in benchmarks/README.md, "prefer_dense / use_dense of SORF and
    Fastfood").

    The rule in practice (float32 alike): dense for ``d' <= 128``, and for partial blocks
    (``D`` well below ``d'``); FWHTs from ``d' >= 256`` when ``D >= d'``. Storage stays O(D) either way: the dense
    ``W`` is a cache on the instance, regenerated from the stored numbers.
    """
    dense = n_components * n_features_in
    fast = n_blocks * padded * n_passes * _FWHT_PASS_COST
    return dense < fast


@dataclasses.dataclass(eq=False)
class HadamardBlockProjection(Projection):
    """Base of projections applied with FWHTs on the input zero-padded to ``d'``.

    Subclasses implement :meth:`_project_fast` (the FWHT path, returning the unscaled
    ``(n, n_blocks * d')`` block outputs and a per-row column scaling) and
    :meth:`_n_passes`. :meth:`project` chooses between the FWHT path and a dense GEMM
    with ``W`` regenerated once from the stored numbers (by running the FWHT path on
    the identity) and cached on the instance, not in :meth:`get_state`.
    """

    def __post_init__(self) -> None:
        self._dense_cache: dict[np.dtype, np.ndarray] = {}
        self._cast_cache: dict[tuple[str, np.dtype], np.ndarray] = {}

    # -- geometry ------------------------------------------------------------------------
    @staticmethod
    def _layout(n_features_in: int, n_components: int) -> tuple[int, int]:
        """``(d', n_blocks)``: the padded dimension and ``ceil(D / d')`` for a shape."""
        dp = next_power_of_two(n_features_in)
        return dp, -(-n_components // dp)

    @property
    def padded_features(self) -> int:
        """``d'``: the input dimension zero-padded to a power of two."""
        return self._layout(self.n_features_in, self.n_components)[0]

    @property
    def n_blocks(self) -> int:
        """Number of independent ``d' x d'`` blocks, ``ceil(D / d')``."""
        return self._layout(self.n_features_in, self.n_components)[1]

    def _n_passes(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check_rows(self) -> None:
        """Validate the ``rows`` field (row sampling) of a subclass that has one."""
        self.rows = np.ascontiguousarray(self.rows, dtype=np.int64)
        self.row_sampling = str(check_choice(self.row_sampling, "row_sampling", list(ROW_SAMPLING)))
        r = self.n_components % self.padded_features
        if self.rows.size and (self.rows.ndim != 1 or self.rows.size != r or self.rows.min() < 0
                               or self.rows.max() >= self.padded_features):
            raise InvalidParameterError(
                f"rows must hold {r} row indices in [0, {self.padded_features}) for the partial "
                f"block, got {self.rows!r}"
            )

    def _kept_rows(self) -> np.ndarray | None:
        """Indices of the kept rows among the ``n_blocks * d'`` block rows (``None``: the
        first ``D``)."""
        if not self.rows.size:
            return None
        full = (self.n_blocks - 1) * self.padded_features
        return np.concatenate([np.arange(full, dtype=np.int64), full + self.rows])

    def _select_rows(self, out: np.ndarray) -> np.ndarray:
        """The kept columns of block outputs ``out`` (n, n_blocks * d')."""
        kept = self._kept_rows()
        return out[:, : self.n_components] if kept is None else out[:, kept]

    def _cast(self, name: str, dtype: np.dtype) -> np.ndarray:
        key = (name, np.dtype(dtype))
        arr = self._cast_cache.get(key)
        if arr is None:
            arr = np.ascontiguousarray(self._float_field(name), dtype=dtype)
            self._cast_cache[key] = arr
        return arr

    def _float_field(self, name: str) -> np.ndarray:
        return np.asarray(getattr(self, name), dtype=np.float64)

    # -- fast path ----------------------------------------------------------------------
    def _signed_padded_input(self, X: np.ndarray, first_signs: np.ndarray) -> np.ndarray:
        """``(n, n_blocks, d')`` array: block b holds ``pad(X) * first_signs[b]``."""
        n, d = X.shape
        Y = np.empty((n, self.n_blocks, self.padded_features), dtype=X.dtype)
        np.multiply(X[:, None, :], first_signs[None, :, :d], out=Y[:, :, :d])
        Y[:, :, d:] = 0
        return Y

    def _project_fast(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- dense path ---------------------------------------------------------------------
    def _dense_wt(self, dtype: np.dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        wt = self._dense_cache.get(dtype)
        if wt is None:
            if np.dtype(np.float64) not in self._dense_cache:
                eye = np.eye(self.n_features_in, dtype=np.float64)
                self._dense_cache[np.dtype(np.float64)] = np.ascontiguousarray(
                    self._project_fast(eye)
                )
            wt = np.ascontiguousarray(self._dense_cache[np.dtype(np.float64)], dtype=dtype)
            self._dense_cache[dtype] = wt
        return wt

    def use_dense(self) -> bool:
        """Whether :meth:`project` uses the dense GEMM path for this shape."""
        return prefer_dense(
            self.n_features_in,
            self.n_components,
            self.padded_features,
            self.n_blocks,
            self._n_passes(),
        )

    def project(self, X: np.ndarray, out: np.ndarray | None = None, *, path: str = "auto") -> np.ndarray:
        """Return ``X @ W.T`` in the dtype of ``X``.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features_in), float32 or float64
        path : {"auto", "fast", "dense"}, default "auto"
            ``"fast"``: FWHTs on all rows of a block at once, O(n D log d');
            ``"dense"``: one GEMM with ``W`` regenerated from the stored numbers
            (cached on the instance); ``"auto"``: :meth:`use_dense` decides.
        out : ndarray, optional
            Buffer the dense path's GEMM writes into (:meth:`Projection.project`).
        """
        if path == "auto":
            path = "dense" if self.use_dense() else "fast"
        if path == "dense":
            return np.matmul(X, self._dense_wt(X.dtype), out=out)
        if path == "fast":
            return self._project_fast(X)
        raise InvalidParameterError(f"path must be 'auto', 'fast' or 'dense', got {path!r}")


# -- SORF -----------------------------------------------------------------------------
@dataclasses.dataclass(eq=False)
class SORFProjection(HadamardBlockProjection):
    """Structured orthogonal random features (Yu et al. 2016, eq. 5).

    Per ``d' x d'`` block (``d'`` = d zero-padded to a power of two)
    ``W = sqrt(d') * scale * H_n D_1 H_n D_2 ... H_n D_k`` with ``H_n = H / sqrt(d')``
    and ``D_i`` Rademacher diagonals; ``ceil(D / d')`` independent blocks stacked, first
    ``D`` rows kept, first ``d`` columns used (padding). Applied with ``k`` FWHTs per
    block: time O(n D log d'); stored numbers ``(k + [chi]) * ceil(D / d') * d'``, i.e.
    O(D + d).

    Options
    -------
    n_hd_blocks : int, default 3
        ``k``, the number of ``H_n D`` factors (3 in the paper; 1 and 2 are its
        ablations).
    row_norms : {"fixed", "chi"}, default "fixed"
        ``"fixed"``: every row has norm ``sqrt(d') * scale`` (the paper). ``"chi"``
        (beyond the paper): row ``i`` is rescaled to norm ``s_i * scale`` with ``s_i``
        i.i.d. chi(d'), the norm law of a Gaussian row in the padded dimension
        ``d'`` -- the analogue of ORF versus ORF'. The directions stay the Hadamard
        products' (not uniform), so the O(1/sqrt(d)) bias of SORF remains (plain at d = 3;
        ALGORITHMS.md 2.3).
    row_sampling : {"first", "with_replacement", "without_replacement"}, default "first"
        Which rows of the last, partial block are kept (all of the map when ``D < d'``):
        the first ``D mod d'``, or as many drawn uniformly with or without repetitions
        ([CRW17]; see :func:`draw_block_rows`). ``"first"`` draws nothing.

    Attributes
    ----------
    signs : ndarray of int8, shape (n_blocks, n_hd_blocks, d')
        Diagonals of ``D_1 .. D_k`` per block (``signs[b, 0]`` is ``D_1``, the factor
        applied last).
    norms : ndarray of float64, shape (n_blocks * d',) or (0,)
        The chi row norms ``s_i`` (empty for ``row_norms="fixed"``).
    rows : ndarray of int64, shape (D mod d',) or (0,)
        Kept rows of the partial block (empty: the first ones).
    """

    method = "sorf"
    options = {"n_hd_blocks": 3, "row_norms": "fixed", "row_sampling": "first"}

    signs: np.ndarray = dataclasses.field(default_factory=lambda: np.ones((0, 0, 0), np.int8))
    norms: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))
    row_sampling: str = "first"
    rows: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.signs = np.ascontiguousarray(self.signs, dtype=np.int8)
        self.norms = np.ascontiguousarray(self.norms, dtype=np.float64)
        dp = self.padded_features
        if self.signs.ndim != 3 or self.signs.shape[0] != self.n_blocks or self.signs.shape[2] != dp:
            raise InvalidParameterError(
                f"SORF signs must have shape (n_blocks={self.n_blocks}, k, d'={dp}), "
                f"got {self.signs.shape}"
            )
        if self.signs.shape[1] < 1:
            raise InvalidParameterError("SORF needs at least one H D factor")
        if self.norms.size not in (0, self.n_blocks * dp):
            raise InvalidParameterError(
                f"SORF norms must have {self.n_blocks * dp} entries or none, got {self.norms.size}"
            )
        self._check_rows()

    def get_state(self) -> dict[str, Any]:
        """Fields as plain data; ``row_sampling``/``rows`` only when the rule is not
        ``"first"``, so default SORF states (and model files) are those of before."""
        state = super().get_state()
        if self.row_sampling == "first":
            del state["row_sampling"], state["rows"]
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "SORFProjection":
        """Inverse of :meth:`get_state`; a state without ``row_sampling``/``rows`` is
        the ``"first"`` rule."""
        state = dict(state)
        if "row_sampling" not in state and "rows" not in state:
            state.update(row_sampling="first", rows=np.empty(0, np.int64))
        return super().from_state(state)

    @property
    def n_hd_blocks(self) -> int:
        """``k``, the number of ``H_n D`` factors."""
        return int(self.signs.shape[1])

    @property
    def row_norms(self) -> str:
        """``"chi"`` or ``"fixed"``."""
        return "chi" if self.norms.size else "fixed"

    @classmethod
    def _draw(cls, n_features_in, n_components, scale, rng, *, n_hd_blocks, row_norms, row_sampling):
        k = check_int(n_hd_blocks, "n_hd_blocks")
        row_norms = _check_row_norms(row_norms)
        d, D = n_features_in, n_components
        dp, n_blocks = cls._layout(d, D)
        signs = (2 * rng.integers(0, 2, size=(n_blocks, k, dp), dtype=np.int8) - 1).astype(np.int8)
        if row_norms == "chi":
            norms = np.sqrt(rng.chisquare(dp, size=n_blocks * dp))
        else:
            norms = np.empty(0)
        rows = draw_block_rows(row_sampling, D, dp, rng)  # after the SORF draws: "first" draws nothing
        return cls(d, D, scale, signs, norms, row_sampling, rows)

    def _n_passes(self) -> float:
        # k transforms of log2(d') stages, k sign flips, padding copy and final scaling.
        dp = self.padded_features
        return self.n_hd_blocks * (np.log2(dp) + 1) + 2

    def _row_factors(self) -> np.ndarray:
        """Multiplier of every block output row (unnormalized H in the fast path)."""
        dp = self.padded_features
        k = self.n_hd_blocks
        if self.norms.size:
            return self.scale * self.norms * dp ** (-k / 2.0)
        return np.full(self.n_blocks * dp, self.scale * dp ** ((1.0 - k) / 2.0))

    def _float_field(self, name: str) -> np.ndarray:
        if name == "factors":
            kept = self._kept_rows()
            return self._row_factors()[: self.n_components] if kept is None else self._row_factors()[kept]
        return super()._float_field(name)

    def _project_fast(self, X: np.ndarray) -> np.ndarray:
        n = X.shape[0]
        dp, nb, k = self.padded_features, self.n_blocks, self.n_hd_blocks
        signs = self._cast("signs", X.dtype)
        # rightmost factor D_k first
        Y = self._signed_padded_input(X, signs[:, k - 1, :])
        flat = Y.reshape(n * nb, dp)
        fwht(flat)
        for j in range(k - 2, -1, -1):
            Y *= signs[None, :, j, :]
            fwht(flat)
        out = self._select_rows(Y.reshape(n, nb * dp))
        return np.multiply(out, self._cast("factors", X.dtype))

    def matrix(self) -> np.ndarray:
        dp, d, k = self.padded_features, self.n_features_in, self.n_hd_blocks
        Hn = scipy.linalg.hadamard(dp).astype(np.float64) / np.sqrt(dp)
        blocks = []
        for b in range(self.n_blocks):
            M = np.eye(dp)
            for j in range(k):
                M = M @ Hn @ np.diag(self.signs[b, j].astype(np.float64))
            if self.norms.size:
                M = np.diag(self.norms[b * dp : (b + 1) * dp]) @ M
            else:
                M = np.sqrt(dp) * M
            blocks.append(self.scale * M)
        return self._select_rows(np.concatenate(blocks, axis=0).T).T[:, :d]
