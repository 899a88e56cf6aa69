"""Exception hierarchy of dkrr.

Every error dkrr raises on purpose derives from :class:`DkrrError`, which is a
``ValueError`` so that code written against scikit-learn conventions keeps working.
Refinements also inherit the built-in exception they specialise.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "ChecksumMismatchError",
    "ChunkingError",
    "DatasetUnavailableError",
    "DkrrError",
    "FeatureMismatchError",
    "GridEdgeWarning",
    "InputNotFoundError",
    "InputTypeError",
    "InputValidationError",
    "InvalidParameterError",
    "MainGuardError",
    "MemoryBudgetError",
    "MissingValueError",
    "ModelFormatError",
    "NonFiniteInputError",
    "ObjectStoreError",
    "OutputBusyError",
    "OutputExistsError",
    "OutputNotWritableError",
    "PrecisionWarning",
    "SchedulerProbeError",
    "SchedulerUnreachableError",
    "SingularAlphaWarning",
    "SingularSystemError",
    "StoreError",
    "StoreNotFoundError",
]


class DkrrError(ValueError):
    """Base class of every error raised by dkrr on purpose."""

    def __new__(cls, *args, **kwargs):
        # A refinement that also inherits OSError has OSError's memory layout, so it
        # must be created by OSError.__new__: distributed (tblib) unpickles an error
        # sent back by a worker with ``cls.__new__(cls, *args)``, which would otherwise
        # resolve to ValueError.__new__ and fail ("not safe").
        base = OSError if issubclass(cls, OSError) else ValueError
        return base.__new__(cls, *args)


class InvalidParameterError(DkrrError):
    """An estimator or function parameter has an invalid value or combination."""


class MainGuardError(DkrrError, RuntimeError):
    """A script starts LocalCluster worker processes from its top-level code, which each
    worker process runs again when it imports the script (fix: ``if __name__ ==
    "__main__":``)."""


class InputValidationError(DkrrError):
    """Input data has the wrong type, shape, dtype or layout."""


class InputTypeError(InputValidationError, TypeError):
    """Input data holds values that are not numbers (e.g. a dict in an object array).

    Also a ``TypeError``, as the error numpy and scikit-learn raise for the same input.
    """


class NonFiniteInputError(InputValidationError):
    """Input data contains NaN or infinite values."""


class ChunkingError(InputValidationError):
    """A dask array is chunked in a way dkrr cannot stream (for example along columns)."""


class FeatureMismatchError(InputValidationError):
    """The number of input columns differs from the one seen at fit time."""


class InputNotFoundError(InputValidationError, FileNotFoundError):
    """A file to read (for example the input of :func:`dkrr.io.ingest`) does not exist."""


class MissingValueError(InputValidationError):
    """Input cells are empty or marked missing (``NA``, ``?``) where a value is needed."""


class SingularSystemError(DkrrError, np.linalg.LinAlgError, ArithmeticError):
    """The regularised normal equations are singular or not finite.

    Also a ``numpy.linalg.LinAlgError``, so code that catches numpy's or scipy's
    linear-algebra failures catches it too.
    """


class StoreError(DkrrError, OSError):
    """A Zarr store is unreadable or does not have the expected layout."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """A Zarr store (or an array inside it) does not exist."""


class ObjectStoreError(DkrrError, OSError):
    """An object store (an fsspec URL such as ``s3://bucket/key``) failed a request: it
    cannot be reached, refuses the credentials, has no such bucket, or broke off a read or
    a write. The message names the URL and the cause."""


class ModelFormatError(DkrrError, OSError):
    """A saved model directory is missing, corrupted or from an incompatible version."""


class OutputExistsError(DkrrError, FileExistsError):
    """An output path exists already and overwriting was not requested."""


class OutputBusyError(OutputExistsError):
    """Another process is writing the same output right now (it holds the output's
    lock); this run is refused instead of both reporting success over one result."""


class OutputNotWritableError(DkrrError, PermissionError):
    """An output cannot be created where it was asked for (a path through a file, a
    read-only or full location); refused before any work is done."""


class SchedulerUnreachableError(DkrrError, ConnectionError):
    """A Dask scheduler could not be reached within the timeout."""


class SchedulerProbeError(SchedulerUnreachableError):
    """The peer at a scheduler address is unreachable or is not a Dask scheduler: what
    ``dkrr._scheduler_probe.probe_scheduler`` found (the CLI and :mod:`dkrr.cluster` report
    it inside a :class:`SchedulerUnreachableError` naming the address and the fix)."""


class DatasetUnavailableError(DkrrError, FileNotFoundError):
    """A named dataset is neither in the cache, nor in the mirror, nor downloadable."""


class ChecksumMismatchError(DkrrError, OSError):
    """A downloaded or mirrored data file does not have its recorded sha256."""


class MemoryBudgetError(DkrrError, MemoryError):
    """A request needs more memory than a worker or this machine has (refused up front)."""


class GridEdgeWarning(UserWarning):
    """A value chosen by cross-validation lies on the edge of its grid (the best value may
    lie beyond it). A warning, not an error: the fit is done."""


class SingularAlphaWarning(UserWarning):
    """Cross-validation met alphas for which a fold's training system ``G + alpha I`` is
    not positive definite at the rounding of the statistics: they were scored ``inf`` and
    cannot be chosen. A warning, not an error: the fit is done with the best usable alpha."""


class PrecisionWarning(UserWarning):
    """The float32 statistics' rounding may be large against the regularisation:
    ``precision="auto"`` then recomputed them in float64, ``precision="float32"`` kept
    them and says how large the effect on the coefficients may be (``precision_error_``).
    A warning, not an error: the fit is done."""
