"""Independent: every 1-way marginal, nothing else (the baseline)."""

from __future__ import annotations

from ..core import Domain
from ..privacy import even_sigma, marginal_l2
from .base import Context, Selection, one_ways


class IndependentSelector:
    """All d one-way marginals with equal Gaussian noise. Privacy: exactly ``ctx.rho``, d
    measurements of Δ₂²/(2σ²) each, σ = Δ₂·√(d/(2ρ))."""

    name = "independent"

    def supporting_cliques(self, domain: Domain) -> list[tuple[str, ...]]:
        return one_ways(domain)

    def run(self, session, ctx: Context) -> Selection:
        dom = session.domain
        sigma = even_sigma(ctx.rho, len(dom), marginal_l2(session.neighbour))
        for c in one_ways(dom):
            session.measure(c, sigma, what=f"1-way {c[0]}")
            ctx.progress(f"measured {c[0]}")
        return Selection(list(session.measurements), dom)
