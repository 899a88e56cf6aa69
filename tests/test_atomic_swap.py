"""A signal while ``--overwrite`` deletes the output it has just replaced.

The new output is renamed into place first; the old one, moved aside to
``.NAME.old-RANDOM``, is deleted after (minutes for a store of many chunk files). A Ctrl-C
during that deletion said "interrupted; no partial output was left behind" (exit 130),
although the new output was in place, and left the hidden folder with the old output
behind without a word. The command now names the output as written in full and the
remains to delete; the signal still stops the deletion at once.

The command runs as a real subprocess and gets a real SIGINT from the kernel, sent by
the process itself after the deletion of the old output has removed its first files (so
it lands inside ``shutil.rmtree`` every time, where a signal from outside would need a
store large enough to be caught mid-deletion).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest

from dkrr.io import open_dataset, write_dataset

#: run ``dkrr.cli.main(argv)``; once the output moved aside (``.NAME.old-``) is being
#: deleted, the process sends itself SIGINT at its third file deleted
_CHILD = textwrap.dedent("""
    import os, signal, sys
    from dkrr.io import _atomic

    remove, unlink, seen = _atomic._remove, os.unlink, []

    def counting_unlink(*args, **kwargs):
        unlink(*args, **kwargs)
        seen.append(args[0])
        if len(seen) == 3:
            os.kill(os.getpid(), signal.SIGINT)

    def hooked_remove(path):
        if ".old-" in path.name:
            os.unlink = counting_unlink
        try:
            remove(path)
        finally:
            os.unlink = unlink

    _atomic._remove = hooked_remove
    from dkrr.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def _hidden(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_a_signal_while_the_replaced_output_is_deleted_names_the_output_and_its_remains(tmp_path):
    old_X = np.arange(120.0).reshape(60, 2)
    with dask.config.set(scheduler="threads"):
        write_dataset(da.from_array(old_X, chunks=(5, 2)), da.from_array(old_X[:, 0], chunks=5),
                      tmp_path / "d.zarr")  # ~30 files to delete
    csv = tmp_path / "new.csv"
    csv.write_text("a,b,t\n1,2,3\n4,5,6\n7,8,9\n")
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "ingest", str(csv), "--out", str(tmp_path / "d.zarr"),
         "--overwrite", "-q"], capture_output=True, text=True, timeout=180)
    err = proc.stderr
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    # the new output is in place, complete, and said to be
    new = open_dataset(tmp_path / "d.zarr")
    with dask.config.set(scheduler="threads"):
        np.testing.assert_array_equal(new.X.compute(), [[1, 2], [4, 5], [7, 8]])
    assert f"after {tmp_path / 'd.zarr'} had been written in full" in err, err
    assert "no partial output was left behind" not in err, err
    # what is left of the old output is named, to be deleted: nothing hides it
    left = [name for name in _hidden(tmp_path) if name.startswith(".d.zarr.old-")]
    assert len(left) == 1 and (tmp_path / left[0]).is_dir(), _hidden(tmp_path)
    assert f"delete {tmp_path / left[0]} " in err, err
    assert not [name for name in _hidden(tmp_path) if ".tmp-" in name]


def test_the_python_api_says_the_same_in_the_exception(tmp_path, monkeypatch):
    """In a Python session the KeyboardInterrupt carries the note; the output is recorded as
    committed and the remains as left behind (what the command line prints), and a signal
    that comes after the deletion changes nothing of that."""
    from dkrr.io import _atomic
    from dkrr.io._paths import COMMITTED, LEFT_BEHIND

    # Python's own SIGINT handler: a module imported earlier in this process may have put its
    # own (dask_jobqueue's runner exits the process: SystemExit, seen in the full suite)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupted_replacement(tmp_path, monkeypatch, _atomic, COMMITTED, LEFT_BEHIND)
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupted_replacement(tmp_path, monkeypatch, _atomic, COMMITTED, LEFT_BEHIND):
    """The body of test_the_python_api_says_the_same_in_the_exception."""
    with dask.config.set(scheduler="threads"):
        write_dataset(da.ones((40, 2), chunks=(5, 2)), da.ones(40, chunks=5), tmp_path / "d.zarr")
    unlink, seen = os.unlink, []

    def counting_unlink(*args, **kwargs):
        unlink(*args, **kwargs)
        seen.append(args[0])
        if len(seen) == 3:
            os.kill(os.getpid(), signal.SIGINT)  # default_int_handler: KeyboardInterrupt here

    remove = _atomic._remove

    def hooked_remove(path):
        if ".old-" in path.name:
            monkeypatch.setattr(os, "unlink", counting_unlink)
        try:
            remove(path)
        finally:
            monkeypatch.setattr(os, "unlink", unlink)

    monkeypatch.setattr(_atomic, "_remove", hooked_remove)
    COMMITTED.clear(), LEFT_BEHIND.clear()
    with dask.config.set(scheduler="threads"), pytest.raises(KeyboardInterrupt) as info:
        write_dataset(np.zeros((10, 2)), np.zeros(10), tmp_path / "d.zarr", overwrite=True)
    left = [tmp_path / n for n in _hidden(tmp_path) if n.startswith(".d.zarr.old-")]
    assert len(left) == 1
    assert COMMITTED == [str(tmp_path / "d.zarr")] and LEFT_BEHIND == [str(left[0])]
    assert any(str(left[0]) in note and "written in full" in note for note in info.value.__notes__)
    assert open_dataset(tmp_path / "d.zarr").n_samples == 10
    COMMITTED.clear(), LEFT_BEHIND.clear()


def test_an_object_store_replacement_interrupted_after_its_commit_is_recorded(monkeypatch):
    """The same step of an object store's replacement: after the commit, the spare copy
    under ``.NAME.tmp-`` is deleted; a signal then skipped the record of the output."""
    from dkrr.io import _remote
    from dkrr.io._paths import COMMITTED, LEFT_BEHIND

    url = f"memory://dkrr-{secrets.token_hex(4)}/d.zarr"
    with dask.config.set(scheduler="threads"):
        write_dataset(np.ones((20, 2)), np.ones(20), url)
        delete = _remote._delete

        def interrupted_delete(where):
            if ".tmp-" in where.path:
                raise KeyboardInterrupt
            delete(where)

        monkeypatch.setattr(_remote, "_delete", interrupted_delete)
        COMMITTED.clear(), LEFT_BEHIND.clear()
        with pytest.raises(KeyboardInterrupt):
            write_dataset(np.zeros((10, 2)), np.zeros(10), url, overwrite=True)
        assert COMMITTED == [_remote.locate(url, None, what="output").url]
        assert len(LEFT_BEHIND) == 2 and ".d.zarr.tmp-" in LEFT_BEHIND[0]
        spare = _remote.locate(LEFT_BEHIND[0], None, what="output")
        assert LEFT_BEHIND[1] == _remote.marker_of(spare).url  # refused by readers meanwhile
        assert open_dataset(url).n_samples == 10
    COMMITTED.clear(), LEFT_BEHIND.clear()
