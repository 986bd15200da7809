"""Independent: every 1-way marginal, nothing else (the baseline)."""

from __future__ import annotations

import math

from ..dataset import Dataset
from ..estimation import estimate
from ..privacy import marginal_l2
from .base import Mechanism


class Independent(Mechanism):
    """All d one-way marginals measured with equal Gaussian noise; attributes sampled independently.

    Privacy: ``rho``-zCDP spent exactly: d Gaussian measurements of Δ₂²/(2σ²) each, σ = Δ₂·√(d/(2ρ)).
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, iters: int = 1000, **kw):
        super().__init__(epsilon, delta, **kw)
        self.iters = iters

    def _fit(self, data: Dataset) -> None:
        dom = data.domain
        sigma = marginal_l2(self.neighbour) * math.sqrt(len(dom) / (2 * self.rho_available_))
        for a in dom.attrs:
            self.measure(data, (a,), sigma, what=f"1-way {a}")
            self._progress(self.rho_used_, self.rho_available_, f"measured {a}")
        self.model_ = estimate(dom, self.measurements_, total=self.total_, iters=self.iters, zeros=self.zeros_)
