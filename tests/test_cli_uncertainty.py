"""The command line of issue 27: ``dkrr fit --cv evidence``, ``dkrr predict --std`` and
``dkrr evaluate --std``, on real Zarr stores and a real LocalCluster, progress on and off."""

import json

import numpy as np
import pytest
import zarr
from scipy.stats import norm

from dkrr import load_model
from dkrr.datasets import load_casp

pytestmark = pytest.mark.cluster

FIT = ["--method", "rff", "--n-components", 32, "--gamma", 0.1, "--alphas", "0.01,0.1,1,10",
       "--solver", "cholesky", "--random-state", 3]


def _reference(*args):
    """The estimator ``dkrr fit`` builds from these flags (whatever the CLI defaults are)."""
    from dkrr.cli._commands import estimator_from_options
    from dkrr.cli._options import build_parser

    return estimator_from_options(build_parser().parse_args(["fit", "s", "--out", "m", *map(str, args)]))


def _main(capsys, *args):
    from dkrr.cli import main

    code = main([str(a) for a in args if a is not None])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    import dask
    import dask.array as da

    from dkrr.io import write_dataset

    X, y = load_casp()
    idx = np.random.default_rng(5).permutation(len(y))[:700]
    X = (X[idx] - X[idx].mean(0)) / X[idx].std(0)
    path = tmp_path_factory.mktemp("unc") / "store"
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X, chunks=(160, 9)), da.from_array(y[idx], chunks=160), path)
    return path, X, y[idx]


@pytest.fixture(scope="module")
def model(store, tmp_path_factory, local_cluster):
    """A model fitted by ``dkrr fit`` with 3-fold CV on the Gram path."""
    from dkrr.cli import main

    path = tmp_path_factory.mktemp("unc_model") / "m"
    assert main([str(a) for a in ["fit", store[0], "--out", path, *FIT, "--cv", 3,
                                  "--scheduler", local_cluster.scheduler_address, "-q"]]) == 0
    return path


