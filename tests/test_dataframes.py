"""pandas and dask DataFrames in the estimators: feature_names_in_ as scikit-learn has it.

Real pandas and dask DataFrames (dask's from_pandas and read_parquet), real fits.
"""

from __future__ import annotations

import warnings

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import check_dataframe_column_names_consistency

import dask
import dask.array as da

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.errors import FeatureMismatchError, InputTypeError, InputValidationError, InvalidParameterError
from dkrr.io._model import load_model, save_model

FEATURES = ["x0", "x1", "x2"]

#: dask's array query planning (DASK_ARRAY__QUERY_PLANNING=True; read when dask.array is imported)
QUERY_PLANNING = bool(dask.config.get("array.query-planning", False))
#: dask's read_parquet calls reset_index(inplace=True), which pandas 3.1 deprecates (not dkrr's)
pytestmark = pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame")


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.standard_normal((400, 3)), columns=FEATURES)
    df["y"] = np.sin(df.x0) + df.x1 * df.x2
    df["kind"] = np.where(df.x0 > 0.3, "high", np.where(df.x0 < -0.3, "low", "mid"))
    return df


def _ridge(**kw):
    return RandomFeatureRidge(method="rff", n_components=32, gamma=0.5, random_state=0, **kw)


@pytest.mark.parametrize("estimator", [
    RandomFeatureRidge(method="rff", n_components=32, gamma=0.1, random_state=0),
    RandomFeatureRidgeClassifier(method="rff", n_components=32, gamma=0.5, random_state=0),
    RandomFeatures(method="rff", n_components=16, random_state=0),
], ids=lambda e: type(e).__name__)
def test_scikit_learns_dataframe_column_names_check(estimator):
    check_dataframe_column_names_consistency(type(estimator).__name__, estimator)


@pytest.mark.skipif(not QUERY_PLANNING, reason="only with dask's array query planning on")
def test_dataframes_are_refused_clearly_under_query_planning(frame):
    ddf = dd.from_pandas(frame, npartitions=5)
    with pytest.raises(InputValidationError, match=r"X: this dask cannot turn a dask DataFrame into a dask "
                                                   r"array with its array query planning on .*ingest the data"):
        _ridge().fit(ddf[FEATURES], ddf["y"])


@pytest.mark.skipif(QUERY_PLANNING, reason="dask cannot turn a DataFrame into an array under its array query "
                    "planning; dkrr refuses (test_dataframes_are_refused_clearly_under_query_planning)")
def test_dask_dataframe_fit_and_predict_with_its_column_names(frame):
    ddf = dd.from_pandas(frame, npartitions=5)
    est = _ridge().fit(ddf[FEATURES], ddf["y"])
    assert est.feature_names_in_.tolist() == FEATURES and est.feature_names_in_.dtype == object
    ref = _ridge().fit(frame[FEATURES].to_numpy(), frame["y"].to_numpy())
    pred = est.predict(ddf[FEATURES])
    assert isinstance(pred, da.Array) and pred.chunks[0] == (80,) * 5  # lazy, per partition
    np.testing.assert_allclose(pred.compute(), ref.predict(frame[FEATURES].to_numpy()), rtol=1e-10)
    np.testing.assert_allclose(est.predict(frame[FEATURES]), pred.compute(), rtol=1e-12)
    assert est.score(ddf[FEATURES], ddf["y"]) == pytest.approx(est.score(frame[FEATURES], frame["y"]))
    # sample weights as a dask Series of the same frame
    w = ddf["x0"].abs() + 0.5
    weighted = _ridge().fit(ddf[FEATURES], ddf["y"], sample_weight=w)
    ref = _ridge().fit(frame[FEATURES].to_numpy(), frame["y"].to_numpy(), sample_weight=w.compute().to_numpy())
    np.testing.assert_allclose(weighted.coef_, ref.coef_, rtol=1e-9)


@pytest.mark.skipif(QUERY_PLANNING, reason="dask cannot turn a DataFrame into an array under its array query "
                    "planning; dkrr refuses (test_dataframes_are_refused_clearly_under_query_planning)")
def test_dask_dataframe_from_parquet_and_the_classifier(frame, tmp_path):
    frame.to_parquet(tmp_path / "d.parquet", row_group_size=100)
    ddf = dd.read_parquet(tmp_path / "d.parquet")
    clf = RandomFeatureRidgeClassifier(method="rff", n_components=64, gamma=0.5, random_state=0)
    clf.fit(ddf[FEATURES], ddf["kind"])
    assert clf.classes_.tolist() == ["high", "low", "mid"] and clf.feature_names_in_.tolist() == FEATURES
    assert clf.score(ddf[FEATURES], ddf["kind"]) > 0.9
    assert (clf.predict(ddf[FEATURES]).compute() == clf.predict(frame[FEATURES])).all()


