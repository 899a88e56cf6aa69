"""dkrr.errors: one module holds every exception class dkrr defines.

Control flow that never reaches a user (the CLI's SIGTERM `_Terminated`, a
KeyboardInterrupt) is not an Exception and stays where it is used.
"""

import importlib
import pickle
import pkgutil

import numpy as np
import pytest

import dkrr
from dkrr import errors


def _dkrr_modules():
    for info in pkgutil.walk_packages(dkrr.__path__, "dkrr."):
        if info.name.endswith("__main__"):  # running it is the CLI
            continue
        yield importlib.import_module(info.name)


def test_every_exception_class_of_dkrr_is_defined_in_dkrr_errors():
    stray = set()
    seen = 0
    for module in _dkrr_modules():
        seen += 1
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__.startswith("dkrr"):
                if obj.__module__ != "dkrr.errors":
                    stray.add(f"{obj.__module__}.{obj.__qualname__}")
    assert seen > 30  # the walk reached the subpackages
    assert not stray, f"define these in dkrr/errors.py (import them where they were): {sorted(stray)}"


#: the errors about the value of an argument (a parameter, the data): also ValueError
VALUE_ERRORS = {
    "InvalidParameterError", "InputValidationError", "InputTypeError", "NonFiniteInputError", "ChunkingError",
    "FeatureMismatchError", "InputNotFoundError", "MissingValueError", "SingularSystemError", "MemoryBudgetError",
}


def _defined():
    for name in errors.__all__:  # the warnings made on first use exist once asked for
        getattr(errors, name)
    return {name for name, obj in vars(errors).items()
            if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == "dkrr.errors"}


def test_every_error_is_a_dkrr_error_listed_in_all():
    defined = _defined()
    assert defined == set(errors.__all__)
    for name in defined:
        cls = getattr(errors, name)
        if issubclass(cls, Warning):  # warnings are not errors
            assert issubclass(cls, errors.DkrrWarning) and issubclass(cls, UserWarning), name
            assert not issubclass(cls, errors.DkrrError), name
            continue
        assert issubclass(cls, errors.DkrrError), name
        assert issubclass(cls, ValueError) == (name in VALUE_ERRORS), name


def test_environment_errors_are_not_value_errors():
    """A store, model file, output, dataset or scheduler failing is not a bad value: an
    ``except ValueError`` meant for bad arguments does not swallow it."""
    for cls, builtin in [(errors.StoreError, OSError), (errors.StoreNotFoundError, FileNotFoundError),
                         (errors.ModelFormatError, OSError), (errors.OutputExistsError, FileExistsError),
                         (errors.OutputNotWritableError, PermissionError),
                         (errors.SchedulerUnreachableError, ConnectionError),
                         (errors.DatasetUnavailableError, FileNotFoundError),
                         (errors.ChecksumMismatchError, OSError), (errors.MainGuardError, RuntimeError),
                         (errors.SourceChangedError, RuntimeError)]:
        assert issubclass(cls, builtin) and issubclass(cls, errors.DkrrError) and not issubclass(cls, ValueError)
    with pytest.raises(errors.StoreError):
        try:
            raise errors.StoreError("unreadable")
        except ValueError:  # pragma: no cover - the point: not taken
            pytest.fail("a StoreError was caught as a ValueError")


def test_errors_survive_the_trip_from_a_worker():
    """distributed (tblib) rebuilds an error with ``cls.__new__(cls, *args)``: every class
    must accept that and pickle to itself."""
    for name in errors.__all__:
        cls = getattr(errors, name)
        exc = cls.__new__(cls, "message")
        exc.__init__("message")
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is cls and str(back) == "message", name


def test_every_dkrr_warning_is_a_dkrr_warning():
    """Every ``warnings.warn`` in dkrr's source issues a class of dkrr.errors (hence a
    DkrrWarning), except scikit-learn's DataConversionWarning for a column-vector y, which
    the classifier issues exactly as scikit-learn does."""
    import ast
    from pathlib import Path

    allowed = {n for n in errors.__all__ if n.endswith("Warning")} | {"DataConversionWarning"}
    found = []
    for path in sorted(Path(dkrr.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "warn"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "warnings"):
                continue
            args = list(node.args[1:2]) + [k.value for k in node.keywords if k.arg == "category"]
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Call):  # warnings.warn(SomeWarning("..."))
                args.append(first.func)
            names = [a.id if isinstance(a, ast.Name) else getattr(a, "attr", None) for a in args]
            found.append((f"{path.name}:{node.lineno}", names))
    assert len(found) >= 6  # the walk saw dkrr's warnings
    bad = [(where, names) for where, names in found if len(names) != 1 or names[0] not in allowed]
    assert not bad, f"issue a DkrrWarning subclass from dkrr.errors: {bad}"


def test_warnings_keep_the_classes_of_their_libraries():
    from scipy.linalg import LinAlgWarning
    from sklearn.exceptions import ConvergenceWarning

    assert issubclass(errors.PcgConvergenceWarning, ConvergenceWarning)
    assert issubclass(errors.IllConditionedWarning, LinAlgWarning)
    w = pickle.loads(pickle.dumps(errors.PcgConvergenceWarning("not converged")))
    assert type(w) is errors.PcgConvergenceWarning
    with pytest.warns(errors.DkrrWarning, match="condition number"):
        from dkrr.linalg._solve import solve_cholesky

        solve_cholesky(np.diag([1.0, 1e-15]), np.ones((2, 1)), 0.0)


def test_importing_the_errors_imports_neither_sklearn_nor_scipy():
    import subprocess
    import sys

    code = "import sys, dkrr.errors; print('sklearn' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_all_is_sorted():
    assert errors.__all__ == sorted(errors.__all__)


def test_singular_system_error_is_a_numpy_linalg_error():
    assert issubclass(errors.SingularSystemError, np.linalg.LinAlgError)
    assert issubclass(errors.SingularSystemError, ArithmeticError)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        from dkrr.linalg._solve import solve_cholesky

        solve_cholesky(np.zeros((3, 3)), np.ones((3, 1)), 0.0)


def test_scheduler_probe_error_is_importable_from_its_old_place_and_pickles():
    from dkrr._scheduler_probe import ProbeError

    assert ProbeError is errors.SchedulerProbeError
    assert issubclass(ProbeError, errors.SchedulerUnreachableError)
    assert issubclass(ProbeError, ConnectionError)
    exc = pickle.loads(pickle.dumps(ProbeError("not a Dask scheduler")))
    assert type(exc) is ProbeError and str(exc) == "not a Dask scheduler"
