"""Benchmark data: real data sets from ``../shared/data`` beside the checkout and the synthetic regression.

Every loader returns a :class:`Split` with X standardised by the training mean and
standard deviation (constant columns left at scale 1) and, for regression, y standardised
the same way, so a test MSE of 1 means "no better than predicting the mean".
"""

from __future__ import annotations

import dataclasses
import gzip
import os
from pathlib import Path

import numpy as np

__all__ = ["Split", "DATA_ROOT", "load_split", "load_raw", "synthetic_regression", "sigma_50nn", "REAL_DATASETS"]

#: folder of the shared real data sets (override with DKRR_DATA_ROOT)
DATA_ROOT = Path(os.environ.get("DKRR_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))

#: name -> task
REAL_DATASETS = {
    "cal_housing": "regression",
    "casp": "regression",
    "cod_rna": "binary",
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


def load_raw(name: str) -> tuple[np.ndarray, np.ndarray]:
    """All rows (X float64, y) of a real data set."""
    root = DATA_ROOT
    if name == "cal_housing":
        from scipy.io import arff

        data, _ = arff.loadarff(str(root / "cal_housing" / "cal.housing.arff"))
        arr = np.column_stack([np.asarray(data[c], dtype=np.float64) for c in data.dtype.names])
        return np.ascontiguousarray(arr[:, :-1]), arr[:, -1].copy()
    if name == "casp":
        try:
            from dkrr.datasets import load_casp

            return load_casp()
        except Exception:
            arr = np.loadtxt(root / "casp" / "CASP.csv", delimiter=",")
            return np.ascontiguousarray(arr[:, 1:]), arr[:, 0].copy()
    if name == "cod_rna":
        with gzip.open(root / "cod_rna" / "cod-rna.train.txt.gz") as fh:
            arr = np.loadtxt(fh)
        return np.ascontiguousarray(arr[:, 1:]), arr[:, 0].astype(int)
    if name == "letter":
        import pandas as pd

        df = pd.read_csv(root / "letter" / "letter-recognition.data", header=None)
        return df.iloc[:, 1:].to_numpy(dtype=np.float64), df.iloc[:, 0].to_numpy(dtype=str)
    if name == "usps":
        from sklearn.datasets import load_svmlight_file

        X, y = load_svmlight_file(str(root / "usps" / "usps.t.bz2"), n_features=256)
        return np.ascontiguousarray(X.toarray()), y.astype(int) - 1
    raise ValueError(f"unknown data set {name!r}; known: {sorted(REAL_DATASETS)}")


def _standardise(X_train, X_test):
    mu = X_train.mean(axis=0)
    sd = X_train.std(axis=0)
    sd[sd == 0] = 1.0
    return (X_train - mu) / sd, (X_test - mu) / sd


def _finish(name, task, X, y, tr, te, note) -> Split:
    Xtr, Xte = _standardise(X[tr], X[te])
    ytr, yte = y[tr], y[te]
    if task == "regression":
        m, s = ytr.mean(), ytr.std()
        ytr, yte = (ytr - m) / s, (yte - m) / s
    return Split(name, task, np.ascontiguousarray(Xtr), ytr, np.ascontiguousarray(Xte), yte, note)


def load_split(name: str, n_train: int, n_test: int, seed: int = 0) -> Split:
    """Shuffled, standardised split of a real data set: ``n_train`` / ``n_test`` rows at most."""
    X, y = load_raw(name)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(X.shape[0])
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
    """Mean distance to the k-th nearest neighbour over a sample (ALGORITHMS.md section 5)."""
    rng = np.random.default_rng(seed)
    idx = rng.choice(X.shape[0], size=min(n_sample, X.shape[0]), replace=False)
    S = X[idx]
    sq = (S * S).sum(1)
    D2 = np.maximum(sq[:, None] + sq[None, :] - 2 * S @ S.T, 0.0)
    k = min(k, S.shape[0] - 1)
    # column 0 of the sorted rows is the point itself (distance 0)
    kth = np.sqrt(np.partition(D2, k, axis=1)[:, k])
    return float(kth.mean())