@pytest.mark.skipif(QUERY_PLANNING, reason="dask cannot turn a DataFrame into an array under its array query "
                    "planning; dkrr refuses (test_dataframes_are_refused_clearly_under_query_planning)")
def test_read_parquet_frames_whose_column_selection_merges_partitions(frame, tmp_path):
    """dask's own ``to_dask_array(lengths=True)`` fails here (it counts 2 partitions where
    the array has 4, or the reverse): the blocks of the array itself are counted."""
    (tmp_path / "d.parquet").mkdir()
    for k in range(4):
        frame.iloc[100 * k:100 * (k + 1)].to_parquet(tmp_path / "d.parquet" / f"part.{k}.parquet", index=False)
    ddf = dd.read_parquet(tmp_path / "d.parquet")
    est = _ridge(standardize=True).fit(ddf[FEATURES], ddf["y"])  # a moments pass, then the fit
    ref = _ridge(standardize=True).fit(frame[FEATURES], frame["y"])
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.predict(ddf[FEATURES]).compute(), ref.predict(frame[FEATURES]),
                               rtol=1e-9, atol=1e-12)


def test_names_must_match_at_predict(frame):
    est = _ridge().fit(frame[FEATURES], frame["y"])
    with pytest.raises(FeatureMismatchError, match="Feature names must be in the same order as they were in fit"):
        est.predict(frame[FEATURES[::-1]])
    renamed = frame[FEATURES].rename(columns={"x1": "z1"})
    with pytest.raises(ValueError, match=r"(?s)Feature names unseen at fit time:\n- z1\n"
                                         r"Feature names seen at fit time, yet now missing:\n- x1\n"):
        est.predict(renamed)
    with pytest.raises(FeatureMismatchError, match=r"(?s)yet now missing:\n- x2"):
        est.predict(frame[FEATURES[:2]])  # the names are checked before the count
    ddf = dd.from_pandas(frame, npartitions=2)
    with pytest.raises(FeatureMismatchError, match="same order"):
        est.predict(ddf[FEATURES[::-1]])  # a dask DataFrame: refused before any compute
    with pytest.warns(UserWarning, match="X does not have valid feature names, but RandomFeatureRidge was "
                                         "fitted with feature names"):
        est.predict(frame[FEATURES].to_numpy())
    plain = _ridge().fit(frame[FEATURES].to_numpy(), frame["y"])
    assert not hasattr(plain, "feature_names_in_")
    with pytest.warns(UserWarning, match="X has feature names, but RandomFeatureRidge was fitted without"):
        plain.predict(frame[FEATURES])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.predict(frame[FEATURES])  # the same names: no warning


def test_which_column_names_count(frame):
    X = frame[FEATURES].to_numpy()
    est = _ridge().fit(pd.DataFrame(X), frame["y"])  # integer names: none recorded (sklearn)
    assert not hasattr(est, "feature_names_in_")
    with pytest.raises(InputTypeError, match=r"only supported if all input features have string names.*"
                                             r"\['int', 'str'\]"):
        _ridge().fit(pd.DataFrame(X, columns=["a", 1, "c"]), frame["y"])
    est = _ridge().fit(frame[FEATURES], frame["y"])
    est.fit(X, frame["y"])  # a refit without names forgets them
    assert not hasattr(est, "feature_names_in_")
    fresh = _ridge(alpha=-1.0)
    with pytest.raises(InvalidParameterError):
        fresh.fit(frame[FEATURES], frame["y"])
    assert not hasattr(fresh, "feature_names_in_")  # a failed fit records nothing


