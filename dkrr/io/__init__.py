"""Out-of-core input and output: ingest files into Zarr, open stores, write results.

The Zarr layout of a dkrr dataset is documented in :mod:`dkrr.io._store`.
"""

import importlib

# The public names are imported on first use (PEP 562), as in ``dkrr/__init__.py``: a
# submodule that needs no Zarr (model files: ``dkrr.io._model``) imports without zarr.
_LAZY = {
    "LAYOUT_VERSION": "._store",
    "IngestSummary": "._ingest",
    "InputNotFoundError": "._ingest",
    "ZarrDataset": "._store",
    "atomic_output": "._atomic",
    "ingest": "._ingest",
    "open_dataset": "._store",
    "write_dataset": "._store",
    "write_predictions": "._store",
}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dkrr.io' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


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
