"""PrivMRF's attribute graph search (PrivMRFSelector.graph) against the plain search it replaced:
the same cliques in the same order, on random domains and noisy-looking TVDs with the caps binding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privmarg import Domain
from privmarg.generate.pgm.junction_tree import mask_cells, maximal_masks
from privmarg.select.privmrf import PrivMRFSelector


def _graph_reference(sel: PrivMRFSelector, dom: Domain, tvd: np.ndarray) -> list[tuple[str, ...]]:
    """The plain search (PrivMRFSelector.graph before the incremental one): every step tries every
    non-edge, triangulates the whole graph with it and scores the adjacency."""
    d = len(dom)
    bits = [1 << i for i in range(d)]
    state = [b for b in bits]
    adj = np.zeros((d, d), dtype=bool)
    while True:
        best = None
        for i, j in zip(*np.triu_indices(d, 1)):
            if adj[i, j]:
                continue
            cand = maximal_masks(dom, state + [bits[i] | bits[j]])
            cells = [mask_cells(dom, m) for m in cand]
            if max(cells) > sel.max_clique_size or sum(cells) > sel.max_graph_cells:
                continue
            a = np.zeros((d, d), dtype=bool)
            for m in cand:
                idx = [k for k in range(d) if m >> k & 1]
                a[np.ix_(idx, idx)] = True
            score = tvd[np.triu(a, 1)].sum() - sel.size_penalty * sum(cells)
            if best is None or score > best[0]:
                best = (score, cand, a)
        if best is None:
            break
        state, adj = best[1], best[2]
    return [tuple(a for k, a in enumerate(dom.attrs) if m >> k & 1) for m in state]


def _problem(rng: np.random.Generator, d: int, kind: str) -> tuple[Domain, np.ndarray]:
    sizes = rng.integers(2, 11, d) if kind != "ones" else rng.choice([1, 2, 3, 7], d)
    dom = Domain([f"a{i}" for i in range(d)], sizes.tolist())
    t = np.zeros((d, d))
    iu = np.triu_indices(d, 1)
    if kind == "ties":  # few distinct values: many exact ties between pairs
        t[iu] = rng.choice([-0.01, 0.0, 0.02, 0.05], len(iu[0]))
    elif kind == "sparse":  # a few strong pairs in noise around zero
        t[iu] = rng.normal(0, 0.01, len(iu[0])) + (rng.random(len(iu[0])) < 0.1) * rng.random(len(iu[0]))
    else:
        t[iu] = rng.normal(0.02, 0.05, len(iu[0]))
    return dom, t + t.T


# (max_clique_size, max_graph_cells, size_penalty): loose, clique cap binding, graph cap binding,
# both, and a penalty that outweighs weak pairs
SETTINGS = [(1e7, 5e7, 1e-8), (300, 5e7, 1e-8), (1e7, 2000, 1e-8), (500, 3000, 0.0), (1e4, 1e5, 1e-4)]


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("kind", ["normal", "ties", "sparse", "ones"])
def test_graph_matches_the_plain_search(setting, kind):
    cap_c, cap_g, pen = setting
    sel = PrivMRFSelector(max_clique_size=cap_c, max_graph_cells=cap_g, size_penalty=pen)
    rng = np.random.default_rng([int(cap_c), int(cap_g), len(kind)])
    for d in [2, 3, 5, 8, 12, 18, 24] if kind == "normal" else [4, 7, 11, 16, 21]:
        dom, tvd = _problem(rng, d, kind)
        assert sel.graph(dom, tvd) == _graph_reference(sel, dom, tvd), (d, kind, setting)


def test_graph_matches_with_one_value_attributes_and_a_tight_graph_cap():
    """Attributes of one value let a component's cells shrink when it grows, so a pair once over
    the graph cap can fit again later: small random problems where that happens."""
    for seed in range(120):
        rng = np.random.default_rng(seed)
        d = int(rng.integers(5, 10))
        sizes = rng.choice([1, 1, 2, 3], d).tolist()
        dom = Domain([f"a{i}" for i in range(d)], sizes)
        t = np.zeros((d, d))
        iu = np.triu_indices(d, 1)
        t[iu] = rng.normal(0.02, 0.05, len(iu[0]))
        tvd = t + t.T
        sel = PrivMRFSelector(max_clique_size=50, max_graph_cells=int(rng.integers(sum(sizes), sum(sizes) + 12)),
                              size_penalty=float(rng.choice([0.0, 1e-3])))
        assert sel.graph(dom, tvd) == _graph_reference(sel, dom, tvd), seed


def test_graph_matches_on_exact_ties_and_degenerate_input():
    """All-zero scores (every pair ties), a constant score, a non-finite score, unbounded caps
    (cell counts as Python integers) and a single attribute."""
    dom = Domain([f"a{i}" for i in range(9)], [3, 2, 4, 2, 3, 5, 2, 2, 3])
    for cap_c, cap_g, pen in [(60, 400, 0.0), (60, 400, 1e-3), (math.inf, math.inf, 1e-3), (1e30, 1e40, 0.0)]:
        sel = PrivMRFSelector(max_clique_size=cap_c, max_graph_cells=cap_g, size_penalty=pen)
        for tvd in (np.zeros((9, 9)), np.ones((9, 9)) - np.eye(9)):
            assert sel.graph(dom, tvd) == _graph_reference(sel, dom, tvd)
        tvd = np.ones((9, 9))
        tvd[2, 5] = tvd[5, 2] = np.nan
        assert sel.graph(dom, tvd) == _graph_reference(sel, dom, tvd)
        rng = np.random.default_rng(9)
        tvd = rng.normal(0, 0.1, (9, 9))
        assert sel.graph(dom, tvd + tvd.T) == _graph_reference(sel, dom, tvd + tvd.T)
    one = Domain(["x"], [4])
    assert PrivMRFSelector().graph(one, np.zeros((1, 1))) == [("x",)]


def test_graph_matches_on_86_attributes():
    """As wide as Caravan (86 attributes: masks past 64 bits), sizes 2..42, with a strong 5-cycle
    of two-valued attributes spread over the masks (closing it fills in chords); the graph cap
    stops the plain search after a few steps (each of its steps takes seconds at this width)."""
    rng = np.random.default_rng(86)
    sizes = np.where(rng.random(86) < 0.8, 10, rng.integers(2, 43, 86))
    cycle = [3, 40, 63, 70, 85]
    sizes[cycle] = 2
    dom = Domain([f"c{i}" for i in range(86)], sizes.tolist())
    t = np.zeros((86, 86))
    iu = np.triu_indices(86, 1)
    t[iu] = rng.normal(0.0, 0.02, len(iu[0])) + (rng.random(len(iu[0])) < 0.05) * rng.random(len(iu[0])) * 0.3
    tvd = t + t.T
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        tvd[a, b] = tvd[b, a] = 0.5
    sel = PrivMRFSelector(max_clique_size=1e4, max_graph_cells=int(sizes.sum()) + 30)
    got = sel.graph(dom, tvd)
    assert got == _graph_reference(sel, dom, tvd)
    assert max(len(c) for c in got) == 4  # the cycle closed with a chord
