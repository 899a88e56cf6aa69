"""Tests of the deployments in cluster/.

cluster/local and cluster/tls are exercised for real: `dask scheduler` and two
`dask worker` processes are started on 127.0.0.1 by cluster/local/cluster.py (plain TCP and
mutual TLS) and used through dkrr.cluster.connect. cluster/slurm and cluster/kubernetes
cannot run here; they are validated offline (job scripts rendered by dask-jobqueue without
submitting, the DaskCluster manifest checked against the operator's required fields and
its container arguments against the installed `dask` command line).
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import psutil
import pytest
import yaml
from packaging.requirements import Requirement

from dkrr.cluster import connect, worker_blas_threads
from dkrr.errors import InvalidParameterError, SchedulerUnreachableError

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_PY = ROOT / "cluster" / "local" / "cluster.py"


def _load_script(relpath, name):
    spec = importlib.util.spec_from_file_location(name, ROOT / relpath)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cluster_cmd(*args, check=True, timeout=90):
    proc = subprocess.run(
        [sys.executable, str(CLUSTER_PY), *map(str, args)],
        capture_output=True, text=True, timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"cluster.py {' '.join(map(str, args))} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _start(rundir, *extra):
    _cluster_cmd(
        "start", "--dir", rundir, "--workers", 2, "--memory-limit", "1GB",
        "--scheduler-port", 0, "--dashboard-port", 0, *extra,
    )
    return json.loads((Path(rundir) / "cluster.json").read_text())


def _all_pids(state):
    return [p["pid"] for p in state["processes"].values()] + list(state["worker_processes"].values())


def _gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    make_certs = _load_script("cluster/tls/make_certs.py", "dkrr_make_certs")
    return make_certs.make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def other_certs(tmp_path_factory):
    """Certificates from a different CA: a client holding them must be refused."""
    make_certs = _load_script("cluster/tls/make_certs.py", "dkrr_make_certs")
    return make_certs.make_certs(tmp_path_factory.mktemp("other-certs"))


@pytest.fixture(scope="module")
def tcp_cluster(tmp_path_factory):
    rundir = tmp_path_factory.mktemp("tcp-cluster")
    try:
        yield _start(rundir)
    finally:
        _cluster_cmd("stop", "--dir", rundir, "--grace", 5, check=False)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory, certs):
    rundir = tmp_path_factory.mktemp("tls-cluster")
    try:
        yield _start(rundir, "--tls-dir", Path(certs["ca"]).parent)
    finally:
        _cluster_cmd("stop", "--dir", rundir, "--grace", 5, check=False)


def _check_computation(client):
    x = np.random.default_rng(1).standard_normal((3000, 5))
    dx = da.from_array(x, chunks=(300, 5))
    # elementwise and reductions only: dask's array query planning has no matmul
    squares, total = client.compute([(dx * dx).sum(axis=0), dx.sum()], sync=True)
    np.testing.assert_allclose(squares, (x * x).sum(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(total, x.sum(), rtol=1e-12, atol=1e-9)
    # Tasks really ran on both worker processes.
    who = client.run(lambda dask_worker: len(dask_worker.data) + dask_worker.state.executed_count)
    assert len(who) == 2 and all(n > 0 for n in who.values()), who


# --------------------------------------------------------------------------- local / TCP
@pytest.mark.cluster
def test_tcp_cluster_runs_dask_computation(tcp_cluster):
    address = tcp_cluster["address"]
    assert re.fullmatch(r"tcp://127\.0\.0\.1:\d+", address)
    out = io.StringIO()
    with connect(address, timeout=10, stream=out) as client:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        assert sorted(w["name"] for w in workers.values()) == ["worker-0", "worker-1"]
        assert all(a.startswith("tcp://127.0.0.1:") for a in workers)
        assert {w["memory_limit"] for w in workers.values()} == {10**9}
        _check_computation(client)
    assert f"Dask dashboard at {tcp_cluster['dashboard']}" in out.getvalue()


@pytest.mark.cluster
def test_tcp_cluster_through_scheduler_file_and_worker_blas(tcp_cluster):
    with connect(tcp_cluster["scheduler_file"], timeout=10, quiet=True) as client:
        assert client.scheduler.address == tcp_cluster["address"]
        info = worker_blas_threads(client)
    assert len(info) == 2
    for worker in info.values():
        assert set(worker["environ"].values()) == {"1"}
        assert all(p["num_threads"] == 1 for p in worker["pools"]), worker


@pytest.mark.cluster
def test_status_and_start_refused_while_running(tcp_cluster, tmp_path):
    rundir = Path(tcp_cluster["scheduler_file"]).parent
    proc = _cluster_cmd("status", "--dir", rundir)
    assert "2 of 2 workers" in proc.stdout
    again = _cluster_cmd("start", "--dir", rundir, "--scheduler-port", 0, check=False)
    assert again.returncode != 0 and "still running" in again.stderr
    # the command it suggests runs this interpreter (the virtualenv's), not a bare `python`
    assert f"`{shlex.join([sys.executable, str(CLUSTER_PY)])} stop --dir " in again.stderr
    assert _cluster_cmd("status", "--dir", tmp_path, check=False).returncode == 3


@pytest.mark.cluster
def test_stop_leaves_no_processes(tmp_path):
    started = _cluster_cmd(
        "start", "--dir", tmp_path, "--workers", 2, "--memory-limit", "1GB",
        "--scheduler-port", 0, "--dashboard-port", 0,
    )
    state = json.loads((tmp_path / "cluster.json").read_text())
    try:
        # the printed stop command names this interpreter (a bare `python` may lack psutil)
        stop_cmd = [ln for ln in started.stdout.splitlines() if ln.startswith("stop ")][0].split(None, 1)[1]
        assert shlex.split(stop_cmd) == [sys.executable, str(CLUSTER_PY), "stop", "--dir", str(tmp_path)]
        pids = _all_pids(state)
        assert len(pids) == 5  # scheduler, 2 nannies, 2 worker processes
        assert not any(_gone(pid) for pid in pids)
        assert sorted(p.name for p in tmp_path.glob("*.pid")) == ["scheduler.pid", "worker-0.pid", "worker-1.pid"]
        proc = subprocess.run(shlex.split(stop_cmd) + ["--grace", "10"], capture_output=True, text=True, timeout=90)
        assert proc.returncode == 0, proc.stderr
        assert "SIGKILL" not in proc.stdout  # SIGTERM was enough: a clean shutdown
        assert all(_gone(pid) for pid in pids), [p for p in pids if not _gone(p)]
        assert not list(tmp_path.glob("*.pid")) and not (tmp_path / "scheduler.json").exists()
        assert _cluster_cmd("status", "--dir", tmp_path, check=False).returncode == 3
        with pytest.raises(SchedulerUnreachableError, match=re.escape(state["address"])):
            with connect(state["address"], timeout=2, quiet=True):
                pass
    finally:  # a failed assertion must not leave the cluster running
        _cluster_cmd("stop", "--dir", tmp_path, "--grace", 5, check=False)


# --------------------------------------------------------------------------- TLS
@pytest.mark.cluster
def test_tls_cluster_runs_dask_computation(tls_cluster, certs):
    address = tls_cluster["address"]
    assert re.fullmatch(r"tls://127\.0\.0\.1:\d+", address)
    with connect(
        address, tls_ca_file=certs["ca"], tls_cert=certs["client"], tls_key=certs["client_key"],
        timeout=10, quiet=True,
    ) as client:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        assert len(workers) == 2 and all(a.startswith("tls://127.0.0.1:") for a in workers)
        _check_computation(client)


@pytest.mark.cluster
def test_tls_cluster_with_config_snippet(tls_cluster, certs):
    """cluster/tls/distributed.yaml, with CERT_DIR filled in, is all a client needs."""
    cert_dir = str(Path(certs["ca"]).parent)
    text = (ROOT / "cluster" / "tls" / "distributed.yaml").read_text().replace("CERT_DIR", cert_dir)
    snippet = yaml.safe_load(text)
    tls = snippet["distributed"]["comm"]["tls"]
    assert snippet["distributed"]["comm"]["require-encryption"] is True
    # Every key of the snippet is a key distributed knows (no silently ignored typo).
    defaults = dask.config.get("distributed.comm")
    assert set(snippet["distributed"]["comm"]) <= set(defaults)
    assert set(tls) <= set(defaults["tls"])
    for role in ("scheduler", "worker", "client"):
        assert set(tls[role]) == set(defaults["tls"][role]) == {"cert", "key"}
        assert Path(tls[role]["cert"]).is_file() and Path(tls[role]["key"]).is_file()
    # Merge it the way Dask merges a file of its config directory (dask.config.set with a
    # nested dict would replace the whole "distributed" tree).
    merged = dask.config.merge(dask.config.config, snippet)
    with dask.config.set(merged):
        with connect(tls_cluster["address"], timeout=10, quiet=True) as client:
            assert client.submit(sum, [1, 2, 3]).result() == 6


@pytest.mark.cluster
def test_tls_client_without_certificate_is_refused(tls_cluster, certs, other_certs):
    address = tls_cluster["address"]
    host, port = address.removeprefix("tls://").rsplit(":", 1)

    # connect refuses to try without certificates and says which files to pass.
    with pytest.raises(InvalidParameterError, match="tls_ca_file"):
        with connect(address, timeout=2):
            pass

    # The scheduler itself refuses a TLS client that trusts the CA but shows no certificate,
    # and keeps the same connection open once the client certificate is loaded.
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ctx.check_hostname = False
    assert _tls_probe(host, int(port), ctx) == "refused"
    ctx.load_cert_chain(certs["client"], certs["client_key"])
    assert _tls_probe(host, int(port), ctx) == "open"

    # A certificate from another CA is rejected by the scheduler during the handshake.
    with pytest.raises(SchedulerUnreachableError, match="unknown ca|certificate") as excinfo:
        with connect(
            address, tls_ca_file=certs["ca"], tls_cert=other_certs["client"],
            tls_key=other_certs["client_key"], timeout=5, quiet=True,
        ):
            pass
    assert address in str(excinfo.value)

    # A plain TCP client is not served.
    with pytest.raises(SchedulerUnreachableError):
        with connect(address.replace("tls://", "tcp://"), timeout=3, quiet=True):
            pass


def _tls_probe(host, port, ctx):
    """'refused' if the server ends a raw TLS connection, 'open' if it waits for a message."""
    try:
        with socket.create_connection((host, port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=host) as tls_sock:
                tls_sock.settimeout(1.0)
                data = tls_sock.recv(1)  # TLS 1.3: the alert arrives after the handshake
    except TimeoutError:
        return "open"
    except (ssl.SSLError, ConnectionError):
        return "refused"
    return "refused" if data == b"" else "open"


# --------------------------------------------------------------------------- SLURM / PBS
def _jobqueue_script():
    pytest.importorskip("dask_jobqueue")
    return _load_script("cluster/slurm/jobqueue_cluster.py", "dkrr_jobqueue_cluster")


@pytest.mark.parametrize("system", ["slurm", "pbs"])
def test_jobqueue_job_script_renders_without_submitting(system, tmp_path, monkeypatch):
    jq = _jobqueue_script()
    monkeypatch.chdir(tmp_path)  # dask-jobqueue creates the log directory
    config = ROOT / "cluster" / "slurm" / "jobqueue.yaml"
    section = yaml.safe_load(config.read_text())["jobqueue"][system]
    cluster = jq.make_cluster(
        system, config=config, scheduler_options={"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}
    )
    with cluster:
        script = cluster.job_script()
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        assert len(cluster.workers) == 0  # nothing was submitted
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    if system == "slurm":
        expected = [
            "#SBATCH -J dkrr-worker", f"#SBATCH -p {section['queue']}", "#SBATCH -n 1",
            f"#SBATCH --cpus-per-task={section['cores']}", f"#SBATCH -t {section['walltime']}",
            "#SBATCH --exclusive",
        ]
        assert any(re.fullmatch(r"#SBATCH --mem=\d+G", line) for line in lines), script
    else:
        expected = [
            "#PBS -N dkrr-worker", f"#PBS -q {section['queue']}", f"#PBS -l {section['resource-spec']}",
            f"#PBS -l walltime={section['walltime']}",
        ]
    for line in expected:
        assert line in lines, (line, script)
    assert section["job-script-prologue"][0] in lines
    (command,) = [line for line in lines if "distributed.cli.dask_worker" in line]
    argv = shlex.split(command)
    assert argv[argv.index("-m") + 2] == cluster.scheduler_address
    threads = section["cores"] // section["processes"]
    assert argv[argv.index("--nthreads") + 1] == str(threads)
    assert argv[argv.index("--nworkers") + 1] == str(section["processes"])
    assert argv[argv.index("--death-timeout") + 1] == str(section["death-timeout"])


def test_jobqueue_command_line_overrides(tmp_path):
    _jobqueue_script()
    proc = subprocess.run(
        [
            sys.executable, str(ROOT / "cluster" / "slurm" / "jobqueue_cluster.py"),
            "--system", "slurm", "--config", str(ROOT / "cluster" / "slurm" / "jobqueue.yaml"),
            "--scheduler-host", "127.0.0.1", "--queue", "debug", "--walltime", "00:10:00",
            "--cores", "4", "--processes", "2", "--memory", "8GB", "--print-job-script",
        ],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    for line in ("#SBATCH -p debug", "#SBATCH -t 00:10:00", "#SBATCH --cpus-per-task=4"):
        assert line in proc.stdout.splitlines(), proc.stdout
    assert "--nthreads 2 " in proc.stdout and "--nworkers 2 " in proc.stdout


# --------------------------------------------------------------------------- Kubernetes
def _manifest():
    docs = list(yaml.safe_load_all((ROOT / "cluster" / "kubernetes" / "daskcluster.yaml").read_text()))
    assert len(docs) == 1
    return docs[0]


def _container(manifest, role):
    (container,) = manifest["spec"][role]["spec"]["containers"]
    return container


def test_daskcluster_manifest_matches_schema():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "cluster" / "kubernetes" / "daskcluster.schema.json").read_text())
    manifest = _manifest()
    jsonschema.validate(manifest, schema)
    # The schema does catch a manifest missing the operator's required fields.
    broken = json.loads(json.dumps(manifest))
    del broken["spec"]["scheduler"]["service"]
    with pytest.raises(jsonschema.ValidationError, match="service"):
        jsonschema.validate(broken, schema)


def test_daskcluster_manifest_is_consistent():
    from dask.utils import parse_bytes

    manifest = _manifest()
    name = manifest["metadata"]["name"]
    scheduler, worker = _container(manifest, "scheduler"), _container(manifest, "worker")
    assert scheduler["image"] == worker["image"]
    ports = {p["name"]: p["containerPort"] for p in scheduler["ports"]}
    assert ports == {"tcp-comm": 8786, "http-dashboard": 8787}
    service = manifest["spec"]["scheduler"]["service"]
    assert service["selector"] == {"dask.org/cluster-name": name, "dask.org/component": "scheduler"}
    assert {p["targetPort"] for p in service["ports"]} == set(ports)
    for probe in ("readinessProbe", "livenessProbe"):
        assert scheduler[probe]["httpGet"] == {"port": "http-dashboard", "path": "/health"}
    # Worker arguments agree with the pod's resources: threads <= CPUs, memory limit below
    # the container limit, one BLAS thread per worker thread.
    args = worker["args"]
    assert args[:2] == ["dask", "worker"]
    assert args[args.index("--name") + 1] == "$(DASK_WORKER_NAME)"
    limits = worker["resources"]["limits"]
    assert int(args[args.index("--nthreads") + 1]) <= int(limits["cpu"])
    assert parse_bytes(args[args.index("--memory-limit") + 1]) < parse_bytes(limits["memory"])
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert env == {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    assert manifest["spec"]["worker"]["replicas"] >= 1


@pytest.mark.parametrize("role", ["scheduler", "worker"])
def test_daskcluster_arguments_parse_with_installed_dask(role):
    """The container arguments are valid options of this distributed's `dask` commands."""
    import click
    from distributed.cli import dask_scheduler, dask_worker

    command = {"scheduler": dask_scheduler.main, "worker": dask_worker.main}[role]
    args = _container(_manifest(), role)["args"]
    assert args[:2] == ["dask", role]
    known = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
    options = [a for a in args[2:] if a.startswith("--")]
    assert options and set(options) <= known, set(options) - known
    ctx = command.make_context(f"dask {role}", list(args[2:]))
    assert isinstance(ctx, click.Context)
    if role == "worker":
        assert ctx.params["scheduler"] is None  # taken from DASK_SCHEDULER_ADDRESS
        assert ctx.params["nthreads"] == 2
    else:
        assert int(ctx.params["port"]) == 8786 and ctx.params["dashboard_address"] == ":8787"


