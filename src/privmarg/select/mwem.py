"""MWEM+PGM's selection (AIM paper, Algorithm 1): T equal rounds over the workload's cliques."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import Domain, parse_workload
from ..privacy import RoundPlan, marginal_l2, round_plan, score_sensitivity
from .adaptive import AdaptiveSelector, Option, RoundState, model_errors
from .base import check_fraction, check_rounds


@dataclass
class MWEMRun:
    """What an MWEM run keeps between rounds: T and every round's noise (the same each round)."""

    rounds: int
    plan: RoundPlan


class MWEMSelector(AdaptiveSelector):
    """``rounds`` (default d) equal rounds, each an exponential-mechanism choice among the workload's
    cliques (quality ``w·(‖M_r(D) − M_r(p̂)‖₁ − n_r)``) and a Gaussian measurement; the loop model
    is capped at ``max_model_size``·t/T MB. Privacy: exactly ``ctx.rho``, ``rho/T`` per round (share
    ``alpha`` for measurement)."""

    name = "mwem"
    label = "MWEM"
    free_candidates = False

    def __init__(self, workload: Any = "all-3way", *, rounds: int | None = None, alpha: float = 0.9,
                 max_model_size: float = 25.0, loop: Any = None):
        super().__init__(loop, max_model_size)
        self.workload = workload
        self.rounds = check_rounds("rounds", rounds)
        self.alpha = check_fraction("alpha", alpha)

    def _weights(self, domain: Domain) -> dict:
        self.workload_ = parse_workload(self.workload, domain)
        weights: dict[tuple[str, ...], float] = {}
        for c, w in self.workload_:
            weights[c] = weights.get(c, 0.0) + w
        return {c: w for c, w in weights.items() if w > 0}

    def supporting_cliques(self, domain: Domain) -> list[tuple[str, ...]]:
        return list(self._weights(domain))

    def prepare(self, domain: Domain):
        weights = self._weights(domain)
        return list(weights), weights

    def initial(self, state: RoundState):
        T = self.rounds or len(state.domain)
        state.run = MWEMRun(T, round_plan(state.ctx.rho, self.alpha, marginal_l2(state.session.neighbour), T))
        return self.refit(state)  # no measurement yet: the uniform model

    def plan(self, state: RoundState) -> RoundPlan | None:
        return state.run.plan if state.t < state.run.rounds else None

    def size_limit(self, state: RoundState, plan: RoundPlan) -> float:
        return self.max_model_size * (state.t) / state.run.rounds

    def score(self, state: RoundState, cands, plan: RoundPlan):
        dom, w, model = state.domain, state.weights, state.model
        answers = state.session.answers(cands)
        weight = np.array([w[r] for r in cands])
        scores = weight * (model_errors(model, cands, answers) - np.array([dom.size(r) for r in cands], dtype=float))
        return [Option(r) for r in cands], scores, score_sensitivity(state.session.neighbour, float(weight.max()))
