"""The Gram ``Z^T Z`` of a streamed pass in packed symmetric form: its upper triangle in panels.

Inside a reduction (the partial results of the block tasks, the chains' running sums and
the combines of the tree) each fold's Gram is kept as the upper triangle of ``G``, cut
into *panels* of ``nb`` rows (:data:`PANEL_ROWS`; docs/ALGORITHMS.md section 3.2)::

    panel i = G[a_i:b_i, a_i:p]      a_i = i nb,  b_i = min(p, a_i + nb),  i = 0 .. ceil(p / nb) - 1

stored one after the other, each C-contiguous, in one flat float64 vector of

    L = p (p + 1) / 2 + sum_i r_i (r_i - 1) / 2  <=  p (p + nb) / 2      (r_i = b_i - a_i)

numbers: the upper triangle and the strict lower triangles of the ``nb x nb`` diagonal
blocks. ``K`` folds are a ``(K, L)`` array, so sums over folds, fold slices and the
in-place sums of the reduction work on it as on the full ``(K, p, p)`` array, at about
half the memory. A sub-block of features ``Z`` is added a group of panels at a time
(:func:`add_packed_gram`, groups of :data:`GROUP_ROWS` rows ``[A, B)``): the group's
diagonal block ``Z_g^T Z_g`` by numpy's SYRK, the columns right of it by GEMMs
``Z_g^T Z[:, C:E]`` of at most :data:`GROUP_COLS` columns, each product written into one
reused work buffer (at most ``GROUP_ROWS x GROUP_COLS`` numbers, 16 MiB in float64;
there is no ``p x p`` temporary) and added into the panels it covers. numpy's matmul
releases the GIL, so the block tasks of the threaded scheduler overlap. The summed result
is unpacked once, on the client, to full and exactly symmetric ``p x p`` matrices
(:func:`unpack_gram`: the upper triangle is mirrored), which is what the solvers and the
cross-validation read.

A block task adds its sub-blocks through :class:`PackedGramSum`. Where a ``p x p``
matrix of the features' dtype fits the feature buffer's budget (``itemsize p^2 <=
max_block_bytes``: p <= 2896 in float64, 4096 in float32 at the default 64 MiB) and every
BLAS thread pool of the process has one thread (a Dask worker's), it takes the direct
path (:func:`direct_gram`). With float64 features and at least ``p`` rows a fold it sums
a fold's sub-blocks by BLAS's DSYRK with ``beta = 1`` straight into that matrix and adds
its upper triangle into the fold's panels once, when the fold's rows end. numpy's ``Z.T
@ Z`` cannot accumulate (it writes a fresh product and mirrors it): the direct sum takes
0.95x / 0.89x / 0.87x the grouped products' time at p = 1024 / 2048 / 4096, the bare
in-place DSYRK's (benchmarks/README.md). With float32 features each sub-block's SSYRK
(``beta = 0``: a float32 sum of one sub-block's rows, as the grouped products' are)
writes the upper triangle of a float32 ``p x p`` matrix, which is added into the float64
panels at once; it saves the grouped products' mirrored diagonal blocks and smaller
calls (measured on 4,096-row sub-blocks: 1.00x / 0.94x / 0.91x their time at p = 1024 /
2048 / 4096, within 1-3% of the bare SSYRK; benchmarks/README.md). SYRK is called through
scipy's Cython BLAS by ctypes, which releases the GIL (scipy's f2py ``dsyrk`` holds it). With several BLAS threads the
two libraries' pools (numpy's and scipy's OpenBLAS) spin against each other: there the
grouped products stay.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from ..errors import InvalidParameterError

__all__ = ["GROUP_COLS", "GROUP_ROWS", "PANEL_ROWS", "PackedGramSum", "add_packed_gram", "direct_gram",
           "gram_work_bytes", "pack_gram", "packed_length", "panels", "unpack_gram", "work_length"]

#: rows of a stored panel. The strict lower triangles of the diagonal blocks are stored
#: too: ``p (nb - 1) / 2`` numbers, 1.5% of the upper triangle at p = 8192 with 128 rows.
PANEL_ROWS = 128

#: rows and columns of one product of :func:`add_packed_gram`: the panels are updated in
#: groups of ``GROUP_ROWS`` rows, the columns right of a group's diagonal block in chunks
#: of ``GROUP_COLS``. One GEMM per panel (``nb`` rows) streams the whole width of ``Z``
#: through BLAS's packing buffers once per panel: 1.16x the time of the full
#: ``G += Z.T @ Z`` at p = 1024 with 256-row panels; products of 1024 x 2048 ran at
#: 0.98-1.05x at p = 1024-2048 and 0.54x (float64) / 0.67x (float32) at p = 8192, where
#: the full Gram's p x p temporary is faulted in, mirrored and added for every sub-block.
#: Measurement: benchmarks/README.md.
GROUP_ROWS = 1024
GROUP_COLS = 2048


@functools.lru_cache(maxsize=64)
def panels(p: int, nb: int = PANEL_ROWS) -> tuple[tuple[int, int, int], ...]:
    """``(a_i, b_i, offset_i)`` of every panel of a packed ``p x p`` Gram (see the module)."""
    if p < 1 or nb < 1:
        raise InvalidParameterError(f"a packed Gram needs p >= 1 and nb >= 1, got p={p!r}, nb={nb!r}")
    out, offset = [], 0
    for a in range(0, p, nb):
        b = min(p, a + nb)
        out.append((a, b, offset))
        offset += (b - a) * (p - a)
    return tuple(out)


def packed_length(p: int, nb: int = PANEL_ROWS) -> int:
    """``L``: numbers of one packed ``p x p`` Gram, ``p (p + 1) / 2 + sum_i r_i (r_i - 1) / 2``."""
    a, b, offset = panels(int(p), int(nb))[-1]
    return offset + (b - a) * (int(p) - a)


def _panel(Gk: np.ndarray, p: int, a: int, b: int, offset: int) -> np.ndarray:
    """The panel ``G[a:b, a:p]`` of the packed fold ``Gk`` (L,), as a C-contiguous view."""
    return Gk[offset : offset + (b - a) * (p - a)].reshape(b - a, p - a)


def _group_rows(nb: int) -> int:
    """Rows of a group of panels: :data:`GROUP_ROWS` rounded down to whole panels."""
    return nb * max(1, GROUP_ROWS // nb)


def work_length(p: int, nb: int = PANEL_ROWS) -> int:
    """Numbers of the work buffer of :func:`add_packed_gram` for ``p`` features."""
    n = min(int(p), _group_rows(nb))
    return n * min(int(p), max(n, GROUP_COLS))


def add_packed_gram(Gk: np.ndarray, Z: np.ndarray, work: np.ndarray | None = None,
                    nb: int = PANEL_ROWS) -> None:
    """``Gk += Z^T Z`` in packed form, for one fold ``Gk`` (L,) float64 and a sub-block ``Z``.

    ``Z`` is C-contiguous (rows, p), float64 or float32; a float32 ``Z`` gives float32
    products (SSYRK, SGEMM) added into the float64 ``Gk``. The panels are updated a group
    of :data:`GROUP_ROWS` rows (whole panels) at a time: the group's diagonal block by one SYRK, the
    columns right of it by GEMMs of at most :data:`GROUP_COLS` columns, each product
    added into the panels it covers. ``work`` is a reusable buffer of at least
    :func:`work_length` numbers of ``Z``'s dtype (allocated here when None).
    """
    rows, p = Z.shape
    if Gk.ndim != 1 or Gk.shape[0] != packed_length(p, nb):
        raise InvalidParameterError(
            f"a packed Gram of p={p} features has {packed_length(p, nb)} numbers per fold, got an "
            f"array of shape {Gk.shape}"
        )
    if work is None:
        work = np.empty(work_length(p, nb), dtype=Z.dtype)
    views = [(a, b, _panel(Gk, p, a, b, offset)) for a, b, offset in panels(p, nb)]
    step = _group_rows(nb)
    for A in range(0, p, step):
        B = min(p, A + step)
        group = [(a, b, P) for a, b, P in views if A <= a < B]
        Zg = Z[:, A:B]
        n = B - A
        tmp = work[: n * n].reshape(n, n)
        np.matmul(Zg.T, Zg, out=tmp)  # a matrix times its own transpose: numpy calls SYRK
        for a, b, P in group:
            P[:, : B - a] += tmp[a - A : b - A, a - A :]
        for C in range(B, p, GROUP_COLS):
            E = min(p, C + GROUP_COLS)
            tmp = work[: n * (E - C)].reshape(n, E - C)
            np.matmul(Zg.T, Z[:, C:E], out=tmp)
            for a, b, P in group:
                P[:, C - a : E - a] += tmp[a - A : b - A]


def direct_gram_fits(p: int, max_block_bytes: int, dtype=np.float64) -> bool:
    """Whether a ``p x p`` accumulator of ``dtype`` fits the budget of the feature buffer
    (``itemsize p^2 <= max_block_bytes``): the size condition of :func:`direct_gram`."""
    return np.dtype(dtype).itemsize * int(p) * int(p) <= int(max_block_bytes)


def gram_work_bytes(p: int, max_block_bytes: int) -> int:
    """Bytes of a block task's Gram work buffers at most (the memory estimate's part): the
    grouped products' buffer, or the ``p x p`` accumulator where it may be used: float64's
    ``8 p^2`` where that fits the budget, else float32's ``4 p^2`` where that does (the
    estimate is made for either precision, so it takes the larger)."""
    direct = 8 * p * p if direct_gram_fits(p, max_block_bytes) else (
        4 * p * p if direct_gram_fits(p, max_block_bytes, np.float32) else 0)
    return max(8 * work_length(p), direct)


def direct_gram(p: int, rows: int, n_folds: int, dtype, max_block_bytes: int) -> bool:
    """Whether a block of ``rows`` rows in ``n_folds`` folds sums its Gram by the SYRK of
    :class:`PackedGramSum` into a ``p x p`` matrix rather than the grouped products:
    :func:`direct_gram_fits` for the features' dtype, one BLAS thread per library
    (:func:`dkrr._blas.blas_single_threaded`) and, for float64 features (summed in that
    matrix over a fold's sub-blocks), at least ``p`` rows a fold on average (the final
    addition into the panels is then at most a few percent of the products). A float32
    sub-block's product is added into the panels at once, as the grouped products' are,
    so there no row count is asked."""
    from .._blas import blas_single_threaded

    dtype = np.dtype(dtype)
    if dtype not in (np.float64, np.float32) or not direct_gram_fits(p, max_block_bytes, dtype):
        return False
    return (dtype == np.float32 or int(rows) >= int(n_folds) * int(p)) and blas_single_threaded()


_SYRK_TYPES = {np.dtype(np.float64): ("dsyrk", ctypes.c_double), np.dtype(np.float32): ("ssyrk", ctypes.c_float)}


@functools.lru_cache(maxsize=2)
def _syrk(dtype):
    """DSYRK or SSYRK of scipy's Cython BLAS as a ctypes function (ctypes releases the GIL)."""
    from numba.extending import get_cython_function_address

    name, scalar = _SYRK_TYPES[np.dtype(dtype)]
    int_p, real_p, char_p = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(scalar), ctypes.c_char_p
    prototype = ctypes.CFUNCTYPE(None, char_p, char_p, int_p, int_p, real_p, ctypes.c_void_p, int_p,
                                 real_p, ctypes.c_void_p, int_p)
    return prototype(get_cython_function_address("scipy.linalg.cython_blas", name)), scalar


