"""A benchmark report says whether it may be quoted: quiet at start and end, committed tree.

``benchmarks/_validity.py`` turns the recorded load averages and commit into reasons a
run is not for publication; ``python -m benchmarks`` refuses to start on a busy machine
unless ``--allow-load``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks._validity import LoadTooHighError, check_quiet, cpu_snapshot, other_cores_busy, publication_problems

ROOT = Path(__file__).resolve().parents[1]
QUIET = [0.1, 0.2, 0.3]


def test_quiet_clean_run_is_publishable():
    assert publication_problems(QUIET, 0.05, "abc1234", cores=2) == []


def test_busy_start_or_busy_others_during_the_run_are_not_publishable():
    (problem,) = publication_problems([1.4, 0.5, 0.5], 0.0, "abc1234", cores=2, max_load_per_core=0.25)
    assert "1-minute load 1.40 at the start is above 0.50" in problem
    (problem,) = publication_problems(QUIET, 0.8, "abc1234", cores=2, max_load_per_core=0.25)
    assert "other processes kept 0.80 cores busy on average during the run, above 0.50" in problem


def test_the_threshold_is_per_core():
    assert publication_problems([1.4, 0, 0], 1.4, "abc", cores=8, max_load_per_core=0.25) == []
    assert len(publication_problems([1.4, 0, 0], 1.4, "abc", cores=4, max_load_per_core=0.25)) == 2


def test_modified_tree_and_unknown_facts_are_not_publishable():
    problems = publication_problems(None, None, "abc1234 (working tree modified)", cores=2)
    assert any("load average at the start unknown" in p for p in problems)
    assert any("CPU time of other processes during the run unknown" in p for p in problems)
    assert any("working tree modified" in p for p in problems)
    assert any("commit unknown" in p for p in publication_problems(QUIET, 0.0, None, cores=2))


def test_other_cores_busy_is_machine_time_minus_own_time_over_wall_time():
    start = {"wall": 10.0, "machine": 100.0, "own": 5.0}
    end = {"wall": 12.0, "machine": 104.0, "own": 7.0}  # 4 s busy, 2 s of it ours, over 2 s
    assert other_cores_busy(start, end) == 1.0
    assert other_cores_busy(start, {**end, "machine": None}) is None


def test_own_work_counts_as_ours_and_a_neighbour_as_other_work():
    """CPU time this process spends is ours; a process outside it (not a reaped child) is
    other work: the machine's busy time minus ours covers at least that process's CPU time."""
    import time

    from benchmarks._validity import _own_seconds

    own0, t0 = _own_seconds(), time.process_time()
    while time.process_time() - t0 < 0.5:
        pass
    assert _own_seconds() - own0 >= 0.45

    start = cpu_snapshot()
    # the spinner burns 0.5 s of CPU time (not of wall time: on a loaded machine it gets the
    # CPU it asks for, later); it is waited for as a zombie, whose CPU time is still readable
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nwhile time.process_time() < 0.5: pass"],
                               start_new_session=True)
    deadline = time.monotonic() + 60
    while True:
        with open(f"/proc/{spinner.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        if fields[0] == "Z" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    spinner_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    end = cpu_snapshot()
    spinner.wait()
    others = (end["machine"] - start["machine"]) - (end["own"] - start["own"])
    assert spinner_cpu > 0.2 and others >= spinner_cpu - 0.05, (others, spinner_cpu)


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


def test_a_scripts_validity_records_the_machine():
    """script_start measures the machine the run's ratios belong to: CPU model, cores,
    caches and numpy's GEMM rate in both precisions (positive, float32 the faster)."""
    import argparse

    from benchmarks._validity import add_load_arguments, gemm_gflops, machine_facts, script_end, script_start

    facts = machine_facts()
    assert facts["cores"] >= 1 and facts["last_level_cache_bytes"] > 0
    assert set(facts["gemm_gflops"]) == {"float64", "float32"} and min(facts["gemm_gflops"].values()) > 0
    assert gemm_gflops("float32", n=2048, p=512) > 0
    ap = argparse.ArgumentParser()
    add_load_arguments(ap)
    start = script_start(ap.parse_args(["--allow-load"]))
    assert start["machine"]["cores"] == facts["cores"] and start["machine"]["cpu"] == facts["cpu"]
    assert script_end(start)["machine"] == start["machine"]
