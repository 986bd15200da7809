"""The adaptive round shared by AIM, MWEM and JAM (and any selector of that shape).

Each round: plan the round's noise (:meth:`AdaptiveSelector.plan`), keep the candidates whose
measurement keeps the loop model within its size limit, score them against the current model on
the private answers (where a selector gives its scores as :class:`~.lazy_scores.ScoreTerms`, only
those that can win: :mod:`~.lazy_scores`), pick one with the exponential mechanism, measure it
(:meth:`act`), refit the model in the loop (any :class:`~privmarg.generate.Generator`,
warm-started) and log the round.
"""

from __future__ import annotations

import inspect

import math
from dataclasses import dataclass
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core import Domain, Measurement, downward_closure, parse_workload
from ..generate.pgm import GraphicalModel
from ..generate.pgm.batch_queries import l1_errors
from ..generate.pgm.drift import boundable
from ..generate.pgm.junction_tree import MB, SizesWith, batch_sizes_exact, covered
from ..measure import MeasurementSession
from ..privacy import RoundPlan
from .base import Clique, Context, Selection, check_positive, default_loop, measured_cliques
from .lazy_scores import ErrorBounds, ScoreTerms

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def mean_cells(domain: Domain, workload) -> float:
    """Mean cell count of a parsed workload's marginals (``[(clique, weight), ...]``): public."""
    return float(np.mean([domain.size(c) for c, _ in workload]))


def expected_noise_share(sigma: float, cells: float, rows: float) -> float:
    """Expected L1 norm of N(0, σ²) noise on a marginal of ``cells`` cells, as a share of ``rows``
    records: ``√(2/π)·σ·cells / rows`` (the budget rules of AIM and JAM)."""
    return SQRT_2_OVER_PI * sigma * cells / rows


@dataclass
class RoundState:
    """What a run knows between rounds (released information plus the session)."""

    session: MeasurementSession
    ctx: Context
    domain: Domain
    candidates: list[Clique]
    weights: dict[Clique, float]
    model: Any = None
    t: int = 0
    #: the selector's own typed state for this run (AIM's :class:`~privmarg.select.aim.AIMRun`, ...)
    run: Any = None
    #: each candidate's own table in MB (wide domains' shortlist), computed once a run
    candidate_mb: np.ndarray | None = None
    #: positions in ``candidates`` of this round's shortlist (the ``cands`` a round scores)
    at: np.ndarray | None = None

    def positions(self, cands: list[Clique]) -> np.ndarray:
        """Positions of ``cands`` in ``candidates``: the round's (:attr:`at`) where they are the
        round's shortlist (checked at both ends), else looked up."""
        at = self.at
        if at is not None and len(at) == len(cands) and (not cands or (self.candidates[at[0]] == cands[0]
                                                                       and self.candidates[at[-1]] == cands[-1])):
            return at
        where = {r: i for i, r in enumerate(self.candidates)}
        return np.array([where[r] for r in cands], dtype=np.intp)


@dataclass(frozen=True)
class Option:
    """One thing the exponential mechanism can pick: a clique, and how to answer it."""

    clique: Clique
    source: str = "private"