def syrk_upper(C: np.ndarray, Z: np.ndarray, beta: float) -> None:
    """``C = beta C + Z^T Z`` on the upper triangle of the C-contiguous ``p x p`` ``C``
    (its strict lower triangle untouched), ``Z`` C-contiguous ``(rows, p)`` of ``C``'s
    dtype, float64 (DSYRK) or float32 (SSYRK, float32 sums): one SYRK, without holding
    the GIL.

    In column-major terms ``Z`` is the ``p x rows`` matrix ``Z^T`` and ``C`` is ``C^T``,
    so ``uplo = "L"``, ``trans = "N"`` fill ``C^T``'s lower triangle, ``C``'s upper one.
    """
    rows, p = Z.shape
    if not (C.dtype == Z.dtype and C.dtype in _SYRK_TYPES and C.shape == (p, p) and C.flags.c_contiguous
            and Z.flags.c_contiguous):
        raise InvalidParameterError(
            f"syrk_upper needs a C-contiguous ({p}, {p}) C and a C-contiguous Z of one dtype, float64 or "
            f"float32, got {C.dtype} {C.shape} and {Z.dtype} {Z.shape}"
        )
    syrk, scalar = _syrk(C.dtype)
    # BLAS takes k = 0 rows (C = beta C); leading dimensions must be at least 1
    n, k, ld = ctypes.c_int(p), ctypes.c_int(rows), ctypes.c_int(max(1, p))
    one, b = scalar(1.0), scalar(beta)
    syrk(b"L", b"N", ctypes.byref(n), ctypes.byref(k), ctypes.byref(one), Z.ctypes.data, ctypes.byref(ld),
         ctypes.byref(b), C.ctypes.data, ctypes.byref(ld))


