"""A failed fit leaves the estimator as it was (docs/architecture.md, "Fitted state").

Every solve path (the Gram path, its leverage-sampled variant, the matrix-free PCG solver;
regressor and classifier) computes a :class:`~dkrr.estimators._fitted.RidgeFit` without
touching the estimator, which sets its attributes from it in one place after success. A
fit that fails at any point (bad input found in a later pass, a ``KeyboardInterrupt``, an
error raised on a distributed worker, a singular system after the passes) leaves a first
fit unfitted (``check_is_fitted`` raises) and a refit with its previous model, which
predicts the same numbers.

The failures come from real dask sources: a block function that turns bad after the
first pass has read every block (so the PCG iterations and the second pass of the
sampled path are the ones that meet it).
"""

from __future__ import annotations

import itertools

import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier
from dkrr.errors import NonFiniteInputError, SingularSystemError
from dkrr.estimators._fitted import RidgeFit, is_fitted_name

N, D, CHUNK = 400, 3, 50
N_BLOCKS = N // CHUNK

#: the solve paths, each with the passes it makes before the ones a late failure meets
PATHS = {
    "gram": dict(solver="cholesky"),
    "gram_cv": dict(solver="cholesky", cv=3, alphas=[1e-3, 1e-1]),
    "pcg": dict(solver="pcg", alpha=1e-3, pcg_rank=2, pcg_persist=False, max_iter=50),
    "pcg_cv": dict(solver="pcg", cv=3, alphas=[1e-3, 1e-1], pcg_rank=2, pcg_persist=False, max_iter=50),
    "sampled": dict(sampling="surrogate_leverage", n_candidates=32),
}
#: passes a path makes before the last one (a failure after N_BLOCKS reads meets pass 2)
MULTI_PASS = {"pcg", "pcg_cv", "sampled"}


def _data(seed=0, classes=None):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))
    if classes is None:
        return X, np.sin(2 * X[:, 0]) + 0.1 * X[:, 1]
    return X, np.asarray(classes)[(X[:, 0] > 0).astype(int) + (len(classes) > 2) * (X[:, 1] > 1)]


def _failing(X, *, after: int, kind: str):
    """``X`` as a dask array whose blocks fail once ``after`` blocks have been read:
    ``"interrupt"`` raises KeyboardInterrupt, ``"nan"`` returns a NaN (bad input found
    in that pass), ``"error"`` raises OSError (a reader's failure)."""
    reads = itertools.count()

    def read(block):
        if next(reads) < after:
            return block
        if kind == "interrupt":
            raise KeyboardInterrupt
        if kind == "error":
            raise OSError("the source went away")
        block = block.copy()
        block[0, 0] = np.nan
        return block

    return da.from_array(X, chunks=(CHUNK, D)).map_blocks(read, dtype=X.dtype, meta=np.empty((0, D)))


def _fitted(est) -> dict:
    return {k: v for k, v in vars(est).items() if is_fitted_name(k)}


def _estimator(path, cls=RandomFeatureRidge):
    return cls(n_components=16, gamma=0.5, random_state=0, **PATHS[path])


def _expected_error(kind):
    return {"interrupt": KeyboardInterrupt, "nan": NonFiniteInputError, "error": OSError}[kind]


@pytest.mark.parametrize("path", PATHS)
def test_every_path_returns_a_result_and_sets_nothing(path):
    X, y = _data()
    est = _estimator(path)
    before = dict(vars(est))
    fit = est._fit_streamed(X, y)
    assert isinstance(fit, RidgeFit)
    assert vars(est) == before  # the path computed; the estimator is untouched
    est._set_fitted(fit, y.ndim)
    assert est.solver_ == ("pcg" if path.startswith("pcg") else "cholesky")
    assert ("cv_results_" in vars(est)) == path.endswith("_cv")
    assert ("solver_info_" in vars(est)) == path.startswith("pcg")
    np.testing.assert_array_equal(est.predict(X), RandomFeatureRidge(**est.get_params()).fit(X, y).predict(X))


@pytest.mark.parametrize("kind", ["interrupt", "nan", "error"])
@pytest.mark.parametrize("path", PATHS)
def test_a_failed_first_fit_leaves_no_fitted_state(path, kind):
    X, y = _data()
    after = N_BLOCKS if path in MULTI_PASS else N_BLOCKS // 2
    est = _estimator(path)
    with pytest.raises(_expected_error(kind)):
        est.fit(_failing(X, after=after, kind=kind), y)
    assert _fitted(est) == {}
    with pytest.raises(NotFittedError):
        check_is_fitted(est)


