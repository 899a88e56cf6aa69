#!/usr/bin/env python
"""Start, inspect and stop a Dask cluster of local processes bound to 127.0.0.1.

Usage::

    python cluster/local/cluster.py start --dir RUNDIR [--workers 2] [--threads-per-worker 1]
        [--memory-limit 2GB] [--scheduler-port 8786] [--dashboard-port 8787]
        [--tls-dir CERTS] [--no-nanny] [--timeout 60]
    python cluster/local/cluster.py status --dir RUNDIR
    python cluster/local/cluster.py stop --dir RUNDIR [--grace 10]

``start`` launches one ``dask scheduler`` and ``--workers`` ``dask worker`` processes (with
the interpreter running this script, so the virtualenv's ``distributed`` is used), each in
its own session so that they outlive this script, waits until every worker has registered
with the scheduler, and writes into RUNDIR:

    scheduler.json        Dask scheduler file (``dkrr fit --scheduler RUNDIR/scheduler.json``)
    cluster.json          address, dashboard link, pids, TLS files and options
    scheduler.pid         one pid file per process
    worker-<i>.pid
    logs/<name>.log       stdout and stderr of each process
    workers/<name>/       the workers' local (spill) directories

Port 0 means "any free port"; the chosen ones are in ``cluster.json``. With
``--tls-dir`` (a directory made by ``cluster/tls/make_certs.py``) the scheduler and the
workers speak mutual TLS only (``distributed.comm.require-encryption``), and clients need
``ca.pem``, ``client.pem`` and ``client-key.pem`` from that directory.

``stop`` sends SIGTERM to each worker (its nanny closes the worker process) and then to the
scheduler, waits ``--grace`` seconds and sends SIGKILL to whatever is left of their
process trees. Pids are checked against their recorded start times before any signal, so
a recycled pid is never signalled.

Exit status: 0 on success; ``status`` returns 0 when the cluster is up with all workers, 1
when it is degraded or unreachable, 3 when it is not running.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

HOST = "127.0.0.1"
STATE_FILE = "cluster.json"
SCHEDULER_FILE = "scheduler.json"


# --------------------------------------------------------------------------- processes
def _process(pid, create_time):
    """The psutil Process for a recorded (pid, create_time), or None if it is gone."""
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) > 1e-3 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.NoSuchProcess:
        return None


def _alive(procs):
    out = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except psutil.NoSuchProcess:
            pass
    return out


def _tree(proc):
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _terminate(entries, grace):
    """SIGTERM each recorded process, wait up to ``grace`` s for its tree, then SIGKILL."""
    trees = []
    for pid, create_time in entries:
        proc = _process(pid, create_time)
        if proc is None:
            continue
        tree = _tree(proc)
        trees.extend(tree)
        try:
            proc.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    deadline = time.monotonic() + grace
    while _alive(trees) and time.monotonic() < deadline:
        time.sleep(0.1)
    killed = _alive(trees)
    for proc in killed:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    deadline = time.monotonic() + 5
    while _alive(killed) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p.pid for p in killed]


def _spawn(cmd, log_path, env):
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # own session: survives this script, no terminal signals
        )
    return proc


# A traceback's last line: "OSError: [Errno 98] Address already in use", "RuntimeError: ..."
_ERROR_LINE = re.compile(r"^\s*(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception):")


def _log_tail(path, n=30):
    """The last ``n`` lines of a log, after the error lines above them (a traceback's cause
    is often further up than its last 30 lines)."""
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    tail = lines[-n:]
    earlier = []
    for line in lines[:-n]:
        if _ERROR_LINE.match(line) and line.strip() not in earlier and line not in tail:
            earlier.append(line.strip())
    head = f"errors earlier in {path}:\n" + "\n".join(earlier) + "\n" if earlier else ""
    return f"{head}last lines of {path}:\n" + "\n".join(tail)


def _scheduler_failure(returncode, log_path, port):
    """Why the scheduler exited: the port in use when its log says so, then the log."""
    try:
        text = Path(log_path).read_text(errors="replace")
    except OSError:
        text = ""
    cause = ""
    if "Address already in use" in text:
        where = f"port {port} on {HOST} is" if port else "its port is"
        cause = (f" {where} in use (OSError: Address already in use): pass another "
                 "--scheduler-port, or 0 for any free port")
    return f"the scheduler exited with status {returncode}:{cause}\n{_log_tail(log_path)}"


def _self_command():
    """The shell command that runs this script with this interpreter (the virtualenv's)."""
    return shlex.join([sys.executable, str(Path(__file__).resolve())])


# --------------------------------------------------------------------------- TLS
def tls_files(tls_dir):
    """Paths of the CA and per-role certificates in a directory made by make_certs.py."""
    tls_dir = Path(tls_dir).resolve()
    files = {"ca": tls_dir / "ca.pem"}
    for role in ("scheduler", "worker", "client"):
        files[role] = tls_dir / f"{role}.pem"
        files[f"{role}_key"] = tls_dir / f"{role}-key.pem"
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise SystemExit(
            f"--tls-dir {tls_dir}: missing {', '.join(missing)}; create them with "
            f"`python cluster/tls/make_certs.py --out {tls_dir}`."
        )
    return {k: str(v) for k, v in files.items()}


def _tls_args(files, role):
    return [
        "--tls-ca-file", files["ca"], "--tls-cert", files[role], "--tls-key", files[f"{role}_key"],
    ]


def _client_security(state):
    tls = state.get("tls")
    if not tls:
        return None
    from distributed.security import Security

    return Security(
        tls_ca_file=tls["ca"], tls_client_cert=tls["client"], tls_client_key=tls["client_key"],
        require_encryption=True,
    )


# --------------------------------------------------------------------------- state
def read_state(rundir):
    """The contents of RUNDIR/cluster.json, or None when there is none.

    A file that is not the state written by ``start`` (empty, cut short, edited) is refused
    with one line: its processes cannot be told apart from recycled pids, so they are not
    signalled."""
    path = Path(rundir) / STATE_FILE
    if not path.is_file():
        return None
    try:
        text = path.read_text()
        state = json.loads(text) if text.strip() else None
        problem = _state_problem(state) if text.strip() else "is empty"
    except (OSError, UnicodeDecodeError) as exc:
        problem = f"cannot be read ({exc})"
    except ValueError as exc:
        problem = f"is not valid JSON ({exc})"
    if problem:
        rundir = Path(rundir).resolve()
        raise SystemExit(
            f"{path.resolve()} {problem}: it is not the state written by `cluster.py start`. "
            f"Stop the processes it may list by hand (their pids are in {rundir}/*.pid; "
            f"check with ps first), then remove {rundir}."
        )
    return state


def _state_problem(state):
    """What is wrong with a parsed cluster.json, or None."""
    if not isinstance(state, dict):
        return f"holds a JSON {type(state).__name__}, not an object"
    missing = [k for k in ("address", "workers", "processes") if k not in state]
    if missing:
        return f"has no {', '.join(repr(k) for k in missing)}"
    procs = state["processes"]
    if not isinstance(procs, dict) or "scheduler" not in procs:
        return "has no 'scheduler' in 'processes'"
    for name, rec in procs.items():
        if not (
            isinstance(rec, dict)
            and isinstance(rec.get("pid"), int) and not isinstance(rec.get("pid"), bool)
            and isinstance(rec.get("create_time"), (int, float))
            and not isinstance(rec.get("create_time"), bool)
        ):
            return f"has no pid and create_time for process {name!r}"
    return None


def _entries(state):
    """(pid, create_time) of the workers first, then the scheduler."""
    procs = state["processes"]
    workers = [procs[k] for k in procs if k != "scheduler"]
    return [(p["pid"], p["create_time"]) for p in [*workers, procs["scheduler"]]]


def _record(proc):
    return {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time()}


# --------------------------------------------------------------------------- commands

def _scheduler_address(scheduler_file: Path):
    """The address in the scheduler's JSON file, or None while it is absent or half written."""
    try:
        return json.loads(scheduler_file.read_text())["address"]
    except (OSError, ValueError, KeyError, TypeError):
        return None

def start(
    rundir,
    *,
    workers=2,
    threads_per_worker=1,
    memory_limit="2GB",
    scheduler_port=8786,
    dashboard_port=8787,
    tls_dir=None,
    nanny=True,
    timeout=60.0,
    quiet=False,
):
    """Start the scheduler and workers; return the state written to cluster.json."""
    rundir = Path(rundir).resolve()
    rundir.mkdir(parents=True, exist_ok=True)
    old = read_state(rundir)
    if old is not None and any(_process(p, t) for p, t in _entries(old)):
        raise SystemExit(
            f"A cluster from {rundir} is still running ({old['address']}); run "
            f"`{_self_command()} stop --dir {shlex.quote(str(rundir))}` first."
        )
    for name in (STATE_FILE, SCHEDULER_FILE):
        (rundir / name).unlink(missing_ok=True)
    for pid_file in rundir.glob("*.pid"):
        pid_file.unlink()

    if workers < 1 or threads_per_worker < 1:
        raise SystemExit("--workers and --threads-per-worker must be at least 1.")
    env = dict(os.environ)
    # One BLAS thread per worker thread; the nanny sets the same through
    # distributed.nanny.pre-spawn-environ, this also covers --no-nanny.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[var] = "1"
    tls = tls_files(tls_dir) if tls_dir else None
    protocol = "tls" if tls else "tcp"
    if tls:
        env["DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION"] = "True"

    scheduler_file = rundir / SCHEDULER_FILE
    cmd = [
        sys.executable, "-m", "distributed.cli.dask_scheduler",
        "--host", HOST, "--port", str(scheduler_port), "--protocol", protocol,
        "--scheduler-file", str(scheduler_file), "--pid-file", str(rundir / "scheduler.pid"),
    ]
    # The scheduler's HTTP server (/health, /metrics) runs even with --no-dashboard, on
    # 0.0.0.0:8787 unless told otherwise: keep it on 127.0.0.1 (a free port for -1).
    cmd += ["--dashboard-address", f"{HOST}:{max(dashboard_port, 0)}"]
    if dashboard_port < 0:
        cmd += ["--no-dashboard"]
    if tls:
        cmd += _tls_args(tls, "scheduler")
    started = {}
    try:
        started["scheduler"] = _spawn(cmd, rundir / "logs" / "scheduler.log", env)
        deadline = time.monotonic() + timeout
        address = None
        while address is None:  # the scheduler writes the file in place: wait until it parses
            address = _scheduler_address(scheduler_file)
            if address is not None:
                break
            if started["scheduler"].poll() is not None:
                raise RuntimeError(_scheduler_failure(
                    started["scheduler"].returncode, rundir / "logs" / "scheduler.log", scheduler_port
                ))
            if time.monotonic() > deadline:
                raise RuntimeError(f"the scheduler did not write {scheduler_file} within {timeout} s")
            time.sleep(0.1)

        for i in range(workers):
            name = f"worker-{i}"
            cmd = [
                sys.executable, "-m", "distributed.cli.dask_worker", address,
                "--host", HOST, "--protocol", protocol, "--name", name,
                "--nworkers", "1", "--nthreads", str(threads_per_worker),
                "--memory-limit", str(memory_limit),
                "--local-directory", str(rundir / "workers" / name),
                "--pid-file", str(rundir / f"{name}.pid"),
                # the worker's HTTP server runs even with --no-dashboard: 127.0.0.1 only
                "--no-dashboard", "--dashboard-address", f"{HOST}:0", "--death-timeout", "60",
                "--nanny" if nanny else "--no-nanny",
            ]
            if tls:
                cmd += _tls_args(tls, "worker")
            started[name] = _spawn(cmd, rundir / "logs" / f"{name}.log", env)

        state = {
            "address": address,
            "scheduler_file": str(scheduler_file),
            "dashboard": None,
            "workers": workers,
            "threads_per_worker": threads_per_worker,
            "memory_limit": str(memory_limit),
            "nanny": nanny,
            "tls": tls,
            "processes": {name: _record(proc) for name, proc in started.items()},
        }
        from distributed import Client

        with Client(address, security=_client_security(state), timeout=max(1.0, deadline - time.monotonic())) as client:
            while len(client.nthreads()) < workers:
                for name, proc in started.items():
                    if proc.poll() is not None:
                        raise RuntimeError(
                            f"{name} exited with status {proc.returncode}:\n"
                            f"{_log_tail(rundir / 'logs' / f'{name}.log')}"
                        )
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"only {len(client.nthreads())} of {workers} workers registered within {timeout} s"
                    )
                time.sleep(0.1)
            services = client.scheduler_info().get("services", {})
            if "dashboard" in services and dashboard_port >= 0:
                state["dashboard"] = f"http://{HOST}:{services['dashboard']}/status"
            state["worker_processes"] = client.run(os.getpid)
    except BaseException as exc:
        _terminate([(p.pid, psutil.Process(p.pid).create_time()) for p in started.values() if p.poll() is None], 5)
        # what the stopped processes wrote and left: their pid files, the scheduler file
        (rundir / SCHEDULER_FILE).unlink(missing_ok=True)
        for pid_file in rundir.glob("*.pid"):
            pid_file.unlink(missing_ok=True)
        if isinstance(exc, (RuntimeError, OSError)):
            raise SystemExit(f"Could not start the cluster: {exc}") from exc
        raise
    tmp = rundir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, rundir / STATE_FILE)
    if not quiet:
        print(f"scheduler  {state['address']}")
        print(f"dashboard  {state['dashboard']}")
        print(f"workers    {workers} x {threads_per_worker} thread(s), memory limit {memory_limit}")
        print(f"connect    dkrr fit STORE --scheduler {scheduler_file}" + (
            f" --tls-ca-file {tls['ca']} --tls-cert {tls['client']} --tls-key {tls['client_key']}" if tls else ""
        ))
        print(f"stop       {_self_command()} stop --dir {shlex.quote(str(rundir))}")
    return state


