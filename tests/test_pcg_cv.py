"""Cross-validation with solver="pcg": fold-masked matvecs (ALGORITHMS.md 3.9).

Every (fold, alpha, target) system and the full-data refit of every alpha share each
pass; the fold errors, the chosen alpha, the default grid and the final model equal the
Gram path's one-pass CV (section 3.6) where both run.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier
from dkrr.errors import InvalidParameterError

MAP = {"method": "rff", "n_components": 64, "gamma": 0.3, "random_state": 5}


def _data(n=1500, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    Y = np.column_stack([np.sin(X[:, 0]) + 2.0, X[:, 1] ** 2 - X[:, 2]])
    return X, Y + 0.1 * rng.standard_normal(Y.shape)


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(np.asarray(b)))


def _quiet_fit(est, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)  # GridEdgeWarning: both paths warn alike
        return est.fit(X, y)


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("alphas", [[0.01, 0.1, 1.0, 10.0], None], ids=["grid", "default-grid"])
def test_pcg_cv_equals_gram_path(fit_intercept, alphas):
    X, Y = _data()
    kw = dict(MAP, cv=4, alphas=alphas, fit_intercept=fit_intercept)
    ref = _quiet_fit(RandomFeatureRidge(**kw, precision="float64"), X, Y)  # pcg's passes are float64
    # rank 128 = p: the factor is the total Gram's, and each fold's scaled copy is close
    est = _quiet_fit(RandomFeatureRidge(**kw, solver="pcg", tol=1e-11, pcg_rank=128, max_iter=500), X, Y)
    assert est.solver_ == "pcg" and ref.solver_ == "cholesky"
    assert est.solver_info_["converged"]
    # the default grid's scale: trace(G') / p from the column sums of squares, no Gram
    np.testing.assert_allclose(est.cv_results_["alphas"], ref.cv_results_["alphas"], rtol=1e-12)
    np.testing.assert_array_equal(est.cv_results_["fold_sizes"], ref.cv_results_["fold_sizes"])
    assert _rel(est.cv_results_["fold_mse"], ref.cv_results_["fold_mse"]) < 1e-6
    np.testing.assert_allclose(est.cv_results_["fold_mse"], ref.cv_results_["fold_mse"], rtol=1e-6)
    np.testing.assert_allclose(est.cv_results_["mean_mse"], ref.cv_results_["mean_mse"], rtol=1e-6)
    assert est.alpha_ == ref.alpha_ and est.best_score_ == pytest.approx(ref.best_score_, rel=1e-6)
    assert _rel(est.coef_, ref.coef_) < 1e-6
    assert _rel(est.predict(X), ref.predict(X)) < 1e-6
    # the full-data fit of every alpha ran in the same passes: no refit afterwards
    info = est.solver_info_
    n_alphas = len(est.cv_results_["alphas"])
    assert info["passes"] == info["n_iter"] + 2
    assert info["residuals"].shape == (info["n_iter"] + 1, (4 + 1) * n_alphas * 2)


def test_pcg_cv_classifier_equals_gram_path():
    X, _ = _data(n=1200)
    y = np.array(["a", "b", "c"])[(X[:, 0] > 0.3).astype(int) + (X[:, 1] > 0.5).astype(int)]
    kw = dict(MAP, cv=3, alphas=[0.1, 1.0, 10.0])
    ref = _quiet_fit(RandomFeatureRidgeClassifier(**kw), X, y)
    est = _quiet_fit(RandomFeatureRidgeClassifier(**kw, solver="pcg", tol=1e-11), X, y)
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    np.testing.assert_allclose(est.cv_results_["fold_mse"], ref.cv_results_["fold_mse"], rtol=1e-6)
    assert est.alpha_ == ref.alpha_
    assert _rel(est.decision_function(X), ref.decision_function(X)) < 1e-6


def test_pcg_cv_does_not_depend_on_chunking():
    X, Y = _data(n=1200)
    kw = dict(MAP, cv=3, alphas=[0.1, 1.0], solver="pcg", tol=1e-12, pcg_rank=128)
    a, b = (RandomFeatureRidge(**kw, chunk_rows=c).fit(X, Y) for c in (200, 500))
    np.testing.assert_allclose(a.cv_results_["fold_mse"], b.cv_results_["fold_mse"], rtol=1e-9)
    assert _rel(a.coef_, b.coef_) < 1e-9


def test_unconverged_alphas_are_named():
    X, Y = _data(n=600)
    with pytest.warns(ConvergenceWarning, match=r"max_iter=20 .*the chosen alpha_=0\.0001 is one of the alphas whose "
                                                r"systems did not converge \(\[0\.0001\]\).*coefficients are those of "
                                                r"the stopped CG iterate"):
        est = RandomFeatureRidge(**MAP, cv=3, alphas=[1e-4, 100.0], solver="pcg", pcg_rank=0, tol=1e-12,
                                 max_iter=20).fit(X, Y)
    info = est.solver_info_
    assert est.alpha_ == 1e-4 and not info["converged"] and info["n_iter"] == 20
    # the large alpha's columns converged and left the block: their residual is final
    last = info["residuals"][-1].reshape(4, 2, 2)
    assert (last[:, 1] <= 1e-12).all() and (last[:, 0] > 1e-12).all()


def test_unconverged_alphas_not_chosen_are_named():
    # pure noise: CV chooses the large alpha, whose systems converged
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((600, 4)), rng.standard_normal((600, 2))
    with pytest.warns(ConvergenceWarning, match=r"max_iter=20 .*the systems of alphas \[0\.0001\] did not converge, "
                                                r"so their CV errors are those of the stopped CG iterate; the chosen "
                                                r"alpha_=100 converged"):
        est = RandomFeatureRidge(**MAP, cv=3, alphas=[1e-4, 100.0], solver="pcg", pcg_rank=0, tol=1e-12,
                                 max_iter=20).fit(X, Y)
    assert est.alpha_ == 100.0


def test_pcg_cv_refusals_name_the_fix():
    X, Y = _data(n=300)
    with pytest.raises(InvalidParameterError, match=r"alpha = 0: solver='pcg' needs every alpha > 0"):
        RandomFeatureRidge(**MAP, cv=3, alphas=[0.0, 1.0], solver="pcg").fit(X, Y)
    with pytest.raises(InvalidParameterError, match=r"gammas=.*not cross-validated by solver='pcg'.*one gamma at a time"):
        RandomFeatureRidge(**MAP, cv=3, gammas=[0.1, 1.0], solver="pcg").fit(X, Y)
