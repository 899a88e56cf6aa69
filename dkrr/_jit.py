"""Where numba caches dkrr's compiled kernels: a user cache folder, not the package.

``numba.njit(cache=True)`` writes its cache into ``__pycache__`` beside the source file
when that folder is writable, that is into the checkout of an editable install. dkrr's
kernels are cached in ``$NUMBA_CACHE_DIR`` when the user set it, else in
``$XDG_CACHE_HOME/dkrr/numba`` (``~/.cache/dkrr/numba``). Caching matters: each kernel
takes about a second to compile, in every new process (every LocalCluster worker).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "njit_cached"]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/dkrr/numba`` (``~/.cache/dkrr/numba`` when it is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "dkrr" / "numba"


def njit_cached(**options):
    """``numba.njit(cache=True, **options)`` with the cache in :func:`cache_dir` unless
    ``NUMBA_CACHE_DIR`` names one. numba picks a function's cache folder when it is
    decorated, so the setting is changed for that moment only: other numba code keeps
    its own cache location."""
    import numba

    def decorate(func):
        previous = numba.config.CACHE_DIR
        if not previous:
            numba.config.CACHE_DIR = str(cache_dir())
        try:
            return numba.njit(cache=True, **options)(func)
        finally:
            numba.config.CACHE_DIR = previous

    return decorate
