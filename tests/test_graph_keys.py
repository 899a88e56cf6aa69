"""Graph keys are the identity of a result, and graphs ship seeds, not matrices.

Every graph dkrr builds gets keys tokenized from everything that determines the result
(the map's state, the coefficients, the input keys, the constants): two different results
never share a key (in one ``dask.compute`` or on a scheduler that already holds the
first), and the same model on the same input gets the same keys (dask deduplicates it).
"""

import pickle

import dask
import dask.array as da
import numpy as np
import pytest
from dask.base import tokenize

from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from dkrr.features import PROJECTIONS
from dkrr.features import feature_map_from_state
from dkrr.linalg import reduce_row_blocks

#: dask's array query planning (DASK_ARRAY__QUERY_PLANNING=True) names a map_blocks with
#: block_info after its own wrapper, not after the name given: the prefix is checked only
#: without it (the identity of the names, equal or different, is checked with both)
QUERY_PLANNING = bool(dask.config.get("array.query-planning", False))


def _dkrr_name(name: str, prefix: str) -> bool:
    return QUERY_PLANNING or name.startswith(prefix)

N, D_IN = 120, 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D_IN))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(N)
    labels = np.where(X[:, 0] * X[:, 1] > 0, "a", "b")
    A = rng.standard_normal((40, D_IN))
    B = rng.standard_normal((40, D_IN)) + 1.0
    return X, y, labels, A, B


@pytest.fixture(scope="module")
def models(data):
    X, y, labels, _, _ = data
    kw = {"method": "rff", "n_components": 16, "gamma": 0.5, "alpha": 0.1}
    m1 = RandomFeatureRidge(random_state=0, **kw).fit(X, y)
    m2 = RandomFeatureRidge(random_state=1, **kw).fit(X, y)
    c1 = RandomFeatureRidgeClassifier(random_state=0, **kw).fit(X, labels)
    c2 = RandomFeatureRidgeClassifier(random_state=1, **kw).fit(X, labels)
    return m1, m2, c1, c2


@pytest.fixture(scope="module")
def inproc_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                  dashboard_address=None) as cluster:
        yield cluster


@pytest.fixture(params=["threads", "distributed"])
def sched(request):
    """The threaded scheduler, or a Client on an in-process LocalCluster."""
    if request.param == "threads":
        with dask.config.set(scheduler="threads"):
            yield None
        return
    import distributed

    with distributed.Client(request.getfixturevalue("inproc_cluster")) as client:
        yield client


def _d(a):
    return da.from_array(a, chunks=(15, a.shape[1]))


def _one_compute_matches_numpy(*pairs):
    """``fn(dask input)`` for every ``(fn, input)`` in one ``dask.compute`` equals ``fn(input)``."""
    got = dask.compute(*(fn(_d(a)) for fn, a in pairs))
    for (fn, a), g in zip(pairs, got):
        want = fn(a)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_array_equal(g, want)
    assert not np.array_equal(got[0], got[1])  # the results differ: a shared key would hide that


def test_one_model_two_inputs_in_one_compute(data, models, sched):
    _, _, _, A, B = data
    _one_compute_matches_numpy((models[0].predict, A), (models[0].predict, B))


def test_two_models_one_input_in_one_compute(data, models, sched):
    A = data[3]
    _one_compute_matches_numpy((models[0].predict, A), (models[1].predict, A))


