"""The order in which a marginal query sums out variables (privmarg.generate.pgm.query_order):
the searched order is the cheapest of all orders, and queries answered with it stay exact."""

import itertools
import math
import random

import pytest

from privmarg.generate.pgm import query_order
from privmarg.generate.pgm.query_order import elimination_order, greedy_order, searched_order, step
from test_estimation import assert_three_way_queries_exact


def _cells(sizes):
    return lambda m: math.prod(s for i, s in enumerate(sizes) if m >> i & 1)


def _cost_of(order, masks, elim, cells):
    """Cost of summing out the variables in ``order`` (a variable already gone is skipped)."""
    masks, total = list(masks), 0
    for v in order:
        if not elim & v:
            continue
        use, stay, union, gone = step(masks, elim, v)
        masks = [masks[k] for k in stay] + [union & ~gone]
        elim &= ~gone
        total += cells(union)
    assert elim == 0
    return total


# a (5) b (2) c..f (16 each); tables acdf, abf, bde, ace; a and d kept: greedy sums out b first
# (its union abdef, 40,960 cells, is the smallest then), then c and e, and pays 389,120 cells in
# all; summing out e first, then c and b, pays 84,480
SIZES = [5, 2, 16, 16, 16, 16]
MASKS = [0b101101, 0b100011, 0b011010, 0b010101]
KEEP = 0b001001


def test_search_finds_a_cheaper_order_than_greedy():
    elim = (MASKS[0] | MASKS[1] | MASKS[2] | MASKS[3]) & ~KEEP
    cells = _cells(SIZES)
    g_order, g_cost = greedy_order(MASKS, elim, cells)
    s_order, s_cost = searched_order(MASKS, elim, cells)
    assert (g_cost, s_cost) == (389120, 84480)
    assert _cost_of(g_order, MASKS, elim, cells) == g_cost
    assert _cost_of(s_order, MASKS, elim, cells) == s_cost


@pytest.mark.parametrize("seed", range(40))
def test_searched_order_is_the_cheapest_of_all_orders(seed):
    rnd = random.Random(seed)
    n = 6
    sizes = [rnd.choice([2, 3, 5, 8, 16]) for _ in range(n)]
    masks = [sum(1 << i for i in rnd.sample(range(n), rnd.randint(2, 4))) for _ in range(rnd.randint(2, 5))]
    every = 0
    for m in masks:
        every |= m
    present = [i for i in range(n) if every >> i & 1]
    keep = sum(1 << i for i in rnd.sample(present, min(2, len(present))))
    elim = every & ~keep
    cells = _cells(sizes)
    bits = [1 << i for i in range(n) if elim >> i & 1]
    best = min(_cost_of(p, masks, elim, cells) for p in itertools.permutations(bits)) if bits else 0
    s_order, s_cost = searched_order(masks, elim, cells)
    assert s_cost == best == _cost_of(s_order, masks, elim, cells)
    assert greedy_order(masks, elim, cells)[1] >= best


def test_the_order_used_is_the_searched_one_past_the_threshold(monkeypatch):
    monkeypatch.setattr(query_order, "_kept", {})
    elim = (MASKS[0] | MASKS[1] | MASKS[2] | MASKS[3]) & ~KEEP
    cells = _cells(SIZES)
    monkeypatch.setattr(query_order, "SEARCH_CELLS", 10**9)
    assert elimination_order(MASKS, elim, cells, "d1") == tuple(greedy_order(MASKS, elim, cells)[0])
    monkeypatch.setattr(query_order, "SEARCH_CELLS", 0)
    assert elimination_order(MASKS, elim, cells, "d2") == tuple(searched_order(MASKS, elim, cells)[0])
    # kept per domain key: the first answer stands for that key
    assert elimination_order(MASKS, elim, cells, "d1") == tuple(greedy_order(MASKS, elim, cells)[0])


@pytest.mark.parametrize("seed", [3, 4])
def test_queries_with_searched_orders_match_the_brute_force_joint(monkeypatch, seed):
    """Every order searched (threshold 0): each 3-way marginal of a fitted model still equals the
    one summed from its full joint table."""
    monkeypatch.setattr(query_order, "SEARCH_CELLS", 0)
    monkeypatch.setattr(query_order, "_kept", {})
    assert_three_way_queries_exact(seed)
    assert query_order._kept  # the orders were planned here
