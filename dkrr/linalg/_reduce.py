"""A generic chain-then-tree reduction over the row blocks of row-chunked dask arrays.

:func:`reduce_row_blocks` is the streaming engine of dkrr: each row block (of X, and of
y when given) is turned into a small object of partial sums, and those are merged into
one result. The rows are cut into ``C`` contiguous *chains* of near-equal rows (``C`` =
``n_chains``, by default the number of threads that run tasks; a block where a cut falls
is split between two chains, :func:`~dkrr.linalg._chains.chain_steps`): along a chain one task per block
computes the block's partial result and adds the running sum of the chain's earlier
blocks into it (a fused step, so only running sums outlive their task), and a tree of combine tasks
of fan-in ``split_every`` merges the ``C`` chain sums. A thread thus holds about two
partial results at a time (the running sum it received and the one it builds) instead of
the ``split_every + 1`` of a combine over block results. ``n_chains >= n_blocks`` gives
the plain tree over the blocks. The graph is one layer
of plain tasks over the inputs' keys (``HighLevelGraph.from_collections``): an input that
dkrr reads from Zarr itself is read by slice inside the step that consumes its block
(:mod:`dkrr._rows`), so a worker never reads blocks ahead of the chain; any other
dask input (in-memory chunks, persisted results, a user's pipeline) stays a dependency.
Every block is loaded once per reduction (a block split between two chains, at most
``C - 1`` of them, goes to both steps; a reader-backed one is read piece by piece: the
pieces' partial results sum to the block's, so every reduction of dkrr, a sum, is
unchanged but for rounding), and the reduction runs on whatever
dask scheduler is active (a distributed ``Client`` when one is the default, else the
threaded scheduler).

The order of the sums depends on the chains (hence, by default, on the thread count)
and on the chunking: results agree across them up to float rounding (relative
differences of a few ulps times log of the number of blocks in each summed number; the
tests hold them to ``rtol=1e-12``). Pass ``n_chains`` explicitly for bitwise
reproducibility across machines.

:func:`~dkrr.linalg._blocks.as_row_chunked` converts numpy/zarr/dask inputs into dask
arrays whose row chunks agree, which is what the reduction needs.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from .._system import distributed_client
from ..errors import InputValidationError, InvalidParameterError
from ._chains import chain_steps

__all__ = ["DEFAULT_SPLIT_EVERY", "default_n_chains", "fixed_n_chains", "reduce_row_blocks"]

#: fan-in of the combine tree when ``split_every`` is not given
DEFAULT_SPLIT_EVERY = 8


def default_n_chains() -> int:
    """Chains of a reduction when ``n_chains`` is not given: the threads that run tasks.

    With an active distributed Client the total threads of its workers, else dask's
    ``num_workers`` setting or the CPU count (the threaded scheduler's pool); 1 for the
    synchronous scheduler.
    """
    import dask
    from dask.system import CPU_COUNT

    client = distributed_client()
    if client is not None:
        try:
            return max(1, int(sum(client.nthreads().values())))
        except Exception:  # noqa: BLE001 - an unreachable scheduler fails later, clearly
            return 1
    if dask.config.get("scheduler", None) in ("sync", "synchronous", "single-threaded"):
        return 1
    return max(1, int(dask.config.get("num_workers", None) or CPU_COUNT))


def fixed_n_chains(n_chains: int | None) -> int:
    """``n_chains`` for every pass of a multi-pass solver: the default resolved once, now
    (:func:`default_n_chains`), so that workers joining or leaving between the passes
    change neither the order of the sums nor where blocks are split between chains (a
    split block's pieces give the checksums of the passes' same-rows check). A given value
    is returned as it is (checked by :func:`reduce_row_blocks`)."""
    return default_n_chains() if n_chains is None else n_chains


def _summable(part, acc) -> bool:
    """Whether ``acc`` can be added into ``part`` part by part (see :func:`_accumulate_into`)."""
    names = getattr(type(part), "PARTS", None)
    if names is None or type(acc) is not type(part):
        return False
    la, lp = getattr(acc, "labels", None), getattr(part, "labels", None)
    if (la is None) != (lp is None) or (la is not None and not np.array_equal(la, lp)):
        return False
    for k in names:
        a, b = getattr(part, k), getattr(acc, k)
        if (a is None) != (b is None) or (a is not None and a.shape != b.shape):
            return False
    return True


def _accumulate_into(part, acc, combine_fn):
    """``part + acc`` where ``part`` was just made by this task (and is its to change).

    Partial results that declare their summed array parts (``type(part).PARTS``, as
    :class:`~dkrr.linalg.RidgeStatistics` does), or lists/tuples of them summed element
    by element, with the same parts present, the same shapes and the same ``labels`` get
    ``acc`` added into ``part`` in place: no third object. Anything else goes through
    ``combine_fn([acc, part])`` (earlier blocks first). ``acc`` is never changed: a
    scheduler may hold it for a retry.
    """
    if isinstance(part, (list, tuple)):
        pairs = list(zip(part, acc)) if isinstance(acc, (list, tuple)) and len(acc) == len(part) else None
    else:
        pairs = [(part, acc)]
    if pairs and all(_summable(a, b) for a, b in pairs):
        for a, b in pairs:
            for k in type(a).PARTS:
                x = getattr(a, k)
                if x is not None:
                    x += getattr(b, k)
        return part
    return combine_fn([acc, part])


def _chain_step(block_fn, combine_fn, acc, *args):
    """One fused step of a chain: the block's partial result plus the running sum."""
    return _accumulate_into(block_fn(*args), acc, combine_fn)


#: a constant ndarray of at least this many bytes goes to every worker once per reduction
#: (``Client.scatter(broadcast=True)``) instead of travelling inside the graph
SCATTER_BYTES = 16 * 2**10


def _shared_constant(value, client):
    """``(reference, dependency)`` of one constant of a reduction: one key every step names.

    With a distributed Client a large ndarray (the PCG directions ``V``, the validation
    pass's coefficients) is scattered to every worker (hashed: its key is the token of its
    content) and the steps name its Future; anything else is a pure ``dask.delayed`` of the
    value, a single node of the graph (dependency: that Delayed)."""
    import dask

    if client is not None and isinstance(value, np.ndarray) and value.nbytes >= SCATTER_BYTES:
        return client.scatter(value, broadcast=True, hash=True), None
    d = dask.delayed(value, pure=True)
    return d.key, d


def flat_keys(keys) -> list:
    """The keys of a collection's ``__dask_keys__()`` (nested lists) in order, flattened."""
    out = []
    stack = [keys]
    while stack:
        k = stack.pop()
        if isinstance(k, list):
            stack.extend(reversed(k))
        else:
            out.append(k)
    return out


def _optimized(arrays: list) -> list:
    """The dask inputs with dask's own graph optimisations (fused slices and casts):
    ``Array.optimize()`` of query-planning arrays (expressions), else ``dask.optimize``,
    whose result leaves the blocks of an array persisted on a cluster outside its graph:
    such an input is used as it is (its graph names its Futures)."""
    import dask

    if not arrays:
        return []
    if all(callable(getattr(a, "optimize", None)) for a in arrays):
        return [a.optimize() for a in arrays]
    out = []
    for a, o in zip(arrays, dask.optimize(*arrays)):
        graph = o.__dask_graph__()
        out.append(o if all(k in graph for k in flat_keys(o.__dask_keys__())) else a)
    return out


def _step(block_fn, combine_fn, acc, parts, row_offset, block_index, n_rows, skip, *constants):
    """One step of a chain: read the block of each reader-backed input (its rows, now),
    compute the block's partial result and add the running sum ``acc`` (None for a chain's
    first block) into it. A step of a block split between two chains (:func:`~dkrr.linalg._chains.chain_steps`)
    takes ``n_rows`` rows after the block's first ``skip`` (``row_offset`` is its first
    row's): a reader reads only those, a delivered block is sliced."""
    from .._rows import RowReader

    stop = row_offset + n_rows
    blocks = [p.rows(row_offset, stop) if isinstance(p, RowReader)
              else p if skip == 0 and p.shape[0] == n_rows else p[skip:skip + n_rows] for p in parts]
    if acc is None:
        return block_fn(*blocks, row_offset, block_index, *constants)
    return _chain_step(block_fn, combine_fn, acc, *blocks, row_offset, block_index, *constants)


def reduce_row_blocks(
    arrays: Sequence[Any],
    block_fn: Callable[..., Any],
    combine_fn: Callable[[list], Any],
    *,
    split_every: int | None = None,
    constants: Sequence[Any] = (),
    compute: bool = True,
    label: str = "reducing row blocks",
    n_chains: int | None = None,
    persist: bool = False,
):
    """Reduce the row blocks to one result: chains of fused block steps, then a tree.

    Parameters
    ----------
    arrays : sequence of dask arrays
        Arrays with identical row chunks and a single block along every other axis
        (e.g. X of shape (n, d) and y rechunked to X's rows, see :func:`as_row_chunked`).
    block_fn : callable
        Called once per row block as ``block_fn(*blocks, row_offset, block_index,
        *constants)`` where ``blocks`` are the numpy blocks of ``arrays``,
        ``row_offset`` is the global index of the block's first row and
        ``block_index`` its position. Returns a small partial result.
    combine_fn : callable
        ``combine_fn(list_of_partials)`` merges partials into a *new* one of the same
        kind. It must be pure: leave its inputs unchanged (a retried task, or a partial
        a scheduler holds for another consumer, would otherwise be summed twice).
    split_every : int, optional
        Fan-in of the combine tree over the chains' sums (default
        :data:`DEFAULT_SPLIT_EVERY`); ``2`` makes the deepest tree.
    constants : sequence
        Objects every block task needs (a feature map, ...). Each is one key of the graph
        that every step names (``dask.delayed(obj, pure=True)``); with a distributed
        Client an ndarray of at least :data:`SCATTER_BYTES` is instead scattered to every
        worker once (``Client.scatter(broadcast=True)``), never carried in the graph.
    compute : bool, default=True
        Compute and return the result, or return it as a ``dask.delayed.Delayed``.
    persist : bool, default=False
        With ``compute``: ``dask.persist`` the result instead of returning it, a
        ``Delayed`` of the result kept where it was computed (on a Client's workers: its
        Future, nothing gathered), for further tasks on it.
    label : str
        Label of the progress bar (see :mod:`dkrr._progress`).
    n_chains : int, optional
        ``C``, the chains the rows are cut into (contiguous runs of near-equal rows, a
        block split at a cut; at most one chain per block). Default :func:`default_n_chains`, the threads that run
        tasks. A chain task calls ``block_fn`` and adds the running sum it receives into
        the new partial result (in place for partials with ``PARTS``, see
        :func:`_accumulate_into`; else ``combine_fn([running, new])``), so a thread
        holds two partial results at a time; the tree then merges the ``C`` chain sums.
        ``n_chains >= n_blocks`` is the plain tree over block results.

    Returns
    -------
    The combined result (or a Delayed when ``compute=False`` or ``persist=True``).

    Notes
    -----
    The graph is one dict layer (``HighLevelGraph.from_collections``) over the inputs:
    a step names the keys of its input blocks (``__dask_keys__()`` of the inputs, after
    dask's own optimisation, so arrays that share a source load it once) and the keys of
    the constants. An input that dkrr reads from Zarr itself (a reader-backed array,
    :mod:`dkrr._rows`) is not a dependency: the step receives its reader and reads
    its rows when it runs, so no block is read ahead of the chain that consumes it.
    The compute runs with the active distributed Client if there is one, else dask's
    configured scheduler (threaded by default); without a Client the BLAS thread pools of
    this process are limited to one thread for the duration, since dask already runs one
    task per core.
    """
    import dask
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    from .._rows import held_on_workers, row_reader

    split_every = DEFAULT_SPLIT_EVERY if split_every is None else split_every
    if isinstance(split_every, bool) or not isinstance(split_every, (int, np.integer)) or split_every < 2:
        raise InvalidParameterError(f"split_every must be an integer >= 2, got {split_every!r}")
    if n_chains is not None and (isinstance(n_chains, bool) or not isinstance(n_chains, (int, np.integer))
                                 or n_chains < 1):
        raise InvalidParameterError(
            f"n_chains must be a positive integer or None (one chain per thread), got {n_chains!r}"
        )
    if not arrays:
        raise InvalidParameterError("reduce_row_blocks needs at least one array")
    row_chunks = arrays[0].chunks[0]
    for a in arrays:
        if a.chunks[0] != row_chunks:
            raise InputValidationError(
                f"row chunks differ between the inputs: {row_chunks} vs {a.chunks[0]}; "
                "rechunk them to the same rows, e.g. `y.rechunk({0: X.chunks[0]})`."
            )
        if any(nb != 1 for nb in a.numblocks[1:]):
            raise InputValidationError(
                f"an input of shape {a.shape} has chunks {a.chunks}; every axis but the "
                "first must be a single block. Use `.rechunk({1: -1})`."
            )
    n_blocks = len(row_chunks)
    client = distributed_client()
    arrays = held_on_workers(arrays, client)  # in-memory data: persisted on its first pass, then named
    readers = [row_reader(a) for a in arrays]
    optimized = iter(_optimized([a for a, r in zip(arrays, readers) if r is None]))
    parts, dependencies = [], []  # per input: the reference of each block; the collections named
    for r in readers:
        if r is None:
            a = next(optimized)
            keys = flat_keys(a.__dask_keys__())
        else:  # the reader, one shared key: the step reads the rows itself
            a = dask.delayed(r, pure=True)
            keys = [a.key] * n_blocks
        parts.append(keys)
        dependencies.append(a)
    consts = []
    for c in constants:
        ref, dep = _shared_constant(c, client)
        consts.append(ref)
        if dep is not None:
            dependencies.append(dep)
    offsets = np.concatenate([[0], np.cumsum(row_chunks)[:-1]]).astype(int)
    n_chains = min(int(default_n_chains() if n_chains is None else n_chains), n_blocks)
    # keys are the identity of the result: the input arrays' names, the constants' contents
    # (a pure delayed's key, a hashed scatter's key: the token of the value), both functions
    # and the reduction's shape (chains and tree fan-in: they set the order of the float sums)
    token = dask.base.tokenize(
        *(a.name for a in arrays), *(getattr(c, "key", c) for c in consts), block_fn, combine_fn,
        int(split_every), n_chains,
    )
    name = f"dkrr-{getattr(block_fn, '__name__', 'block').strip('_')}-{token}"
    layer: dict = {}
    level = []
    step = 0
    for chain in chain_steps(row_chunks, n_chains):
        acc = None
        for i, skip, rows in chain:
            key = f"{name}-{step}"  # the chain's sum up to this step (block i, or a piece of it)
            layer[key] = (_step, block_fn, combine_fn, acc, [p[i] for p in parts], int(offsets[i]) + skip, i,
                          rows, skip, *consts)
            acc, step = key, step + 1
        level.append(acc)
    depth = 0
    while True:
        groups = [level[j : j + split_every] for j in range(0, len(level), split_every)]
        level = []
        for j, g in enumerate(groups):
            key = f"dkrr-combine-{token}-{depth}-{j}"
            layer[key] = (combine_fn, list(g))
            level.append(key)
        depth += 1
        if len(level) == 1:
            break
    graph = HighLevelGraph.from_collections(name, layer, dependencies=dependencies)
    result = Delayed(level[0], graph, layer=name)
    if not compute:
        return result
    from .._progress import compute_limited

    return compute_limited(result, label=label, n_tasks=n_chains, persist=persist)[0]
