"""How far any marginal of a graphical model can have moved between two fits, from their potentials.

Two models of one domain, ``P ∝ exp(Σ_r φ_r)`` and ``Q ∝ exp(Σ_r ψ_r)`` on the same structural zeros,
with every clique ``r`` of ``Q``'s potentials also one of ``P``'s (a fit warm-started from ``Q``, or
refitted on more measurements), have the symmetric divergence

    J = KL(P‖Q) + KL(Q‖P) = Σ_x (P(x) − Q(x))·(log P(x) − log Q(x)) = Σ_r ⟨μ_r − ν_r, φ_r − ψ_r⟩,

with ``μ_r``, ``ν_r`` the two models' marginals on ``r`` as probabilities and ``ψ_r = 0`` where ``Q`` has
no potential: the partition functions cancel, so ``J`` needs only marginals on the potentials' own
cliques, which a junction tree holds. Pinsker's inequality holds both ways round, so
``‖P − Q‖₁ ≤ √(2·min(KL(P‖Q), KL(Q‖P))) ≤ √J``, and no marginal moves more than the whole: for any
attribute set ``A``, ``‖M_A(P) − M_A(Q)‖₁ ≤ N·√J`` counts. Pure arithmetic on released models: no
privacy cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .graphical_model import GraphicalModel

Clique = tuple[str, ...]

#: counts added to every bound per unit of N: the fits' float32 tables put rounding error of about
#: 1e-6·N into each marginal, far below this
ROUNDING_SHARE = 2e-4


def key_marginals(model: GraphicalModel) -> dict[Clique, np.ndarray] | None:
    """The model's marginals (probabilities, flat) on the cliques of its potentials, or None where it
    has no potentials (a model not made by a fit) or no records."""
    potentials = getattr(model, "potentials", None)
    if not isinstance(model, GraphicalModel) or not potentials or not model.total > 0:
        return None
    keys = list(potentials)
    return {r: np.asarray(m, dtype=np.float64) / model.total for r, m in zip(keys, model.project_many(keys))}


def marginal_drift(before: GraphicalModel, after: GraphicalModel, before_marginals: Mapping[Clique, np.ndarray],
                   after_marginals: Mapping[Clique, np.ndarray]) -> float:
    """A bound (counts) on ``‖M_A(after) − M_A(before)‖₁`` for every attribute set ``A`` (see the
    module's note), or ``inf`` where the two models are not of that form: a potential of ``before``
    missing from ``after``, a marginal missing from ``before_marginals`` (probabilities, keyed as
    ``after``'s potentials), values not finite. ``after_marginals``: :func:`key_marginals` of
    ``after``. Both models must share their structural zeros (a selector's rounds do)."""
    phi = getattr(after, "potentials", None)
    psi = getattr(before, "potentials", None)
    if not phi or psi is None or not set(psi) <= set(phi) or not before.total > 0:
        return math.inf
    j = slack = 0.0
    for r, p in phi.items():
        mu, nu = after_marginals.get(r), before_marginals.get(r)
        if mu is None or nu is None or mu.shape != nu.shape:
            return math.inf
        dphi = np.asarray(p, dtype=np.float64).ravel()
        if r in psi:
            dphi = dphi - np.asarray(psi[r], dtype=np.float64).ravel()
        if dphi.shape != mu.shape:
            return math.inf
        dmu = mu - nu
        j += float(np.dot(dmu, dphi))
        slack += float(np.dot(np.abs(dmu), np.abs(dphi)))
    if not (math.isfinite(j) and math.isfinite(slack)):
        return math.inf
    # J ≥ 0 exactly; its rounding is a small share of the sum of the terms' sizes
    j = max(j, 0.0) + 1e-6 * slack
    n = after.total
    return min(2.0 * n, n * math.sqrt(j)) + abs(after.total - before.total) + ROUNDING_SHARE * n
