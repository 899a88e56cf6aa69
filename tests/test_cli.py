"""The ``dkrr`` command line, run as real subprocesses on real Zarr stores."""

import json
import subprocess
import sys

import numpy as np
import pytest
import zarr

from dkrr.datasets import load_casp, load_magic04
from dkrr import load_model
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


def _reference(*args):
    """The estimator ``dkrr fit`` builds from these flags (whatever the CLI defaults are)."""
    from dkrr.cli._options import build_parser
    from dkrr.cli._commands import estimator_from_options

    return estimator_from_options(build_parser().parse_args(["fit", "s", "--out", "m", *map(str, args)]))


def test_fit_predict_evaluate_match_python(casp_store):
    store, model, pred = casp_store / "store", casp_store / "model", casp_store / "pred"
    flags = ["--method", "sorf", "--n-components", 64, "--gamma", 0.1, "--alphas", "0.1,1,10",
             "--cv", 3, "--random-state", 7]
    out = dkrr("fit", store, "--out", model, *flags, *_cli_common())
    # a person reads the table and the choice; the dashboard link is printed once
    assert "3-fold cross-validated mean squared error" in out.stdout, out.stdout
    assert "chosen: alpha_ = " in out.stdout and "Traceback" not in out.stderr
    assert out.stderr.count("dashboard at http://") == 1, out.stderr
    assert out.stderr.lower().count("dashboard") == 1, out.stderr
    dkrr("predict", model, store, "--out", pred, *_cli_common(), "-q")
    y_cli = zarr.open_group(str(pred), mode="r")["y_pred"][:]

    data = open_dataset(store)
    X, y = data.X.compute(), data.y.compute()
    est = _reference(*flags).fit(X, y)
    assert f"chosen: alpha_ = {est.alpha_:.4g}, gamma_ = 0.1 " in out.stdout, out.stdout
    np.testing.assert_allclose(y_cli, est.predict(X), rtol=1e-8, atol=1e-8)

    ev = dkrr("evaluate", model, store, "--json", "-q", *_cli_common())
    metrics = json.loads(ev.stdout)
    np.testing.assert_allclose(metrics["r2"], est.score(X, y), rtol=1e-8)


@pytest.mark.slow
def test_config_file_and_flags(casp_store, tmp_path):
    cfg = tmp_path / "fit.toml"
    cfg.write_text('[fit]\nmethod = "rff"\nn-components = 16\nalpha = 2.5\nrandom-state = 1\n')
    dkrr("fit", casp_store / "store", "--out", tmp_path / "m", "--config", cfg, "--alpha", 0.5, "-q",
         *_cli_common())
    doc = json.loads((tmp_path / "m" / "model.json").read_text())
    params = doc["estimator"]["__estimator__"]["params"]
    assert params["method"] == "rff" and params["n_components"] == 16 and params["alpha"] == 0.5


@pytest.mark.slow
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
    est = _reference("--classifier", "--method", "rff", "--n-components", 32, "--gamma", 0.001,
                     "--random-state", 0)
    assert isinstance(est, RandomFeatureRidgeClassifier)
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


@pytest.mark.slow
def test_model_from_another_feature_count(casp_store, tmp_path):
    dkrr("fit", casp_store / "store", "--out", tmp_path / "m", "--method", "rff", "--n-components", 8,
         "-q", *_cli_common())
    g = zarr.open_group(str(tmp_path / "other"), mode="w")
    g.create_array("X", shape=(20, 4), dtype="f8", chunks=(10, 4))[:] = 0.5
    p = dkrr("predict", tmp_path / "m", tmp_path / "other", "--out", tmp_path / "p", "-q", check=False,
             *_cli_common())
    assert p.returncode == 1 and "has 4 columns, but model" in p.stderr and "was fitted on 9" in p.stderr, p.stderr
    assert not (tmp_path / "p").exists()


def test_non_numeric_csv_cell_reports_line(tmp_path):
    csv = tmp_path / "bad.csv"
    csv.write_text("a,b,y\n1,2,3\n4,oops,6\n")
    p = dkrr("ingest", csv, "--out", tmp_path / "s", "-q", check=False)
    assert p.returncode == 1 and "line 3" in p.stderr
    assert not (tmp_path / "s").exists()


