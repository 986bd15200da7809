"""How far any marginal of a graphical model can have moved between two fits, from their potentials.

Two models of one domain, ``P ∝ exp(Σ_r φ_r)`` and ``Q ∝ exp(Σ_r ψ_r)`` on the same structural zeros,
with every clique ``r`` of ``Q``'s potentials also one of ``P``'s (a fit warm-started from ``Q``, or
refitted on more measurements), have the symmetric divergence

    J = KL(P‖Q) + KL(Q‖P) = Σ_x (P(x) − Q(x))·(log P(x) − log Q(x)) = Σ_r ⟨μ_r − ν_r, φ_r − ψ_r⟩,

with ``μ_r``, ``ν_r`` the two models' marginals on ``r`` as probabilities and ``ψ_r = 0`` where ``Q`` has
no potential: the partition functions cancel, so ``J`` needs only marginals on the potentials' own
cliques, which a junction tree holds. ``P``'s independent parts (attributes joined by its cliques)
also split ``Q``, whose cliques are fewer, so both are products over those parts and ``J`` is the sum
of one ``J_K`` per part. For an attribute set ``A`` touching the parts ``K(A)``, the data-processing
inequality and Pinsker's inequality, both ways round, give
``‖M_A(P) − M_A(Q)‖₁ ≤ √(2·min(KL(P‖Q), KL(Q‖P)) over K(A)) ≤ √(Σ_{K ∈ K(A)} J_K)``: in counts,
``N`` times that. A part the refit barely touched bounds its marginals tightly. Pure arithmetic on
released models: no privacy cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .graphical_model import GraphicalModel

Clique = tuple[str, ...]

#: counts added to every bound per unit of N, for the rounding of the errors the bound is compared
#: with (float64 marginals: far below this)
ROUNDING_SHARE = 2e-4
#: the relative rounding error allowed a model's marginals, in units of float64's precision: J's
#: allowance is this share of Σ_r Σ_cells (μ_r + ν_r)·|φ_r − ψ_r| (after centring). Only models
#: with float64 tables are bounded: float32 tables round their marginals by up to ~1e-4 relative
#: on deep trees with large potentials, more than any allowance that leaves the bound useful (a fit
#: on float32 tables is bounded once its model's tables are recomputed in float64, as JAM's loop's)
MARGINAL_ULPS = 256.0
#: a model is bounded only while it is numerically sound: each marginal on its potentials' cliques
#: sums to its total within this share, and no potential is so large that float64 loses it
HEALTHY_SUM, HEALTHY_POTENTIAL = 1e-9, 1e9


def boundable(model: Any) -> bool:
    """Whether a bound can rest on ``model``: a fitted graphical model (it has potentials and
    records), float64 tables, and no potential so large that float64 loses it
    (:data:`HEALTHY_POTENTIAL`: a fit whose potentials ran off, as a flat loss beside a structural
    zero allows). Its marginals must also sum to N (:data:`HEALTHY_SUM`, checked by :func:`drift`)."""
    potentials = getattr(model, "potentials", None)
    if not isinstance(model, GraphicalModel) or not potentials or not model.total > 0:
        return False
    if any(t.dtype != np.float64 for t in model.marginals):
        return False
    return all(float(np.abs(p).max()) <= HEALTHY_POTENTIAL for p in potentials.values() if np.size(p))


def key_marginals(model: Any) -> dict[Clique, np.ndarray] | None:
    """The model's marginals (probabilities, flat) on the cliques of its potentials, or None where
    no bound can rest on them (:func:`boundable`)."""
    if not boundable(model):
        return None
    keys = list(model.potentials)
    return {r: np.asarray(m, dtype=np.float64) / model.total for r, m in zip(keys, model.project_many(keys))}


def parts(model: GraphicalModel) -> np.ndarray:
    """The model's independent part of each attribute (in the domain's order), as numbers
    ``0..parts−1``: attributes are in one part when a chain of the tree's cliques joins them."""
    attrs = model.domain.attrs
    where = {a: i for i, a in enumerate(attrs)}
    root = list(range(len(attrs)))

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    for clique in model.tree.cliques:
        first = find(where[clique[0]])
        for a in clique[1:]:
            other = find(where[a])
            if other != first:
                root[other] = first
    return np.unique([find(i) for i in range(len(attrs))], return_inverse=True)[1]


