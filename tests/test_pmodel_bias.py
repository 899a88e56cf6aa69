"""The bias of dense ``toeplitz_like`` maps, derived and measured (docs/ALGORITHMS.md s. 2.5).

Conditionally on the skew-circulant generators ``h_i`` and the densification ``Q``, a row
of ``W`` is ``N(0, 2 gamma Q^T C Q)`` with ``C = (1/r) sum_i Zm1(h_i)^T Zm1(h_i)``. ``C``
is diagonal in the twisted Fourier basis with eigenvalues ``c_k = (1/r) sum_i
|lambda_ik|^2``, ``lambda_ik = sum_j h_ij exp(-i pi j (2k - 1) / d')`` (the FFT of the
twisted ``h_i``; ``h`` real: ``lambda_k`` and ``lambda_kbar``, ``k + kbar = 1 mod d'``, are
conjugate), so with
``u = x - y``, ``a = gamma ||u||^2`` and ``p_k`` the share of ``||Q u||^2`` in that basis,

    E[k_hat | h, Q] = exp(-a q),   q = sum_k c_k p_k,   E[q] = 1,

and, the r generators being independent given Q, ``E[k_hat] = E_Q[(E_h exp(-a q_h / r))^r]``
(``q_h`` for one generator): a finite average over all sign patterns at d' = 8, computed
here exactly. For Rademacher ``h``: ``Cov(c_k, c_l) = (delta_kl + delta_{l=kbar} - 2/d') / r``;
with a near-uniform densified direction ``Var(q) = 2 (d' - 2) / (r d' (d' + 2))`` and the
bias is ``exp(-a) a^2 Var(q) / 2`` to second order. ``skew_nonzeros=1`` has ``|lambda| = 1``:
``q = 1``, no bias.
"""

import itertools

import numpy as np
import pytest
import scipy.linalg

from dkrr import RandomFeatures
from dkrr.features._fft import skew_circulant_matrix
from test_kernel_statistics import _pairs  # x unit, y at angles 0.3..1.8 rad, norms 0.8..1.25

GAMMA = 1.0
D_IN, N_COMP, N_MAPS, N_PAIRS = 6, 256, 150, 16  # d' = 8: the largest bias


def _signs(n, first_fixed):
    """All +-1 vectors of length n (the first entry fixed to +1 when ``first_fixed``)."""
    rest = np.array(list(itertools.product([-1.0, 1.0], repeat=n - first_fixed)))
    return np.hstack([np.ones((len(rest), first_fixed)), rest])


def _twiddle(n):
    return np.exp(1j * np.pi * np.arange(n) / n)


def _eigen_moduli(h):
    """``|lambda_k|^2`` of ``Zm1(h)`` for each row of ``h``."""
    return np.abs(np.fft.fft(h * _twiddle(h.shape[-1]), axis=-1)) ** 2


def _shares(uprime):
    """``p_k``: ``|(U u')_k|^2`` in the unitary twisted Fourier basis (sums to ``||u'||^2``)."""
    n = uprime.shape[-1]
    return np.abs(np.fft.fft(uprime * _twiddle(n), axis=-1)) ** 2 / n


def _densified_all(u, dp):
    """``Q u`` for every densification ``Q = H_n D_a H_n D_b`` (up to the sign of Q)."""
    Hn = scipy.linalg.hadamard(dp) / np.sqrt(dp)
    b = np.ones((2 ** (len(u) - 1), dp))
    b[:, : len(u)] = _signs(len(u), 1)  # D_b beyond d multiplies padding zeros
    up = np.zeros(dp)
    up[: len(u)] = u
    v = (b * up) @ Hn.T
    a = _signs(dp, 1)
    return ((v[:, None, :] * a[None]) @ Hn.T).reshape(-1, dp)


def _predicted_kernel(x, y, gamma, dp, r):
    """Exact ``E[k_hat]`` of dense toeplitz_like for each pair: all h, all D_a, D_b."""
    lam2 = _eigen_moduli(_signs(dp, 1) / np.sqrt(dp))  # h and -h share |lambda|
    out = np.empty(len(x))
    for i in range(len(x)):
        q = _shares(_densified_all(x[i] - y[i], dp)) @ lam2.T  # (Q, h): u'^T Zm1^T Zm1 u'
        out[i] = (np.exp(-gamma * q / r).mean(axis=1) ** r).mean()
    return out


