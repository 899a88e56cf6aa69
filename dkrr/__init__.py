"""dkrr: kernel ridge regression at scale on Dask with random feature maps.

Public API
----------
RandomFeatures
    scikit-learn transformer: random feature maps (RFF, ORF, SORF, Fastfood, structured,
    QMC, Nystroem) applied blockwise to numpy or dask arrays.
RandomFeatureRidge, RandomFeatureRidgeClassifier
    Streamed kernel ridge regression / classification: one pass over row blocks,
    many alphas and K-fold cross-validation from the same statistics.
load_model, save_model
    Model files of plain data (JSON + .npy), no pickle.
"""

import importlib

from ._version import __version__

# The public names are imported on first use (PEP 562): ``import dkrr`` and the ``dkrr``
# command start without importing dask, distributed, scikit-learn and zarr, so that a
# Ctrl-C at start-up reaches the command's handler and ``dkrr --help`` answers at once.
_LAZY = {
    "DkrrError": ".errors",
    "RandomFeatureRidge": ".estimators",
    "RandomFeatureRidgeClassifier": ".estimators",
    "RandomFeatures": ".estimators",
    "load_model": ".io._model",
    "save_model": ".io._model",
}
_SUBPACKAGES = ("bandwidth", "cli", "cluster", "datasets", "errors", "estimators", "features",
                "io", "linalg", "sampling")


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    if name in _SUBPACKAGES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'dkrr' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBPACKAGES))

__all__ = [
    "DkrrError",
    "RandomFeatureRidge",
    "RandomFeatureRidgeClassifier",
    "RandomFeatures",
    "__version__",
    "load_model",
    "save_model",
]
