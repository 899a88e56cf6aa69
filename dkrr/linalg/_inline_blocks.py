"""Row blocks read inside the task that consumes them.

A reduction step needs one row block of each input. When that block is a separate task
(a Zarr read, a slice, a dtype cast), the scheduler treats the reads as root tasks and
runs them as soon as a thread is free, while the chains consume the blocks one after
the other: the reads run ahead of the chains and their results wait in worker memory
(measured: about 20 blocks of 32 MiB ahead on 2 workers reading a Zarr store). Here
the tasks that only one block needs (its reads, slices and casts) are moved into the
step that consumes the block and run there, so a block exists only while its step runs.
Nodes shared by several blocks (a Zarr array handle, a whole in-memory array) and data
already in the graph (the chunks of ``dask.array.from_array``, persisted results) stay
ordinary dependencies, transferred as before.
"""

from __future__ import annotations

from typing import Any, Sequence

from dask.core import get_dependencies, istask, literal


class InlineBlocks:
    """The private recipe of one block index across the inputs: run by :meth:`values`.

    ``graph`` holds the tasks only this block needs, ``keys`` the inputs' block keys (in
    the inputs' order) and ``deps`` the keys it reads from outside ``graph``, whose values
    the step receives as ordinary dependencies.
    """

    __slots__ = ("graph", "keys", "deps")

    def __init__(self, graph: dict, keys: Sequence, deps: Sequence):
        self.graph = graph
        self.keys = tuple(keys)
        self.deps = tuple(deps)

    def values(self, dep_values: Sequence) -> list:
        """The inputs' blocks: the private tasks run here, on this thread."""
        from dask.local import get_sync

        graph = dict(self.graph)
        for k, v in zip(self.deps, dep_values):
            graph[k] = (literal(v),)  # a task that returns v as it is
        return list(get_sync(graph, list(self.keys)))


def _dependencies(graph: dict, key) -> frozenset:
    """The keys node ``key`` reads: a task object's own ``dependencies`` (which include
    keys held outside ``graph``, e.g. persisted results on a cluster), else the keys of
    ``graph`` that a legacy tuple task names."""
    node = graph[key]
    deps = getattr(node, "dependencies", None)
    return frozenset(deps) if deps is not None else frozenset(get_dependencies(graph, key))


def _closure(graph: dict, key) -> set:
    seen, todo = set(), [key]
    while todo:
        k = todo.pop()
        if k in seen or k not in graph:
            continue
        seen.add(k)
        todo.extend(_dependencies(graph, k))
    return seen


def subgraph(graph: dict, key) -> dict:
    """The nodes ``key`` needs: what a dependency's ``Delayed`` carries (the whole graph
    would be culled again at every step that names it)."""
    return {k: graph[k] for k in _closure(graph, key)}


def inline_block_recipes(graph_mapping, block_keys: Sequence[Sequence]) -> list[InlineBlocks] | None:
    """Per block index, the tasks to run inside its step; None when nothing would move.

    ``block_keys[j][i]`` is input ``j``'s key of block ``i``. A node moves into block
    ``i``'s step when it is a task (not data) and no other block index needs it.
    """
    graph = dict(graph_mapping)
    n_blocks = len(block_keys[0])
    closures = [set().union(*(_closure(graph, keys[i]) for keys in block_keys)) for i in range(n_blocks)]
    owners: dict[Any, int] = {}
    for i, cl in enumerate(closures):
        for k in cl:
            owners[k] = i if owners.get(k, i) == i else -1
    recipes, moved = [], False
    for i, cl in enumerate(closures):
        private = {k: graph[k] for k in cl if owners[k] == i and istask(graph[k])}
        moved = moved or bool(private)
        deps = sorted(
            {d for k in private for d in _dependencies(graph, k) if d not in private}
            | {keys[i] for keys in block_keys if keys[i] not in private},
            key=str,
        )
        recipes.append(InlineBlocks(private, [keys[i] for keys in block_keys], deps))
    return recipes if moved else None
