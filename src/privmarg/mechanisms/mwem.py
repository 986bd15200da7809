"""MWEM+PGM (AIM paper, Algorithm 1): the exponential mechanism over the workload, T rounds."""

from __future__ import annotations

import math

import numpy as np

from ..dataset import Dataset
from ..estimation import estimate, model_size_mb
from ..privacy import exponential_mechanism, marginal_l2, score_sensitivity
from ..workload import parse_workload
from .base import Mechanism


class MWEM(Mechanism):
    """MWEM+PGM: ``rounds`` (default d) equal rounds, each an exponential-mechanism selection among
    the workload's cliques (quality ``‖M_r(D) − M_r(p̂)‖₁ − n_r``, times the clique's weight) and a
    Gaussian measurement; models capped at ``max_model_size``·t/T MB.

    Privacy: ``rho``-zCDP spent exactly, ``rho/T`` per round (share ``alpha`` for measurement).
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-3way",
                 rounds: int | None = None, alpha: float = 0.9, max_model_size: float = 25.0,
                 iters: int = 1000, tol: float = 1e-6, **kw):
        super().__init__(epsilon, delta, **kw)
        if not 0 < alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        self.workload = workload
        self.rounds = rounds
        self.alpha = alpha
        self.max_model_size = float(max_model_size)
        self.iters = iters
        self.tol = tol

    def _fit(self, data: Dataset) -> None:
        dom = data.domain
        acc = self.accountant_
        workload = parse_workload(self.workload, dom)
        self.workload_ = workload
        weights: dict[tuple[str, ...], float] = {}
        for c, w in workload:
            weights[c] = weights.get(c, 0.0) + w
        cands = [c for c, w in weights.items() if w > 0]
        answers = {r: data.project(r) for r in cands}
        T = self.rounds or len(dom)
        rho_t = self.rho_available_ / T  # the budget left after any DP preprocessing
        sigma = marginal_l2(self.neighbour) * math.sqrt(1 / (2 * self.alpha * rho_t))
        eps = math.sqrt(8 * (1 - self.alpha) * rho_t)
        zero_cliques = [z.attrs for z in self.zeros_]
        model = estimate(dom, [], total=self.total_ or 1.0, zeros=self.zeros_)
        for t in range(1, T + 1):
            limit = self.max_model_size * t / T
            measured = [m.attrs for m in self.measurements_] + zero_cliques
            cand_t = [r for r in cands if model_size_mb(dom, measured + [r]) <= limit]
            if not cand_t:
                raise ValueError(f"no workload clique fits in {limit:.3g} MB: raise max_model_size")
            scores = np.array([weights[r] * (np.abs(answers[r] - model.project(r)).sum() - dom.size(r))
                               for r in cand_t])
            sens = score_sensitivity(self.neighbour, max(weights[r] for r in cand_t))
            r_t = cand_t[exponential_mechanism(acc, scores, eps, sens, self.noise_rng_, what=f"MWEM round {t} select")]
            self.measure(data, r_t, sigma, what=f"MWEM round {t} measure {','.join(r_t)}")
            model = estimate(dom, self.measurements_, total=self.total_, iters=self.iters, tol=self.tol,
                             warm=model.potentials, step=model.step_size, zeros=self.zeros_)
            self.log_.append({"round": t, "selected": list(r_t), "sigma": sigma, "epsilon": eps})
            self._progress(self.rho_used_, self.rho_available_, f"MWEM round {t}: measured {','.join(r_t)}")
        self.model_ = model
