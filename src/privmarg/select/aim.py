"""AIM's selection (McKenna et al. 2022, Algorithm 4; SPEC §4): adaptive, workload-aware, annealed."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import Domain
from ..privacy import RoundPlan, gaussian_rho, marginal_l2, round_plan, score_sensitivity
from .adaptive import (SQRT_2_OVER_PI, AdaptiveSelector, ClosureCandidates, Option, RoundState,
                       expected_noise_share, mean_cells)
from .base import Selection, check_fraction, check_rounds
from .lazy_scores import ScoreTerms
from .public_start import PublicTree, public_start, read_public_tree, starts_public
from ..generate.pgm.junction_tree import MB

# The AIM paper's T = 16·d was set on tables of at most ~17 attributes, whose all-3way workloads
# have fewer candidates than this; wider workloads get fewer rounds (see default_rounds)
PAPER_CANDIDATES = 1000


#: a round whose measurement of a mean-sized workload marginal has expected L1 noise of at most this
#: many times N plans for 4·d rounds instead of :func:`default_rounds`: on adult (ratio 85 at ε = 1,
#: 10 at ε = 10) and Caravan (84 at ε = 0.1, 9 at ε = 1) 4·d gave lower error in less time, on adult at
#: ε = 0.1 (786) higher (benchmarks/RESULTS.md, "Wide tables", session 25)
PRECISE_NOISE_RATIO = 250.0
PRECISE_ROUNDS_PER_ATTRIBUTE = 4


def low_total(total: float, sigma: float, cells: int) -> float:
    """A low estimate of N from a noisy total of a 1-way marginal of ``cells`` cells at noise
    ``sigma`` per cell: the total less three standard deviations (at least 1)."""
    return max(1.0, total - 3.0 * sigma * math.sqrt(cells))


def budget_rounds(sigma: float, domain: Domain, workload, n: float, rounds: int) -> tuple[float, int]:
    """(noise ratio, rounds) by AIM's budget rule: if a round at noise ``sigma`` would measure a
    mean-sized ``workload`` marginal with expected L1 noise of at most :data:`PRECISE_NOISE_RATIO`
    times ``n``, the rounds are ``min(rounds, 4·d)``. Public inputs (σ, the domain, N or its low
    estimate)."""
    ratio = expected_noise_share(sigma, mean_cells(domain, workload), n)
    precise = PRECISE_ROUNDS_PER_ATTRIBUTE * len(domain)
    return ratio, (precise if ratio <= PRECISE_NOISE_RATIO and precise < rounds else rounds)


def default_rounds(n_attributes: int, n_candidates: int) -> int:
    """T for AIM: the paper's 16·d up to :data:`PAPER_CANDIDATES` candidates, then shrunk by
    (ln PAPER_CANDIDATES / ln K)², never below d. A round's exponential mechanism has ε ∝ 1/√T and
    must single out a good marginal among K, which takes a score gap ∝ ln K: the factor keeps the
    paper's ratio of the two as K grows (at 10⁵ candidates the paper's T leaves every round's
    choice close to uniform and its 1-way marginals 4× noisier). Depends on the domain only."""
    factor = min(1.0, (math.log(PAPER_CANDIDATES) / math.log(max(n_candidates, 2))) ** 2)
    return max(n_attributes, round(16 * n_attributes * factor))



@dataclass
class AIMRun:
    """What an AIM run keeps between rounds: Δ₂ of a marginal, the budget, the next round's noise
    (halved by annealing), whether the last round has been planned, and the round models kept for
    the error bounds (by round)."""

    l2: float
    rho: float
    plan: RoundPlan
    terminate: bool = False
    models: dict = field(default_factory=dict)
    rounds: int = 0  # T the rounds are planned for
    noise_ratio: float | None = None  # see AIMSelector._plan_by_budget
    public_start: bool = False  # whether the first model was the public table's (AIMSelector._start)
    # each candidate's weight, cells and option, in the order of the run's candidates (made once)
    weight: np.ndarray | None = None
    cells: np.ndarray | None = None
    options: list | None = None


class AIMSelector(ClosureCandidates, AdaptiveSelector):
    """Measure every 1-way marginal, then rounds of: pick the workload marginal (downward closure,
    AIM weights) whose model error most exceeds its expected noise, measure it; halve σ when a
    measurement barely moves the model; spend the last of the budget in one round.

    ``rounds`` (T, sizing the initial split; default :func:`default_rounds`: the paper's 16·d, fewer
    for workloads with over 1,000 candidates), ``alpha`` the share of each round for
    measurement, ``max_model_size`` (MB of the loop model, grown with the budget spent), ``loop``
    the model in the loop. ``public_start``, with public data (``ctx.public``): start from the
    public table's tree model (:mod:`~privmarg.select.public_start`); None (default) when the budget
    is small (:func:`~privmarg.select.public_start.starts_public`), True always, False never.
    Privacy: exactly ``ctx.rho``; each round one exponential mechanism (ε²/8, sensitivity ``max w``
    or ``2 max w``) and one Gaussian marginal (Δ₂²/(2σ²)); the public table is free.
    """

    name = "aim"
    label = "AIM"

    def __init__(self, workload: Any = "all-3way", *, rounds: int | None = None, alpha: float = 0.9,
                 max_model_size: float = 80.0, loop: Any = None, public_start: bool | None = None):
        super().__init__(loop, max_model_size)
        self.workload = workload
        self.rounds = check_rounds("rounds", rounds)
        self.alpha = check_fraction("alpha", alpha)
        if public_start not in (None, True, False):
            raise ValueError(f"public_start must be None, True or False, got {public_start!r}")
        self.public_start = public_start

    def initial(self, state: RoundState):
        s, dom = state.session, state.domain
        d = len(dom)
        T = self.rounds or default_rounds(d, len(state.candidates))
        if T < d:
            raise ValueError(f"rounds must be at least the number of attributes ({d})")
        l2 = marginal_l2(s.neighbour)
        state.run = AIMRun(l2, state.ctx.rho, round_plan(state.ctx.rho, self.alpha, l2, T), rounds=T)
        sigma = state.run.plan.sigma
        done = {m.attrs for m in s.measurements}
        todo = [r for r in state.candidates if len(r) == 1 and r not in done]
        tree = self._public_tree(state, len(todo))  # read before any charge: a failure spends nothing
        ones = [s.measure(r, sigma, what=f"AIM init 1-way {r[0]}") for r in todo]
        state.ctx.progress("AIM: 1-way marginals measured")
        n = self._rows(state, ones)
        if self.rounds is None and n is not None:
            self._plan_by_budget(state, T, n)
        if tree is not None and tree.edges and self._wants_public_start(state, n):
            self._start(state, n, tree)
        return self.refit(state)

    def _rows(self, state: RoundState, ones: list) -> float | None:
        """N for the budget rules: public under replace-one; under add/remove a low estimate from the
        noisy 1-way marginals just measured, their median total less three standard deviations of a
        total (post-processing of paid measurements: no further cost); None without either."""
        if state.ctx.total is not None:
            return state.ctx.total
        if not ones:
            return None
        return low_total(float(np.median([m.y.sum() for m in ones])), state.run.plan.sigma,
                         max(m.y.size for m in ones))

    def _wants_public_start(self, state: RoundState, n: float | None) -> bool:
        if self.public_start is not None:
            return self.public_start
        if n is None:
            return False
        return starts_public(state.run.rho, state.run.l2, n, mean_cells(state.domain, self.workload_))

    def _public_tree(self, state: RoundState, ones: int) -> PublicTree | None:
        """The public tree and its marginals
        (:func:`~privmarg.select.public_start.read_public_tree`) when public data is given and the
        start may be used (not turned off; under replace-one, where N is public, the rule decides
        here), its tables within the model-size limit of the first round after
        ``ones`` 1-way measurements at the initial plan (8-byte cells), as a measurement's would be."""
        if state.ctx.public is None or self.public_start is False:
            return None
        if state.ctx.total is not None and not self._wants_public_start(state, state.ctx.total):
            return None  # N is public and the rule says no: nothing to read (all pairs, on a wide table)
        x = state.run
        spent = state.session.rho_spent + ones * gaussian_rho(x.plan.sigma, x.l2) + x.plan.cost(x.l2)
        cells = self.max_model_size * spent / x.rho * MB / 8
        return read_public_tree(state.ctx.public, state.domain, [r for r in state.candidates if len(r) == 2], cells)

    def _start(self, state: RoundState, n: float | None, tree: PublicTree) -> None:
        """The public ``tree``'s model as the first model; its marginals join the session at loss
        weight 0 (free; they keep the tree in every later fit's structure)."""
        total = n if n is not None else tree.rows
        model, kept = public_start(self.loop, tree, state.domain, total, state.ctx.zeros)
        for m in kept:
            state.session.record(m)
        state.model = model
        state.run.public_start = True
        state.ctx.progress(f"AIM: starts from the public table's model ({len(kept)} 2-way marginals)")

    def _plan_by_budget(self, state: RoundState, T: int, n: float) -> None:
        """Fewer, stronger rounds when the budget is large: if a round at the initial plan would
        measure a mean-sized workload marginal with expected L1 noise of at most
        :data:`PRECISE_NOISE_RATIO` times ``n`` (N or its low estimate, :meth:`_rows`: noise never
        makes the plan precise), the rounds are planned for ``min(T, 4·d)`` instead of T."""
        x, dom = state.run, state.domain
        x.noise_ratio, rounds = budget_rounds(x.plan.sigma, dom, self.workload_, n, T)
        if rounds < T:
            x.rounds = rounds
            x.plan = round_plan(x.rho, self.alpha, x.l2, x.rounds)

    def plan(self, state: RoundState) -> RoundPlan | None:
        x = state.run
        if x.terminate:
            return None
        remaining = x.rho - state.session.rho_spent
        plan = x.plan
        if remaining < 2 * plan.cost(x.l2):
            if remaining <= 1e-12 * x.rho:
                return None
            plan = round_plan(remaining, self.alpha, x.l2)  # the last round takes what is left
            x.terminate = True
        x.plan = plan
        return plan

    def size_limit(self, state: RoundState, plan: RoundPlan) -> float:
        x = state.run
        return self.max_model_size * (state.session.rho_spent + plan.cost(x.l2)) / x.rho

    def score_terms(self, state: RoundState, cands, plan: RoundPlan) -> ScoreTerms:
        """Candidate ``r`` scores ``w_r·(error − √(2/π)·σ·cells)``: its weight times its error less
        its expected noise."""
        x = state.run
        if x.weight is None:  # per candidate, once a run (wide tables have 10^5 candidates)
            x.weight = np.array([state.weights[r] for r in state.candidates], dtype=float)
            x.cells = np.array([state.domain.size(r) for r in state.candidates], dtype=float)
            x.options = [Option(r) for r in state.candidates]
        at = state.positions(cands)
        weight, cells = x.weight[at], x.cells[at]
        return ScoreTerms([x.options[i] for i in at], np.arange(len(cands)), -weight * SQRT_2_OVER_PI * plan.sigma * cells,
                          weight, score_sensitivity(state.session.neighbour, float(weight.max())))

    def after(self, state: RoundState, option: Option, plan: RoundPlan, before, entry: dict, prev) -> None:
        r = option.clique
        self._keep_round_model(state, prev)
        if np.abs(state.model.project(r) - before).sum() <= SQRT_2_OVER_PI * plan.sigma * state.domain.size(r):
            state.run.plan = RoundPlan(plan.sigma / 2, plan.epsilon * 2)

    def _keep_round_model(self, state: RoundState, prev) -> None:
        """Keep p̂_{t-1} for the error bounds, compactly (log potentials only): the latest round's
        always, earlier ones while they hold at most a quarter of ``max_model_size`` MB together,
        newest first. The bound of an unsupported marginal reads the latest kept round where it was
        a candidate (:func:`~privmarg.select.aim_bounds.candidate_round`); one whose rounds are all
        dropped gets the trivial bound. Which models are kept depends on their sizes only (public)."""
        models = state.run.models
        if hasattr(prev, "compact"):
            prev = prev.compact()
        elif hasattr(prev, "clear_cache"):
            prev.clear_cache()
        models[state.t] = prev
        held, full = 0.0, False
        for t in sorted(models, reverse=True)[1:]:
            held += models[t].size_mb() if hasattr(models[t], "size_mb") else 0.0
            full = full or held > self.max_model_size / 4
            if full:
                del models[t]

    def final_selection(self, state: RoundState) -> Selection:
        sel = super().final_selection(state)
        sel.extra.update(planned_rounds=state.run.rounds, noise_ratio=state.run.noise_ratio,
                         public_start=None if state.ctx.public is None else state.run.public_start)
        sel.extra.update(weights=state.weights, workload=self.workload_, round_models=dict(state.run.models),
                         rounds=state.t)
        return sel
