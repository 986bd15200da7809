"""PrivMRF's selection (Cai, Lei, Wei, Xiao, VLDB 2021, "Data Synthesis via Differentially Private
Markov Random Fields"): a noisy attribute graph, an initial marginal set inside its cliques, then
rounds that add the marginals the current model misses most, chosen by Gaussian-noised scores.

Written from the paper and the facts of its reference code (github.com/caicre/PrivMRF,
``attribute_graph.py`` and ``markov_random_field.py``); none of that code is used here. What
follows the reference and what is ours is listed in :class:`PrivMRFSelector`.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from ..core import Domain
from ..generate.pgm import PGM
from ..generate.pgm.junction_tree import MB, largest_clique_cells, maximal_masks
from ..privacy import count_l2, dependence_sensitivity, even_sigma, marginal_l2, score_sensitivity
from .base import Context, Selection, check_fraction
from .privbayes import dependence_score

Clique = tuple[str, ...]
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def noisy_score_sigma(rho: float, k: int, sensitivity: float) -> float:
    """σ of the Gaussian noise PrivMRF adds to each of ``k`` scores released together, each score of
    (L1 = per-coordinate) sensitivity ``sensitivity``: the vector's L2 sensitivity is
    ``sensitivity·√k``, so ``σ = sensitivity·√k/√(2ρ)`` costs exactly ``rho`` zCDP (Gaussian
    mechanism, Δ₂²/(2σ²)). Taking the top scores of the noisy vector is post-processing."""
    return even_sigma(rho, k, sensitivity)


def _subsets_within(dom: Domain, clique: Clique, max_len: int, limit: float) -> list[Clique]:
    """Subsets of ``clique`` with 1..``max_len`` attributes; those with two or more attributes need
    fewer than ``limit`` cells (depth-first, pruned: a superset never has fewer cells)."""
    out: list[Clique] = []
    if max_len < 1:
        return out

    def grow(start: int, cur: tuple, cells: int) -> None:
        for i in range(start, len(clique)):
            a = clique[i]
            nxt, c = cur + (a,), cells * dom[a]
            if len(nxt) > 1 and c >= limit:
                continue
            out.append(nxt)
            if len(nxt) < max_len:
                grow(i + 1, nxt, c)

    grow(0, (), 1)
    return out


def _maximal_parent_sets(dom: Domain, parents: list[str], limit: float, max_len: int) -> list[Clique]:
    """Parent sets ⊆ ``parents`` of at most ``max_len`` attributes and at most ``limit`` cells that no
    other such set contains (the reference's "maximal parents"); ``[()]`` when none but the empty set fits."""
    found: list[frozenset] = []

    def grow(start: int, cur: tuple, cells: float) -> None:
        extended = False
        if len(cur) < max_len:
            for i in range(start, len(parents)):
                c = cells * dom[parents[i]]
                if c <= limit:
                    extended = True
                    grow(i + 1, cur + (parents[i],), c)
        if not extended:
            found.append(frozenset(cur))

    grow(0, (), 1.0)
    maximal = [s for s in found if not any(s < o for o in found)]
    return [tuple(a for a in parents if a in s) for s in dict.fromkeys(maximal)]


class PrivMRFSelector:
    """PrivMRF's selection; any generator fits the result (the preset pairs it with Private-PGM).

    Steps and budget (ρ = ``ctx.rho``, spent exactly under both neighbour relations):

    1. **Record count** (add/remove only; under replace-one N is public): ``count_share·ρ`` for a
       Gaussian count N̂ (Δ₂ = 1). It sizes the θ-usefulness limits below and turns scores into TVDs.
    2. **Pair scores** (``graph_share·ρ``, less step 1): for all m = d(d−1)/2 pairs the dependence
       ``S_ab = ‖C_ab − a bᵀ/N‖₁ = 2N·TVD(P_ab, P_a P_b)`` (:func:`~privmarg.select.privbayes.dependence_score`),
       released at once with Gaussian noise: per-pair sensitivity Δ_S = 4 (add/remove) or 6 (replace-one)
       (:func:`~privmarg.privacy.dependence_sensitivity`; the reference uses 2/N on the TVD = 4 on
       S), vector L2 sensitivity Δ_S·√m, ``σ = Δ_S·√m/√(2ρ_graph)`` (:func:`noisy_score_sigma`).
       Noisy TVDs are ``S̃/(2N̂)``.
    3. **Attribute graph** (post-processing): from the empty graph, repeatedly add the non-edge whose
       graph, once triangulated, has the largest score ``Σ_{edges} TVD̃ − size_penalty·Σ_cliques cells``,
       among graphs whose largest maximal clique has at most ``max_clique_size`` cells (10⁷) and whose
       cliques together at most ``max_graph_cells`` (5·10⁷), until no edge fits or the graph is complete
       (the reference keeps adding the best edge even when the score falls; so do we).
    4. **Initial marginals** (post-processing, then measured): in each maximal clique of the graph a
       greedy Bayesian network (random first attribute; then the attribute and maximal parent set,
       among those of at most ``max_marginal_attrs`` attributes under the θ-usefulness limit, with the
       best correlation-based feature-selection score ``Σ_p TVD̃(x,p)/√(|P| + Σ_{p<q} TVD̃(p,q))``;
       it stops at a clique when only the empty parent set fits). Kept: each attribute's best-scoring
       family, then a 1-way marginal for every attribute not yet covered, then other families at
       random up to d marginals in all.
    5. **Refinement** (``score_share·ρ`` for scores, spread evenly over ``steps`` = min(⌊d/2⌋, 8)
       rounds): candidates are the proper subsets of the graph's maximal cliques of at most
       ``max_marginal_attrs`` attributes (multi-attribute ones under the θ-usefulness limit), weighted
       ``|C|²/#candidates(C)`` per clique ``C`` (summed). Each round draws up to ``query_cap`` (400)
       candidates by weight, releases their scores ``‖M_r(D) − M_r(model)‖₁`` with one Gaussian
       (per-score sensitivity 1 or 2, L2 ``Δ·√k``), measures the round's quota of the best noisy scores
       and refits the model in the loop; the lower-scoring half of those not taken get half weight.
       ``⌊refine_ratio·d⌋`` marginals are added in all (``refine_ratio`` = the reference's t = 0.8).
    6. **Marginals** (the rest): every marginal of steps 4–5 with one Gaussian noise σ
       (Δ₂ = 1 or √2), sized for d + ⌊0.8d⌋ of them, or for fewer where the limit at that σ leaves
       fewer to measure (``_plan``: the largest count whose own limit fills it).

    θ-usefulness: a marginal of two or more attributes must have fewer than
    ``N̂/(θ·σ·√(2/π))`` cells (counts per cell at least θ times the mean absolute noise), ``theta = 6``.

    From the reference: the 0.1/0.1/0.8 budget split (its β1, β3 and the rest), the TVD graph score
    with size penalty 1e-8 per cell, caps 10⁷ cells per clique and 5·10⁷ per graph, θ = 6, at most 6
    attributes per marginal, d initial marginals, t = 0.8, min(d/2, 8) rounds, 400 queried
    candidates, the clique weights, one σ for all marginals. Its scores are Gaussian-noised and the
    top ones taken (no exponential mechanism); we account each noisy score vector as one Gaussian
    mechanism with the L2 sensitivity above. Ours: a noisy N̂ with its own charge (the reference adds
    noise to N without accounting it properly); zCDP throughout; both neighbour relations; the graph
    kept triangulated between edges (the reference re-triangulates the raw graph) with our junction
    tree's greedy elimination; θ-usefulness with the mean absolute noise σ√(2/π) in both phases, at
    the σ of the count measured (the reference omits √(2/π) when building the graph and re-sizes with the final σ);
    candidates inside an initial marginal are left out and a measured candidate leaves the pool (the
    reference may measure a marginal twice); the candidate draw is without replacement (numpy's weighted choice); the
    halved weights go to the lower-scoring half (the reference halves by list position); every
    measured set's junction tree (what Private-PGM fits) must keep its largest clique within
    ``max_clique_size`` cells and its total within ``max_model_size`` MB (the reference's model is
    the graph's own, much larger one); no attribute hierarchy (the reference's adult-only option).
    If the last round finds nothing that fits, the budget left re-measures every 1-way marginal.

    ``loop``: the model in the loop (default a graphical model). The graph, the initial marginals
    and N̂ are in ``Selection.extra``.
    """

    name = "privmrf"

    def __init__(self, *, theta: float = 6.0, graph_share: float = 0.1, score_share: float = 0.1,
                 count_share: float = 0.01, refine_ratio: float = 0.8, size_penalty: float = 1e-8,
                 max_clique_size: float = 1e7, max_graph_cells: float = 5e7, max_marginal_attrs: int = 6,
                 steps: int | None = None, query_cap: int = 400, max_model_size: float = 80.0, loop: Any = None):
        if not (theta > 0 and math.isfinite(theta)):
            raise ValueError(f"theta must be positive, got {theta!r}")
        self.theta = float(theta)
        self.graph_share = check_fraction("graph_share", graph_share)
        self.score_share = check_fraction("score_share", score_share)
        self.count_share = check_fraction("count_share", count_share)
        if self.count_share >= self.graph_share:
            raise ValueError("count_share must be below graph_share (the count comes out of the graph's share)")
        if self.graph_share + self.score_share >= 1:
            raise ValueError("graph_share + score_share must leave budget for the marginals")
        if not refine_ratio >= 0:
            raise ValueError(f"refine_ratio must be >= 0, got {refine_ratio!r}")
        self.refine_ratio = float(refine_ratio)
        if not size_penalty >= 0:
            raise ValueError(f"size_penalty must be >= 0, got {size_penalty!r}")
        self.size_penalty = float(size_penalty)
        for nm, v in (("max_clique_size", max_clique_size), ("max_graph_cells", max_graph_cells),
                      ("max_model_size", max_model_size)):
            if not v > 0:
                raise ValueError(f"{nm} must be positive, got {v!r}")
        self.max_clique_size, self.max_graph_cells = float(max_clique_size), float(max_graph_cells)
        self.max_model_size = float(max_model_size)
        for nm, v in (("max_marginal_attrs", max_marginal_attrs), ("query_cap", query_cap)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{nm} must be an integer >= 1, got {v!r}")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 0):
            raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
        self.max_marginal_attrs, self.query_cap, self.steps = max_marginal_attrs, query_cap, steps
        # AIM's preset loop: short warm-started refits (the final fit is the generator's)
        self.loop = loop if loop is not None else PGM(iters=250, tol=1e-4, method="md", cold_method="precond")

    # ------------------------------------------------------------------------ interface
    def supporting_cliques(self, domain: Domain) -> list[Clique]:
        """Every marginal of at most ``max_marginal_attrs`` attributes and ``max_clique_size`` cells."""
        k = min(self.max_marginal_attrs, len(domain))
        return [c for n in range(1, k + 1) for c in itertools.combinations(domain.attrs, n)
                if domain.size(c) <= self.max_clique_size]

    def run(self, session, ctx: Context) -> Selection:
        dom = session.domain
        attrs, d = list(dom.attrs), len(dom)
        rho, nb = ctx.rho, session.neighbour
        l2 = marginal_l2(nb)
        # public randomness (first attribute of each network, candidate draws)
        prng = np.random.default_rng(session.public_seeds(1)[0])

        # 1. the record count
        if ctx.total is not None:
            n_hat = float(ctx.total)
        else:
            exact = session.answers([(attrs[0],)])[0].sum()
            rho_n = self.count_share * rho
            n_hat = float(session.gaussian(np.array([exact]), even_sigma(rho_n, 1, count_l2(nb)), count_l2(nb),
                                           what="PrivMRF record count", counts=True)[0])
        n_hat = max(n_hat, 1.0)

        # 2–3. noisy pair scores and the attribute graph
        tvd = np.zeros((d, d))
        if d > 1:
            pairs = list(itertools.combinations(attrs, 2))
            tabs = session.answers(pairs)
            s = np.array([dependence_score(t.reshape(dom[a], dom[b])) for (a, b), t in zip(pairs, tabs)])
            session.forget()
            delta_s = dependence_sensitivity(nb)
            rho_g = self.graph_share * rho - session.rho_spent
            sig = noisy_score_sigma(rho_g, len(pairs), delta_s)
            noisy = session.gaussian(s, sig, delta_s * math.sqrt(len(pairs)), what="PrivMRF pair scores")
            iu = np.triu_indices(d, 1)
            tvd[iu] = noisy / (2.0 * n_hat)
            tvd = tvd + tvd.T
            ctx.progress("PrivMRF: pair scores released")
        cliques = self.graph(dom, tvd)
        ctx.progress(f"PrivMRF: attribute graph with {len(cliques)} maximal cliques")

        # 4-5. initial marginals and the refinement pool, sized with the noise they will get
        n_plan = int(self.refine_ratio * d)
        rho_scores = self.score_share * rho
        init, pool_w, n_refine, steps, sigma, rho_scores = self._plan(
            dom, cliques, tvd, n_hat, n_plan, rho_scores, rho - session.rho_spent, l2, prng, ctx)
        for c in init:
            session.measure(c, sigma, what=f"PrivMRF initial {','.join(c)}")
        ctx.progress(f"PrivMRF: {len(init)} initial marginals measured")
        model = self.loop.generate(session.measurements, dom, zeros=ctx.zeros, total=ctx.total)

        pool = dict(pool_w)
        quotas = [n_refine // steps + (i < n_refine % steps) for i in range(steps)] if steps else []
        rho_s_left = rho_scores
        for step, quota in enumerate(quotas):
            model = self._round(session, ctx, model, pool, quota, step, steps, rho_s_left / (steps - step), sigma, prng)
            rho_s_left = rho_scores - sum(r.get("rho_scores", 0.0) for r in session.rounds)

        # what a last round could not place (nothing fitted) re-measures the 1-way marginals
        left = rho - session.rho_spent
        if left > 1e-12 * rho:
            s1 = even_sigma(left, d, l2)
            for a in attrs:
                session.measure((a,), s1, what=f"PrivMRF leftover 1-way {a}")
        ctx.progress("PrivMRF: done")
        return Selection(list(session.measurements), dom, model=model,
                         extra={"graph": [list(c) for c in cliques], "initial": [list(c) for c in init],
                                "record_count": n_hat, "sigma": sigma})

    # ------------------------------------------------------------------------ pieces
    def _plan(self, dom: Domain, cliques: list[Clique], tvd: np.ndarray, n_hat: float, n_plan: int,
              rho_scores: float, rho_left: float, l2: float, prng: np.random.Generator, ctx: Context):
        """Initial marginals, refinement pool, its size, the rounds, σ and the score reserve kept (0
        without rounds) (steps 4-5; post-processing).

        The θ-usefulness limit depends on σ, which depends on how many marginals are measured. For each
        count ``t`` from the plan's d + ⌊refine_ratio·d⌋ down, size the limit at ``t`` marginals' σ and
        build the initial families and the pool under it, measuring at most ``t`` in all; keep the
        plan that measures the most (the first found on ties). Every marginal is then θ-useful at the
        σ it gets, which is never above the σ of ``t`` marginals. Where the plan's own count fits this
        changes nothing; where it does not, the reference re-sizes with its final σ instead. Without it
        a limit just under a common table size (33×33 cells on salary under replace-one at ε = 1) left
        the pool empty and the budget on 7 marginals, where 15 fit at t = 15."""
        d = len(dom)
        if n_plan == 0 or self.steps == 0:  # no refinement: nothing reserved for its scores
            n_plan, rho_scores = 0, 0.0
        start = prng.bit_generator.state
        kept, best = None, 0
        for target in range(d + n_plan, 0, -1):
            if target <= best:  # no smaller count can measure more
                break
            prng.bit_generator.state = start
            limit = self._limit(n_hat, even_sigma(rho_left - rho_scores, target, l2))
            init = self.initial(dom, cliques, tvd, limit, prng, ctx)
            if len(init) > target:
                continue
            measured_init = [set(c) for c in init]
            pool_w = {c: w for c, w in self._candidates(dom, cliques, limit).items()
                      if not any(set(c) <= m for m in measured_init)}
            n_refine = min(n_plan, len(pool_w), target - len(init))
            if len(init) + n_refine > best:
                kept, best = (init, pool_w, n_refine, prng.bit_generator.state), len(init) + n_refine
        if kept is None:
            raise ValueError("PrivMRF: no marginal fits max_clique_size / max_model_size (with the structural zeros)")
        init, pool_w, n_refine, after = kept
        prng.bit_generator.state = after
        steps = min(self.steps if self.steps is not None else min(d // 2, 8), n_refine)
        if steps == 0:
            n_refine, rho_scores = 0, 0.0
        sigma = even_sigma(rho_left - rho_scores, len(init) + n_refine, l2)
        return init, pool_w, n_refine, steps, sigma, rho_scores

    def _limit(self, n_hat: float, sigma: float) -> float:
        """θ-usefulness: the most cells a marginal of two or more attributes may have."""
        return n_hat / (self.theta * sigma * SQRT_2_OVER_PI)

    def fits(self, dom: Domain, cliques: list[Clique]) -> bool:
        """Whether the junction tree over ``cliques`` keeps its largest clique within
        ``max_clique_size`` cells and its total within ``max_model_size`` MB (public)."""
        big, total = largest_clique_cells(dom, cliques)
        return big <= self.max_clique_size and 8.0 * total / MB <= self.max_model_size

    def graph(self, dom: Domain, tvd: np.ndarray) -> list[Clique]:
        """Maximal cliques of the attribute graph grown greedily on the noisy TVDs (step 3; public).

        From the empty graph, each step adds the non-edge ``ij`` whose graph ``state + ij``, once
        triangulated by the junction tree's greedy elimination (:func:`maximal_masks`), fits both
        caps and scores highest (the first in ``np.triu_indices`` order on ties). The search is
        :class:`_GraphSearch`; its result is the plain one's (``tests/test_privmrf_graph.py``)."""
        state = _GraphSearch(dom, np.asarray(tvd), self.max_clique_size, self.max_graph_cells,
                             self.size_penalty).run()
        return [tuple(a for k, a in enumerate(dom.attrs) if m >> k & 1) for m in state]

    def initial(self, dom: Domain, cliques: list[Clique], tvd: np.ndarray, limit: float,
                prng: np.random.Generator, ctx: Context) -> list[Clique]:
        """The initial marginals (step 4; post-processing of the noisy TVDs)."""
        idx = {a: i for i, a in enumerate(dom.attrs)}
        best: dict[str, tuple[float, Clique]] = {}
        families: list[Clique] = []
        for clique in cliques:
            for x, fam, score in self._network(dom, list(clique), tvd, idx, limit, prng):
                families.append(fam)
                if x not in best or best[x][0] < score:
                    best[x] = (score, fam)
        chosen: list[Clique] = []

        def add(c: Clique) -> None:
            c = dom.canonical(c)
            if any(set(c) <= set(o) for o in chosen) or not self.fits(dom, chosen + [c] + [z.attrs for z in ctx.zeros]):
                return
            chosen[:] = [o for o in chosen if not set(o) < set(c)] + [c]

        for x in dom.attrs:
            if x in best:
                add(best[x][1])
        for a in dom.attrs:
            if not any(a in c for c in chosen):
                add((a,))
        rest = list(dict.fromkeys(dom.canonical(f) for f in families))
        for k in prng.permutation(len(rest)):
            if len(chosen) >= len(dom):
                break
            add(rest[k])
        return chosen

    def _network(self, dom: Domain, clique: list[str], tvd: np.ndarray, idx: dict, limit: float,
                 prng: np.random.Generator) -> list[tuple[str, Clique, float]]:
        """Greedy Bayesian network inside one maximal clique: (attribute, its family, score) per step."""
        remaining = list(clique)
        placed = [remaining.pop(int(prng.integers(len(remaining))))]
        out = []
        while remaining:
            top = None
            for x in remaining:
                for par in _maximal_parent_sets(dom, placed, limit / dom[x], self.max_marginal_attrs - 1):
                    if not par or dom.size(par) * dom[x] >= limit:
                        continue
                    num = sum(tvd[idx[x], idx[p]] for p in par)
                    den = len(par) + sum(tvd[idx[p], idx[q]] for p, q in itertools.combinations(par, 2))
                    score = num / math.sqrt(max(den, 1.0))
                    if top is None or score > top[0]:
                        top = (score, x, par)
            if top is None:  # only the empty parent set fits: the reference stops here
                break
            score, x, par = top
            out.append((x, tuple(par) + (x,), score))
            remaining.remove(x)
            placed.append(x)
        return out

    def _candidates(self, dom: Domain, cliques: list[Clique], limit: float) -> dict[Clique, float]:
        """Refinement candidates and their weights (step 5; public)."""
        weights: dict[Clique, float] = {}
        for clique in cliques:
            subs = _subsets_within(dom, clique, min(self.max_marginal_attrs, len(clique) - 1), limit)
            for c in subs:
                c = dom.canonical(c)
                weights[c] = weights.get(c, 0.0) + len(clique) ** 2 / len(subs)
        return weights

    def _round(self, session, ctx: Context, model, pool: dict[Clique, float], quota: int, step: int, steps: int,
               rho_s: float, sigma: float, prng: np.random.Generator):
        dom = session.domain
        cands = list(pool)
        if not cands:
            return model
        w = np.array([pool[c] for c in cands])
        k = min(self.query_cap, len(cands))
        query = [cands[i] for i in prng.choice(len(cands), size=k, replace=False, p=w / w.sum())]
        answers = session.answers(query)
        scores = np.array([np.abs(a - model.project(r)).sum() for r, a in zip(query, answers)])
        session.forget()
        delta = score_sensitivity(session.neighbour, 1.0)
        sig_q = noisy_score_sigma(rho_s, k, delta)
        noisy = session.gaussian(scores, sig_q, delta * math.sqrt(k), what=f"PrivMRF round {step + 1} scores")
        order = np.argsort(-noisy, kind="stable")
        zeros = [z.attrs for z in ctx.zeros]
        measured = [m.attrs for m in session.measurements]
        picks: list[Clique] = []
        for i in order:
            if len(picks) == quota:
                break
            r = query[i]
            if self.fits(dom, measured + picks + [r] + zeros):
                picks.append(r)
        last = step == steps - 1
        entry = {"round": step + 1, "selected": [list(r) for r in picks], "source": "private", "queried": k,
                 "score_sigma": sig_q, "rho_scores": rho_s}
        if picks:
            # the last round takes all the marginal budget left (what earlier rounds could not place)
            s = even_sigma(ctx.rho - session.rho_spent, len(picks), marginal_l2(session.neighbour)) if last else sigma
            for r in picks:
                session.measure(r, s, what=f"PrivMRF round {step + 1} {','.join(r)}")
                del pool[r]
            entry["sigma"] = s
        not_taken = [query[i] for i in order if query[i] not in picks]
        for r in not_taken[len(not_taken) // 2:]:
            pool[r] /= 2.0
        if picks:
            model = self.loop.generate(session.measurements, dom, zeros=ctx.zeros, total=ctx.total, warm=model)
        entry["rho_used"] = session.rho_spent
        session.rounds.append(entry)
        ctx.progress(f"PrivMRF round {step + 1}: {len(picks)} marginals")
        return model


# ---------------------------------------------------------------------------- the attribute graph search
#
# PrivMRFSelector.graph adds, each step, the non-edge ij whose graph state + ij, triangulated by the
# junction tree's greedy elimination (junction_tree._eliminate: repeatedly eliminate the vertex
# whose union of cliques has the fewest cells, the lowest index on ties), fits both caps and scores
# highest. Done plainly that is d²/2 eliminations of d vertices a step (86 columns: ~4 s a step,
# ~10 min a graph). What the search below relies on, each point exact (tests/test_privmrf_graph.py
# checks the whole against the plain search):
#
# * Greedy elimination splits over connected components: eliminating a vertex changes only its
#   neighbours' unions, and the overall pick restricted to one component is that component's own
#   pick. So the maximal cliques of state + ij are those of the other components with those of
#   comp(i) ∪ comp(j) + ij, the caps and the score are totals over components, and a pair's result
#   holds until comp(i) or comp(j) changes.
# * The state graph is chordal and its own greedy elimination adds nothing (the search keeps the
#   triangulation's maximal cliques, and greedy elimination of its own result repeats itself). With
#   ij added, the elimination goes as without it until i or j is eliminated (only their unions
#   differ, each by the other: their costs never fall, every other pick stays the cheapest and
#   first). From there a pair's run is the base elimination with the vertices whose union differs
#   kept aside (_Trace.pair): the cheapest of the others is the base's own pick, so a step costs
#   the vertices aside, and the run has met the base (the rest is the base's) when none is left.
# * The elimination clique of v (v and its neighbours left) is a maximal clique unless the clique
#   of some u eliminated earlier is exactly it plus u, so a run knows which of its cliques so far
#   are maximal: it stops at a clique above the clique cap or once the maximal ones pass the cells
#   the other components leave (kept as a lower bound, looked at again if those ever leave more).
# * Totals over components add up in another order than the plain sum over the adjacency matrix, so
#   they only shortlist: every fitting pair within a margin far above rounding of the best is scored
#   the plain way (the same triangulation, adjacency and sums) and the first best of those in pair
#   order wins, as in the plain search.

_CELLS_CACHE = 1 << 20  # cell counts kept per graph search


def _bit_list(m: int) -> list[int]:
    """Indices of the bits set in ``m``, ascending."""
    out = []
    while m:
        low = m & -m
        out.append(low.bit_length() - 1)
        m ^= low
    return out


class _Kit:
    """Cached helpers of one graph search: ``cells(mask)``, ``bits(mask)`` (the indices set,
    ascending) and ``rows`` (the TVDs as lists)."""

    __slots__ = ("cells", "bits", "rows")

    def __init__(self, sizes: tuple[int, ...], rows: list[list[float]]):
        cache: dict[int, int] = {}
        bit_cache: dict[int, list[int]] = {}
        get, bget = cache.get, bit_cache.get

        def bits(m: int) -> list[int]:
            out = bget(m)
            if out is None:
                if len(bit_cache) >= _CELLS_CACHE:
                    bit_cache.clear()
                out = bit_cache[m] = _bit_list(m)
            return out

        def cells(m: int) -> int:
            c = get(m)
            if c is None:
                if len(cache) >= _CELLS_CACHE:
                    cache.clear()
                c = 1
                for b in bits(m):
                    c *= sizes[b]
                cache[m] = c
            return c

        self.cells, self.bits, self.rows = cells, bits, rows


class _Trace:
    """Greedy elimination of the graph with ``cliques`` (bit masks) on the vertices ``verts``, as
    :func:`maximal_masks` does it (the key ``cells << shift | vertex``: ``min`` of the keys is the
    first of the cheapest), recorded step by step for runs of the graph with one more edge
    (:meth:`pair`): the unions before each step (0 once eliminated) and the vertices eliminated
    before it; per step the vertex, its key, its clique with that clique's cells and edge sum of
    ``rows``, and the first and last steps whose clique is this one plus their vertex (this one is
    not maximal after them); sums and maxima of those up to each step and from it."""

    __slots__ = ("n", "shift", "pos", "order", "vbit", "elim", "ecells", "es", "bkey", "snap_u", "done",
                 "pre_e", "suf_e", "pre_max", "suf_max", "pre_msum", "first", "wmin", "wmax")

    def __init__(self, verts: list[int], cliques: list[int], d: int, kit: _Kit):
        cells, bits, rows = kit.cells, kit.bits, kit.rows
        sh = self.shift = d.bit_length()
        low = (1 << sh) - 1
        U = [0] * d
        for c in cliques:
            for b in bits(c):
                U[b] |= c
        K = [_GONE] * d
        for v in verts:
            K[v] = (cells(U[v]) if U[v] else 1) << sh | v
        n = self.n = len(verts)
        self.pos: dict[int, int] = {}
        vbit: list[int] = []
        elim: list[int] = []
        cs: list[int] = []
        es: list[float] = []
        self.snap_u: list[list[int]] = []
        self.done = [0]
        dm = 0
        for s in range(n):
            self.snap_u.append(U[:])
            key = min(K)
            v = key & low
            bit = 1 << v
            u = U[v] | bit
            self.pos[v] = s
            vbit.append(bit)
            elim.append(u)
            cs.append(key >> sh)
            K[v] = _GONE
            U[v] = 0
            rest, keep = u ^ bit, ~bit
            row, e = rows[v], 0.0
            for b in bits(rest):
                U[b] = nu = (U[b] & keep) | rest
                K[b] = cells(nu) << sh | b
                e += row[b]
            es.append(e)
            dm |= bit
            self.done.append(dm)
        self.snap_u.append(U[:])
        self.vbit, self.elim, self.ecells, self.es = vbit, elim, cs, es
        self.order = [b.bit_length() - 1 for b in vbit]
        self.bkey = [c << sh | v for c, v in zip(cs, self.order)]  # each pick's key
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for s, (b, c) in enumerate(zip(vbit, elim)):
            first.setdefault(c ^ b, s)
            last[c ^ b] = s
        self.first = first
        self.wmin = [first.get(c, n) for c in elim]
        self.wmax = [last.get(c, -1) for c in elim]
        self.pre_e, self.pre_max, self.pre_msum = [0.0], [0], [0]
        for s in range(n):
            self.pre_e.append(self.pre_e[-1] + es[s])
            self.pre_max.append(max(self.pre_max[-1], cs[s]))
            self.pre_msum.append(self.pre_msum[-1] + (cs[s] if self.wmin[s] == n else 0))
        self.suf_e, self.suf_max = [0.0] * (n + 1), [0] * (n + 1)
        for s in range(n - 1, -1, -1):
            self.suf_e[s] = self.suf_e[s + 1] + es[s]
            self.suf_max[s] = max(self.suf_max[s + 1], cs[s])

    def pair(self, i: int, j: int, cap: float, limit: float, kit: _Kit):
        """The elimination of this graph plus the edge ``ij``, from step ``t0`` = min(pos i, pos j):

        * ``(CAP, t0, picks, early)`` where a clique has more than ``cap`` cells;
        * ``(OVER, t0, picks, early, lower bound)`` where its maximal cliques have more than
          ``limit`` cells in all;
        * ``(FITS, t0, end, cells of the largest clique, cells of the maximal cliques, edge sum of
          rows over the triangulated graph)``, ``end`` the step it met this elimination again.

        ``picks``: the vertices the run eliminated before it stopped; ``early``: whether it stopped
        before meeting this elimination (``_GraphSearch.accept`` keeps such results).

        The run is this elimination at step ``sb`` with the vertices of ``over`` changed (their
        union, 0 once eliminated); every other vertex is as here, so the cheapest of them is this
        elimination's pick at ``sb`` unless that one is in ``over`` (then ``sb`` moves on, taking
        into ``over`` the vertices its step changes). So a step costs the size of ``over``, not
        that of the clique, and the run has met this elimination when ``over`` is empty."""
        n = self.n
        cells, bits = kit.cells, kit.bits
        t0 = min(self.pos[i], self.pos[j])
        if self.pre_max[t0] > cap:
            return CAP, t0, 0, False
        bi, bj = 1 << i, 1 << j
        if self.snap_u[t0][i] & bj:  # ij is an edge by then: the elimination is this one
            if self.pre_max[n] > cap:
                return CAP, t0, 0, False
            if self.pre_msum[n] > limit:
                return OVER, t0, 0, False, self.pre_msum[n]
            return FITS, -1, n, self.pre_max[n], self.pre_msum[n], self.pre_e[n]
        lb = self.pre_msum[t0]  # cells of the maximal cliques so far
        if lb > limit:
            return OVER, t0, 0, True, lb
        sh = self.shift
        low = (1 << sh) - 1
        order, vbit, elim, es, ecells, bkey = self.order, self.vbit, self.elim, self.es, self.ecells, self.bkey
        snap_u, done, first = self.snap_u, self.done, self.first
        over = {i: snap_u[t0][i] | bj, j: snap_u[t0][j] | bi}
        okey = {i: cells(over[i]) << sh | i, j: cells(over[j]) << sh | j}  # keys of those left
        om = bi | bj  # the vertices of over
        inner: set[int] = set()  # this run's cliques less their vertex
        seg: list[tuple[int, int]] = []  # (vertex, clique less it) of the steps not the base's
        e, big, dm, sb = 0.0, 0, done[t0], t0
        while True:
            while sb < n and om >> order[sb] & 1:  # the base's pick is changed here: move past it
                snap = snap_u[sb]
                for b in bits(elim[sb] ^ vbit[sb]):
                    if not om >> b & 1:
                        over[b] = snap[b]
                        okey[b] = cells(snap[b]) << sh | b
                        om |= 1 << b
                sb += 1
                snap = snap_u[sb]
                for b in bits(elim[sb - 1]):  # its vertex and neighbours: as the base's now?
                    if over.get(b, -1) == snap[b]:
                        del over[b]
                        okey.pop(b, None)
                        om ^= 1 << b
            if not om:
                break
            dkey = min(okey.values()) if okey else _GONE
            touch = 0
            while sb < n and bkey[sb] < dkey and not om >> order[sb] & 1:  # the base's, cheaper
                u = elim[sb]
                c = ecells[sb]
                if c > cap:
                    return CAP, t0, dm & ~done[t0], True
                if c > big:
                    big = c
                bit = vbit[sb]
                dm |= bit
                if u not in inner and first.get(u, n) >= t0:  # maximal
                    lb += c
                    if lb > limit:
                        return OVER, t0, dm & ~done[t0], True, lb
                inner.add(u ^ bit)
                e += es[sb]
                sb += 1
                touch = u & om
                if touch:  # its neighbours in over: their unions change as the base's did
                    break
            if touch:
                rest, keep = u ^ bit, ~bit
                changed = _bit_list(touch)
                for b in changed:
                    over[b] = nu = (over[b] & keep) | rest
                    okey[b] = cells(nu) << sh | b
            elif sb < n and om >> order[sb] & 1:
                continue
            else:  # a changed vertex is the cheapest
                key = dkey
                v = key & low
                bit = 1 << v
                u = over[v] | bit
                c = key >> sh
                if c > cap:
                    return CAP, t0, dm & ~done[t0], True
                if c > big:
                    big = c
                dm |= bit
                if u not in inner and first.get(u, n) >= t0:  # maximal
                    lb += c
                    if lb > limit:
                        return OVER, t0, dm & ~done[t0], True, lb
                rest, keep = u ^ bit, ~bit
                inner.add(rest)
                seg.append((v, rest))
                over[v] = 0
                del okey[v]
                snap = snap_u[sb]
                changed = bits(rest)
                for b in changed:
                    over[b] = nu = (over.get(b, snap[b]) & keep) | rest
                    okey[b] = cells(nu) << sh | b
                om |= rest
                changed = changed + [v]
            snap = snap_u[sb]
            for b in changed:
                if over[b] == snap[b]:
                    del over[b]
                    okey.pop(b, None)
                    om ^= 1 << b
        end = sb
        if self.suf_max[end] > cap:
            return CAP, t0, 0, False
        elim, wmin, wmax, ecells = self.elim, self.wmin, self.wmax, self.ecells
        for s in range(end, n):  # maximal unless after a step of the base's outside this run's
            if wmin[s] >= t0 and wmax[s] < end and elim[s] not in inner:
                lb += ecells[s]
        if lb > limit:
            return OVER, t0, 0, False, lb
        for v, rest in seg:
            row = kit.rows[v]
            e += sum([row[b] for b in bits(rest)])
        return FITS, t0, end, max(self.pre_max[t0], big, self.suf_max[end]), lb, self.pre_e[t0] + e + self.suf_e[end]


_GONE = 1 << 4096  # the key of an eliminated vertex (above every other)
CAP, OVER, FITS = 0, 1, 2  # what _Trace.pair found


class _GraphSearch:
    """PrivMRF's greedy attribute graph (see the notes above): per pair ``ij`` (``np.triu_indices``
    order) the triangulation of comp(i) ∪ comp(j) + ij, kept until one of the two changes, with
    component totals that shortlist the pairs scored the plain way."""

    def __init__(self, dom: Domain, tvd: np.ndarray, cap_c: float, cap_g: float, penalty: float):
        d = self.d = len(dom)
        self.dom = dom
        self.tvd_plain = tvd  # as the plain score reads it
        t64 = self.t64 = np.asarray(tvd, dtype=float)
        self.rows = t64.tolist()
        self.finite = bool(np.isfinite(t64).all())
        self.pen, self.cap_c, self.cap_g = penalty, cap_c, cap_g
        self.state = [1 << v for v in range(d)]
        sizes = dom.shape
        self.kit = _Kit(sizes, self.rows)
        self.cells = self.kit.cells
        self.I, self.J = np.triu_indices(d, 1)
        self.pairs = list(zip(self.I.tolist(), self.J.tolist()))
        P = len(self.pairs)
        self.scale = float(np.abs(t64[self.I, self.J]).sum()) if self.finite else 0.0
        # integer totals: x <= cap ⟺ x <= ⌊cap⌋; int64 where every total fits (else Python ints)
        self.int_g = math.floor(cap_g) if math.isfinite(cap_g) else None
        small = all(math.isfinite(c) and c < 2**60 for c in (cap_c, cap_g)) and sum(sizes) < 2**60
        self.dtype = np.int64 if small else object
        self.cmp_c = math.floor(cap_c) if small else cap_c
        self.cmp_g = self.int_g if small else cap_g
        # components, by their smallest vertex
        self.label = np.arange(d)
        self.members = {v: [v] for v in range(d)}
        self.comp_cliques = {v: [1 << v] for v in range(d)}
        self.comp_cells = {v: int(sizes[v]) for v in range(d)}
        self.comp_max = {v: int(sizes[v]) for v in range(d)}
        self.comp_edges = {v: 0.0 for v in range(d)}
        # per pair: up to date, fits, stopped on the clique cap, on the graph cap (with a lower
        # bound on its cells), largest clique, cells, edge sum
        self.fresh = np.zeros(P, dtype=bool)
        self.fits = np.zeros(P, dtype=bool)
        self.capped = np.zeros(P, dtype=bool)
        self.over = np.zeros(P, dtype=bool)
        self.lower = np.zeros(P, dtype=self.dtype)
        self.mmax = np.zeros(P, dtype=self.dtype)
        self.msum = np.zeros(P, dtype=self.dtype)
        self.medge = np.zeros(P)
        # each pair's last run: its first step, where it met the base (fits) or the vertices it
        # eliminated before it stopped (capped, over) and whether that was before meeting the base
        self.run_t0 = np.zeros(P, dtype=np.int64)
        self.run_end = np.zeros(P, dtype=np.int64)
        self.run_picks: list[int] = [0] * P
        self.early = np.zeros(P, dtype=bool)
        self.adj = np.zeros((d, d), dtype=bool)
        self.adj_pair = np.zeros(P, dtype=bool)

    def run(self) -> list[int]:
        """The final graph's maximal cliques (bit masks, in :func:`maximal_masks`' order)."""
        if self.d > 1:
            while (pick := self.best()) is not None:
                self.accept(*pick)
        return self.state

    def _refresh(self) -> None:
        """Triangulate comp(i) ∪ comp(j) + ij for every non-edge not up to date."""
        stale = np.flatnonzero(~self.fresh & ~self.adj_pair)
        if not stale.size:
            return
        label = self.label.tolist()
        cells_all = sum(self.comp_cells.values())
        traces: dict[tuple[int, int], _Trace] = {}
        kit, cap_c = self.kit, self.cap_c
        big = 2**60 if self.dtype is np.int64 else None
        for p in stale.tolist():
            i, j = self.pairs[p]
            li, lj = label[i], label[j]
            key = (li, lj) if li <= lj else (lj, li)
            tr = traces.get(key)
            if tr is None:
                if li == lj:
                    verts, cl = self.members[li], self.comp_cliques[li]
                else:
                    verts = sorted(self.members[li] + self.members[lj])
                    cl = self.comp_cliques[li] + self.comp_cliques[lj]
                tr = traces[key] = _Trace(verts, cl, self.d, kit)
            others = cells_all - self.comp_cells[li] - (self.comp_cells[lj] if lj != li else 0)
            limit = self.int_g - others if self.int_g is not None else math.inf
            res = tr.pair(i, j, cap_c, limit, kit)
            self.fits[p] = self.over[p] = self.capped[p] = False
            self.run_t0[p] = res[1]
            if res[0] == FITS:
                self.fits[p] = True
                self.run_end[p] = res[2]
                self.mmax[p], self.msum[p], self.medge[p] = res[3], res[4], res[5]
                continue
            self.run_picks[p], self.early[p] = res[2], res[3]
            if res[0] == CAP:
                self.capped[p] = True
            else:
                self.over[p] = True
                self.lower[p] = res[4] if big is None else min(res[4], big)
        self.fresh[stale] = True

    def best(self):
        """The pair the plain search adds, as (pair, maximal cliques, adjacency); None if none fits."""
        labels = list(self.members)
        cc = np.zeros(self.d, dtype=self.dtype)
        cm = np.zeros(self.d, dtype=self.dtype)
        ce = np.zeros(self.d)
        for lab in labels:
            cc[lab], cm[lab], ce[lab] = self.comp_cells[lab], self.comp_max[lab], self.comp_edges[lab]
        cells_all = sum(self.comp_cells[lab] for lab in labels)
        ci, cj = self.label[self.I], self.label[self.J]
        same = ci == cj
        zero = np.zeros(1, dtype=self.dtype)[0]
        others = cells_all - cc[ci] - np.where(same, zero, cc[cj])
        while True:
            self._refresh()
            # stopped on the graph cap where the other components left fewer cells than now: again
            again = self.over & ~self.adj_pair & (others + self.lower <= self.cmp_g)
            if not again.any():
                break
            self.fresh[again] = False
        cand = self.fits & ~self.adj_pair
        if not cand.any():
            return None
        total = others + self.msum
        # the largest clique of the components other than comp(i), comp(j): one of the top three
        top = sorted(labels, key=lambda lab: -self.comp_max[lab])[:3]
        top += [-1] * (3 - len(top))
        tmax = [self.comp_max[lab] if lab >= 0 else 0 for lab in top]
        other = np.full(len(ci), tmax[2], dtype=self.dtype)
        for lab, m in zip(top[1::-1], tmax[1::-1]):
            other = np.where((ci != lab) & (cj != lab), np.array(m, dtype=self.dtype), other)
        ok = cand & (np.maximum(other, self.mmax) <= self.cmp_c) & (total <= self.cmp_g)
        idx = np.flatnonzero(ok)
        if not idx.size:
            return None
        pen = self.pen * total[idx].astype(float)
        approx = (sum(self.comp_edges[lab] for lab in labels) - ce[ci[idx]]
                  - np.where(same[idx], 0.0, ce[cj[idx]]) + self.medge[idx]) - pen
        if self.finite and np.isfinite(approx).all():
            margin = 1e-9 * (self.scale + float(np.abs(pen).max()))
            idx = idx[approx >= approx.max() - margin]
        # the plain score of each pair shortlisted, in pair order
        d, dom, bits = self.d, self.dom, [1 << v for v in range(self.d)]
        best = None
        for p in idx.tolist():
            i, j = self.pairs[p]
            cand_ = maximal_masks(dom, self.state + [bits[i] | bits[j]])
            cells = [self.cells(m) for m in cand_]
            if max(cells) > self.cap_c or sum(cells) > self.cap_g:
                continue
            a = np.zeros((d, d), dtype=bool)
            for m in cand_:
                ix = self.kit.bits(m)
                a[np.ix_(ix, ix)] = True
            score = self.tvd_plain[np.triu(a, 1)].sum() - self.pen * sum(cells)
            if best is None or score > best[0]:
                best = (score, p, cand_, a)
        return None if best is None else best[1:]

    def accept(self, p: int, state: list[int], a: np.ndarray) -> None:
        """Take pair ``p``: ``state`` is the new graph's maximal cliques, ``a`` its adjacency."""
        i, j = self.pairs[p]
        li, lj = int(self.label[i]), int(self.label[j])
        new = min(li, lj)
        if li != lj:
            old = max(li, lj)
            members = sorted(self.members[li] + self.members[lj])
            for dct in (self.members, self.comp_cliques, self.comp_cells, self.comp_max, self.comp_edges):
                del dct[old]
        else:
            members = self.members[li]
        mask = 0
        for v in members:
            mask |= 1 << v
        cl = [m for m in state if m & mask]
        self.members[new] = members
        self.comp_cliques[new] = cl
        cs = [self.cells(m) for m in cl]
        self.comp_cells[new], self.comp_max[new] = sum(cs), max(cs)
        sub = np.ix_(members, members)
        self.comp_edges[new] = float(self.t64[sub][np.triu(a[sub], 1)].sum())
        self.label[members] = new
        in_comp = (self.label[self.I] == new) | (self.label[self.J] == new)
        keep = np.zeros(len(self.pairs), dtype=bool)
        if li == lj and self.run_t0[p] >= 0:
            keep = self._still_stopped(p, in_comp & (self.label[self.I] == self.label[self.J]), a)
        self.state, self.adj = state, a
        self.adj_pair = a[self.I, self.J]
        self.fresh[in_comp & ~keep] = False

    def _still_stopped(self, p: int, within: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Pairs inside the component of pair ``p``, just added, whose run stops as before.

        The component's new elimination is the run of ``p`` (greedy elimination of its own
        triangulation repeats itself), so it is the old one before that run's first step t
        and from the step e where it met the old one, and before t the new graph differs only by
        edges between the vertices R they touch, whose unions are only larger. A run of another pair
        from its step t0 <= t that eliminated no vertex of R before stopping eliminates the same
        vertices with the same cliques again (every other cost as before, those of R no smaller)
        and stops at the same step, on the clique cap (every cost then no smaller) or on the graph
        cap (same cliques, maximal by the same earlier ones, the other components unchanged). From
        t0 >= e the run starts from the very same state: one stopped on the clique cap stops again."""
        t, e = int(self.run_t0[p]), int(self.run_end[p])
        touched = 0
        for v in np.flatnonzero((a != self.adj).any(axis=1)).tolist():
            touched |= 1 << v
        keep = np.zeros(len(self.pairs), dtype=bool)
        adj_pair = a[self.I, self.J]
        t0, picks = self.run_t0, self.run_picks
        for q in np.flatnonzero(within & self.early & (self.capped | self.over) & ~adj_pair).tolist():
            if (t0[q] <= t and not picks[q] & touched) or (self.capped[q] and t0[q] >= e):
                keep[q] = True
        return keep
