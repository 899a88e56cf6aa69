"""Solving the ridge normal equations from accumulated statistics.

scikit-learn's penalty convention (ALGORITHMS.md section 3): minimise
``||y - Z beta - b||^2 + alpha ||beta||^2``. With an intercept the statistics are centred
with the accumulated means, ``G_c = G - n mu mu^T`` and ``c_c = c - n mu ybar^T``, then
``beta = (G_c + alpha I)^-1 c_c`` and ``b = ybar - mu^T beta``.

Two paths: a Cholesky factorisation of ``G_c + alpha I`` for one alpha, and a
Householder tridiagonalisation ``G_c = Q T Q^T`` (:class:`TridiagonalGram`, the first
stage of LAPACK's eigensolvers, a third of their cost: the eigenvectors are never formed)
that gives ``beta(alpha) = Q (T + alpha I)^-1 Q^T c_c`` for a whole grid of alphas at
O(p^2 t) each (ALGORITHMS.md 3.5).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
import scipy.linalg.lapack

from ..errors import IllConditionedWarning, InputValidationError, InvalidParameterError, SingularSystemError

__all__ = [
    "CONDITION_WARN",
    "center_statistics",
    "TridiagonalGram",
    "shifted_gram",
    "check_alpha",
    "ridge_coefficients",
    "solve_cholesky",
    "solve_tridiagonal",
    "usable_alphas",
]

#: warn (:class:`~dkrr.errors.IllConditionedWarning`, a ``scipy.linalg.LinAlgWarning``) when the
#: condition number exceeds this
CONDITION_WARN = 1e12

_EPS = np.finfo(np.float64).eps


def check_alpha(alpha, name="alpha") -> float:
    """A finite real ``alpha >= 0``, as scikit-learn's ``Ridge``.

    ``alpha = 0`` is accepted (ordinary least squares); the solvers then raise
    :class:`~dkrr.errors.SingularSystemError` when ``G`` is singular (see
    :func:`solve_cholesky`). A negative alpha would make ``G + alpha I`` indefinite or
    nearly singular and the model worse than a constant, so it is refused here.
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) or not np.isfinite(alpha):
        raise InvalidParameterError(f"{name} must be a finite real number, got {alpha!r}")
    if alpha < 0:
        raise InvalidParameterError(
            f"{name}={alpha!r} is negative: the ridge penalty must be >= 0 (as scikit-learn's "
            "Ridge); use alpha=0 for least squares or a positive alpha to regularise."
        )
    return float(alpha)


def center_statistics(G, c, zsum, n, ysum, fit_intercept: bool):
    """Centred ``(G_c, c_c, mu, ybar)``; without intercept the inputs and zero means.

    ``G`` (p, p) or None (then ``G_c`` is None), ``c`` (p, t), ``zsum`` (p,), ``n`` scalar, ``ysum`` (t,). With sample
    weights ``n`` is the weight sum and the other statistics are weighted sums: the means
    are then the weighted means (scikit-learn's ``Ridge(sample_weight=...)``).
    """
    if not fit_intercept:
        return G, c, np.zeros(zsum.shape[0]), np.zeros(c.shape[1])
    n = float(n)
    mu = zsum / n
    ybar = ysum / n
    Gc = None if G is None else G - n * np.outer(mu, mu)
    cc = c - n * np.outer(mu, ybar)
    return Gc, cc, mu, ybar


def _singular(alpha, detail):
    return SingularSystemError(
        f"the ridge system G + alpha*I with alpha={alpha!r} is singular or not positive "
        f"definite ({detail}); use a larger alpha (alpha > 0 always gives a positive "
        "definite system), fewer features, or more rows."
    )


def _check_finite_system(G, c):
    if not (np.isfinite(G).all() and np.isfinite(c).all()):
        raise SingularSystemError(
            "the accumulated statistics are not finite (overflow: extremely large input "
            "values?); rescale the data, e.g. standardise the columns of X and y."
        )


def _warn_condition(cond, alpha):
    if not np.isfinite(cond) or cond > CONDITION_WARN:
        warnings.warn(
            f"ill-conditioned ridge system: condition number {cond:.3g} of G + alpha*I "
            f"with alpha={alpha!r}; the coefficients may be inaccurate. Increase alpha.",
            IllConditionedWarning,
            stacklevel=3,
        )