def test_dockerfile():

    text = (ROOT / "cluster" / "kubernetes" / "Dockerfile").read_text()
    instructions = [
        line.split(None, 1) for line in text.replace("\\\n", " ").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    keywords = [kw.upper() for kw, _ in instructions]
    assert keywords[0] in ("FROM", "ARG") and "FROM" in keywords
    args = dict(rest.split("=", 1) for kw, rest in instructions if kw == "ARG")
    # Client and cluster must run the same dask/distributed version: the build command in
    # the recipe passes the client's own version; the default in the Dockerfile is one
    # pyproject.toml allows (the installed one here may be newer or older: the package
    # registries decide what a fresh install gets)
    readme = (ROOT / "cluster" / "kubernetes" / "README.md").read_text()
    assert ("--build-arg DASK_VERSION=$(python -c 'import distributed; "
            "print(distributed.__version__)')") in readme
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for req in map(Requirement, project["dependencies"]):
        if req.name in ("dask", "distributed"):
            assert req.specifier.contains(args["DASK_VERSION"]), (req, args["DASK_VERSION"])
    for kw, rest in instructions:
        if kw == "COPY":
            *sources, _dest = rest.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY source {source} missing from the repository"
    run = " ".join(rest for kw, rest in instructions if kw == "RUN")
    assert "pip install ." in run and "distributed==${DASK_VERSION}" in run
    assert json.loads(dict((kw, rest) for kw, rest in instructions)["CMD"])[0] == "dask"
    assert "USER" in keywords  # does not run as root


def _processes_of(rundir):
    """The running processes whose command line names ``rundir``."""
    out = []
    for proc in psutil.process_iter(["cmdline"]):
        if any(str(rundir) in arg for arg in proc.info["cmdline"] or ()):
            out.append(proc)
    return out


@pytest.mark.cluster
def test_start_on_a_busy_port_names_the_cause(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = _cluster_cmd(
            "start", "--dir", tmp_path, "--scheduler-port", port, "--dashboard-port", 0, check=False,
        )
    assert proc.returncode == 1
    # the cause is far above the log's last 30 lines (which end in 'Scheduler failed to start')
    assert f"port {port} on 127.0.0.1 is in use" in proc.stderr.splitlines()[0], proc.stderr
    assert "OSError: [Errno 98] Address already in use" in proc.stderr
    assert not list(tmp_path.glob("*.pid")) and not _processes_of(tmp_path)


@pytest.mark.cluster
def test_failed_start_removes_its_pid_files(tmp_path):
    # 3 s: the scheduler starts, the workers are spawned (and write pid files) but have not
    # registered yet; a machine fast enough to start them all in time tries a shorter limit
    for limit in (3, 2, 1.5, 1):
        proc = _cluster_cmd(
            "start", "--dir", tmp_path, "--workers", 2, "--scheduler-port", 0, "--dashboard-port", 0,
            "--timeout", limit, check=False,
        )
        if proc.returncode == 0:
            _cluster_cmd("stop", "--dir", tmp_path)
            continue
        break
    else:  # seen once in a full run: no start could be made to fail here
        pytest.skip("the cluster started within every limit tried (1 s the least): no failed start to clean up")
    assert proc.returncode == 1 and "Could not start the cluster" in proc.stderr, proc.stderr
    assert not list(tmp_path.glob("*.pid")), sorted(p.name for p in tmp_path.iterdir())
    assert not (tmp_path / "cluster.json").exists() and not (tmp_path / "scheduler.json").exists()
    assert not _processes_of(tmp_path)
    assert _cluster_cmd("status", "--dir", tmp_path, check=False).returncode == 3


@pytest.mark.parametrize("text", ["", "{", "[]", '{"address": "tcp://127.0.0.1:1", "workers": 2}',
                                  '{"address": "a", "workers": 2, "processes": {"scheduler": {"pid": "x"}}}'])
@pytest.mark.parametrize("command", ["status", "stop"])
def test_malformed_state_file_is_one_line(tmp_path, text, command):
    (tmp_path / "cluster.json").write_text(text)
    proc = _cluster_cmd(command, "--dir", tmp_path, check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(tmp_path / "cluster.json") in proc.stderr and "by hand" in proc.stderr
    assert (tmp_path / "cluster.json").exists()  # nothing is removed: the user decides


@pytest.mark.cluster
def test_interrupted_start_is_one_line(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, str(CLUSTER_PY), "start", "--dir", str(tmp_path), "--workers", "2",
         "--scheduler-port", "0", "--dashboard-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "logs" / "scheduler.log").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "interrupted" in err
    assert not _processes_of(tmp_path) and not (tmp_path / "cluster.json").exists()


def test_recipe_directories_are_ignored_by_git():
    """run/ and certs/ (the CA's private key) as the READMEs name them are never committed."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    assert "--dir run/" in (ROOT / "cluster" / "local" / "README.md").read_text()
    assert "--out certs/" in (ROOT / "cluster" / "tls" / "README.md").read_text()
    for path in ("run/scheduler.json", "certs/ca-key.pem"):
        proc = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path], capture_output=True)
        assert proc.returncode == 0, f"{path} is not ignored by git"


# --------------------------------------------------------------------------- workers' dkrr
def _dask_process(args, log, pythonpath=None):
    """``dask scheduler``/``dask worker`` (the installed command) as its own process group;
    ``pythonpath``: a folder put first on the worker's import path."""
    import os

    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.Popen([str(Path(sys.executable).with_name("dask")), *map(str, args)], env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_workers_running_another_dkrr_or_none_are_warned_of(tmp_path):
    """A team cluster's workers installed from a release while the client runs a checkout:
    both say dkrr 0.1.0, their code differs, and nothing said so (tasks run the workers'
    code). connect() now warns, naming the workers, of those whose sources differ and of
    those that cannot import dkrr; workers with this dkrr are not named. The CLI says it
    as its one warning line."""
    import os
    import shutil
    import warnings

    import dkrr
    from dkrr._version import install_identity
    from dkrr.errors import WorkerVersionWarning

    other = tmp_path / "other"  # the same package, one file changed: another build
    shutil.copytree(Path(dkrr.__file__).parent, other / "dkrr", ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "dkrr" / "_blas.py", "a") as f:
        f.write("# a build of other days\n")
    # dkrr installed without a dependency it imports (a worker image short of a package)
    broken = tmp_path / "broken" / "dkrr"
    shutil.copytree(Path(dkrr.__file__).parent, broken, ignore=shutil.ignore_patterns("__pycache__"))
    init = (broken / "__init__.py").read_text()
    (broken / "__init__.py").write_text("import dkrr_dependency_not_installed  # noqa: F401\n" + init)
    sched_file = tmp_path / "scheduler.json"
    log = open(tmp_path / "dask.log", "w")
    procs = [_dask_process(["scheduler", "--host", "127.0.0.1", "--port", 0, "--no-dashboard",
                            "--scheduler-file", sched_file], log)]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        common = ["worker", "--scheduler-file", sched_file, "--nthreads", 1, "--no-nanny", "--no-dashboard",
                  "--host", "127.0.0.1"]
        for name, path in (("same", None), ("other", other), ("broken", broken.parent)):
            procs.append(_dask_process([*common, "--name", name], log, pythonpath=path))
        from distributed import Client

        with Client(scheduler_file=str(sched_file), timeout=30) as watcher:
            watcher.wait_for_workers(3, timeout=60)
            names = {w["name"]: a for a, w in watcher.scheduler_info(n_workers=-1)["workers"].items()}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with connect(str(sched_file), quiet=True) as client:
                assert client.submit(sum, [1, 2], workers=[names["same"]]).result() == 3
        said = [str(w.message) for w in caught if issubclass(w.category, WorkerVersionWarning)]
        assert len(said) == 2, [str(w.message) for w in caught]
        cannot, another = sorted(said)
        assert cannot.startswith("1 of 3 worker(s) of the scheduler at tcp://127.0.0.1:") and \
            f"cannot import dkrr: {names['broken']} (ModuleNotFoundError(\"No module named " \
            "'dkrr_dependency_not_installed'\"))" \
            in cannot, cannot
        version, ours = install_identity()
        assert f"run another dkrr than this client (dkrr {version}, sources {ours}): {names['other']} " \
               f"(dkrr {version}, sources " in another and "install the client's dkrr" in another, another
        assert names["same"] not in cannot + another
        # the CLI: one warning line, the command done (the broken worker stopped first)
        procs.pop().kill()
        with Client(scheduler_file=str(sched_file), timeout=30) as watcher:
            deadline = time.monotonic() + 60
            while len(watcher.scheduler_info(n_workers=-1)["workers"]) != 2 and time.monotonic() < deadline:
                time.sleep(0.2)
        np.savetxt(tmp_path / "d.csv", np.arange(12.0).reshape(4, 3), delimiter=",", header="a,b,y", comments="")
        proc = subprocess.run([sys.executable, "-m", "dkrr.cli", "ingest", tmp_path / "d.csv", "--out", tmp_path / "s.zarr",
                               "--scheduler", sched_file, "-q"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "COLUMNS": "400"})
        assert proc.returncode == 0, proc.stderr
        lines = [line for line in proc.stderr.splitlines() if "warning" in line]
        assert len(lines) == 1 and lines[0].startswith("dkrr ingest: warning: 1 of 2 worker(s) of the scheduler") \
            and names["other"] in lines[0], proc.stderr
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        log.close()
