"""PrivBayes's selection (Zhang, Cormode, Procopiuc, Srivastava, Xiao 2017): a degree-k Bayesian
network chosen greedily with the exponential mechanism, then its conditional marginals measured.

The original releases the network's conditionals with Laplace noise and samples them ancestrally;
here the marginals ``Π ∪ {X}`` of the network are measured with the Gaussian mechanism (zCDP) and
any generator (by default Private-PGM) fits a model to them.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..core import Domain
from ..generate.pgm.junction_tree import MB, model_size_mb
from ..privacy import dependence_sensitivity, even_epsilon, even_sigma, marginal_l2
from .base import Context, Selection, check_fraction, check_positive

Clique = tuple[str, ...]


def dependence_score(counts: np.ndarray) -> float:
    """PrivBayes's score R (paper §4.3, for non-binary domains) in record counts, doubled:
    ``S = ‖C − a bᵀ/N‖₁`` for the joint counts ``C`` of X (rows) and the parent set Π (columns),
    ``a``, ``b`` their margins and ``N`` the total; ``S = 2N·R``. 0 means X independent of Π; at
    most 2N. Private (exact counts): it may leave a selector only through the exponential mechanism.
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 2:
        raise ValueError("counts must be a 2-d table (X values × parent configurations)")
    n = c.sum()
    if n <= 0:
        return 0.0
    return float(np.abs(c - np.outer(c.sum(axis=1), c.sum(axis=0)) / n).sum())


