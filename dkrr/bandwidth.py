"""Data-driven Gaussian bandwidths: the 50-NN rule of thumb and scikit-learn's ``"scale"``.

The Gaussian kernel is ``exp(-gamma ||x - y||^2)``; ``gamma = 1 / (2 sigma^2)`` for a
length scale ``sigma``. Two rules pick it from the data:

- :func:`knn_gamma` (and :func:`knn_sigma`): the rule of thumb of the ORF paper
  (docs/ALGORITHMS.md section 5): sigma is the mean distance to the k-th (50th) nearest
  neighbour over a seeded sample of rows (1,000), neighbours searched within the sample.
  Only the sampled rows are read: on a dask or zarr array, the row blocks that hold no
  sampled row are never loaded.
- :func:`scale_gamma`: scikit-learn's ``SVC(gamma="scale")``, ``1 / (d Var(X))`` with
  the variance over every entry of X (one pass over the data).

Both expect features on comparable scales (standardised columns). The estimators'
``gamma="median"`` and ``gamma="scale"`` (with ``standardize=True``) apply these rules
for you. The implementation lives in :mod:`dkrr.linalg._bandwidth`.
"""

from .linalg._bandwidth import knn_gamma, knn_sigma, scale_gamma

__all__ = ["knn_gamma", "knn_sigma", "scale_gamma"]

# doctest.testmod(dkrr.bandwidth) runs the examples of the re-exported functions
__test__ = {"knn_sigma": knn_sigma, "knn_gamma": knn_gamma, "scale_gamma": scale_gamma}
