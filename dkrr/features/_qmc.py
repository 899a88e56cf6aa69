"""Quasi-Monte Carlo random features (Yang, Sindhwani, Avron & Mahoney 2014).

The ``D`` frequencies are the first ``D`` points of a randomly scrambled low-discrepancy
sequence in ``[0, 1)^d`` (Halton by default, or Sobol), mapped coordinate-wise through
the standard Gaussian inverse CDF, times ``scale``: ``W = scale * Phi^-1(U)``.
The scrambling is seeded from the generator passed to :meth:`QMCProjection.generate`
(one 63-bit seed drawn from it is given to :mod:`scipy.stats.qmc`), so the map is a
deterministic function of the seed like every other projection. ``W`` is stored densely.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.special
from scipy.stats import qmc

from .._params import check_choice
from ..errors import InvalidParameterError
from ._rff import DenseProjection

__all__ = ["QMCProjection", "QMC_SEQUENCES", "check_sequence", "qmc_gaussian_points"]

#: low-discrepancy sequences accepted by the ``sequence`` option
QMC_SEQUENCES: tuple[str, ...] = ("halton", "sobol")

# uniforms are clipped to [_EPS, 1 - _EPS] before the inverse CDF (|w| <= ~8.1)
_EPS = float(np.finfo(np.float64).eps)


def check_sequence(sequence) -> str:
    """The ``sequence`` option: one of :data:`QMC_SEQUENCES`."""
    return check_choice(sequence, "option 'sequence' of method 'qmc'", QMC_SEQUENCES)


def qmc_gaussian_points(n_points: int, dim: int, sequence: str, seed: int, law: str = "gaussian") -> np.ndarray:
    """First ``n_points`` points of a scrambled ``sequence`` mapped to N(0, I_dim) (or, with
    ``law="cauchy"``, to i.i.d. standard Cauchy coordinates ``tan(pi (u - 1/2))``).

    Parameters
    ----------
    n_points, dim : int
        Number of points (``D``) and their dimension (``d``).
    sequence : {"halton", "sobol"}
        ``"sobol"`` draws the next power of two ``2**m >= n_points`` points with
        ``random_base2`` (the balance properties of Sobol points hold for powers of two,
        and scipy warns otherwise) and keeps the first ``n_points``.
    seed : int
        Seed of the scrambling.

    Returns
    -------
    ndarray of shape (n_points, dim), float64
    """
    if sequence == "halton":
        U = qmc.Halton(dim, scramble=True, rng=seed).random(n_points)
    elif sequence == "sobol":
        if dim > qmc.Sobol.MAXDIM:
            raise InvalidParameterError(
                f"sequence='sobol' supports at most {qmc.Sobol.MAXDIM} input features, got "
                f"{dim}; use sequence='halton'"
            )
        m = max(0, int(n_points - 1).bit_length())
        U = qmc.Sobol(dim, scramble=True, rng=seed).random_base2(m)[:n_points]
    else:
        check_sequence(sequence)
    np.clip(U, _EPS, 1.0 - _EPS, out=U)
    return scipy.special.ndtri(U) if law == "gaussian" else np.tan(np.pi * (U - 0.5))


@dataclasses.dataclass(eq=False)
class QMCProjection(DenseProjection):
    """Quasi-Monte Carlo frequencies: ``W = scale * Phi^-1(U)``, ``U`` the first ``D``
    points of a scrambled Halton or Sobol sequence in ``[0, 1)^d`` (``law="cauchy"``: the
    Cauchy inverse CDF ``tan(pi (U - 1/2))`` in place of ``Phi^-1``).

    Options
    -------
    sequence : {"halton", "sobol"}, default "halton"
        The low-discrepancy sequence (scipy.stats.qmc, scrambled). Sobol with ``D`` not a
        power of two takes the first ``D`` of the next power of two points.

    Attributes
    ----------
    weights : ndarray of shape (D, d)
        ``Phi^-1(U)`` (unscaled); ``W = scale * weights``. Time O(n D d) per block.
    sequence : str
        The sequence used (informative; ``weights`` determines the map).
    """

    method = "qmc"
    options = {"sequence": "halton"}
    laws = ("gaussian", "cauchy")

    sequence: str = "halton"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sequence = str(check_sequence(self.sequence))

    @classmethod
    def _draw(cls, n_features_in, n_components, scale, rng, *, sequence, law="gaussian"):
        check_sequence(sequence)
        seed = int(rng.integers(0, 2**63 - 1))
        W = qmc_gaussian_points(n_components, n_features_in, sequence, seed, law)
        return cls(n_features_in, n_components, scale, W, sequence)
