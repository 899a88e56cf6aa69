"""Nyström features: ``phi(x) = k(x, C) K_CC^(-1/2)`` with landmarks C from the data.

ALGORITHMS.md section 2 (Nyström). ``m = n_components`` landmarks are sampled uniformly
without replacement from the training rows; ``K_CC = V diag(lam) V^T`` is
eigendecomposed once and the normaliser is ``V diag(lam)^(-1/2)`` with tiny eigenvalues
*clipped to zero contribution*: the columns of eigenvalues ``lam_j <= rtol * max(lam)``
(``rtol = 1e-10`` by default) are set to zero instead of being amplified by
``1 / sqrt(lam_j)`` (a pseudo-inverse square root). The output keeps ``m`` columns, so
its width is ``n_components`` whatever the rank of ``K_CC``; zero columns cost nothing in
a ridge fit with ``alpha > 0``.

Then ``phi(C) phi(C)^T = K_CC`` up to the clipped eigenvalues (exact on the landmarks),
and ``phi(X) phi(Y)^T = k(X, C) K_CC^+ k(C, Y)`` approximates ``k(X, Y)`` elsewhere.

The map is data dependent (its landmarks are rows of the training data) but small:
``m x d`` landmarks and an ``m x m`` normaliser, embedded once in a dask graph and
applied blockwise like any other map.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ._nonlinear import check_kernel
from .._validation import check_finite_rows, is_dask
from ..errors import InputValidationError, InvalidParameterError
from ._map import FeatureMap
from ._nonlinear import exact_kernel

__all__ = ["DEFAULT_EIGENVALUE_RTOL", "NystroemMap", "fit_nystroem_map", "nystroem_normalizer"]

#: eigenvalues of K_CC at or below this fraction of the largest are clipped (no contribution)
DEFAULT_EIGENVALUE_RTOL = 1e-10


def nystroem_normalizer(K_cc: np.ndarray, rtol: float = DEFAULT_EIGENVALUE_RTOL) -> np.ndarray:
    """``V diag(lam)^(-1/2)`` of the symmetric ``K_cc``, columns of tiny ``lam`` set to zero.

    Parameters
    ----------
    K_cc : ndarray (m, m)
    rtol : float
        Relative threshold: eigenvalues ``<= rtol * max(lam)`` are clipped.

    Returns
    -------
    ndarray (m, m) float64.
    """
    K = np.asarray(K_cc, dtype=np.float64)
    lam, V = np.linalg.eigh(0.5 * (K + K.T))
    top = lam.max() if lam.size else 0.0
    keep = lam > rtol * top if top > 0 else np.zeros_like(lam, dtype=bool)
    inv_sqrt = np.zeros_like(lam)
    inv_sqrt[keep] = 1.0 / np.sqrt(lam[keep])
    return np.ascontiguousarray(V * inv_sqrt)


@dataclasses.dataclass(eq=False)
class NystroemMap(FeatureMap):
    """Nyström feature map ``phi(x) = k(x, C) K_CC^(-1/2)``.

    Parameters
    ----------
    kernel : str
        Any of :data:`~dkrr.features.KERNELS`: the exact kernels of
        :func:`dkrr.features.exact_kernel`.
    gamma : float or ndarray of shape (n_features_in,)
        The kernel's width (one per column: ARD; ignored by the kernels without one).
    landmarks : ndarray (m, d)
        The landmark rows C.
    normalizer : ndarray (m, m)
        ``V diag(lam)^(-1/2)`` of ``K_CC`` (see :func:`nystroem_normalizer`).
    kernel_params : dict
        ``{"nu": ...}`` for ``matern``, ``{"degree": ..., "coef0": ...}`` for
        ``polynomial``, else empty.
    """

    map_type = "nystroem"

    kernel: str
    gamma: Any
    landmarks: np.ndarray
    normalizer: np.ndarray
    kernel_params: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        from .._params import check_gamma, check_kernel_params

        self.landmarks = np.ascontiguousarray(self.landmarks, dtype=np.float64)
        self.normalizer = np.ascontiguousarray(self.normalizer, dtype=np.float64)
        if self.kernel_params.keys() - {"nu", "degree", "coef0"}:
            raise InvalidParameterError(f"unknown kernel parameters {sorted(self.kernel_params)} of a nystroem map")
        self.kernel_params = check_kernel_params(check_kernel(self.kernel), **self.kernel_params)
        if np.ndim(self.gamma):
            self.gamma = check_gamma(self.gamma, self.kernel, self.landmarks.shape[1])
        else:
            self.gamma = float(self.gamma)

    @property
    def n_features_in(self) -> int:  # type: ignore[override]
        return self.landmarks.shape[1]

    @property
    def n_components(self) -> int:
        return self.landmarks.shape[0]

    @property
    def n_output_features(self) -> int:  # type: ignore[override]
        return self.normalizer.shape[1]

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``k(X, C) @ normalizer`` (computed in float64, returned in X's dtype)."""
        Kx = exact_kernel(self.kernel, X, self.landmarks, self.gamma, **self.kernel_params)
        if out is None:
            return (Kx @ self.normalizer).astype(X.dtype, copy=False)
        if out.dtype == np.float64:
            np.matmul(Kx, self.normalizer, out=out)
        else:
            out[...] = Kx @ self.normalizer
        return out

    def with_gamma(self, gamma) -> "NystroemMap":
        """The map of the same landmarks for the width ``gamma`` (its normalizer
        recomputed): the map :func:`fit_nystroem_map` builds with ``gamma`` and the same rng."""
        from ._nonlinear import WIDTH_KERNELS

        if self.kernel not in WIDTH_KERNELS:
            raise InvalidParameterError(f"kernel {self.kernel!r} has no gamma; its Nystroem map cannot be rescaled")
        K_cc = exact_kernel(self.kernel, self.landmarks, self.landmarks, gamma, **self.kernel_params)
        return NystroemMap(self.kernel, gamma, self.landmarks, nystroem_normalizer(K_cc), dict(self.kernel_params))

    def get_state(self) -> dict[str, Any]:
        return {
            "map_type": self.map_type,
            "kernel": self.kernel,
            "gamma": self.gamma,
            "landmarks": self.landmarks,
            "normalizer": self.normalizer,
            **self.kernel_params,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "NystroemMap":
        names = {"kernel", "gamma", "landmarks", "normalizer"}
        missing = names - set(state)
        if missing:
            raise InvalidParameterError(f"state of a nystroem map lacks fields {sorted(missing)}")
        extra = set(state) - names - {"map_type", "nu", "degree", "coef0"}
        if extra:
            raise InvalidParameterError(f"state of a nystroem map has unexpected fields {sorted(extra)}")
        gamma = state["gamma"]
        return cls(state["kernel"], np.asarray(gamma) if np.ndim(gamma) else float(gamma),
                   np.asarray(state["landmarks"]), np.asarray(state["normalizer"]),
                   {k: state[k] for k in ("nu", "degree", "coef0") if k in state})


def fit_nystroem_map(
    X,
    *,
    kernel: str,
    n_components: int,
    gamma,
    rng: np.random.Generator,
    eigenvalue_rtol: float = DEFAULT_EIGENVALUE_RTOL,
    sample_weight=None,
    **kernel_params,
) -> NystroemMap:
    """Sample ``n_components`` landmark rows of ``X`` and build the Nyström map.

    Parameters
    ----------
    X : validated float numpy array or row-chunked dask array (n, d)
        For dask input only the landmark rows are computed (one small compute of
        ``X[sorted indices]``).
    kernel : str
    n_components : int
        m, number of landmarks (``<= n``).
    gamma : float or ndarray (ARD)
    rng : numpy Generator
        Draws the landmark indices (uniform, without replacement).
    eigenvalue_rtol : float
        See :func:`nystroem_normalizer`.
    sample_weight : None, checked array of shape (n,), or :class:`~dkrr._rows.RowPool`
        The rows' weights: the landmarks are drawn uniformly among the rows of positive
        weight (the generator draws their ranks among those rows, so X with rows of
        weight 0 gives the landmarks of X without them; docs/ALGORITHMS.md section 2.7).
    **kernel_params
        ``nu`` (matern), ``degree``, ``coef0`` (polynomial).

    Raises
    ------
    InvalidParameterError
        Unknown kernel, ``n_components > n``.
    NonFiniteInputError
        The landmark rows contain NaN or inf.
    """
    from .._rows import row_pool

    check_kernel(kernel)
    pool = row_pool(int(X.shape[0]), sample_weight)
    n = pool.n
    m = int(n_components)
    rows = "rows" if not pool.weighted else "rows of positive weight"
    if m > n:
        raise InvalidParameterError(
            f"method='nystroem' samples n_components={m} landmark rows without replacement, "
            f"but X has only {n} {rows}; use n_components <= {n}."
        )
    if n == 0:
        raise InputValidationError(f"X has no {rows} to sample Nyström landmarks from")
    idx = np.sort(pool.take(rng.choice(n, size=m, replace=False))[0])
    if is_dask(X):
        from .._rows import gather_rows

        C = gather_rows(X, idx, label="gathering Nystroem landmarks")
    else:
        C = np.asarray(X)[idx]
    C = np.ascontiguousarray(C, dtype=np.float64)
    check_finite_rows(C, "X", where=" (Nystroem landmark rows)")
    K_cc = exact_kernel(kernel, C, C, gamma, **kernel_params)
    return NystroemMap(kernel, gamma, C, nystroem_normalizer(K_cc, eigenvalue_rtol), dict(kernel_params))
