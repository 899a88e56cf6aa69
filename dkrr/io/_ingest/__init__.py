"""Ingest: CSV, LIBSVM/svmlight and ``.npy`` files streamed into a dkrr Zarr store.

:mod:`._api` checks the options and dispatches to one reader per format (:mod:`._csv`,
:mod:`._libsvm`, :mod:`._npy`), which share the bounded line reader of :mod:`._text`
and the one store writer of :mod:`._writer`; :mod:`._like` reads the layout recorded in
a store so that a test file is read the way its training file was (``like=``).
"""

from ...errors import InputNotFoundError
from ._api import IngestSummary, ingest

__all__ = ["IngestSummary", "InputNotFoundError", "ingest"]
