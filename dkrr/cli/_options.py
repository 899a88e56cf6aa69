"""The options of the ``dkrr`` command: its argument parser and the estimator options
(which are also the keys a ``--config`` TOML file may hold)."""

from __future__ import annotations

import argparse

from .._version import __version__

__all__ = ["ESTIMATOR_OPTIONS", "GRID_PARSERS", "build_parser"]

#: estimator options: (flag, dest, type, help); also the keys a TOML config may hold
ESTIMATOR_OPTIONS = [
    ("--kernel", "kernel", str, "gaussian, matern (scikit-learn's Matern, length scale 1/sqrt(2 gamma); "
                                "--nu), laplacian (exp(-gamma ||x-y||_1)), polynomial ((gamma x.y + "
                                "coef0)^degree), angular, arccos0, arccos1 or linear (the dot product, a "
                                "JLT sketch) (default gaussian)"),
    ("--nu", "nu", float, "matern: smoothness nu (default 1.5; 0.5 is exp(-sqrt(2 gamma) ||x-y||))"),
    ("--degree", "degree", int, "polynomial: degree (default 3)"),
    ("--coef0", "coef0", float, "polynomial: constant term, >= 0 (default 1)"),
    ("--method", "method", str, "feature map: rff, orf, sorf, rom, fastfood, circulant, skew_circulant, "
                                "toeplitz, hankel, toeplitz_like, qmc, nystroem, the polynomial sketches "
                                "tensorsketch and tensor_srht, or auto (the default: orf up to 128 padded "
                                "columns, sorf above; rff for laplacian, tensor_srht for polynomial)"),
    ("--n-components", "n_components", int, "D, the number of random frequencies (default 256)"),
    ("--gamma", "gamma", "gamma", "kernel width (gaussian exp(-gamma ||x-y||^2)): a number, comma-separated "
                                 "numbers (one per column, ARD: gaussian, matern, laplacian), 'median' (the "
                                 "50-NN rule on a 1,000-row sample; the default for gaussian and matern) or "
                                 "'scale' (1 / (d Var X); the default for laplacian and polynomial); "
                                 "a rule is the centre of the default gamma grid (--gammas)"),
    ("--alpha", "alpha", float, "fit this one ridge penalty without cross-validation (unless --cv, "
                                "--alphas or --gammas is given; default: alpha chosen by the default CV)"),
    ("--alphas", "alphas", None, "comma-separated alpha grid scored by cross-validation (default: the "
                                 "grid s * 10**(-7..1), s the mean diagonal of the centred Gram)"),
    ("--gammas", "gammas", None, "gamma grid scored jointly with the alphas by the same one-pass "
                                 "cross-validation: comma-separated numbers (multipliers of an ARD --gamma), 'auto' (gamma x "
                                 "2**(-3..2), 6 widths around the rule's or the given gamma, which stays the middle one: "
                                 "2.7-3.9x the fit time at D = 256 and 6x the statistics' memory of one gamma) or 'none' (gamma alone). Default: auto with a gamma rule, "
                                 "a kernel with a width and CV (not with --solver pcg or --sampling); none "
                                 "with a numeric --gamma"),
    ("--cv", "cv", "cv", "folds of the one-pass cross-validation that chooses alpha (and gamma) "
                         "(default 5; 0 or --no-cv: fit the single --alpha, default 1.0), or 'evidence': "
                         "the (alpha, gamma) of the largest log marginal likelihood of y, from one pass "
                         "without folds (one tridiagonal reduction per gamma; not with --solver pcg or "
                         "--sampling; ALGORITHMS.md 3.11)"),
    ("--random-state", "random_state", int, "seed that determines every random draw (default 0: the "
                                            "same command on the same store gives the same model)"),
    ("--sampling", "sampling", str, "surrogate_leverage or ridge_leverage (data-dependent features; default none: "
                                    "plain random frequencies)"),
    ("--n-candidates", "n_candidates", int, "candidate frequencies scored by leverage sampling (default 4 x "
                                            "--n-components)"),
    ("--n-hd-blocks", "n_hd_blocks", int, "SORF and ROM: number of H D factors (default 3)"),
    ("--displacement-rank", "displacement_rank", int, "toeplitz_like: displacement rank (default 1)"),
    ("--rom-diagonal", "rom_diagonal", str, "rom: rademacher (the default), complex4 or unit_circle "
                                            "(complex: linear kernel only, 2 D feature columns)"),
    ("--row-sampling", "row_sampling", str, "sorf/rom with D not a multiple of d': first (the "
                                            "default), with_replacement or without_replacement"),
    ("--solver", "solver", str, "auto (the default: the Gram path's Cholesky when its p x p statistics "
                                "fit the workers' and this machine's memory (or its container's limit), else pcg), "
                                "cholesky, eigh or pcg (matrix-free preconditioned CG, no p x p matrix; --cv "
                                "by fold-masked passes); the output and the model say what was chosen and "
                                "why (solver_, solver_reason_)"),
    ("--pcg-rank", "pcg_rank", int, "pcg: rank of the Nystrom preconditioner (default 256, at most p)"),
    ("--tol", "tol", float, "pcg: relative residual at which CG stops (default 1e-6)"),
    ("--max-iter", "max_iter", int, "pcg: most CG iterations (default 200)"),
    ("--pcg-persist", "pcg_persist", "persist", "pcg: keep X in worker memory across the passes: auto "
                                                "(the default: when it takes at most a quarter of the memory "
                                                "the fit leaves free), true or false (read the store each pass)"),
    ("--precision", "precision", str, "auto (the default: float32 statistics and CV, the final coefficients "
                                      "refined to the float64 solution by a few float64 passes; float64 when "
                                      "alpha is too small for float32, with a warning), float64 (one double-"
                                      "precision pass) or float32 (float32 statistics solved as they are)"),
    ("--chunk-rows", "chunk_rows", int, "rows per block: the store is rechunked to this (default: the store's "
                                        "own chunks)"),
]