class AdaptiveSelector:
    """Template of the adaptive loop; subclasses fill in the hooks. ``loop`` is the generator whose
    model is refitted every round (default: a graphical model); ``max_model_size`` (MB) caps it."""

    label = "adaptive"
    free_candidates = True  # candidates inside a clique of the current model are always allowed

    def __init__(self, loop: Any = None, max_model_size: float = 80.0):
        self.loop = loop if loop is not None else default_loop()
        self.max_model_size = check_positive("max_model_size", max_model_size)

    # ------------------------------------------------------------------------- hooks
    def prepare(self, domain: Domain) -> tuple[list[Clique], dict[Clique, float]]:
        """(candidate cliques, their weights) for this domain."""
        raise NotImplementedError

    def initial(self, state: RoundState) -> Any:
        """Measure what comes before the rounds; return the first model (or None)."""
        return None

    def plan(self, state: RoundState) -> RoundPlan | None:
        """The next round's noise, or None to stop."""
        raise NotImplementedError

    def size_limit(self, state: RoundState, plan: RoundPlan) -> float:
        raise NotImplementedError

    def score_terms(self, state: RoundState, cands: list[Clique], plan: RoundPlan) -> ScoreTerms | None:
        """The round's options with their scores as ``offset + slope·(model error of the option's
        candidate)`` (:class:`~privmarg.select.lazy_scores.ScoreTerms`): the rounds then compute only
        the errors that can change the pick (:mod:`~privmarg.select.lazy_scores`). None: the
        selector scores by :meth:`score` instead."""
        return None

    def score(self, state: RoundState, cands: list[Clique], plan: RoundPlan) -> tuple[list[Option], np.ndarray, float]:
        """(options, scores, sensitivity) for the exponential mechanism; by default every score
        from :meth:`score_terms`."""
        terms = self.score_terms(state, cands, plan)
        if terms is None:
            raise NotImplementedError
        return terms.options, terms.scores(candidate_errors(state, cands)), terms.sensitivity

    def act(self, state: RoundState, option: Option, plan: RoundPlan) -> Measurement:
        """Answer the chosen option (a charged measurement, by default)."""
        return state.session.measure(option.clique, plan.sigma,
                                     what=f"{self.label} round {state.t} measure {','.join(option.clique)}")

    def after(self, state: RoundState, option: Option, plan: RoundPlan, before: np.ndarray | None,
              entry: dict, prev: Any) -> None:
        """Adjust after a round (AIM's annealing)."""

    def final_selection(self, state: RoundState) -> Selection:
        s = state.session
        return Selection(list(s.measurements), s.domain, model=state.model)

    # ------------------------------------------------------------------------- loop
    def refit(self, state: RoundState) -> Any:
        s, ctx = state.session, state.ctx
        return self.loop.generate(s.measurements, s.domain, zeros=ctx.zeros, total=ctx.total, warm=state.model)

    def shortlist(self, state: RoundState, limit: float) -> tuple[np.ndarray, bool]:
        """(positions in ``state.candidates`` of the candidates to score, whether they all fit).
        Where the loop's junction tree sizes many models at once cheaply
        (:func:`~privmarg.generate.pgm.junction_tree.batch_sizes_exact`), exactly those whose
        measurement keeps the loop model within ``limit`` MB (plus the free ones: inside a clique of
        the current model). On wide domains a superset by a check on each clique alone (its own
        float64 table within the limit, or free), cheap for 10^5 candidates; for a loop that is not
        a junction tree, every candidate. The selection then checks the model size of the few it
        walks through (:meth:`run`). Public: the domain and released cliques only."""
        dom = state.domain
        every = np.arange(len(state.candidates))
        if not hasattr(self.loop, "model_sizes_mb"):  # not a junction tree: its own rule, checked lazily
            return every, False
        if batch_sizes_exact(dom):
            return self.candidates(state, limit), True
        mb = state.candidate_mb
        if mb is None:  # each candidate's own table (MB); the candidates are fixed for the run
            mb = state.candidate_mb = np.array([8.0 * dom.size(r) / MB for r in state.candidates])
        big = np.flatnonzero(mb > limit)
        if big.size == 0:
            return every, False
        inside = getattr(state.model, "cliques", ()) if self.free_candidates else ()
        keep = mb <= limit
        if inside:
            keep[big] = covered(dom, [state.candidates[i] for i in big], inside)
        return np.flatnonzero(keep), False

    def candidates(self, state: RoundState, limit: float) -> np.ndarray:
        """Positions in ``state.candidates`` of the candidates whose measurement keeps the loop
        model within ``limit`` MB (plus free ones), every one checked (numpy batch of
        :meth:`PGM.model_sizes_mb`)."""
        dom = state.domain
        measured = measured_cliques(state.session, state.ctx.zeros)
        inside = getattr(state.model, "cliques", ()) if self.free_candidates else ()
        check = np.flatnonzero(~np.asarray(covered(dom, state.candidates, inside), dtype=bool))
        sizes = self.loop.model_sizes_mb(dom, measured, [state.candidates[i] for i in check])
        keep = np.ones(len(state.candidates), dtype=bool)
        keep[check] = [size is None or size <= limit for size in sizes]
        return np.flatnonzero(keep)

    def fit_check(self, state: RoundState, limit: float) -> Callable[[Clique], bool]:
        """Does measuring a clique keep the loop model within ``limit`` MB (or lie inside a clique
        of the current model)? Asked of a few candidates a round (see :meth:`run`)."""
        inside = list(getattr(state.model, "cliques", ())) if self.free_candidates else []
        return fit_rule(state.domain, self.loop, measured_cliques(state.session, state.ctx.zeros), inside, limit)

    def run(self, session: MeasurementSession, ctx: Context) -> Selection:
        dom = session.domain
        cands, weights = self.prepare(dom)
        state = RoundState(session, ctx, dom, cands, weights)
        state.model = self.initial(state)
        bounds = ErrorBounds(dom, cands)  # the candidates' errors, carried between rounds as upper bounds
        while True:
            plan = self.plan(state)
            if plan is None:
                break
            state.t += 1
            limit = self.size_limit(state, plan)
            at_t, all_fit = self.shortlist(state, limit)
            cand_t = [state.candidates[i] for i in at_t]
            state.at = at_t
            if not cand_t:
                raise ValueError(f"no candidate fits in {limit:.3g} MB: raise max_model_size")
            # Gumbel-max walked in descending noisy score: the exponential mechanism over the
            # options that fit, with a handful of model-size checks instead of one per candidate
            # (where every candidate was checked, the first option walked is the pick)
            fits = (lambda r: True) if all_fit else self.fit_check(state, limit)
            options, sens, pick, lazy = self._select(state, cand_t, plan, fits, bounds)
            if pick is None:
                raise ValueError(f"no candidate fits in {limit:.3g} MB: raise max_model_size")
            option = options[pick]
            # the chosen clique's model marginal while scoring's partial contractions are still kept
            before = state.model.project(option.clique) if state.model is not None else None
            clear = getattr(state.model, "clear_cache", None)
            if clear is not None:  # what scoring kept for its queries (the refit needs only potentials)
                clear()
            m = self.act(state, option, plan)
            entry = {"round": state.t, "selected": list(option.clique), "source": option.source,
                     "sigma": plan.sigma, "epsilon": plan.epsilon, "sensitivity": sens,
                     "size_limit_mb": limit, "n_candidates": len(cand_t), "n_measured": len(session.measurements) - 1,
                     "model_error_selected": (float(np.abs(m.y - before).sum()) if before is not None else None)}
            prev = state.model
            state.model = self.refit(state)
            if lazy:
                bounds.moved(prev, state.model, option.clique, before)
            else:  # a round scored otherwise: the errors kept say nothing about the new model
                bounds.forget()
            entry["rho_used"] = session.rho_spent
            info = getattr(state.model, "info", None)
            if info is not None:
                entry.update(estimation_iterations=info.iterations, estimation_seconds=info.seconds)
            if hasattr(state.model, "size_mb"):
                entry["model_size_mb"] = state.model.size_mb()
            session.rounds.append(entry)
            self.after(state, option, plan, before, entry, prev)
            ctx.progress(f"{self.label} round {state.t}: {option.source} {','.join(option.clique)}")
        selection = self.final_selection(state)
        session.forget(keep=self.answers_kept(selection))  # the rest are not needed any more (memory)
        return selection

    def _select(self, state: RoundState, cands: list[Clique], plan: RoundPlan, fits: Callable[[Clique], bool],
                bounds: ErrorBounds) -> tuple[list[Option], float, int | None, bool]:
        """(options, score sensitivity, the pick or None when nothing fits, whether the scores were
        asked for lazily). Lazily where the selector gives :meth:`score_terms` and the model admits
        bounds (:func:`~privmarg.generate.pgm.drift.boundable`), else every score then the walk."""
        session, what = state.session, f"{self.label} round {state.t} select"
        terms = self.score_terms(state, cands, plan)
        if terms is None:
            options, scores, sens = self.score(state, cands, plan)
        else:
            options, sens = terms.options, terms.sensitivity
            if boundable(state.model):  # a loop model on float32 tables is not: every score
                return options, sens, pick_lazily(state, cands, state.at, terms, plan,
                                                  lambda i: fits(options[i].clique), bounds, what), True
            scores = terms.scores(candidate_errors(state, cands))
        return options, sens, session.select_fitting(scores, plan.epsilon, sens, lambda i: fits(options[i].clique),
                                                     what=what), False

    def answers_kept(self, selection: Selection) -> list[Clique]:
        """The cliques whose cached private answers the selection's last step reads again (none)."""
        return []


