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


def test_every_error_is_a_dkrr_error_listed_in_all():
    defined = {name for name, obj in vars(errors).items()
               if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == "dkrr.errors"}
    assert defined == set(errors.__all__)
    for name in defined:
        if issubclass(getattr(errors, name), Warning):  # warnings are not errors
            continue
        assert issubclass(getattr(errors, name), errors.DkrrError), name
        assert issubclass(getattr(errors, name), ValueError), name


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