def test_non_numeric_columns_are_refused_with_their_names(frame):
    with pytest.raises(InputValidationError, match=r"X has 1 column\(s\) that are not numeric: 'kind'"):
        _ridge().fit(frame[FEATURES + ["kind"]], frame["y"])
    ddf = dd.from_pandas(frame, npartitions=3)
    with pytest.raises(InputValidationError, match=r"not numeric: 'kind'"):
        _ridge().fit(ddf[FEATURES + ["kind"]], ddf["y"])
    with pytest.raises(InputValidationError, match=r"y is a Series \('kind'\) of dtype \w+, not numbers"):
        _ridge().fit(frame[FEATURES], frame["kind"])  # a regression target must be numbers
    # a Series is not said to have columns (its name None was listed as a column)
    with pytest.raises(InputValidationError, match=r"y is a Series of dtype object, not numbers; .*y.astype\(float\)"):
        _ridge().fit(frame[FEATURES], pd.Series([1.0, None] * (len(frame) // 2), dtype=object))
    est = _ridge().fit(frame[FEATURES], frame["y"])
    with pytest.raises(InputValidationError, match="not numeric: 'x1'"):
        est.predict(frame[FEATURES].astype({"x1": str}))


def test_duplicate_column_names_are_refused_by_name_and_counted_by_position(frame):
    """Two columns named 'x1' (both numbers) were refused as 'not numeric' with a dtype
    Series in the message (the dtypes read through a dict). Now: a duplicate string name is
    refused as such (as scikit-learn does), at fit and predict, for pandas and dask frames;
    a non-numeric column among duplicates is found by position; duplicate integer names,
    which are not recorded as feature names, fit as before."""
    twice = frame[FEATURES].copy()
    twice.columns = ["x1"] * 2 + FEATURES[2:]
    for X in (twice, dd.from_pandas(twice, npartitions=2)):
        with pytest.raises(InputValidationError, match=r"^X has duplicate column names: 'x1' 2 times; give every"):
            _ridge().fit(X, frame["y"])
    est = _ridge().fit(frame[FEATURES], frame["y"])
    with pytest.raises(InputValidationError, match="duplicate column names: 'x1' 2 times"):
        est.predict(twice)
    numbered = frame[FEATURES].copy()
    numbered.columns = [0, 0] + list(range(1, len(FEATURES) - 1))
    np.testing.assert_array_equal(_ridge().fit(numbered, frame["y"]).coef_, est.coef_)
    numbered[0] = numbered[0].astype(str)  # both columns named 0 become strings
    with pytest.raises(InputValidationError, match=r"X has 2 column\(s\) that are not numeric: 0 \(\w+\), 0 \(\w+\);"):
        _ridge().fit(numbered, frame["y"])


def test_pandas_input_and_nullable_columns(frame):
    est = _ridge().fit(frame[FEATURES], frame["y"])
    ref = _ridge().fit(frame[FEATURES].to_numpy(), frame["y"].to_numpy())
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    ints = frame[FEATURES].round().astype("Int64")
    ints.loc[5, "x1"] = pd.NA
    with pytest.raises(InputValidationError, match="missing value"):
        _ridge().fit(ints, frame["y"])
    rf = RandomFeatures(method="rff", n_components=8, random_state=0).fit(frame[FEATURES])
    assert rf.feature_names_in_.tolist() == FEATURES
    with pytest.warns(UserWarning, match="fitted with feature names"):
        plain = rf.transform(frame[FEATURES].to_numpy())
    np.testing.assert_array_equal(rf.transform(frame[FEATURES]), plain)


def test_model_files_keep_the_column_names(frame, tmp_path):
    clf = RandomFeatureRidgeClassifier(method="rff", n_components=32, random_state=0)
    clf.fit(frame[FEATURES], frame["kind"])
    save_model(clf, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.feature_names_in_.tolist() == FEATURES and back.feature_names_in_.dtype == object
    assert (back.predict(frame[FEATURES]) == clf.predict(frame[FEATURES])).all()
    with pytest.raises(FeatureMismatchError, match="same order"):
        back.predict(frame[FEATURES[::-1]])
    plain = _ridge().fit(frame[FEATURES].to_numpy(), frame["y"])
    save_model(plain, tmp_path / "p")
    assert not hasattr(load_model(tmp_path / "p"), "feature_names_in_")


def test_feature_names_out_check_input_features_as_scikit_learns_transformers(frame, tmp_path):
    """get_feature_names_out(input_features) ignored its argument: any names, of any
    length, gave ``randomfeatures0..``; scikit-learn's RBFSampler refuses them."""
    from sklearn.kernel_approximation import RBFSampler

    named = RandomFeatures(method="rff", n_components=4, random_state=0).fit(frame[FEATURES])
    plain = RandomFeatures(method="rff", n_components=4, random_state=0).fit(frame[FEATURES].to_numpy())
    want = [f"randomfeatures{i}" for i in range(8)]  # cos and sin of 4 frequencies
    for est in (named, plain, load_model(save_model(named, tmp_path / "m") or tmp_path / "m")):
        assert est.get_feature_names_out().tolist() == want
        assert est.get_feature_names_out(FEATURES).tolist() == want
    sk = RBFSampler(n_components=4, random_state=0)
    for est, fitted in ((named, frame[FEATURES]), (plain, frame[FEATURES].to_numpy())):
        for wrong in (["a", "b", "c"], ["x0"]):
            if est is plain and len(wrong) == 3:
                continue  # without names any 3 names are X's
            with pytest.raises(ValueError) as ours:
                est.get_feature_names_out(wrong)
            with pytest.raises(ValueError) as theirs:
                sk.fit(fitted).get_feature_names_out(wrong)
            assert str(ours.value) == str(theirs.value)


def test_dask_arrays_with_unknown_chunk_sizes_are_counted(frame):
    """A dask array whose row chunks are unknown (NaN: a boolean mask's result, a
    DataFrame's ``.values``) is fitted as the same rows with their chunks known: its blocks'
    rows are counted in one compute. Before, X and y of the same rows were refused as
    "different numbers of rows: X has nan"."""
    X, y = frame[FEATURES].to_numpy(), frame["y"].to_numpy()
    keep = np.abs(X[:, 0]) < 2.0  # drops some rows; the masked arrays' chunks are unknown

    def masked(a):
        return _masked(a, keep, 75)

    Xd, yd, wd = masked(X), masked(y), masked(1.0 + X[:, 1] ** 2)
    assert np.isnan(Xd.shape[0]) and np.isnan(yd.shape[0]) and np.isnan(wd.shape[0])
    rows = tuple(int(keep[k:k + 75].sum()) for k in range(0, keep.size, 75))  # each block's kept rows

    def known_rows(a):  # the same blocks with their lengths known: the reference
        return da.from_array(a[keep], chunks=(rows,) + a.shape[1:])

    known = [known_rows(a) for a in (X, y, 1.0 + X[:, 1] ** 2)]
    ref = _ridge(cv=3).fit(*known[:2], sample_weight=known[2])
    est = _ridge(cv=3).fit(Xd, yd, sample_weight=wd)
    assert est.alpha_ == ref.alpha_
    np.testing.assert_array_equal(est.coef_, ref.coef_)
    # and the rows are those of numpy's mask (to the rounding of another chunking)
    plain = _ridge(alpha=ref.alpha_).fit(X[keep], y[keep], sample_weight=1.0 + X[keep, 1] ** 2)
    np.testing.assert_allclose(est.coef_, plain.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_array_equal(_ridge().fit(Xd, y[keep]).coef_, _ridge().fit(known[0], y[keep]).coef_)  # numpy y
    labels = masked(frame["kind"].to_numpy())
    clf = RandomFeatureRidgeClassifier(method="rff", n_components=32, gamma=0.5, random_state=0).fit(Xd, labels)
    ref_clf = RandomFeatureRidgeClassifier(method="rff", n_components=32, gamma=0.5, random_state=0)
    ref_clf.fit(known[0], known_rows(frame["kind"].to_numpy()))
    assert clf.classes_.tolist() == ["high", "low", "mid"]
    np.testing.assert_array_equal(clf.coef_, ref_clf.coef_)
    # predict counts them too (dask's array query planning cannot rechunk unknown chunks)
    pred = est.predict(Xd)
    assert pred.chunks == (rows,)
    np.testing.assert_array_equal(pred.compute(), ref.predict(known[0]).compute())


@pytest.mark.skipif(QUERY_PLANNING, reason="dask cannot turn a DataFrame into an array under its array query "
                    "planning; dkrr refuses (test_dataframes_are_refused_clearly_under_query_planning)")
def test_a_dask_dataframes_values_are_counted(frame):
    ddf = dd.from_pandas(frame, npartitions=4)
    ref = _ridge().fit(frame[FEATURES].to_numpy(), frame["y"].to_numpy())
    est = _ridge().fit(ddf[FEATURES].values, ddf["y"].to_dask_array())
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


def test_the_low_level_passes_name_unknown_chunk_sizes(frame):
    from dkrr.linalg._blocks import as_row_chunked

    X, y = frame[FEATURES].to_numpy(), frame["y"].to_numpy()
    keep = X[:, 0] > 0

    with pytest.raises(InputValidationError, match=r"X is a dask array with unknown chunk sizes .*"
                                                   r"call `X.compute_chunk_sizes\(\)` first"):
        as_row_chunked(_masked(X, keep, 100), y[keep])
    with pytest.raises(InputValidationError, match=r"y is a dask array with unknown chunk sizes"):
        as_row_chunked(X[keep], _masked(y, keep, 100))


def _masked(a, keep, rows):
    """``a[keep]`` as a dask array of ``rows``-row blocks whose lengths dask does not know
    (NaN), as a boolean mask or a DataFrame's ``.values`` give."""
    blocks = da.from_array(a, chunks=(rows,) + a.shape[1:])
    return blocks.map_blocks(_kept_rows, keep, dtype=a.dtype,
                             chunks=((np.nan,) * blocks.numblocks[0],) + blocks.chunks[1:])


def _kept_rows(block, keep, block_info=None):
    """The rows of a row block that ``keep`` (the whole array's mask) keeps."""
    start, stop = block_info[0]["array-location"][0]
    return block[keep[start:stop]]
