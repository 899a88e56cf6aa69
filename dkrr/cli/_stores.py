"""How the commands open a store: :func:`~dkrr.io.open_dataset` with the command's
``--storage-options``, its rows read in blocks of :func:`~dkrr.linalg._blocks.merged_rows`;
and how they check their output before any work (:func:`preflight`).

A store written with many small chunks (by another tool, or ``write_dataset`` of a dask
array chunked finely) is read a few megabytes at a time, as a store ``dkrr ingest`` wrote:
each block costs every pass a fixed overhead, and its rows are read by slice, so joining
chunks costs nothing. ``dkrr predict`` then writes its predictions in those blocks.
"""

from __future__ import annotations

import contextlib
import dataclasses


def open_store(args, *, require_y: bool):
    """The store ``args.store`` (:class:`~dkrr.io.ZarrDataset`), X and y in the same blocks."""
    from .._rows import rechunk_rows
    from ..io import open_dataset
    from ..linalg._blocks import merged_rows

    data = open_dataset(args.store, require_y=require_y, storage_options=args.storage_options)
    X = merged_rows(data.X)
    if X is data.X:
        return data
    y = None if data.y is None else rechunk_rows(data.y, {0: X.chunks[0]})
    return dataclasses.replace(data, X=X, y=y)


def preflight(args, *, can_replace, inputs) -> None:
    """Refuse an output that could not be written or must not be replaced, before any
    work (a fit that runs for hours must not end in "cannot write the model"); and a
    ``memory://`` output, which would die with the command's process (ingest and fit
    said "wrote memory://..." and exited 0; the Python API may write one)."""
    from ..errors import InvalidParameterError
    from ..io._atomic import check_output
    from ..io._paths import Remote, locate

    where = locate(args.out, args.storage_options, what="--out")
    if isinstance(where, Remote) and where.process_local:
        raise InvalidParameterError(
            f"--out {args.out}: a memory:// location lives in this command's process and ends with it; "
            "write to a path or an object store (s3://, gs://, ...)")
    check_output(args.out, overwrite=args.overwrite, can_replace=can_replace, inputs=inputs,
                 storage_options=args.storage_options)


@contextlib.contextmanager
def fit_output_lock(args):
    """Hold the lock on ``dkrr fit``'s local output from before the fit until the model is
    saved (the save, inside, takes it again: :func:`~dkrr.io._atomic.output_lock` nests),
    so a second fit of the same output is refused at once rather than after its whole
    fit, and of two concurrent ``--overwrite`` fits exactly one reports success. An
    object store's lock object is taken at the save (SECURITY.md)."""
    from ..io._atomic import output_lock
    from ..io._paths import Remote, locate

    if isinstance(locate(args.out, args.storage_options), Remote):
        yield
        return
    with output_lock(args.out, nested=True):
        yield


def dropped_rows_note(data, store) -> str | None:
    """The note for predictions of a store ingested with ``--missing drop``: its rows are
    its file's less the dropped ones (the store records how many, not which), so the
    predictions do not line up with the file's lines."""
    k = data.attrs.get("rows_dropped")
    if not k:
        return None
    return (f"{store} was ingested with --missing drop: its {int(data.X.shape[0]):,} rows are its file's less "
            f"{int(k):,} dropped row(s), so y_pred follows the store's rows, not the file's lines (fill the "
            "missing cells and ingest again to predict every line)")