# --- what fit and evaluate print: the CV table, the choice, rounded metrics, --json ---------

def _small_casp(n=600, seed=0):
    X, y = load_casp()
    idx = np.random.default_rng(seed).permutation(len(y))[:n]
    X = X[idx]
    return (X - X.mean(0)) / X.std(0), y[idx]


def _cells(lines):
    """{(row, column): (mean, std, marked)} of a table from dkrr.cli._report.cv_table."""
    cells = {}
    for r, line in enumerate(lines[1:]):
        parts = line.split()
        body = parts[1:]
        c = 0
        i = 0
        while i < len(body):
            mean, _, std = body[i:i + 3]
            marked = i + 3 < len(body) and body[i + 3] == "*"
            cells[r, c] = (float(mean), float(std), marked)
            i += 4 if marked else 3
            c += 1
    return cells


def test_cv_table_one_column_without_gammas():
    from dkrr import RandomFeatureRidge
    from dkrr.cli._report import cv_table

    X, y = _small_casp()
    est = RandomFeatureRidge(method="rff", n_components=32, gamma=0.1, alphas=[0.01, 1, 100], cv=3,
                             random_state=0).fit(X, y)
    lines = cv_table(est.cv_results_, alpha=est.alpha_, gamma=0.1)
    assert lines[0].split() == ["alpha", "gamma=0.1"]
    assert [line.split()[0] for line in lines[1:]] == ["0.01", "1", "100"]
    cells = _cells(lines)
    assert len(cells) == 3 and sum(m for *_, m in cells.values()) == 1
    chosen = list(est.cv_results_["alphas"]).index(est.alpha_)
    for (r, c), (mean, std, marked) in cells.items():
        assert c == 0 and marked == (r == chosen)
        assert mean == float(f"{est.cv_results_['mean_mse'][r]:.4g}")
        assert std == float(f"{est.cv_results_['std_mse'][r]:.3g}")


def test_cv_table_alpha_rows_gamma_columns():
    from dkrr import RandomFeatureRidge
    from dkrr.cli._report import cv_table

    X, y = _small_casp()
    est = RandomFeatureRidge(method="rff", n_components=32, gammas=[0.01, 0.1, 1.0], alphas=[0.01, 1, 100],
                             cv=3, random_state=0).fit(X, y)
    lines = cv_table(est.cv_results_, alpha=est.alpha_, gamma=est.gamma_, pm="+-")
    assert lines[0].split() == ["alpha", "gamma=0.01", "gamma=0.1", "gamma=1"]
    cells = _cells(lines)
    assert len(cells) == 9
    (marked,) = [rc for rc, (*_, m) in cells.items() if m]
    res = est.cv_results_
    assert marked == (list(res["alphas"]).index(est.alpha_), list(res["gammas"]).index(est.gamma_))
    for (r, c), (mean, std, _) in cells.items():  # rows alpha, columns gamma; mean_mse is (gamma, alpha)
        assert mean == float(f"{res['mean_mse'][c, r]:.4g}")
        assert std == float(f"{res['std_mse'][c, r]:.3g}")


def test_cv_table_says_not_scored_for_an_alpha_scored_inf():
    """An alpha whose fold system is not positive definite is scored inf: its cell reads
    ``not scored`` (it read ``inf ± nan``) and the header of ``dkrr fit`` says what that
    means. (A real fit's results with one cell set to what such an alpha gets.)"""
    from dkrr import RandomFeatureRidge
    from dkrr.cli._report import cv_table, fit_lines

    X, y = _small_casp()
    est = RandomFeatureRidge(method="rff", n_components=32, gammas=[0.01, 0.1], alphas=[1e-3, 1, 100], cv=3,
                             random_state=0).fit(X, y)
    est.cv_results_["mean_mse"][0, 0], est.cv_results_["std_mse"][0, 0] = np.inf, np.nan
    lines = cv_table(est.cv_results_, alpha=est.alpha_, gamma=est.gamma_, pm="+-")
    assert lines[1].split()[:3] == ["0.001", "not", "scored"]
    assert "inf" not in "".join(lines) and "nan" not in "".join(lines)
    header = [line for line in fit_lines(est, out="m", n_rows=len(y), n_features=9, seconds=1.0, pm="+-")
              if "cross-validated" in line]
    assert header and header[0].endswith("* = chosen, not scored = G + alpha*I not positive definite in a fold:")
    est.cv_results_["mean_mse"][0, 0] = 1.0  # every alpha scored: the header as before
    header = [line for line in fit_lines(est, out="m", n_rows=len(y), n_features=9, seconds=1.0, pm="+-")
              if "cross-validated" in line]
    assert header[0].endswith("over the folds, * = chosen:")


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    import dask
    import dask.array as da

    from dkrr.io import write_dataset

    X, y = _small_casp(800, seed=3)
    path = tmp_path_factory.mktemp("small") / "store"
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X, chunks=(200, 9)), da.from_array(y, chunks=200), path)
    return path, X, y


