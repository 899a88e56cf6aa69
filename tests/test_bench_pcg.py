"""The PCG benchmark scripts run on a tiny problem, stamp their validity and report the
ratios against baselines of the same run (their numbers are not checked here)."""

from __future__ import annotations

import pytest

from benchmarks import bench_pcg, bench_pcg_error


def test_sweep_and_cv_report_ratios_and_validity(capsys):
    res = bench_pcg.main(["sweep", "--D", "32", "64", "--n", "1500", "--rank", "16", "--allow-load"])
    out = capsys.readouterr().out
    assert "pcg/gram" in out and "crossover at n = 1500" in out
    assert ("Publishable" in out) or ("NOT FOR PUBLICATION" in out)
    row = res["rows"][-1]
    assert row["pcg_over_gram"] == pytest.approx(row["pcg_s"] / row["gram_s"])
    assert row["rel_pred"] < 1e-4 and row["passes"] == row["iterations"] + 1
    assert "dkrr_commit" in res["validity"] and "load_average_at_start" in res["validity"]
    res = bench_pcg.main(["cv", "--D", "32", "--n", "1500", "--cv", "3", "--alphas", "1", "10", "--allow-load"])
    (row,) = res["rows"]
    assert row["same_alpha"] and row["max_rel_fold_mse"] < 1e-4 and row["passes"] == row["iterations"] + 2
    assert row["systems"] == (3 + 1) * 2


def test_cost_model_is_the_formula_of_the_measured_rates():
    res = bench_pcg.main(["cost", "--D", "256", "--n-model", "1e6", "--D-model", "1000", "--workers", "2",
                          "--cores", "2", "--iterations", "5", "--rank", "16", "--graph-blocks", "50",
                          "--allow-load"])
    p, cores = 2000, 4
    assert res["graph_blocks"] == 50 and res["graph_memory_s"] > 0 and res["graph_zarr_s"] > 0
    graph = max(res["graph_memory_s"], res["graph_zarr_s"]) / 50 * 16  # 1e6 rows in 16 blocks of 65,536
    assert res["graph_s_per_pass"] == pytest.approx(graph)
    it = 1e6 * (res["feature_s_per_row_col"] * p + 4.0 * p / res["gemm_flops_per_core"]) / cores + graph
    assert res["iteration_s"] == pytest.approx(it)
    assert res["total_s"] == pytest.approx(res["pass1_s"] + 5 * it)


def test_synthetic_error_script_runs(capsys):
    res = bench_pcg_error.main(["synthetic", "--n", "3000", "--D", "32", "--components", "50", "--rank", "16",
                                "--allow-load"])
    (row,) = res["rows"]
    assert row["gram_error"] == pytest.approx(row["pcg_error"], rel=1e-4)
    assert res["floor"] == pytest.approx(0.01)
    assert "pcg/floor" in capsys.readouterr().out
