"""One pass: a fit with cross-validation over an alpha grid loads every block exactly once."""

import collections
import os
import uuid

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback

from dkrr.estimators import RandomFeatureRidge, RandomFeatureRidgeClassifier

ROWS, D_IN = (80, 120, 45, 100, 55), 4


def counting_array(values, counter_dir, name):
    """A dask array whose blocks are produced by a loader that records every call in a file
    (so calls made in worker processes are counted too)."""
    chunks = (ROWS,) + tuple((s,) for s in values.shape[1:])

    def load(block_info=None):
        info = block_info[None]
        i = info["chunk-location"][0]
        start, stop = info["array-location"][0]
        open(os.path.join(counter_dir, f"{name}-{i}-{uuid.uuid4().hex}"), "w").close()
        return values[start:stop].copy()

    return da.map_blocks(load, chunks=chunks, dtype=values.dtype,
                         meta=np.empty((0,) * values.ndim, dtype=values.dtype))


def loads(counter_dir):
    return collections.Counter(f.rsplit("-", 1)[0] for f in os.listdir(counter_dir))


class CountComputes(Callback):
    def __init__(self):
        super().__init__()
        self.n = 0

    def _start(self, dsk):
        self.n += 1


@pytest.mark.parametrize("classifier", [False, True])
def test_fit_with_cv_and_alpha_grid_reads_each_block_once(tmp_path, scheduler, classifier):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((sum(ROWS), D_IN))
    y = np.where(X[:, 0] > 0, "a", "b") if classifier else np.sin(X[:, 0]) + 0.1 * rng.standard_normal(len(X))
    Xd = counting_array(X, str(tmp_path), "X")
    yd = counting_array(y, str(tmp_path), "y")
    cls = RandomFeatureRidgeClassifier if classifier else RandomFeatureRidge
    # precision="float64": one pass (the default "auto" reads X again per refinement step)
    est = cls(method="rff", n_components=16, gamma=0.5, alphas=[1e-3, 1e-2, 0.1, 1.0, 10.0], cv=5,
              random_state=0, split_every=2, precision="float64")
    counter = CountComputes()
    with counter:
        est.fit(Xd, yd)
    expected = {f"X-{i}": 1 for i in range(len(ROWS))} | {f"y-{i}": 1 for i in range(len(ROWS))}
    if not classifier:
        # a numeric target's first block is read once more before the pass: its mean is
        # the shift that keeps the statistics free of cancellation (ALGORITHMS 3.4)
        expected["y-0"] = 2
    assert dict(loads(tmp_path)) == expected
    if scheduler == "threads":
        # the pass, the fold solves on its kept result (no block is read) and the first y block
        assert counter.n == (2 if classifier else 3)
    # the model is the one fitted from the same data in memory
    ref = cls(method="rff", n_components=16, gamma=0.5, alphas=[1e-3, 1e-2, 0.1, 1.0, 10.0], cv=5,
              random_state=0, precision="float64").fit(X, y)
    assert est.alpha_ == ref.alpha_ and est.cv_results_["fold_mse"].shape == (5, 5)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-10, atol=1e-12)


def test_lazy_predict_reads_each_block_once(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((sum(ROWS), D_IN))
    est = RandomFeatureRidge(method="rff", n_components=8, random_state=0).fit(X, X[:, 0])
    Xd = counting_array(X, str(tmp_path), "X")
    pred = est.predict(Xd)
    assert not os.listdir(tmp_path)  # nothing computed yet
    with dask.config.set(scheduler="threads"):
        np.testing.assert_allclose(pred.compute(), est.predict(X), rtol=1e-12)
    assert dict(loads(tmp_path)) == {f"X-{i}": 1 for i in range(len(ROWS))}
