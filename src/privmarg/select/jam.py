"""JAM's selection (Fuentes et al., AISTATS 2024; SPEC §7): private measurement or public proxy.

Each round the exponential mechanism chooses, over ``W⁺ × {private, public}``, both a marginal and
how to answer it: a Gaussian measurement of the private data (unbiased, noisy, costs budget) or the
public proxy ``(N/N_pub)·M_r(D_pub)`` (biased, free). A public choice leaves the round's
measurement budget for later rounds ("frugal budgeting"). How many rounds, and whether JAM's rounds
run at all, depends on the budget (:func:`precise_measurements`, public inputs only).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core import Measurement, parse_workload
from ..privacy import RoundPlan, marginal_l2, round_plan, score_sensitivity
from .adaptive import (SQRT_2_OVER_PI, AdaptiveSelector, ClosureCandidates, Option, RoundState,
                       expected_noise_share, mean_cells)
from .base import Selection, check_fraction, check_rounds, default_loop
from ..generate.records import public_records
from .jam_blend import BlendChoice
from .lazy_scores import ScoreTerms

WEIGHTINGS = ("equal", "mle", "inv_sigma")
#: (rounds T, selection share α) of the JAM paper, for noisy measurements
PAPER_PLAN = (30, 0.2)
#: (T per attribute, α) when a round's measurement is precise (:func:`precise_measurements`): AIM's
#: share for the choice, and a quarter of AIM's 16·d rounds (about as many as AIM's annealing runs on
#: adult at ε = 10): as good as 60 rounds on adult's 14 columns, better on the GSS pair's 9
#: (benchmarks/RESULTS.md, "Public data that never hurts")
PRECISE_PLAN = (4, 0.1)
#: the final fit's iteration cap when the measurements are precise (AIM's ``final_iters``; the JAM
#: preset's generator lowers it on large models as AIM's final fit does)
PRECISE_FINAL_ITERS = 1000


def noise_ratio(rho: float, rounds: int, alpha: float, l2: float, rows: float, cells: float) -> float:
    """Expected L1 norm of the Gaussian noise on one round's private measurement of a marginal of
    ``cells`` cells, relative to the record count: ``√(2/π)·σ·cells / N`` with σ the noise of a round
    of ``ρ/T`` spending ``1 − α`` of it on the measurement (Δ₂ = ``l2``). Public inputs only (ρ, the
    plan, the domain, N under replace-one)."""
    return expected_noise_share(round_plan(rho, 1.0 - alpha, l2, rounds).sigma, cells, rows)


def precise_measurements(rho: float, l2: float, rows: float, workload_cells: float) -> bool:
    """Whether the JAM paper's rounds measure a mean-sized workload marginal with noise below the
    record count in L1 (:func:`noise_ratio` ≤ 1): then a private answer is informative about the whole
    distribution, and the JAM preset hands the budget to AIM's selection (the selector on its own
    spends as :data:`PRECISE_PLAN` says), with a converged final fit; otherwise JAM spends as the paper
    does, where a few warm-started iterations keep the model from fitting noise."""
    return noise_ratio(rho, *PAPER_PLAN, l2, rows, workload_cells) <= 1.0


# the model refitted every round unless a loop is given (the JAM preset's defaults): fitted on float32
# tables, its own tables then recomputed in float64 (one more pass), on which bounds of how far the
# marginals moved hold, so each round computes only the scores that can win (select/lazy_scores.py)
LOOP = {"iters": 5, "tol": 1e-4, "method": "precond", "dtype": "float32", "model_dtype": "float64"}


def _weight(sigma: float, weighting: str) -> float:
    if weighting == "mle":
        return 1.0 / (2.0 * sigma**2)
    if weighting == "inv_sigma":
        return 1.0 / sigma
    return 1.0


@dataclass
class JAMRun:
    """What a JAM run keeps between rounds: the public answers (rescaled to N) and their private
    errors (read only to score charged selections), the rows of the public table, Δ₂ of a marginal,
    the selection's score sensitivity, the spending regime (:func:`precise_measurements`) with its T
    and α, the public records (a start for a generator that reweights them, and the release's blend;
    None when the public data is marginals), each candidate's cells and its two options (built once:
    scoring lists them every round), the marginals already answered publicly and the current round's
    ρ."""

    proxy: dict
    pub_err: dict
    public_rows: int
    l2: float
    sensitivity: float
    precise: bool
    rounds: int
    alpha: float
    public_records: Any = None
    cells: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    pub_done: set = field(default_factory=set)
    rho_t: float = 0.0


class JAMSelector(ClosureCandidates, AdaptiveSelector):
    """``rounds`` T selections (None: by the budget, see below); round ``t`` has ``ρ_t = (ρ − ρ_used)/(T − t)``, ``alpha`` of it for the
    selection (always charged, score sensitivity 4: a difference of two terms that each move by 2
    under replace-one) and the rest for a private measurement (Δ₂ = √2), charged only when chosen.
    ``weighting`` of measurements in the loop model's loss: ``"equal"`` (the paper), ``"mle"`` or
    ``"inv_sigma"`` (a public answer weighted as if it had the noise of the round that chose it);
    ``warm_start``: refit the loop model from the last one (else from scratch, as in the paper);
    ``loop``: the generator refitted every round (default: a graphical model, 5 preconditioned
    iterations on float32 tables, the model's tables then recomputed in float64, as in the JAM
    preset).
    ``rounds`` and ``alpha`` None: the paper's (30, 0.2), or (4·d, 0.1) when the budget measures a
    mean-sized workload marginal precisely (:func:`precise_measurements`, public inputs only); then
    the selection asks its generator for ``precise_final_iters`` iterations (a hint; None: none).
    ``precise_selector``: a selector run instead when the budget is precise (the JAM preset: AIM's).
    ``supersede``: a private measurement of ``r`` takes the public answers inside ``r`` out of the loss
    (the two would pull the model towards different answers on the same cells).
    ``blend``: after JAM's own rounds, the budget left over (when the last round picked a public
    answer) buys one exponential-mechanism choice of the release among blends of the fitted model
    with the public records (:mod:`~privmarg.select.jam_blend`; public data given as a table only).
    Needs replace-one neighbours (N rescales the public answers) and ``ctx.public``.
    """

    name = "jam"
    label = "JAM"

    def __init__(self, workload: Any = "all-3way", *, rounds: int | None = None, alpha: float | None = None,
                 max_model_size: float = 80.0, weighting: str = "equal", warm_start: bool = True, loop: Any = None,
                 supersede: bool = True, precise_final_iters: int | None = PRECISE_FINAL_ITERS,
                 precise_selector: Any = None, blend: bool = True):
        # exact public marginals full of empty cells next to noisy private ones: the preconditioned
        # step reaches the optimum ~100x faster there than the momentum step (test_estimation); a
        # few warm-started iterations a round rank the candidates as well as a converged fit
        # (benchmarks/RESULTS.md, "JAM speed"): the JAM preset's loop
        super().__init__(loop if loop is not None else default_loop(**LOOP), max_model_size)
        self.warm_start = bool(warm_start)
        self.workload = workload
        self.rounds = check_rounds("rounds", rounds)
        self.alpha = None if alpha is None else check_fraction("alpha", alpha)
        self.supersede = bool(supersede)
        self.blend = bool(blend)
        self.precise_selector = precise_selector
        if precise_final_iters is not None and int(precise_final_iters) < 0:
            raise ValueError("precise_final_iters must be >= 0 (or None)")
        self.precise_final_iters = None if precise_final_iters is None else int(precise_final_iters)
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
        self.weighting = weighting

    def run(self, session, ctx) -> Selection:
        """With ``precise_selector`` given and the budget precise (:func:`precise_measurements`, T and
        α left to the budget), that selector runs instead: at such budgets AIM's annealed rounds beat
        JAM's (benchmarks/RESULTS.md, "Public data that never hurts"), and public answers were chosen
        in under one round in ten. Otherwise JAM's rounds."""
        if self.precise_selector is not None and self.rounds is None and self.alpha is None \
                and ctx.total is not None and ctx.public is not None:
            if self._precise(session, ctx):
                sel = self.precise_selector.run(session, ctx)
                sel.extra.update(precise=True, delegated_to=getattr(self.precise_selector, "name", "selector"))
                if self.precise_final_iters is not None:
                    sel.hints.update(self._precise_final_hints())
                records = public_records(ctx.public, session.domain, ctx.total, ctx.zeros)
                if records is not None:
                    sel.hints["start"] = records  # for a generator that reweights the public records
                return sel
        return super().run(session, ctx)

    def _precise_final_hints(self) -> dict:
        """The final fit when the measurements are precise: AIM's (momentum, float64, up to
        ``precise_final_iters`` iterations)."""
        return {"iters": self.precise_final_iters, "method": "momentum", "dtype": "float64"}

    def _precise(self, session, ctx) -> bool:
        """:func:`precise_measurements` for this run: ρ, the workload over the domain, N (public)."""
        cells = mean_cells(session.domain, parse_workload(self.workload, session.domain))
        return precise_measurements(ctx.rho, marginal_l2(session.neighbour), ctx.total, cells)

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
        l2 = marginal_l2(s.neighbour)
        precise = self._precise(s, ctx)
        T, alpha = (PRECISE_PLAN[0] * len(state.domain), PRECISE_PLAN[1]) if precise else PAPER_PLAN
        records = public_records(pub, s.domain, ctx.total, ctx.zeros)
        state.run = JAMRun(proxy, pub_err, int(pub.count()), l2, 2 * score_sensitivity(s.neighbour), precise,
                           self.rounds or T, self.alpha if self.alpha is not None else alpha, records,
                           {r: s.domain.size(r) for r in cands},
                           {r: (Option(r, "private"), Option(r, "public")) for r in cands})
        return None  # the first round scores every candidate's private error as 0

    def plan(self, state: RoundState) -> RoundPlan | None:
        T, rho = state.run.rounds, state.ctx.rho
        if state.t >= T:
            return None
        rho_t = max(0.0, rho - state.session.rho_spent) / (T - state.t)
        if rho_t <= 1e-12 * rho:
            return None
        state.run.rho_t = rho_t
        return round_plan(rho_t, 1 - state.run.alpha, state.run.l2)

    def size_limit(self, state: RoundState, plan: RoundPlan) -> float:
        return self.max_model_size * max(1.0 / state.run.rounds, state.session.rho_spent / state.ctx.rho)

    def score_terms(self, state: RoundState, cands, plan: RoundPlan) -> ScoreTerms:
        """A private option scores ``error − √(2/π)·σ·cells`` (its expected noise), a public one
        ``error − public error`` (a repeated proxy adds no information: offered once)."""
        x = state.run
        cands = list(cands)
        fresh = np.array([r not in x.pub_done for r in cands], dtype=bool)
        cells = np.array([x.cells[r] for r in cands], dtype=float)
        pub_err = np.array([x.pub_err[r] for r in cands])
        options = [x.options[r][0] for r in cands] + [x.options[r][1] for r, f in zip(cands, fresh) if f]
        candidate = np.concatenate([np.arange(len(cands)), np.flatnonzero(fresh)])
        offset = np.concatenate([-SQRT_2_OVER_PI * plan.sigma * cells, -pub_err[fresh]])
        return ScoreTerms(options, candidate, offset, np.ones(len(options)), x.sensitivity)

    def refit(self, state: RoundState):
        if self.warm_start:
            return super().refit(state)
        s, ctx = state.session, state.ctx
        return self.loop.generate(s.measurements, s.domain, zeros=ctx.zeros, total=ctx.total)

    def act(self, state: RoundState, option: Option, plan: RoundPlan) -> Measurement:
        r, s = option.clique, state.session
        w = _weight(plan.sigma, self.weighting)
        if option.source == "private":
            m = s.measure(r, plan.sigma, what=f"JAM round {state.t} measure {','.join(r)}", weight=w)
            if self.supersede:  # public answers inside r leave the loss (kept in the record, weight 0)
                inside = set(r)
                s.measurements[:] = [replace(x, weight=0.0, meta={**x.meta, "superseded_by": list(r)})
                                     if x.source == "public" and x.weight and set(x.attrs) <= inside else x
                                     for x in s.measurements]
            return m
        state.run.pub_done.add(r)
        # not a noisy release: weighted as if it had the noise of the measurement it replaced
        return s.record(Measurement(r, state.run.proxy[r], None, source="public", weight=w,
                                    meta={"round": state.t, "rows": state.run.public_rows,
                                          "loss_sigma": plan.sigma}))

    def _blend_choice(self, state: RoundState) -> BlendChoice | None:
        """The release step (:class:`~privmarg.select.jam_blend.BlendChoice`), or None without public
        records."""
        x = state.run
        if x.public_records is None:
            return None
        return BlendChoice(x.public_records, parse_workload(self.workload, state.session.domain), state.ctx.rho)

    def after(self, state: RoundState, option: Option, plan: RoundPlan, before, entry: dict, prev) -> None:
        rho_t, alpha = state.run.rho_t, state.run.alpha
        entry.update(rho_round=rho_t, rho_select=alpha * rho_t,
                     rho_measure=(1 - alpha) * rho_t if option.source == "private" else 0.0)

    def answers_kept(self, selection: Selection) -> list:
        """The blend's workload: its choice scores read their private answers again."""
        return [r for r, _ in selection.choose.workload] if isinstance(selection.choose, BlendChoice) else []

    def final_selection(self, state: RoundState) -> Selection:
        sel = super().final_selection(state)
        x = state.run
        sel.extra.update(precise=x.precise, rounds=x.rounds, alpha=x.alpha)
        if x.public_records is not None:
            sel.hints["start"] = x.public_records  # for a generator that reweights the public records
        if self.blend:
            sel.choose = self._blend_choice(state)
        if x.precise and self.precise_final_iters is not None:
            # the momentum step reaches the optimum in far fewer iterations than the preconditioned one
            # once the measurements are precise (benchmarks/RESULTS.md, "Public data that never hurts")
            sel.hints.update(self._precise_final_hints())
        return sel
