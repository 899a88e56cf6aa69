"""Start-up cost of dkrr: ``import dkrr``, ``dkrr --help`` and the estimators' import.

Each line runs in a new interpreter (``python -c ...``, or ``python -m dkrr.cli --help``,
what the ``dkrr`` command runs), timed from the parent around the whole process (wall
seconds: interpreter start, imports, exit), the median and minimum of ``--repeats`` runs
after one warm-up run of each (byte-code caches written), and its CPU seconds (user +
system, less inflated by other work on the machine). "beyond" is the median
of a line that first imports numpy, scipy and scikit-learn (what a scikit-learn user pays
already) minus the median of that import alone; the goal is ``import dkrr`` and ``dkrr
--help`` well under 1 s beyond it (they import no library at all:
tests/test_lazy_imports.py). Then the packages that ``from dkrr import RandomFeatureRidge``
spends its time in, by ``python -X importtime`` (cumulative, one run). Takes about a
minute::

    python benchmarks/bench_import.py [--repeats 7] [--allow-load]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

import numpy as np

try:
    from benchmarks._validity import add_load_arguments, script_end, script_start
except ImportError:  # run as a script from benchmarks/
    from _validity import add_load_arguments, script_end, script_start  # type: ignore[no-redef]

BASELINE = "import numpy, scipy, sklearn"
_HELP = "from dkrr.cli import main; main(['--help'])"
#: (label, arguments after the interpreter, whether it starts with the baseline's imports)
CASES = [
    ("interpreter alone", ["-c", "pass"], False),
    (BASELINE, ["-c", BASELINE], False),
    ("import dkrr", ["-c", "import dkrr"], False),
    ("dkrr --help", ["-m", "dkrr.cli", "--help"], False),
    ("from dkrr import load_model", ["-c", "from dkrr import load_model"], False),
    ("baseline + import dkrr", ["-c", f"{BASELINE}; import dkrr"], True),
    ("baseline + dkrr --help", ["-c", f"{BASELINE}; {_HELP}"], True),
    ("baseline + from dkrr import RandomFeatureRidge", ["-c", f"{BASELINE}; from dkrr import RandomFeatureRidge"],
     True),
    ("baseline + import dask.array, distributed, zarr, numba",
     ["-c", f"{BASELINE}; import dask.array, distributed, zarr, numba"], True),
]


def run_seconds(args: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``python *args`` in a new process; CPU: the child's user +
    system time, which other work on the machine inflates less than the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def top_imports(statement: str, n: int = 8) -> list[tuple[str, float]]:
    """The ``n`` packages (``python -X importtime`` names without a dot, at any depth)
    with the largest cumulative import time (s) in ``statement``."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], capture_output=True,
                          text=True, check=True)
    rows = {}
    for line in proc.stderr.splitlines()[1:]:
        parts = line.split("|")
        name = parts[-1].strip()
        if len(parts) == 3 and "." not in name and not name.startswith("_"):
            rows[name] = max(rows.get(name, 0.0), int(parts[1]) / 1e6)
    return sorted(rows.items(), key=lambda r: -r[1])[:n]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    add_load_arguments(ap)
    args = ap.parse_args(argv)
    run_start = script_start(args)
    print(f"Python {sys.version.split()[0]}; seconds of a new interpreter, median (wall: and min) "
          f"of {args.repeats} runs after a warm-up; beyond: minus the baseline ({BASELINE})")
    for _, case, _ in CASES:
        run_seconds(case)
    wall, cpu = {}, {}
    print(f"{'what':56s} {'wall s':>7s} {'min':>6s} {'beyond':>7s} {'CPU s':>6s} {'beyond':>7s}")
    for label, case, on_baseline in CASES:
        runs = np.array([run_seconds(case) for _ in range(args.repeats)])
        wall[label], cpu[label] = np.median(runs, axis=0)
        beyond = (f"{wall[label] - wall[BASELINE]:+7.3f}", f"{cpu[label] - cpu[BASELINE]:+7.3f}") \
            if on_baseline else ("", "")
        print(f"{label:56s} {wall[label]:7.3f} {runs[:, 0].min():6.3f} {beyond[0]:>7s} {cpu[label]:6.3f} "
              f"{beyond[1]:>7s}", flush=True)
    statement = "from dkrr import RandomFeatureRidge"
    print(f"\nlargest packages imported by `{statement}` (python -X importtime, cumulative s):")
    for name, seconds in top_imports(statement):
        print(f"  {name:40s} {seconds:7.3f}")
    script_end(run_start)


if __name__ == "__main__":
    main()
