"""Structured random orthogonal matrices (ROMs) of Choromanski, Rowland and Weller [CRW17].

:class:`ROMProjection` (``method="rom"``): per ``d' x d'`` block

    W = sqrt(d') * scale * H_n D_1 H_n D_2 ... H_n D_k        (first d columns)

with ``H_n = H / sqrt(d')`` the orthonormal Walsh-Hadamard matrix and diagonals ``D_i``
of modulus one drawn from {-1, +1} (``"rademacher"``: then ``W`` is SORF with fixed row
norms, draw for draw), from {+1, -1, +i, -i} (``"complex4"``) or uniformly on the unit
circle (``"unit_circle"``). A complex ``W x`` is returned as real columns
``[Re(W x), Im(W x)]`` (width ``2 D``), so that the real inner product of two outputs is
``Re <W x, W y>``, the real part of the Hermitian one. Rows of the last, partial block
are chosen by a row-sampling rule (:func:`~dkrr.features._orthogonal.draw_block_rows`).

ALGORITHMS.md section 2.8 has the mathematics (the dot-product estimator and its MSE).
"""

from __future__ import annotations

import dataclasses
import numpy as np
import scipy.linalg

from .._params import check_choice, check_int
from ..errors import InvalidParameterError
from ._hadamard import fwht
from ._orthogonal import HadamardBlockProjection, draw_block_rows

__all__ = ["ROM_DIAGONALS", "ROMProjection", "is_complex_rom"]

#: laws of the diagonal entries: real signs, the four complex units, the unit circle
ROM_DIAGONALS = ("rademacher", "complex4", "unit_circle")


def is_complex_rom(method, rom_diagonal) -> bool:
    """Whether the options ask for a complex ROM (features ``[Re, Im]``: 2 D columns)."""
    return method == "rom" and rom_diagonal in ("complex4", "unit_circle")

# value of a complex4 code c: i ** c
_C4_RE = np.array([1.0, 0.0, -1.0, 0.0])
_C4_IM = np.array([0.0, 1.0, 0.0, -1.0])


