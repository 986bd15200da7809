"""GEM's adaptive selection (SPEC §10.5) and its public-data start (PMW^Pub, GEM^Pub).

This is MWEM's round (:class:`~privmarg.select.mwem.MWEMSelector`: exponential mechanism over the
workload's marginals against the model in the loop, then a Gaussian measurement, ``ρ/T`` per round)
with GEM's settings: ``T = 5d`` rounds, GEM's split ``α`` (the exponential mechanism gets
``α²ε₀²/2`` and the Gaussian ``(1−α)²ε₀²/2`` of each round, ``ε₀ = √(2ρ/(T(α² + (1−α)²)))``; α = 0.5
halves each round) and no model-size limit. GEM itself selects single counting queries (cells) by
their error; selecting a marginal and measuring all its cells costs the same zCDP (a marginal's L2
sensitivity equals a cell's) and releases more, so marginals it is, but then the noise must be
counted: the quality is the expected improvement ``w·(‖M_r(D) − M_r(G)‖₁ − √(2/π)·σ·n_r)`` (AIM's
and JAM's form; sensitivity ``w``, ``2w`` under replace-one). Without the penalty, on adult the
largest marginals (10⁴–10⁶ cells, whose measurement is almost all noise) won the selection.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..privacy import RoundPlan, marginal_l2, round_plan, score_sensitivity
from .adaptive import SQRT_2_OVER_PI, Option, RoundState
from .base import check_fraction, check_rounds
from .mwem import MWEMRun, MWEMSelector


def gem_measure_share(alpha: float) -> float:
    """Share of each round's zCDP that GEM's ``α`` gives the Gaussian: ``(1−α)²/(α² + (1−α)²)``."""
    return (1 - alpha) ** 2 / (alpha**2 + (1 - alpha) ** 2)


def default_gem_loop():
    from ..generate.gem import GEMGenerator  # torch: imported on use

    return GEMGenerator()


class GEMSelector(MWEMSelector):
    """``rounds`` T (default ``rounds_per_attribute``·d = 5d) rounds over ``workload`` (default all
    2-way marginals), GEM's ``alpha`` (0.5), the model in the loop ``loop`` (default a GEM generator
    network, warm-started every round). Privacy: exactly ``ctx.rho``, ``ρ/T`` per round."""

    name = "gem"
    label = "GEM"

    def __init__(self, workload: Any = "all-2way", *, rounds: int | None = None, rounds_per_attribute: int = 5,
                 alpha: float = 0.5, loop: Any = None):
        super().__init__(workload, rounds=rounds, alpha=0.5, loop=loop if loop is not None else default_gem_loop())
        self.alpha = check_fraction("alpha", alpha)
        self.rounds_per_attribute = check_rounds("rounds_per_attribute", rounds_per_attribute, allow_none=False)

    def _plan_rounds(self, state: RoundState) -> None:
        T = self.rounds or self.rounds_per_attribute * len(state.domain)
        state.run = MWEMRun(T, round_plan(state.ctx.rho, gem_measure_share(self.alpha),
                                          marginal_l2(state.session.neighbour), T))

    def initial(self, state: RoundState):
        self._plan_rounds(state)
        return self.refit(state)  # no measurement yet: the untrained network

    def size_limit(self, state: RoundState, plan: RoundPlan) -> float:
        return float("inf")

    def score(self, state: RoundState, cands, plan: RoundPlan):
        w, model, dom = state.weights, state.model, state.domain
        answers = state.session.answers(cands)
        # expected improvement: the error less the expected L1 norm of the measurement's noise
        scores = np.array([w[r] * (np.abs(a - model.project(r)).sum() - SQRT_2_OVER_PI * plan.sigma * dom.size(r))
                           for r, a in zip(cands, answers)])
        return [Option(r) for r in cands], scores, score_sensitivity(state.session.neighbour, max(w[r] for r in cands))


class PublicStartSelector(GEMSelector):
    """GEM's rounds started from a model of the public data (``ctx.public``): ``loop.pretrain``
    builds it (PMW^Pub: the public records with their frequencies; GEM^Pub: the network trained on
    the public marginals of the workload). Public data is free; the rounds cost exactly ``ctx.rho``.
    The record count for the start is the public N under replace-one, else the public row count
    (the first round only; later fits estimate N from the measurements)."""

    name = "public-start"

    def __init__(self, workload: Any = "all-3way", *, rounds: int | None = None, rounds_per_attribute: int = 5,
                 alpha: float = 0.5, loop: Any = None, label: str = "public-start"):
        super().__init__(workload, rounds=rounds, rounds_per_attribute=rounds_per_attribute, alpha=alpha, loop=loop)
        self.label = str(label)
        if not hasattr(self.loop, "pretrain"):
            raise ValueError(f"the loop generator {type(self.loop).__name__} cannot start from public data "
                             "(it has no pretrain method)")

    def initial(self, state: RoundState):
        ctx = state.ctx
        if ctx.public is None:
            raise ValueError(f"{self.label} needs public data: fit(private, domain, public=table)")
        self._plan_rounds(state)
        total = ctx.total if ctx.total is not None else float(ctx.public.count())
        return self.loop.pretrain(ctx.public, state.domain, state.candidates, total, ctx.zeros)
