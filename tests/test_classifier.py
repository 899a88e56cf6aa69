"""RandomFeatureRidgeClassifier: equal to scikit-learn's RidgeClassifier on the same features."""

import dask.array as da
import numpy as np
import pytest
from sklearn.linear_model import RidgeClassifier

from dkrr.errors import DkrrWarning, InputValidationError
from dkrr.estimators import RandomFeatureRidge, RandomFeatureRidgeClassifier

N, D_IN = 500, 3


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(5).standard_normal((N, D_IN))


def binary(X):
    return np.where(X[:, 0] * X[:, 1] + 0.2 * X[:, 2] > 0, "yes", "no")


def three(X):
    return np.array([7, 3, 11])[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.3)]


def make(**kw):
    params = dict(method="rff", n_components=20, gamma=0.5, alpha=0.3, random_state=2, chunk_rows=128)
    params.update(kw)
    return RandomFeatureRidgeClassifier(**params)


@pytest.mark.parametrize("labels", [binary, three])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("method", ["rff", "sorf"])
def test_equals_sklearn_ridge_classifier(X, labels, fit_intercept, method):
    y = labels(X)
    clf = make(fit_intercept=fit_intercept, method=method).fit(X, y)
    Z = clf.feature_map_.transform(X)
    ref = RidgeClassifier(alpha=0.3, fit_intercept=fit_intercept).fit(Z, y)
    np.testing.assert_array_equal(clf.classes_, ref.classes_)
    assert clf.coef_.shape == ref.coef_.shape
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(clf.decision_function(X), ref.decision_function(Z), rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(clf.predict(X), ref.predict(Z))
    assert clf.score(X, y) == ref.score(Z, y) > 0.7


def test_dask_labels_and_lazy_predictions(X, scheduler):
    y = binary(X)
    clf = make(alphas=[0.1, 1.0], cv=3).fit(da.from_array(X, chunks=(90, D_IN)), da.from_array(y, chunks=200))
    ref = make(alphas=[0.1, 1.0], cv=3).fit(X, y)
    assert clf.classes_.tolist() == ["no", "yes"] and clf.alpha_ == ref.alpha_
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-10, atol=1e-12)
    pred = clf.predict(da.from_array(X, chunks=(90, D_IN)))
    assert isinstance(pred, da.Array) and pred.dtype == clf.classes_.dtype
    np.testing.assert_array_equal(pred.compute(), ref.predict(X))
    assert clf.score(da.from_array(X, chunks=100), da.from_array(y, chunks=100)) == ref.score(X, y)


def test_cv_is_ridge_cv_on_plus_minus_one_targets(X):
    y = three(X)
    clf = make(alphas=[0.01, 1.0, 30.0], cv=4).fit(X, y)
    Y = np.where(y[:, None] == np.array([3, 7, 11])[None, :], 1.0, -1.0)
    reg = RandomFeatureRidge(method="rff", n_components=20, gamma=0.5, alphas=[0.01, 1.0, 30.0], cv=4,
                             random_state=2, chunk_rows=128).fit(X, Y)
    np.testing.assert_allclose(clf.cv_results_["fold_mse"], reg.cv_results_["fold_mse"], rtol=1e-10)
    assert clf.alpha_ == reg.alpha_
    np.testing.assert_allclose(clf.coef_, reg.coef_, rtol=1e-10, atol=1e-12)


