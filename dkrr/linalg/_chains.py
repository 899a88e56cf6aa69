"""Where the chains of :func:`dkrr.linalg.reduce_row_blocks` cut the rows: near-equal
rows per chain, a block where a cut falls split between two chains."""

from __future__ import annotations

import numpy as np

__all__ = ["SPLIT_MIN_FRACTION", "SPLIT_MIN_ROWS", "chain_steps"]

#: a chain boundary that falls inside a row block splits the block between two chains
#: when each piece has at least this fraction of the block's rows and
#: :data:`SPLIT_MIN_ROWS`; else it moves to the block's nearer edge
SPLIT_MIN_FRACTION = 1 / 8

#: ... and at least this many rows: a piece costs a step's fixed work (its partial
#: result's zeroing and addition, about 5% of a 4,096-row step at p = 2048), and the
#: blocks of small data end their chains within moments of each other anyway
SPLIT_MIN_ROWS = 4096


def chain_steps(row_chunks, n_chains: int) -> list[list[tuple[int, int, int]]]:
    """The steps of ``n_chains`` contiguous chains of near-equal *rows*: per chain, its
    ``(block, skip, rows)`` in order, a step taking ``rows`` rows of ``block`` after its
    first ``skip``. The chains cut the rows at ``c n / C``; a cut inside a block splits it
    into two pieces (one ending a chain, one starting the next) when each has at least
    :data:`SPLIT_MIN_FRACTION` of the block and :data:`SPLIT_MIN_ROWS` rows, else it moves
    to the block's nearer edge.
    Balanced by whole blocks instead, 31 blocks on 2 workers ran 16 against 15: the whole
    fit waited one block for one worker. ``n_chains >= len(row_chunks)`` is one block per
    chain (the plain tree over the blocks)."""
    chunks = [int(r) for r in row_chunks]
    if n_chains >= len(chunks):
        return [[(i, 0, r)] for i, r in enumerate(chunks)]
    starts = np.concatenate([[0], np.cumsum(chunks)]).astype(np.int64)
    cuts = []
    for c in range(1, n_chains):
        at = int(round(c * int(starts[-1]) / n_chains))
        i = int(np.searchsorted(starts, at, side="right")) - 1  # the block the cut falls in
        a, r = at - int(starts[i]), chunks[i]
        if 0 < a < r and min(a, r - a) < max(SPLIT_MIN_ROWS, SPLIT_MIN_FRACTION * r):
            at = int(starts[i]) if a < r - a else int(starts[i + 1])
        cuts.append(at)
    edges = sorted({0, int(starts[-1]), *cuts})  # snapped cuts that meet drop a chain
    out = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        steps = []
        i = int(np.searchsorted(starts, lo, side="right")) - 1
        while i < len(chunks) and starts[i] < hi:
            a, b = max(lo, int(starts[i])), min(hi, int(starts[i + 1]))
            if b > a:
                steps.append((i, a - int(starts[i]), b - a))
            i += 1
        out.append(steps)
    return out
