"""The Gaussian workload baseline (AIM paper §6): every workload marginal measured directly."""

from __future__ import annotations

from typing import Any

from ..core import Domain, parse_workload
from ..privacy import gaussian_sigma, marginal_l2, power_split
from .base import Context, Selection

Clique = tuple[str, ...]


class GaussianSelector:
    """Answer each marginal of ``workload`` with the Gaussian mechanism; no selection.

    The AIM paper's "Gaussian" baseline ("answers all queries in the workload using the Gaussian
    mechanism, using the optimal privacy budget allocation described in Zhang et al. 2021"):
    marginal ``i`` with ``n_i`` cells and workload weight ``c_i`` gets
    ``ρ_i = ρ·(c_i n_i)^{2/3}/Σ_j (c_j n_j)^{2/3}``, which minimises the expected weighted L1 noise
    ``Σ c_i n_i σ_i`` (PrivSyn's allocation; with unit weights ``ρ_i ∝ n_i^{2/3}``). A clique listed
    twice is measured once with the weights summed.

    ``workload``: as AIM's (``"all-3way"`` by default, the workloads of the AIM paper's experiments,
    so that ``gaussian`` and ``aim`` answer the same queries; ``"all-2way"``, a JSON file or a list).
    A dense workload makes a graphical model as large as the domain: with the ``pgm`` generator
    use a small workload, or the ``gum`` generator, which has no model-size limit.

    Privacy: exactly ``ctx.rho``: one Gaussian marginal per workload clique, ``Δ₂²/(2σ_i²)`` each
    (Δ₂ = 1 add/remove, √2 replace-one).
    """

    name = "gaussian"

    def __init__(self, workload: Any = "all-3way"):
        self.workload = workload

    def _cliques(self, domain: Domain) -> dict[Clique, float]:
        out: dict[Clique, float] = {}
        for c, w in parse_workload(self.workload, domain):
            out[c] = out.get(c, 0.0) + w
        return out

    def supporting_cliques(self, domain: Domain) -> list[Clique]:
        return list(self._cliques(domain))

    def run(self, session, ctx: Context) -> Selection:
        dom = session.domain
        weighted = self._cliques(dom)
        cliques = list(weighted)
        shares = power_split(ctx.rho, [weighted[c] * dom.size(c) for c in cliques])
        l2 = marginal_l2(session.neighbour)
        sigmas = []
        for c, r in zip(cliques, shares):
            sigmas.append(gaussian_sigma(r, l2))
            session.measure(c, sigmas[-1], what=f"Gaussian workload marginal {','.join(c)}")
        ctx.progress(f"Gaussian: {len(cliques)} workload marginals measured")
        return Selection(list(session.measurements), dom, extra={"cliques": cliques, "sigmas": sigmas})