def _parse_grid(text, flag: str) -> list[float]:
    if isinstance(text, (list, tuple)):
        return [float(a) for a in text]
    try:
        return [float(a) for a in str(text).split(",")]  # an empty item ("1,,2") is an error, not skipped
    except ValueError:
        raise argparse.ArgumentTypeError(f"{flag} must be comma-separated numbers, got {text!r}")


def _parse_alphas(text) -> list[float]:
    alphas = _parse_grid(text, "--alphas")
    if any(a < 0 for a in alphas):
        raise argparse.ArgumentTypeError(
            f"--alphas {text!r} contains a negative value: every ridge penalty must be >= 0"
        )
    return alphas


def _parse_gammas(text):
    """``--gammas``: comma-separated positive numbers, ``auto`` or ``none``."""
    if isinstance(text, str) and text.strip().lower() in ("auto", "none"):
        return text.strip().lower()
    gammas = _parse_grid(text, "--gammas")
    if not all(g > 0 for g in gammas):  # also refuses nan
        raise argparse.ArgumentTypeError(
            f"--gammas {text!r} contains a value that is not > 0: every Gaussian width must be "
            "a positive number, e.g. --gammas 0.01,0.1,1 (or auto, or none)"
        )
    return gammas


def _parse_gamma(text):
    """``--gamma``: a positive number, comma-separated positive numbers (one per column:
    ARD, a list), or one of the rules ``median`` / ``scale``."""
    if str(text).strip().lower() in ("median", "scale"):
        return str(text).strip().lower()
    parts = str(text).split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = [float("nan")]
    if not all(v > 0 and v != float("inf") for v in values):
        raise argparse.ArgumentTypeError(
            f"--gamma must be a positive number, comma-separated positive numbers (one per column, "
            f"ARD), 'median' or 'scale', got {text!r}"
        )
    return values if len(parts) > 1 else values[0]