def test_unknown_labels_at_score_and_a_single_class(X):
    y = binary(X)
    clf = make().fit(X, y)
    y_bad = y.astype("U5")
    y_bad[:3] = "maybe"
    # a label never seen in fit counts as wrong, as scikit-learn's accuracy counts it, and
    # is named (it raised before: a learning curve or a search scored such splits nan)
    with pytest.warns(DkrrWarning, match=r"3 row\(s\) of y hold labels not seen during fit: \['maybe'\]"):
        got = clf.score(X, y_bad)
    pred = clf.predict(X)
    assert got == pytest.approx(np.mean(pred == y_bad), rel=1e-12)
    assert got == pytest.approx(((pred == y)[3:]).sum() / N, rel=1e-12) and got < clf.score(X, y)
    y_none = y.astype(object)
    y_none[5] = None  # not sortable against the labels: still named
    with pytest.warns(DkrrWarning, match=r"1 row\(s\) of y hold labels not seen during fit: \[None\]"):
        assert clf.score(X, y_none) == pytest.approx((np.delete(pred == y, 5)).sum() / N, rel=1e-12)
    # a y of two columns and weights of the wrong length: clear errors (numpy's broadcasting
    # errors before), as the regressor's score gives; weights are applied
    with pytest.raises(InputValidationError, match=r"class labels y must be 1-dimensional, got shape \(500, 2\)"):
        clf.score(X, np.c_[y, y])
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf.score(X, y, sample_weight=np.ones(N - 1))
    right = (clf.predict(X) == y).astype(float)
    w = np.arange(N, dtype=float)
    assert clf.score(X, y, sample_weight=w) == pytest.approx((right * w).sum() / w.sum(), rel=1e-12)
    with pytest.raises(InputValidationError, match="at least two classes"):
        make().fit(X, np.full(N, "yes"))
    with pytest.raises(InputValidationError, match="1-dimensional"):
        make().fit(X, np.zeros((N, 2)))
    with pytest.raises(InputValidationError, match=r"X has 500 .*y has 499"):
        make().fit(X, y[:-1])


@pytest.mark.skipif(not hasattr(np, "dtypes") or not hasattr(np.dtypes, "StringDType"), reason="numpy < 2")
def test_numpy_string_dtype_and_zarr_string_labels_fit_as_strings(X, tmp_path):
    """numpy 2's StringDType, and a zarr 3 array of strings (read as StringDType), were
    refused ("class labels of dtype StringDType() are not supported") though the docs say
    the classifier takes zarr y: they are read as Python strings, in fit and score."""
    import zarr

    y = binary(X).astype(str)
    ref = make().fit(X, y)
    labels = y.astype(np.dtypes.StringDType())
    z = zarr.create_array(str(tmp_path / "y.zarr"), shape=y.shape, dtype=str, chunks=(100,))
    z[:] = y
    for given in (labels, z):
        clf = make().fit(X, given)
        assert clf.classes_.tolist() == ref.classes_.tolist()
        np.testing.assert_array_equal(clf.coef_, ref.coef_)
        assert clf.score(X, given) == ref.score(X, y)
    lazy = make().fit(da.from_array(X, chunks=100), da.from_array(labels, chunks=100))
    np.testing.assert_allclose(lazy.coef_, ref.coef_, rtol=1e-12, atol=1e-12)


def test_continuous_target_and_column_labels(X):
    from sklearn.exceptions import DataConversionWarning

    with pytest.raises(InputValidationError, match="Unknown label type: continuous"):
        make().fit(X, X[:, 0])
    y = binary(X)
    with pytest.warns(DataConversionWarning):
        clf = make().fit(X, y[:, None])
    np.testing.assert_array_equal(clf.predict(X), make().fit(X, y).predict(X))


@pytest.mark.parametrize(
    "labels, match",
    [
        (np.array(["a", "b", None, "a"] * 25, dtype=object), r"25 missing label\(s\).*first in row\(s\) \[2, 6, 10, 14, 18\]"),
        (np.array([1.0, 2.0, np.nan, 1.0] * 25, dtype=object), "missing label"),
        (np.array([1, "b", 1, "b"] * 25, dtype=object), r"mixes label types \['number', 'str'\]"),
        (np.array([1, object(), 1, 2] * 25, dtype=object), "mixes label types"),
    ],
)
def test_object_labels_with_missing_or_mixed_values_are_refused(labels, match):
    X = np.random.default_rng(0).standard_normal((labels.size, 3))
    with pytest.raises(InputValidationError, match=match):
        RandomFeatureRidgeClassifier(n_components=8, random_state=0).fit(X, labels)


def _late(first, last, n=100):
    """Object labels whose first 75 rows are ``first`` and last 25 ``last`` (a later block)."""
    return np.array([first] * (n - 25) + [last] * 25, dtype=object)


