"""The PCG solver itself (ALGORITHMS.md 3.9): tests in which CG iterates.

The preconditioner's rank is well below p, so CG runs tens of iterations, and every
answer is checked against an explicit float64 Gram built with numpy from the fitted
map's own features (``feature_map_.transform``): the *true* residual
``||b - (A + alpha I) beta|| / ||b||`` must be below the requested ``tol``, not only the
recurrence's. Then the parts one by one: the Nystrom sketch against numpy's ``eigh``,
the preconditioner's scaling, ``_block_cg`` on a real SPD system with a poor
preconditioner (the error in the energy norm falls at every iteration, within CG's
bound), the fold masks, every kernel family and map kind, numpy X on a real
LocalCluster, and a source that changes between passes.
"""

from __future__ import annotations

import warnings

import dask
import dask.array as da
from dask.callbacks import Callback
import numpy as np
import pytest
import scipy.linalg
import zarr

from dkrr import RandomFeatureRidge
from dkrr.errors import SourceChangedError
from dkrr.estimators._fitted import is_fitted_name
from dkrr.features import build_random_feature_map
from dkrr.linalg._pcg import (
    _block_cg,
    _matvec_block,
    block_checksum,
    first_pass,
    preconditioner,
    sketch_seed,
)
from dkrr.linalg._pcg_cv import _validation_block
from dkrr.linalg._precondition import gaussian_test_matrix, nystrom_from_sketch
from dkrr.linalg._chains import chain_steps
from dkrr.linalg._reduce import default_n_chains
from dkrr.linalg._stats import fold_ids
from test_pcg import _data, _rel

#: p = 128 output features; a gentle width so the Gram's spectrum decays and a rank-8
#: preconditioner (p / 16) helps without making CG trivial (27-45 iterations, measured)
MAP = {"method": "rff", "n_components": 64, "gamma": 0.05, "random_state": 5}


