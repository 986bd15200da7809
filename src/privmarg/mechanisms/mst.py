"""MST (McKenna, Miklau, Sheldon 2021): 1-way marginals, a DP maximum spanning tree, its 2-way marginals."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..dataset import Dataset
from ..domain import Domain
from ..estimation import Measurement, estimate
from ..privacy import exponential_mechanism, gaussian_mechanism, marginal_l2, score_sensitivity
from .base import Mechanism


class MST(Mechanism):
    """MST with domain compression (SPEC §5).

    Budget in thirds: the 1-way marginals (jointly, σ·√d each), the exponential-mechanism Kruskal
    selection of d−1 pairs, and the tree's 2-way marginals (jointly, σ·√(d−1) each), with
    σ = Δ₂·√(3/(2ρ)). Privacy: ``rho``-zCDP, spent exactly.
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, iters: int = 1000,
                 final_iters: int = 3000, tol: float = 1e-7, compress: bool = True, **kw):
        super().__init__(epsilon, delta, **kw)
        self.iters = iters
        self.final_iters = final_iters
        self.tol = tol
        self.compress = compress

    def _fit(self, data: Dataset) -> None:
        dom = data.domain
        acc = self.accountant_
        rho = self.rho_available_  # the budget left after any DP preprocessing
        d = len(dom)
        d2 = marginal_l2(self.neighbour)
        sigma = d2 * math.sqrt(3 / (2 * rho))
        # 1) all 1-way marginals measured jointly: unit weights 1/√d, so each has std σ√d, cost ρ/3
        s1 = sigma * math.sqrt(d)
        ones = []
        for a in dom.attrs:
            y = gaussian_mechanism(acc, data.project([a]), s1, d2, self.noise_rng_, what=f"MST 1-way {a}")
            ones.append(Measurement((a,), y, s1))
        self.measurements_ = list(ones)
        self._progress(self.rho_used_, rho, "MST: 1-way marginals measured")
        # 2) compress rare values using the released 1-way answers only
        self.supports_ = {}
        cdata, cdom, cones = data, dom, ones
        if self.compress:
            cdata, cdom, cones = self._compress(data, ones, s1)
        self.compressed_domain_ = cdom
        # 3) select a spanning tree with the exponential mechanism (ρ/3)
        edges = self._select(cdata, cones, rho / 3) if d > 1 else []
        # 4) the tree's 2-way marginals, jointly (ρ/3)
        twos = []
        if edges:
            s2 = sigma * math.sqrt(len(edges))
            for e in edges:
                y = gaussian_mechanism(acc, cdata.project(e), s2, d2, self.noise_rng_, what=f"MST 2-way {','.join(e)}")
                twos.append(Measurement(e, y, s2))
        self.compressed_measurements_ = cones + twos
        self.measurements_ = ones + twos  # 2-way answers are over the compressed domain
        self.edges_ = edges
        self.model_ = estimate(cdom, cones + twos, total=self.total_, iters=self.final_iters, tol=self.tol,
                               zeros=self.zeros_)
        self._progress(self.rho_used_, rho, "MST: done")

    def _compress(self, data: Dataset, ones: list[Measurement], s: float):
        """Keep values whose noisy count is ≥ 3s; merge the rest into one extra value (SPEC §5 step 2)."""
        dom = data.domain
        keep = {a for z in self.zeros_ for a in z.attrs}  # zeros are declared on original values
        shape, cones, cols = [], [], []
        for j, (a, m) in enumerate(zip(dom.attrs, ones)):
            supp = m.y >= 3 * s
            k = dom[a]
            if supp.all() or a in keep:
                shape.append(k)
                cones.append(m)
                cols.append(data.codes[:, j])
                continue
            self.supports_[a] = np.flatnonzero(supp)
            n_s, merged = int(supp.sum()), k - int(supp.sum())
            mapping = np.full(k, n_s, dtype=np.int64)
            mapping[supp] = np.arange(n_s)
            y = np.append(m.y[supp], m.y[~supp].sum() / math.sqrt(merged))
            q = np.eye(n_s + 1)
            q[-1, -1] = 1 / math.sqrt(merged)
            shape.append(n_s + 1)
            cones.append(Measurement((a,), y, s, query=q))
            cols.append(mapping[data.codes[:, j]])
        cdom = Domain(dom.attrs, shape)
        return Dataset(np.column_stack(cols), cdom, validate=False), cdom, cones

    def _select(self, data: Dataset, ones: list[Measurement], rho_sel: float) -> list[tuple[str, str]]:
        dom = data.domain
        model = estimate(dom, ones, total=self.total_, iters=self.iters, tol=self.tol)
        pairs = list(itertools.combinations(dom.attrs, 2))
        score = {p: float(np.abs(data.project(p) - model.project(p)).sum()) for p in pairs}  # private
        comp = {a: i for i, a in enumerate(dom.attrs)}
        r = len(dom)
        eps = math.sqrt(8 * rho_sel / (r - 1))
        sens = score_sensitivity(self.neighbour, 1.0)
        edges = []
        for step in range(r - 1):
            cand = [p for p in pairs if comp[p[0]] != comp[p[1]]]
            i = exponential_mechanism(self.accountant_, np.array([score[p] for p in cand]), eps, sens,
                                      self.noise_rng_, what=f"MST tree edge {step + 1}")
            a, b = cand[i]
            edges.append((a, b))
            old, new = comp[b], comp[a]
            for k, v in comp.items():
                if v == old:
                    comp[k] = new
            self._progress(self.rho_used_, self.rho_available_, f"MST: edge {a}-{b}")
        return edges

    def sample_codes(self, rows: int | None = None) -> np.ndarray:
        """Records in the original domain: merged values become a uniform draw among the merged ones."""
        codes = super().sample_codes(rows)
        rng = self.sample_rng_
        for j, a in enumerate(self.domain_.attrs):
            supp = self.supports_.get(a)
            if supp is None:
                continue
            k = self.domain_[a]
            rest = np.setdiff1d(np.arange(k), supp)
            col = codes[:, j]
            other = col == len(supp)
            out = np.empty_like(col)
            out[~other] = supp[col[~other]]
            out[other] = rest[rng.integers(0, len(rest), other.sum())]
            codes[:, j] = out
        return codes
