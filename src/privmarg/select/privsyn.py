"""PrivSyn's selection, DenseMarg (Zhang, Wang, Li, He, Chen 2021; SPEC §10.1).

Three steps, each paid through the session: publish the InDif score of every attribute pair
(Gaussian), measure every 1-way marginal, then choose pairs greedily by trading the noise a
marginal costs against the dependence it captures, merge the chosen pairs into larger marginals
(Combine) and measure those with PrivSyn's budget allocation ``ρ_i ∝ n_i^{2/3}``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np

from ..core import Domain
from ..privacy import dependence_sensitivity, even_sigma, gaussian_sigma, marginal_l2, power_split
from .base import Context, Selection, check_fraction, one_ways
from .privbayes import dependence_score

Clique = tuple[str, ...]


def indif_sensitivity(neighbour: str) -> float:
    """Sensitivity of one pair's InDif score (record counts): 4 (add/remove), 6 (replace-one).

    ``InDif_ab = N·Σ_uv |P̂(u,v) − P̂(u)P̂(v)| = ‖C − a bᵀ/N‖₁`` for the pair's counts ``C`` with
    margins ``a``, ``b``: PrivBayes's dependence score S, whose change between neighbours is
    bounded in :func:`~privmarg.privacy.dependence_sensitivity`: under add/remove the change of
    ``C − abᵀ/N`` is the rank-one ``(N eᵢ − a)(N eⱼ − b)ᵀ/(N(N+1))``, of L1 norm
    ``≤ 4N/(N+1) < 4``; under replace-one (N fixed) it is at most 2 + 4 = 6. (The PrivSyn paper
    states 4 for its bounded setting; the replace-one bound derived here is 6.)
    """
    return dependence_sensitivity(neighbour)


def indif_sigma(neighbour: str, pairs: int, rho: float) -> float:
    """σ of the Gaussian noise on each of ``pairs`` InDif scores published jointly at total cost
    ``rho``: the score vector's L2 sensitivity is ``Δ·√m`` (each of the m scores moves by at most
    Δ = :func:`indif_sensitivity`), so ``σ = Δ·√m/√(2ρ)`` in record counts.

    (The benchmark code adds std ``8m/ρ`` to the scores normalised by N and rescales by N, which
    matches no standard calibration; SPEC §10.1.)"""
    return gaussian_sigma(rho, indif_sensitivity(neighbour) * math.sqrt(pairs))


def noise_error(cells: np.ndarray, rho: float, l2: float = 1.0) -> float:
    """Expected L1 noise of measuring marginals of ``cells`` cells with PrivSyn's allocation of
    ``rho``: ``Σ_i n_i·σ_i·√(2/π)`` with ``σ_i = Δ₂/√(2ρ_i)``, ``ρ_i = ρ·n_i^{2/3}/S``,
    ``S = Σ_j n_j^{2/3}``, which is ``Δ₂·S^{3/2}/√(πρ)`` (record counts; 0 for no marginal)."""
    s = float(np.sum(np.asarray(cells, dtype=float) ** (2 / 3)))
    return l2 * s**1.5 / math.sqrt(math.pi * rho)


def greedy_pairs(indif: np.ndarray, cells: np.ndarray, rho: float, l2: float, gap: float) -> list[int]:
    """DenseMarg's greedy choice (indices into the pairs): repeatedly add the pair that minimises
    ``E(S) = noise_error(S) + Σ_{pairs ∉ S} InDif``, while that lowers ``E`` by more than ``gap``.
    The first pair is always kept (the uncovered attributes connect to it). [DEC] The reference
    loop also keeps the pair whose addition fails the test (it tests after adding), which can only
    raise ``E``; here it is not added. Uses only released (noisy) scores: no privacy cost."""
    indif = np.asarray(indif, dtype=float)
    c23 = np.asarray(cells, dtype=float) ** (2 / 3)
    free = np.ones(indif.size, dtype=bool)
    chosen: list[int] = []
    s, unselected = 0.0, float(indif.sum())
    current = unselected  # E(∅): nothing measured, every pair's dependence lost
    scale = l2 / math.sqrt(math.pi * rho)
    while free.any():
        # E(S ∪ {j}) for every free j at once
        e = scale * (s + c23) ** 1.5 + (unselected - indif)
        e[~free] = np.inf
        j = int(np.argmin(e))
        if chosen and current - e[j] <= gap:
            break
        chosen.append(j)
        free[j] = False
        s += c23[j]
        unselected -= indif[j]
        current = e[j]
    return chosen


def connect_uncovered(attrs: Sequence[str], pairs: Sequence[Clique], indif: np.ndarray,
                      chosen: Sequence[int]) -> list[int]:
    """For every attribute in no chosen pair (domain order), the pair joining it to a covered
    attribute with the highest noisy InDif (ties: first pair). Free (released scores only)."""
    covered = {a for j in chosen for a in pairs[j]}
    extra = []
    for a in attrs:
        if a in covered or not covered:
            continue
        cand = [j for j, p in enumerate(pairs) if a in p and (set(p) - {a}) <= covered]
        if cand:
            extra.append(max(cand, key=lambda j: (indif[j], -j)))
    return extra


def small_cliques(domain: Domain, edges: Sequence[Clique] | None, max_cells: int, min_size: int = 3
                  ) -> Iterator[Clique]:
    """Cliques of the graph ``edges`` (all pairs when None) with at least ``min_size`` attributes and
    fewer than ``max_cells`` cells, in domain order, smallest first. Supersets of a clique that is
    too large are too large too, so the search is pruned there."""
    attrs = list(domain.attrs)
    if edges is None:
        adj = {a: set(attrs) - {a} for a in attrs}
    else:
        adj = {a: set() for a in attrs}
        for a, b in edges:
            adj[a].add(b)
            adj[b].add(a)
    pos = {a: i for i, a in enumerate(attrs)}
    level = [(a,) for a in attrs if domain[a] < max_cells]
    size = 1
    while level:
        if size >= min_size:
            yield from level
        nxt = []
        for c in level:
            cells = domain.size(c)
            common = set.intersection(*(adj[a] for a in c))
            for b in sorted(common, key=pos.__getitem__):
                if pos[b] > pos[c[-1]] and cells * domain[b] < max_cells:
                    nxt.append(c + (b,))
        level, size = nxt, size + 1


def combine(domain: Domain, pairs: Sequence[Clique], max_cells: int = 5000, max_shared: int = 2) -> list[Clique]:
    """PrivSyn's Combine (Alg. 2): cliques of the chosen-pair graph with ≥ 3 attributes, largest
    first, become one marginal when it has fewer than ``max_cells`` cells and shares at most
    ``max_shared`` attributes with the marginals combined before it; chosen pairs inside no
    combined marginal stay pairs. Returns the combined marginals, then those pairs."""
    by_size: dict[int, list[Clique]] = {}
    for c in small_cliques(domain, pairs, max_cells):
        by_size.setdefault(len(c), []).append(c)
    used: set[str] = set()
    out: list[Clique] = []
    for k in sorted(by_size, reverse=True):
        for c in by_size[k]:
            if len(used & set(c)) <= max_shared:
                out.append(c)
                used.update(c)
    inside = {p for c in out for p in itertools.combinations(c, 2)}
    return out + [p for p in pairs if p not in inside]


class PrivSynSelector:
    """PrivSyn's DenseMarg selection + Combine, measured with ``ρ_i ∝ n_i^{2/3}``.

    Budget of ``ctx.rho`` [SPEC §10.1, reference code]: ``indif_share`` (0.1) publishes the InDif
    score of all ``m = d(d−1)/2`` pairs jointly with Gaussian noise ``σ = Δ·√m/√(2ρ_indif)``
    (Δ = 4 add/remove, 6 replace-one: :func:`indif_sensitivity`); ``one_way_share`` (0.1) measures
    the d 1-way marginals with equal σ; the rest (0.8) measures the chosen marginals, marginal
    ``i`` with ``ρ_i = ρ_marg·n_i^{2/3}/Σ_j n_j^{2/3}`` (σ_i = Δ₂/√(2ρ_i)).

    Choice (free: released scores only): :func:`greedy_pairs` with stopping ``gap`` (20 000, the
    reference's, in record counts: a larger table keeps adding pairs longer; the noise term uses
    the relation's Δ₂, so replace-one's √2 larger noise is priced in), then
    :func:`connect_uncovered`, then :func:`combine` (``combine_cells`` 5000, ``max_shared`` 2;
    ``combine=False`` measures the pairs). The InDif scores are a charged release
    (``phase="selection"`` in the ledger), never a peek at the data.

    Privacy: exactly ``ctx.rho``: one Gaussian release of m scores (``Δ²m/(2σ²)``) and one Gaussian
    marginal per 1-way and chosen marginal (``Δ₂²/(2σ_i²)``). A single attribute gets all of it.
    """

    name = "privsyn"

    def __init__(self, indif_share: float = 0.1, one_way_share: float = 0.1, gap: float = 20000.0,
                 combine: bool = True, combine_cells: int = 5000, max_shared: int = 2):
        self.indif_share = check_fraction("indif_share", indif_share)
        self.one_way_share = check_fraction("one_way_share", one_way_share)
        if self.indif_share + self.one_way_share >= 1:
            raise ValueError("indif_share + one_way_share must leave some budget for the marginals")
        if not gap >= 0 or not math.isfinite(gap):
            raise ValueError(f"gap must be a finite number >= 0, got {gap!r}")
        if isinstance(combine_cells, bool) or not isinstance(combine_cells, int) or combine_cells < 2:
            raise ValueError(f"combine_cells must be an integer >= 2, got {combine_cells!r}")
        if isinstance(max_shared, bool) or not isinstance(max_shared, int) or max_shared < 0:
            raise ValueError(f"max_shared must be an integer >= 0, got {max_shared!r}")
        self.gap = float(gap)
        self.combine = bool(combine)
        self.combine_cells = combine_cells
        self.max_shared = max_shared

    def supporting_cliques(self, domain: Domain) -> list[Clique]:
        # every pair (InDif), and every clique Combine could form (< combine_cells cells)
        out = one_ways(domain) + list(itertools.combinations(domain.attrs, 2))
        if self.combine:
            out += list(small_cliques(domain, None, self.combine_cells))
        return out

    def run(self, session, ctx: Context) -> Selection:
        dom = session.domain
        d = len(dom)
        l2 = marginal_l2(session.neighbour)
        if d < 2:  # nothing to select: the one marginal takes the whole budget
            session.measure(one_ways(dom)[0], gaussian_sigma(ctx.rho, l2), what=f"PrivSyn 1-way {dom.attrs[0]}")
            return Selection(list(session.measurements), dom, extra={"pairs": [], "marginals": []})
        pairs = list(itertools.combinations(dom.attrs, 2))
        exact = np.array([dependence_score(t.reshape(dom.sizes(p))) for p, t in zip(pairs, session.answers(pairs))])
        session.forget()
        sigma_indif = indif_sigma(session.neighbour, len(pairs), self.indif_share * ctx.rho)
        indif = session.gaussian(exact, sigma_indif, indif_sensitivity(session.neighbour) * math.sqrt(len(pairs)),
                                 what=f"PrivSyn InDif of {len(pairs)} pairs", phase="selection")
        del exact
        ctx.progress("PrivSyn: InDif scores published")

        s1 = even_sigma(self.one_way_share * ctx.rho, d, l2)
        for c in one_ways(dom):
            session.measure(c, s1, what=f"PrivSyn 1-way {c[0]}")
        ctx.progress("PrivSyn: 1-way marginals measured")

        rho_marg = ctx.rho - session.rho_spent
        cells = np.array([dom.size(p) for p in pairs], dtype=float)
        chosen = greedy_pairs(indif, cells, rho_marg, l2, self.gap)
        chosen += connect_uncovered(dom.attrs, pairs, indif, chosen)
        chosen_pairs = [pairs[j] for j in chosen]
        marginals = combine(dom, chosen_pairs, self.combine_cells, self.max_shared) if self.combine \
            else chosen_pairs
        ctx.progress(f"PrivSyn: {len(chosen_pairs)} pairs chosen, {len(marginals)} marginals after Combine")

        shares = power_split(rho_marg, [dom.size(c) for c in marginals])
        for c, r in zip(marginals, shares):
            session.measure(c, gaussian_sigma(r, l2), what=f"PrivSyn marginal {','.join(c)}")
        ctx.progress("PrivSyn: done")
        return Selection(list(session.measurements), dom,
                         extra={"pairs": chosen_pairs, "marginals": marginals,
                                "indif": dict(zip(pairs, indif.tolist())), "indif_sigma": sigma_indif})
