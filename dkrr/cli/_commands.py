"""What each ``dkrr`` sub-command does (its options live in :mod:`._options`)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from ..errors import InvalidParameterError
from ._columns import record_store_columns, store_columns_checked
from ._labels import check_regression_target, class_metrics, prediction_output
from ._fit_options import estimator_from_options
from ._report import (fit_json, fit_lines, in_dims_of, json_ready, metric_lines, plus_minus, predict_line,
                      predictive_metrics, predictive_sums, regression_metrics)
from ._stores import dropped_rows_note, fit_output_lock, open_store, preflight

__all__ = ["cmd_evaluate", "cmd_fit", "cmd_ingest", "cmd_predict", "estimator_from_options"]


def _say(args, *parts) -> None:
    if not getattr(args, "quiet", False):
        print(*parts, file=sys.stderr, flush=True)


#: Loggers that report a failed task with the worker's traceback ("Compute Failed"):
#: the error itself reaches the user through the client, once, as one line.
_WORKER_LOGGERS = {"distributed.worker": "critical", "distributed.nanny": "critical",
                   "distributed.scheduler": "critical", "distributed.core": "critical"}


@contextlib.contextmanager
def _worker_logs_silenced():
    """Under ``-q``: no worker-side tracebacks, in this process or in the LocalCluster's
    worker processes (they read the ``DASK_LOGGING`` variable when they import dask).
    Levels and environment are restored afterwards (``main`` may run in a process that
    goes on)."""
    import logging

    loggers = {name: logging.getLogger(name) for name in _WORKER_LOGGERS}
    levels = {name: logger.level for name, logger in loggers.items()}
    env = os.environ.get("DASK_LOGGING")
    for name, level in _WORKER_LOGGERS.items():
        loggers[name].setLevel(level.upper())
    os.environ["DASK_LOGGING"] = repr(_WORKER_LOGGERS)
    try:
        yield
    finally:
        for name, level in levels.items():
            loggers[name].setLevel(level)
        if env is None:
            os.environ.pop("DASK_LOGGING", None)
        else:
            os.environ["DASK_LOGGING"] = env


def _where(path, args) -> str:
    """An input or output as the command reports it: a URL as given, a local path resolved."""
    from ..io._paths import Remote, locate

    where = locate(path, args.storage_options)
    return where.url if isinstance(where, Remote) else str(Path(where).resolve())


def _refuse_local_options(args) -> None:
    """Refuse --workers, --threads-per-worker and --memory-limit with --scheduler: they shape
    only the LocalCluster that a command starts without it (as connect(n_workers=...))."""
    for flag, value in (("--workers", args.workers), ("--threads-per-worker", args.threads_per_worker),
                        ("--memory-limit", args.memory_limit)):
        if args.scheduler is not None and value is not None:
            raise InvalidParameterError(
                f"{flag} shapes the LocalCluster that dkrr starts without --scheduler: an existing "
                "cluster's workers are set where it is started (`dask worker --nworkers/--nthreads/"
                "--memory-limit`, `cluster/local/cluster.py start --workers ...`)")


@contextlib.contextmanager
def _client(args):
    from .._progress import progress_set
    from ..cluster import ClusterOptions, connect, local_cluster

    options = ClusterOptions(tls_ca_file=args.tls_ca_file, tls_cert=args.tls_cert,
                             tls_key=args.tls_key, timeout=args.timeout, quiet=args.quiet)
    with contextlib.ExitStack() as stack:
        stack.enter_context(progress_set(not args.quiet))
        if args.quiet:
            stack.enter_context(_worker_logs_silenced())
        if args.scheduler is None:  # --workers & co. shape a new LocalCluster only
            given = {"n_workers": args.workers, "threads_per_worker": args.threads_per_worker,
                     "memory_limit": args.memory_limit}  # None: ClusterOptions' default
            yield stack.enter_context(local_cluster(options, **{k: v for k, v in given.items() if v is not None}))
        else:
            with _warnings_as_lines(args.command):  # connect's: workers running another dkrr
                client = stack.enter_context(connect(args.scheduler, options))
            yield client


def cmd_ingest(args) -> int:
    from ..io import ingest

    target = args.target  # a list (_parse_columns): one column is given as itself; [] none
    if target is not None and len(target) == 1:
        target = target[0]
    if target == [] and args.labels:
        raise InvalidParameterError("--labels reads the target column as class labels, and "
                                    "--no-target reads no target: give one of them")
    from .._progress import LogGate, _is_terminal

    # on a terminal the line is redrawn in place (twice a second); in a log, a plain line
    # per 10% of the input or 30 s, whichever is rarer (LogGate), and the last one
    terminal = _is_terminal(sys.stderr)
    gate = None if terminal or args.quiet else LogGate()
    last = [0.0]

    def progress(rows, done, total):
        pct = 100.0 * done / total if total else None
        text = f"ingest: {rows:,} rows" + ("" if pct is None else f" ({pct:5.1f}%)")
        if total and done >= total:
            print(("\r" if terminal else "") + text, end="" if terminal else "\n", file=sys.stderr,
                  flush=True)
        elif terminal and time.monotonic() - last[0] >= 0.5:
            last[0] = time.monotonic()
            print(f"\r{text}", end="", file=sys.stderr, flush=True)
        elif not terminal and gate.due(pct):
            print(text, file=sys.stderr, flush=True)

    from ..io._kinds import zarr_replace_check

    given = [flag for flag, value in (("--tls-ca-file", args.tls_ca_file), ("--tls-cert", args.tls_cert),
                                      ("--tls-key", args.tls_key), ("--timeout", args.timeout))
             if value is not None]
    if args.scheduler is None and given:
        raise InvalidParameterError(f"{given[0]} reaches a scheduler: it needs --scheduler (ingest "
                                    "without it converts with threads of this process)")
    preflight(args, can_replace=zarr_replace_check, inputs=[args.input] + ([args.like] if args.like else []))
    with contextlib.ExitStack() as stack:
        if args.scheduler is not None:
            from ..cluster import ClusterOptions, connect

            with _warnings_as_lines("ingest"):  # connect's: workers running another dkrr
                stack.enter_context(connect(args.scheduler, ClusterOptions(
                    tls_ca_file=args.tls_ca_file, tls_cert=args.tls_cert, tls_key=args.tls_key,
                    timeout=30.0 if args.timeout is None else args.timeout, quiet=args.quiet)))
        with _warnings_as_lines("ingest"):  # the CSV header's (HeaderWarning)
            summary = _ingest(ingest, args, target, progress)
    if terminal:
        _say(args, "")
    print(
        f"wrote {summary.path}: X {summary.n_rows} x {summary.n_features}, "
        + (f"{summary.n_targets} target(s) ({_names(summary.target_names)})" if summary.n_targets else
           "no target (a store to predict: dkrr predict MODEL STORE)")
        + (f", classes {list(summary.classes)}" if summary.classes else "")
    )
    if summary.rows_dropped:
        print(f"{summary.rows_dropped} row(s) with missing values dropped (--missing drop): the store's rows are "
              "the file's less those, so predictions of it do not line up with the file's lines")
    if summary.index_base_guessed and summary.index_base == 1:
        print(
            "LIBSVM indices read as one-based (index 0 never occurs); if the file is "
            "zero-based, ingest it again with --index-base 0. Ingest a test file with "
            "--like this store to read it the same way."
        )
    return 0


def _names(names, shown: int = 5) -> str:
    """``'a', 'b'``: the first `shown` names, quoted, and how many more."""
    more = f", ... ({len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(repr(str(n)) for n in names[:shown]) + more


def _ingest(ingest, args, target, progress):
    return ingest(
        args.input,
        args.out,
        target=target,
        features=args.features,  # a list (_parse_columns)
        format=args.format,
        header=args.header,
        delimiter={"tab": "\t", "\\t": "\t", "whitespace": None}.get(  # TAB, Whitespace alike
            args.delimiter.lower() if len(args.delimiter) > 1 else args.delimiter, args.delimiter),
        dtype=args.dtype,
        y_dtype=args.y_dtype,
        chunk_rows=args.chunk_rows,
        n_features=args.n_features,
        index_base=int(args.index_base) if args.index_base.isdigit() else args.index_base,
        missing=args.missing,
        target_type="labels" if args.labels else "auto",
        like=args.like,
        overwrite=args.overwrite,
        blocksize=args.blocksize,
        progress=None if args.quiet else progress,
        storage_options=args.storage_options,
    )


def cmd_fit(args) -> int:
    _refuse_local_options(args)
    from ..io._model import check_replaceable_model, save_model

    notes: list[str] = []
    est = estimator_from_options(args, notes)
    est._check_params()  # bad values (alpha < 0, ...) are refused before a cluster starts
    for note in notes:
        print(f"dkrr fit: note: {note}", file=sys.stderr, flush=True)
    out = args.out
    preflight(args, can_replace=check_replaceable_model, inputs=[args.store])
    with fit_output_lock(args):  # from before the fit: of two fits of one output, one runs
        data = open_store(args, require_y=True)
        check_regression_target(est, data)
        from ..estimators._random_features import check_ridge_map

        check_ridge_map(est, data.X.shape[1])  # a bad method or n_components: before a cluster starts
        y = data.y
        with _client(args), _warnings_as_lines("fit"):
            t0 = time.perf_counter()
            est.fit(data.X, y)
            elapsed = time.perf_counter() - t0
        record_store_columns(est, data)  # the store's labels and column names, on the model
        save_model(est, out, overwrite=args.overwrite, storage_options=args.storage_options)
    shape = {"n_rows": int(data.X.shape[0]), "n_features": int(data.X.shape[1])}
    if getattr(args, "json", False):
        print(json.dumps(fit_json(est, out=out, seconds=elapsed, **shape), allow_nan=False))
    else:
        print("\n".join(fit_lines(est, out=out, seconds=elapsed, pm=plus_minus(sys.stdout), **shape)))
    return 0


@contextlib.contextmanager
def _warnings_as_lines(command: str):
    """Every warning raised while the block runs is said once, as one line on stderr
    (``dkrr fit: warning: ...``; a warning that is not dkrr's own also names its class),
    after the block ends, not as a Python warning with a source line.

    The warnings are recorded first and printed only once recording has stopped: printing
    through :func:`warnings.showwarning` while recording appends to the list being read
    (the command never returned). A block that fails says them before its error line.
    """
    import warnings

    from ..errors import DkrrWarning

    with warnings.catch_warnings(record=True) as caught:
        # dkrr's own warnings every time (the text is deduplicated below); others by the
        # filters in force (so deprecations inside dependencies stay quiet)
        warnings.simplefilter("always", DkrrWarning)
        try:
            yield
        except Exception:  # said before the error line, which they may explain (a CSV's
            _say_warnings(command, list(caught))  # header read as data: its missing cells)
            raise
        recorded = list(caught)
    _say_warnings(command, recorded)


def _say_warnings(command: str, recorded) -> None:
    """Print each recorded warning once, as ``dkrr COMMAND: warning: ...``."""
    from ..errors import DkrrWarning

    seen = set()
    for w in recorded:
        dkrr_own = issubclass(w.category, DkrrWarning)
        text = str(w.message) if dkrr_own else f"{w.category.__name__}: {w.message}"
        if text in seen:
            continue
        seen.add(text)
        print(f"dkrr {command}: warning: {text}", file=sys.stderr, flush=True)


def _load(args):
    from ..io._model import load_model

    return load_model(args.model, storage_options=args.storage_options)


def _check_posterior(est, args, command: str) -> None:
    """``--std`` needs a regression model with the posterior of ALGORITHMS.md 3.11:
    refused before a cluster starts, with how to get one."""
    if hasattr(est, "classes_"):
        raise InvalidParameterError(f"dkrr {command} --std: {args.model} is a classifier, which has no "
                                    "predictive standard deviation; --std is for regression models")
    from ..estimators._models import missing_posterior

    missing = missing_posterior(est, cli=True)
    if missing is not None:
        raise InvalidParameterError(f"dkrr {command} --std needs the model's posterior, which {args.model} "
                                    f"lacks: {missing[0]}. {missing[1]} to get predictive standard deviations")


def cmd_predict(args) -> int:
    _refuse_local_options(args)
    from .._progress import compute
    from ..io import write_predictions
    from ..io._kinds import predictions_replace_check

    inputs = [args.store, args.model]
    preflight(args, can_replace=predictions_replace_check, inputs=inputs)
    est = _load(args)
    std = getattr(args, "std", None)
    if std is not None:
        _check_posterior(est, args, "predict")
    data = open_store(args, require_y=False)
    with store_columns_checked(est, data, "predict", args.model), _client(args):
        attrs = {"model": _where(args.model, args), "source": _where(args.store, args)}
        if getattr(est, "store_target_names_", None) is not None:  # the columns of y_pred
            attrs["target_names"] = [str(t) for t in est.store_target_names_]
        if std is None:
            y_pred, y_std = est.predict(data.X), None
        else:  # one task per block computes both (dkrr.estimators._models)
            y_pred, y_std = est.predict(data.X, return_std=True if std == "observation" else "latent")
            attrs["y_std"] = std
        if hasattr(est, "classes_"):  # text labels: codes, and the model's labels in 'classes'
            y_pred, classes = prediction_output(est, y_pred)
            if classes is not None:
                attrs["classes"] = classes
        write_predictions(y_pred, args.out, y_std=y_std, overwrite=args.overwrite, attrs=attrs, inputs=inputs,
                          compute=lambda tasks: compute(*tasks, label="predicting"),
                          storage_options=args.storage_options)
    arrays = ["y_pred"] + ([] if std is None else ["y_std"])
    if args.json:
        doc = {"predictions": str(args.out), "n_rows": int(data.X.shape[0])}
        print(json.dumps(doc if std is None else {**doc, "arrays": arrays, "std": std}))
    else:
        print(predict_line(args.out, int(data.X.shape[0]), arrays))
    if (note := dropped_rows_note(data, args.store)) is not None:
        print(f"dkrr predict: note: {note}", file=sys.stderr)
    return 0


def _n_columns(arr) -> int:
    return 1 if arr.ndim == 1 else int(arr.shape[1])


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def cmd_evaluate(args) -> int:
    _refuse_local_options(args)
    from .._progress import compute
    from ..estimators._inputs import finite_rows_checked, first_block_mean
    from ..errors import InputValidationError

    est = _load(args)
    std = bool(getattr(args, "std", False))
    if std:
        _check_posterior(est, args, "evaluate")
    data = open_store(args, require_y=True)
    check_regression_target(est, data)
    with store_columns_checked(est, data, "evaluate", args.model), _client(args):
        y_pred, y_std = est.predict(data.X, return_std=True) if std else (est.predict(data.X), None)
        y = data.y
        n_pred, n_true = _n_columns(y_pred), _n_columns(y)
        if n_pred != n_true:
            raise InputValidationError(
                f"the model predicts {_plural(n_pred, 'target')} but y in {data.path} holds "
                f"{_plural(n_true, 'target')}; evaluate the model on a store with the "
                "targets it was fitted on"
            )
        note = None
        if hasattr(est, "classes_"):  # labels, not codes: each store's codes through its classes
            metrics, note = class_metrics(est, data, y_pred)
        else:
            y = finite_rows_checked(y, "y", f" of {data.path}").astype(np.float64)  # NaN: named, not a NaN r2
            resid = y - in_dims_of(y_pred, y)
            # the total sum of squares from sums of y - s, s the mean of y's first block:
            # from raw sums (sum y^2 - (sum y)^2 / n) a target far from zero (1e8 + sin x)
            # lost every digit to cancellation (r2 = -inf was printed)
            shift = first_block_mean(y)
            ys = y - (shift if y.ndim > 1 else shift[0])
            sums = [(resid**2).sum(axis=0), ys.sum(axis=0), (ys**2).sum(axis=0)]
            if y_std is not None:
                sums += predictive_sums(resid, in_dims_of(y_std, y))
            sse, ysum, yy, *scored = compute(*sums, label="evaluating")
            n = int(y.shape[0])
            metrics, note = regression_metrics(sse, ysum, yy, n, data.target_names, level=shift)
            if scored:
                metrics.update(predictive_metrics(scored, n))
    metrics["n_rows"] = int(data.X.shape[0])
    if note is not None:
        print(f"dkrr evaluate: note: {note}", file=sys.stderr, flush=True)
    if args.json:
        # JSON has no NaN or infinity (Python's json would write the invalid token NaN)
        for key, value in metrics.items():
            if isinstance(value, float) and not math.isfinite(value):
                print(f"dkrr evaluate: note: {key} = {value} is not a finite number; written as null "
                      "in the JSON output", file=sys.stderr)
        print(json.dumps(json_ready(metrics), allow_nan=False))
    else:
        print("\n".join(metric_lines(metrics)))
    return 0
