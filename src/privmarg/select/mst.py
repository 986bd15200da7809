"""MST's selection (McKenna, Miklau, Sheldon 2021; SPEC §5): a DP maximum spanning tree of pairs."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ..core import Domain
from ..privacy import even_epsilon, even_sigma, marginal_l2, score_sensitivity
from .base import Context, Selection, default_loop, one_ways


class MSTSelector:
    """1-way marginals (jointly), a spanning tree of attribute pairs chosen by Kruskal's algorithm
    with the exponential mechanism (score: L1 distance between the pair's private marginal and the
    1-way model's), and the tree's 2-way marginals (jointly).

    Budget: thirds of ``ctx.rho``; if the session already holds every 1-way marginal (e.g. measured
    by :class:`~privmarg.select.compress.Compressed`), halves of it for the tree and its marginals.
    ``loop``: the generator of the 1-way model. Privacy: exactly ``ctx.rho``.
    """

    name = "mst"

    def __init__(self, loop: Any = None):
        self.loop = loop if loop is not None else default_loop()

    def supporting_cliques(self, domain: Domain) -> list[tuple[str, ...]]:
        return one_ways(domain) + list(itertools.combinations(domain.attrs, 2))

    def run(self, session, ctx: Context) -> Selection:
        dom = session.domain
        d = len(dom)
        l2 = marginal_l2(session.neighbour)
        have = {m.attrs for m in session.measurements}
        todo = [c for c in one_ways(dom) if c not in have]
        if todo:
            s1 = even_sigma(ctx.rho / 3, len(todo), l2)
            for c in todo:
                session.measure(c, s1, what=f"MST 1-way {c[0]}")
            ctx.progress("MST: 1-way marginals measured")
        remaining = ctx.rho - session.rho_spent
        edges: list[tuple[str, str]] = []
        if d > 1:
            edges = self._select(session, ctx, remaining / 2)
            remaining = ctx.rho - session.rho_spent
            s2 = even_sigma(remaining, len(edges), l2)
            for e in edges:
                session.measure(e, s2, what=f"MST 2-way {','.join(e)}")
        ctx.progress("MST: done")
        return Selection(list(session.measurements), dom, extra={"edges": edges})

    def _select(self, session, ctx: Context, rho_sel: float) -> list[tuple[str, str]]:
        dom = session.domain
        model = self.loop.generate(session.measurements, dom, total=ctx.total)
        pairs = list(itertools.combinations(dom.attrs, 2))
        score = {p: float(np.abs(a - model.project(p)).sum()) for p, a in zip(pairs, session.answers(pairs))}
        comp = {a: i for i, a in enumerate(dom.attrs)}
        eps = even_epsilon(rho_sel, len(dom) - 1)
        sens = score_sensitivity(session.neighbour, 1.0)
        edges = []
        for step in range(len(dom) - 1):
            cand = [p for p in pairs if comp[p[0]] != comp[p[1]]]
            a, b = cand[session.select(np.array([score[p] for p in cand]), eps, sens, what=f"MST tree edge {step + 1}")]
            edges.append((a, b))
            old, new = comp[b], comp[a]
            for k, v in comp.items():
                if v == old:
                    comp[k] = new
            ctx.progress(f"MST: edge {a}-{b}")
        session.forget()
        return edges
