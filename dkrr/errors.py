"""Exception and warning hierarchy of dkrr.

Errors
------
Every error dkrr raises on purpose derives from :class:`DkrrError`. Refinements also
inherit the built-in exception they specialise, and the errors about the *value* of an
argument (a parameter, the data) are also a ``ValueError``, so that code written against
scikit-learn's conventions keeps working:

* ``ValueError``: :class:`InvalidParameterError`, :class:`InputValidationError` and its
  refinements (non-finite input, chunking, column counts, missing values, an input file
  that does not exist), :class:`SingularSystemError` (also numpy's ``LinAlgError``) and
  :class:`MemoryBudgetError` (parameters that need more memory than there is; also a
  ``MemoryError``).
* not ``ValueError``: what goes wrong around the arguments, in the environment:
  :class:`StoreError` and :class:`ModelFormatError` (``OSError``: a store or model file
  that is unreadable, corrupted or of another layout), the output errors
  (``FileExistsError``, ``PermissionError``), :class:`SchedulerUnreachableError`
  (``ConnectionError``), :class:`DatasetUnavailableError` and
  :class:`ChecksumMismatchError` (``OSError``), :class:`MainGuardError` and
  :class:`SourceChangedError` (``RuntimeError``).

Changed after dkrr 0.1.0: :class:`DkrrError` is no longer a ``ValueError`` itself (before,
every dkrr error was one). Code that caught ``ValueError`` for a store, model-file, output,
dataset or scheduler error catches :class:`DkrrError` (every dkrr error) or the built-in
class named above (``OSError``, ``ConnectionError``, ...) instead; the value errors are
caught by ``except ValueError`` as before. ``dkrr``'s command line reports every
:class:`DkrrError` as before (one line, exit status 1).

Warnings
--------
Every warning dkrr issues on purpose derives from :class:`DkrrWarning` (a
``UserWarning``), so ``warnings.simplefilter("ignore", DkrrWarning)`` or
``pytest.warns(DkrrWarning)`` covers them all. Two also derive from the warning their
libraries use for the same news, so existing filters keep working:
:class:`PcgConvergenceWarning` is scikit-learn's ``ConvergenceWarning`` and
:class:`IllConditionedWarning` is scipy's ``LinAlgWarning``. Those two classes are made on
first use (``from dkrr.errors import PcgConvergenceWarning``), so that importing this
module does not import scikit-learn or scipy.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = [
    "ChecksumMismatchError",
    "ChunkingError",
    "DatasetUnavailableError",
    "DkrrError",
    "DkrrWarning",
    "FeatureMismatchError",
    "FeatureNamesWarning",
    "GridEdgeWarning",
    "HeaderWarning",
    "IllConditionedWarning",
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
    "PcgConvergenceWarning",
    "PrecisionWarning",
    "SchedulerProbeError",
    "SchedulerUnreachableError",
    "SingularAlphaWarning",
    "SingularSystemError",
    "SourceChangedError",
    "StoreError",
    "StoreNotFoundError",
    "WorkerVersionWarning",
]


class DkrrError(Exception):
    """Base class of every error raised by dkrr on purpose (module docstring: which of
    them are also a ``ValueError``)."""

    def __new__(cls, *args, **kwargs):
        # A refinement that also inherits OSError has OSError's memory layout, so it
        # must be created by OSError.__new__: distributed (tblib) unpickles an error
        # sent back by a worker with ``cls.__new__(cls, *args)``, which could otherwise
        # resolve to another base's __new__ and fail ("not safe").
        base = OSError if issubclass(cls, OSError) else Exception
        return base.__new__(cls, *args)


class InvalidParameterError(DkrrError, ValueError):
    """An estimator or function parameter has an invalid value or combination."""


class MainGuardError(DkrrError, RuntimeError):
    """A script starts LocalCluster worker processes from its top-level code, which each
    worker process runs again when it imports the script (fix: ``if __name__ ==
    "__main__":``)."""


class SourceChangedError(DkrrError, RuntimeError):
    """The rows of X differed between two passes of one fit (a Zarr store rewritten, or
    a dask graph whose blocks are not deterministic, while ``solver="pcg"`` read it once
    per iteration, or the refinement of ``precision="auto"`` once per step): the passes
    would mix two data sets, so the fit is stopped."""


class InputValidationError(DkrrError, ValueError):
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
    """A Zarr store is unreadable or does not have the expected layout (an ``OSError``;
    not a ``ValueError`` after dkrr 0.1.0)."""


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
    """A Dask scheduler could not be reached within the timeout (a ``ConnectionError``;
    not a ``ValueError`` after dkrr 0.1.0)."""


class SchedulerProbeError(SchedulerUnreachableError):
    """The peer at a scheduler address is unreachable or is not a Dask scheduler: what
    ``dkrr._scheduler_probe.probe_scheduler`` found (the CLI and :mod:`dkrr.cluster` report
    it inside a :class:`SchedulerUnreachableError` naming the address and the fix)."""


class DatasetUnavailableError(DkrrError, FileNotFoundError):
    """A named dataset is neither in the cache, nor in the mirror, nor downloadable."""


class ChecksumMismatchError(DkrrError, OSError):
    """A downloaded or mirrored data file does not have its recorded sha256."""


class MemoryBudgetError(DkrrError, MemoryError, ValueError):
    """A request needs more memory than a worker or this machine has (refused up front)."""


class DkrrWarning(UserWarning):
    """Base class of every warning dkrr issues on purpose: the fit or the command is done,
    and something about it deserves a look."""


class FeatureNamesWarning(DkrrWarning):
    """X has column names where the estimator was fitted without, or none where it was
    fitted with them (scikit-learn's ``UserWarning`` for the same: the columns are taken
    by position)."""


class GridEdgeWarning(DkrrWarning):
    """A value chosen by cross-validation lies on the edge of its grid (the best value may
    lie beyond it). A warning, not an error: the fit is done."""


class HeaderWarning(DkrrWarning):
    """A CSV's first line may not be what ingest took it for: ``header=True`` made a line
    of numbers the column names, or detection read as data a line of numbers that count
    the columns as pandas names them (``0,1,2,...``), or its first column, without a name
    and starting at 0, looks like the row index pandas writes (``df.to_csv()``), read as
    a feature. A warning, not an error: the store is written; ingest again with the other
    ``header``, or the features named, if it is wrong."""


class SingularAlphaWarning(DkrrWarning):
    """Cross-validation met alphas for which a fold's training system ``G + alpha I`` is
    not positive definite at the rounding of the statistics: they were scored ``inf`` and
    cannot be chosen. A warning, not an error: the fit is done with the best usable alpha."""


class PrecisionWarning(DkrrWarning):
    """The float32 statistics' rounding is large against the regularisation:
    ``precision="auto"`` could not refine their solution to the float64 one (alpha below
    what they resolve, or their factor failed) and recomputed the statistics in float64;
    ``precision="float32"`` kept them and says how large the effect on the coefficients
    may be (``precision_error_``). A warning, not an error: the fit is done."""


class WorkerVersionWarning(DkrrWarning):
    """Workers of the cluster that :func:`dkrr.cluster.connect` reached run another dkrr
    than this client (other sources under the same or another version), or cannot import
    dkrr at all. Tasks run the workers' code: results and errors may not be this dkrr's.
    A warning, not an error: the connection is made."""


def _pcg_convergence_warning():
    from sklearn.exceptions import ConvergenceWarning

    class PcgConvergenceWarning(DkrrWarning, ConvergenceWarning):
        """``solver="pcg"`` stopped at ``max_iter`` before every system reached ``tol``: the
        coefficients (and with ``cv`` the errors of the alphas named) are those of the
        stopped iterate. Also scikit-learn's ``ConvergenceWarning``. A warning, not an
        error: the fit is done."""

    return PcgConvergenceWarning


def _ill_conditioned_warning():
    from scipy.linalg import LinAlgWarning

    class IllConditionedWarning(DkrrWarning, LinAlgWarning):
        """The regularised system ``G + alpha I`` of the Gram path is ill-conditioned: the
        coefficients may be inaccurate (increase alpha). Also scipy's ``LinAlgWarning``.
        A warning, not an error: the fit is done."""

    return IllConditionedWarning


#: warning classes that derive from a dependency's: made on first use (PEP 562)
_LAZY = {"PcgConvergenceWarning": _pcg_convergence_warning, "IllConditionedWarning": _ill_conditioned_warning}
_LAZY_LOCK = threading.Lock()


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _LAZY_LOCK:  # one class per name, whichever thread asks first
        if name not in globals():
            cls = _LAZY[name]()
            cls.__module__, cls.__qualname__ = __name__, name
            globals()[name] = cls
    return globals()[name]
