"""benchmarks/_common.py: the machine description never hides a broken dkrr."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_machine_info_fails_when_dkrr_does_not_import(tmp_path):
    broken = tmp_path / "dkrr"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('dkrr is broken here')\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2]); "
            "from benchmarks._common import machine_info; print(machine_info()['versions'])")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(ROOT)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode != 0, run.stdout
    assert "dkrr is broken here" in run.stderr


def test_machine_info_names_the_dkrr_version():
    sys.path.insert(0, str(ROOT))
    try:
        import dkrr
        from benchmarks._common import machine_info
    finally:
        sys.path.remove(str(ROOT))
    assert machine_info()["versions"]["dkrr"] == dkrr.__version__
