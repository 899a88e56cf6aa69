"""Ingest: CSV, LIBSVM/svmlight, ``.npy`` and Parquet inputs streamed into a dkrr Zarr store.

:mod:`._api` checks the options and dispatches to one reader per format (:mod:`._csv`
with :mod:`._csvblock`, pyarrow's CSV reader; :mod:`._parquet`; :mod:`._libsvm`;
:mod:`._npy`), which share the bounded readers of :mod:`._text` and the one store
writer of :mod:`._writer`. CSV and Parquet make blocks of numbers that
:mod:`._table` writes as whole chunks, in segments converted in parallel by
:mod:`._segments`; :mod:`._like` reads the layout recorded in a store so that a test
file is read the way its training file was (``like=``).
"""

from ...errors import InputNotFoundError
from ._api import IngestSummary, ingest

__all__ = ["IngestSummary", "InputNotFoundError", "ingest"]