def fit_rule(domain: Domain, loop: Any, base: list[Clique], inside: list[Clique], limit: float
             ) -> Callable[[Clique], bool]:
    """The adaptive rounds' candidate rule as a remembered test: a clique is a candidate when it
    lies inside one of ``inside`` (the current model's cliques) or when ``loop``'s model over
    ``base`` plus it stays within ``limit`` MB (a size of None: the loop has no limit). A junction
    tree is sized by components (:class:`~privmarg.generate.pgm.junction_tree.SizesWith`). Public:
    the domain, released cliques and the limit only. AIM's error bounds ask it again afterwards."""
    by_parts = SizesWith(domain, base) if hasattr(loop, "model_sizes_mb") else None
    memo: dict[Clique, bool] = {}

    def fits(r: Clique) -> bool:
        hit = memo.get(r)
        if hit is None:
            if inside and covered(domain, [r], inside)[0]:
                hit = True
            else:
                size = by_parts.size_mb(r) if by_parts is not None else loop.model_size_mb(domain, base + [r])
                hit = size is None or size <= limit
            memo[r] = hit
        return hit

    return fits


# candidates a round from which scoring batches its queries (below, batching costs more than it
# saves: adult's 469 candidates take 9% longer batched; Caravan's 10^5, 42% less)
BATCH_CANDIDATES = 5000


