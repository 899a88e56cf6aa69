"""The small real datasets shipped in ``dkrr/data`` (sources in its README)."""

from __future__ import annotations

import gzip
from importlib import resources

import numpy as np

__all__ = ["load_casp", "load_magic04", "data_path"]


def data_path(name: str) -> str:
    """Filesystem path of a shipped data file (e.g. ``"casp.csv.gz"``)."""
    return str(resources.files("dkrr") / "data" / name)


def load_casp() -> tuple[np.ndarray, np.ndarray]:
    """CASP protein structure regression: ``X`` (45730, 9) float64, ``y`` = RMSD (45730,).

    Rows are in the file's order; shuffle before splitting.
    """
    with gzip.open(data_path("casp.csv.gz"), "rt") as fh:
        data = np.loadtxt(fh, delimiter=",")
    return np.ascontiguousarray(data[:, 1:]), data[:, 0].copy()


def load_magic04() -> tuple[np.ndarray, np.ndarray]:
    """MAGIC gamma telescope: ``X`` (19020, 10) float64, ``y`` labels ``"g"``/``"h"``."""
    with gzip.open(data_path("magic04.csv.gz"), "rt") as fh:
        rows = [line.rstrip("\n").split(",") for line in fh if line.strip()]
    X = np.array([[float(v) for v in r[:-1]] for r in rows])
    y = np.array([r[-1] for r in rows])
    return X, y