def test_persisted_predictions_do_not_answer_for_another_model(data, models, inproc_cluster):
    import distributed

    _, _, _, A, _ = data
    m1, m2 = models[:2]
    with distributed.Client(inproc_cluster):
        Ad = _d(A)
        held = m1.predict(Ad).persist()
        distributed.wait(held)
        np.testing.assert_allclose(m2.predict(Ad).compute(), m2.predict(A), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(held.compute(), m1.predict(A), rtol=1e-12, atol=1e-12)


def test_classifier_labels_of_two_models_and_two_inputs(data, models, sched):
    _, _, _, A, B = data
    c1, c2 = models[2:]
    _one_compute_matches_numpy((c1.predict, A), (c1.predict, B), (c2.predict, A))
    _one_compute_matches_numpy((c1.decision_function, A), (c2.decision_function, A))


@pytest.mark.parametrize("other", [{"random_state": 1}, {"method": "orf", "random_state": 0}])
def test_two_feature_maps_on_one_input_in_one_compute(data, other, sched):
    X, A = data[0], data[3]
    kw = {"method": "rff", "n_components": 8, "gamma": 0.5, "random_state": 0}
    r1 = RandomFeatures(**kw).fit(X)
    r2 = RandomFeatures(**{**kw, **other}).fit(X)
    _one_compute_matches_numpy((r1.transform, A), (r2.transform, A))


def test_same_model_same_input_same_keys(data, models):
    X, _, _, A, B = data
    m1, m2, c1, c2 = models
    Ad = _d(A)
    # deterministic: rebuilt input arrays and a refitted model give the same keys
    refit = RandomFeatureRidge(method="rff", n_components=16, gamma=0.5, alpha=0.1, random_state=0).fit(X, data[1])
    assert m1.predict(Ad).name == m1.predict(_d(A)).name == refit.predict(_d(A)).name
    assert _dkrr_name(m1.predict(Ad).name, "dkrr-decision-")
    assert m1.predict(Ad).name != m2.predict(Ad).name
    assert m1.predict(Ad).name != m1.predict(_d(B)).name
    assert c1.predict(Ad).name == c1.predict(_d(A)).name
    assert _dkrr_name(c1.predict(Ad).name, "dkrr-labels-")
    assert c1.predict(Ad).name != c2.predict(Ad).name
    # a changed coefficient (same map) is a different result
    m3 = RandomFeatureRidge(method="rff", n_components=16, gamma=0.5, alpha=0.1, random_state=0).fit(X, data[1])
    m3.coef_ = m3.coef_ * 2.0
    assert m3.predict(Ad).name != m1.predict(Ad).name
    # dask computes a shared result once: the two outputs are the same tasks
    keys = set(m1.predict(Ad).__dask_graph__()) | set(m1.predict(_d(A)).__dask_graph__())
    name = m1.predict(Ad).name
    assert len([k for k in keys if isinstance(k, tuple) and k[0] == name]) == Ad.numblocks[0]


@pytest.mark.parametrize("method", sorted(PROJECTIONS))
def test_feature_map_token_is_content_based(data, method):
    X = data[0]
    rf = RandomFeatures(method=method, n_components=8, gamma=0.5, random_state=3).fit(X)
    fmap = rf.feature_map_
    before = tokenize(fmap)
    rf.transform(X)  # builds caches on the client
    assert tokenize(fmap) == before
    assert tokenize(feature_map_from_state(fmap.get_state())) == before
    other = RandomFeatures(method=method, n_components=8, gamma=0.5, random_state=4).fit(X).feature_map_
    assert tokenize(other) != before
    z1 = rf.transform(_d(X))
    assert _dkrr_name(z1.name, "dkrr-features-")
    assert z1.name == RandomFeatures(method=method, n_components=8, gamma=0.5, random_state=3).fit(X).transform(_d(X)).name
    assert z1.name != RandomFeatures(method=method, n_components=8, gamma=0.5, random_state=4).fit(X).transform(_d(X)).name


# QMC (like RFF and ORF) stores its dense W as its state: d * D numbers legitimately
# travel. Nystroem holds its landmarks. Only the structured families ship O(D) numbers.
STRUCTURED = sorted(set(PROJECTIONS) - {"rff", "orf", "qmc"})


@pytest.mark.parametrize("method", STRUCTURED)
def test_pickled_structured_map_stays_small_after_client_transforms(method):
    d, D = 128, 1024
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, d))
    rf = RandomFeatures(method=method, n_components=D, gamma=0.01, random_state=0).fit(X)
    fmap = rf.feature_map_
    small = len(pickle.dumps(fmap))
    rf.transform(X)
    proj = fmap.projection
    if hasattr(proj, "_dense_wt"):
        proj.project(X, path="dense")  # builds a d x D dense W on the instance
        proj.project(X, path="fast")
        assert sum(a.nbytes for a in proj._dense_cache.values()) >= d * D * 8  # the cache exists
    dense_bytes = d * D * 8
    assert small < dense_bytes / 8
    assert len(pickle.dumps(fmap)) <= small
    # the graph of a lazy transform carries the same small map (plus X's 16 KiB)
    Z = rf.transform(da.from_array(X, chunks=(4, d)))
    graph_bytes = len(pickle.dumps(dict(Z.__dask_graph__())))
    assert graph_bytes < small + X.nbytes + 32 * 1024
    # the unpickled map gives the same features
    np.testing.assert_allclose(pickle.loads(pickle.dumps(fmap)).transform(X), rf.transform(X), rtol=1e-10, atol=1e-10)


def test_pickled_ridge_model_graph_stays_small():
    d, D = 128, 1024
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, d))
    y = X[:, 0]
    m = RandomFeatureRidge(method="sorf", n_components=D, gamma=0.01, alpha=1.0, random_state=0).fit(X, y)
    m.feature_map_.projection.project(X, path="dense")
    m.predict(X)
    pred = m.predict(da.from_array(X[:8], chunks=(4, d)))
    graph_bytes = len(pickle.dumps(dict(pred.__dask_graph__())))
    # coefficients (2D floats) + the O(D) map + X; the dense W alone would be d * D * 8 = 1 MiB
    assert graph_bytes < 2 * D * 8 * 4 + 64 * 1024


def _block_sum(x, row_offset, block_index, scale):
    return float(x.sum()) * scale


def _add(parts):
    return sum(parts)


def test_reduction_keys_include_constants_and_split_every():
    x = da.from_array(np.arange(40.0).reshape(20, 2), chunks=(5, 2))

    def key(**kw):
        return reduce_row_blocks([x], _block_sum, _add, compute=False, **kw).key

    base = key(constants=(1.0,), split_every=2)
    assert base == key(constants=(1.0,), split_every=2)
    assert base != key(constants=(2.0,), split_every=2)
    assert base != key(constants=(1.0,), split_every=3)
    a = reduce_row_blocks([x], _block_sum, _add, compute=False, constants=(1.0,), split_every=2)
    b = reduce_row_blocks([x], _block_sum, _add, compute=False, constants=(2.0,), split_every=2)
    c = reduce_row_blocks([x], _block_sum, _add, compute=False, constants=(1.0,), split_every=3)
    assert dask.compute(a, b, c, scheduler="threads") == (780.0, 1560.0, 780.0)