def _main(capsys, *args):
    from dkrr.cli import main

    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


GRID = ["--method", "rff", "--n-components", 32, "--alphas", "0.001,0.1,10", "--gammas", "0.01,0.1,1",
        "--cv", 3, "--random-state", 2]


def test_fit_json_keeps_full_precision_with_gammas(small_store, tmp_path, capsys, local_cluster):
    store, X, y = small_store
    code, out, err = _main(capsys, "fit", store, "--out", tmp_path / "m", *GRID, "--json",
                           "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == 0, err
    doc = json.loads(out)
    import dask.array as da

    # the store's chunks: the same float32 sub-blocks as the CLI's fit (default precision)
    est = _reference(*GRID).fit(da.from_array(X, chunks=(200, 9)), da.from_array(y, chunks=200))
    assert est.gammas == [0.01, 0.1, 1.0]  # --gammas reaches the estimator
    assert doc["alpha"] == est.alpha_ and doc["gamma"] == est.gamma_
    res = doc["cv_results"]
    assert res["gammas"] == [0.01, 0.1, 1.0] and res["alphas"] == [0.001, 0.1, 10.0]
    saved = load_model(tmp_path / "m")
    for key in ("mean_mse", "std_mse", "fold_mse"):
        # every digit: JSON floats round-trip exactly (the in-process fit sums in another order)
        np.testing.assert_array_equal(np.array(res[key]), saved.cv_results_[key])
        np.testing.assert_allclose(np.array(res[key]), est.cv_results_[key], rtol=1e-9)
    assert doc["best_score"] == saved.best_score_ == pytest.approx(est.best_score_, rel=1e-9)
    assert "mean squared error" in doc["cv_error"]
    # the default precision: float32 statistics refined in float64 passes, as the model says
    assert doc["precision"] == saved.precision_ == "mixed" and "pcg" not in doc
    assert doc["refinement"] == {"passes": saved.refinement_["passes"], "converged": True}


def test_fit_prints_table_and_choice(small_store, tmp_path, capsys, local_cluster):
    store, X, y = small_store
    code, out, err = _main(capsys, "fit", store, "--out", tmp_path / "m", *GRID,
                           "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == 0, err
    est = _reference(*GRID).fit(X, y)
    lines = out.splitlines()
    head = lines.index(next(line for line in lines if "cross-validated" in line))
    assert lines[head].startswith("3-fold cross-validated mean squared error;")
    table = lines[head + 1:head + 5]
    assert table[0].split() == ["alpha", "gamma=0.01", "gamma=0.1", "gamma=1"]
    (marked,) = [rc for rc, (*_, m) in _cells(table).items() if m]
    assert marked == ([0.001, 0.1, 10.0].index(est.alpha_), [0.01, 0.1, 1.0].index(est.gamma_))
    best = -est.best_score_
    assert lines[head + 5] == (f"chosen: alpha_ = {est.alpha_:.4g}, gamma_ = {est.gamma_:.4g} "
                               f"(CV MSE {best:.4g}, RMSE {np.sqrt(best):.4g})")
    assert "wrote " in lines[-1] and "800 rows x 9 features" in lines[-1]
    assert "solver cholesky (chosen by auto)" in lines[-1]


def test_fit_warns_once_for_a_grid_edge(small_store, tmp_path, capsys, local_cluster):
    store, _, _ = small_store  # any choice from a two-value grid is on its edge
    code, out, err = _main(capsys, "fit", store, "--out", tmp_path / "m", "--method", "rff",
                           "--n-components", 16, "--gammas", "0.05,0.5", "--cv", 3, "--random-state", 0,
                           "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == 0, err
    assert err.count("dkrr fit: warning: the chosen gamma=") == 1, err
    assert "GridEdgeWarning" not in err and "warnings.warn" not in err, err


def test_classifier_table_names_its_error_honestly(tmp_path, capsys, local_cluster):
    import dask
    import dask.array as da

    from dkrr.io import write_dataset

    X, y = load_magic04()
    idx = np.random.default_rng(0).permutation(len(y))[:600]
    labels = (np.asarray(y)[idx] == "g").astype(np.int32)
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X[idx], chunks=(200, 10)), da.from_array(labels, chunks=200),
                      tmp_path / "s")
    code, out, err = _main(capsys, "fit", tmp_path / "s", "--out", tmp_path / "m", "--classifier",
                           "--method", "rff", "--n-components", 16, "--gamma", 0.001,
                           "--alphas", "0.1,1,10", "--cv", 3, "--random-state", 0,
                           "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == 0, err
    assert "mean squared error of the +-1 class targets" in out and "not the misclassification rate" in out
    assert "RMSE" not in out  # an RMSE of +-1 targets would read like a regression error
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "s",
                           "--scheduler", local_cluster.scheduler_address, "-q")
    code_j, out_j, _ = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "s", "--json",
                             "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == code_j == 0, err
    acc = json.loads(out_j)["accuracy"]
    assert out.splitlines() == [f"accuracy: {acc:.4f}", "n_rows: 600"]


def test_evaluate_rounds_regression_metrics(small_store, tmp_path, capsys, local_cluster):
    store, _, _ = small_store
    addr = ["--scheduler", local_cluster.scheduler_address, "-q"]
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "m", "--method", "rff",
                         "--n-components", 16, "--gamma", 0.1, "--random-state", 0, *addr)
    assert code == 0, err
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", store, *addr)
    _, out_j, _ = _main(capsys, "evaluate", tmp_path / "m", store, "--json", *addr)
    m = json.loads(out_j)
    assert code == 0, err
    assert out.splitlines() == [f"r2: {m['r2']:.4f}", f"rmse: {m['rmse']:.4g}", f"mse: {m['mse']:.4g}",
                                "n_rows: 800"]
    assert len(repr(m["rmse"])) > 8  # the JSON keeps every digit
    code, out, err = _main(capsys, "predict", tmp_path / "m", store, "--out", tmp_path / "p", *addr)
    assert code == 0 and out == f"wrote {tmp_path / 'p'}: y_pred for 800 rows\n", (out, err)
    code, out, err = _main(capsys, "predict", tmp_path / "m", store, "--out", tmp_path / "p2", "--json", *addr)
    assert code == 0 and json.loads(out) == {"predictions": str(tmp_path / "p2"), "n_rows": 800}, err


