"""RAP's and RAP++'s adaptive selection (Aydore et al. 2021; Vietri et al. 2022; SPEC §1.4, §10.3).

Both run ``T`` equal rounds: score the workload's queries by the current model's error on the
private answers, pick the worst ones with one-shot Gumbel top-``q`` (report-noisy-top-q, half the
round's budget), measure them with the Gaussian mechanism (the other half), keep every earlier
answer (never re-noised), and refit the model in the loop, warm-started: by default the relaxed
projection (:class:`~privmarg.generate.relaxed.RelaxedProjection`). They differ in the query:
RAP++ selects whole marginals, RAP single cells (counting queries) of them.

Why not :class:`~privmarg.select.adaptive.AdaptiveSelector`: its round picks one option with the
exponential mechanism and caps a junction tree's size; these rounds pick ``q`` at once and the
relaxed data has a fixed size, so the loop here is a short one of its own.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core import Domain, Measurement, parse_workload
from ..measure import MeasurementSession
from ..privacy import count_l2, even_sigma, gaussian_sigma, marginal_l2, score_sensitivity
from .base import Clique, Context, Selection, check_fraction, check_rounds


def default_relaxed(**params: Any):
    """The relaxed-projection generator (imported late: it needs torch)."""
    from ..generate.relaxed import RelaxedProjection

    return RelaxedProjection(**params)


def _workload_cliques(workload: Any, domain: Domain) -> list[Clique]:
    return list(dict.fromkeys(c for c, w in parse_workload(workload, domain) if w > 0))


def _distribution(x: np.ndarray) -> np.ndarray:
    """``x`` clipped at 0 and normalised to sum 1 (uniform if nothing is left)."""
    x = np.maximum(np.asarray(x, dtype=float), 0.0)
    s = x.sum()
    return x / s if s > 0 else np.full(x.shape, 1.0 / max(x.size, 1))


def _check_q(name: str, q: Any) -> int:
    if isinstance(q, bool) or not isinstance(q, (int, np.integer)) or q < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {q!r}")
    return int(q)


class _RelaxedLoop:
    """Shared plumbing: the loop model's first fit and warm refits. The seeds stay local to a run
    (they derive from the noise generator's seed: never kept on the selector, which is pickled
    with the synthesizer)."""

    def _start(self, session: MeasurementSession, ctx: Context, rounds: int):
        seeds = session.public_seeds(rounds + 1)
        model = self.loop.generate(list(session.measurements), session.domain, zeros=ctx.zeros, total=ctx.total,
                                   seed=seeds[0])
        return model, seeds

    def _refit(self, session: MeasurementSession, ctx: Context, model: Any, seed):
        return self.loop.generate(list(session.measurements), session.domain, zeros=ctx.zeros, total=ctx.total,
                                  warm=model, seed=seed)


class RAPppSelector(_RelaxedLoop):
    """RAP++'s marginal selection (the benchmark's copy, SPEC §10.3), over the cliques of ``workload``.

    ``rounds`` T (default: the number of attributes, capped at ``#cliques // top_q``); each round
    gets ``rho/T``: half to one-shot Gumbel top-``top_q`` selection, scale
    ``β = Δ·√(q/(2ρ_sel))`` (SPEC §1.4), half to the Gaussian on the ``q`` chosen marginals (each
    ``σ = Δ₂·√(q/(2ρ_meas))``). Already measured cliques are not candidates again, and their noisy
    answers are kept (the benchmark copy re-noises all of them every round, under-accounted).

    Score of clique ``r``: ``‖M_r(D) − M_r(model)‖₁ − penalty·n_r`` in counts (``n_r`` cells),
    i.e. the benchmark copy's normalised L1 error minus its size penalty ``n_r/N``, times N
    (``penalty=0`` drops it; the RAP++ paper has none). Sensitivity: 1 (add/remove), 2
    (replace-one). In the first round under add/remove there is no released record count yet, so
    the initial model's normalised marginal is scaled by the exact N inside the score, whose
    sensitivity is then 2.

    ``loop``: the model refitted after each round (default: the relaxed projection, warm-started).
    Privacy: exactly ``ctx.rho``.
    """

    name = "rap++"

    def __init__(self, workload: Any = "all-2way", *, rounds: int | None = None, top_q: int = 1,
                 penalty: float = 1.0, loop: Any = None):
        self.workload = workload
        self.rounds = check_rounds("rounds", rounds)
        self.top_q = _check_q("top_q", top_q)
        if not (penalty >= 0 and math.isfinite(penalty)):
            raise ValueError(f"penalty must be >= 0 and finite, got {penalty!r}")
        self.penalty = float(penalty)
        self.loop = loop if loop is not None else default_relaxed()

    def supporting_cliques(self, domain: Domain) -> list[Clique]:
        return _workload_cliques(self.workload, domain)

    def plan(self, domain: Domain, rho: float, neighbour: str, n_cands: int) -> dict:
        """The budget split (public: depends on the domain, the workload and ``rho`` only)."""
        q = self.top_q
        T = min(self.rounds or len(domain), n_cands // q)
        if T < 1:
            raise ValueError(f"top_q={q} exceeds the {n_cands} cliques of the workload")
        per = rho / T
        return {"T": T, "rho_select": per / 2, "rho_measure": per / 2,
                "sigma": even_sigma(per / 2, q, marginal_l2(neighbour))}

    def run(self, session: MeasurementSession, ctx: Context) -> Selection:
        dom, nb = session.domain, session.neighbour
        cands = _workload_cliques(self.workload, dom)
        p = self.plan(dom, ctx.rho, nb, len(cands))
        sizes = np.array([dom.size(r) for r in cands], dtype=float)
        chosen = np.zeros(len(cands), dtype=bool)
        model, seeds = self._start(session, ctx, p["T"])
        for t in range(1, p["T"] + 1):
            answers = session.answers(cands)
            if ctx.total is None and not session.measurements:
                n_exact = float(answers[0].sum())  # private: enters the score only
                # N times a distribution (L1 norm 1 whatever the loop model): sensitivity 1 + 1
                fitted = [n_exact * _distribution(model.project(r)) for r in cands]
                sens = 2.0
            else:
                fitted = [model.project(r) for r in cands]
                sens = score_sensitivity(nb)
            scores = np.array([np.abs(a - f).sum() for a, f in zip(answers, fitted)]) - self.penalty * sizes
            scores[chosen] = -np.inf
            idx = session.top_q(scores, self.top_q, p["rho_select"], sens, what=f"RAP++ round {t} select")
            chosen[idx] = True
            picked = [cands[i] for i in idx]
            for r in picked:
                session.measure(r, p["sigma"], what=f"RAP++ round {t} measure {','.join(r)}")
            model = self._refit(session, ctx, model, seeds[t])
            info = getattr(model, "info", {}) or {}
            session.rounds.append({"round": t, "selected": [list(r) for r in picked], "source": "private",
                                   "sigma": p["sigma"], "rho_select": p["rho_select"], "sensitivity": sens,
                                   "rho_used": session.rho_spent, "loop_steps": info.get("steps"),
                                   "loop_loss": info.get("loss")})
            ctx.progress(f"RAP++ round {t}/{p['T']}: {'; '.join(','.join(r) for r in picked)}")
        session.forget()
        return Selection(list(session.measurements), dom, model=model, extra={"T": p["T"], "plan": p})


class RAPSelector(_RelaxedLoop):
    """RAP's selection (Aydore et al. 2021): counting queries, i.e. single cells of the workload's
    marginals, ``top_k`` per round.

    ``rounds`` T (10, the reference's default, capped at ``ceil(#cells / top_k)``); each round gets
    ``rho/T``: half to one-shot Gumbel top-``top_k`` over every cell not yet measured (score
    ``|c(D) − c(model)|`` in counts, sensitivity 1 under both relations: one record moves a single
    cell count by at most 1; the reference runs K Laplace report-noisy-max steps at ``ε²/2`` each,
    Gumbel top-K is K exponential-mechanism steps at the cheaper ``ε²/8``), half to one Gaussian
    release of the chosen cells with their joint L2 sensitivity: √(marginals touched) under
    add/remove, √(Σ_r min(cells in r, 2)) under replace-one (the reference charges each cell
    separately, which is never less). The answers become one measurement per touched marginal with
    a 0/1 query selecting its cells.

    Under add/remove N is private, and cell answers do not reveal it: a share ``count_share`` of
    the budget first releases the record count (Gaussian, sensitivity 1), as a measurement of
    the first workload clique's first attribute with query ``1ᵀ``; under replace-one N is public.

    ``workload``: default all 2-way marginals (the RAP paper used 64 random 3-way marginals; a
    measured cell is a dense query row of ``n_r`` entries, so large marginals are costly);
    ``loop`` as in :class:`RAPppSelector`. Privacy: exactly ``ctx.rho``.
    """

    name = "rap"

    def __init__(self, workload: Any = "all-2way", *, rounds: int = 10, top_k: int = 50,
                 count_share: float = 0.01, loop: Any = None):
        self.workload = workload
        self.rounds = check_rounds("rounds", rounds, allow_none=False)
        self.top_k = _check_q("top_k", top_k)
        self.count_share = check_fraction("count_share", count_share)
        self.loop = loop if loop is not None else default_relaxed(lr=1e-3)

    def supporting_cliques(self, domain: Domain) -> list[Clique]:
        return _workload_cliques(self.workload, domain)

    def run(self, session: MeasurementSession, ctx: Context) -> Selection:
        dom, nb = session.domain, session.neighbour
        cands = _workload_cliques(self.workload, dom)
        sizes = np.array([dom.size(r) for r in cands], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        n_cells = int(sizes.sum())
        T = min(self.rounds, math.ceil(n_cells / self.top_k))
        rho = ctx.rho
        if ctx.total is None:  # add/remove: release N first (what normalises the cell answers)
            rho_n = self.count_share * rho
            rho -= rho_n
            a0 = cands[0][0]
            (ans0,) = session.answers([cands[0]])
            y = session.gaussian(np.array([ans0.sum()]), gaussian_sigma(rho_n, count_l2(nb)), count_l2(nb),
                                 what="RAP record count", counts=True)
            session.record(Measurement((a0,), y, gaussian_sigma(rho_n, count_l2(nb)),
                                       query=np.ones((1, dom[a0])), meta={"what": "record count"}))
        per = rho / T
        rho_sel, rho_meas = per / 2, per / 2
        measured = np.zeros(n_cells, dtype=bool)
        owner = np.repeat(np.arange(len(cands)), sizes)
        model, seeds = self._start(session, ctx, T)
        for t in range(1, T + 1):
            answers = session.answers(cands)
            exact = np.concatenate(answers)
            fitted = np.concatenate([model.project(r) for r in cands])
            scores = np.abs(exact - fitted)
            scores[measured] = -np.inf
            k = min(self.top_k, int((~measured).sum()))
            idx = np.sort(session.top_q(scores, k, rho_sel, 1.0, what=f"RAP round {t} select"))
            measured[idx] = True
            touched, counts = np.unique(owner[idx], return_counts=True)
            per_marginal = np.ones_like(counts) if nb == "add_remove" else np.minimum(counts, 2)
            l2 = math.sqrt(float(per_marginal.sum()))
            sigma = gaussian_sigma(rho_meas, l2)
            y = session.gaussian(exact[idx], sigma, l2, what=f"RAP round {t} measure {idx.size} cells", counts=True)
            for i in touched:
                here = owner[idx] == i
                cells = idx[here] - starts[i]
                Qm = np.zeros((cells.size, sizes[i]))
                Qm[np.arange(cells.size), cells] = 1.0
                session.record(Measurement(cands[i], y[here], sigma, query=Qm, meta={"round": t}))
            model = self._refit(session, ctx, model, seeds[t])
            info = getattr(model, "info", {}) or {}
            session.rounds.append({"round": t, "selected": [list(cands[i]) for i in touched], "source": "private",
                                   "sigma": sigma, "cells": int(idx.size), "l2_sensitivity": l2,
                                   "rho_used": session.rho_spent, "loop_steps": info.get("steps"),
                                   "loop_loss": info.get("loss")})
            ctx.progress(f"RAP round {t}/{T}: {idx.size} cells of {touched.size} marginals")
        session.forget()
        return Selection(list(session.measurements), dom, model=model, extra={"T": T})
