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
from ..generate.pgm.junction_tree import MB, largest_clique_cells
from ..privacy import count_l2, dependence_sensitivity, even_sigma, marginal_l2, score_sensitivity
from .base import Context, Selection, check_fraction, check_positive
from .privbayes import dependence_score
from .privmrf_graph import GraphSearch

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
        self.max_clique_size = check_positive("max_clique_size", max_clique_size)
        self.max_graph_cells = check_positive("max_graph_cells", max_graph_cells)
        self.max_model_size = check_positive("max_model_size", max_model_size)
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
        triangulated by the junction tree's greedy elimination (``junction_tree.maximal_masks``),
        fits both caps and scores highest (the first in ``np.triu_indices`` order on ties). The
        search is ``privmrf_graph.GraphSearch``; its result is the plain one's
        (``tests/test_privmrf_graph.py``)."""
        state = GraphSearch(dom, np.asarray(tvd), self.max_clique_size, self.max_graph_cells,
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