def _second_order(x, y, gamma, dp, r):
    a = gamma * ((x - y) ** 2).sum(1)
    return np.exp(-a) * a**2 / 2 * 2 * (dp - 2) / (r * dp * (dp + 2))


def _measured(x, y, options):
    est = np.empty((N_MAPS, len(x)))
    for s in range(N_MAPS):
        rf = RandomFeatures(method="toeplitz_like", n_components=N_COMP, gamma=GAMMA,
                            random_state=s, **options).fit(x)
        est[s] = (rf.transform(x) * rf.transform(y)).sum(axis=1)
    return est


def test_spectral_quadratic_form_is_the_implementations():
    """``sum_k |lambda_k|^2 p_k`` equals ``||Zm1(h) Q u||^2`` with dkrr's own matrices."""
    rf = RandomFeatures(method="toeplitz_like", n_components=8, gamma=GAMMA, random_state=3)
    proj = rf.fit(np.zeros((2, D_IN))).feature_map_.projection
    u = np.random.default_rng(0).standard_normal(D_IN)
    up = proj.densify_matrix()[:, :D_IN] @ u
    h = proj.skew[0, 0]
    direct = np.sum((skew_circulant_matrix(h) @ up) ** 2)
    assert np.isclose(_eigen_moduli(h[None]) @ _shares(up[None])[0], direct, rtol=1e-12)
    assert np.isclose(_shares(up[None]).sum(), u @ u, rtol=1e-12)


def test_eigenvalue_covariance_is_the_derived_one():
    """Over all Rademacher h at d' = 8: E|lambda_k|^2 = 1 and
    Cov(|lambda_k|^2, |lambda_l|^2) = delta_kl + delta_{k+l=1 mod d'} - 2/d' (exact)."""
    dp = 8
    lam2 = _eigen_moduli(_signs(dp, 0) / np.sqrt(dp))
    np.testing.assert_allclose(lam2.mean(0), 1.0, atol=1e-12)
    k = np.arange(dp)
    want = np.eye(dp) + ((k[:, None] + k[None]) % dp == 1) - 2.0 / dp
    np.testing.assert_allclose(np.cov(lam2, rowvar=False, ddof=0), want, atol=1e-12)


@pytest.mark.parametrize("r", [1, 2])
def test_dense_toeplitz_like_bias_matches_the_derivation(r):
    """Measured mean kernel bias over 150 maps = the exact expectation within 4 SE, the
    bias itself is > 5 SE, and the second-order formula is within 15% of the exact one."""
    x, y = _pairs(D_IN, N_PAIRS, seed=3)
    exact = np.exp(-GAMMA * ((x - y) ** 2).sum(1))
    predicted = _predicted_kernel(x, y, GAMMA, 8, r)
    est = _measured(x, y, {"displacement_rank": r})
    per_map = (est - predicted).mean(axis=1)
    se = per_map.std(ddof=1) / np.sqrt(N_MAPS)
    bias = (predicted - exact).mean()
    assert abs(per_map.mean()) <= 4 * se, (per_map.mean(), se)
    assert bias > 5 * se, (bias, se)
    assert (est - exact).mean() > 4 * se
    assert abs(_second_order(x, y, GAMMA, 8, r).mean() - bias) < 0.15 * bias


def test_single_nonzero_generators_have_unit_eigenvalues():
    """skew_nonzeros=1: every |lambda_k| = 1, so q = 1 and the bias vanishes exactly."""
    rf = RandomFeatures(method="toeplitz_like", n_components=64, gamma=GAMMA, random_state=5,
                        displacement_rank=3, skew_nonzeros=1)
    skew = rf.fit(np.zeros((2, D_IN))).feature_map_.projection.skew
    np.testing.assert_allclose(_eigen_moduli(skew.reshape(-1, skew.shape[-1])), 1.0, atol=1e-12)
    dense = RandomFeatures(method="toeplitz_like", n_components=64, gamma=GAMMA, random_state=5)
    lam2 = _eigen_moduli(dense.fit(np.zeros((2, D_IN))).feature_map_.projection.skew.reshape(-1, 8))
    assert np.abs(lam2 - 1).max() > 0.5
