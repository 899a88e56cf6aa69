"""Benchmark runner: ``python -m benchmarks [--quick] [--suites ...] [--out DIR] [--repeats N]``.

Suites (modules ``benchmarks/suite_<name>.py``):

- ``peers``: dkrr versus scikit-learn (RBFSampler/Nystroem + Ridge, exact KernelRidge,
  scikit-learn-extra Fastfood when usable) on real and synthetic data at equal accuracy;
- ``roofline``: dkrr's fit against a bare ``Z.T @ Z`` and the FWHT maps against copy
  bandwidth, in the same run;
- ``scaling``: fit time and memory versus n (out of core from Zarr) and versus D;
- ``approx``: kernel approximation MSE versus D for every projection (PNG plot).

Writes ``report.md``, ``results.json`` (and ``approx_mse.png``) into ``--out``
(default ``benchmarks/results/<quick|full>-<timestamp>``). A run refuses to start on a busy
machine (1-minute load above ``--max-load-per-core`` x cores) unless ``--allow-load``;
the report states whether it may be published (quiet at the start and during the run,
committed tree;
see ``benchmarks/_validity.py``) and says NOT FOR PUBLICATION otherwise. A suite that fails is recorded
with its traceback; the others still run. The exit status is 0 when every suite ran.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import shlex
import sys
import time
import traceback
from pathlib import Path

from ._common import Config, machine_info
from ._validity import DEFAULT_MAX_LOAD_PER_CORE, LoadTooHighError, check_quiet, cpu_snapshot, validity_meta
from .report import write_results

SUITES = ("peers", "roofline", "scaling", "approx", "speed")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes: everything in a few minutes on 2 cores")
    p.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated subset of {','.join(SUITES)}")
    p.add_argument("--out", type=Path, default=None, help="output folder (default benchmarks/results/<mode>-<timestamp>)")
    p.add_argument("--repeats", type=int, default=None, help="timed repetitions per measurement (default 2 quick, 3 full)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-load-per-core", type=float, default=DEFAULT_MAX_LOAD_PER_CORE,
                   help="1-minute load average per core above which a run is not publishable (default %(default)s)")
    p.add_argument("--allow-load", action="store_true",
                   help="run on a busy machine anyway; the report is marked NOT FOR PUBLICATION")
    args = p.parse_args(argv)
    names = [s.strip() for s in args.suites.split(",") if s.strip()]
    bad = [s for s in names if s not in SUITES]
    if bad or not names:
        p.error(f"unknown suite(s) {bad}; choose from {', '.join(SUITES)}")
    args.suite_list = names
    if args.repeats is None:
        args.repeats = 2 if args.quick else 3
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    if args.out is None:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        args.out = Path(__file__).resolve().parent / "results" / f"{'quick' if args.quick else 'full'}-{stamp}"
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    argv_used = sys.argv[1:] if argv is None else list(argv)
    command = "python -m benchmarks " + " ".join(shlex.quote(a) for a in argv_used)
    try:
        check_quiet(allow_load=args.allow_load, max_load_per_core=args.max_load_per_core)
    except LoadTooHighError as exc:
        print(f"[benchmarks] refused: {exc}", file=sys.stderr)
        return 3
    cpu_start = cpu_snapshot()
    cfg = Config(quick=args.quick, repeats=args.repeats, out=args.out, seed=args.seed)
    cfg.out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    meta = {
        "command": command.strip(),
        "started": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "quick": args.quick,
        "repeats": args.repeats,
        "seed": args.seed,
        "suites": args.suite_list,
        "machine": machine_info(),
    }
    results = {"meta": meta, "suites": {}}
    renderers, headlines = {}, {}
    all_ok = True
    for name in args.suite_list:
        mod = importlib.import_module(f".suite_{name}", __package__)
        renderers[name] = mod.render
        headlines[name] = getattr(mod, "headline", None)
        print(f"[benchmarks] suite {name} ...", flush=True)
        t0 = time.perf_counter()
        entry = {"title": mod.TITLE}
        try:
            entry["result"] = mod.run(cfg)
            entry["status"] = "ok"
        except Exception:
            entry["status"] = "error"
            entry["error"] = traceback.format_exc()
            all_ok = False
            print(entry["error"], file=sys.stderr)
        entry["duration_s"] = time.perf_counter() - t0
        results["suites"][name] = entry
        print(f"[benchmarks] suite {name} {entry['status']} in {entry['duration_s']:.1f} s", flush=True)
        meta["duration_s"] = time.perf_counter() - t_start
        meta["validity"] = _validity(meta, args, cpu_start)
        write_results(cfg.out, results, renderers, headlines)  # keep partial results if a later suite dies
    meta["duration_s"] = time.perf_counter() - t_start
    meta["validity"] = _validity(meta, args, cpu_start)
    for problem in meta["validity"]["problems"]:
        print(f"[benchmarks] NOT FOR PUBLICATION: {problem}", file=sys.stderr)
    jpath, rpath = write_results(cfg.out, results, renderers, headlines)
    print(f"[benchmarks] wrote {rpath} and {jpath} ({meta['duration_s']:.0f} s)")
    return 0 if all_ok else 1


def _validity(meta: dict, args: argparse.Namespace, cpu_start: dict) -> dict:
    m = meta["machine"]
    return validity_meta(m["load_average_at_start"], m["dkrr_commit"], cpu_start,
                         max_load_per_core=args.max_load_per_core)


if __name__ == "__main__":
    sys.exit(main())