#: bytes of the column slabs in which :func:`shifted_gram` forms ``G - n mu mu^T`` (no
#: ``p x p`` temporary) and :func:`solve_cholesky` sums its 1-norm
_SLAB_BYTES = 16 * 2**20


def _slabs(p: int):
    step = max(1, _SLAB_BYTES // (8 * max(1, p)))
    return ((j, min(p, j + step)) for j in range(0, p, step))


def shifted_gram(G, alpha: float, centre=None) -> np.ndarray:
    """``G + alpha I``, or with ``centre=(zsum, n)`` the centred ``G - n mu mu^T + alpha I``
    (``mu = zsum / n``), as one new Fortran-ordered ``p x p`` array, the only ``p x p``
    memory it takes: LAPACK's Cholesky (:func:`solve_cholesky`,
    :func:`~dkrr.linalg._evidence.posterior_factor`) factors it in place. The centring is
    computed in column slabs elementwise as :func:`center_statistics` computes it
    (``G - n * outer(mu, mu)``), so the factor is bitwise the one of its ``G_c`` (where
    ``G_c``, ``G_c + alpha I`` and LAPACK's copy of it were three more ``p x p`` arrays:
    2 GB at p = 8192)."""
    G = np.asarray(G, dtype=np.float64)
    p = G.shape[0]
    A = np.empty((p, p), order="F")
    if centre is None:
        A[...] = G
    else:
        zsum, n = centre
        n = float(n)
        mu = np.asarray(zsum, dtype=np.float64) / n
        for a, b in _slabs(p):
            np.subtract(G[:, a:b], n * np.outer(mu, mu[a:b]), out=A[:, a:b])
    A[np.diag_indices(p)] += float(alpha)
    return A


def solve_cholesky(G, c, alpha: float, *, centre=None) -> np.ndarray:
    """``(G + alpha I)^-1 c`` by Cholesky (``G`` symmetric p x p, ``c`` p x t); with
    ``centre=(zsum, n)`` the centred ``(G - n mu mu^T + alpha I)^-1 c`` (``mu = zsum / n``;
    ``c`` already centred). One ``p x p`` array besides ``G`` (:func:`shifted_gram`).

    Warns with :class:`~dkrr.errors.IllConditionedWarning` (a ``scipy.linalg.LinAlgWarning``) when the condition number (LAPACK
    ``pocon`` estimate, 1-norm) exceeds :data:`CONDITION_WARN`.

    Raises
    ------
    SingularSystemError
        ``G + alpha I`` is not positive definite (e.g. ``alpha <= 0`` on a
        rank-deficient G) or not finite.
    """
    A = shifted_gram(G, alpha, centre)
    _check_finite_system(A, c)
    anorm = max(float(np.abs(A[:, a:b]).sum(axis=0).max()) for a, b in _slabs(A.shape[0])) if A.size else 0.0
    try:
        cf = scipy.linalg.cho_factor(A, lower=False, overwrite_a=True, check_finite=False)
    except np.linalg.LinAlgError as exc:
        raise _singular(alpha, f"Cholesky failed: {exc}") from None
    (pocon,) = scipy.linalg.get_lapack_funcs(("pocon",), (cf[0],))
    rcond, info = pocon(cf[0], anorm, uplo="L" if cf[1] else "U")
    if info != 0 or rcond <= 0 or rcond < _EPS:
        raise _singular(alpha, f"reciprocal condition number {rcond:.3g}")
    _warn_condition(1.0 / rcond, alpha)
    return scipy.linalg.cho_solve(cf, c, check_finite=False)


class TridiagonalGram:
    """``G = Q T Q^T`` of a symmetric ``G`` (p x p): LAPACK ``dsytrd`` (lower), ``T``
    symmetric tridiagonal (diagonal ``d``, subdiagonal ``e``), ``Q = diag(1, H_1 ... H_{p-1})``
    kept as its Householder reflectors and applied blocked by ``dormqr`` (compact WY,
    BLAS-3), since the reflectors of the lower reduction are those of a QR factorisation of
    ``G[1:, :p-1]``. ``lam_min`` / ``lam_max``: the least and largest eigenvalues of ``T``
    (bisection, ``dstebz``), which are ``G``'s up to the rounding of the reduction, as
    eigh's are (eigh reduces with the same ``dsytrd`` first).

    ``overwrite=True`` lets the reduction destroy ``G`` (a temporary of the caller).
    """

    __slots__ = ("d", "e", "lam_min", "lam_max", "_reflectors", "_tau")

    def __init__(self, G, *, overwrite: bool = False):
        _check_finite_system(G, np.zeros(1))
        G = np.asarray(G, dtype=np.float64)
        p = G.shape[0]
        self._reflectors = self._tau = None
        if p == 0:
            self.d = self.e = np.zeros(0)
            self.lam_min = self.lam_max = np.inf
            return
        sytrd, sytrd_lwork = scipy.linalg.lapack.dsytrd, scipy.linalg.lapack.dsytrd_lwork
        work, info = sytrd_lwork(p, lower=1)
        # G symmetric: its transpose is the Fortran-ordered array dsytrd works in, no copy
        A = G.T if (overwrite and G.flags.c_contiguous) else G
        a, d, e, tau, info = sytrd(A, lower=1, lwork=max(int(work), 1), overwrite_a=int(overwrite))
        if info != 0:  # pragma: no cover - argument errors only
            raise np.linalg.LinAlgError(f"dsytrd failed with info={info}")
        self.d, self.e = d, e
        if p > 1:
            self._reflectors = np.asfortranarray(a[1:, : p - 1])
            self._tau = tau
        del a
        try:
            ends = [scipy.linalg.eigvalsh_tridiagonal(d, e, select="i", select_range=(i, i), check_finite=False)[0]
                    for i in (0, p - 1)]
        except np.linalg.LinAlgError as exc:  # bisection overflows on entries beyond ~1e150
            raise InputValidationError(
                f"the Gram's entries reach {float(np.abs(d).max()):.3g}, beyond what float64's eigenvalue bisection "
                f"(LAPACK dstebz: {exc}) handles; rescale the data: divide sample_weight (or the columns of X "
                "for a linear or polynomial kernel) by a constant") from None
        self.lam_min, self.lam_max = float(ends[0]), float(ends[1])

    @property
    def p(self) -> int:
        return self.d.size

    def _apply(self, x, trans: str) -> np.ndarray:
        x = np.array(x, dtype=np.float64, order="F", copy=True)
        if self._reflectors is None:
            return x
        squeeze = x.ndim == 1
        if squeeze:
            x = x.reshape(-1, 1, order="F")
        rest = np.asfortranarray(x[1:])
        ormqr = scipy.linalg.lapack.dormqr
        work, info = ormqr("L", trans, self._reflectors, self._tau, rest, -1)[1:]
        out, _, info = ormqr("L", trans, self._reflectors, self._tau, rest, max(int(work[0]), 1), overwrite_c=1)
        if info != 0:  # pragma: no cover - argument errors only
            raise np.linalg.LinAlgError(f"dormqr failed with info={info}")
        x[1:] = out
        return x[:, 0] if squeeze else x

    def rotate(self, c) -> np.ndarray:
        """``Q^T c`` (``c`` of p rows)."""
        return self._apply(c, "T")

    def unrotate(self, x) -> np.ndarray:
        """``Q x`` (``x`` of p rows)."""
        return self._apply(x, "N")

    def shifted_factor(self, alpha: float) -> tuple[np.ndarray, np.ndarray]:
        """``L D L^T`` of ``T + alpha I`` (LAPACK ``dpttrf``): the pivots ``D`` (whose logs
        sum to ``log det(G + alpha I)``) and the multipliers; O(p).

        Raises
        ------
        SingularSystemError
            A pivot is not positive: ``G + alpha I`` is not positive definite.
        """
        D, E, info = scipy.linalg.lapack.dpttrf(self.d + float(alpha), self.e)
        if info != 0:
            raise _singular(float(alpha), f"pivot {info} of its tridiagonal form is not positive")
        return D, E

    def solve_shifted(self, factor, q) -> np.ndarray:
        """``(T + alpha I)^-1 q`` from :meth:`shifted_factor`'s ``factor`` (``q`` p x t)."""
        x, info = scipy.linalg.lapack.dpttrs(factor[0], factor[1], q)
        if info != 0:  # pragma: no cover - argument errors only
            raise np.linalg.LinAlgError(f"dpttrs failed with info={info}")
        return x


def usable_alphas(tri: TridiagonalGram, alphas) -> np.ndarray:
    """Mask of the alphas for which ``lam_min + alpha`` is above the rounding noise of
    the eigenvalues of the symmetric Gram reduced in ``tri``: ``G + alpha I`` is then
    positive definite, as :func:`solve_tridiagonal` requires."""
    alphas = np.asarray(alphas, dtype=np.float64)
    if not tri.p:
        return np.ones(alphas.shape, dtype=bool)
    return tri.lam_min + alphas > _spectrum_floor(tri)


def _spectrum_floor(tri: TridiagonalGram) -> float:
    """The rounding noise of the eigenvalues of the reduced Gram: ``p eps ||G||_2``,
    relative to the Gram's own scale (an absolute floor of 1 made every alpha below
    ``p eps`` unusable for a Gram of small scale, e.g. uniform sample weights of 1e-12,
    where the same fit at weights 1 chooses alpha 1e12 times larger: a fit that depended
    on the weights' unit); 1 only for a Gram of zeros."""
    scale = max(abs(tri.lam_min), abs(tri.lam_max)) if tri.p else 0.0
    return tri.p * _EPS * (scale if scale > 0 else 1.0)


def _check_spectrum(tri: TridiagonalGram, alphas, warn: bool = True):
    """Raise for alphas that leave ``lam_min + alpha`` non-positive; warn on bad conditioning."""
    floor = _spectrum_floor(tri)
    for a in alphas:
        if tri.lam_min + a <= floor:
            raise _singular(float(a), f"smallest eigenvalue of G + alpha*I is {tri.lam_min + a:.3g}")
    conds = (tri.lam_max + alphas) / (tri.lam_min + alphas)
    i = int(np.argmax(conds))
    if warn:
        _warn_condition(float(conds[i]), float(alphas[i]))


def solve_tridiagonal(tri: TridiagonalGram, c, alphas, *, warn: bool = True) -> np.ndarray:
    """``beta(alpha) = Q (T + alpha I)^-1 Q^T c`` for every alpha: shape (n_alphas, p, t).

    One application of ``Q^T`` to ``c``, an O(p t) tridiagonal solve per alpha, one
    application of ``Q`` to the stacked solutions. Raises
    :class:`~dkrr.errors.SingularSystemError` for an alpha that leaves ``G + alpha I``
    not positive definite beyond rounding, and warns when the condition number
    ``(lam_max + alpha) / (lam_min + alpha)`` exceeds :data:`CONDITION_WARN` (not with
    ``warn=False``: a cross-validation fold's system, solved on a worker, whose warning
    would reach the worker's stderr as a raw Python warning; the final model's is said).
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    p, t = c.shape
    if not p:
        return np.zeros((alphas.size, 0, t))
    _check_spectrum(tri, alphas, warn)
    q = tri.rotate(c)  # (p, t)
    X = np.empty((p, alphas.size, t), order="F")
    for i, a in enumerate(alphas):
        X[:, i, :] = tri.solve_shifted(tri.shifted_factor(a), q)
    B = tri.unrotate(X.reshape(p, alphas.size * t, order="F"))
    return B.reshape(p, alphas.size, t, order="F").transpose(1, 0, 2)


def ridge_coefficients(stats, alpha: float, fit_intercept: bool, solver: str = "cholesky"):
    """Coefficients ``beta`` (p, t) and intercept (t,) from one-fold statistics.

    Parameters
    ----------
    stats : RidgeStatistics
        Totals (``stats.total()``); weighted when it has ``wsum``.
    alpha : float
    fit_intercept : bool
    solver : {"cholesky", "eigh"}
        ``"eigh"``: the spectral path, :func:`solve_tridiagonal` (singularity and
        conditioning judged from the least and largest eigenvalues).
    """
    G, c, n = stats.G[0], stats.c[0], stats.weights()[0]
    if solver not in ("cholesky", "eigh"):
        raise InvalidParameterError(f"solver must be 'auto', 'cholesky' or 'eigh', got {solver!r}")
    if solver == "cholesky":  # the centred Gram formed in the factor's own array (shifted_gram)
        _, cc, mu, ybar = center_statistics(None, c, stats.zsum[0], n, stats.ysum[0], fit_intercept)
        beta = solve_cholesky(G, cc, alpha, centre=(stats.zsum[0], n) if fit_intercept else None)
    else:
        Gc, cc, mu, ybar = center_statistics(G, c, stats.zsum[0], n, stats.ysum[0], fit_intercept)
        beta = solve_tridiagonal(TridiagonalGram(Gc, overwrite=fit_intercept), cc, [alpha])[0]
    intercept = ybar - mu @ beta
    return beta, intercept
