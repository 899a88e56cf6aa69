"""Print the installed version of each dependency pyproject.toml declares (and its test extra).

``python scripts/dep_versions.py --oldest`` also checks that each dependency installed is
its lower bound (what ``scripts/test.sh --oldest`` installs): a bound that no installable
release matches (a yanked release, no wheel for this Python) is reported and the exit
status is 1, so a lower bound is always a version the suite ran with.
"""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def declared(extras=("test",)) -> list[Requirement]:
    """The requirements of pyproject.toml that apply here: dependencies, then the extras'."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"].get(extra, [])
    return [r for r in map(Requirement, reqs) if r.marker is None or r.marker.evaluate()]


def lower_bound(req: Requirement) -> Version | None:
    bounds = [Version(s.version) for s in req.specifier if s.operator in (">=", "==", "~=")]
    return max(bounds) if bounds else None


def main(argv: list[str]) -> int:
    oldest = "--oldest" in argv
    print(f"Python {sys.version.split()[0]}; dkrr's dependencies as installed:")
    wrong = []
    for req in declared():
        bound = lower_bound(req)
        try:
            got = version(req.name)
        except PackageNotFoundError:
            got = None
        print(f"  {req.name:<16} {got or 'NOT INSTALLED':<14} (requires {req.specifier or 'any'})")
        if got is None or (oldest and bound is not None and Version(got) != bound):
            wrong.append(f"{req.name}: installed {got}, lower bound {bound}")
    if wrong:
        print("dependencies not at the version pyproject.toml's bound names "
              "(raise the bound to the version installed, after a run with it):\n  "
              + "\n  ".join(wrong), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
