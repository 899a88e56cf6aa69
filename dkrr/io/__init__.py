"""Out-of-core input and output: ingest files into Zarr, open stores, write results.

The Zarr layout of a dkrr dataset is documented in :mod:`dkrr.io._store`.
"""

from ._atomic import atomic_output
from ._ingest import IngestSummary, InputNotFoundError, ingest
from ._store import (
    LAYOUT_VERSION,
    ZarrDataset,
    open_dataset,
    write_dataset,
    write_predictions,
)

__all__ = [
    "LAYOUT_VERSION",
    "IngestSummary",
    "InputNotFoundError",
    "ZarrDataset",
    "atomic_output",
    "ingest",
    "open_dataset",
    "write_dataset",
    "write_predictions",
]
