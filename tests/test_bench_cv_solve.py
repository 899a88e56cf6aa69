"""The CV-solve benchmark runs tiny, stamps its validity, and its two kernels (the eigh
baseline it keeps and dkrr's tridiagonal score_fold) give the same fold errors and refuse
the same alphas (its timings are not checked here)."""

from __future__ import annotations

import json

from benchmarks import bench_cv_solve


def test_tiny_run_agrees_with_its_baseline_and_writes_its_report(tmp_path, capsys):
    rows = bench_cv_solve.main(["--sizes", "32", "64", "--repeats", "2", "--allow-load", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert [r["p"] for r in rows] == [32, 64]
    for r in rows:
        assert r["same_refused"] and r["max_rel_mse_diff"] < 1e-9, r
        assert len(r["times_s"]["eigh"]) == len(r["times_s"]["tridiagonal"]) == 2 and r["ratio"] > 0
    assert "Publishable" in out or "NOT FOR PUBLICATION" in out
    report = (tmp_path / "report.txt").read_text()
    # a row per size in each table: the kernels', and the fold solves at once
    assert "command: python -m benchmarks.bench_cv_solve" in report and report.count("\n    32 ") == 2
    stored = json.loads((tmp_path / "results.json").read_text())
    assert stored["validity"]["dkrr_commit"]
    assert [r["p"] for r in stored["schedules"]] == [32, 64]
    assert all(len(r["times_s"]["dkrr"]) == len(r["times_s"]["all_threads"]) == 2 and r["at_once"] == 1
               for r in stored["schedules"])
