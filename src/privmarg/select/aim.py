"""AIM's selection (McKenna et al. 2022, Algorithm 4; SPEC §4): adaptive, workload-aware, annealed."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from ..privacy import RoundPlan, marginal_l2, round_plan, score_sensitivity
from .adaptive import SQRT_2_OVER_PI, AdaptiveSelector, ClosureCandidates, Option, RoundState
from .base import Selection, check_fraction, check_rounds


def _uncached(model):
    """``model.project`` without filling the model's projection cache, where the model has one."""
    try:
        if "cache" in inspect.signature(model.project).parameters:
            return lambda r: model.project(r, cache=False)
    except (TypeError, ValueError):
        pass
    return model.project


class AIMSelector(ClosureCandidates, AdaptiveSelector):
    """Measure every 1-way marginal, then rounds of: pick the workload marginal (downward closure,
    AIM weights) whose model error most exceeds its expected noise, measure it; halve σ when a
    measurement barely moves the model; spend the last of the budget in one round.

    ``rounds`` (T, sizing the initial split; default 16·d), ``alpha`` the share of each round for
    measurement, ``max_model_size`` (MB of the loop model, grown with the budget spent), ``loop``
    the model in the loop. Privacy: exactly ``ctx.rho``; each round one exponential mechanism
    (ε²/8, sensitivity ``max w`` or ``2 max w``) and one Gaussian marginal (Δ₂²/(2σ²)).
    """

    name = "aim"
    label = "AIM"

    def __init__(self, workload: Any = "all-3way", *, rounds: int | None = None, alpha: float = 0.9,
                 max_model_size: float = 80.0, loop: Any = None):
        super().__init__(loop, max_model_size)
        self.workload = workload
        self.rounds = check_rounds("rounds", rounds)
        self.alpha = check_fraction("alpha", alpha)

    def initial(self, state: RoundState):
        s, dom = state.session, state.domain
        d = len(dom)
        T = self.rounds or 16 * d
        if T < d:
            raise ValueError(f"rounds must be at least the number of attributes ({d})")
        l2 = marginal_l2(s.neighbour)
        state.extra.update(l2=l2, rho=state.ctx.rho, plan=round_plan(state.ctx.rho, self.alpha, l2, T),
                           terminate=False, models={})
        sigma = state.extra["plan"].sigma
        done = {m.attrs for m in s.measurements}
        for r in state.candidates:
            if len(r) == 1 and r not in done:
                s.measure(r, sigma, what=f"AIM init 1-way {r[0]}")
        state.ctx.progress("AIM: 1-way marginals measured")
        return self.refit(state)

    def plan(self, state: RoundState) -> RoundPlan | None:
        x = state.extra
        if x["terminate"]:
            return None
        rho, l2, plan = x["rho"], x["l2"], x["plan"]
        remaining = rho - state.session.rho_spent
        if remaining < 2 * plan.cost(l2):
            if remaining <= 1e-12 * rho:
                return None
            plan = round_plan(remaining, self.alpha, l2)  # the last round takes what is left
            x["terminate"] = True
        x["plan"] = plan
        return plan

    def size_limit(self, state: RoundState, plan: RoundPlan) -> float:
        x = state.extra
        return self.max_model_size * (state.session.rho_spent + plan.cost(x["l2"])) / x["rho"]

    def score(self, state: RoundState, cands, plan: RoundPlan):
        dom, w, model = state.domain, state.weights, state.model
        answers = state.session.answers(cands)
        project = _uncached(model)  # one query per candidate and model: caching them all costs memory
        scores = np.array([w[r] * (np.abs(a - project(r)).sum() - SQRT_2_OVER_PI * plan.sigma * dom.size(r))
                           for r, a in zip(cands, answers)])
        sens = score_sensitivity(state.session.neighbour, max(w[r] for r in cands))
        return [Option(r) for r in cands], scores, sens

    def after(self, state: RoundState, option: Option, plan: RoundPlan, before, entry: dict, prev) -> None:
        r = option.clique
        self._keep_round_model(state, prev, entry)
        if np.abs(state.model.project(r) - before).sum() <= SQRT_2_OVER_PI * plan.sigma * state.domain.size(r):
            x = state.extra
            x["plan"] = RoundPlan(plan.sigma / 2, plan.epsilon * 2)

    @staticmethod
    def _keep_round_model(state: RoundState, prev, entry: dict) -> None:
        """Keep p̂_{t-1} for the error bounds, compactly, and drop the models no bound can need.

        The bound of an unsupported marginal ``r`` (no measurement covers it) reads the model of the
        last round where ``r`` was a candidate; a supported one reads only measurements. Measurements
        only accumulate, so once ``r`` is supported it stays so: only the rounds that are the last
        candidate round of a still unsupported marginal are kept, each as potentials only."""
        x = state.extra
        last = x.setdefault("last_round", {})
        for c in entry["candidates"]:
            last[tuple(c)] = state.t
        if hasattr(prev, "compact"):
            prev = prev.compact()
        elif hasattr(prev, "clear_cache"):
            prev.clear_cache()
        x["models"][state.t] = prev
        measured = [set(m.attrs) for m in state.session.measurements]
        live = {t for r, t in last.items() if not any(set(r) <= m for m in measured)}
        for t in [t for t in x["models"] if t not in live]:
            del x["models"][t]

    def final_selection(self, state: RoundState) -> Selection:
        sel = super().final_selection(state)
        # the last round each marginal was a candidate in; the models kept are those some
        # unsupported marginal's error bound needs (see _keep_round_model)
        last: dict[tuple[str, ...], int] = {}
        for entry in state.session.rounds:
            for c in entry["candidates"]:
                last[tuple(c)] = entry["round"]
        models = dict(state.extra["models"])
        sel.extra.update(weights=state.weights, workload=self.workload_, round_models=models,
                         last_candidate_round=last, rounds=state.t)
        return sel