def test_evaluate_names_a_non_finite_target_instead_of_printing_nan(small_store, tmp_path, capsys, local_cluster):
    """A store written from Python (write_dataset does not read its values) whose y holds a
    NaN and an inf: ``dkrr evaluate`` printed r2, rmse and mse as nan with exit 0; now an
    error names the store, the row block and the first row, for each value."""
    import dask
    import dask.array as da

    from dkrr.io import write_dataset

    store, X, y = small_store
    addr = ["--scheduler", local_cluster.scheduler_address, "-q"]
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "m", "--method", "rff",
                         "--n-components", 16, "--gamma", 0.1, "--random-state", 0, *addr)
    assert code == 0, err
    for bad in (np.nan, np.inf):
        yb = y.copy()
        yb[437] = bad
        with dask.config.set(scheduler="threads"):
            write_dataset(da.from_array(X, chunks=(200, 9)), da.from_array(yb, chunks=200), tmp_path / "bad",
                          overwrite=True)
        for json_flag in ([], ["--json"]):
            code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "bad", *json_flag, *addr)
            assert code == 1 and out == "", (out, err)
            assert f"error: y of {tmp_path / 'bad'} contains 1 non-finite value(s) (NaN or inf) in rows 400 to " \
                   "599 (row block 2), in 1 row(s), first in row 437" in err, err


