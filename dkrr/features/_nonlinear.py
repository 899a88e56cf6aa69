"""Kernel nonlinearities applied to projections, and the exact kernels they estimate.

ALGORITHMS.md section 1: for projections ``P = X W^T`` of shape (n, D),

========== ===================================== ==================================
kernel     features                              exact kernel k(x, y)
========== ===================================== ==================================
gaussian   ``[cos P, sin P] / sqrt(D)``          ``exp(-gamma ||x - y||^2)``
angular    ``sign(P) / sqrt(D)``                 ``1 - 2 theta / pi``
arccos0    ``sqrt(2 / D) * step(P)``             ``1 - theta / pi``
arccos1    ``sqrt(2 / D) * max(0, P)``           ``(1/pi)|x||y|(sin t + (pi - t) cos t)``
linear     ``P / sqrt(D)``                       ``x^T y``
========== ===================================== ==================================

For ``linear`` a complex projection (a complex ROM, ``method="rom"``) gives ``P`` as the
real columns ``[Re, Im]`` of width ``2 D``; the features are still ``P / sqrt(D)``, so
``phi(x)^T phi(y) = (1/D) Re <W x, W y>``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KERNELS", "apply_nonlinearity", "check_kernel", "exact_kernel", "output_width"]

KERNELS = ("gaussian", "angular", "arccos0", "arccos1", "linear")


def check_kernel(kernel) -> str:
    """``kernel`` if it is one of :data:`KERNELS`, else an ``InvalidParameterError``."""
    from .._params import check_choice

    return check_choice(kernel, "kernel", list(KERNELS))


def output_width(kernel: str, n_components: int, is_complex: bool = False) -> int:
    """Number of output columns p for D = ``n_components`` projections (``is_complex``:
    of a complex ``W``, which only the ``linear`` kernel takes: p = 2 D)."""
    return 2 * n_components if kernel == "gaussian" or is_complex else n_components


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
    if kernel == "gaussian":
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


def exact_kernel(kernel: str, X: np.ndarray, Y: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """The exact kernel matrix ``k(X, Y)`` (float64) that the features estimate."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if kernel == "linear":
        return X @ Y.T
    if kernel == "gaussian":
        sq = (X * X).sum(1)[:, None] + (Y * Y).sum(1)[None, :] - 2.0 * X @ Y.T
        return np.exp(-gamma * np.maximum(sq, 0.0))
    theta, nx, ny = _angles(X, Y)
    if kernel == "angular":
        return 1.0 - 2.0 * theta / np.pi
    if kernel == "arccos0":
        return 1.0 - theta / np.pi
    if kernel == "arccos1":
        return np.outer(nx, ny) / np.pi * (np.sin(theta) + (np.pi - theta) * np.cos(theta))
    raise ValueError(f"unknown kernel {kernel!r}")
