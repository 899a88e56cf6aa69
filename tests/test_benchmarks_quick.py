"""The benchmark runner's quick mode measures every dkrr method and writes a well-formed report.

Runs ``python -m benchmarks --quick --repeats 1`` once in a subprocess with a temporary
``--out`` (about a minute on 2 cores) and checks what it wrote: results.json has every
suite with status "ok", **every dkrr method produced a number** on every data set and
width (a dkrr method that is missing or errors fails the test; only peers such as
scikit-learn-extra may be recorded as "not available"), report.md has every section and
the approximation plot is a PNG. The measured numbers themselves are not asserted (they
depend on the machine and its load).

Real data: the benchmarks read the real data sets through ``dkrr.datasets`` (cache, then
the offline mirror: ``$DKRR_DATA_MIRROR``, else ``../shared/data`` beside the checkout, as
in CI). The test never downloads (``DKRR_BENCH_DOWNLOAD=0``): on a clone without the data
the real-data entries must fail with ``DatasetUnavailableError`` and nothing else, every
other check still runs, and the real-data checks are skipped with a reason saying how to
provide the data.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import suite_approx, suite_peers, suite_speed
from benchmarks._common import Config, check_dkrr_methods, make_dkrr_ridge
from benchmarks._data import REAL_DATASETS, load_raw, real_data_missing

ROOT = Path(__file__).resolve().parents[1]
SUITES = ("peers", "roofline", "scaling", "approx", "speed")
_QUICK = Config(quick=True, repeats=1, out=Path("."))
PEERS_REAL = suite_peers.settings(_QUICK)["real"]
APPROX_REAL = suite_approx.settings(_QUICK)["datasets"]
SPEED_REAL = suite_speed.settings(_QUICK)["datasets"]
MISSING = real_data_missing(sorted(set(PEERS_REAL) | set(APPROX_REAL) | set(SPEED_REAL)))  # no download
needs_real_data = pytest.mark.skipif(bool(MISSING), reason=(
    f"real data sets {sorted(MISSING)} are neither in the dkrr.datasets cache nor in an offline "
    "mirror: set DKRR_DATA_MIRROR (or DKRR_SHARED_DATA) to a folder holding the project's data "
    "copies as <name>/<file>, or download them once with "
    "`python -c \"from dkrr.datasets import load_dataset as f; [f(n) for n in "
    f"{sorted(MISSING)}]\"`"
))


def _env(**extra):
    return dict(os.environ, MPLBACKEND="Agg", DKRR_BENCH_DOWNLOAD="0", **extra)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "quick"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--repeats", "1", "--allow-load", "--out", str(out)],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=900,
    )
    return proc, out


@pytest.fixture(scope="module")
def results(quick_run):
    _, out = quick_run
    return json.loads((out / "results.json").read_text())


def _number(stat) -> bool:
    return stat is not None and stat.get("median") is not None and math.isfinite(stat["median"])


def _real_entries(entries, names):
    """The entries of real data sets that are present; the missing ones must say why."""
    present = []
    for name in names:
        (d,) = [e for e in entries if e["dataset"] == name]
        if name in MISSING:
            assert "DatasetUnavailableError" in d.get("error", ""), d
        else:
            present.append(d)
    return present


@pytest.mark.slow
def test_quick_run_exits_cleanly(quick_run):
    proc, out = quick_run
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-5000:]}"
    assert (out / "results.json").is_file()
    assert (out / "report.md").is_file()


@pytest.mark.slow
def test_results_json_has_every_suite(results):
    meta = results["meta"]
    assert meta["quick"] is True and meta["repeats"] == 1
    assert meta["command"].startswith("python -m benchmarks") and "--quick" in meta["command"]
    assert meta["machine"]["cores_available"] >= 1 and meta["machine"]["cpu_model"]
    assert isinstance(meta["machine"]["blas"], list)
    assert set(results["suites"]) == set(SUITES)
    for name in SUITES:
        suite = results["suites"][name]
        assert suite["status"] == "ok", suite.get("error")
        assert suite["duration_s"] > 0
    validity = meta["validity"]  # a test run shares the cores: its report must say what it is
    assert set(validity) >= {"publishable", "problems", "other_cores_busy", "max_load_per_core"}
    assert validity["publishable"] is (not validity["problems"])
    roof = results["suites"]["roofline"]["result"]
    assert roof["gram"]["bare_ZtZ_gflops"] > 0 and roof["fwht"]["copy"]["GBps"] > 0
    scaling = results["suites"]["scaling"]["result"]
    ns = [r["n"] for r in scaling["vs_n"]]  # three sizes a factor of 4 apart
    assert len(ns) >= 3 and all(b == 4 * a for a, b in zip(ns, ns[1:]))


@pytest.mark.slow
def test_every_dkrr_method_produced_a_number_in_peers(results):
    peers = results["suites"]["peers"]["result"]
    av, st = peers["availability"], peers["settings"]
    assert av["dkrr_ridge"] == "available"
    assert av["dkrr_methods_regression"] == suite_peers.DKRR_METHODS
    assert av["dkrr_methods_classification"] == suite_peers.DKRR_METHODS
    checked = [(d, st["synthetic_widths"]) for d in peers["synthetic"]]
    checked += [(d, st["widths"]) for d in _real_entries(peers["datasets"], PEERS_REAL)]
    assert len(peers["synthetic"]) == len(st["synthetic_n"])
    for d, widths in checked:
        assert "error" not in d, d.get("error")
        assert not [k for k in d["failures"] if k.startswith("dkrr")], d["failures"]
        for m in suite_peers.DKRR_METHODS:
            for w in widths:
                (r,) = [r for r in d["records"] if r["method"] == f"dkrr {m}" and r["width"] == w]
                assert _number(r["error"]) and _number(r["fit_s"]) and _number(r["predict_s"]), r
                assert r["fit_s"]["min"] <= r["fit_s"]["median"] <= r["fit_s"]["max"]
                assert r["peak_traced_bytes"] > 0
            assert "error" not in d["profile"][f"dkrr {m}"], d["profile"][f"dkrr {m}"]
        for r in d["records"]:
            assert {"method", "width", "fit_s", "predict_s", "error", "peak_traced_bytes"} <= set(r)


@pytest.mark.slow
def test_every_dkrr_fit_produced_a_number_in_roofline_and_scaling(results):
    fits = results["suites"]["roofline"]["result"]["gram"]["dkrr_fit"]
    assert set(fits) == {"numpy input", "dask input (8 row chunks)"}
    for label, f in fits.items():
        assert _number(f.get("fit_s")) and f["gflops_2np2"] > 0, (label, f)
    scaling = results["suites"]["scaling"]["result"]
    assert "status" not in scaling
    for r in scaling["vs_n"] + scaling["vs_D"]:
        assert "error" not in r and _number(r["fit_s"]) and r["peak_traced_bytes"] > 0, r


@pytest.mark.slow
def test_every_dkrr_method_produced_a_number_in_approx(results):
    import dkrr.features

    approx = results["suites"]["approx"]["result"]
    assert set(approx["projections"]) == set(dkrr.features.PROJECTIONS)
    assert approx["methods"] == sorted(dkrr.features.PROJECTIONS) + ["nystroem"]
    for d in _real_entries(approx["datasets"], APPROX_REAL):
        assert "error" not in d and not d["failures"], d.get("error") or d["failures"]
        for m in approx["methods"]:
            assert len(d["mse"][m]) == len(d["D"])
            ok = [_number(s) for s in d["mse"][m]]
            # Nystroem needs 2D landmarks from the pool of the other rows (skips larger D)
            assert all(ok) if m != "nystroem" else ok[0], (d["dataset"], m, d["mse"][m])


@pytest.mark.slow
def test_every_part_of_speed_produced_numbers(results):
    speed = results["suites"]["speed"]["result"]
    st = speed["settings"]
    assert [r["n"] for r in speed["precision"]] == st["sizes"]
    for r in speed["precision"]:
        assert _number(r["float64"]) and _number(r["float32"]) and _number(r["ratio"]), r
        assert 0 < r["coef_rel_change"]["median"] <= r["precision_error"]["median"], r
    for d in _real_entries(speed["peers"], SPEED_REAL):
        assert "error" not in d, d.get("error")
        for m in ("dkrr float64", "dkrr float32", "sklearn RBFSampler+Ridge"):
            for p in st["widths"]:
                v = d["measurements"][m][str(p)]
                assert _number(v["fit_s"]) and _number(v["error"]), (m, p, v)
        assert len(d["equal_width"]) == len(d["equal_error"]) == 2 * len(st["widths"])
    for d in _real_entries(speed["cv"], SPEED_REAL):
        assert "error" not in d and _number(d["rel_diff"]) and len(d["same_alpha"]) == len(d["auto_refined"]) == 1, d


def test_frontier_time_interpolates_between_widths():
    # errors 0.4, 0.2, 0.1 at times 1, 2, 4: error 0.2 * sqrt(2) is half-way (log-log) from 1 to 2 s
    t, kind = suite_speed.frontier_time([1.0, 2.0, 4.0], [0.4, 0.2, 0.1], 0.2 * 2**0.5)
    assert kind == "interpolated" and t == pytest.approx(2**0.5)
    assert suite_speed.frontier_time([1.0, 2.0, 4.0], [0.4, 0.2, 0.1], 0.5) == (1.0, "upper bound")
    assert suite_speed.frontier_time([1.0, 2.0, 4.0], [0.4, 0.2, 0.1], 0.05) == (None, "not reached")
    # a slower point with a worse error is not on the frontier: 0.15 lies between 2 s and 4 s
    t, kind = suite_speed.frontier_time([1.0, 2.0, 3.0, 4.0], [0.4, 0.2, 0.3, 0.1], 0.2 / 2**0.5)
    assert kind == "interpolated" and t == pytest.approx(8**0.5)


@pytest.mark.slow
@needs_real_data
def test_real_data_path_ran(results):
    peers = results["suites"]["peers"]["result"]
    assert {d["dataset"] for d in peers["datasets"] if d.get("records")} == set(PEERS_REAL)
    approx = results["suites"]["approx"]["result"]
    assert {d["dataset"] for d in approx["datasets"] if "mse" in d} == set(APPROX_REAL)


@pytest.mark.slow
def test_report_md_has_every_section(quick_run):
    _, out = quick_run
    text = (out / "report.md").read_text()
    assert text.startswith("# dkrr benchmark report")
    assert "Command: `python -m benchmarks" in text
    assert "BLAS (threadpoolctl)" in text
    for name in SUITES:
        assert f"(`{name}`)" in text, name
    # nothing of dkrr "not available" (a peer that cannot run says "not usable", with why);
    # only a missing real data set may be, in its DatasetUnavailableError
    bad = [ln for ln in text.splitlines() if "not available" in ln and "DatasetUnavailableError" not in ln]
    assert not bad, bad
    meta = json.loads((out / "results.json").read_text())["meta"]
    stamp = text.splitlines()[2]  # the first line after the title says whether it may be quoted
    if meta["validity"]["publishable"]:
        assert stamp.startswith("**Publishable**"), stamp
    else:
        assert stamp.startswith("**NOT FOR PUBLICATION**"), stamp
        assert all(p in stamp for p in meta["validity"]["problems"])


@pytest.mark.slow
@needs_real_data
def test_approx_plot_is_a_png(quick_run):
    _, out = quick_run
    assert "![kernel approximation MSE](approx_mse.png)" in (out / "report.md").read_text()
    data = (out / "approx_mse.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


# -- dkrr missing or misused fails loudly ------------------------------------------------
def test_run_fails_when_dkrr_cannot_be_imported(tmp_path):
    """No "not available" fallback for dkrr itself: every suite errors, exit status 1."""
    out = tmp_path / "broken"
    code = ("import sys; sys.modules['dkrr'] = None  # any `import dkrr` now raises ImportError\n"
            "from benchmarks.__main__ import main\n"
            f"sys.exit(main(['--quick', '--repeats', '1', '--allow-load', '--suites', 'peers,scaling,approx', '--out', {str(out)!r}]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    res = json.loads((out / "results.json").read_text())
    for name in ("peers", "scaling", "approx"):
        suite = res["suites"][name]
        assert suite["status"] == "error" and "import of dkrr halted" in suite["error"], (name, suite)


def test_make_dkrr_ridge_refuses_unknown_parameters():
    from dkrr import RandomFeatureRidge

    est = make_dkrr_ridge(RandomFeatureRidge, method="rff", n_components=8, alpha=2.0)
    assert (est.method, est.n_components, est.alpha) == ("rff", 8, 2.0)
    with pytest.raises(TypeError, match=r"\['chunk_row'\]"):  # misspelled chunk_rows
        make_dkrr_ridge(RandomFeatureRidge, method="rff", chunk_row=512)


def test_a_failing_dkrr_method_fails_the_probe():
    from dkrr import RandomFeatureRidge

    check_dkrr_methods(RandomFeatureRidge, ["rff", "orf"])  # working methods pass
    with pytest.raises(RuntimeError, match="method='no_such_method'"):
        check_dkrr_methods(RandomFeatureRidge, ["rff", "no_such_method"])


def test_missing_real_data_is_a_clear_error(tmp_path, monkeypatch):
    from dkrr.errors import DatasetUnavailableError

    monkeypatch.setenv("DKRR_DATA", str(tmp_path / "cache"))
    monkeypatch.setenv("DKRR_DATA_MIRROR", str(tmp_path / "mirror"))
    monkeypatch.setenv("DKRR_BENCH_DOWNLOAD", "0")
    assert set(real_data_missing(["letter", "casp"])) == {"letter"}  # casp is shipped
    with pytest.raises(DatasetUnavailableError, match="DKRR_DATA_MIRROR"):
        load_raw("letter")
    X, y = load_raw("casp")
    assert X.shape == (45730, 9) and y.shape == (45730,)
    with pytest.raises(ValueError, match="unknown data set"):
        load_raw("nope")
    assert set(REAL_DATASETS) >= set(PEERS_REAL) | set(APPROX_REAL)
