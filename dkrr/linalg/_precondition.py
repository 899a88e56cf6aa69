"""Randomized Nystrom preconditioner of ``A + mu I`` (Frangella, Tropp & Udell 2023).

For a positive semi-definite ``A`` (p x p) known only through products, a rank-``l``
Nystrom approximation ``A_nys = U diag(lam) U^T`` is built from one product ``Y = A Q``
with a random orthonormal test matrix ``Q`` (p x l), and the preconditioner of the
shifted system ``(A + mu I) x = b`` is (FTU23, eq. 5.3)::

    P^-1 = (lam_l + mu) U (diag(lam) + mu I)^-1 U^T + (I - U U^T)

where ``lam_l`` is the smallest kept eigenvalue. Applying it costs ``O(p l)`` per
right-hand side and it holds ``U`` (p x l), never a p x p matrix. The construction is
FTU23's stable Algorithm 2.1 (shift ``nu``, Cholesky, SVD):
``nu = sqrt(p) eps ||Y||_2``, ``Y_nu = Y + nu Q``, ``C = chol(Q^T Y_nu)``,
``B = Y_nu C^-1``, ``B = U Sigma V^T`` (thin SVD), ``lam = max(0, Sigma^2 - nu)``.

In dkrr the product is streamed: each block task computes ``Z_b^T (Z_b G)`` with the
Gaussian ``G`` (p x l) regenerated from a seed, and ``Q`` follows from the thin QR
``G = Q R`` on the client, so ``A Q = (A G) R^-1`` (:func:`nystrom_from_sketch`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.linalg

__all__ = ["NystromPreconditioner", "gaussian_test_matrix", "nystrom_from_sketch"]

_EPS = np.finfo(np.float64).eps


def gaussian_test_matrix(seed: int, p: int, rank: int) -> np.ndarray:
    """The Gaussian test matrix ``G`` (p, rank), float64, drawn from ``seed`` alone (every
    block task and the client draw the same one)."""
    return np.random.default_rng(int(seed)).standard_normal((int(p), int(rank)))


@dataclasses.dataclass(eq=False)
class NystromPreconditioner:
    """``P^-1 = (lam_l + mu) U (diag(lam) + mu)^-1 U^T + (I - U U^T)`` (FTU23, eq. 5.3).

    Attributes
    ----------
    U : ndarray (p, l)
        Orthonormal eigenvectors of the Nystrom approximation.
    lam : ndarray (l,)
        Its eigenvalues, descending, ``>= 0``.
    mu : float
        The shift of the system (the ridge ``alpha``), ``> 0``.
    """

    U: np.ndarray
    lam: np.ndarray
    mu: float

    def apply(self, R: np.ndarray) -> np.ndarray:
        """``P^-1 R`` for a block of vectors ``R`` (p, r)."""
        return self.apply_columns(R, np.full(R.shape[1], self.mu), np.ones(R.shape[1]))

    def apply_columns(self, R: np.ndarray, shifts: np.ndarray, scales: np.ndarray) -> np.ndarray:
        """``P_j^-1 r_j`` for every column ``r_j`` of ``R`` (p, r), each with its own system.

        Column ``j`` is preconditioned for ``scales[j] A + shifts[j] I``: the same factor
        ``U`` with eigenvalues ``scales[j] lam`` and shift ``shifts[j]`` (eq. 5.3), so one
        sketch serves every alpha of a grid and every cross-validation fold, whose
        training Gram is about ``(n - n_k) / n`` times the total's.
        """
        if self.U.shape[1] == 0:
            return R.copy()
        lam = self.lam[:, None] * np.asarray(scales, dtype=np.float64)[None, :]  # (l, r)
        shifts = np.asarray(shifts, dtype=np.float64)[None, :]
        scale = (lam[-1:] + shifts) / (lam + shifts) - 1.0
        return R + self.U @ (scale * (self.U.T @ R))


def nystrom_from_sketch(S: np.ndarray, G: np.ndarray, mu: float) -> NystromPreconditioner:
    """The preconditioner from the streamed sketch ``S = A G`` and the test matrix ``G``.

    Parameters
    ----------
    S : ndarray (p, l)
        ``A G`` (for a centred problem, the centred product).
    G : ndarray (p, l)
        The Gaussian test matrix (:func:`gaussian_test_matrix`).
    mu : float
        The shift ``> 0`` of the system ``A + mu I``.

    Returns
    -------
    NystromPreconditioner
    """
    p = G.shape[0]
    Q, R = np.linalg.qr(G)
    # Y = A Q = S R^-1, i.e. R^T Y^T = S^T
    Y = scipy.linalg.solve_triangular(R, S.T, trans="T", lower=False).T
    nu = np.sqrt(p) * _EPS * max(np.linalg.norm(Y, 2), np.finfo(np.float64).tiny)
    for _ in range(8):  # FTU23 Alg. 2.1; a larger shift if rounding breaks positivity
        Ynu = Y + nu * Q
        M = Q.T @ Ynu
        M = 0.5 * (M + M.T)
        try:
            C = scipy.linalg.cholesky(M, lower=False)
            break
        except np.linalg.LinAlgError:
            nu *= 100.0
    else:  # pragma: no cover - A is positive semi-definite by construction
        return NystromPreconditioner(np.zeros((p, 0)), np.zeros(0), float(mu))
    B = scipy.linalg.solve_triangular(C, Ynu.T, trans="T", lower=False).T  # Ynu C^-1
    U, sigma, _ = scipy.linalg.svd(B, full_matrices=False)
    lam = np.maximum(0.0, sigma**2 - nu)
    return NystromPreconditioner(np.ascontiguousarray(U), lam, float(mu))
