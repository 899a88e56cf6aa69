"""``dkrr fit`` submitted to real ``dask scheduler`` / ``dask worker`` processes.

A scheduler and two worker processes (each behind a nanny) are started on 127.0.0.1 by
``cluster/local/cluster.py``, once speaking plain TCP and once mutual TLS with
certificates made by ``cluster/tls/make_certs.py``. ``dkrr fit STORE --scheduler ...``
runs as a subprocess against them; the saved model must equal an in-process fit of the
same store with the same parameters, and the work must have run on the cluster's workers.
A TLS scheduler refuses clients without certificates or with certificates from another
CA, with a clear message and exit status 1.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pytest

from dkrr import RandomFeatureRidge
from dkrr.datasets import load_casp
from dkrr.io import ingest, open_dataset
from dkrr.io._model import load_model

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_PY = ROOT / "cluster" / "local" / "cluster.py"


# --------------------------------------------------------------------------- helpers
def _run(cmd, timeout):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def dkrr(*args, check=True, timeout=180):
    proc = _run([sys.executable, "-m", "dkrr.cli", *map(str, args)], timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"dkrr {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _cluster_cmd(*args, check=True):
    proc = _run([sys.executable, str(CLUSTER_PY), *map(str, args)], 120)
    if check and proc.returncode != 0:
        raise AssertionError(f"cluster.py {args} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _start_cluster(rundir, *extra):
    _cluster_cmd(
        "start", "--dir", rundir, "--workers", 2, "--threads-per-worker", 1,
        "--memory-limit", "1GB", "--scheduler-port", 0, "--dashboard-port", -1, "--quiet", *extra,
    )
    return json.loads((Path(rundir) / "cluster.json").read_text())


def _make_certs(out):
    spec = importlib.util.spec_from_file_location("dkrr_make_certs", ROOT / "cluster" / "tls" / "make_certs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_certs(out)


def _executed_per_worker(state):
    """Tasks executed so far by each worker of a cluster.py cluster (by worker name)."""
    from distributed import Client

    security = None
    if state["tls"]:
        from dkrr._connection import make_security

        tls = state["tls"]
        security = make_security(tls["ca"], tls["client"], tls["client_key"])
    with Client(state["address"], security=security, timeout=20) as client:
        counts = client.run(lambda dask_worker: (dask_worker.name, dask_worker.state.executed_count))
    return dict(counts.values())


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return _make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tcp_cluster(tmp_path_factory):
    rundir = tmp_path_factory.mktemp("tcp-cluster")
    try:
        yield _start_cluster(rundir)
    finally:
        _cluster_cmd("stop", "--dir", rundir, "--grace", 5, check=False)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory, certs):
    rundir = tmp_path_factory.mktemp("tls-cluster")
    try:
        yield _start_cluster(rundir, "--tls-dir", Path(certs["ca"]).parent)
    finally:
        _cluster_cmd("stop", "--dir", rundir, "--grace", 5, check=False)


@pytest.fixture(scope="module")
def casp_store(tmp_path_factory):
    """4000 standardised CASP rows ingested into a Zarr store with 8 row chunks."""
    X, y = load_casp()
    idx = np.random.default_rng(0).permutation(len(y))[:4000]
    X = (X[idx] - X[idx].mean(0)) / X[idx].std(0)
    root = tmp_path_factory.mktemp("casp")
    csv = root / "casp.csv"
    np.savetxt(csv, np.column_stack([y[idx], X]), delimiter=",", fmt="%.6f",
               header="RMSD," + ",".join(f"F{i}" for i in range(1, 10)), comments="")
    ingest(csv, root / "store", target="RMSD", dtype="float64", chunk_rows=500)
    return root / "store"


def _in_process_fit(store, **params):
    data = open_dataset(store)
    with dask.config.set(scheduler="threads"):
        return RandomFeatureRidge(**{"standardize": True, **params}).fit(data.X, data.y)  # as `dkrr fit`


# --------------------------------------------------------------------------- TCP
def test_fit_on_tcp_cluster_matches_in_process(tcp_cluster, casp_store, tmp_path):
    before = _executed_per_worker(tcp_cluster)
    model = tmp_path / "model"
    out = dkrr("fit", casp_store, "--out", model, "--scheduler", tcp_cluster["address"],
               "--method", "sorf", "--n-components", 64, "--gamma", 0.1, "--alphas", "0.1,1,10",
               "--cv", 3, "--random-state", 7, "--timeout", 20, "-q", "--json")
    summary = json.loads(out.stdout)
    assert summary["n_rows"] == 4000 and summary["n_features"] == 9

    after = _executed_per_worker(tcp_cluster)
    # The pass ran on the cluster: both worker processes executed tasks of this fit.
    assert sorted(after) == ["worker-0", "worker-1"]
    assert all(after[w] > before.get(w, 0) for w in after), (before, after)

    saved = load_model(model)
    ref = _in_process_fit(casp_store, method="sorf", n_components=64, gamma=0.1,
                          alphas=[0.1, 1.0, 10.0], cv=3, random_state=7)
    _check(saved, ref, casp_store)
    assert summary["alpha"] == ref.alpha_


def test_fit_through_scheduler_file(tcp_cluster, casp_store, tmp_path):
    model = tmp_path / "model"
    dkrr("fit", casp_store, "--out", model, "--scheduler", tcp_cluster["scheduler_file"],
         "--method", "rff", "--n-components", 32, "--gamma", 0.1, "--alpha", 0.5,
         "--random-state", 1, "--timeout", 20, "-q")
    ref = _in_process_fit(casp_store, method="rff", n_components=32, gamma=0.1, alpha=0.5, random_state=1)
    _check(load_model(model), ref, casp_store)


# --------------------------------------------------------------------------- TLS
@pytest.mark.slow
def test_fit_on_tls_cluster_matches_in_process(tls_cluster, certs, casp_store, tmp_path):
    assert tls_cluster["address"].startswith("tls://127.0.0.1:")
    before = _executed_per_worker(tls_cluster)
    model = tmp_path / "model"
    out = dkrr("fit", casp_store, "--out", model, "--scheduler", tls_cluster["address"],
               "--tls-ca-file", certs["ca"], "--tls-cert", certs["client"], "--tls-key", certs["client_key"],
               "--method", "orf", "--n-components", 48, "--gamma", 0.2, "--alpha", 0.3,
               "--random-state", 5, "--timeout", 20)
    assert f"connected to the scheduler at {tls_cluster['address']}" in out.stderr
    after = _executed_per_worker(tls_cluster)
    assert all(after[w] > before.get(w, 0) for w in after), (before, after)
    ref = _in_process_fit(casp_store, method="orf", n_components=48, gamma=0.2, alpha=0.3, random_state=5)
    _check(load_model(model), ref, casp_store)


def test_tls_scheduler_refuses_client_without_certificates(tls_cluster, casp_store, tmp_path):
    model = tmp_path / "model"
    p = dkrr("fit", casp_store, "--out", model, "--scheduler", tls_cluster["address"],
             "--method", "rff", "--n-components", 8, "--timeout", 5, "-q", check=False)
    assert p.returncode == 1, p.stderr
    assert "uses TLS, but no certificates were given" in p.stderr
    assert "--tls-ca-file" in p.stderr
    assert not model.exists()


def test_tls_scheduler_refuses_foreign_certificates(tls_cluster, casp_store, tmp_path):
    other = _make_certs(tmp_path / "other-ca")  # a valid chain, but not the cluster's CA
    model = tmp_path / "model"
    p = dkrr("fit", casp_store, "--out", model, "--scheduler", tls_cluster["address"],
             "--tls-ca-file", other["ca"], "--tls-cert", other["client"], "--tls-key", other["client_key"],
             "--method", "rff", "--n-components", 8, "--timeout", 3, "-q", check=False)
    assert p.returncode == 1, p.stderr
    assert f"Could not connect to the Dask scheduler at '{tls_cluster['address']}'" in p.stderr
    assert "signed by the cluster CA" in p.stderr
    assert "Traceback" not in p.stderr
    assert not model.exists()


@pytest.mark.slow
def test_plain_tcp_client_is_refused_by_tls_scheduler(tls_cluster, casp_store, tmp_path):
    tcp_address = "tcp://" + tls_cluster["address"].removeprefix("tls://")
    model = tmp_path / "model"
    p = dkrr("fit", casp_store, "--out", model, "--scheduler", tcp_address,
             "--method", "rff", "--n-components", 8, "--timeout", 3, "-q", check=False)
    assert p.returncode == 1, p.stderr
    assert f"Could not connect to the Dask scheduler at '{tcp_address}'" in p.stderr
    assert not model.exists()


# --------------------------------------------------------------------------- checks
def _check(saved, ref, store):
    assert type(saved) is type(ref)
    assert saved.get_params() == ref.get_params()
    scale = np.abs(ref.coef_).max()
    np.testing.assert_allclose(saved.coef_, ref.coef_, rtol=1e-10, atol=1e-12 * scale)
    np.testing.assert_allclose(saved.intercept_, ref.intercept_, rtol=1e-10, atol=1e-12 * max(1.0, scale))
    assert saved.alpha_ == ref.alpha_
    X = open_dataset(store).X[:500].compute()
    np.testing.assert_allclose(saved.predict(X), ref.predict(X), rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------- ingest
def test_ingest_on_tls_cluster_takes_certificates(tls_cluster, certs, tmp_path):
    """`dkrr ingest --scheduler tls://...` takes the same --tls-* and --timeout as fit."""
    csv = tmp_path / "small.csv"
    np.savetxt(csv, np.arange(60.0).reshape(20, 3), delimiter=",", fmt="%.1f")
    out = tmp_path / "small.zarr"
    p = dkrr("ingest", csv, "--out", out, "--no-header", "--scheduler", tls_cluster["address"],
             "--tls-ca-file", certs["ca"], "--tls-cert", certs["client"], "--tls-key", certs["client_key"],
             "--timeout", 20, check=False)
    assert p.returncode == 0, p.stderr
    assert f"connected to the scheduler at {tls_cluster['address']}" in p.stderr
    assert open_dataset(out).X.shape == (20, 2)
    # without --scheduler there is no scheduler to reach: the flags are refused, naming one
    p = dkrr("ingest", csv, "--out", tmp_path / "other.zarr", "--no-header", "--timeout", 5, check=False)
    assert p.returncode == 1 and "--timeout reaches a scheduler: it needs --scheduler" in p.stderr, p.stderr


def test_schemeless_address_takes_configured_default_scheme(tls_cluster, certs, tmp_path):
    """With distributed.comm.default-scheme: tls (cluster/tls/distributed.yaml), HOST:PORT is
    tls://HOST:PORT, as for distributed.Client, not tcp://."""
    import os

    env = {**os.environ, "DASK_DISTRIBUTED__COMM__DEFAULT_SCHEME": "tls",
           "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(certs["ca"]),
           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(certs["client"]),
           "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(certs["client_key"])}
    csv = tmp_path / "small.csv"
    np.savetxt(csv, np.arange(60.0).reshape(20, 3), delimiter=",", fmt="%.1f")
    hostport = tls_cluster["address"].removeprefix("tls://")
    p = subprocess.run([sys.executable, "-m", "dkrr.cli", "ingest", str(csv), "--out", str(tmp_path / "s.zarr"),
                        "--no-header", "--scheduler", hostport, "--timeout", "10"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stderr
    assert f"connected to the scheduler at {tls_cluster['address']}" in p.stderr
    from dkrr._connection import resolve_scheduler_address

    assert resolve_scheduler_address("10.0.0.5:8786") == "tcp://10.0.0.5:8786"  # dask's default
    with dask.config.set({"distributed.comm.default-scheme": "tls"}):
        assert resolve_scheduler_address("10.0.0.5:8786") == "tls://10.0.0.5:8786"


@pytest.mark.parametrize("command", ["fit", "predict", "evaluate"])
def test_local_cluster_options_are_refused_with_scheduler(tcp_cluster, command, tmp_path):
    """--workers, --threads-per-worker and --memory-limit shape the LocalCluster that dkrr
    starts without --scheduler: with one they were silently ignored; now refused, named."""
    paths = {"fit": ["store", "--out", "model"], "predict": ["model", "store", "--out", "out"],
             "evaluate": ["model", "store"]}[command]
    for flag, value in (("--workers", "8"), ("--threads-per-worker", "4"), ("--memory-limit", "8GB")):
        p = dkrr(command, *(a if a.startswith("--") else tmp_path / a for a in paths),
                 "--scheduler", tcp_cluster["scheduler_file"], flag, value, check=False)
        assert p.returncode == 1, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"dkrr {command}: error: {flag} shapes the LocalCluster"), p.stderr