class PackedGramSum:
    """Adds the feature sub-blocks of one block task into the packed fold Grams ``G`` (K, L).

    ``direct`` (:func:`direct_gram`): with float64 features a fold's sub-blocks, which
    come one after the other (the rows are sorted by fold), are summed by
    :func:`syrk_upper` into one ``p x p`` float64 matrix, whose upper triangle is added
    into the fold's panels when the next fold begins and at :meth:`close`; with float32
    features each sub-block's SSYRK overwrites a ``p x p`` float32 matrix whose upper
    triangle is added into the panels at once. Else each sub-block goes through
    :func:`add_packed_gram` (grouped products, any dtype). Either way the sums are float64
    and the result is the same to rounding (float32: each sub-block's product is a float32
    sum, by every path).
    """

    def __init__(self, G: np.ndarray, p: int, dtype, direct: bool = False, nb: int = PANEL_ROWS):
        self.G, self.p, self.nb = G, int(p), int(nb)
        self.direct = bool(direct)
        self.dtype = np.dtype(dtype)
        # the strict lower triangle is never written: zeros, added into the diagonal blocks'
        # stored lower triangles (which unpack_gram ignores)
        self._full = np.zeros((self.p, self.p), self.dtype) if self.direct else None
        self._work = None if self.direct else np.empty(work_length(self.p, self.nb), dtype)
        self._fold = None

    def add(self, k: int, Z: np.ndarray) -> None:
        """``G[k] += Z^T Z`` (in the packed panels at once, or at the fold's end)."""
        if not self.direct:
            add_packed_gram(self.G[k], Z, self._work, self.nb)
            return
        if self.dtype == np.float32:  # one sub-block's float32 sum, into the float64 panels now
            syrk_upper(self._full, np.ascontiguousarray(Z, dtype=np.float32), 0.0)
            self._into_panels(k)
            return
        if self._fold is not None and k != self._fold:
            self.close()
        syrk_upper(self._full, np.ascontiguousarray(Z, dtype=np.float64), 0.0 if self._fold is None else 1.0)
        self._fold = k

    def close(self) -> None:
        """Add the pending product into its fold's panels (direct mode; call after the last sub-block)."""
        if self._fold is not None:
            self._into_panels(self._fold)
            self._fold = None

    def _into_panels(self, k: int) -> None:
        """Add the upper triangle of the ``p x p`` matrix into fold ``k``'s panels."""
        Gk, p, full = self.G[k], self.p, self._full
        for a, b, offset in panels(p, self.nb):
            _panel(Gk, p, a, b, offset)[...] += full[a:b, a:]


