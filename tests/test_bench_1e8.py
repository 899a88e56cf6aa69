"""The 10^8-row benchmark's script at a small size: it writes its store, fits, and reports
each fit's breakdown (the refinement's passes, task seconds by phase against the bare Gram
at the SSYRK rate it measured in the same run). The numbers themselves are not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_small_run_reports_the_breakdown(tmp_path):
    out = tmp_path / "r.txt"
    cmd = [sys.executable, "-m", "benchmarks.bench_1e8", "--n", "40000", "--compare-n", "20000", "--chunk-rows",
           "10000", "--D", "16", "--n-test", "2000", "--store", str(tmp_path / "s.zarr"), "--allow-load",
           "--out", str(out)]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    text = out.read_text()
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["syrk_rate"] > 0 and "baseline: one worker's float32 Z^T Z" in text
    assert [f["n"] for f in data["fits"]] == [20000, 40000]
    for fit in data["fits"]:
        phases = fit["breakdown"]["phases"]
        stats = phases["statistics pass: float32 features and fold Grams"]
        assert stats["tasks"] == fit["n"] // 10000 and stats["compute_s"] > 0
        ref = fit["refinement"]
        assert ref["passes"] == fit["breakdown"]["refine_task_groups"] >= 1
        assert phases["refinement passes: float64 features, Z^T (Z v)"]["tasks"] == ref["passes"] * fit["n"] // 10000
    assert text.count("bare Gram at the measured rate") == 2 and text.count("    refinement: ") == 2
