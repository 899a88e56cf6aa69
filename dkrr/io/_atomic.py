"""Write outputs under a temporary name and rename them into place only on success.

Every output dkrr writes (an ingested Zarr store, a saved model directory, a store of
predictions) goes through :func:`atomic_output`, so an interrupted or failed run never
leaves something at the final path that looks complete.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import OutputExistsError

__all__ = ["atomic_output"]


def _remove(path: Path) -> None:
    """Delete a file, link or directory tree if it exists (best effort)."""
    if path.is_symlink() or path.is_file():
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)


def _sibling(path: Path, kind: str) -> Path:
    return path.parent / f".{path.name}.{kind}-{secrets.token_hex(4)}"


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike,
    overwrite: bool = False,
    *,
    can_replace: Callable[[Path], str | None] | None = None,
) -> Iterator[Path]:
    """Context manager that yields a temporary path and moves it to `path` on success.

    The body of the ``with`` statement creates a file or a directory at the yielded
    temporary path, a hidden sibling of `path` named ``.{name}.tmp-{random}`` (same
    directory, hence same filesystem, so the final rename is atomic). When the body
    finishes without an exception the temporary path is renamed to `path`. When the
    body raises anything (``KeyboardInterrupt`` included) the temporary path is removed
    and the exception propagates; an existing output at `path` is left untouched.

    Parameters
    ----------
    path : str or os.PathLike
        Final location of the output. Missing parent directories are created.
    overwrite : bool, default=False
        Whether an existing `path` may be replaced. It is checked on entry, before the
        body does any work, and again just before the rename. The old output is moved
        aside only after the new one is complete, and deleted after the new one is in
        place.
    can_replace : callable, optional
        Called as ``can_replace(path)`` when `path` exists and `overwrite` is true. It
        returns ``None`` when the existing output may be replaced, or a short reason
        why not (for example ``"it is not a Zarr store"``), which guards against
        deleting an unrelated file or directory by a mistyped ``--out``.

    Yields
    ------
    tmp : pathlib.Path
        The temporary path to write to. Nothing exists there yet.

    Raises
    ------
    OutputExistsError
        If `path` exists and `overwrite` is false, or `can_replace` refuses it, or
        `path` contains the current working directory.

    Notes
    -----
    Replacing an existing directory takes two renames (old output aside, new output
    in), so for a moment neither is at `path`; a crash in between leaves the old output
    at ``.{name}.old-{random}``. A process killed with SIGKILL can leave a
    ``.{name}.tmp-{random}`` directory behind; it is never mistaken for the output.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "result.txt"
    >>> with atomic_output(out) as tmp:
    ...     _ = tmp.write_text("done")
    >>> out.read_text()
    'done'
    """
    path = Path(os.path.abspath(os.fspath(path)))
    _check_target(path, overwrite, can_replace)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, "tmp")
    try:
        yield tmp
        if not os.path.lexists(tmp):
            raise FileNotFoundError(
                f"atomic_output: nothing was written at the temporary path {tmp}"
            )
        _check_target(path, overwrite, can_replace)
        _swap_in(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _check_target(
    path: Path, overwrite: bool, can_replace: Callable[[Path], str | None] | None
) -> None:
    if not os.path.lexists(path):
        return
    if not overwrite:
        raise OutputExistsError(
            f"output {path} exists already; choose another path or pass "
            "overwrite=True (--overwrite) to replace it"
        )
    cwd = Path(os.getcwd())
    if path == cwd or path in cwd.parents:
        raise OutputExistsError(
            f"refusing to overwrite {path}: it contains the current working directory"
        )
    if can_replace is not None:
        reason = can_replace(path)
        if reason:
            raise OutputExistsError(f"refusing to overwrite {path}: {reason}")


def _swap_in(tmp: Path, path: Path) -> None:
    """Rename `tmp` to `path`, replacing whatever is at `path` only at the very end."""
    if not os.path.lexists(path):
        os.replace(tmp, path)
        return
    backup = _sibling(path, "old")
    os.replace(path, backup)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(backup, path)
        raise
    _remove(backup)
