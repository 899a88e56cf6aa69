"""Parsing each registered dataset into ``(X, y)`` numpy arrays."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from ..errors import InvalidParameterError
from ._fetch import fetch_file
from ._registry import DATASETS

__all__ = ["load_dataset"]


def _arff_table(path: Path):
    """An ARFF file as (columns as float64 arrays or decoded str arrays, names)."""
    from scipy.io import arff

    data, meta = arff.loadarff(str(path))
    cols = []
    for name in meta.names():
        col = data[name]
        if col.dtype.kind == "S":
            col = np.char.decode(col, "utf-8")
        cols.append(np.asarray(col))
    return cols, meta.names()


def _last_column_target(cols):
    X = np.column_stack([c.astype(np.float64) for c in cols[:-1]])
    return np.ascontiguousarray(X), cols[-1]


def load_dataset(
    name: str,
    *,
    part: str | None = None,
    data_home=None,
    mirror=None,
    download: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """All rows of a registered real dataset as ``(X, y)``.

    Parameters
    ----------
    name : str
        One of :data:`dkrr.datasets.DATASETS` (``casp``, ``magic04``, ``letter``,
        ``eeg_eye_state``, ``usps``, ``cod_rna``, ``cal_housing``, ``cpu_small``, ``kin8nm``,
        ``abalone``, ``elevators``, ``ailerons``).
    part : str, optional
        For datasets with several files (cod_rna: ``train`` (default), ``test``,
        ``remaining``).
    data_home, mirror, download
        Where the file is looked for, see :func:`dkrr.datasets.fetch_file`.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
        Features as in the file, not scaled (abalone's nominal ``Sex`` one-hot encoded).
    y : ndarray of shape (n_samples,)
        float64 for regression; the file's labels otherwise (str for magic04 and letter,
        int for eeg_eye_state, usps (digits 0-9) and cod_rna (-1/+1)).

    Raises
    ------
    InvalidParameterError
        Unknown ``name`` or ``part``.
    DatasetUnavailableError, ChecksumMismatchError
        See :func:`dkrr.datasets.fetch_file`.
    """
    if name not in DATASETS:
        raise InvalidParameterError(f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}")
    ds = DATASETS[name]
    part = part or ("train" if "train" in ds.files else "data")
    if part not in ds.files:
        raise InvalidParameterError(f"dataset {name!r} has parts {sorted(ds.files)}, got part={part!r}")
    path = fetch_file(ds.files[part], data_home=data_home, mirror=mirror, download=download)
    if name == "casp":
        a = np.loadtxt(path, delimiter=",")
        return np.ascontiguousarray(a[:, 1:]), a[:, 0].copy()
    if name == "magic04":
        rows = [ln.rstrip("\r\n").split(",") for ln in path.read_text().splitlines() if ln.strip()]
        return np.array([[float(v) for v in r[:-1]] for r in rows]), np.array([r[-1] for r in rows])
    if name == "letter":
        rows = [ln.split(",") for ln in path.read_text().splitlines() if ln.strip()]
        return np.array([[float(v) for v in r[1:]] for r in rows]), np.array([r[0] for r in rows])
    if name == "usps":
        from sklearn.datasets import load_svmlight_file

        X, y = load_svmlight_file(str(path), n_features=256)
        return np.ascontiguousarray(X.toarray()), y.astype(np.int64) - 1
    if name == "cod_rna":
        with gzip.open(path, "rt") as fh:
            a = np.loadtxt(fh)
        return np.ascontiguousarray(a[:, 1:]), a[:, 0].astype(np.int64)
    cols, names = _arff_table(path)
    if name == "abalone":
        sex = cols[0]
        onehot = [(sex == s).astype(np.float64) for s in ("M", "F", "I")]
        cols = onehot + cols[1:]
    X, y = _last_column_target(cols)
    if name == "eeg_eye_state":
        return X, y.astype(np.int64)
    return X, y.astype(np.float64)