@pytest.mark.parametrize("quiet", ["-q", None], ids=["quiet", "progress"])
@pytest.mark.parametrize("kind", ["observation", "latent"])
def test_predict_std_writes_y_std_next_to_y_pred(store, model, tmp_path, capsys, local_cluster, quiet, kind):
    path, X, _ = store
    flag = ["--std"] if kind == "observation" else ["--std", "latent"]
    code, out, err = _main(capsys, "predict", model, path, "--out", tmp_path / "p", *flag,
                           "--scheduler", local_cluster.scheduler_address, quiet)
    assert code == 0, err
    assert out == f"wrote {tmp_path / 'p'}: y_pred and y_std for 700 rows\n"
    assert ("predicting" in err) == (quiet is None), err
    g = zarr.open_group(str(tmp_path / "p"), mode="r")
    assert sorted(g.array_keys()) == ["y_pred", "y_std"]
    assert sorted(g.attrs["dkrr_arrays"]) == ["y_pred", "y_std"]  # the record covers y_std
    assert g.attrs["y_std"] == kind and g["y_std"].chunks == g["y_pred"].chunks
    mean, std = load_model(model).predict(X, return_std=True if kind == "observation" else "latent")
    np.testing.assert_allclose(g["y_pred"][:], mean, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(g["y_std"][:], std, rtol=1e-10, atol=1e-12)
    # the store reads back like any dkrr output, and --overwrite replaces it (with or without --std)
    code, out, err = _main(capsys, "predict", model, path, "--out", tmp_path / "p", "--overwrite", "--json",
                           "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == 0 and json.loads(out) == {"predictions": str(tmp_path / "p"), "n_rows": 700}, err
    assert sorted(zarr.open_group(str(tmp_path / "p"), mode="r").array_keys()) == ["y_pred"]


def test_predict_std_before_the_positionals_is_the_flag_alone(store, model, tmp_path, capsys, local_cluster):
    """A new user's `dkrr predict --std MODEL STORE --out P` failed: argparse took MODEL as
    the value of --std ("invalid choice"). --std before the positionals is the flag alone."""
    path, _, _ = store
    addr = ["--scheduler", local_cluster.scheduler_address, "-q"]
    code, out, err = _main(capsys, "predict", "--std", model, path, "--out", tmp_path / "p", *addr)
    assert code == 0 and out == f"wrote {tmp_path / 'p'}: y_pred and y_std for 700 rows\n", err
    assert zarr.open_group(str(tmp_path / "p"), mode="r").attrs["y_std"] == "observation"
    code, out, err = _main(capsys, "predict", "--std", "latent", model, path, "--out", tmp_path / "q", *addr)
    assert code == 0 and zarr.open_group(str(tmp_path / "q"), mode="r").attrs["y_std"] == "latent", err


def test_predict_std_json_names_the_arrays(store, model, tmp_path, capsys, local_cluster):
    code, out, err = _main(capsys, "predict", model, store[0], "--out", tmp_path / "p", "--std", "--json",
                           "--scheduler", local_cluster.scheduler_address, "-q")
    assert code == 0, err
    assert json.loads(out) == {"predictions": str(tmp_path / "p"), "n_rows": 700,
                               "arrays": ["y_pred", "y_std"], "std": "observation"}


def test_std_of_a_pcg_model_is_refused_naming_the_fix(store, tmp_path, capsys, local_cluster):
    addr = ["--scheduler", local_cluster.scheduler_address, "-q"]
    code, _, err = _main(capsys, "fit", store[0], "--out", tmp_path / "m", "--method", "rff",
                         "--n-components", 16, "--gamma", 0.1, "--alpha", 1.0, "--solver", "pcg", *addr)
    assert code == 0, err
    for command in ("predict", "evaluate"):
        out_flag = ["--out", tmp_path / "p"] if command == "predict" else []
        code, out, err = _main(capsys, command, tmp_path / "m", store[0], *out_flag, "--std", *addr)
        assert code == 1 and out == "", (out, err)
        assert f"dkrr {command} --std needs the model's posterior" in err and "--solver pcg" in err, err
        assert "dkrr fit --solver cholesky" in err, err
    assert not (tmp_path / "p").exists()


def test_std_of_a_classifier_is_refused(tmp_path, capsys, local_cluster):
    import dask
    import dask.array as da

    from dkrr.io import write_dataset

    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 3))
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(X, chunks=60), da.from_array((X[:, 0] > 0).astype(np.int32), chunks=60),
                      tmp_path / "s")
    addr = ["--scheduler", local_cluster.scheduler_address, "-q"]
    code, _, err = _main(capsys, "fit", tmp_path / "s", "--out", tmp_path / "m", "--classifier", "--method",
                         "rff", "--n-components", 8, "--gamma", 0.5, "--alpha", 1.0, *addr)
    assert code == 0, err
    code, _, err = _main(capsys, "predict", tmp_path / "m", tmp_path / "s", "--out", tmp_path / "p", "--std", *addr)
    assert code == 1 and "is a classifier" in err and "--std is for regression models" in err, err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("quiet", ["-q", None], ids=["quiet", "progress"])
def test_evaluate_std_scores_nlpd_and_coverage(store, model, capsys, local_cluster, quiet):
    path, X, y = store
    addr = ["--scheduler", local_cluster.scheduler_address, quiet]
    code, out, err = _main(capsys, "evaluate", model, path, "--std", "--json", *addr)
    assert code == 0, err
    m = json.loads(out)
    mean, std = load_model(model).predict(X, return_std=True)
    r = y - mean
    assert m["nlpd"] == pytest.approx(np.mean(0.5 * np.log(2 * np.pi * std**2) + r**2 / (2 * std**2)), rel=1e-10)
    assert m["coverage_68"] == np.mean(np.abs(r) <= norm.ppf(0.84) * std)
    assert m["coverage_95"] == np.mean(np.abs(r) <= norm.ppf(0.975) * std)
    assert 0.5 < m["coverage_68"] < m["coverage_95"] <= 1.0
    code, text, err = _main(capsys, "evaluate", model, path, "--std", *addr)
    assert code == 0, err
    assert text.splitlines() == [f"r2: {m['r2']:.4f}", f"rmse: {m['rmse']:.4g}", f"mse: {m['mse']:.4g}",
                                 f"nlpd: {m['nlpd']:.4g}", f"coverage_68: {m['coverage_68']:.4f}",
                                 f"coverage_95: {m['coverage_95']:.4f}", "n_rows: 700"]


EVIDENCE = ["--method", "rff", "--n-components", 32, "--gamma", 0.1, "--gammas", "0.05,0.2,0.8",
            "--alphas", "0.01,0.1,1,10,100", "--cv", "evidence", "--random-state", 4]


