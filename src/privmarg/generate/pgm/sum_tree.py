"""Many marginals of one table by a tree of partial sums.

Summing one attribute out of a big clique table costs a pass over it; a marginal asked directly of
the table costs one such pass each. When many marginals are asked of one table (the potentials'
cliques on a maximal clique; AIM's candidates inside it), summing out first an attribute that most
of them lack serves all of those from a smaller table. Used by the estimator (:class:`_DenseGroup`
in :mod:`.estimate`) and :meth:`GraphicalModel.project_many`. Pure arithmetic: no privacy cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...core import Domain
from ...core.sums import sum_out


@dataclass(frozen=True)
class SumTree:
    """``nodes[j - 1] = (parent, axis)``: node ``j`` (1, 2, …) sums axis ``axis`` out of node
    ``parent``'s table; node 0 is the table itself. ``attrs[j]``: node ``j``'s attributes (in the
    table's order). ``key_node[i]``: the node that key ``i`` is summed from."""

    nodes: list[tuple[int, int]]
    attrs: list[tuple[str, ...]]
    key_node: list[int]


def plan_sum_tree(domain: Domain, attrs: Sequence[str], keys: Sequence[Sequence[str]]) -> SumTree:
    """The greedy tree: at each node, sum out the attribute absent from the most keys left there
    (the biggest on ties) while it serves at least two, recurse on the keys without it and go on
    with the rest. Depends on attribute names and domain sizes only."""
    attrs_of = [tuple(attrs)]
    nodes: list[tuple[int, int]] = []
    key_node = [0] * len(keys)
    sets = [frozenset(k) for k in keys]

    def build(node: int, group: list[int]) -> None:
        here = attrs_of[node]
        while group:
            best, n_best = None, 1
            for a in here:
                n = sum(a not in sets[i] for i in group)
                if n > n_best or (n == n_best and best is not None and domain[a] > domain[best]):
                    best, n_best = a, n
            if best is None or n_best < 2:
                for i in group:
                    key_node[i] = node
                return
            child = len(attrs_of)
            attrs_of.append(tuple(a for a in here if a != best))
            nodes.append((node, here.index(best)))
            build(child, [i for i in group if best not in sets[i]])
            group = [i for i in group if best in sets[i]]

    build(0, list(range(len(keys))))
    return SumTree(nodes, attrs_of, key_node)


def marginals_of(table: np.ndarray, attrs: Sequence[str], keys: Sequence[Sequence[str]], domain: Domain
                 ) -> list[np.ndarray]:
    """Each key's marginal of ``table`` (axes = ``attrs``), flat, its axes in ``attrs``' order
    (each key a subset of ``attrs``). Equal to summing each directly, up to the order of sums."""
    tree = plan_sum_tree(domain, attrs, keys)
    users = [0] * (len(tree.nodes) + 1)  # children and keys still to be served from each node
    for parent, _ in tree.nodes:
        users[parent] += 1
    by_node: list[list[int]] = [[] for _ in users]
    for i, node in enumerate(tree.key_node):
        users[node] += 1
        by_node[node].append(i)
    tables: list[np.ndarray | None] = [table] + [None] * len(tree.nodes)
    out: list[np.ndarray | None] = [None] * len(keys)

    def release(node: int) -> None:  # a node's table lives only while something still needs it
        users[node] -= 1
        if users[node] == 0:
            tables[node] = None

    def serve(node: int) -> None:
        here = tree.attrs[node]
        for i in by_node[node]:
            keep = set(keys[i])
            axes = tuple(j for j, a in enumerate(here) if a not in keep)
            out[i] = np.ascontiguousarray(sum_out(tables[node], axes)).ravel()
            release(node)

    # nodes are numbered depth first (a child after its parent), so one pass in order makes each
    # table before its children need it
    serve(0)
    for j, (parent, axis) in enumerate(tree.nodes, start=1):
        tables[j] = sum_out(tables[parent], (axis,))
        release(parent)
        serve(j)
    return out  # type: ignore[return-value]