def unpack_gram(G: np.ndarray, p: int, nb: int = PANEL_ROWS) -> np.ndarray:
    """Full Grams (K, p, p) from packed ones (K, L): the upper triangle, mirrored.

    Each diagonal block is taken from its upper triangle too, so the result is exactly
    symmetric whatever rounding the stored lower triangles of the diagonal blocks carry.
    """
    K = G.shape[0]
    if G.ndim != 2 or G.shape[1] != packed_length(p, nb):
        raise InvalidParameterError(f"packed Grams of p={p} features have shape (K, {packed_length(p, nb)}), "
                                    f"got {G.shape}")
    out = np.empty((K, p, p))
    for k in range(K):
        for a, b, offset in panels(p, nb):
            P = _panel(G[k], p, a, b, offset)
            r = b - a
            out[k, a:b, b:] = P[:, r:]
            out[k, b:, a:b] = P[:, r:].T
            upper = np.triu(P[:, :r])
            out[k, a:b, a:b] = upper + np.triu(P[:, :r], 1).T
    return out


def pack_gram(G: np.ndarray, nb: int = PANEL_ROWS) -> np.ndarray:
    """Packed Grams (K, L) of full ones (K, p, p): their upper-triangle panels (the stored
    lower triangles of the diagonal blocks are copied as they are)."""
    K, p, _ = G.shape
    out = np.empty((K, packed_length(p, nb)))
    for k in range(K):
        for a, b, offset in panels(p, nb):
            _panel(out[k], p, a, b, offset)[...] = G[k, a:b, a:]
    return out