@pytest.mark.parametrize("quiet", ["-q", None], ids=["quiet", "progress"])
def test_fit_cv_evidence_prints_the_evidence_table_and_choice(store, tmp_path, capsys, local_cluster, quiet):
    path, X, y = store
    addr = ["--scheduler", local_cluster.scheduler_address, quiet]
    code, out, err = _main(capsys, "fit", path, "--out", tmp_path / "m", *EVIDENCE, *addr)
    assert code == 0, err
    est = _reference(*EVIDENCE).fit(X, y)
    assert est.cv == "evidence" and est.gammas == [0.05, 0.2, 0.8]
    saved = load_model(tmp_path / "m")
    assert saved.cv == "evidence" and saved.alpha_ == est.alpha_ and saved.gamma_ == est.gamma_
    lines = out.splitlines()
    head = lines.index("log marginal likelihood (evidence) of y, * = chosen (the largest):")
    table = [line.split() for line in lines[head + 1:head + 7]]
    assert table[0] == ["alpha", "gamma=0.05", "gamma=0.2", "gamma=0.8"]
    marked = [(r, c) for r, row in enumerate(table[1:]) for c, cell in enumerate(row[1:]) if cell == "*"]
    assert len(marked) == 1  # "*" follows its cell: its column is the count of numbers before it
    r, c = marked[0]
    row = table[1 + r][1:]
    assert [0.01, 0.1, 1, 10, 100].index(saved.alpha_) == r
    assert [0.05, 0.2, 0.8].index(saved.gamma_) == len([x for x in row[:c] if x != "*"]) - 1
    logev = saved.cv_results_["log_evidence"]
    for rr, line in enumerate(table[1:]):
        cells = [float(x) for x in line[1:] if x != "*"]
        np.testing.assert_allclose(cells, logev[:, rr], rtol=1e-6)
    assert lines[head + 7] == (f"chosen: alpha_ = {saved.alpha_:.4g}, gamma_ = {saved.gamma_:.4g} "
                               f"(log evidence {saved.best_score_:.7g}, noise variance {saved.noise_variance_:.4g})")
    # the default precision scores the grid from float32 statistics, whose sums over the
    # store's chunks and over numpy's differ in rounding (~1e-8 relative measured)
    np.testing.assert_allclose(saved.best_score_, est.best_score_, rtol=1e-6)

    code, out, err = _main(capsys, "fit", path, "--out", tmp_path / "m2", *EVIDENCE, "--json", *addr)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["selection"] == "evidence" and "cv_error" not in doc
    assert doc["alpha"] == saved.alpha_ and doc["gamma"] == saved.gamma_
    assert doc["log_evidence"] == saved.best_score_ and doc["noise_variance"] == saved.noise_variance_
    assert doc["log_marginal_likelihood"] == saved.log_marginal_likelihood_
    np.testing.assert_array_equal(np.array(doc["cv_results"]["log_evidence"]), logev)
    assert doc["cv_results"]["gammas"] == [0.05, 0.2, 0.8]


def test_cv_option_and_config_accept_evidence(tmp_path):
    from dkrr.cli._commands import estimator_from_options
    from dkrr.cli._options import build_parser

    def options(*args):
        return estimator_from_options(build_parser().parse_args(["fit", "s", "--out", "m", *map(str, args)]))

    assert options("--cv", "evidence").cv == "evidence"
    assert options("--cv", "evidence").gammas == "auto"  # the default gamma grid, scored by the evidence
    cfg = tmp_path / "fit.toml"
    cfg.write_text('cv = "evidence"\n')
    assert options("--config", cfg).cv == "evidence"
    cfg.write_text('cv = "folds"\n')
    from dkrr.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="an integer .* or 'evidence'"):
        options("--config", cfg)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fit", "s", "--out", "m", "--cv", "bayes"])


def test_write_predictions_refuses_a_std_of_another_shape(tmp_path):
    from dkrr.errors import InputValidationError
    from dkrr.io import write_predictions

    with pytest.raises(InputValidationError, match=r"y_std has shape \(4,\) but y_pred has shape \(5,\)"):
        write_predictions(np.zeros(5), tmp_path / "p", y_std=np.ones(4))
    assert not (tmp_path / "p").exists()
