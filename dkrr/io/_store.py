"""Open, validate and write the Zarr stores dkrr reads and writes.

Zarr layout
-----------
A dkrr dataset is a Zarr group (Zarr format 3; a format 2 group is read as well) that
holds two arrays:

``X``
    The features, shape ``(n_samples, n_features)``, dtype float32 or float64 (any
    integer or floating dtype is accepted on input). Chunked along rows only:
    chunks ``(chunk_rows, n_features)``. ``dkrr ingest`` compresses each chunk with
    Blosc (zstd, level 3, byte shuffle).
``y``
    The targets, shape ``(n_samples,)`` for one target or ``(n_samples, n_targets)``
    for several, chunked along rows like ``X``. Float (same dtype as ``X``) for a
    numeric target; int32 class codes ``0 .. k-1`` when the target column held labels.
    Absent from a store of features alone (a file to predict, ingested with
    ``target=[]`` / ``--no-target``; ``target_names`` is then empty): ``predict`` reads
    it, and opening it for a fit or a score is a :class:`~dkrr.errors.StoreError` that
    says so.

and these group attributes (written by ``dkrr ingest``; all optional on input):

``dkrr_layout``
    Layout version, ``1``.
``feature_names``, ``target_names``
    Lists of column names (from the CSV header; ``column_{j}`` for a CSV without a
    header or a ``.npy`` matrix, ``j`` being the 0-based column in the input; for
    LIBSVM no feature names (its columns are indices; stores written before recorded
    ``feature_{j}``, 0-based) and the target name ``label``).
``source``, ``format``
    Absolute path of the ingested file (or Parquet directory) and its format (``csv``,
    ``libsvm``, ``npy`` or ``parquet``).
``classes``
    Present only when the target column was not numeric: the original labels, sorted
    by ``dkrr ingest`` (as numbers when every label is one), in the order given by
    :func:`write_dataset`; ``y == i`` means label ``classes[i]``. A list of distinct strings;
    with it ``y`` must hold integer codes ``0 .. len(classes) - 1`` (else a
    :class:`~dkrr.errors.StoreError`, for a code when its block is read; see
    :mod:`dkrr.io._labels`). Codes are local to a store: ``dkrr evaluate`` compares
    labels, not codes.
``dkrr_arrays``
    What dkrr wrote: ``{name: {"shape": [...], "chunks": [...]}}`` for each array.
    dkrr writes every chunk (all-zero ones too), so when this record is present a
    store whose arrays differ from it, or lack a chunk of their grid, is refused
    when opened (:class:`~dkrr.errors.StoreError` naming the array and the rows)
    instead of being read with zeros. Stores without it (written by another program
    or an older dkrr) are read by Zarr's rules.

Any Zarr group with ``X`` and ``y`` laid out like this is a valid input, whatever wrote
it. ``X`` chunked along columns is accepted too (it is rechunked to whole rows when
read). Predictions are written as a group holding ``y_pred`` (``(n_samples,)`` or
``(n_samples, n_outputs)``), chunked along rows like the input (with ``dkrr predict --std``
also ``y_std``, same shape: the predictive std of a new ``"observation"`` or of the
``"latent"`` function, as the attribute ``y_std`` says), the attributes ``dkrr_layout``,
``dkrr_arrays`` and ``dkrr_predictions = 1`` and those the caller passes (a classifier of
text labels: int32 codes in ``y_pred``, the labels in ``classes``, as in a dataset).

A store is refused when opened if an array's metadata does not parse, if its
metadata declares a block over
:data:`~dkrr.io._reader.MAX_BLOCK_BYTES` (2 GiB) or more than
:data:`~dkrr.io._reader.MAX_BLOCKS` row blocks; a chunk that cannot be decoded is a
:class:`~dkrr.errors.StoreError` naming the array and the store. ``overwrite=True``
replaces only a dkrr store of the same kind (see :mod:`dkrr.io._kinds`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import zarr
from zarr.codecs import BloscCodec

from ..errors import InputValidationError, StoreError
from ._atomic import atomic_output, interrupts_deferred
from ._drain import run_store_tasks, store_tasks
from ._kinds import (
    LAYOUT_VERSION,
    PREDICTIONS_MARKER,
    predictions_replace_check,
    zarr_replace_check,
)
from ._labels import checked_class_codes, store_classes
from ._paths import Remote, locate, zarr_location
from ._reader import (MANIFEST, array_names, check_numeric, check_written, manifest, open_array,
                      open_group, read_array)
from ._write_inputs import as_dask, class_codes, regular_rows

__all__ = [
    "LAYOUT_VERSION",
    "PREDICTIONS_MARKER",
    "ZarrDataset",
    "create_arrays",
    "open_dataset",
    "write_dataset",
    "write_predictions",
]



def default_compressors() -> tuple[BloscCodec, ...]:
    """Compressors used for every array dkrr writes (Blosc zstd level 3, shuffle)."""
    return (BloscCodec(cname="zstd", clevel=3, shuffle="shuffle"),)


@dataclass
class ZarrDataset:
    """A dataset opened from a Zarr store, as lazy dask arrays.

    Attributes
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Features, chunked along rows with the store's row chunks, one chunk across all
        columns.
    y : dask.array.Array of shape (n_samples,) or (n_samples, n_targets), or None
        Targets with the same row chunks as `X`; ``None`` when the store has no ``y``
        and it was not required.
    attrs : dict
        The group attributes (see the layout in this module's docstring).
    path : str
        Absolute path of the store, or its URL (``s3://bucket/key``).
    """

    X: da.Array
    y: da.Array | None
    attrs: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    @property
    def n_samples(self) -> int:
        """Number of rows."""
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of feature columns."""
        return int(self.X.shape[1])

    @property
    def feature_names(self) -> list[str] | None:
        """Column names of `X` from the attributes, if recorded."""
        names = self.attrs.get("feature_names")
        return list(names) if names is not None else None

    @property
    def target_names(self) -> list[str] | None:
        """Column names of `y` from the attributes, if recorded."""
        names = self.attrs.get("target_names")
        return list(names) if names is not None else None

    @property
    def classes(self) -> list[str] | None:
        """Original class labels (``y`` holds their indices), or None for numeric y."""
        classes = self.attrs.get("classes")
        return list(classes) if classes is not None else None


def open_dataset(path: str | os.PathLike, *, require_y: bool = True,
                 storage_options: Mapping[str, Any] | None = None) -> ZarrDataset:
    """Open a Zarr store laid out as a dkrr dataset, lazily.

    Nothing is read but metadata: `X` and `y` are dask arrays backed by the store, so
    the dataset can be far larger than memory. With a URL, each block is read by the dask
    worker that computes it, straight from the object store.

    Parameters
    ----------
    path : str or os.PathLike
        Directory of a Zarr group holding the arrays ``X`` and ``y`` (see the module
        docstring for the layout), or its fsspec URL (``s3://bucket/data.zarr``,
        ``gs://...``, ``az://...``, ``file://...``).
    require_y : bool, default=True
        Whether a missing ``y`` is an error. With ``False`` (for prediction), `y` of
        the result is ``None`` when the store has no ``y``.
    storage_options : dict, optional
        fsspec options of a URL's filesystem (``endpoint_url``, ``key``, ``secret``,
        ``anon``...; for S3 see s3fs). Without them fsspec's defaults apply (for S3 the
        AWS_* environment variables, ``~/.aws``, an instance role). Unused for a local path.

    Returns
    -------
    dataset : ZarrDataset
        `X` chunked along rows with the store's chunks (columns in one chunk), `y`
        rechunked to the row chunks of `X`, the group attributes and the path.

    Raises
    ------
    StoreNotFoundError
        If `path` does not exist.
    StoreError
        If `path` is not a Zarr group (a file, a plain directory, corrupted metadata,
        a lone array), the group has no ``X`` (or no ``y`` with `require_y`), an
        array's metadata does not parse (bad JSON, unknown dtype or codec), or a store
        written by dkrr differs from its ``dkrr_arrays`` record or lacks chunks, or
        its ``classes`` attribute is not a list of distinct strings, or ``y`` of a store
        with ``classes`` is not an integer array; when a block of such a ``y`` is
        computed, if it holds a code outside ``0 .. len(classes) - 1``; a store in an
        object store whose writer has not committed it (still writing, or failed).
    ObjectStoreError
        If the object store cannot be reached, refuses the credentials, or breaks off a
        read (also when a block is computed).
    InvalidParameterError
        If `path` is a URL whose scheme fsspec does not know or whose package is not
        installed (the message names it: ``pip install 'dkrr[s3]'`` for ``s3://``).
    InputValidationError
        If ``X`` is not 2-D, ``y`` is not 1-D or 2-D, their lengths differ, or either
        has a non-numeric dtype.
    """
    from .._rows import rechunk_rows

    path = locate(path, storage_options, what="input store")
    if not isinstance(path, Remote):
        path = Path(os.path.abspath(os.fspath(path)))
    group = open_group(path)
    arrays = array_names(group, path)
    wanted = ["X", "y"] if require_y else ["X"]
    missing = [name for name in wanted if name not in arrays]
    if missing:
        found = ", ".join(repr(a) for a in arrays) if arrays else "no arrays"
        features_only = missing == ["y"] and arrays == ["X"]
        raise StoreError(
            f"Zarr group {path} has no array {' or '.join(repr(m) for m in missing)} "
            f"(found: {found}); " + (
                "it holds features alone (a store to predict, as ingest writes it with "
                "target=[] / --no-target); fitting and scoring need y: ingest the file "
                "with its target column" if features_only else
                "a dkrr store holds X of shape (n_samples, n_features) and y of shape "
                "(n_samples,) -- see `dkrr ingest`")
        )
    zX = open_array(group, "X", path)
    if zX.ndim != 2:
        raise InputValidationError(
            f"array 'X' in {path} has shape {zX.shape}; expected 2 dimensions "
            "(n_samples, n_features)"
        )
    check_numeric("X", zX, path)
    X = read_array(group, "X", path)  # whole rows, read inside the steps of a pass
    y = None
    if "y" in arrays:
        zy = open_array(group, "y", path)
        if zy.ndim not in (1, 2):
            raise InputValidationError(
                f"array 'y' in {path} has shape {zy.shape}; expected (n_samples,) "
                "or (n_samples, n_targets)"
            )
        if zy.shape[0] != zX.shape[0]:
            raise InputValidationError(
                f"arrays in {path} disagree on the number of rows: X has shape "
                f"{zX.shape} but y has shape {zy.shape}; both need n_samples rows"
            )
        check_numeric("y", zy, path)
        y = rechunk_rows(read_array(group, "y", path), {0: X.chunks[0]})
    attrs = dict(group.attrs.asdict())
    classes = store_classes(attrs, path)
    if y is not None and classes is not None:
        y = checked_class_codes(y, classes, path)  # codes outside classes: StoreError in the read
    return ZarrDataset(X=X, y=y, attrs=attrs, path=str(path))


def write_predictions(
    y_pred: Any,
    out: str | os.PathLike,
    *,
    y_std: Any = None,
    overwrite: bool = False,
    attrs: Mapping[str, Any] | None = None,
    compute: Callable[[Any], Any] | None = None,
    inputs: Sequence[str | os.PathLike] = (),
    storage_options: Mapping[str, Any] | None = None,
) -> str:
    """Write predictions to a new Zarr group, block by block, atomically.

    Each block of `y_pred` is computed where the scheduler runs it and written to the
    store by that worker (:func:`dkrr.io._drain.store_tasks`); nothing is gathered on the
    client. With a ``distributed`` cluster the workers must share the filesystem that
    holds `out`, or `out` is a URL they can reach. The group is written under a
    temporary name and renamed to `out` only when every block is stored (for a URL:
    committed by removing its marker; see :mod:`dkrr.io._remote`).

    Parameters
    ----------
    y_pred : dask.array.Array of shape (n_samples,) or (n_samples, n_outputs)
        Predictions (a NumPy array is wrapped). Irregular row chunks are made uniform
        and columns are put in one chunk, as Zarr needs a regular grid.
    out : str or os.PathLike
        Directory of the Zarr group to create; it will hold the array ``y_pred``.
    y_std : dask.array.Array or ndarray, optional
        Predictive standard deviations, `y_pred`'s shape (``predict(X, return_std=...)``):
        the array ``y_std``, `y_pred`'s chunks, same atomic write and ``dkrr_arrays`` record.
    overwrite : bool, default=False
        Replace an existing store of dkrr predictions at `out` (only once the new one
        is complete). Anything else at `out` is refused (see
        :func:`predictions_replace_check`).
    attrs : mapping, optional
        Extra JSON-serialisable group attributes (for example ``classes`` or the
        model path). ``dkrr_layout`` and the marker ``dkrr_predictions = 1`` are
        always written.
    compute : callable, optional
        Called as ``compute(tasks)`` with a list of dask collections whose computation
        stores all blocks (each block's result is a one-element array, so almost
        nothing comes back to the client). It must compute them, for example with a
        progress bar: ``lambda t: distributed.progress(client.compute(t))`` followed by
        waiting on the futures, or ``dask.diagnostics.ProgressBar``. By default
        ``dask.compute(*tasks)``, which uses the active scheduler (a
        ``distributed.Client`` if one is the default).
    inputs : sequence of path-like, default=()
        Paths the predictions are computed from (the store of ``X``, the model); an
        `out` that is, contains or lies inside one of them is refused.
    storage_options : dict, optional
        fsspec options when `out` (or an input) is a URL (see :func:`open_dataset`).

    Returns
    -------
    path : str
        Absolute path (or URL) of the written store.

    Raises
    ------
    OutputExistsError
        If `out` exists and `overwrite` is false, or it exists and is not a store of
        dkrr predictions, or it overlaps an input or lies inside a Zarr store.
    OutputNotWritableError
        If `out` cannot be created (checked before anything is computed).
    OutputBusyError
        If another process is writing `out` right now.
    ObjectStoreError
        If the object store of a URL fails while the store is written (what was written
        is deleted, or left marked incomplete when the store cannot be reached).
    InvalidParameterError
        If `out` is a URL whose scheme is unknown or whose package is not installed.
    InputValidationError
        If `y_pred` is not 1-D or 2-D or has unknown chunk sizes, or `y_std` another shape.
    """
    y_pred = as_dask(y_pred, "y_pred", order="y_pred, out")
    if y_pred.ndim not in (1, 2):
        raise InputValidationError(
            f"y_pred has shape {y_pred.shape}; expected (n_samples,) or "
            "(n_samples, n_outputs)"
        )
    y_pred = regular_rows(y_pred, "y_pred")
    sources = {"y_pred": y_pred}
    if y_std is not None:
        y_std = as_dask(y_std, "y_std", order="y_pred, out")
        if y_std.shape != y_pred.shape:
            raise InputValidationError(f"y_std has shape {y_std.shape} but y_pred has shape {y_pred.shape}; the "
                                       "standard deviations need one value per prediction")
        sources["y_std"] = y_std.rechunk(y_pred.chunks)
    group_attrs = {**dict(attrs or {}), "dkrr_layout": LAYOUT_VERSION, PREDICTIONS_MARKER: 1}
    return _write_group(out, sources, group_attrs, overwrite=overwrite,
                        can_replace=predictions_replace_check, inputs=inputs, compute=compute,
                        storage_options=storage_options)


def create_arrays(group: zarr.Group, specs: Mapping[str, tuple], attrs: Mapping[str, Any]) -> dict:
    """Create the arrays dkrr writes in `group` and write its attributes, once.

    `specs` maps each name to ``(shape, dtype, chunks)``. Every array writes all its
    chunks (``write_empty_chunks``: a chunk of zeros is stored too), and the attribute
    :data:`~dkrr.io._reader.MANIFEST` records shapes and chunks, so that a missing chunk
    is recognised as corruption when the store is opened. Callers that resize arrays
    afterwards (ingest) write the record again with :func:`~dkrr.io._reader.manifest`.
    """
    arrays = {
        name: group.create_array(name, shape=shape, dtype=dtype, chunks=chunks,
                                 compressors=default_compressors(),
                                 config={"write_empty_chunks": True})
        for name, (shape, dtype, chunks) in specs.items()
    }
    group.update_attributes({**dict(attrs), MANIFEST: manifest(arrays)})
    return arrays


def _write_group(out, sources: Mapping[str, da.Array], attrs: Mapping[str, Any], *,
                 overwrite: bool, can_replace, inputs, compute, storage_options=None) -> str:
    """Write dask arrays as a new group at `out`, block by block, atomically."""
    final = locate(out, storage_options, what="output")
    if not isinstance(final, Remote):
        final = Path(os.path.abspath(os.fspath(final)))
    with atomic_output(final, overwrite, can_replace=can_replace, inputs=inputs,
                       storage_options=storage_options) as tmp:
        with interrupts_deferred():  # metadata: written whole or not at all
            group = zarr.open_group(store=zarr_location(tmp), mode="w-")
            specs = {name: (src.shape, src.dtype, tuple(max(c[0], 1) for c in src.chunks))
                     for name, src in sources.items()}
            targets = create_arrays(group, specs, attrs)
        run_store_tasks(store_tasks(list(sources.values()), list(targets.values())), compute)
        if isinstance(tmp, Remote):  # before the commit: every chunk the workers wrote is there
            for name, arr in targets.items():
                check_written(group, name, arr, tmp)
    return str(final)


def write_dataset(
    X: Any,
    y: Any,
    out: str | os.PathLike,
    *,
    feature_names: Sequence[str] | None = None,
    target_names: Sequence[str] | None = None,
    classes: Sequence[str] | None = None,
    attrs: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    compute: Callable[[Any], Any] | None = None,
    inputs: Sequence[str | os.PathLike] = (),
    storage_options: Mapping[str, Any] | None = None,
) -> str:
    """Write dask arrays `X` and `y` as a dkrr Zarr store, block by block, atomically.

    Used to materialise synthetic or transformed data larger than memory: each block is
    written by the worker that computes it.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Features. Rows keep their chunks (made uniform if irregular); columns are put
        in one chunk.
    y : dask.array.Array of shape (n_samples,) or (n_samples, n_targets), or None
        Targets, rechunked to the row chunks of `X`. ``None`` writes only ``X``.
    out : str or os.PathLike
        Directory of the Zarr group to create, or its URL (``s3://bucket/data.zarr``).
    feature_names, target_names : sequence of str, optional
        Column names; default ``column_{j}`` and ``target`` (``target_{j}``).
    classes : sequence of str, optional
        Labels when `y` holds class codes.
    attrs : mapping, optional
        Extra group attributes.
    overwrite : bool, default=False
        Replace an existing dkrr dataset at `out` once the new one is complete;
        anything else at `out` is refused (see :func:`zarr_replace_check`).
    compute : callable, optional
        Runs the store tasks, as in :func:`write_predictions`.
    inputs : sequence of path-like, default=()
        Paths `X` and `y` are read from; an `out` overlapping one is refused.
    storage_options : dict, optional
        fsspec options when `out` is a URL (see :func:`open_dataset`).

    Returns
    -------
    path : str
        Absolute path (or URL) of the written store.

    Raises
    ------
    InputValidationError
        Before anything is written, if `X` or `y` is not an array of integers or floats
        (a path in their place, text, complex numbers), their shapes disagree, or
        `classes` is given without integer codes in `y` or names a class twice; when
        the blocks are written, if `y` holds a code outside ``0 .. len(classes) - 1``
        (nothing is left at `out`). Errors of `out` as in :func:`write_predictions`.
    """
    X = as_dask(X, "X", order="X, y, out")
    if X.ndim != 2:
        raise InputValidationError(f"X has shape {X.shape}; expected 2 dimensions")
    X = regular_rows(X, "X")
    sources, names = [X], ["X"]
    n_targets = 0
    if y is not None:
        y = as_dask(y, "y", order="X, y, out")
        if y.ndim not in (1, 2) or y.shape[0] != X.shape[0]:
            raise InputValidationError(
                f"y has shape {y.shape} but X has shape {X.shape}; y needs "
                "(n_samples,) or (n_samples, n_targets) with the same n_samples"
            )
        y = y.rechunk((X.chunks[0],) + ((-1,) if y.ndim == 2 else ()))
        sources.append(y)
        names.append("y")
        n_targets = 1 if y.ndim == 1 else int(y.shape[1])
    if classes is not None:  # no y, classes named twice, or codes outside them: refused
        y = sources[-1] = class_codes(y, classes, str(out))
    if feature_names is None:
        feature_names = [f"column_{j}" for j in range(X.shape[1])]
    if target_names is None:
        target_names = (
            ["target"] if n_targets == 1 else [f"target_{j}" for j in range(n_targets)]
        )
    if len(feature_names) != X.shape[1] or len(target_names) != n_targets:
        raise InputValidationError(
            f"got {len(feature_names)} feature names and {len(target_names)} target "
            f"names for {X.shape[1]} features and {n_targets} targets"
        )
    group_attrs: dict[str, Any] = {
        "feature_names": [str(n) for n in feature_names],
        "target_names": [str(n) for n in target_names],
        **dict(attrs or {}),
        "dkrr_layout": LAYOUT_VERSION,
    }
    if classes is not None:
        group_attrs["classes"] = [str(c) for c in classes]
    return _write_group(out, dict(zip(names, sources)), group_attrs, overwrite=overwrite,
                        can_replace=zarr_replace_check, inputs=inputs, compute=compute,
                        storage_options=storage_options)