def _parse_cv(text):
    """``--cv``: a number of folds (an integer, 0 for none) or ``evidence``."""
    if str(text).strip().lower() == "evidence":
        return "evidence"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--cv must be a number of folds (e.g. 5; 0 for none) or 'evidence', got {text!r}") from None


def _parse_persist(text):
    """``--pcg-persist``: ``auto``, or a boolean (``true``/``false``, ``yes``/``no``, ``1``/``0``)."""
    if isinstance(text, bool):
        return text
    word = str(text).strip().lower()
    if word == "auto":
        return "auto"
    if word in ("true", "yes", "1"):
        return True
    if word in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"--pcg-persist must be auto, true or false, got {text!r}")


def _parse_columns(text: str) -> list[str]:
    """``--target``/``--features``: comma-separated names or 0-based indices (negative from
    the end), as text: the ingest takes a header name first, an index where no column has
    that name (a pandas frame's default header ``,0,1,2`` names its columns by digits, and
    ``--features 0,1`` took the index column and column '0', without a word)."""
    columns = [f.strip() for f in text.split(",")]
    if not columns or "" in columns:  # "a,,b": a column left out by a typo
        raise argparse.ArgumentTypeError(f"expected column names or indices, comma-separated; got {text!r}")
    return columns


def _parse_storage_options(text: str) -> dict:
    """``--storage-options``: a JSON object of fsspec options for the command's URLs."""
    from ..io._json import strict_json

    try:
        options = strict_json(text)  # a key given twice is refused, not the last one taken
    except (ValueError, RecursionError) as exc:
        raise argparse.ArgumentTypeError(
            f"--storage-options must be a JSON object such as "
            f"'{{\"endpoint_url\": \"http://127.0.0.1:9000\"}}', got {text!r} ({exc})"
        ) from None
    if not isinstance(options, dict):
        raise argparse.ArgumentTypeError(
            f"--storage-options must be a JSON object ({{...}}), got {text!r}"
        )
    return options


def _add_storage_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage-options", metavar="JSON", type=_parse_storage_options, default=None,
                   help="fsspec options for every URL of the command (s3://, gs://, az://...), as "
                        "a JSON object, e.g. '{\"endpoint_url\": \"http://127.0.0.1:9000\"}' (default: "
                        "none, fsspec's defaults); credentials may come from the usual environment "
                        "instead (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ...)")


#: options whose value is a comma-separated grid, and their parsers
GRID_PARSERS = {"alphas": _parse_alphas, "gammas": _parse_gammas}


def _add_connection_options(g, timeout=30.0) -> None:
    """The options that reach an existing scheduler: its certificates and the timeout
    (``timeout=None``: the default 30 s is applied by the command, which can tell a
    ``--timeout`` given from none)."""
    g.add_argument("--tls-ca-file", help="CA certificate for a tls:// scheduler")
    g.add_argument("--tls-cert", help="client certificate for a tls:// scheduler")
    g.add_argument("--tls-key", help="client private key for a tls:// scheduler")
    g.add_argument("--timeout", type=float, default=timeout, help="seconds to wait for the scheduler (default 30)")