@dataclasses.dataclass(eq=False)
class ROMProjection(HadamardBlockProjection):
    """Structured random orthogonal matrix ``sqrt(d') prod_i H_n D_i`` [CRW17].

    ``ceil(D / d')`` independent blocks are stacked; full blocks keep all ``d'`` rows, the
    last partial block (the whole map when ``D < d'``) keeps ``D mod d'`` rows chosen by
    ``row_sampling``. Applied with ``k`` FWHTs per block (``2 k`` for a complex diagonal:
    the real and imaginary parts are transformed separately); time O(n D log d'), stored
    numbers ``k * ceil(D / d') * d'`` plus the sampled rows.

    :meth:`project` returns ``X @ W.T`` for a real diagonal and the real columns
    ``[Re(X @ W.T), Im(X @ W.T)]``, shape ``(n, 2 D)``, for a complex one;
    :meth:`matrix` returns ``W`` itself (complex128 for a complex diagonal).

    Options
    -------
    n_hd_blocks : int, default 3
        ``k``, the number of ``H_n D_i`` factors.
    rom_diagonal : {"rademacher", "complex4", "unit_circle"}, default "rademacher"
        Law of the diagonal entries: uniform on {-1, +1}, on {+1, -1, +i, -i}, or on the
        unit circle. The complex ones apply only to ``kernel="linear"``.
    row_sampling : {"first", "with_replacement", "without_replacement"}, default "first"
        Rows kept from the partial block (see
        :func:`~dkrr.features._orthogonal.draw_block_rows`).

    Attributes
    ----------
    signs : ndarray of int8, shape (n_blocks, k, d') or (0, 0, 0)
        ``"rademacher"``: the signs; ``"complex4"``: codes c with entry ``i ** c``;
        empty for ``"unit_circle"``. ``[b, 0]`` is ``D_1``, the factor applied last.
    angles : ndarray of float64, shape (n_blocks, k, d') or (0,)
        ``"unit_circle"``: entry ``exp(i angle)``; empty otherwise.
    rows : ndarray of int64, shape (D mod d',) or (0,)
        Kept rows of the partial block (empty: the first ones).
    """

    method = "rom"
    options = {"n_hd_blocks": 3, "rom_diagonal": "rademacher", "row_sampling": "first"}

    rom_diagonal: str = "rademacher"
    signs: np.ndarray = dataclasses.field(default_factory=lambda: np.ones((0, 0, 0), np.int8))
    angles: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0))
    row_sampling: str = "first"
    rows: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))

    def __post_init__(self) -> None:
        super().__post_init__()
        self.rom_diagonal = str(check_choice(self.rom_diagonal, "rom_diagonal", list(ROM_DIAGONALS)))
        self.signs = np.ascontiguousarray(self.signs, dtype=np.int8)
        self.angles = np.ascontiguousarray(self.angles, dtype=np.float64)
        stored = self.angles if self.rom_diagonal == "unit_circle" else self.signs
        dp = self.padded_features
        if stored.ndim != 3 or stored.shape[0] != self.n_blocks or stored.shape[2] != dp or stored.shape[1] < 1:
            raise InvalidParameterError(
                f"ROM diagonals ({'angles' if self.rom_diagonal == 'unit_circle' else 'signs'}) must "
                f"have shape (n_blocks={self.n_blocks}, k >= 1, d'={dp}), got {stored.shape}"
            )
        allowed = {"rademacher": (-1, 1), "complex4": (0, 1, 2, 3)}.get(self.rom_diagonal)
        if allowed is not None and not np.isin(self.signs, allowed).all():
            raise InvalidParameterError(
                f"ROM {self.rom_diagonal} diagonals must hold only {list(allowed)}, got values "
                f"{sorted(set(np.unique(self.signs).tolist()) - set(allowed))}"
            )
        if allowed is None and (self.signs.size or not np.isfinite(self.angles).all()):
            raise InvalidParameterError("ROM unit_circle diagonals are finite angles (and no signs)")
        self._check_rows()

    @property
    def n_hd_blocks(self) -> int:
        """``k``, the number of ``H_n D`` factors."""
        return int((self.angles if self.rom_diagonal == "unit_circle" else self.signs).shape[1])

    @property
    def is_complex(self) -> bool:
        """Whether ``W`` is complex (then :meth:`project` has ``2 D`` columns)."""
        return self.rom_diagonal != "rademacher"

    @classmethod
    def _draw(cls, n_features_in, n_components, scale, rng, *, n_hd_blocks, rom_diagonal, row_sampling):
        k = check_int(n_hd_blocks, "n_hd_blocks")
        rom_diagonal = check_choice(rom_diagonal, "rom_diagonal", list(ROM_DIAGONALS))
        d, D = n_features_in, n_components
        dp, n_blocks = cls._layout(d, D)
        angles = np.empty(0)
        if rom_diagonal == "rademacher":  # the draw of SORF, so that rom == sorf(row_norms="fixed")
            signs = (2 * rng.integers(0, 2, size=(n_blocks, k, dp), dtype=np.int8) - 1).astype(np.int8)
        elif rom_diagonal == "complex4":
            signs = rng.integers(0, 4, size=(n_blocks, k, dp), dtype=np.int8)
        else:
            signs = np.ones((0, 0, 0), np.int8)
            angles = rng.uniform(0.0, 2.0 * np.pi, size=(n_blocks, k, dp))
        rows = draw_block_rows(row_sampling, D, dp, rng)
        return cls(d, D, scale, rom_diagonal, signs, angles, row_sampling, rows)

    # -- the diagonals ----------------------------------------------------------------------
    def _float_field(self, name: str) -> np.ndarray:
        if name == "diag_re":
            if self.rom_diagonal == "rademacher":
                return self.signs.astype(np.float64)
            if self.rom_diagonal == "complex4":
                return _C4_RE[self.signs]
            return np.cos(self.angles)
        if name == "diag_im":
            if self.rom_diagonal == "complex4":
                return _C4_IM[self.signs]
            return np.sin(self.angles)
        return super()._float_field(name)

    def diagonals(self) -> np.ndarray:
        """The entries of ``D_1 .. D_k`` per block, shape (n_blocks, k, d'): float64 for
        ``"rademacher"``, complex128 otherwise."""
        re = self._float_field("diag_re")
        return re if not self.is_complex else re + 1j * self._float_field("diag_im")

    def _factor(self) -> float:
        """Multiplier of the unnormalised-``H`` block outputs: ``scale * d'^((1 - k) / 2)``."""
        return self.scale * self.padded_features ** ((1.0 - self.n_hd_blocks) / 2.0)

    # -- application ------------------------------------------------------------------------
    def _n_passes(self) -> float:
        # as SORF (k transforms, k multiplications, padding, scaling); twice for complex,
        # whose dense W^T also has twice the columns, so the dense/FWHT choice is SORF's
        dp = self.padded_features
        return self.n_hd_blocks * (np.log2(dp) + 1) + 2

    def _project_fast(self, X: np.ndarray) -> np.ndarray:
        n = X.shape[0]
        dp, nb, k = self.padded_features, self.n_blocks, self.n_hd_blocks
        re = self._cast("diag_re", X.dtype)
        factor = X.dtype.type(self._factor())
        if not self.is_complex:
            Y = self._signed_padded_input(X, re[:, k - 1, :])
            flat = Y.reshape(n * nb, dp)
            fwht(flat)
            for j in range(k - 2, -1, -1):
                Y *= re[None, :, j, :]
                fwht(flat)
            return np.multiply(self._select_rows(Y.reshape(n, nb * dp)), factor)
        im = self._cast("diag_im", X.dtype)
        # R[0] real, R[1] imaginary part; both transformed by one FWHT call per factor
        R = np.empty((2, n, nb, dp), dtype=X.dtype)
        R[0] = self._signed_padded_input(X, re[:, k - 1, :])
        R[1] = self._signed_padded_input(X, im[:, k - 1, :])
        flat = R.reshape(2 * n * nb, dp)
        fwht(flat)
        as_, bs = (np.empty_like(R[0]) for _ in range(2)) if k > 1 else (None, None)
        for j in range(k - 2, -1, -1):
            c, s = re[None, :, j, :], im[None, :, j, :]
            # (a + i b)(c + i s) = (a c - b s) + i (a s + b c)
            np.multiply(R[0], s, out=as_)
            np.multiply(R[1], s, out=bs)
            R[0] *= c
            R[0] -= bs
            R[1] *= c
            R[1] += as_
            fwht(flat)
        D = self.n_components
        out = np.empty((n, 2 * D), dtype=X.dtype)
        np.multiply(self._select_rows(R[0].reshape(n, nb * dp)), factor, out=out[:, :D])
        np.multiply(self._select_rows(R[1].reshape(n, nb * dp)), factor, out=out[:, D:])
        return out

    def matrix(self) -> np.ndarray:
        """Dense ``W`` (n_components, n_features_in): float64 for the real diagonal,
        complex128 for a complex one (the output of :meth:`project` is then
        ``[X @ W.real.T, X @ W.imag.T]``)."""
        dp, d, k = self.padded_features, self.n_features_in, self.n_hd_blocks
        Hn = scipy.linalg.hadamard(dp).astype(np.float64) / np.sqrt(dp)
        diag = self.diagonals()
        blocks = []
        for b in range(self.n_blocks):
            M = np.eye(dp, dtype=diag.dtype)
            for j in range(k):
                M = M @ Hn @ np.diag(diag[b, j])
            blocks.append(self.scale * np.sqrt(dp) * M)
        return self._select_rows(np.concatenate(blocks, axis=0).T).T[:, :d]
