"""The row-loop benchmark runs tiny, stamps its validity, and each loop gives the products of
the baseline it is timed against (its timings are not checked here)."""

from __future__ import annotations

import json

from benchmarks import bench_row_loops
from dkrr.linalg._precision import CROSS_ROWS_MAX_TARGETS
from dkrr.linalg._refine import REFINE_ROWS_MAX_COLUMNS


def test_tiny_run_agrees_with_its_baselines_and_writes_its_report(tmp_path, capsys):
    res = bench_row_loops.main(["--sizes", "32", "64", "--targets", "1", str(CROSS_ROWS_MAX_TARGETS + 1),
                                "--cross-rows", "300", "--rows", "500", "--repeats", "2", "--allow-load",
                                "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert [(r["p"], r["targets"], r["loop_used"]) for r in res["cross"]] == [
        (32, 1, True), (32, CROSS_ROWS_MAX_TARGETS + 1, False), (64, 1, True), (64, CROSS_ROWS_MAX_TARGETS + 1, False)]
    assert [(r["p"], r["pass"]) for r in res["refine"]] == [(32, "first"), (32, "CG"), (64, "first"), (64, "CG")]
    for r in res["cross"] + res["refine"]:
        assert r["max_rel_diff"] < 1e-12 and r["ratio"] > 0, r
        assert all(len(v) == 2 for v in r["times_s"].values())
    # the baselines were switched back on for the rest of the process
    from dkrr.linalg import _precision, _refine
    assert (_precision.CROSS_ROWS_MAX_TARGETS, _refine.REFINE_ROWS_MAX_COLUMNS) == (
        CROSS_ROWS_MAX_TARGETS, REFINE_ROWS_MAX_COLUMNS)
    assert "Publishable" in out or "NOT FOR PUBLICATION" in out
    report = (tmp_path / "report.txt").read_text()
    assert "command: python -m benchmarks.bench_row_loops" in report and report.count("\n    32 ") == 4
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored["validity"]["dkrr_commit"] and len(stored["cross"]) == len(stored["refine"]) == 4
