"""The layering of docs/architecture.md, checked on the source: a layer imports only from
the layers below it (deferred imports inside functions included), and no module grows
past the size a reader can hold in mind."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dkrr"

#: rank of each top-level part of the package; a module may import ranks <= its own
LAYERS = {
    "errors": 0, "_validation": 0, "_frames": 0, "_params": 0, "_progress": 0, "_watch": 0, "_failures": 0, "_blas": 0, "_version": 0, "_jit": 0, "_system": 0,
    "_rows": 0,
    "features": 1,
    "linalg": 2, "bandwidth": 2,
    "sampling": 3,
    "estimators": 4,
    "io": 5,
    "cli": 6,
}
#: beside the layers: they may import the base and each other, and only the CLI (and the
#: package's own __init__) imports them
SIDE = {"cluster", "_connection", "_scheduler_probe", "_worker_setup", "datasets"}
MAX_LINES = 500


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        yield path, parts, is_pkg


def _imports(path: Path, parts: list[str], is_pkg: bool):
    """(line, absolute dkrr module path) of every import of a dkrr module in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts if is_pkg else parts[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = base + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            if target[0] != "dkrr":
                continue
            if node.module is None or len(target) == 1:  # `from . import x`, `from dkrr import x`
                for alias in node.names:
                    yield node.lineno, target + [alias.name]
            else:
                yield node.lineno, target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dkrr":
                    yield node.lineno, alias.name.split(".")


def _part(modpath: list[str]) -> str | None:
    return modpath[1] if len(modpath) > 1 else None


def test_every_part_of_the_package_has_a_place():
    parts = {_part(p) for _, p, _ in _modules()} - {None, "__init__", "data"}
    assert parts <= set(LAYERS) | SIDE, f"place these in docs/architecture.md and here: {parts - set(LAYERS) - SIDE}"


def test_layers_import_only_downwards():
    wrong = []
    for path, parts, is_pkg in _modules():
        src = _part(parts)
        if src is None:  # dkrr/__init__.py assembles the public API
            continue
        for line, target in _imports(path, parts, is_pkg):
            dst = _part(target)
            if dst is None or dst == src:
                continue
            if src in SIDE:
                ok = dst in SIDE or LAYERS.get(dst, 99) == 0
            elif dst in SIDE:
                ok = src == "cli"
            else:
                ok = LAYERS[dst] <= LAYERS[src]
            if not ok:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {'.'.join(target)}")
    assert not wrong, "imports against the layering of docs/architecture.md:\n" + "\n".join(wrong)


@pytest.mark.parametrize("path", [p for p, _, _ in _modules()], ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{path.name} has {n} lines; split it by concern (docs/architecture.md)"
