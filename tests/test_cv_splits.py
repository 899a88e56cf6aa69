"""The folds users have (issue 27, item 3): ``cv`` as a scikit-learn splitter or explicit
(train, test) splits, ``fit(..., groups=...)``, against a brute-force per-fold numpy ridge
on the model's own features; the refusal of splits that are not a partition."""

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.model_selection import (GroupKFold, KFold, LeaveOneGroupOut, PredefinedSplit, ShuffleSplit,
                                     StratifiedKFold, TimeSeriesSplit)

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, load_model, save_model
from dkrr.errors import InvalidParameterError, InputValidationError
from dkrr.estimators._folds import fold_plan
from dkrr.linalg import fold_ids

ALPHAS = [0.01, 0.1, 1.0, 10.0]

# the grids are small on purpose; where their choice lies is not what these tests check
pytestmark = pytest.mark.filterwarnings("ignore::dkrr.errors.GridEdgeWarning")


def _data(n=240, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.2 * rng.normal(size=n) + 3.0
    groups = rng.integers(0, 17, size=n)
    return X, y, groups


def _ridge(cv, **kw):
    # float64: the fold errors equal the brute-force per-fold ridge's to 1e-8 (the default
    # "auto" scores them from float32 statistics, about 1e-6 relative)
    return RandomFeatureRidge(method="rff", n_components=24, gamma=0.5, alphas=ALPHAS, cv=cv, random_state=0,
                              precision="float64", **kw)


def brute_force(Z, y, splits):
    """Validation MSE (K, n_alphas) of a ridge with intercept fitted on each training set."""
    out = np.empty((len(splits), len(ALPHAS)))
    for k, (train, test) in enumerate(splits):
        mu, ym = Z[train].mean(0), y[train].mean()
        Zc, yc = Z[train] - mu, y[train] - ym
        for j, a in enumerate(ALPHAS):
            beta = np.linalg.solve(Zc.T @ Zc + a * np.eye(Z.shape[1]), Zc.T @ yc)
            out[k, j] = np.mean((y[test] - (Z[test] - mu) @ beta - ym) ** 2)
    return out


def _explicit(n):
    folds = np.arange(n) % 4  # interleaved, not what any hash gives
    return [(np.flatnonzero(folds != k), np.flatnonzero(folds == k)) for k in range(4)]


CASES = {
    "kfold": lambda n: (KFold(n_splits=5), None),
    "groupkfold": lambda n: (GroupKFold(n_splits=4), "groups"),
    "explicit": lambda n: (_explicit(n), None),
    "predefined": lambda n: (PredefinedSplit(np.arange(n) * 7 % 3), None),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_splitter_and_explicit_folds_equal_brute_force_per_fold_ridge(case):
    X, y, groups = _data()
    cv, g = CASES[case](len(y))
    g = groups if g else None
    est = _ridge(cv).fit(X, y, groups=g)
    splits = list(cv.split(X, y, g)) if hasattr(cv, "split") else cv
    Z = est.feature_map_.transform(X)
    want = brute_force(Z, y, splits)
    res = est.cv_results_
    np.testing.assert_allclose(res["fold_mse"], want, rtol=1e-8)
    np.testing.assert_array_equal(res["fold_sizes"], [len(test) for _, test in splits])
    sizes = np.array([len(test) for _, test in splits], dtype=float)
    assert est.alpha_ == ALPHAS[int(np.argmin(sizes @ want / sizes.sum()))]
    # the refit is the fit at the chosen alpha on every row, and dask input (another
    # chunking) gives the same folds
    ref = RandomFeatureRidge(method="rff", n_components=24, gamma=0.5, alpha=est.alpha_, random_state=0,
                             precision="float64").fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-9)
    dest = _ridge(cv).fit(da.from_array(X, chunks=(70, 3)), da.from_array(y, chunks=70), groups=g)
    np.testing.assert_allclose(dest.cv_results_["fold_mse"], want, rtol=1e-8)


def test_dask_groups_are_hashed_to_folds_whole():
    X, y, groups = _data(seed=1)
    Xd, yd, gd = da.from_array(X, chunks=(50, 3)), da.from_array(y, chunks=50), da.from_array(groups, chunks=50)
    est = _ridge(GroupKFold(n_splits=3)).fit(Xd, yd, groups=gd)
    # the groups stay the user's lazy array, streamed into the pass (not gathered on the client)
    plan = fold_plan(GroupKFold(n_splits=3), Xd, yd, gd)
    assert plan.hashed and plan.n_folds == 3 and isinstance(plan.keys, da.Array)
    # (under dask's array query planning even a no-op rechunk to X's rows renames it)
    assert plan.keys.name == gd.name or dask.config.get("array.query-planning", False)
    fold = fold_ids(groups, 3, est.fold_seed_)  # the documented hash of each group
    assert all(np.unique(fold[groups == g]).size == 1 for g in np.unique(groups))
    splits = [(np.flatnonzero(fold != k), np.flatnonzero(fold == k)) for k in range(3)]
    want = brute_force(est.feature_map_.transform(X), y, splits)
    np.testing.assert_allclose(est.cv_results_["fold_mse"], want, rtol=1e-8)
    # numpy X with the same dask groups: the same folds, whatever the chunking
    again = _ridge(GroupKFold(n_splits=3)).fit(X, y, groups=da.from_array(groups, chunks=33))
    np.testing.assert_allclose(again.cv_results_["fold_mse"], want, rtol=1e-8)


@pytest.mark.parametrize("form", ["series", "values", "lengths"])
def test_groups_from_a_dask_dataframe_in_every_form(form):
    """Groups as a dask DataFrame gives them: a column, its ``.values`` (unknown chunk
    sizes, as X and sample_weight from the same frame are counted: this one was refused as
    'groups has shape (nan,)'), or ``to_dask_array(lengths=True)``; the same folds."""
    pd = pytest.importorskip("pandas")
    dd = pytest.importorskip("dask.dataframe")
    X, y, groups = _data(seed=3)
    frame = dd.from_pandas(pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": y, "g": groups}),
                           npartitions=4)
    g = {"series": frame["g"], "values": frame["g"].values,
         "lengths": frame["g"].to_dask_array(lengths=True)}[form]
    with dask.config.set(scheduler="threads"):
        est = _ridge(GroupKFold(n_splits=3)).fit(frame[["a", "b", "c"]], frame["y"], groups=g)
    fold = fold_ids(groups, 3, est.fold_seed_)
    splits = [(np.flatnonzero(fold != k), np.flatnonzero(fold == k)) for k in range(3)]
    np.testing.assert_allclose(est.cv_results_["fold_mse"], brute_force(est.feature_map_.transform(X), y, splits),
                               rtol=1e-8)


def test_classifier_takes_a_stratified_splitter():
    X, y, _ = _data(seed=2)
    labels = np.where(y > np.median(y), "hi", "lo")
    cv = StratifiedKFold(n_splits=3)
    est = RandomFeatureRidgeClassifier(method="rff", n_components=16, gamma=0.5, alphas=ALPHAS, cv=cv, precision="float64",
                                       random_state=0).fit(X, labels)
    splits = list(cv.split(X, labels))
    np.testing.assert_array_equal(est.cv_results_["fold_sizes"], [len(t) for _, t in splits])
    t = np.where(labels == "hi", 1.0, -1.0)  # the +-1 targets the classifier regresses
    np.testing.assert_allclose(est.cv_results_["fold_mse"], brute_force(est.feature_map_.transform(X), t, splits),
                               rtol=1e-8)


def test_model_file_keeps_the_number_of_folds(tmp_path):
    X, y, _ = _data(n=120)
    est = _ridge(KFold(n_splits=3)).fit(X, y)
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.cv == 3 and back.alpha_ == est.alpha_
    np.testing.assert_array_equal(back.predict(X), est.predict(X))


@pytest.mark.parametrize("cv, match", [
    (TimeSeriesSplit(n_splits=3), r"training set of split 0 \(30 rows\) is not the 90 rows"),
    (ShuffleSplit(n_splits=3, test_size=0.2, random_state=0), "rows are in no test set|more than one test set"),
    (PredefinedSplit(np.r_[-np.ones(10, int), np.arange(110) % 3]), "10 of 120 rows are in no test set"),
    ([(np.arange(60, 120), np.arange(60)), (np.arange(60), np.arange(50, 120))], "row 50 is in more than one"),
    ([(np.arange(50, 120), np.arange(60)), (np.arange(60), np.arange(60, 120))], "training set of split 0"),
    ([(np.arange(60, 120), np.arange(120))], "training set of split 0"),
    ([(np.arange(120), np.arange(0))], "gives 1 split"),
])
def test_splits_that_are_not_a_partition_are_refused_with_the_reason(cv, match):
    X, y, _ = _data(n=120)
    est = _ridge(cv)
    with pytest.raises(InvalidParameterError, match=match) as info:
        est.fit(X, y)
    if "gives 1 split" not in match:
        assert "one fit per split" in str(info.value)
    assert not hasattr(est, "coef_")  # a failed fit leaves no fitted state


def test_groups_and_solver_refusals():
    X, y, groups = _data(n=120)
    with pytest.raises(InvalidParameterError, match="groups is given but cv=5 does not use groups"):
        _ridge(5).fit(X, y, groups=groups)
    with pytest.raises(InvalidParameterError, match="not available with solver='pcg'"):
        _ridge(KFold(3), solver="pcg").fit(X, y)
    with pytest.raises(InvalidParameterError, match="only GroupKFold is computed without gathering"):
        _ridge(LeaveOneGroupOut()).fit(X, y, groups=da.from_array(groups, chunks=40))
    with pytest.raises(InputValidationError, match="dask groups must be integer codes"):
        _ridge(GroupKFold(3)).fit(X, y, groups=da.from_array(groups.astype(float), chunks=40))
    with pytest.raises(InputValidationError, match=r"groups has shape \(119,\)"):
        _ridge(GroupKFold(3)).fit(X, y, groups=groups[:-1])
    with pytest.raises(InvalidParameterError, match="cv must be None, an int"):
        _ridge(3.5).fit(X, y)
