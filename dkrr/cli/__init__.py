"""The ``dkrr`` command line: ingest, fit, predict, evaluate.

Thin entry points over the library: parsing here, work in :mod:`dkrr.cli._commands`.
"""

from ._main import main

__all__ = ["main"]