@pytest.mark.parametrize("level", [0.0, 0.1, 1e8])
def test_evaluate_on_a_constant_target_scores_r2_as_scikit_learn_and_says_why(
        level, small_store, tmp_path, capsys, local_cluster):
    """y constant over the store (a test split of one value): R^2 is undefined. ``dkrr
    evaluate`` printed ``r2: nan`` (``null`` in --json) where the model's ``score``, scikit-
    learn's r2_score, gives 0.0; now it gives what score gives and a note says why."""
    import dask
    import dask.array as da

    from dkrr.io import write_dataset

    store, X, y = small_store
    addr = ["--scheduler", local_cluster.scheduler_address, "-q"]
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "m", "--method", "rff",
                         "--n-components", 16, "--gamma", 0.1, "--random-state", 0, *addr)
    assert code == 0, err
    yc = np.full_like(y, level)
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X, chunks=(200, 9)), da.from_array(yc, chunks=200), tmp_path / "c")
    model = load_model(tmp_path / "m")
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "c", *addr)
    assert code == 0 and "r2: 0.0000" in out, (out, err)
    assert "dkrr evaluate: note: y is constant over the 800 rows, so R^2 is undefined" in err, err
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "c", "--json", *addr)
    doc = json.loads(out)
    assert doc["r2"] == model.score(X, yc) == 0.0, doc
    assert doc["mse"] == pytest.approx(np.mean((model.predict(X) - level) ** 2), rel=1e-9)
    # a target that varies, however little against its level, is not constant
    yv = yc + 1e-6 * np.sin(np.arange(len(y)))
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X, chunks=(200, 9)), da.from_array(yv, chunks=200), tmp_path / "v")
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "v", "--json", *addr)
    # (scikit-learn's mean of y at 1e8 is off by ~1e-8, 1% of the variation: its r2 is the rougher)
    rel = 1e-6 if level < 1e3 else 1e-3
    assert "constant" not in err and json.loads(out)["r2"] == pytest.approx(model.score(X, yv), rel=rel), err


def test_table_cells_keep_trailing_zeros_so_columns_line_up():
    from dkrr.cli._report import cv_table

    res = {"alphas": [0.1, 1.0], "mean_mse": np.array([0.459, 0.4158]), "std_mse": np.array([0.011, 0.0117])}
    lines = cv_table(res, alpha=1.0, gamma=0.5)
    assert lines == ["alpha          gamma=0.5",
                     "  0.1  0.4590 ± 0.0110  ",
                     "    1  0.4158 ± 0.0117 *"]


def test_gammas_flag_and_config(small_store, tmp_path, capsys):
    store, _, _ = small_store
    with pytest.raises(SystemExit) as exc:
        _main(capsys, "fit", store, "--out", tmp_path / "m", "--gammas", "0.1,-1", "-q")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--gammas" in err and "> 0" in err, err
    cfg = tmp_path / "fit.toml"
    cfg.write_text("gammas = [0.5, 2]\ncv = 3\n")
    from dkrr.cli._options import build_parser
    from dkrr.cli._commands import estimator_from_options

    est = estimator_from_options(build_parser().parse_args(["fit", str(store), "--out", "m", "--config", str(cfg)]))
    assert est.gammas == [0.5, 2.0] and est.cv == 3
    cfg.write_text('gammas = "0.5,x"\n')
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "m", "--config", cfg, "-q")
    assert code == 1 and "gammas" in err and str(cfg) in err, err
    assert not (tmp_path / "m").exists()