class PrivBayesSelector:
    """A Bayesian network of degree ≤ ``degree`` (PrivBayes's GreedyBayes), then its marginals.

    Structure (share ``select_share`` of ``ctx.rho``, even over the d−1 steps): the first attribute
    is drawn uniformly at random (data-independent, as in the paper; from a generator seeded by one
    draw of the session's generator). At each next step the candidates are every attribute X not
    yet in the network with every parent set Π of the attributes already in it, ``|Π| ≤ degree``
    (the empty set included); one pair is chosen with the exponential mechanism on the score
    ``dependence_score(X; Π) − theta·σ̄·|dom(Π ∪ X)|`` (record counts; sensitivity
    :func:`dependence_sensitivity`, the penalty being public).

    The score is the paper's R, its choice for non-binary attributes: mutual information's
    sensitivity grows like log(N)/N (N·I's like log N), which needs a public N; R's does not, so it
    serves both neighbour relations. The penalty is the paper's θ-usefulness (a noisy marginal is
    useful when its counts per cell exceed θ times the noise) made into a price that needs no N:
    a marginal's expected L1 noise grows like σ·cells while S is the L1 dependence it captures, so a
    large-domain parent set wins only when the dependence pays for its noise, and the degree adapts
    per attribute (the paper's maximal parent sets). ``σ̄`` is the planned noise of each measurement,
    as if there were ``max(1, d − degree)`` of them (the paper's count). Without it (``theta=0``)
    R, which grows with sparse large tables, picks huge marginals (slow fits, poor error). Candidates whose marginal would take the junction
    tree of all chosen marginals above ``max_model_size`` MB (2**20 bytes of float64 cells) are
    left out (a public rule, so that the graphical model stays tractable); the empty parent set
    always fits.

    Measurement (the rest of ``ctx.rho``, exactly): the marginals ``Π ∪ {X}`` of every node that
    are not inside another node's (the paper's d − k for a full-degree network), each with the
    same Gaussian noise σ (Δ₂ = 1 or √2).

    Defaults (``degree=2``, ``theta=0.5``, ``select_share=0.1``) were tuned on adult at ε = 1 on
    seeds apart from the reported ones; the comparison with the paper's θ = 4, β = 0.3 and with
    degree 3 is in benchmarks/RESULTS.md ("PrivBayes on adult").

    Privacy: exactly ``ctx.rho``: d−1 exponential mechanisms of ε²/8 each (ε from
    ``select_share·ρ``) and m Gaussian marginals of Δ₂²/(2σ²) each. The network is in
    ``Selection.extra["network"]`` as ``[(attribute, parents), ...]`` in the order chosen.
    """

    name = "privbayes"

    def __init__(self, degree: int = 2, theta: float = 0.5, select_share: float = 0.1,
                 max_model_size: float = 25.0):
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
        if not (theta >= 0 and math.isfinite(theta)):
            raise ValueError(f"theta must be finite and >= 0, got {theta!r}")
        self.degree = degree
        self.theta = float(theta)
        self.select_share = check_fraction("select_share", select_share)
        self.max_model_size = check_positive("max_model_size", max_model_size)

    def supporting_cliques(self, domain: Domain) -> list[Clique]:
        # every Π ∪ {X} with |Π| ≤ degree, less those too large for the model on their own
        cap = self.max_model_size * MB / 8
        return [c for k in range(1, min(self.degree + 1, len(domain)) + 1)
                for c in itertools.combinations(domain.attrs, k) if domain.size(c) <= cap]

    def run(self, session, ctx: Context) -> Selection:
        dom = session.domain
        attrs, d = list(dom.attrs), len(dom)
        l2 = marginal_l2(session.neighbour)
        # the root is data-independent (the paper draws it at random); one draw of the session's
        # generator seeds it, so a seeded run stays reproducible
        root = attrs[int(np.random.default_rng(session.public_seeds(1)[0]).integers(d))]
        network: list[tuple[str, Clique]] = [(root, ())]
        if d > 1:
            network = self._structure(session, ctx, root)
        nodes = [dom.canonical(p + (x,)) for x, p in network]
        # nodes are distinct sets (each adds a new X); a node inside another adds nothing to measure
        cliques = [c for c in nodes if not any(set(c) < set(o) for o in nodes)]
        sigma = even_sigma(ctx.rho - session.rho_spent, len(cliques), l2)
        for c in cliques:
            session.measure(c, sigma, what=f"PrivBayes marginal {','.join(c)}")
        ctx.progress("PrivBayes: done")
        return Selection(list(session.measurements), dom,
                         extra={"network": [(x, list(p)) for x, p in network], "sigma": sigma})

    def _structure(self, session, ctx: Context, root: str) -> list[tuple[str, Clique]]:
        """GreedyBayes. The parent sets grow by the attribute placed last (each new one is an old
        set of fewer than ``degree`` attributes plus it), and each (X, Π) is scored once, as an
        array per X aligned with the parent sets: a step costs a few array operations, not a
        Python loop over its (d − k)·C(k, ≤ degree) candidates. The exponential mechanism walks
        the candidates in descending noisy score and checks the model size of the first few only
        (:meth:`~privmarg.measure.MeasurementSession.select_fitting`)."""
        dom = session.domain
        d = len(dom)
        l2 = marginal_l2(session.neighbour)
        rho_sel = self.select_share * ctx.rho
        eps = even_epsilon(rho_sel, d - 1)
        sens = dependence_sensitivity(session.neighbour)
        sigma_plan = even_sigma(ctx.rho - rho_sel, max(1, d - self.degree), l2)
        cap = self.max_model_size * MB / 8
        order = {a: i for i, a in enumerate(dom.attrs)}
        network: list[tuple[str, Clique]] = [(root, ())]
        chosen: list[Clique] = [(root,)]
        parsets: list[Clique] = [()]  # every parent set of size ≤ degree over the placed attributes
        par_cells = np.ones(1)
        # private: the scores of (X, Π) for each unplaced X, aligned with parsets (leave only via the EM)
        dep = {x: np.zeros(1) for x in dom.attrs if x != root}
        placed = root
        for step in range(1, d):
            new = [tuple(sorted(p + (placed,), key=order.__getitem__)) for p in parsets if len(p) < self.degree]
            new_cells = np.array([float(dom.size(p)) for p in new])
            # only tables within the cap are read (the others can never be candidates: score 0)
            ask = [(x, j) for x in dep for j, p in enumerate(new) if new_cells[j] * dom[x] <= cap]
            tabs = iter(session.answers([new[j] + (x,) for x, j in ask]))
            scores = {x: np.zeros(len(new)) for x in dep}
            for x, j in ask:  # the answer is flat over (Π..., X): rows Π configurations, columns X values
                scores[x][j] = dependence_score(next(tabs).reshape(int(new_cells[j]), dom[x]).T)
            for x in dep:
                dep[x] = np.concatenate([dep[x], scores[x]])
            session.forget()  # the scores are kept; the tables are not needed again
            parsets += new
            par_cells = np.concatenate([par_cells, new_cells])
            xs = list(dep)
            cells = np.concatenate([par_cells * dom[x] for x in xs])
            q = np.concatenate([dep[x] for x in xs]) - self.theta * sigma_plan * cells
            short = np.flatnonzero((cells <= cap) | (np.tile(np.arange(len(parsets)), len(xs)) == 0))
            fits = {}

            def fit(i: int) -> bool:  # public: the domain and the chosen cliques only
                j = int(short[i]) % len(parsets)
                if j == 0:  # the empty parent set always fits
                    return True
                c = dom.canonical(parsets[j] + (xs[int(short[i]) // len(parsets)],))
                if c not in fits:
                    fits[c] = model_size_mb(dom, chosen + [c]) <= self.max_model_size
                return fits[c]

            i = int(short[session.select_fitting(q[short], eps, sens, fit, what=f"PrivBayes step {step}")])
            x, par = xs[i // len(parsets)], parsets[i % len(parsets)]
            network.append((x, par))
            chosen.append(dom.canonical(par + (x,)))
            del dep[x]
            placed = x
            ctx.progress(f"PrivBayes: {x} | {','.join(par) or '-'}")
        return network
