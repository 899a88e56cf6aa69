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

from .errors import DkrrError
from .estimators import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures
from .io._model import load_model, save_model

from ._version import __version__

__all__ = [
    "DkrrError",
    "RandomFeatureRidge",
    "RandomFeatureRidgeClassifier",
    "RandomFeatures",
    "__version__",
    "load_model",
    "save_model",
]