def model_errors(model: Any, cands: list[Clique], answers: list[np.ndarray]) -> np.ndarray:
    """``‖answers[i] − M_{cands[i]}(model)‖₁`` for each candidate (counts), without filling the
    model's query cache (one query per candidate and model: caching them all costs memory). On a
    graphical model, the candidates inside one big clique share partial sums
    (:meth:`~privmarg.generate.pgm.graphical_model.GraphicalModel.project_many`) and, with many
    candidates, those spanning its independent parts go in numpy batches
    (:func:`~privmarg.generate.pgm.batch_queries.l1_errors`). Private (exact answers): for scores
    that leave only through the exponential mechanism."""
    project = uncached_query(model)
    if isinstance(model, GraphicalModel):
        if len(cands) >= BATCH_CANDIDATES:
            return l1_errors(model, cands, answers, project)
        return np.array([np.abs(a - m).sum() for m, a in zip(model.project_many(cands), answers)])
    return np.array([np.abs(a - project(r)).sum() for r, a in zip(cands, answers)])


def candidate_errors(state: RoundState, cands: list[Clique]) -> np.ndarray:
    """:func:`model_errors` of the round's model on ``cands`` (0 before the first model)."""
    if state.model is None:
        return np.zeros(len(cands))
    return np.asarray(model_errors(state.model, cands, state.session.answers(cands)), dtype=np.float64)


def model_l1(model: Any) -> float:
    """An upper bound on any marginal's L1 norm as the model computes it: its total, or more where
    its clique tables sum to more (rounding, a fit run off), with a margin for the sums' own
    rounding; ``inf`` for a model without clique tables to check."""
    tables = getattr(model, "marginals", None) if isinstance(model, GraphicalModel) else None
    if not tables:
        return np.inf
    return max(abs(float(model.total)), *(float(t.sum()) for t in tables)) * (1.0 + 1e-3)  # tables ≥ 0


def error_cap(state: RoundState) -> float:
    """An upper bound on every candidate's model error ``‖y − M(model)‖₁ ≤ ‖y‖₁ + ‖M(model)‖₁``,
    where ``‖y‖₁ ≤ N`` because the source counts each row once (``counts_rows``); ``inf`` otherwise.
    Private N: it decides only which scores are computed."""
    source = state.session.source
    if state.model is None or not getattr(source, "counts_rows", False):
        return np.inf
    return source.count() + model_l1(state.model)


def pick_lazily(state: RoundState, cands: list[Clique], at: np.ndarray, terms: ScoreTerms, plan: RoundPlan,
                fits: Callable[[int], bool], bounds: ErrorBounds, what: str) -> int | None:
    """The exponential mechanism over ``terms``' options that fit, asking for the errors of
    ``cands`` (at positions ``at`` of the run's candidates) only where ``bounds`` leave them a chance
    (:meth:`MeasurementSession.select_lazy`); the errors computed are kept in ``bounds`` for the
    next rounds."""
    errors = np.full(len(cands), np.nan)

    def exact(idx: np.ndarray) -> np.ndarray:
        need = np.unique(terms.candidate[idx])
        need = need[np.isnan(errors[need])]
        if need.size:
            errors[need] = candidate_errors(state, [cands[i] for i in need])
        return terms.offset[idx] + terms.slope[idx] * errors[terms.candidate[idx]]

    pick = state.session.select_lazy(terms.upper(bounds.upper(at, error_cap(state))), exact, plan.epsilon,
                                     terms.sensitivity, fits, what=what)
    done = np.flatnonzero(~np.isnan(errors))
    bounds.record(at[done], errors[done])
    return pick


def uncached_query(model: Any) -> Callable[[Clique], np.ndarray]:
    """``model.project`` without filling the model's projection cache, where the model has one."""
    try:
        if "cache" in inspect.signature(model.project).parameters:
            return lambda r: model.project(r, cache=False)
    except (TypeError, ValueError):
        pass
    return model.project


class ClosureCandidates:
    """Candidates = the downward closure of ``self.workload`` with AIM's weights (AIM, JAM)."""

    def supporting_cliques(self, domain: Domain) -> list[Clique]:
        return list(downward_closure(parse_workload(self.workload, domain), domain))

    def prepare(self, domain: Domain):
        self.workload_ = parse_workload(self.workload, domain)
        weights = downward_closure(self.workload_, domain)
        return list(weights), weights
