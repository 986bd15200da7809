"""Fixed workloads: every k-way marginal (PrivPGD's selection, SPEC §8.1) or a given list."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Domain
from ..privacy import even_sigma, marginal_l2
from .base import Context, Selection


class KWaySelector:
    """Measure all ``degree``-way marginals (or the given ``cliques``), each with the same σ.

    With a ``constraint`` whose statistic must be released (PrivPGD's thresholding constraint), the
    statistic is released after the marginals at the constraint's own cost ``ρ_c`` (the rest of the
    budget), and the marginals get ``ρ − ρ_c``. Privacy: exactly ``ctx.rho``.
    """

    name = "kway"

    def __init__(self, degree: int = 2, cliques: Sequence[Sequence[str]] | None = None, constraint: Any = None):
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
        self.degree = degree
        self.cliques = None if cliques is None else [tuple(c) for c in cliques]
        self.constraint = constraint

    def _cliques(self, dom: Domain) -> list[tuple[str, ...]]:
        if self.cliques is not None:
            out = [dom.canonical(c) for c in self.cliques]
            if not out or any(not c for c in out):
                raise ValueError("cliques must be non-empty attribute tuples")
            return list(dict.fromkeys(out))
        return list(itertools.combinations(dom.attrs, min(self.degree, len(dom))))

    def supporting_cliques(self, domain: Domain) -> list[tuple[str, ...]]:
        out = self._cliques(domain)
        con = self.constraint
        if con is not None and getattr(con, "needs_release", False):
            th = con.resolve(domain)
            out.append(tuple(a for j, a in enumerate(domain.attrs) if np.any(th[:, j] != 0)))
        return out

    def run(self, session, ctx: Context) -> Selection:
        dom = session.domain
        cliques = self._cliques(dom)
        con = self.constraint
        release = con is not None and getattr(con, "needs_release", False)
        rho_c = con.rho_cost() if release else 0.0
        rho_m = ctx.rho - rho_c
        if not rho_m > 0:
            raise ValueError(f"the constraint's cost rho={rho_c:.6g} leaves nothing of rho={ctx.rho:.6g} "
                             "for the marginals")
        sigma = even_sigma(rho_m, len(cliques), marginal_l2(session.neighbour))
        for c in cliques:
            session.measure(c, sigma, what=f"marginal {','.join(c)}")
        ctx.progress(f"{len(cliques)} marginals measured")
        extra: dict = {"cliques": cliques, "sigma": sigma}
        if release:
            from ..core.measurement import estimate_total

            total = ctx.total if ctx.total is not None else estimate_total(session.measurements)
            con.release(session, ctx.rho - session.rho_spent, total)
            ctx.progress("constraint statistic released")
        elif con is not None and hasattr(con, "resolve"):
            con.resolve(dom)
        return Selection(list(session.measurements), dom, extra=extra,
                         hints={"constraint": con} if con is not None else {})