@dataclass(frozen=True)
class Drift:
    """How far a refit can have moved the marginals: each attribute's independent ``part`` (in
    the refitted model), each part's symmetric divergence ``J_K``, and the record counts before and
    after."""

    part: np.ndarray
    divergence: np.ndarray
    total_before: float
    total_after: float

    def bound(self, attrs: np.ndarray) -> np.ndarray:
        """Counts by which the marginal on each row's attributes (domain positions, ``−1``
        padding; shape (n, k)) can have moved: ``N·min(2, √(Σ_{K ∈ K(A)} J_K))`` plus the change in
        N and the rounding allowance (:data:`ROUNDING_SHARE`)."""
        attrs = np.asarray(attrs)
        if attrs.ndim != 2:
            raise ValueError("attrs must be a 2-D array of attribute positions")
        k = np.where(attrs >= 0, self.part[np.maximum(attrs, 0)], -1)
        j = np.zeros(len(attrs))
        for col in range(k.shape[1]):  # each part once: a part already met in an earlier column is not added again
            new = k[:, col] >= 0
            for prev in range(col):
                new &= k[:, col] != k[:, prev]
            j += np.where(new, self.divergence[np.maximum(k[:, col], 0)], 0.0)
        n = self.total_after
        return n * np.minimum(2.0, np.sqrt(j)) + abs(n - self.total_before) + ROUNDING_SHARE * n


def drift(before: GraphicalModel, after: GraphicalModel, before_marginals: Mapping[Clique, np.ndarray],
          after_marginals: Mapping[Clique, np.ndarray]) -> Drift | None:
    """The :class:`Drift` from ``before`` to ``after`` (see the module's note), or None where the two
    models are not of that form: a potential of ``before`` missing from ``after``, a marginal missing
    from ``before_marginals`` (probabilities, keyed as ``after``'s potentials), values not finite.
    ``after_marginals``: :func:`key_marginals` of ``after``. Both models must share their structural
    zeros (a selector's rounds do)."""
    phi = getattr(after, "potentials", None)
    psi = getattr(before, "potentials", None)
    if not phi or psi is None or not set(psi) <= set(phi) or not before.total > 0 or after.domain != before.domain:
        return None
    if not (boundable(before) and boundable(after)):
        return None
    part = parts(after)
    where = {a: i for i, a in enumerate(after.domain.attrs)}
    ulp = MARGINAL_ULPS * float(np.finfo(np.float64).eps)
    j = np.zeros(int(part.max()) + 1 if part.size else 0)
    for r, p in phi.items():
        mu, nu = after_marginals.get(r), before_marginals.get(r)
        if mu is None or nu is None or mu.shape != nu.shape:
            return None
        dphi = np.asarray(p, dtype=np.float64).ravel()
        if r in psi:
            dphi = dphi - np.asarray(psi[r], dtype=np.float64).ravel()
        if dphi.shape != mu.shape or not (abs(float(mu.sum()) - 1.0) <= HEALTHY_SUM
                                            and abs(float(nu.sum()) - 1.0) <= HEALTHY_SUM):
            return None
        # a constant added to a potential changes neither model (μ and ν each sum to 1): centred,
        # it cannot multiply the marginals' rounding error
        dphi = dphi - dphi.mean()
        # J ≥ 0 exactly; the marginals' rounding moves each term by at most ulp·(μ + ν)·|Δφ| a cell
        j[part[where[r[0]]]] += float(np.dot(mu - nu, dphi)) + ulp * float(np.dot(mu + nu, np.abs(dphi)))
    if not np.isfinite(j).all():
        return None
    return Drift(part, np.maximum(j, 0.0), float(before.total), float(after.total))