def status(rundir, *, timeout=5.0, quiet=False):
    """Print the state of the cluster; return 0 (up), 1 (degraded) or 3 (not running)."""
    state = read_state(rundir)
    if state is None:
        if not quiet:
            print(f"no cluster in {rundir} (no {STATE_FILE})")
        return 3
    alive = {}
    for name, rec in state["processes"].items():
        alive[name] = _process(rec["pid"], rec["create_time"]) is not None
        if not quiet:
            print(f"{name:12s} pid {rec['pid']:>7d}  {'running' if alive[name] else 'stopped'}")
    if not any(alive.values()):
        return 3
    from distributed import Client

    try:
        with Client(state["address"], security=_client_security(state), timeout=timeout) as client:
            n = len(client.nthreads())
    except OSError as exc:
        if not quiet:
            print(f"scheduler {state['address']} unreachable: {exc}")
        return 1
    if not quiet:
        print(f"scheduler {state['address']}: {n} of {state['workers']} workers; dashboard {state['dashboard']}")
    return 0 if n == state["workers"] and all(alive.values()) else 1


def stop(rundir, *, grace=10.0, quiet=False):
    """Stop every process recorded in RUNDIR/cluster.json; return the pids that needed SIGKILL."""
    rundir = Path(rundir)
    state = read_state(rundir)
    if state is None:
        if not quiet:
            print(f"no cluster in {rundir} (no {STATE_FILE}); nothing to stop")
        return []
    # Workers first so that they leave the scheduler cleanly, then the scheduler.
    procs = state["processes"]
    worker_entries = [(p["pid"], p["create_time"]) for k, p in procs.items() if k != "scheduler"]
    killed = _terminate(worker_entries, grace)
    killed += _terminate([(procs["scheduler"]["pid"], procs["scheduler"]["create_time"])], grace)
    for name in (STATE_FILE, SCHEDULER_FILE):
        (rundir / name).unlink(missing_ok=True)
    for pid_file in rundir.glob("*.pid"):
        pid_file.unlink()
    if not quiet:
        extra = f" (SIGKILL needed for pids {killed})" if killed else ""
        print(f"stopped the cluster at {state['address']}{extra}")
    return killed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="start a scheduler and workers")
    p_start.add_argument("--dir", required=True, help="run directory (pid, log and scheduler files)")
    p_start.add_argument("--workers", type=int, default=2)
    p_start.add_argument("--threads-per-worker", type=int, default=1)
    p_start.add_argument("--memory-limit", default="2GB", help="per worker, e.g. 2GB, 0 = no limit")
    p_start.add_argument("--scheduler-port", type=int, default=8786, help="0 = any free port")
    p_start.add_argument("--dashboard-port", type=int, default=8787, help="0 = any free port, -1 = none")
    p_start.add_argument("--tls-dir", default=None, help="certificates from cluster/tls/make_certs.py")
    p_start.add_argument("--no-nanny", dest="nanny", action="store_false", help="run workers without a nanny")
    p_start.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the workers")
    p_start.add_argument("--quiet", action="store_true")
    p_status = sub.add_parser("status", help="show the processes and registered workers")
    p_status.add_argument("--dir", required=True)
    p_status.add_argument("--timeout", type=float, default=5.0)
    p_stop = sub.add_parser("stop", help="stop the scheduler and workers")
    p_stop.add_argument("--dir", required=True)
    p_stop.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    p_stop.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "start":
        try:
            start(
                args.dir, workers=args.workers, threads_per_worker=args.threads_per_worker,
                memory_limit=args.memory_limit, scheduler_port=args.scheduler_port,
                dashboard_port=args.dashboard_port, tls_dir=args.tls_dir, nanny=args.nanny,
                timeout=args.timeout, quiet=args.quiet,
            )
        except KeyboardInterrupt:
            # start() has stopped the processes it had started before this reaches here
            print("start interrupted: the processes it had started were stopped", file=sys.stderr)
            return 130
        return 0
    if args.command == "status":
        return status(args.dir, timeout=args.timeout)
    stop(args.dir, grace=args.grace, quiet=args.quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
