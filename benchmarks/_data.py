"""Benchmark data: the real data sets (through :mod:`dkrr.datasets`) and the synthetic regression.

Real data sets are found as :func:`dkrr.datasets.load_dataset` finds them: the cache
(``$DKRR_DATA``), an offline mirror folder, then a download from the recorded public URL
(sha256 verified). The mirror is ``$DKRR_DATA_MIRROR``, else ``$DKRR_SHARED_DATA``, else
the project's ``../shared/data`` beside the checkout when it exists. Set
``DKRR_BENCH_DOWNLOAD=0`` to forbid downloads (a missing data set then fails with
:class:`dkrr.errors.DatasetUnavailableError`, which says how to provide it).

Every loader returns a :class:`Split` with X standardised by the training mean and
standard deviation (constant columns left at scale 1) and, for regression, y standardised
the same way, so a test MSE of 1 means "no better than predicting the mean".
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

__all__ = ["Split", "DATA_ROOT", "data_mirror", "load_split", "load_raw", "real_data_missing",
           "synthetic_regression", "sigma_50nn", "REAL_DATASETS"]

#: the project's offline copy of the real data sets (``$DKRR_SHARED_DATA`` overrides)
DATA_ROOT = Path(os.environ.get("DKRR_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))

#: name -> task
REAL_DATASETS = {
    "cal_housing": "regression",
    "casp": "regression",
    "cod_rna": "binary",
    "eeg_eye_state": "binary",
    "letter": "multiclass",
    "usps": "multiclass",
}


@dataclasses.dataclass
class Split:
    """A standardised train/test split.

    Attributes
    ----------
    name, task : str
        ``task`` is ``regression``, ``binary`` or ``multiclass``.
    X_train, y_train, X_test, y_test : ndarray
    note : str
        Where the rows came from and how they were subsampled.
    """

    name: str
    task: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    note: str = ""


def data_mirror() -> Path | None:
    """The offline mirror folder: ``$DKRR_DATA_MIRROR``, else :data:`DATA_ROOT` if it exists."""
    env = os.environ.get("DKRR_DATA_MIRROR")
    if env:
        return Path(env).expanduser()
    return DATA_ROOT if DATA_ROOT.is_dir() else None


def _download_allowed() -> bool:
    return os.environ.get("DKRR_BENCH_DOWNLOAD", "1").strip().lower() not in ("0", "false", "no")


def _check_name(name: str) -> None:
    if name not in REAL_DATASETS:
        raise ValueError(f"unknown data set {name!r}; known: {sorted(REAL_DATASETS)}")


def load_raw(name: str) -> tuple[np.ndarray, np.ndarray]:
    """All rows (X float64, y) of a real data set (cod_rna: its training file).

    Raises
    ------
    dkrr.errors.DatasetUnavailableError
        The data set is neither cached, nor in the mirror, nor downloadable (the message
        says where dkrr looked and how to provide the file).
    """
    _check_name(name)
    if name == "casp":  # shipped with dkrr
        from dkrr.datasets import load_casp

        return load_casp()
    from dkrr.datasets import load_dataset

    return load_dataset(name, mirror=data_mirror(), download=_download_allowed())


def real_data_missing(names) -> dict[str, str]:
    """Data set -> reason, for those of ``names`` that are not available without a download."""
    from dkrr.datasets import DATASETS, fetch_file

    missing = {}
    for name in names:
        _check_name(name)
        if name == "casp":
            continue
        files = DATASETS[name].files
        try:  # the file load_raw reads (load_dataset's default part)
            fetch_file(files["train" if "train" in files else "data"], mirror=data_mirror(), download=False)
        except FileNotFoundError as exc:
            missing[name] = str(exc)
    return missing


def _standardise(X_train, X_test):
    mu = X_train.mean(axis=0)
    sd = X_train.std(axis=0)
    sd[sd == 0] = 1.0
    return (X_train - mu) / sd, (X_test - mu) / sd


def shuffled_split(name: str, seed: int, max_train: int, max_test: int):
    """``dkrr.datasets.load_dataset(name)`` cut by a seeded shuffle into at most ``max_test``
    test rows (a quarter of the rows at most) and ``max_train`` training rows, standardised
    by the training rows: ``(X_train, y_train, X_test, y_test)``."""
    from dkrr.datasets import load_dataset

    X, y = load_dataset(name)
    idx = np.random.default_rng(seed).permutation(len(y))
    n_test = min(max_test, len(y) // 4)
    n_train = min(max_train, len(y) - n_test)
    tr, te = idx[:n_train], idx[n_train:n_train + n_test]
    X_train, X_test = _standardise(X[tr], X[te])
    return X_train, y[tr], X_test, y[te]


#: data sets whose features are clipped to the training rows' 0.5 and 99.5 percentiles
#: before standardising: EEG eye-state has a few readings up to 715,897 where typical
#: values are 4,000-4,700 (as pipelines/accuracy_real.py does)
CLIPPED = ("eeg_eye_state",)


def _finish(name, task, X, y, tr, te, note) -> Split:
    Xtr, Xte = X[tr], X[te]
    if name in CLIPPED:
        lo, hi = np.percentile(Xtr, [0.5, 99.5], axis=0)
        Xtr, Xte = np.clip(Xtr, lo, hi), np.clip(Xte, lo, hi)
        note = f"{note}; every feature clipped to its training 0.5/99.5 percentiles"
    Xtr, Xte = _standardise(Xtr, Xte)
    ytr, yte = y[tr], y[te]
    if task == "regression":
        m, s = ytr.mean(), ytr.std()
        ytr, yte = (ytr - m) / s, (yte - m) / s
    return Split(name, task, np.ascontiguousarray(Xtr), ytr, np.ascontiguousarray(Xte), yte, note)


def load_split(name: str, n_train: int | None, n_test: int | None, seed: int = 0,
               train_fraction: float | None = None) -> Split:
    """Shuffled, standardised split of a real data set: ``n_train`` / ``n_test`` rows at
    most, or (``train_fraction``) that fraction of all rows for training and the rest for testing."""
    X, y = load_raw(name)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(X.shape[0])
    if train_fraction is not None:
        n_train = int(train_fraction * X.shape[0])
        n_test = X.shape[0] - n_train
    n_train = min(n_train, X.shape[0] - 1)
    n_test = min(n_test, X.shape[0] - n_train)
    tr, te = perm[:n_train], perm[n_train:n_train + n_test]
    note = f"{X.shape[0]} rows x {X.shape[1]} features; random {n_train} train / {n_test} test rows (seed {seed})"
    return _finish(name, REAL_DATASETS[name], X, y, tr, te, note)


def synthetic_regression(n: int, d: int = 8, seed: int = 0, noise: float = 0.1, n_test: int = 2000) -> Split:
    """``y = sum_j sin(x_j) + 0.5 x_0 x_1 + noise``, ``x ~ N(0, I_d)`` (standardised)."""
    X, y = synthetic_arrays(n + n_test, d, seed, noise)
    idx = np.arange(n + n_test)
    return _finish(f"synthetic n={n}", "regression", X, y, idx[:n], idx[n:], f"synthetic, d={d}, noise sd {noise}, seed {seed}")


def synthetic_arrays(n: int, d: int, seed: int, noise: float = 0.1, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Raw synthetic rows (not standardised), the generator of :func:`synthetic_regression`."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype)
    y = np.sin(X).sum(axis=1) + 0.5 * X[:, 0] * X[:, 1] + noise * rng.standard_normal(n)
    return X, y.astype(dtype)


def sigma_50nn(X: np.ndarray, k: int = 50, n_sample: int = 1000, seed: int = 0) -> float:
    """Mean distance to the k-th nearest neighbour over a seeded row sample: the
    benchmarks' name for :func:`dkrr.bandwidth.knn_sigma` (ALGORITHMS.md section 5)."""
    from dkrr.bandwidth import knn_sigma

    return knn_sigma(X, k=k, n_points=n_sample, random_state=seed)
