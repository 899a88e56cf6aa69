#!/usr/bin/env python
"""Run a Dask cluster on SLURM or PBS with dask-jobqueue and point dkrr at it.

Usage (on the cluster's login node, inside the dkrr virtualenv)::

    # show the batch script each worker job will run, submit nothing
    python cluster/slurm/jobqueue_cluster.py --system slurm --config cluster/slurm/jobqueue.yaml \\
        --print-job-script

    # start the scheduler here, submit 4 worker jobs, run a dkrr command against the cluster,
    # then cancel the jobs ({scheduler} is replaced by the scheduler address)
    python cluster/slurm/jobqueue_cluster.py --system slurm --jobs 4 \\
        --config cluster/slurm/jobqueue.yaml -- \\
        dkrr fit data.zarr --out model --scheduler {scheduler}

    # or keep the cluster up until Ctrl-C and use the scheduler file from other shells
    python cluster/slurm/jobqueue_cluster.py --system pbs --jobs 4 \\
        --scheduler-file ~/dkrr-scheduler.json

The scheduler runs in this process (the login node); workers run in batch jobs and connect
back to it. The options given here override the YAML configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

SYSTEMS = ("slurm", "pbs")


def load_config(path, system):
    """Read the ``jobqueue.<system>`` section of a jobqueue YAML file as cluster keyword arguments.

    Keys are translated to the keyword names of the dask-jobqueue classes
    (``job-extra-directives`` -> ``job_extra_directives``, ``name`` -> ``job_name``); null
    values are dropped so that the Dask defaults apply.
    """
    import yaml

    with open(path) as f:
        data = yaml.safe_load(f) or {}
    try:
        section = data["jobqueue"][system]
    except (KeyError, TypeError):
        raise SystemExit(f"{path}: expected a 'jobqueue: {system}:' mapping.") from None
    kwargs = {}
    for key, value in section.items():
        if value is None:
            continue
        kwargs["job_name" if key == "name" else key.replace("-", "_")] = value
    return kwargs


def make_cluster(system, *, config=None, **overrides):
    """Create a ``SLURMCluster`` or ``PBSCluster``; no job is submitted until ``scale``.

    Parameters
    ----------
    system : {"slurm", "pbs"}
    config : str or path-like, default=None
        A jobqueue YAML file (like ``cluster/slurm/jobqueue.yaml``) whose
        ``jobqueue.<system>`` section gives the cluster's keyword arguments; without it
        the Dask configuration (``~/.config/dask/jobqueue.yaml``) is used.
    **overrides
        Keyword arguments of the dask-jobqueue cluster class (``cores``, ``memory``,
        ``queue``, ``scheduler_options``, ...), taking precedence over ``config``;
        ``None`` values are ignored. ``scheduler_options`` are merged.

    Returns
    -------
    cluster : dask_jobqueue.SLURMCluster or dask_jobqueue.PBSCluster
        Its scheduler runs in this process; ``cluster.job_script()`` renders the batch
        script without submitting anything.
    """
    from dask_jobqueue import PBSCluster, SLURMCluster

    if system not in SYSTEMS:
        raise SystemExit(f"--system must be one of {SYSTEMS}, got {system!r}.")
    cls = SLURMCluster if system == "slurm" else PBSCluster
    kwargs = load_config(config, system) if config else {}
    scheduler_options = {**kwargs.pop("scheduler_options", {}), **(overrides.pop("scheduler_options", None) or {})}
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    if scheduler_options:
        kwargs["scheduler_options"] = scheduler_options
    return cls(**kwargs)


def _write_scheduler_file(path, address):
    path = Path(path).expanduser()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"address": address}) + "\n")
    os.replace(tmp, path)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    command = []
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", choices=SYSTEMS, default="slurm")
    parser.add_argument("--config", help="jobqueue YAML (default: the Dask configuration)")
    parser.add_argument("--jobs", type=int, default=1, help="number of worker jobs to submit")
    parser.add_argument("--cores", type=int, help="cores per job")
    parser.add_argument("--processes", type=int, help="worker processes per job")
    parser.add_argument("--memory", help="memory per job, e.g. 32GB")
    parser.add_argument("--walltime", help="e.g. 02:00:00")
    parser.add_argument("--queue", help="partition (SLURM) or queue (PBS)")
    parser.add_argument("--account", help="account / project to charge")
    parser.add_argument("--scheduler-host", help="address the scheduler listens on (default: the node's)")
    parser.add_argument("--scheduler-file", help="write {'address': ...} here for other clients")
    parser.add_argument("--print-job-script", action="store_true", help="print the job script and exit")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the first worker")
    args = parser.parse_args(argv)

    scheduler_options = {"host": args.scheduler_host} if args.scheduler_host else None
    cluster = make_cluster(
        args.system, config=args.config, cores=args.cores, processes=args.processes,
        memory=args.memory, walltime=args.walltime, queue=args.queue, account=args.account,
        scheduler_options=scheduler_options,
    )
    with cluster:
        if args.print_job_script:
            print(cluster.job_script())
            return 0
        address = cluster.scheduler_address
        print(f"scheduler {address}; dashboard {cluster.dashboard_link}", flush=True)
        if args.scheduler_file:
            _write_scheduler_file(args.scheduler_file, address)
        cluster.scale(jobs=args.jobs)
        from distributed import Client

        with Client(cluster) as client:
            client.wait_for_workers(1, timeout=args.timeout)
            if command:
                cmd = [part.replace("{scheduler}", address) for part in command]
                print("running:", shlex.join(cmd), flush=True)
                return subprocess.call(cmd)
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            print("cluster running; Ctrl-C to cancel the jobs", flush=True)
            stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
