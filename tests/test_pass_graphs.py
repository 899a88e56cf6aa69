"""The graphs of the passes: what travels per pass, and the fits with dask's array query
planning on.

* numpy X given with a distributed Client is persisted on the workers once; a PCG fit's
  passes name its blocks, and the per-pass arrays (the directions ``V``, the validation
  pass's coefficients) are scattered to the workers, not carried in the graph. Measured
  with the Client's own check of every graph it sends (``Sending large graph`` above
  ``distributed.admin.large-graph-warning-threshold``), on a real LocalCluster.
* ``DASK_ARRAY__QUERY_PLANNING=True`` is read once, when ``dask.array`` is first imported,
  so the fits with it run in a subprocess and must give this process's results.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import dask
import numpy as np
import pytest
from packaging.version import Version

from dkrr import RandomFeatureRidge


def _large_graphs(fn, threshold: str) -> list[str]:
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": threshold}):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
    return [str(w.message).splitlines()[0] for w in caught if "Sending large graph" in str(w.message)]


@pytest.mark.cluster
def test_pcg_over_numpy_X_on_a_cluster_sends_X_once(local_cluster):
    """X (0.5 MB) and y go to the workers in one graph; the 5 passes after it send graphs of
    a few kB although each iteration's V (p = 1024 features x 8 systems, 64 KiB) and the
    validation pass's coefficients (48 KiB) are larger than the 16 kB threshold: they are
    scattered. Before, with ``pcg_persist=False`` every pass carried X (this fit sent five
    graphs of 551-567 kiB) and, with X persisted, V (133 kiB a pass at p = 2048)."""
    import distributed

    rng = np.random.default_rng(0)
    X = rng.standard_normal((8_000, 8))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(8_000)
    est = RandomFeatureRidge(method="sorf", n_components=512, gamma=0.1, solver="pcg", pcg_rank=8, tol=1e-12,
                             max_iter=3, cv=3, alphas=[0.1, 1.0], pcg_persist=False, random_state=0)
    with distributed.Client(local_cluster):
        large = _large_graphs(lambda: est.fit(X, y), "16kB")
    info = est.solver_info_
    assert info["residuals"].shape[1] == (3 + 1) * 2 and info["n_iter"] == 3, info["n_iter"]
    assert len(large) == 1, large  # the persist of X and y, once
    assert "kiB" in large[0] and float(large[0].split("of size ")[1].split()[0]) > 500  # X itself


#: fits run with query planning on and off: (name, code that sets `out[name]` to an array)
_QP_SCRIPT = r"""
import json, sys, tempfile, warnings
import numpy as np
import dask, dask.array as da
from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier
from dkrr.io import open_dataset, write_dataset

warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
X = rng.standard_normal((3000, 5))
y = np.sin(X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(3000)
labels = np.where(X[:, 0] + X[:, 2] > 0, "a", "b")
Xd = da.from_array(X, chunks=(700, 5))
out = {"query_planning": bool(dask.config.get("array.query-planning", False))}
kw = dict(method="rff", n_components=48, gamma=0.3, random_state=0)
with tempfile.TemporaryDirectory() as tmp:
    write_dataset(Xd, da.from_array(y, chunks=700), tmp + "/xy.zarr")
    ds = open_dataset(tmp + "/xy.zarr")
    fits = {
        "gram_numpy": RandomFeatureRidge(**kw).fit(X, y),
        "gram_dask_cv": RandomFeatureRidge(**kw, cv=3, alphas=[0.01, 0.1, 1.0]).fit(Xd, y),
        "gram_store": RandomFeatureRidge(**kw, standardize=True).fit(ds.X, ds.y),
        "pcg_store_cv": RandomFeatureRidge(**kw, solver="pcg", pcg_rank=8, tol=1e-8, cv=3,
                                           alphas=[0.1, 1.0]).fit(ds.X, ds.y),
        "nystroem_median": RandomFeatureRidge(method="nystroem", n_components=40, gamma="median",
                                              random_state=0).fit(Xd, y),
        "weighted": RandomFeatureRidge(**kw).fit(Xd, y, sample_weight=np.linspace(0.5, 1.5, 3000)),
        "classifier": RandomFeatureRidgeClassifier(**kw).fit(Xd, labels),
    }
    for name, est in fits.items():
        out[name] = np.ravel(est.coef_).tolist()
    out["predict_store"] = np.asarray(fits["gram_store"].predict(ds.X).compute()).tolist()[:50]
    out["labels"] = fits["classifier"].predict(Xd).compute().tolist()[:50]
json.dump(out, sys.stdout)
"""


def _run_script(query_planning: bool) -> dict:
    env = {**os.environ, "DASK_ARRAY__QUERY_PLANNING": str(query_planning),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                          os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _QP_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.skipif(
    Version(dask.__version__) < Version("2025.1.0") and importlib.util.find_spec("dask_expr") is None,
    reason="dask before 2025.1 has array query planning only with the separate dask-expr package")
def test_fits_agree_with_query_planning_on_and_off():
    on, off = _run_script(True), _run_script(False)
    assert on.pop("query_planning") is True and off.pop("query_planning") is False
    assert on.pop("labels") == off.pop("labels")
    assert set(on) == set(off)
    for name in on:
        np.testing.assert_allclose(on[name], off[name], rtol=1e-9, atol=1e-12, err_msg=name)