def _explicit_system(fmap, X, Y, fit_intercept):
    """``A = Z_c^T Z_c`` and ``b = Z_c^T (Y - ybar)`` in float64 from the map's features."""
    Z = np.asarray(fmap.transform(np.asarray(X, dtype=np.float64)), dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(Z.shape[0], -1)
    if fit_intercept:
        Z, Y = Z - Z.mean(axis=0), Y - Y.mean(axis=0)
    return Z.T @ Z, Z.T @ Y


def _true_residual(est, X, Y, alpha):
    """Relative residual of every target of the fitted coefficients in the explicit system."""
    A, b = _explicit_system(est.feature_map_, X, Y, est.fit_intercept)
    beta = np.asarray(est.coef_, dtype=np.float64).reshape(-1, A.shape[0]).T
    r = b - A @ beta - alpha * beta
    return np.linalg.norm(r, axis=0) / np.linalg.norm(b, axis=0)


def _iteration_bound(A, factor, alpha, scale, tol):
    """Most iterations exact-arithmetic PCG may take to reach the relative residual
    ``tol`` on ``A + alpha I`` preconditioned by ``factor`` scaled by ``scale``: with ``k``
    the condition number of the preconditioned system, ``||e_i||_A <= 2 rho^i ||e_0||_A``,
    ``rho = (sqrt k - 1) / (sqrt k + 1)``, and the relative residual is at most
    ``sqrt(cond(A + alpha I))`` times the relative energy-norm error."""
    p = A.shape[0]
    Pinv = _dense(factor, alpha, scale)
    w, Q = np.linalg.eigh(0.5 * (Pinv + Pinv.T))
    half = (Q * np.sqrt(w)) @ Q.T
    Ashift = A + alpha * np.eye(p)
    e = np.linalg.eigvalsh(half @ Ashift @ half)
    rho = (np.sqrt(e[-1] / e[0]) - 1) / (np.sqrt(e[-1] / e[0]) + 1)
    ea = np.linalg.eigvalsh(Ashift)
    return int(np.ceil(np.log(2 * np.sqrt(ea[-1] / ea[0]) / tol) / np.log(1 / rho)))


def _fitted_factor(est, A):
    """The Nystrom factor of the fit, rebuilt from the explicit Gram with the estimator's
    own sketch seed and rank (the same factor up to rounding)."""
    G = gaussian_test_matrix(sketch_seed(est.fold_seed_), A.shape[0], est.solver_info_["rank"])
    return nystrom_from_sketch(A @ G, G, 1.0)


def _cg_iteration_bound(est, X, Y, alpha):
    """:func:`_iteration_bound` of a fit without CV. CG broken after its first iteration
    (a wrong beta) keeps its residual true but takes more iterations (measured 141 and
    123 against bounds 87 and 96 when beta is halved; 27 when it is not)."""
    A, _ = _explicit_system(est.feature_map_, X, Y, est.fit_intercept)
    return _iteration_bound(A, _fitted_factor(est, A), alpha, 1.0, est.tol)


# ------------------------------------------------------------------ the whole solver
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("tol", [None, 1e-10], ids=["default-tol", "tight-tol"])
def test_pcg_iterates_to_a_true_residual_below_tol(fit_intercept, tol):
    X, Y = _data(n=1000)
    kw = dict(MAP, alpha=0.1, fit_intercept=fit_intercept)
    ref = RandomFeatureRidge(**kw).fit(X, Y)
    est = RandomFeatureRidge(**kw, solver="pcg", pcg_rank=8, **({} if tol is None else {"tol": tol})).fit(X, Y)
    info = est.solver_info_
    tol, requested = est.tol, tol
    assert tol == (1e-6 if requested is None else requested)
    assert est.n_output_features_ == 128 and info["rank"] == 8
    # CG iterates (measured 27 at the default tol, 43-45 at 1e-10), and no more than CG's
    # bound allows: a wrong direction update after the first iteration keeps the residual
    # true but slows CG beyond the bound
    assert info["converged"] and 10 < info["n_iter"] <= _cg_iteration_bound(est, X, Y, 0.1), info["n_iter"]
    assert info["residuals"].shape == (info["n_iter"] + 1, 2)
    np.testing.assert_allclose(info["residuals"][0], 1.0)
    assert info["residuals"][-1].max() <= tol
    true = _true_residual(est, X, Y, 0.1)
    assert (true < tol).all(), (true, tol)
    # the predictions follow (ALGORITHMS.md 3.9): measured 3.2e-6 with the intercept and
    # 1.4e-5 without (cond 7e3) at the default tol, 1e-9 at 1e-10
    assert _rel(est.predict(X), ref.predict(X)) < (3e-5 if tol == 1e-6 else 1e-8)


@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel="angular", method="rff", n_components=64, alpha=1.0),
        dict(kernel="arccos0", method="rff", n_components=64, alpha=1.0),
        dict(kernel="arccos1", method="rff", n_components=64, alpha=1.0),
        dict(kernel="linear", method="rff", n_components=64, alpha=1.0),
        dict(kernel="gaussian", method="sorf", n_components=64, gamma=0.05, alpha=0.1),
        dict(kernel="gaussian", method="nystroem", n_components=64, gamma=0.05, alpha=0.1),
        dict(kernel="linear", method="rom", rom_diagonal="complex4", n_components=16, alpha=1.0),
        dict(kernel="gaussian", method="rff", n_components=64, gamma="median", alpha=0.1),
    ],
    ids=["angular", "arccos0", "arccos1", "linear", "gaussian-sorf", "nystroem", "complex-rom", "gamma-median"],
)
def test_pcg_with_every_kernel_family_and_map_kind(kw):
    rng = np.random.default_rng(1)
    d = 16 if kw["kernel"] == "linear" else 4  # a linear Gram has rank <= d
    X = rng.standard_normal((800, d))
    Y = np.column_stack([np.sin(X[:, 0]) + X[:, 1], X[:, 2] * X[:, 3]]) + 0.1 * rng.standard_normal((800, 2))
    ref = RandomFeatureRidge(**kw, random_state=3).fit(X, Y)
    p = ref.n_output_features_
    est = RandomFeatureRidge(**kw, random_state=3, solver="pcg", pcg_rank=p // 16).fit(X, Y)
    info = est.solver_info_
    assert est.solver_ == "pcg" and info["rank"] == p // 16 and info["converged"]
    # measured 7 (complex ROM) to 67 (median rule)
    assert 5 < info["n_iter"] <= _cg_iteration_bound(est, X, Y, kw["alpha"]), info["n_iter"]
    assert est.gamma_ == ref.gamma_  # the rule's value (median) or the given width
    np.testing.assert_array_equal(est.feature_map_.transform(X[:5]), ref.feature_map_.transform(X[:5]))
    assert (_true_residual(est, X, Y, kw["alpha"]) < est.tol).all()
    assert _rel(est.predict(X), ref.predict(X)) < 3e-5  # measured 2e-7 to 4e-6


@pytest.mark.cluster
def test_pcg_with_numpy_X_on_a_local_cluster(local_cluster):
    distributed = pytest.importorskip("distributed")
    X, Y = _data(n=1200)
    kw = dict(MAP, alpha=5.0, solver="pcg", pcg_rank=8, chunk_rows=300)  # 9 iterations
    with dask.config.set(scheduler="threads"):
        local = RandomFeatureRidge(**kw).fit(X, Y)
    with distributed.Client(local_cluster):
        est = RandomFeatureRidge(**kw).fit(X, Y)
    n_iter = est.solver_info_["n_iter"]
    assert est.solver_info_["converged"] and 5 < n_iter <= _cg_iteration_bound(est, X, Y, 5.0), n_iter
    assert (_true_residual(est, X, Y, 5.0) < 1e-6).all()
    # the workers sum the blocks in another order: the same answer to the tolerance
    assert _rel(est.predict(X), local.predict(X)) < 1e-5


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_pcg_cv_refit_with_a_low_rank_preconditioner(fit_intercept):
    """0 < pcg_rank < p with cv: every (fold, alpha) system iterates, within CG's bound for
    the hardest of them; the CV errors and the refit equal the Gram path's, and the
    refit's residual in an explicit float64 Gram of the map's features is below tol."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 4))
    y = np.sin(X[:, 0]) + 2.0 + 0.1 * rng.standard_normal(600)
    K, alphas = 3, [0.03, 0.3, 3.0]
    kw = dict(MAP, cv=K, alphas=alphas, fit_intercept=fit_intercept)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # GridEdgeWarning: both paths warn alike
        ref = RandomFeatureRidge(**kw, precision="float64").fit(X, y)  # pcg's CV is float64
        est = RandomFeatureRidge(**kw, solver="pcg", tol=1e-10, pcg_rank=16).fit(X, y)
    info = est.solver_info_
    assert info["rank"] == 16 < est.n_output_features_ and info["converged"]
    np.testing.assert_allclose(est.cv_results_["fold_mse"], ref.cv_results_["fold_mse"], rtol=1e-6)
    assert est.alpha_ == ref.alpha_
    assert _rel(est.coef_, ref.coef_) < 1e-6 and _rel(est.predict(X), ref.predict(X)) < 1e-8
    A, b = _explicit_system(est.feature_map_, X, y, fit_intercept)
    r = b[:, 0] - A @ est.coef_ - est.alpha_ * est.coef_
    assert np.linalg.norm(r) / np.linalg.norm(b) < 1e-10
    # each training set's system: its own centred Gram, the total's factor scaled by n_{-k} / n
    factor = _fitted_factor(est, A)
    folds = fold_ids(np.arange(600), K, est.fold_seed_)
    bound = 0
    for k in range(K):
        Ak, _ = _explicit_system(est.feature_map_, X[folds != k], y[folds != k], fit_intercept)
        bound = max(bound, *(_iteration_bound(Ak, factor, a, (folds != k).mean(), 1e-10) for a in alphas))
    assert 10 < info["n_iter"] <= bound, (info["n_iter"], bound)


# ------------------------------------------------------------------ the Nystrom sketch
def _gram(gamma=0.02, d=3, n=1000, seed=0, intercept=True):
    """A real Gram ``Z_c^T Z_c`` of gaussian random features (p = 128), descending spectrum."""
    X = np.random.default_rng(seed).standard_normal((n, d))
    fmap = build_random_feature_map(kernel="gaussian", method="rff", n_components=64, gamma=gamma,
                                    n_features_in=d, random_state=1, options={})
    Z = fmap.transform(X)
    if intercept:
        Z = Z - Z.mean(axis=0)
    return Z.T @ Z


def test_nystrom_factor_approximates_the_top_eigenspace():
    A = _gram()
    p, l = A.shape[0], 16
    ev, V = np.linalg.eigh(A)
    ev, V = ev[::-1], V[:, ::-1]
    G = gaussian_test_matrix(7, p, l)
    P = nystrom_from_sketch(A @ G, G, 1.0)
    np.testing.assert_allclose(P.U.T @ P.U, np.eye(l), atol=1e-12)
    assert (np.diff(P.lam) <= 0).all() and (P.lam >= 0).all()
    # A_nys = U diag(lam) U^T <= A (a Nystrom approximation never overshoots), hence
    # lam_i <= lambda_i (Weyl)
    A_nys = (P.U * P.lam) @ P.U.T
    assert np.linalg.eigvalsh(A - A_nys).min() > -1e-12 * ev[0]
    assert (P.lam <= ev[:l] * (1 + 1e-12)).all()
    # the top half of the factor is the top of the spectrum (measured 0.989-0.9996 of
    # the eigenvalues, 0.9999-1 of each eigenvector inside span U)
    assert (P.lam[: l // 2] >= 0.95 * ev[: l // 2]).all(), P.lam[: l // 2] / ev[: l // 2]
    captured = np.linalg.norm(P.U.T @ V[:, : l // 2], axis=0)
    assert (captured > 0.99).all(), captured
    # the trace error against the bound on its mean, (1 + r / (l - r - 1)) sum_{j > r}
    # lambda_j [TYUC17, Thm 4.1; FTU23] (measured 0.128 against 0.556)
    bound = min((1 + r / (l - r - 1)) * ev[r:].sum() for r in range(1, l - 1))
    assert np.trace(A) - P.lam.sum() <= bound


def test_nystrom_factor_is_exact_for_a_low_rank_gram():
    rng = np.random.default_rng(2)
    Z = rng.standard_normal((10, 64))  # rank 10 < l
    A = Z.T @ Z
    G = gaussian_test_matrix(3, 64, 16)
    P = nystrom_from_sketch(A @ G, G, 1.0)
    ev = np.linalg.eigvalsh(A)[::-1]
    np.testing.assert_allclose(P.lam[:10], ev[:10], rtol=1e-10)
    assert np.abs(P.lam[10:]).max() < 1e-10 * ev[0]
    assert _rel((P.U * P.lam) @ P.U.T, A) < 1e-10


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_streamed_sketch_is_the_explicit_product(fit_intercept):
    """Pass 1's sketch, summed over row blocks whose tasks each regenerate the test
    matrix from the seed, is ``Z^T Z G``; centred, its factor is that of the explicit
    centred Gram."""
    X, Y = _data(n=900)
    fmap = build_random_feature_map(kernel="gaussian", method="rff", n_components=64, gamma=0.05,
                                    n_features_in=4, random_state=1, options={})
    Xd, yd = da.from_array(X, chunks=(250, 4)), da.from_array(Y, chunks=(250, 2))
    seed, rank = sketch_seed(12345), 16
    with dask.config.set(scheduler="threads"):
        stats, S, sums = first_pass(Xd, yd, fmap, rank=rank, seed=seed, max_block_bytes=8 * 128 * 100)
    Z = fmap.transform(X)
    G = gaussian_test_matrix(seed, 128, rank)
    np.testing.assert_allclose(S, Z.T @ (Z @ G), rtol=1e-10, atol=1e-10 * np.abs(S).max())
    np.testing.assert_allclose(stats.c[0], Z.T @ Y, rtol=1e-10)
    expected = {}  # per block its CRC; a block split between two chains: the XOR of its pieces'
    for chain in chain_steps((250, 250, 250, 150), default_n_chains()):
        for i, skip, rows in chain:
            a = 250 * i + skip
            expected[i] = expected.get(i, 0) ^ block_checksum(X[a : a + rows])
    assert sums == expected
    n = float(stats.n[0])
    mu = stats.zsum[0] / n
    P = preconditioner(S, seed, rank, mu, n, fit_intercept)
    A, _ = _explicit_system(fmap, X, Y, fit_intercept)
    Q = nystrom_from_sketch(A @ G, G, 1.0)
    np.testing.assert_allclose(P.lam, Q.lam, rtol=1e-8)
    np.testing.assert_allclose(P.U @ P.U.T, Q.U @ Q.U.T, atol=1e-8)


# ------------------------------------------------------------------ the preconditioner's scaling
def _dense(P, shift, scale):
    """P^-1 of eq. 5.3 for the system ``scale A + shift I``, as a dense matrix."""
    lam = scale * P.lam
    p = P.U.shape[0]
    return (lam[-1] + shift) * (P.U / (lam + shift)) @ P.U.T + np.eye(p) - P.U @ P.U.T


def test_preconditioner_scaling_is_the_scaled_grams_preconditioner():
    A = _gram(gamma=0.05, d=4)
    p = A.shape[0]
    G = gaussian_test_matrix(5, p, 16)
    P = nystrom_from_sketch(A @ G, G, 1.0)
    R = np.random.default_rng(0).standard_normal((p, 3))
    shifts, scales = np.array([0.01, 0.1, 1.0]), np.array([1.0, 0.75, 0.5])
    got = P.apply_columns(R, shifts, scales)
    for j in range(3):  # each column with its own system
        np.testing.assert_allclose(got[:, j], _dense(P, shifts[j], scales[j]) @ R[:, j], rtol=1e-10, atol=1e-12)
        # scaling the eigenvalues is the factor of the scaled Gram: Nystrom(s A) = s Nystrom(A)
        Ps = nystrom_from_sketch(scales[j] * (A @ G), G, shifts[j])
        np.testing.assert_allclose(Ps.apply(R[:, [j]])[:, 0], got[:, j], rtol=1e-8, atol=1e-10)


def test_full_rank_preconditioner_of_the_scaled_system_is_exact():
    """With l = p the factor is A itself and the column preconditioned for ``s A +
    alpha I`` gives ``P^-1 (s A + alpha I) = (s lam_p + alpha) I``; on a fold's training
    Gram (about ``n_{-k} / n`` of the total) the scaled factor leaves a smaller condition
    number than the unscaled one (measured 2.34 against 3.07)."""
    Z = _data_features()
    n, p = Z.shape
    A = Z.T @ Z
    G = gaussian_test_matrix(5, p, p)
    P = nystrom_from_sketch(A @ G, G, 1.0)
    alpha, s = 0.1, 0.5
    M = P.apply_columns(s * A + alpha * np.eye(p), np.full(p, alpha), np.full(p, s))
    np.testing.assert_allclose(M, (s * P.lam[-1] + alpha) * np.eye(p), atol=1e-8 * (s * P.lam[-1] + alpha))
    folds = fold_ids(np.arange(n), 2, 123)
    Zk = Z[folds != 0]
    Ak = Zk.T @ Zk + alpha * np.eye(p)
    conds = []
    for scale in ((folds != 0).sum() / n, 1.0):
        Pinv = _dense(P, alpha, scale)
        w, Q = np.linalg.eigh(0.5 * (Pinv + Pinv.T))
        half = (Q * np.sqrt(w)) @ Q.T
        e = np.linalg.eigvalsh(half @ Ak @ half)
        conds.append(e[-1] / e[0])
    assert conds[0] < 0.9 * conds[1], conds


def _data_features():
    X = np.random.default_rng(0).standard_normal((1000, 4))
    fmap = build_random_feature_map(kernel="gaussian", method="rff", n_components=64, gamma=0.05,
                                    n_features_in=4, random_state=1, options={})
    return fmap.transform(X)


# ------------------------------------------------------------------ _block_cg
def _spd_problem():
    """A real SPD system (a feature Gram plus a shift per column), three right-hand sides
    and a poor preconditioner (a rank-2 Nystrom factor of the Gram)."""
    A = _gram(gamma=0.05, d=4)
    p = A.shape[0]
    rng = np.random.default_rng(4)
    b = np.column_stack([A @ rng.standard_normal(p), rng.standard_normal(p), A[:, 0]])
    alphas = np.array([0.05, 0.5, 5.0])
    G = gaussian_test_matrix(9, p, 2)
    P = nystrom_from_sketch(A @ G, G, 1.0)
    return A, b, alphas, P


def _run_cg(A, b, alphas, P, tol, max_iter, calls=None):
    def apply_A(V, cols):
        if calls is not None:
            calls.append(np.array(cols))
        return A @ V + alphas[cols] * V

    def apply_M(R, cols):
        return P.apply_columns(R, alphas[cols], np.ones(len(cols)))

    return _block_cg(apply_A, b, apply_M, tol, max_iter)


def test_block_cg_converges_with_a_poor_preconditioner():
    A, b, alphas, P = _spd_problem()
    p = A.shape[0]
    calls = []
    x, info = _run_cg(A, b, alphas, P, 1e-10, 500, calls)
    assert info["converged"] and not info["active"].any()
    hist = info["residuals"]
    assert hist.shape == (info["n_iter"] + 1, 3) and info["n_iter"] == len(calls)
    np.testing.assert_allclose(hist[0], 1.0)
    assert (hist[-1] <= 1e-10).all()
    for j in range(3):
        Aj = A + alphas[j] * np.eye(p)
        exact = np.linalg.solve(Aj, b[:, j])
        r = np.linalg.norm(b[:, j] - Aj @ x[:, j]) / np.linalg.norm(b[:, j])
        assert r < 1e-10, (j, r)  # the true residual, not only the recurrence's
        assert _rel(x[:, j], exact) < np.linalg.cond(Aj) * 1e-10
    # each column stops at its own iteration and then leaves the block: the passes see
    # only the running columns, and a stopped column keeps its last residual
    stops = [int(np.argmax(hist[:, j] <= 1e-10)) for j in range(3)]
    assert stops[2] < stops[1] < stops[0] == info["n_iter"], stops  # larger alpha, faster
    assert stops[0] > 20  # the poor preconditioner: CG really iterates (measured 45)
    for j in range(3):
        assert all(j in c for c in calls[: stops[j]]) and not any(j in c for c in calls[stops[j]:])
        assert (hist[stops[j]:, j] == hist[stops[j], j]).all()


def test_block_cg_error_falls_at_every_iteration_within_the_cg_bound():
    """CG minimises the error in the energy norm ``||e||_A`` over the Krylov space: it
    falls at every iteration, at least as fast as ``2 ((sqrt k - 1) / (sqrt k + 1))^i``
    (``k`` the condition number of the preconditioned system), and the residual, which
    may rise, stays within ``sqrt(cond(A))`` of its smallest earlier value."""
    A, b, alphas, P = _spd_problem()
    p = A.shape[0]
    _, info = _run_cg(A, b, alphas, P, 1e-10, 500)
    n_iter = info["n_iter"]
    for j in range(3):
        Aj = A + alphas[j] * np.eye(p)
        exact = np.linalg.solve(Aj, b[:, j])
        Pinv = _dense(P, alphas[j], 1.0)
        w, Q = np.linalg.eigh(0.5 * (Pinv + Pinv.T))
        half = (Q * np.sqrt(w)) @ Q.T
        e = np.linalg.eigvalsh(half @ Aj @ half)
        rate = (np.sqrt(e[-1] / e[0]) - 1) / (np.sqrt(e[-1] / e[0]) + 1)
        energy = [np.sqrt(exact @ Aj @ exact)]  # x_0 = 0
        for i in range(1, n_iter + 1):
            x, inf = _run_cg(A, b[:, [j]], alphas[[j]], P, 1e-10, i)
            if inf["n_iter"] < i:  # this column stopped earlier
                break
            err = x[:, 0] - exact
            energy.append(np.sqrt(err @ Aj @ err))
        energy = np.array(energy)
        assert len(energy) > 10
        assert (np.diff(energy) < 0).all(), energy
        assert (energy <= 2 * rate ** np.arange(len(energy)) * energy[0] * (1 + 1e-6)).all()
        res = info["residuals"][:, j]
        prior_min = np.minimum.accumulate(res)[:-1]
        assert (res[1:] <= np.sqrt(np.linalg.cond(Aj)) * prior_min).all()


def test_block_cg_columns_are_independent_and_zero_rhs_is_solved():
    A, b, alphas, P = _spd_problem()
    b = np.column_stack([b, np.zeros(A.shape[0])])
    alphas = np.append(alphas, 1.0)
    x, info = _run_cg(A, b, alphas, P, 1e-10, 500)
    assert (x[:, 3] == 0).all() and info["residuals"][0, 3] == 0.0 and not info["active"][3]
    for j in range(3):  # sharing the passes changes nothing in a column's recurrence but the
        # rounding of products of other widths. CG's residual history amplifies rounding
        # (a relative 1e-15 change of b moves it by 1e-3 at iteration 13 here, in scipy's cg
        # as in this one; the iterates do not): the first iterations and the solution agree
        xj, ij = _run_cg(A, b[:, [j]], alphas[[j]], P, 1e-10, 500)
        assert ij["converged"] and _rel(xj[:, 0], x[:, j]) < 1e-8
        np.testing.assert_allclose(ij["residuals"][:8, 0], info["residuals"][:8, j], rtol=1e-10)
    x3, i3 = _run_cg(A, b, alphas, P, 1e-10, 3)  # stopped at max_iter: the columns still running
    assert i3["n_iter"] == 3 and not i3["converged"] and i3["active"][:3].all()


# ------------------------------------------------------------------ the fold masks
def test_fold_masks_give_each_row_to_exactly_one_fold():
    """``Z_b^T M (Z_b V)`` with the column of fold k masked on fold k's rows is the
    training Gram's product, the K masked parts add up to the full product (each row in
    exactly one fold), and sub-blocks and row offsets do not change it."""
    X, _ = _data(n=600)
    fmap = build_random_feature_map(kernel="gaussian", method="rff", n_components=64, gamma=0.05,
                                    n_features_in=4, random_state=1, options={})
    K, seed, offset = 4, 987654321, 10_000  # the block's rows are 10,000-10,599 of the data
    v = np.random.default_rng(0).standard_normal(128)
    V = np.column_stack([v] * (K + 1))
    col_folds = np.arange(K + 1)  # column K: all rows (never masked)
    Z = fmap.transform(X)
    folds = fold_ids(np.arange(offset, offset + 600), K, seed)
    full = Z.T @ (Z @ v)
    for sub_rows in (600, 37):  # one sub-block, or 17 with a partial last one
        out, sums = _matvec_block(X, offset, 3, fmap, V, col_folds, K, seed, 8 * 128 * sub_rows)
        assert sums == {3: block_checksum(X)}
        np.testing.assert_allclose(out[:, K], full, rtol=1e-10)
        for k in range(K):
            Zk = Z[folds != k]
            np.testing.assert_allclose(out[:, k], Zk.T @ (Zk @ v), rtol=1e-10, atol=1e-10 * np.abs(full).max())
        np.testing.assert_allclose((full[:, None] - out[:, :K]).sum(axis=1), full, rtol=1e-9,
                                   atol=1e-9 * np.abs(full).max())
        sq, _ = _validation_block(X, offset, 3, fmap, V[:, :K], col_folds[:K], K, seed, 8 * 128 * sub_rows)
        np.testing.assert_allclose(sq, [np.sum((Z[folds == k] @ v) ** 2) for k in range(K)], rtol=1e-10)
        np.testing.assert_allclose(sq.sum(), np.sum((Z @ v) ** 2), rtol=1e-10)
    # the chunking: the same rows in two blocks of other sizes give the same sums
    a, _ = _matvec_block(X[:250], offset, 0, fmap, V, col_folds, K, seed, 2**20)
    c, _ = _matvec_block(X[250:], offset + 250, 1, fmap, V, col_folds, K, seed, 2**20)
    np.testing.assert_allclose(a + c, out, rtol=1e-10, atol=1e-10 * np.abs(full).max())


def test_folds_are_set_by_random_state_alone():
    X, Y = _data(n=900)
    kw = dict(MAP, cv=3, alphas=[0.1, 1.0], solver="pcg", pcg_rank=8, tol=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a two-value grid: the choice is on its edge
        a, b = (RandomFeatureRidge(**kw, chunk_rows=c).fit(X, Y) for c in (200, 450))
        other = RandomFeatureRidge(**{**kw, "random_state": 6}).fit(X, Y)
    assert a.fold_seed_ == b.fold_seed_ != other.fold_seed_
    sizes = np.bincount(fold_ids(np.arange(900), 3, a.fold_seed_), minlength=3)
    np.testing.assert_array_equal(a.cv_results_["fold_sizes"], sizes)
    np.testing.assert_array_equal(b.cv_results_["fold_sizes"], sizes)
    assert sizes.sum() == 900 and (sizes > 250).all()
    assert not np.array_equal(other.cv_results_["fold_sizes"], sizes)


# ------------------------------------------------------------------ a source changing between passes
class _RewriteAfter(Callback):
    """Rewrites rows of a Zarr store when the ``after``-th computation whose graph holds
    a task named ``marker`` has finished (the threaded scheduler runs one computation
    per pass)."""

    def __init__(self, store, rows, marker, after=1):
        super().__init__()
        self.store, self.rows, self.marker, self.after, self.seen = store, rows, marker, after, 0

    def _finish(self, dsk, state, errored):
        if any(self.marker in str(k) for k in dsk):
            self.seen += 1
            if self.seen == self.after:
                import zarr

                z = zarr.open_array(self.store, mode="r+")
                z[self.rows] = z[self.rows] * 1.5


def _write_zarr(store, a, chunks):
    """A Zarr array of ``a``; the fits below read it as a zarr array, which dkrr reads by
    slice inside its steps (``Array.to_zarr`` and ``dask.array.from_zarr`` do not exist
    with dask's array query planning)."""
    zarr.create_array(store, shape=a.shape, chunks=chunks, dtype=a.dtype)[...] = a


def _zarr_X(tmp_path, n=1200, chunk=300):
    X, Y = _data(n=n)
    store = str(tmp_path / "X.zarr")
    _write_zarr(store, X, (chunk, 4))
    return store, Y


@pytest.mark.parametrize("cv", [None, 3])
def test_source_rewritten_between_passes_is_detected(tmp_path, cv):
    store, Y = _zarr_X(tmp_path)
    kw = dict(MAP, alpha=0.1, solver="pcg", pcg_rank=8, pcg_persist=False, cv=cv,
              alphas=None if cv is None else [0.1, 1.0])
    with dask.config.set(scheduler="threads"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the two-value grid's edge
        RandomFeatureRidge(**kw).fit(zarr.open_array(store, mode="r"), Y)  # unchanged: the checksums agree
        est = RandomFeatureRidge(**kw)
        with _RewriteAfter(store, slice(610, 620), "first_pass_block"):
            with pytest.raises(SourceChangedError, match=r"row block 2 \(rows 600 to 899\) read differently in pass 2 "
                                                         r"than in pass 1.*pcg_persist=True"):
                est.fit(zarr.open_array(store, mode="r"), Y)
    assert not any(is_fitted_name(k) for k in vars(est)), vars(est)  # nothing fitted


@pytest.mark.parametrize("rewritten", [slice(10010, 10020), slice(16010, 16020)])
def test_pcg_over_a_block_split_between_two_chains_iterates_to_a_true_residual(tmp_path, rewritten):
    """27,000 Zarr rows in 3 blocks on 2 chains: the cut at row 13,500 splits block 1
    (rows 9,000 to 17,999), and every CG pass reads it as two pieces. CG iterates (rank 8
    of p = 128) to a true residual below the default tol against the explicit Gram, and
    the passes agree on the pieces' checksums; rows rewritten in either piece after the
    first pass stop the fit, naming block 1."""
    n, b = 27_000, 9_000
    assert [len(c) for c in chain_steps((b, b, b), 2)] == [2, 2]  # block 1 in both chains
    store, Y = _zarr_X(tmp_path, n=n, chunk=b)
    X = np.asarray(zarr.open_array(store, mode="r")[...])
    kw = dict(MAP, alpha=0.1, solver="pcg", pcg_rank=8, pcg_persist=False)
    with dask.config.set(scheduler="threads", num_workers=2):
        est = RandomFeatureRidge(**kw).fit(zarr.open_array(store, mode="r"), Y)
        info = est.solver_info_
        assert info["converged"] and 10 < info["n_iter"] <= _cg_iteration_bound(est, X, Y, 0.1), info["n_iter"]
        true = _true_residual(est, X, Y, 0.1)
        assert (true < est.tol).all() and est.tol == 1e-6, true
        bad = RandomFeatureRidge(**kw)
        with _RewriteAfter(store, rewritten, "first_pass_block"):
            with pytest.raises(SourceChangedError, match=r"row block 1 \(rows 9000 to 17999\) read differently in pass 2"):
                bad.fit(zarr.open_array(store, mode="r"), Y)
    assert not any(is_fitted_name(k) for k in vars(bad))


def test_sample_weights_rewritten_between_passes_are_detected(tmp_path):
    store, Y = _zarr_X(tmp_path)
    wstore = str(tmp_path / "w.zarr")
    _write_zarr(wstore, np.linspace(0.5, 1.5, 1200), (300,))
    kw = dict(MAP, alpha=0.1, solver="pcg", pcg_rank=8, pcg_persist=False)
    with dask.config.set(scheduler="threads"):
        est = RandomFeatureRidge(**kw)
        with _RewriteAfter(wstore, slice(1190, 1200), "first_pass_block"):
            with pytest.raises(SourceChangedError, match=r"X or sample_weight changed during the fit: row block 3 "
                                                         r"\(rows 900 to 1199\) read differently in pass 2"):
                est.fit(zarr.open_array(store, mode="r"), Y, sample_weight=zarr.open_array(wstore, mode="r"))
    assert not any(is_fitted_name(k) for k in vars(est))


def test_source_rewritten_before_the_validation_pass_is_detected(tmp_path):
    store, Y = _zarr_X(tmp_path)
    kw = dict(MAP, solver="pcg", pcg_rank=8, pcg_persist=False, cv=3, alphas=[0.1, 1.0], tol=1e-4)
    with dask.config.set(scheduler="threads"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        n_iter = RandomFeatureRidge(**kw).fit(zarr.open_array(store, mode="r"), Y).solver_info_["n_iter"]
        with _RewriteAfter(store, slice(0, 5), "matvec_block", after=n_iter):  # after the last iteration
            with pytest.raises(SourceChangedError, match=rf"row block 0 \(rows 0 to 299\) read differently in pass "
                                                         rf"{n_iter + 2} than in pass 1"):
                RandomFeatureRidge(**kw).fit(zarr.open_array(store, mode="r"), Y)
