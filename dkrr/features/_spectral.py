"""Spectral laws of the shift-invariant kernels: what turns a unit draw of W into frequencies.

Bochner: a shift-invariant kernel ``k(x - y)`` with ``k(0) = 1`` is ``E cos(w^T (x - y))`` for
``w`` from its spectral law, so the cos/sin features of section 1 estimate it when the rows
of ``W`` have that law (ALGORITHMS.md section 1):

========== ================================================ ==========================
kernel     rows ``w`` of W                                  built from a unit draw as
========== ================================================ ==========================
gaussian   ``N(0, 2 gamma I)``                              Gaussian rows x ``sqrt(2 gamma)``
matern     multivariate Student t, ``2 nu`` degrees of      Gaussian rows x ``sqrt(2 gamma)``
           freedom, scale ``sqrt(2 gamma)``                 x a radial factor per row,
                                                            ``sqrt(2 nu / V)``, ``V ~ chi2(2 nu)``
laplacian  i.i.d. Cauchy entries, scale ``gamma``           Cauchy entries x ``gamma``
========== ================================================ ==========================

The Student-t law is a Gaussian scale mixture: a row of any construction whose rows are
exactly Gaussian, times an independent radial factor, is exactly Student t, so every
method estimates the Matern kernel exactly where it estimates the gaussian exactly; the
radial factors are drawn after the projection, one per frequency, and stored with the map
(``RandomFeatureMap.radial``). The product-Cauchy law of the laplacian is not rotation
invariant: only constructions whose rows are i.i.d. entries (up to signed permutations)
keep it, the methods whose projection class lists ``"cauchy"`` in its ``laws``.

ARD (``gamma`` one value per column): the unit draw is made at scale 1 and every input
column ``j`` multiplied by :func:`frequency_scale` of ``gamma_j``
(``RandomFeatureMap.column_scale``), i.e. ``W = W_unit diag(s)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ENTRY_LAW", "draw_radial", "frequency_scale"]

#: kernel -> law of the entries of the unit draw (a projection class's ``laws`` lists those
#: it can draw)
ENTRY_LAW = {"gaussian": "gaussian", "matern": "gaussian", "laplacian": "cauchy"}


def frequency_scale(kernel: str, gamma):
    """The multiplier of the unit frequencies for the width ``gamma`` (a number or a
    per-column array): ``sqrt(2 gamma)`` for ``gaussian`` and ``matern`` (length scale
    ``1 / sqrt(2 gamma)``), ``gamma`` for ``laplacian``; 1.0 for the kernels without a
    width in W."""
    g = np.asarray(gamma, dtype=np.float64) if np.ndim(gamma) else float(gamma)
    if kernel in ("gaussian", "matern"):
        return np.sqrt(2.0 * g)
    if kernel == "laplacian":
        return g
    return 1.0


def draw_radial(nu: float, n_components: int, rng: np.random.Generator) -> np.ndarray:
    """Radial factors ``sqrt(2 nu / V)``, ``V ~ chi2(2 nu)`` i.i.d.: a Gaussian row times one
    of them is a multivariate Student-t row with ``2 nu`` degrees of freedom."""
    return np.sqrt(2.0 * float(nu) / rng.chisquare(2.0 * float(nu), size=int(n_components)))
