"""Libraries are imported where they are used, not when dkrr is imported.

``import dkrr`` and ``dkrr --help`` (each command's too) import none of dask,
distributed, numba, scikit-learn, scipy or zarr; the estimators import no numba and no
zarr (numba at the first transform that uses its kernel: tests/test_numba_cache.py, zarr
with a store), and model files need neither. Each case runs in a fresh interpreter and
reads its ``sys.modules``; the times are measured by ``benchmarks/bench_import.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LIBRARIES = ("dask", "distributed", "numba", "sklearn", "scipy", "zarr")


def _imported(code: str) -> list[str]:
    """The libraries of LIBRARIES in ``sys.modules`` after ``code`` ran in a new interpreter."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {LIBRARIES!r} if m in sys.modules]))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_command_help_imports_no_library():
    # every command's help, and the version, in one interpreter
    code = ("import contextlib, io\nfrom dkrr.cli import main\n"
            "for argv in (['--help'], ['ingest', '--help'], ['fit', '--help'], "
            "['predict', '--help'], ['evaluate', '--help'], ['--version']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):\n"
            "        main(argv)\n"
            "    assert out.getvalue().startswith(('usage:', 'dkrr ')), (argv, out.getvalue()[:200])")
    assert _imported(code) == []


def test_estimators_import_no_numba_and_no_zarr():
    got = _imported("from dkrr import RandomFeatureRidge, RandomFeatureRidgeClassifier, RandomFeatures")
    assert "numba" not in got and "zarr" not in got, got
    assert {"dask", "sklearn"} <= set(got)


def test_model_files_import_no_library():
    assert _imported("from dkrr import load_model, save_model") == []


def test_a_store_imports_zarr_and_the_threaded_ingest_no_distributed(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("a,b,t\n1,2,3\n4,5,6\n7,8,9\n")
    code = (f"from dkrr.io import ingest, open_dataset\n"
            f"ingest({str(csv)!r}, {str(tmp_path / 'd.zarr')!r}, target='t')\n"
            f"assert open_dataset({str(tmp_path / 'd.zarr')!r}).X.shape == (3, 2)")
    got = _imported(code)
    assert "zarr" in got and "distributed" not in got, got