def test_rom_and_pcg_options_reach_the_estimator(small_store, tmp_path, capsys, local_cluster):
    """The CLI offers every estimator option of the library: ROMs, row sampling, the PCG solver."""
    store, X, y = small_store
    args = ["--kernel", "linear", "--method", "rom", "--rom-diagonal", "complex4", "--row-sampling",
            "without_replacement", "--n-components", 4, "--solver", "pcg", "--pcg-rank", 8, "--tol", 1e-10,
            "--max-iter", 60, "--pcg-persist", "false", "--no-standardize", "--random-state", 0]
    est = _reference(*args)
    assert (est.kernel, est.method, est.rom_diagonal, est.row_sampling) == ("linear", "rom", "complex4",
                                                                          "without_replacement")
    assert (est.solver, est.pcg_rank, est.tol, est.max_iter, est.pcg_persist) == ("pcg", 8, 1e-10, 60, False)
    code, out, err = _main(capsys, "fit", store, "--out", tmp_path / "m", *args, "--json",
                           "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == 0, err
    saved = load_model(tmp_path / "m")
    est.fit(X, y)
    assert saved.n_output_features_ == est.n_output_features_ == 8  # complex: [Re, Im] of 4 sampled rows
    assert saved.solver_info_["converged"] and saved.solver_ == "pcg" and saved.solver_info_["persisted"] is False
    doc = json.loads(out)
    assert doc["solver"] == "pcg" and doc["pcg"]["converged"] is True, doc
    assert doc["pcg"]["n_iter"] == saved.solver_info_["n_iter"] and doc["pcg"]["residual"] <= 1e-10, doc
    np.testing.assert_allclose(saved.predict(X), est.predict(X), rtol=1e-6, atol=1e-6)
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "m2", "--solver", "newton", "-q",
                         "--scheduler", local_cluster.scheduler_address)
    assert code != 0 and "solver" in err


def test_precision_flag_reaches_the_model_file(small_store, tmp_path, capsys, local_cluster):
    """`dkrr fit --precision float32` fits in single precision (precision_ in the model file)
    and agrees with the library's float32 fit; a wrong value is refused naming the choices."""
    store, X, y = small_store
    args = ["--n-components", 32, "--gamma", 0.5, "--alpha", 1.0, "--no-standardize", "--random-state", 0,
            "--precision", "float32"]
    est = _reference(*args)
    assert est.precision == "float32"
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "m", *args,
                         "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == 0, err
    saved = load_model(tmp_path / "m")
    assert saved.precision == saved.precision_ == "float32" and saved.precision_error_ > 0
    est.fit(X, y)  # the store's chunks group the float32 sub-blocks differently: within the estimate
    change = np.linalg.norm(saved.coef_ - est.coef_) / np.linalg.norm(est.coef_)
    assert change <= 2 * est.precision_error_, (change, est.precision_error_)
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "m2", "--precision", "half", "-q",
                         "--scheduler", local_cluster.scheduler_address)
    assert code != 0 and "precision must be one of" in err and "'half'" in err, err
    assert not (tmp_path / "m2").exists()
    # without the flag: precision="auto", the float32 statistics refined to the float64 fit
    args = args[:-2]
    assert _reference(*args).precision == "auto"
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "m3", *args,
                         "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == 0, err
    default = load_model(tmp_path / "m3")
    assert default.precision == "auto" and default.precision_ == "mixed" and default.refinement_["converged"]
    ref64 = _reference(*args, "--precision", "float64").fit(X, y)
    assert np.linalg.norm(default.coef_ - ref64.coef_) / np.linalg.norm(ref64.coef_) < 1e-8


