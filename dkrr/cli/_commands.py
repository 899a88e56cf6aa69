"""What each ``dkrr`` sub-command does (argument parsing lives in :mod:`._main`)."""

from __future__ import annotations

import json
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

from ..errors import InvalidParameterError
from ._main import ESTIMATOR_OPTIONS, _parse_alphas

__all__ = ["cmd_evaluate", "cmd_fit", "cmd_ingest", "cmd_predict", "estimator_from_options"]


def _say(args, *parts) -> None:
    if not getattr(args, "quiet", False):
        print(*parts, file=sys.stderr, flush=True)


def _client(args):
    from .._cluster import dask_client
    from .._progress import set_progress

    set_progress(not args.quiet)
    return dask_client(
        args.scheduler,
        n_workers=args.workers,
        threads_per_worker=args.threads_per_worker,
        memory_limit=args.memory_limit,
        tls_ca_file=args.tls_ca_file,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        timeout=args.timeout,
        quiet=args.quiet,
    )


def cmd_ingest(args) -> int:
    from ..io import ingest

    target = args.target
    if target is not None and target.lstrip("-").isdigit():
        target = int(target)
    last = [0.0]

    def progress(rows, done, total):
        now = time.monotonic()
        if now - last[0] >= 0.5 or (total and done >= total):
            last[0] = now
            pct = f" ({100.0 * done / total:5.1f}%)" if total else ""
            print(f"\ringest: {rows:,} rows{pct}", end="", file=sys.stderr, flush=True)

    summary = ingest(
        args.input,
        args.out,
        target=target,
        format=args.format,
        header=args.header,
        delimiter=args.delimiter,
        dtype=args.dtype,
        chunk_rows=args.chunk_rows,
        n_features=args.n_features,
        missing=args.missing,
        target_type="labels" if args.labels else "auto",
        overwrite=args.overwrite,
        progress=None if args.quiet else progress,
    )
    _say(args, "")
    print(
        f"wrote {summary.path}: X {summary.n_rows} x {summary.n_features}, "
        f"{summary.n_targets} target(s)"
        + (f", classes {list(summary.classes)}" if summary.classes else "")
    )
    return 0


def _load_config(path: str | None) -> dict:
    if not path:
        return {}
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        raise InvalidParameterError(f"config file {path!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidParameterError(f"config file {path!r} is not valid TOML: {exc}") from None
    raw = raw.get("fit", raw)  # either top-level keys or a [fit] table
    known = {dest for _, dest, _, _ in ESTIMATOR_OPTIONS} | {"classifier", "fit_intercept"}
    config = {}
    for key, value in raw.items():
        dest = key.replace("-", "_")
        if dest not in known:
            raise InvalidParameterError(
                f"config file {path!r}: unknown option {key!r}; known: {sorted(known)}"
            )
        config[dest] = _parse_alphas(value) if dest == "alphas" else value
    return config


def estimator_from_options(args):
    """The estimator a ``dkrr fit`` invocation describes (config file, then flags)."""
    from ..estimators import RandomFeatureRidge, RandomFeatureRidgeClassifier

    options = _load_config(getattr(args, "config", None))
    for _, dest, _, _ in ESTIMATOR_OPTIONS:
        value = getattr(args, dest, None)
        if value is not None:
            options[dest] = value
    for dest in ("classifier", "fit_intercept"):
        value = getattr(args, dest, None)
        if value is not None:
            options[dest] = value
    classifier = bool(options.pop("classifier", False))
    cls = RandomFeatureRidgeClassifier if classifier else RandomFeatureRidge
    valid = set(cls().get_params())
    unknown = set(options) - valid
    if unknown:
        raise InvalidParameterError(f"options {sorted(unknown)} do not apply to {cls.__name__}")
    return cls(**options)


def cmd_fit(args) -> int:
    from ..io import open_dataset
    from ..io._model import save_model

    est = estimator_from_options(args)
    out = Path(args.out)
    if out.exists() and not args.overwrite:
        from ..errors import OutputExistsError

        raise OutputExistsError(f"{out} exists; pass --overwrite to replace it")
    data = open_dataset(args.store, require_y=True)
    y = data.y
    with _client(args):
        t0 = time.perf_counter()
        est.fit(data.X, y)
        elapsed = time.perf_counter() - t0
    if "classes" in data.attrs and hasattr(est, "classes_"):
        est.store_classes_ = np.asarray(data.attrs["classes"])
    save_model(est, out, overwrite=args.overwrite)
    summary = {"model": str(out), "estimator": type(est).__name__, "fit_seconds": round(elapsed, 3),
               "n_rows": int(data.X.shape[0]), "n_features": int(data.X.shape[1])}
    if getattr(est, "alpha_", None) is not None:
        summary["alpha"] = float(est.alpha_)
    print(json.dumps(summary))
    return 0


def _load(model_dir):
    from ..io._model import load_model

    return load_model(model_dir)


def cmd_predict(args) -> int:
    from ..io import open_dataset, write_predictions

    est = _load(args.model)
    data = open_dataset(args.store, require_y=False)
    with _client(args):
        y_pred = est.predict(data.X)
        attrs = {"model": str(Path(args.model).resolve()), "source": str(Path(args.store).resolve())}
        if hasattr(est, "store_classes_"):
            attrs["classes"] = [str(c) for c in est.store_classes_]
        from .._progress import compute

        write_predictions(y_pred, args.out, overwrite=args.overwrite, attrs=attrs,
                          compute=lambda tasks: compute(*tasks, label="predicting"))
    print(json.dumps({"predictions": str(args.out), "n_rows": int(data.X.shape[0])}))
    return 0


def cmd_evaluate(args) -> int:
    import dask.array as da

    from .._progress import compute
    from ..io import open_dataset

    est = _load(args.model)
    data = open_dataset(args.store, require_y=True)
    with _client(args):
        y_pred = est.predict(data.X)
        y = data.y
        if hasattr(est, "classes_"):
            (acc,) = compute(da.mean(y_pred == y.astype(y_pred.dtype) if y.ndim == 1 else y_pred == y),
                             label="evaluating")
            metrics = {"accuracy": float(acc)}
        else:
            y = y.astype(np.float64)
            resid = y - y_pred.reshape(y.shape)
            sse, ysum, yy, n = compute(
                (resid**2).sum(axis=0), y.sum(axis=0), (y**2).sum(axis=0), y.shape[0], label="evaluating"
            )
            sst = yy - ysum**2 / n
            metrics = {"r2": float(np.mean(1 - sse / sst)), "rmse": float(np.sqrt(np.mean(sse) / n)),
                       "mse": float(np.mean(sse) / n)}
    metrics["n_rows"] = int(data.X.shape[0])
    if args.json:
        print(json.dumps(metrics))
    else:
        for k, v in metrics.items():
            print(f"{k}: {v}")
    return 0
