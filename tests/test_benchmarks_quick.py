"""The benchmark runner's quick mode completes and writes a well-formed report.

Runs ``python -m benchmarks --quick --repeats 1`` once in a subprocess with a temporary
``--out`` (about a minute on 2 cores) and checks the structure of what it wrote --
results.json parses, has every suite with status "ok" and the fields the report is built
from; report.md has every section; the approximation plot is a PNG. The measured numbers
are not asserted (they depend on the machine and its load).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("peers", "roofline", "scaling", "approx")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "quick"
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--repeats", "1", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    return proc, out


def test_quick_run_exits_cleanly(quick_run):
    proc, out = quick_run
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}"
    assert (out / "results.json").is_file()
    assert (out / "report.md").is_file()


def test_results_json_has_every_suite(quick_run):
    _, out = quick_run
    res = json.loads((out / "results.json").read_text())
    meta = res["meta"]
    assert meta["quick"] is True and meta["repeats"] == 1
    assert meta["command"].startswith("python -m benchmarks") and "--quick" in meta["command"]
    assert meta["machine"]["cores_available"] >= 1 and meta["machine"]["cpu_model"]
    assert isinstance(meta["machine"]["blas"], list)
    assert set(res["suites"]) == set(SUITES)
    for name in SUITES:
        suite = res["suites"][name]
        assert suite["status"] == "ok", suite.get("error")
        assert suite["duration_s"] > 0
    peers = res["suites"]["peers"]["result"]
    assert peers["datasets"] and peers["synthetic"]
    for d in peers["datasets"] + peers["synthetic"]:
        assert "error" not in d, d.get("error")
        assert d["records"], d["dataset"]
        for r in d["records"]:
            assert {"method", "width", "fit_s", "predict_s", "error", "peak_traced_bytes"} <= set(r)
            assert r["fit_s"]["median"] is not None and r["fit_s"]["min"] <= r["fit_s"]["median"] <= r["fit_s"]["max"]
    roof = res["suites"]["roofline"]["result"]
    assert roof["gram"]["bare_ZtZ_gflops"] > 0 and roof["fwht"]["copy"]["GBps"] > 0
    scaling = res["suites"]["scaling"]["result"]
    if "status" not in scaling:  # the estimator is present: three sizes a factor of 4 apart
        ns = [r["n"] for r in scaling["vs_n"]]
        assert len(ns) >= 3 and all(b == 4 * a for a, b in zip(ns, ns[1:]))
        assert all("fit_s" in r for r in scaling["vs_n"]), scaling["vs_n"]
    approx = res["suites"]["approx"]["result"]
    import dkrr.features

    assert set(approx["projections"]) == set(dkrr.features.PROJECTIONS)
    assert set(approx["projections"]) <= set(approx["methods"])
    for d in approx["datasets"]:
        assert "error" not in d, d.get("error")
        for m in approx["methods"]:
            assert len(d["mse"][m]) == len(d["D"])


def test_report_md_has_every_section(quick_run):
    _, out = quick_run
    text = (out / "report.md").read_text()
    assert text.startswith("# dkrr benchmark report")
    assert "Command: `python -m benchmarks" in text
    assert "BLAS (threadpoolctl)" in text
    for name in SUITES:
        assert f"(`{name}`)" in text, name
    assert "![kernel approximation MSE](approx_mse.png)" in text


def test_approx_plot_is_a_png(quick_run):
    _, out = quick_run
    data = (out / "approx_mse.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