@pytest.mark.parametrize(
    "labels, match",
    [
        (np.array(["a", "b"] * 49 + ["a", None], dtype=object),
         r"1 missing label\(s\) \(None, NaN or pandas' NA\) in rows 75 to 99 \(row block 3\), first in row\(s\) \[99\]"),
        (np.array(["a", "b"] * 49 + ["a", np.nan], dtype=object), r"1 missing label.* in rows 75 to 99 \(row block 3\)"),
        (np.array(["a", "b"] * 49 + ["a", 1], dtype=object), r"mixes label types \['number', 'str'\] in rows 75 to 99"),
        # blocks each of one kind: np.unique could not order them ('<' between 'int' and 'str') ...
        (_late("a", 1), r"mixes label types \['number', 'str'\] across row blocks"),
        # ... or merged True with 1 into one class without a word
        (_late(True, 1), r"mixes label types \['bool', 'number'\] across row blocks"),
    ],
    ids=["None", "NaN", "int in a str block", "str then int blocks", "bool then int blocks"],
)
@pytest.mark.parametrize("frame", [False, True], ids=["dask array", "dask DataFrame column"])
def test_dask_labels_missing_or_mixed_in_a_later_block_are_refused_by_name(labels, match, frame):
    """The rule numpy labels had: dask labels (a DataFrame column as read_csv gives it)
    with a missing or mixed label past the first block were a TypeError from np.unique
    ('boolean value of NA is ambiguous', "'<' not supported"), or with bools and ints in
    different blocks one class of True and 1."""
    X = np.random.default_rng(0).standard_normal((labels.size, 3))
    if frame and "missing" not in match:
        pytest.skip("dask.dataframe makes an object column text (convert-string): 1 and True become '1', 'True'")
    if frame:
        pd = pytest.importorskip("pandas")
        dd = pytest.importorskip("dask.dataframe")
        Xd = dd.from_pandas(pd.DataFrame(X, columns=list("abc")), npartitions=4)
        yd = dd.from_pandas(pd.Series(labels, dtype=object), npartitions=4)
    else:
        Xd, yd = da.from_array(X, chunks=25), da.from_array(labels, chunks=25)
    est = RandomFeatureRidgeClassifier(n_components=8, random_state=0)
    with pytest.raises(InputValidationError, match=match if not frame else match.split(" in rows")[0]):
        est.fit(Xd, yd)
    assert not hasattr(est, "coef_")


@pytest.mark.parametrize("missing", ["NaN", "NA"])
@pytest.mark.parametrize("kind", ["numpy", "dask"])
def test_score_counts_any_missing_true_label_as_none_wrong(X, kind, missing):
    """A missing true label is a label not seen in fit (scored wrong and named, as None
    was): pandas' NA raised 'boolean value of NA is ambiguous' from np.isin, and NaN was
    named as nan."""
    pd = pytest.importorskip("pandas")
    y = binary(X)
    est = make().fit(X, y)
    bad = pd.Series(y, dtype=object)
    bad.iloc[-1] = np.nan if missing == "NaN" else pd.NA
    bad = bad.to_numpy() if kind == "numpy" else da.from_array(bad.to_numpy(), chunks=128)
    pred = est.predict(X)
    with pytest.warns(DkrrWarning, match=r"1 row\(s\) of y hold labels not seen during fit: \[None\]"):
        assert est.score(X, bad) == pytest.approx((pred == y)[:-1].sum() / N, rel=1e-12)


@pytest.mark.parametrize("dtype", [object, "string"])
def test_pandas_na_labels_are_missing_labels(dtype):
    """pandas' NA is a missing label, as None and NaN are (it was called a label type of
    its own, with the advice y.astype(str), which makes it a class '<NA>')."""
    pd = pytest.importorskip("pandas")
    y = pd.Series(["a", "b", pd.NA, "a"] * 25, dtype=dtype)
    X = np.random.default_rng(0).standard_normal((y.size, 3))
    with pytest.raises(InputValidationError, match=r"25 missing label\(s\) \(None, NaN or pandas' NA\), "
                                                   r"first in row\(s\) \[2, 6, 10, 14, 18\]"):
        RandomFeatureRidgeClassifier(n_components=8, random_state=0).fit(X, y)


def test_an_empty_block_of_object_labels_passes_the_blocks_rule():
    """A row block of no rows (a DataFrame's empty partition) holds no label to refuse; the
    rule's kinds of no values made an IndexError."""
    from dkrr._validation import check_class_labels

    check_class_labels(np.empty(0, dtype=object), "y", 1, 40)
    with pytest.raises(InputValidationError, match=r"in rows 40 to 40 \(row block 1\), first in row\(s\) \[40\]"):
        check_class_labels(np.array([None], dtype=object), "y", 1, 40)