def _add_cluster_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="address of an existing Dask scheduler (tcp://... or tls://...) or a "
                        "scheduler JSON file; default: start an in-process LocalCluster")
    g.add_argument("--workers", type=int, default=None,
                   help="LocalCluster worker processes (default: one per available core divided by "
                        "--threads-per-worker, as LocalCluster picks)")
    # None: not given (refused with --scheduler); _client applies the defaults the help names
    g.add_argument("--threads-per-worker", type=int, default=None, help="LocalCluster threads per worker (default 1)")
    g.add_argument("--memory-limit", default=None,
                   help="LocalCluster memory limit per worker, e.g. 2GB (default auto: this machine's "
                        "memory, or its cgroup limit, shared evenly by the worker threads)")
    _add_connection_options(g)
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no progress bars or cluster/dashboard line (when stderr is not a terminal, "
                        "progress is a plain line per 10%% of the tasks or 30 s, whichever is rarer; "
                        "the environment variable DKRR_PROGRESS_INTERVAL=SECONDS sets another interval)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dkrr", description="Kernel ridge regression at scale on Dask with random features."
    )
    parser.add_argument("--version", action="version", version=f"dkrr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("ingest", help="convert CSV, LIBSVM/svmlight, .npy or Parquet into a dkrr Zarr store")
    p.add_argument("input", help="input file (.csv, .txt/.svm/.libsvm[.gz|.bz2], .npy, .parquet) or a "
                                 "directory of Parquet files")
    p.add_argument("--out", required=True,
                   help="output Zarr store: a directory, or a URL (s3://bucket/data.zarr)")
    tgt = p.add_mutually_exclusive_group()
    tgt.add_argument("--target", metavar="COL[,COL...]", type=_parse_columns,
                     help="target column: header name, or 0-based index where no column has that name "
                          "(default: last; libsvm: labels); "
                          "several, comma-separated, give a store of several targets (regression)")
    tgt.add_argument("--no-target", dest="target", action="store_const", const=[],
                     help="the file has no target: write X alone, a store for `dkrr predict` "
                          "(LIBSVM: its labels are not stored); with --like, the store's feature "
                          "columns, found by name, or by position in its file less its target")
    p.add_argument("--features", metavar="COL,...", type=_parse_columns,
                   help="feature columns, by header name or else 0-based index, comma-separated (default: every "
                        "column but the target; CSV, .npy, Parquet); each must be numeric")
    p.add_argument("--format", choices=["csv", "libsvm", "npy", "parquet"],
                   help="input format (default: from the extension)")
    hdr = p.add_mutually_exclusive_group()
    hdr.add_argument("--header", dest="header", action="store_true", default=None,
                     help="CSV has a header row (default: detected -- the first line is a header "
                          "when one of its cells is text where the second line has a number, a --labels "
                          "target's cells aside)")
    hdr.add_argument("--no-header", dest="header", action="store_false", help="CSV has no header row")
    p.add_argument("--delimiter", default=",",
                   help="CSV delimiter: one character, 'tab', or 'whitespace' for runs of "
                        "spaces and tabs (default ,)")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                   help="stored dtype of X (default float32)")
    p.add_argument("--y-dtype", choices=["float64", "float32"], default="float64",
                   help="stored dtype of a numeric y (default float64, exact for integers up "
                        "to 2**53); class labels are stored as int32 codes")
    p.add_argument("--index-base", choices=["0", "1", "auto"], default="auto",
                   help="LIBSVM: index of the first feature (default auto: 0 if index 0 occurs, "
                        "else 1; refused as ambiguous when --n-features fits both)")
    p.add_argument("--like", metavar="STORE",
                   help="read the file with the layout of this store (e.g. the training store): "
                        "its features, dtypes, index base, delimiter, target and classes; with "
                        "headers, the store's columns are found by name")
    p.add_argument("--chunk-rows", type=int, default=65536,
                   help="most rows per Zarr chunk and per read; wide inputs get fewer, so that a "
                        "chunk of X stays within 64 MiB (default 65536)")
    p.add_argument("--blocksize", default="64MiB",
                   help="bytes of uncompressed CSV (or Parquet values) converted by one parallel task "
                        "(default 64MiB, as dask.dataframe.read_csv); a larger input is converted in "
                        "parallel by threads, or by the workers of --scheduler")
    g = p.add_argument_group("cluster")  # no LocalCluster: without --scheduler, threads of this process
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="convert on the workers of this running Dask scheduler (tcp://..., tls://... or a "
                        "scheduler JSON file); they must see the input and --out (default: threads of "
                        "this process)")
    _add_connection_options(g, timeout=None)
    p.add_argument("--n-features", type=int,
                   help="LIBSVM: number of features (default: the largest index, one more if "
                        "zero-based); CSV/.npy: checked")
    p.add_argument("--missing", choices=["error", "drop"], default="error",
                   help="rows with an empty, NA or NaN cell: error (default; names the rows) or drop")
    p.add_argument("--labels", action="store_true",
                   help="CSV: the target column holds class labels, even if they are numbers")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_storage_options(p)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress output")

    p = sub.add_parser("fit", help="fit a model on a Zarr store and save it")
    p.add_argument("store", help="Zarr store with arrays X and y (a directory or a URL)")
    p.add_argument("--out", required=True, help="model directory to write (a directory or a URL)")
    p.add_argument("--config", help="TOML file with estimator options (command-line flags win)")
    p.add_argument("--classifier", action="store_true", default=None, help="fit RandomFeatureRidgeClassifier")
    p.add_argument("--no-intercept", dest="fit_intercept", action="store_false", default=None,
                   help="fit without an intercept")
    std = p.add_mutually_exclusive_group()
    std.add_argument("--standardize", dest="standardize", action="store_true", default=None,
                     help="centre and scale every column with its training mean and std (the default)")
    std.add_argument("--no-standardize", dest="standardize", action="store_false",
                     help="use the columns as stored")
    folds = p.add_mutually_exclusive_group()  # `--cv 5 --no-cv`: refused, not the last one taken
    for flag, dest, typ, help_ in ESTIMATOR_OPTIONS:
        typ = {"gamma": _parse_gamma, "persist": _parse_persist, "cv": _parse_cv}.get(typ, GRID_PARSERS.get(dest, typ))
        (folds if flag == "--cv" else p).add_argument(flag, dest=dest, type=typ, help=help_)
    folds.add_argument("--no-cv", dest="cv", action="store_const", const=0,
                       help="no cross-validation: fit the single --alpha (the same as --cv 0)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing model directory")
    p.add_argument("--json", action="store_true",
                   help="print the summary and the cross-validation results as JSON, at full "
                        "precision (default: a table rounded for reading)")
    _add_storage_options(p)
    _add_cluster_options(p)

    p = sub.add_parser("predict", help="predict a store with a saved model, write a Zarr store")
    p.add_argument("model", help="model directory written by `dkrr fit` (a directory or a URL)")
    p.add_argument("store", help="Zarr store with array X (a directory or a URL)")
    p.add_argument("--out", required=True, help="output Zarr store holding y_pred (a directory or a URL)")
    p.add_argument("--std", nargs="?", const="observation", choices=["observation", "latent"], default=None,
                   help="also write y_std, the predictive standard deviation of each prediction "
                        "(the model read as Bayesian linear regression on its features, ALGORITHMS.md "
                        "3.11): of a new noisy observation (--std or --std observation) or of the "
                        "noise-free function (--std latent). Regression models fitted on the Gram "
                        "path only (not --solver pcg). Default: y_pred alone")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output")
    p.add_argument("--json", action="store_true", help="print the output path and row count as JSON")
    _add_storage_options(p)
    _add_cluster_options(p)

    p = sub.add_parser("evaluate", help="score a saved model on a store with X and y")
    p.add_argument("model", help="model directory written by `dkrr fit` (a directory or a URL)")
    p.add_argument("store", help="Zarr store with arrays X and y (a directory or a URL)")
    p.add_argument("--std", action="store_true",
                   help="also score the predictive standard deviation (models that have one, as "
                        "dkrr predict --std): the mean negative log predictive density (nlpd) and the "
                        "coverage of the central 68%% and 95%% predictive intervals")
    p.add_argument("--json", action="store_true",
                   help="print the metrics as JSON, at full precision (default: rounded for reading)")
    _add_storage_options(p)
    _add_cluster_options(p)
    return parser
