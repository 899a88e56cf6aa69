"""Kernel nonlinearities applied to projections, and the exact kernels they estimate.

ALGORITHMS.md section 1: for projections ``P = X W^T`` of shape (n, D),

========== ===================================== ==================================
kernel     features                              exact kernel k(x, y)
========== ===================================== ==================================
gaussian   ``[cos P, sin P] / sqrt(D)``          ``exp(-gamma ||x - y||^2)``
matern     ``[cos P, sin P] / sqrt(D)``          scikit-learn's ``Matern(1 / sqrt(2 gamma), nu)``
laplacian  ``[cos P, sin P] / sqrt(D)``          ``exp(-gamma ||x - y||_1)``
angular    ``sign(P) / sqrt(D)``                 ``1 - 2 theta / pi``
arccos0    ``sqrt(2 / D) * step(P)``             ``1 - theta / pi``
arccos1    ``sqrt(2 / D) * max(0, P)``           ``(1/pi)|x||y|(sin t + (pi - t) cos t)``
linear     ``P / sqrt(D)``                       ``x^T y``
polynomial (sketches, :mod:`._polynomial`)         ``(gamma x^T y + coef0)^degree``
========== ===================================== ==================================

The three shift-invariant kernels (:data:`FOURIER_KERNELS`) share the cos/sin features;
they differ only in the law of ``W`` (:mod:`._spectral`). They take ``gamma`` as one
number or one value per input column (ARD, :data:`ARD_KERNELS`): ``x_j`` is scaled by
:func:`column_factor` and the unit-width kernel applied.

For ``linear`` a complex projection (a complex ROM, ``method="rom"``) gives ``P`` as the
real columns ``[Re, Im]`` of width ``2 D``; the features are still ``P / sqrt(D)``, so
``phi(x)^T phi(y) = (1/D) Re <W x, W y>``.
"""

from __future__ import annotations

import numpy as np

from .._params import ARD_KERNELS, WIDTH_KERNELS

__all__ = ["ARD_KERNELS", "FOURIER_KERNELS", "KERNELS", "WIDTH_KERNELS", "apply_nonlinearity", "check_kernel",
           "column_factor", "exact_kernel", "output_width"]

KERNELS = ("gaussian", "angular", "arccos0", "arccos1", "linear", "matern", "laplacian", "polynomial")
#: shift-invariant kernels: features ``[cos P, sin P] / sqrt(D)`` of frequencies from the
#: kernel's spectral law (ALGORITHMS.md section 1); they take ARD widths
FOURIER_KERNELS = ARD_KERNELS


def check_kernel(kernel) -> str:
    """``kernel`` if it is one of :data:`KERNELS`, else an ``InvalidParameterError``."""
    from .._params import check_choice

    return check_choice(kernel, "kernel", list(KERNELS))


def output_width(kernel: str, n_components: int, is_complex: bool = False) -> int:
    """Number of output columns p for D = ``n_components`` projections (``is_complex``:
    of a complex ``W``, which only the ``linear`` kernel takes: p = 2 D)."""
    return 2 * n_components if kernel in FOURIER_KERNELS or is_complex else n_components


def column_factor(kernel: str, gamma):
    """What multiplies ``x`` (per column for an ARD ``gamma``) so that the kernel of width
    ``gamma`` is the unit-width kernel of the scaled input: ``sqrt(gamma)`` for
    ``gaussian`` (``exp(-||u||^2)``), ``sqrt(2 gamma)`` for ``matern`` (length scale 1),
    ``gamma`` for ``laplacian`` (``exp(-||u||_1)``). A float, or a float64 array."""
    g = np.asarray(gamma, dtype=np.float64) if np.ndim(gamma) else float(gamma)
    if kernel == "gaussian":
        return np.sqrt(g)
    if kernel == "matern":
        return np.sqrt(2.0 * g)
    if kernel == "laplacian":
        return g
    raise ValueError(f"kernel {kernel!r} has no per-column width")


