"""The kernels benchmark runs tiny on a real data set, stamps its validity and reports every
kernel and method (its numbers are not checked here; docs/ALGORITHMS.md quotes full runs)."""

from __future__ import annotations

import pytest

from benchmarks import bench_kernels


@pytest.mark.slow
def test_tiny_run_covers_every_kernel_and_method(tmp_path, capsys):
    from dkrr.datasets import load_dataset
    from dkrr.errors import DatasetUnavailableError
    from dkrr.features._registry import kernel_methods

    try:
        load_dataset("kin8nm", download=False)
    except DatasetUnavailableError as exc:
        pytest.skip(f"kin8nm is not available offline: {exc}")
    res = bench_kernels.main(["--tiny", "--allow-load", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    for label, kernel, _ in bench_kernels.APPROX_KERNELS:
        got = {r["method"] for r in res["approx"] if r["kernel"] == label}
        assert got == set(kernel_methods(kernel)) - {"nystroem"}, label
    assert {r["kernel"] for r in res["heldout"]} == {"gaussian", "matern 1.5", "matern 2.5", "laplacian",
                                                     "matern 1.5 ARD"}
    assert all(r["rmse"] > 0 and r["krr_rmse"] > 0 for r in res["heldout"])
    assert "best at equal width" in out and ("Publishable" in out or "NOT FOR PUBLICATION" in out)
    assert (tmp_path / "report.txt").exists() and (tmp_path / "results.json").exists()
