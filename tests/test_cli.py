"""The ``dkrr`` command line, run as real subprocesses on real Zarr stores."""

import json
import subprocess
import sys

import numpy as np
import pytest
import zarr

from dkrr.datasets import load_casp, load_magic04
from dkrr.io import open_dataset

pytestmark = pytest.mark.cluster


def dkrr(*args, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "dkrr.cli", *map(str, args)],
        capture_output=True, text=True, timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"dkrr {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def casp_store(tmp_path_factory):
    X, y = load_casp()
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(y))[:3000]
    X = (X[idx] - X[idx].mean(0)) / X[idx].std(0)
    root = tmp_path_factory.mktemp("casp")
    csv = root / "casp.csv"
    np.savetxt(csv, np.column_stack([y[idx], X]), delimiter=",", fmt="%.6f",
               header="RMSD," + ",".join(f"F{i}" for i in range(1, 10)), comments="")
    dkrr("ingest", csv, "--out", root / "store", "--target", "RMSD", "--chunk-rows", 700, "--dtype", "float64", "-q")
    return root


def _cli_common():
    return ["--workers", 2, "--threads-per-worker", 1, "--memory-limit", "2GB"]


def test_fit_predict_evaluate_match_python(casp_store):
    from dkrr import RandomFeatureRidge

    store, model, pred = casp_store / "store", casp_store / "model", casp_store / "pred"
    out = dkrr("fit", store, "--out", model, "--method", "sorf", "--n-components", 64, "--gamma", 0.1,
               "--alphas", "0.1,1,10", "--cv", 3, "--random-state", 7, *_cli_common())
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["n_rows"] == 3000 and summary["alpha"] in (0.1, 1.0, 10.0)
    assert "dashboard" in out.stderr.lower() or "http://" in out.stderr
    dkrr("predict", model, store, "--out", pred, *_cli_common(), "-q")
    y_cli = zarr.open_group(str(pred), mode="r")["y_pred"][:]

    data = open_dataset(store)
    X, y = data.X.compute(), data.y.compute()
    est = RandomFeatureRidge(method="sorf", n_components=64, gamma=0.1, alphas=[0.1, 1, 10], cv=3,
                             random_state=7).fit(X, y)
    assert est.alpha_ == summary["alpha"]
    np.testing.assert_allclose(y_cli, est.predict(X), rtol=1e-8, atol=1e-8)

    ev = dkrr("evaluate", model, store, "--json", "-q", *_cli_common())
    metrics = json.loads(ev.stdout)
    np.testing.assert_allclose(metrics["r2"], est.score(X, y), rtol=1e-8)


def test_config_file_and_flags(casp_store, tmp_path):
    cfg = tmp_path / "fit.toml"
    cfg.write_text('[fit]\nmethod = "rff"\nn-components = 16\nalpha = 2.5\nrandom-state = 1\n')
    dkrr("fit", casp_store / "store", "--out", tmp_path / "m", "--config", cfg, "--alpha", 0.5, "-q",
         *_cli_common())
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    params = doc["estimator"]["__estimator__"]["params"]
    assert params["method"] == "rff" and params["n_components"] == 16 and params["alpha"] == 0.5


def test_classifier_on_text_labels(tmp_path):
    from dkrr import RandomFeatureRidgeClassifier

    X, y = load_magic04()
    idx = np.random.default_rng(1).permutation(len(y))[:1500]  # the file is sorted by class
    X, y = X[idx], y[idx]
    csv = tmp_path / "magic.csv"
    with open(csv, "w") as fh:
        for row, label in zip(X, y):
            fh.write(",".join(f"{v:.4f}" for v in row) + f",{label}\n")
    dkrr("ingest", csv, "--out", tmp_path / "s", "--dtype", "float64", "-q")
    dkrr("fit", tmp_path / "s", "--out", tmp_path / "m", "--classifier", "--method", "rff",
         "--n-components", 32, "--gamma", 0.001, "--random-state", 0, "-q", *_cli_common())
    dkrr("predict", tmp_path / "m", tmp_path / "s", "--out", tmp_path / "p", "-q", *_cli_common())
    g = zarr.open_group(str(tmp_path / "p"), mode="r")
    assert list(g.attrs["classes"]) == ["g", "h"]
    data = open_dataset(tmp_path / "s")
    est = RandomFeatureRidgeClassifier(method="rff", n_components=32, gamma=0.001, random_state=0)
    est.fit(data.X.compute(), data.y.compute())
    np.testing.assert_array_equal(g["y_pred"][:], est.predict(data.X.compute()))
    ev = json.loads(dkrr("evaluate", tmp_path / "m", tmp_path / "s", "--json", "-q", *_cli_common()).stdout)
    assert ev["accuracy"] == pytest.approx(est.score(data.X.compute(), data.y.compute()))


# --- bad input: clear message, exit status 1, nothing half-written -----------------------

def test_missing_store(tmp_path):
    p = dkrr("fit", tmp_path / "nope", "--out", tmp_path / "m", "-q", check=False)
    assert p.returncode == 1 and "does not exist" in p.stderr
    assert not (tmp_path / "m").exists()


def test_store_without_y(tmp_path):
    g = zarr.open_group(str(tmp_path / "s"), mode="w")
    g.create_array("X", shape=(10, 3), dtype="f8")[:] = 1.0
    p = dkrr("fit", tmp_path / "s", "--out", tmp_path / "m", "-q", check=False)
    assert p.returncode == 1 and "has no array 'y' (found: 'X')" in p.stderr, p.stderr
    assert not (tmp_path / "m").exists()


def test_existing_output_is_refused_and_untouched(casp_store, tmp_path):
    out = tmp_path / "m"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    p = dkrr("fit", casp_store / "store", "--out", out, "--method", "rff", "--n-components", 4, "-q",
             check=False)
    assert p.returncode == 1 and "exists" in p.stderr
    assert (out / "keep.txt").read_text() == "mine"


def test_model_from_another_feature_count(casp_store, tmp_path):
    dkrr("fit", casp_store / "store", "--out", tmp_path / "m", "--method", "rff", "--n-components", 8,
         "-q", *_cli_common())
    g = zarr.open_group(str(tmp_path / "other"), mode="w")
    g.create_array("X", shape=(20, 4), dtype="f8", chunks=(10, 4))[:] = 0.5
    p = dkrr("predict", tmp_path / "m", tmp_path / "other", "--out", tmp_path / "p", "-q", check=False,
             *_cli_common())
    assert p.returncode == 1 and "4 columns but the model was fitted with 9" in p.stderr
    assert not (tmp_path / "p").exists()


def test_non_numeric_csv_cell_reports_line(tmp_path):
    csv = tmp_path / "bad.csv"
    csv.write_text("a,b,y\n1,2,3\n4,oops,6\n")
    p = dkrr("ingest", csv, "--out", tmp_path / "s", "-q", check=False)
    assert p.returncode == 1 and "line 3" in p.stderr
    assert not (tmp_path / "s").exists()
