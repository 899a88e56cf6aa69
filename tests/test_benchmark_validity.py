"""A benchmark report says whether it may be quoted: quiet at start and end, committed tree.

``benchmarks/_validity.py`` turns the recorded load averages and commit into reasons a
run is not for publication; ``python -m benchmarks`` refuses to start on a busy machine
unless ``--allow-load``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks._validity import LoadTooHighError, check_quiet, publication_problems

ROOT = Path(__file__).resolve().parents[1]
QUIET = [0.1, 0.2, 0.3]


def test_quiet_clean_run_is_publishable():
    assert publication_problems(QUIET, QUIET, "abc1234", cores=2) == []


@pytest.mark.parametrize("when", ["start", "end"])
def test_load_above_the_threshold_at_either_end_is_not_publishable(when):
    busy = [1.4, 0.5, 0.5]
    start, end = (busy, QUIET) if when == "start" else (QUIET, busy)
    (problem,) = publication_problems(start, end, "abc1234", cores=2, max_load_per_core=0.25)
    assert f"1-minute load 1.40 at the {when} is above 0.50" in problem


def test_the_threshold_is_per_core():
    load = [1.4, 0.0, 0.0]
    assert publication_problems(load, load, "abc", cores=8, max_load_per_core=0.25) == []
    assert len(publication_problems(load, load, "abc", cores=4, max_load_per_core=0.25)) == 2


def test_modified_tree_and_unknown_facts_are_not_publishable():
    problems = publication_problems(QUIET, None, "abc1234 (working tree modified)", cores=2)
    assert any("load average at the end unknown" in p for p in problems)
    assert any("working tree modified" in p for p in problems)
    assert any("commit unknown" in p for p in publication_problems(QUIET, QUIET, None, cores=2))


def test_check_quiet_refuses_a_busy_machine_unless_allowed():
    with pytest.raises(LoadTooHighError, match=r"load average is 3.00 on 2 cores.*--allow-load"):
        check_quiet(allow_load=False, cores=2, load=[3.0, 3.0, 3.0])
    assert check_quiet(allow_load=True, cores=2, load=[3.0, 3.0, 3.0]) == [3.0, 3.0, 3.0]
    assert check_quiet(allow_load=False, cores=2, load=QUIET) == QUIET


def test_runner_refuses_to_start_when_the_threshold_cannot_be_met(tmp_path):
    # a negative threshold is exceeded by any load: the runner must refuse before any suite
    out = tmp_path / "r"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--suites", "approx", "--max-load-per-core", "-1",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert "refused" in proc.stderr and "--allow-load" in proc.stderr
    assert not out.exists()