def apply_nonlinearity(
    kernel: str,
    P: np.ndarray,
    weights: np.ndarray | None = None,
    out: np.ndarray | None = None,
    n_components: int | None = None,
) -> np.ndarray:
    """Features ``Z`` from projections ``P`` (n, D); ``out`` may be preallocated (n, p).

    ``weights`` (length D, optional) multiplies each frequency's column(s): the importance
    weights of leverage sampling. The dtype of ``P`` is kept. ``P`` may be overwritten.
    ``n_components`` (D) is needed only when ``P`` has ``2 D`` real columns
    ``[Re, Im]`` of a complex projection (``kernel="linear"``); default ``P.shape[1]``.
    """
    n, D = P.shape
    dtype = P.dtype
    if kernel == "linear":
        m = D if n_components is None else int(n_components)
        if out is None:
            out = np.empty((n, D), dtype=dtype)
        np.multiply(P, dtype.type(1.0 / np.sqrt(m)), out=out)
        if weights is not None:
            w = weights.astype(dtype, copy=False)
            for j in range(0, D, m):
                out[:, j:j + m] *= w
        return out
    if kernel in FOURIER_KERNELS:
        from ._trig import cos_sin

        out = cos_sin(P, 1.0 / np.sqrt(D), out=out)
        if weights is not None:
            w = weights.astype(dtype, copy=False)
            out[:, :D] *= w
            out[:, D:] *= w
        return out
    if out is None:
        out = np.empty((n, D), dtype=dtype)
    if kernel == "angular":
        np.sign(P, out=out)
        out *= dtype.type(1.0 / np.sqrt(D))
    elif kernel == "arccos0":
        np.greater(P, 0, out=out)  # casts the boolean into out's float dtype
        out *= dtype.type(np.sqrt(2.0 / D))
    elif kernel == "arccos1":
        np.maximum(P, 0, out=out)
        out *= dtype.type(np.sqrt(2.0 / D))
    else:  # validated by callers
        raise ValueError(f"unknown kernel {kernel!r}")
    if weights is not None:
        out *= weights.astype(dtype, copy=False)
    return out


def _angles(X: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nx = np.linalg.norm(X, axis=1)
    ny = np.linalg.norm(Y, axis=1)
    denom = np.outer(nx, ny)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(denom > 0, (X @ Y.T) / np.where(denom > 0, denom, 1.0), 1.0)
    theta = np.arccos(np.clip(cos, -1.0, 1.0))
    return theta, nx, ny


def _matern_unit(r: np.ndarray, nu: float) -> np.ndarray:
    """scikit-learn's Matern of length scale 1 at distances ``r`` (closed forms for nu =
    0.5, 1.5, 2.5; the Bessel form otherwise, 1 at r = 0)."""
    if nu == 0.5:
        return np.exp(-r)
    if nu == 1.5:
        t = np.sqrt(3.0) * r
        return (1.0 + t) * np.exp(-t)
    if nu == 2.5:
        t = np.sqrt(5.0) * r
        return (1.0 + t + t * t / 3.0) * np.exp(-t)
    import scipy.special

    t = np.sqrt(2.0 * nu) * r
    with np.errstate(invalid="ignore", over="ignore"):
        k = (2.0 ** (1.0 - nu) / scipy.special.gamma(nu)) * t**nu * scipy.special.kv(nu, t)
    k[t < 1e-10] = 1.0  # t^nu K_nu(t) -> 2^(nu-1) Gamma(nu): the limit, not 0 * inf
    return np.nan_to_num(k, nan=0.0)  # far apart: K_nu underflows


def _sq_distances(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    sq = (X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :] - 2.0 * X @ Y.T
    return np.maximum(sq, 0.0)


def exact_kernel(kernel: str, X: np.ndarray, Y: np.ndarray, gamma=1.0, *, nu: float = 1.5,
                 degree: int = 3, coef0: float = 1.0) -> np.ndarray:
    """The exact kernel matrix ``k(X, Y)`` (float64) that the features estimate.

    ``gamma`` is a number, or for :data:`ARD_KERNELS` one value per column. ``nu``
    (``matern``), ``degree`` and ``coef0`` (``polynomial``) are the kernel parameters of
    scikit-learn's ``Matern`` and ``polynomial_kernel``.
    """
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if kernel == "linear":
        return X @ Y.T
    if kernel == "polynomial":
        return (float(gamma) * (X @ Y.T) + float(coef0)) ** int(degree)
    if kernel == "gaussian" and not np.ndim(gamma):
        return np.exp(-gamma * _sq_distances(X, Y))
    if kernel in FOURIER_KERNELS:
        c = column_factor(kernel, gamma)
        Xc, Yc = X * c, Y * c
        if kernel == "laplacian":
            from scipy.spatial.distance import cdist

            return np.exp(-cdist(Xc, Yc, "cityblock"))
        if kernel == "gaussian":
            return np.exp(-_sq_distances(Xc, Yc))
        from scipy.spatial.distance import cdist  # differences, not |a|^2 + |b|^2 - 2ab: r = 0 exactly

        return _matern_unit(cdist(Xc, Yc), float(nu))
    theta, nx, ny = _angles(X, Y)
    if kernel == "angular":
        return 1.0 - 2.0 * theta / np.pi
    if kernel == "arccos0":
        return 1.0 - theta / np.pi
    if kernel == "arccos1":
        return np.outer(nx, ny) / np.pi * (np.sin(theta) + (np.pi - theta) * np.cos(theta))
    raise ValueError(f"unknown kernel {kernel!r}")
