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
"""

from __future__ import annotations

import functools

import numpy as np

from ..errors import InvalidParameterError

__all__ = ["GROUP_COLS", "GROUP_ROWS", "PANEL_ROWS", "add_packed_gram", "pack_gram", "packed_length", "panels",
           "unpack_gram", "work_length"]

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
