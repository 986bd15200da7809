"""JAM's last step: blend the fitted model with the public records, the share chosen privately.

A round that picks a public answer leaves its measurement budget to the rounds after it; when the
last round picks one, that budget is left over. JAM spends it on one exponential-mechanism choice
among the releases ``λ·model + (1 − λ)·public``, ``λ`` in
:data:`SHARES`, scored by the workload error against the private data:
``score(λ) = −Σ_r c_r·‖M_r(D) − (λ·M_r(model) + (1 − λ)·M_r(public))‖₁`` (counts, both parts scaled
to the public N). Under replace-one one record moves every ``M_r(D)`` by at most 2 in L1, so the
score's sensitivity is ``2·Σ_r c_r``; a choice at ε costs ε²/8 (zCDP). With no budget left the
model is released as it is. The released table is then never much worse than the better of JAM's
model and the public table as it is, and a blend is often better than both (the L1 error of a blend
is at most the blend of the errors; biased public marginals and noisy private ones err in
different directions: benchmarks/history/public-data.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..generate.blend import BlendedModel
from ..generate.records import RecordsModel
from ..measure import MeasurementSession
from .base import Clique

#: the model's shares the choice is among (1: the model alone; 0: the public table alone)
SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)
#: budget below this fraction of the selection's is not worth a choice (the model as it is)
MIN_SHARE_OF_BUDGET = 1e-6
#: the largest blur of the choice, ``4·ln|SHARES| / (ε·N)`` (mean L1 error per marginal: releases
#: closer than this are hardly told apart), at which it is still made; above it (a tiny ε·N) the
#: choice is close to uniform and could hand the release to a far public table: the model alone
MAX_CHOICE_BLUR = 0.1


def blend_scores(answers: list[np.ndarray], model_marginals: list[np.ndarray], public_marginals: list[np.ndarray],
                 weights: np.ndarray, shares: Sequence[float] = SHARES) -> np.ndarray:
    """``−Σ_r c_r·‖a_r − (λ·m_r + (1 − λ)·p_r)‖₁`` for each ``λ`` in ``shares`` (counts)."""
    out = np.zeros(len(shares))
    for a, m, p, c in zip(answers, model_marginals, public_marginals, weights):
        d_model, d_pub = m - a, p - a
        out -= c * np.array([np.abs(lam * d_model + (1.0 - lam) * d_pub).sum() for lam in shares])
    return out


def choose_blend(session: MeasurementSession, model: Any, public: RecordsModel, workload: list[tuple[Clique, float]],
                 rho: float) -> Any:
    """The release: ``model`` blended with ``public`` at the share the exponential mechanism picks
    with budget ``rho`` (ε = √(8ρ)), or ``model`` itself when ``rho`` is 0, when the choice would be
    blurred past :data:`MAX_CHOICE_BLUR`, or when λ = 1 wins. The model's
    marginals are taken from ``model.total`` records it draws (public randomness from the session),
    the public table's exactly; both are released quantities, and the private answers enter only
    through the mechanism's scores."""
    if not rho > 0 or not workload:
        return model
    epsilon = math.sqrt(8.0 * rho)
    if 4.0 * math.log(len(SHARES)) / (epsilon * max(float(model.total), 1.0)) > MAX_CHOICE_BLUR:
        return model  # public inputs only: ρ and N under replace-one
    cliques = [r for r, _ in workload]
    weights = np.array([float(c) for _, c in workload])
    sens = 2.0 * float(weights.sum())
    # the model's side from records it draws, as many as the release: what a release holds, sampling
    # noise included, and bincounts instead of hundreds of queries of a large model
    rng = np.random.default_rng(session.public_seeds(1)[0])
    drawn = RecordsModel(model.domain, model.total, model.sample(max(1, int(round(model.total))), rng))
    scores = blend_scores(session.answers(cliques), [drawn.project(r) for r in cliques],
                          [public.project(r) for r in cliques], weights)
    session.forget()  # the workload's private answers are not needed any more (memory)
    pick = session.select(scores, epsilon, sens,
                          what=f"JAM blend with the public records (shares {', '.join(f'{s:g}' for s in SHARES)})")
    share = SHARES[pick]
    return model if share == 1.0 else BlendedModel(model, public, share)


@dataclass(frozen=True)
class BlendChoice:
    """JAM's release step (a :class:`~privmarg.select.base.Selection`'s ``choose``): with the budget
    of ``rho`` (the selection's) still unspent when it runs, :func:`choose_blend` over ``workload``."""

    public: RecordsModel
    workload: list
    rho: float

    def __call__(self, session: MeasurementSession, model: Any) -> Any:
        left = self.rho - session.rho_spent
        try:  # a hair under what is left: the accountant refuses any overspend, float dust included
            return choose_blend(session, model, self.public, self.workload,
                                left * (1.0 - 1e-9) if left > MIN_SHARE_OF_BUDGET * self.rho else 0.0)
        finally:
            session.forget()  # the workload's answers the selection kept for this step (memory)