def test_ingest_takes_several_targets_and_the_fit_matches_python(tmp_path, capsys, local_cluster):
    """`--target y1,y2` was looked up as one column named 'y1,y2'; Python's ingest took a list."""
    from sklearn.metrics import r2_score

    from dkrr import RandomFeatureRidge

    rng = np.random.default_rng(2)
    X = rng.normal(size=(600, 3)).round(6)
    Y = np.column_stack([np.sin(X[:, 0]), np.cos(X[:, 1])]).round(6)
    csv = tmp_path / "mt.csv"
    np.savetxt(csv, np.column_stack([Y[:, 1], X, Y[:, 0]]), delimiter=",", fmt="%.6f",
               header="y2,a,b,c,y1", comments="")
    addr = ["--scheduler", local_cluster.scheduler_address, "-q"]
    code, out, err = _main(capsys, "ingest", csv, "--out", tmp_path / "s", "--target", "y1,0", *addr)
    assert code == 0 and "X 600 x 3, 2 target(s)" in out, err
    ds = open_dataset(tmp_path / "s")
    assert ds.target_names == ["y1", "y2"] and ds.feature_names == ["a", "b", "c"]
    np.testing.assert_allclose(ds.y.compute(), Y, rtol=1e-12)
    fit = ["--method", "rff", "--n-components", 32, "--gamma", 0.5, "--alpha", 0.01, "--random-state", 0]
    code, _, err = _main(capsys, "fit", tmp_path / "s", "--out", tmp_path / "m", *fit, *addr)
    assert code == 0, err
    model = load_model(tmp_path / "m")
    assert model.coef_.shape == (2, 64)  # scikit-learn's (n_targets, n_features)
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "s", "--json", *addr)
    ref = RandomFeatureRidge(method="rff", n_components=32, gamma=0.5, alpha=0.01, random_state=0,
                             standardize=True).fit(X.astype(np.float32), Y)
    doc, P = json.loads(out), ref.predict(X.astype(np.float32))
    assert doc["r2"] == pytest.approx(r2_score(Y, P), abs=1e-6)
    # and each target's scores, by the store's names (text: r2[y1] lines after the averages)
    per = r2_score(Y, P, multioutput="raw_values")
    assert list(doc["per_target"]) == ["y1", "y2"]
    for j, name in enumerate(["y1", "y2"]):
        assert doc["per_target"][name]["r2"] == pytest.approx(per[j], abs=1e-6)
        assert doc["per_target"][name]["mse"] == pytest.approx(np.mean((Y[:, j] - P[:, j]) ** 2), rel=1e-5)
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", tmp_path / "s", *addr)
    assert out.splitlines()[:4] == ["r2: " + f"{doc['r2']:.4f}", f"rmse: {doc['rmse']:.4g}",
                                    f"mse: {doc['mse']:.4g}", "n_rows: 600"]
    assert out.splitlines()[4] == f"r2[y1]: {doc['per_target']['y1']['r2']:.4f}" and len(out.splitlines()) == 10
    # a classifier takes one column of labels (it said "Unknown label type: continuous")
    code, out, err = _main(capsys, "fit", tmp_path / "s", "--out", tmp_path / "c", "--classifier", *addr)
    assert code == 1 and "holds 2 targets ('y1', 'y2'); a classifier takes one column of labels" in err, err
    assert not (tmp_path / "c").exists()
    with pytest.raises(SystemExit) as info:
        _main(capsys, "ingest", csv, "--out", tmp_path / "t", "--target", ",", *addr)
    assert info.value.code == 2
    assert "expected column names or indices, comma-separated; got ','" in capsys.readouterr().err


def test_a_store_of_many_small_chunks_is_read_and_predicted_in_merged_blocks(tmp_path, capsys, local_cluster):
    """A store with 100 chunks of 200 rows (write_dataset of a finely chunked dask array)
    was fitted, predicted and evaluated one chunk per task (a fit of 10^6 rows in 1,000
    chunks: 26.5 s against 8.8 s), and its predictions written in 200-row chunks."""
    import dask.array as da

    from dkrr.io import write_dataset

    X, y = _small_casp(20_000, seed=5)
    store = write_dataset(da.from_array(X, chunks=(200, 9)), da.from_array(y, chunks=200), tmp_path / "s")
    assert open_dataset(store).X.numblocks[0] == 100
    addr = ["--scheduler", local_cluster.scheduler_address, "-q"]
    code, _, err = _main(capsys, "fit", store, "--out", tmp_path / "m", "--method", "rff", "--n-components", 32,
                         "--gamma", 0.1, "--alpha", 0.1, "--random-state", 0, *addr)
    assert code == 0, err
    code, _, err = _main(capsys, "predict", tmp_path / "m", store, "--out", tmp_path / "p", *addr)
    assert code == 0, err
    pred = zarr.open_group(str(tmp_path / "p"), mode="r")["y_pred"]
    # blocks of at least MIN_BLOCK_ROWS = 4,096 rows (21 chunks; 2 MiB would be one block, for 2 workers)
    assert pred.chunks == (7_400,)  # 4,200 x 3 and 7,400 (the remainder joins the last), made uniform
    est = load_model(tmp_path / "m")
    np.testing.assert_allclose(pred[:], est.predict(X), rtol=1e-12, atol=1e-12)
    code, out, err = _main(capsys, "evaluate", tmp_path / "m", store, "--json", *addr)
    assert code == 0, err
    r2 = 1 - np.sum((y - pred[:]) ** 2) / np.sum((y - y.mean()) ** 2)
    assert json.loads(out)["r2"] == pytest.approx(r2, abs=1e-9)
