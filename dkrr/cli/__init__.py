"""The ``dkrr`` command line: ingest, fit, predict, evaluate.

Thin entry points over the library: options in :mod:`dkrr.cli._options`, work in
:mod:`dkrr.cli._commands`, dispatch in :mod:`dkrr.cli._main`.
"""

from ._main import main

__all__ = ["main"]
