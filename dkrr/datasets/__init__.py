"""Real datasets: the two shipped with dkrr, and loaders for the public ones the
pipelines and benchmarks use.

``load_casp`` and ``load_magic04`` read the copies in ``dkrr/data`` (no download).
:func:`load_dataset` finds any registered dataset in this order: the cache directory
(``$DKRR_DATA``, default ``~/.cache/dkrr``), an offline mirror folder
(``$DKRR_DATA_MIRROR``, laid out as ``<folder>/<file>``), then a download from a fixed
public URL. Every file is checked against its recorded sha256 before it is used.
"""

from ._fetch import data_home, fetch_file, file_sha256, mirror_dir
from ._loaders import load_dataset
from ._registry import DATASETS, Dataset, RemoteFile
from ._shipped import data_path, load_casp, load_magic04

__all__ = [
    "DATASETS",
    "Dataset",
    "RemoteFile",
    "data_home",
    "data_path",
    "fetch_file",
    "file_sha256",
    "load_casp",
    "load_dataset",
    "load_magic04",
    "mirror_dir",
]
