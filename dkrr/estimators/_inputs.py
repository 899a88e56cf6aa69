"""Small input helpers of the ridge estimators: refusing sparse input, materializing results."""

from __future__ import annotations

import numpy as np

from .._validation import is_dask
from ..errors import InputValidationError

__all__ = ["_materialize", "_refuse_sparse"]


def _refuse_sparse(*arrays):
    import scipy.sparse

    for a in arrays:
        if scipy.sparse.issparse(a):
            raise InputValidationError(
                "sparse input is not supported: random features are dense. Convert with "
                "X.toarray() (or stream dense row blocks from a dask/zarr array)."
            )


def _materialize(a):
    """numpy version of a numpy/dask/zarr array (computes dask input)."""
    if is_dask(a):
        from .._progress import compute_limited

        return np.asarray(compute_limited(a, label="computing")[0])
    return np.asarray(a)
