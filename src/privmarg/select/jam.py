"""JAM's selection (Fuentes et al., AISTATS 2024; SPEC §7): private measurement or public proxy.

Each round the exponential mechanism chooses, over ``W⁺ × {private, public}``, both a marginal and
how to answer it: a Gaussian measurement of the private data (unbiased, noisy, costs budget) or the
public proxy ``(N/N_pub)·M_r(D_pub)`` (biased, free). A public choice leaves the round's
measurement budget for later rounds ("frugal budgeting").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import Measurement
from ..privacy import RoundPlan, marginal_l2, round_plan, score_sensitivity
from .adaptive import SQRT_2_OVER_PI, AdaptiveSelector, ClosureCandidates, Option, RoundState
from .base import check_fraction, check_rounds, default_loop

WEIGHTINGS = ("equal", "mle", "inv_sigma")
# the model refitted every round unless a loop is given (the JAM preset's defaults)
LOOP = {"iters": 5, "tol": 1e-4, "method": "precond", "dtype": "float32"}


def _weight(sigma: float, weighting: str) -> float:
    if weighting == "mle":
        return 1.0 / (2.0 * sigma**2)
    if weighting == "inv_sigma":
        return 1.0 / sigma
    return 1.0


class JAMSelector(ClosureCandidates, AdaptiveSelector):
    """``rounds`` T selections; round ``t`` has ``ρ_t = (ρ − ρ_used)/(T − t)``, ``alpha`` of it for the
    selection (always charged, score sensitivity 4: a difference of two terms that each move by 2
    under replace-one) and the rest for a private measurement (Δ₂ = √2), charged only when chosen.
    ``weighting`` of measurements in the loop model's loss: ``"equal"`` (the paper), ``"mle"`` or
    ``"inv_sigma"`` (a public answer weighted as if it had the noise of the round that chose it);
    ``warm_start``: refit the loop model from the last one (else from scratch, as in the paper);
    ``loop``: the generator refitted every round (default: a graphical model, 5 preconditioned
    iterations on float32 tables, as in the JAM preset).
    Needs replace-one neighbours (N rescales the public answers) and ``ctx.public``.
    """

    name = "jam"
    label = "JAM"

    def __init__(self, workload: Any = "all-3way", *, rounds: int = 30, alpha: float = 0.2,
                 max_model_size: float = 80.0, weighting: str = "equal", warm_start: bool = True, loop: Any = None):
        # exact public marginals full of empty cells next to noisy private ones: the preconditioned
        # step reaches the optimum ~100x faster there than the momentum step (test_estimation); a
        # few warm-started iterations a round rank the candidates as well as a converged fit
        # (benchmarks/RESULTS.md, "JAM speed"): the JAM preset's loop
        super().__init__(loop if loop is not None else default_loop(**LOOP), max_model_size)
        self.warm_start = bool(warm_start)
        self.workload = workload
        self.rounds = check_rounds("rounds", rounds, allow_none=False)
        self.alpha = check_fraction("alpha", alpha)
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
        self.weighting = weighting

    def initial(self, state: RoundState):
        s, ctx = state.session, state.ctx
        if s.neighbour != "replace_one" or ctx.total is None:
            raise ValueError("JAM needs replace-one neighbours: the public answers are rescaled by the "
                             "record count N, which is private under add/remove")
        if ctx.public is None:
            raise ValueError("JAM needs public data: fit(private, domain, public=table)")
        pub = ctx.public
        scale = ctx.total / pub.count()
        cands = state.candidates
        proxy = dict(zip(cands, (scale * y for y in pub.marginals(cands))))  # public: free
        answers = s.answers(cands)  # private: only read to score a charged selection
        pub_err = {r: float(np.abs(a - proxy[r]).sum()) for r, a in zip(cands, answers)}
        state.extra.update(proxy=proxy, pub_err=pub_err, pub_done=set(), public_rows=int(pub.count()),
                           l2=marginal_l2(s.neighbour), sens=2 * score_sensitivity(s.neighbour))
        return None  # the first round scores every candidate's private error as 0

    def plan(self, state: RoundState) -> RoundPlan | None:
        T, rho = self.rounds, state.ctx.rho
        if state.t >= T:
            return None
        rho_t = max(0.0, rho - state.session.rho_spent) / (T - state.t)
        if rho_t <= 1e-12 * rho:
            return None
        state.extra["rho_t"] = rho_t
        return round_plan(rho_t, 1 - self.alpha, state.extra["l2"])

    def size_limit(self, state: RoundState, plan: RoundPlan) -> float:
        return self.max_model_size * max(1.0 / self.rounds, state.session.rho_spent / state.ctx.rho)

    def score(self, state: RoundState, cands, plan: RoundPlan):
        x, dom, model = state.extra, state.domain, state.model
        pub_t = [r for r in cands if r not in x["pub_done"]]  # a repeated proxy adds no information
        if model is None:
            err = {r: 0.0 for r in cands}
        else:
            answers = dict(zip(cands, state.session.answers(cands)))
            # widest first: the graphical model then sums a cached 3-way marginal for a 2-way one
            err = {r: float(np.abs(answers[r] - model.project(r)).sum()) for r in sorted(cands, key=len, reverse=True)}
        scores = np.array([err[r] - SQRT_2_OVER_PI * plan.sigma * dom.size(r) for r in cands]
                          + [err[r] - x["pub_err"][r] for r in pub_t])
        options = [Option(r, "private") for r in cands] + [Option(r, "public") for r in pub_t]
        return options, scores, x["sens"]

    def refit(self, state: RoundState):
        if self.warm_start:
            return super().refit(state)
        s, ctx = state.session, state.ctx
        return self.loop.generate(s.measurements, s.domain, zeros=ctx.zeros, total=ctx.total)

    def act(self, state: RoundState, option: Option, plan: RoundPlan) -> Measurement:
        r, s = option.clique, state.session
        w = _weight(plan.sigma, self.weighting)
        if option.source == "private":
            return s.measure(r, plan.sigma, what=f"JAM round {state.t} measure {','.join(r)}", weight=w)
        state.extra["pub_done"].add(r)
        # not a noisy release: weighted as if it had the noise of the measurement it replaced
        return s.record(Measurement(r, state.extra["proxy"][r], None, source="public", weight=w,
                                    meta={"round": state.t, "rows": state.extra["public_rows"],
                                          "loss_sigma": plan.sigma}))

    def after(self, state: RoundState, option: Option, plan: RoundPlan, before, entry: dict, prev) -> None:
        rho_t = state.extra["rho_t"]
        entry.update(rho_round=rho_t, rho_select=self.alpha * rho_t,
                     rho_measure=(1 - self.alpha) * rho_t if option.source == "private" else 0.0)
