"""The order in which a marginal query of a graphical model sums out its variables.

A query's tables (clique marginals and conditionals of a covering subtree) are given as bit masks of
their attributes. Each step sums out one variable ``v``: the tables holding it are combined into one
over their union, and every variable found in exactly those tables goes with ``v`` (a separator
shared by two cliques: one contraction instead of one per variable). A step costs the cells of the
union. The greedy order takes the cheapest step each time and can be far from the best where
tables overlap in many attributes (JAM's scoring models: benchmarks/history/public-data.md); where
its total is large, a search over every order (few variables: a query's covering subtree) finds
the cheapest. Orders are kept per (tables, variables, domain): scoring asks the same query shapes
of every round's model.

Pure bookkeeping on attribute sets: no privacy cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: a greedy order costing at least this many cells (summed over its steps) is searched
SEARCH_CELLS = 1 << 24
#: the search runs only for at most this many variables to sum out (2^n states)
SEARCH_VARIABLES = 12
#: orders kept; the dict is emptied when full
KEPT_ORDERS = 8192
_kept: dict[tuple, tuple[int, ...]] = {}


def step(masks: Sequence[int], elim: int, v: int) -> tuple[list[int], list[int], int, int]:
    """Summing out variable bit ``v``: (tables used, tables left, the union's mask, the variables
    gone with ``v``)."""
    use = [k for k, m in enumerate(masks) if m & v]
    stay = [k for k, m in enumerate(masks) if not m & v]
    union, common, others = 0, -1, 0
    for k in use:
        union |= masks[k]
        common &= masks[k]
    for k in stay:
        others |= masks[k]
    return use, stay, union, common & elim & ~others


def _after(masks: Sequence[int], elim: int, v: int) -> tuple[list[int], int, int]:
    """(tables, variables left, cost) after summing out ``v``."""
    use, stay, union, gone = step(masks, elim, v)
    return [masks[k] for k in stay] + [union & ~gone], elim & ~gone, union


def greedy_order(masks: Sequence[int], elim: int, cells: Callable[[int], int]) -> tuple[list[int], int]:
    """Each step the variable whose union has the fewest cells (the lowest bit on ties); returns the
    variables chosen (bits) and the summed cost."""
    masks, order, total = list(masks), [], 0
    while elim:
        best, best_cost, rest = 0, None, elim
        while rest:
            v = rest & -rest
            rest ^= v
            u = 0
            for m in masks:
                if m & v:
                    u |= m
            c = cells(u)
            if best_cost is None or c < best_cost:
                best, best_cost = v, c
        masks, elim, _ = _after(masks, elim, best)
        order.append(best)
        total += best_cost
    return order, total


def searched_order(masks: Sequence[int], elim: int, cells: Callable[[int], int]) -> tuple[list[int], int]:
    """The cheapest order over all orders (memoised on the tables left: 2^n states for n variables)."""
    memo: dict[tuple, tuple[int, int]] = {}

    def best(state: tuple[int, ...], left: int) -> int:
        if not left:
            return 0
        hit = memo.get((state, left))
        if hit is not None:
            return hit[0]
        choice = None
        rest = left
        while rest:
            v = rest & -rest
            rest ^= v
            after, left_after, union = _after(state, left, v)
            c = cells(union) + best(tuple(sorted(after)), left_after)
            if choice is None or c < choice[0]:
                choice = (c, v)
        memo[(state, left)] = choice
        return choice[0]

    state, left = tuple(sorted(masks)), elim
    total = best(state, left)
    order = []
    while left:
        v = memo[(state, left)][1]
        after, left, _ = _after(state, left, v)
        state = tuple(sorted(after))
        order.append(v)
    return order, total


def elimination_order(masks: Sequence[int], elim: int, cells: Callable[[int], int], key: object) -> tuple[int, ...]:
    """The variables (bits) in the order a query sums them out: greedy, or searched where the
    greedy order costs at least :data:`SEARCH_CELLS` and there are at most
    :data:`SEARCH_VARIABLES` variables. ``key`` names the domain (``cells`` depends on it): a
    hashable kept per domain, such as its bit-mask helper."""
    memo_key = (key, tuple(masks), elim)
    hit = _kept.get(memo_key)
    if hit is not None:
        return hit
    order, cost = greedy_order(masks, elim, cells)
    if cost >= SEARCH_CELLS and bin(elim).count("1") <= SEARCH_VARIABLES:
        searched, searched_cost = searched_order(masks, elim, cells)
        if searched_cost < cost:
            order = searched
    if len(_kept) >= KEPT_ORDERS:
        _kept.clear()
    _kept[memo_key] = out = tuple(order)
    return out
