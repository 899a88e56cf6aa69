"""The package version (one place; ``dkrr.__version__`` re-exports it) and the digest of
the installed sources, which tells two installs apart that share a version string (a
release and a git checkout, or two checkouts)."""

from __future__ import annotations

import functools

__version__ = "0.1.0"


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """The first 16 hex digits of the sha256 of dkrr's Python sources as this process
    imports them (every ``*.py`` under the package, by relative path, in sorted order).
    Equal digests: the same code; a worker whose digest differs from its client's runs
    other code under the same name."""
    import hashlib
    from pathlib import Path

    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def install_identity() -> tuple[str, str]:
    """``(version, source digest)`` of the dkrr this process imports (what
    :func:`dkrr._connection.check_workers_dkrr` asks each worker for)."""
    return __version__, source_digest()
