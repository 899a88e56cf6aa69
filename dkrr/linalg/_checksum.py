"""The guard of the multi-pass solves (PCG, ALGORITHMS.md 3.9; the mixed-precision
refinement, 3.10) against a source that changes between passes: every block task returns
the CRC-32 of its rows as read, the client compares each pass's with pass 1's. A block
split between two chains (:func:`dkrr.linalg._chains.chain_steps`) has the XOR of its
pieces' CRCs; every pass of one solve cuts the chains alike (``fixed_n_chains``)."""

from __future__ import annotations

import zlib

import numpy as np

__all__ = ["block_checksum", "check_same_rows"]


def block_checksum(*blocks) -> int:
    """CRC-32 of one row block of X (and of its sample weights; None is skipped) as read:
    the bytes, dtype and shape. What every PCG pass returns per block so that a source
    changing between passes is detected. About 2 GB/s, a small part of a block task,
    which computes p features of every row."""
    crc = 0
    for block in blocks:
        if block is not None:
            a = np.ascontiguousarray(block)
            crc = zlib.crc32(a, zlib.crc32(f"{a.dtype.str}{a.shape}".encode(), crc))
    return crc


#: what the error says about the PCG passes (the default ``reader`` of :func:`check_same_rows`)
PCG_READER = ("solver='pcg' reads X once per CG iteration and needs the same rows every time", "or keep X in memory "
              "with pcg_persist=True (read once; a worker lost with its blocks reads them again)")


def check_same_rows(reference: dict, checksums: dict, X, pass_number: int, weighted: bool = False,
                    reader: tuple[str, str] = PCG_READER) -> None:
    """Raise :class:`~dkrr.errors.SourceChangedError` unless every row block of ``X``
    (and of the sample weights when ``weighted``) read in pass ``pass_number`` has the
    checksum it had in pass 1 (``reference``: block index -> :func:`block_checksum`).
    ``reader``: (which passes read X and why they need the same rows, what else to do)."""
    if checksums == reference:
        return
    from ..errors import SourceChangedError

    changed = sorted(i for i in reference.keys() | checksums.keys() if checksums.get(i) != reference.get(i))
    i = changed[0]
    start = int(sum(X.chunks[0][:i]))
    more = f" (and {len(changed) - 1} more of the {len(reference)} blocks)" if len(changed) > 1 else ""
    raise SourceChangedError(
        f"{'X or sample_weight' if weighted else 'X'} changed during the fit: row block {i} (rows {start} to {start + X.chunks[0][i] - 1}){more} read "
        f"differently in pass {pass_number} than in pass 1 (checksum {checksums.get(i, 0):#010x}, was "
        f"{reference.get(i, 0):#010x}). {reader[0]}, so the fit was stopped rather than mix two data sets. Do not "
        f"write to X's source (e.g. its Zarr store) during a fit and make a dask source deterministic, {reader[1]}."
    )