@pytest.mark.parametrize("kind", ["interrupt", "nan"])
@pytest.mark.parametrize("path", PATHS)
def test_a_failed_refit_keeps_the_previous_model(path, kind):
    X, y = _data()
    est = _estimator(path).fit(X, y)
    state, pred = _fitted(est), est.predict(X)
    X2, y2 = _data(seed=1)
    after = N_BLOCKS if path in MULTI_PASS else N_BLOCKS // 2
    with pytest.raises(_expected_error(kind)):
        est.set_params(n_components=24).fit(_failing(X2, after=after, kind=kind), y2)
    after_state = _fitted(est)
    assert after_state.keys() == state.keys()
    assert all(after_state[k] is state[k] for k in state)
    np.testing.assert_array_equal(est.predict(X), pred)


def test_a_refit_that_fails_in_the_solve_keeps_the_previous_model():
    """The passes succeed and the solve fails (alpha = 0, more features than rows): the
    new map and statistics existed, and none of it reached the estimator."""
    X, y = _data()
    est = RandomFeatureRidge(n_components=16, gamma=0.5, random_state=0).fit(X, y)
    state, pred = _fitted(est), est.predict(X)
    with pytest.raises(SingularSystemError):
        est.set_params(n_components=64, alpha=0.0).fit(X[:40], y[:40])
    assert _fitted(est).keys() == state.keys() and all(_fitted(est)[k] is state[k] for k in state)
    np.testing.assert_array_equal(est.predict(X), pred)


@pytest.mark.parametrize("path", ["gram", "pcg", "sampled"])
def test_a_failed_classifier_refit_keeps_its_classes_and_predictions(path):
    """The classifier finds its classes in the pass; a refit on other labels that fails
    later keeps the old classes and labels."""
    X, y = _data(classes=["a", "b"])
    clf = _estimator(path, RandomFeatureRidgeClassifier).fit(X, y)
    state, labels = _fitted(clf), clf.predict(X)
    X2, y2 = _data(seed=1, classes=["u", "v", "w"])
    after = N_BLOCKS if path in MULTI_PASS else N_BLOCKS // 2
    with pytest.raises(KeyboardInterrupt):
        clf.fit(_failing(X2, after=after, kind="interrupt"), y2)
    assert clf.classes_.tolist() == ["a", "b"]
    assert all(_fitted(clf)[k] is state[k] for k in state) and _fitted(clf).keys() == state.keys()
    np.testing.assert_array_equal(clf.predict(X), labels)


@pytest.mark.parametrize("path", ["gram", "pcg"])
def test_a_failed_first_classifier_fit_leaves_no_fitted_state(path):
    X, y = _data(classes=["a", "b", "c"])
    clf = _estimator(path, RandomFeatureRidgeClassifier)
    after = N_BLOCKS if path in MULTI_PASS else N_BLOCKS // 2
    with pytest.raises(NonFiniteInputError):
        clf.fit(_failing(X, after=after, kind="nan"), y)
    assert _fitted(clf) == {}
    with pytest.raises(NotFittedError):
        check_is_fitted(clf)


def test_a_worker_error_leaves_the_previous_model(local_cluster):
    """An error raised in a task on a LocalCluster worker (the source failing there)
    reaches the client; the estimator keeps its previous model."""
    import distributed

    X, y = _data()
    with distributed.Client(local_cluster):
        est = _estimator("gram").fit(X, y)
        state, pred = _fitted(est), est.predict(X)
        with pytest.raises(OSError, match="went away"):
            est.fit(_failing(_data(seed=1)[0], after=0, kind="error"), y)
    assert _fitted(est).keys() == state.keys() and all(_fitted(est)[k] is state[k] for k in state)
    np.testing.assert_array_equal(est.predict(X), pred)


def test_a_refit_drops_the_attributes_the_new_fit_does_not_have():
    X, y = _data()
    est = _estimator("pcg_cv").fit(X, y)
    assert {"cv_results_", "best_score_", "solver_info_"} <= vars(est).keys()
    est.set_params(solver="cholesky", cv=None, alphas=None).fit(X, y)
    assert not {"cv_results_", "best_score_", "solver_info_"} & vars(est).keys()
    assert est.solver_ == "cholesky"


def test_random_features_refit_that_fails_keeps_its_map():
    from dkrr import RandomFeatures

    X, _ = _data()
    rf = RandomFeatures(n_components=8, gamma="median", random_state=0).fit(X)
    state, Z = _fitted(rf), rf.transform(X)
    with pytest.raises(NonFiniteInputError):
        rf.fit(np.where(np.arange(N)[:, None] == 7, np.nan, X))
    assert all(_fitted(rf)[k] is state[k] for k in state)
    np.testing.assert_array_equal(rf.transform(X), Z)
