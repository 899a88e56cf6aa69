"""numba caches dkrr's compiled kernels in a user cache folder (or ``$NUMBA_CACHE_DIR``),
never in ``__pycache__`` beside dkrr's sources (the checkout of an editable install).

Each case compiles the kernels in a fresh interpreter (about 3 CPU-seconds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

PACKAGE = Path(__file__).resolve().parents[1] / "dkrr"

_CALL_KERNELS = """\
import sys
import numpy as np
from dkrr.features import _hadamard
assert "numba" not in sys.modules  # imported by the first transform that uses it
a = np.ones((2, 8))
_hadamard.fwht(a, backend="numba")
assert a[:, 0].tolist() == [8.0, 8.0] and not a[:, 1:].any()
from dkrr.features import _trig
_trig._kernel64(np.ones((2, 4)), 1.0, np.empty((2, 8)), 1e5)
"""


def _package_caches():
    return {p: p.stat().st_mtime_ns for p in PACKAGE.rglob("__pycache__/*.nb[ic]")}


def _cached_kernels(folder: Path):
    return sorted(p.name.split("-")[0] for p in folder.rglob("*.nbi"))


@pytest.mark.parametrize("user_dir", [False, True], ids=["default", "NUMBA_CACHE_DIR"])
def test_kernels_are_cached_outside_the_package(tmp_path, user_dir):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    if user_dir:
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba")
    before = _package_caches()
    subprocess.run([sys.executable, "-c", _CALL_KERNELS], env=env, check=True, timeout=300)
    expected = ["_hadamard_numba._fwht_numba_kernel", "_trig._kernel64"]
    where = tmp_path / "numba" if user_dir else tmp_path / "xdg" / "dkrr" / "numba"
    assert _cached_kernels(where) == expected
    assert not (tmp_path / "xdg").exists() or not user_dir
    assert _package_caches() == before
