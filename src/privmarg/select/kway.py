"""Fixed workloads: every k-way marginal (PrivPGD's selection, SPEC §8.1) or a given list."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Domain, grouping_query
from ..core.measurement import estimate_total
from ..privacy import even_sigma, marginal_l2
from .base import Context, Selection


#: a grouped marginal's expected L1 noise as a share of N, which sets how many groups its columns keep
#: (why a quarter, not a tenth: benchmarks/history/methods.md, "PrivPGD on grouped 2-way marginals")
GROUPED_NOISE_SHARE = 0.25

#: the fewest groups a column keeps: with 2 a pair tells little more than the sign of its association
MIN_GROUPS = 4


def group_count(sigma: float, rows: float, arity: int, share: float = GROUPED_NOISE_SHARE) -> int:
    """The most groups ``G`` per column (at least :data:`MIN_GROUPS`) for which a marginal of
    ``arity`` columns of ``G`` values each has an expected L1 noise ``√(2/π)·σ·G^arity`` of at most
    ``share·rows``. Public inputs only: σ, N (or its noisy estimate) and the arity."""
    cells = share * rows / (math.sqrt(2.0 / math.pi) * sigma)
    return max(MIN_GROUPS, int(math.floor(cells ** (1.0 / arity) * (1 + 1e-12))))


def contiguous_groups(k: int, groups: int) -> np.ndarray | None:
    """Codes ``0..k−1`` merged into ``groups`` runs of neighbouring codes of near-equal length
    (None when ``k ≤ groups``: the column keeps its codes)."""
    return (np.arange(k) * groups) // k if k > groups else None


class KWaySelector:
    """Measure all ``degree``-way marginals (or the given ``cliques``), each with the same σ.

    ``grouped``: every 1-way marginal is measured too, and each marginal of two or more columns is
    measured over its columns merged into runs of neighbouring codes (:func:`contiguous_groups`),
    as many groups as keep a marginal of that many values a column within an expected L1 noise of
    ``noise_share``·N (:func:`group_count`; N, or under add/remove its estimate from the 1-way
    measurements, measured first); a column with no more values keeps its own. Each grouped count
    is a sum of cells, so the charge per marginal is unchanged; σ is even over all the marginals.
    With a ``constraint`` whose statistic must be released (PrivPGD's thresholding constraint), the
    statistic is released after the marginals at the constraint's own cost ``ρ_c`` (the rest of the
    budget), and the marginals get ``ρ − ρ_c``. Privacy: exactly ``ctx.rho``.
    """

    name = "kway"

    def __init__(self, degree: int = 2, cliques: Sequence[Sequence[str]] | None = None, constraint: Any = None,
                 grouped: bool = False, noise_share: float = GROUPED_NOISE_SHARE):
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
        self.degree = degree
        self.cliques = None if cliques is None else [tuple(c) for c in cliques]
        self.constraint = constraint
        self.grouped = bool(grouped)
        if not (0 < noise_share and math.isfinite(noise_share)):
            raise ValueError(f"noise_share must be positive and finite, got {noise_share!r}")
        self.noise_share = float(noise_share)

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

    def _measure_grouped(self, session, ctx: Context, cliques, rho_m: float) -> tuple[list, float, int]:
        """The 1-way marginals of the cliques' columns, then each wider clique over grouped columns
        (:meth:`run`'s ``grouped``); returns (every clique measured, σ, the group count)."""
        dom = session.domain
        wide = [c for c in cliques if len(c) > 1]
        ones = [(a,) for a in dom.attrs if any(a in c for c in cliques)]
        sigma = even_sigma(rho_m, len(ones) + len(wide), marginal_l2(session.neighbour))
        for c in ones:
            session.measure(c, sigma, what=f"marginal {c[0]}")
        rows = ctx.total if ctx.total is not None else estimate_total(session.measurements)
        g = group_count(sigma, rows, max((len(c) for c in wide), default=1), self.noise_share)
        for c in wide:
            groups = [contiguous_groups(dom[a], g) for a in c]
            if all(x is None for x in groups):
                session.measure(c, sigma, what=f"marginal {','.join(c)}")
                continue
            session.measure(c, sigma, what=f"marginal {','.join(c)} over at most {g} groups a column",
                            query=grouping_query(dom.sizes(c), groups))
        return ones + wide, sigma, g

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
        extra: dict = {}
        if self.grouped:
            cliques, sigma, extra["groups"] = self._measure_grouped(session, ctx, cliques, rho_m)
        else:
            sigma = even_sigma(rho_m, len(cliques), marginal_l2(session.neighbour))
            for c in cliques:
                session.measure(c, sigma, what=f"marginal {','.join(c)}")
        ctx.progress(f"{len(cliques)} marginals measured")
        extra.update(cliques=cliques, sigma=sigma)
        if release:
            total = ctx.total if ctx.total is not None else estimate_total(session.measurements)
            con.release(session, ctx.rho - session.rho_spent, total)
            ctx.progress("constraint statistic released")
        elif con is not None and hasattr(con, "resolve"):
            con.resolve(dom)
        return Selection(list(session.measurements), dom, extra=extra,
                         hints={"constraint": con} if con is not None else {})
