"""PrivMRF's selector: noisy-score calibration against the closed form under both neighbour
relations, exact spend, the clique-size cap, the θ-usefulness limit and seeded reproducibility."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privmarg import PGM, Dataset, Domain, Synthesizer, registry
from privmarg.generate.pgm.junction_tree import JunctionTree
from privmarg.privacy import recompute_rho
from privmarg.select.privmrf import PrivMRFSelector, noisy_score_sigma
from test_mechanisms import correlated_table

FAST = dict(loop=PGM(iters=30, tol=1e-4))


def _fit(data, neighbour="add_remove", seed=1, **params):
    sel = PrivMRFSelector(**{**FAST, **params})
    return Synthesizer(sel, PGM(iters=40), epsilon=1.0, delta=1e-6, seed=seed, neighbour=neighbour).fit(data)


@pytest.mark.parametrize("neighbour, s_sens, q_sens", [("add_remove", 4.0, 1.0), ("replace_one", 6.0, 2.0)])
def test_noisy_scores_are_calibrated_to_the_closed_form(neighbour, s_sens, q_sens):
    """Each noisy score vector is one Gaussian mechanism: σ = Δ·√k/√(2ρ_part), L2 sensitivity Δ·√k,
    with Δ = 4 or 6 for the pair scores and 1 or 2 for a round's L1 scores; the shares are 0.1 / 0.1."""
    data = correlated_table(n=2000)
    syn = _fit(data, neighbour)
    rho = syn.rho_total
    ledger = syn.privacy_report()["ledger"]
    d = len(data.domain)
    m = d * (d - 1) // 2
    count = [c for c in ledger if c["what"] == "PrivMRF record count"]
    if neighbour == "add_remove":  # N is private: a noisy count of count_share·ρ, Δ = 1
        assert len(count) == 1 and count[0]["rho"] == pytest.approx(0.01 * rho, rel=1e-12)
        assert count[0]["sigma"] == pytest.approx(1 / math.sqrt(2 * 0.01 * rho), rel=1e-12)
        rho_graph = 0.09 * rho
    else:  # N is public
        assert count == []
        rho_graph = 0.1 * rho
    (pair,) = [c for c in ledger if c["what"] == "PrivMRF pair scores"]
    assert pair["mechanism"] == "gaussian"
    assert pair["l2_sensitivity"] == pytest.approx(s_sens * math.sqrt(m), rel=1e-12)
    assert pair["sigma"] == pytest.approx(s_sens * math.sqrt(m) / math.sqrt(2 * rho_graph), rel=1e-12)
    assert pair["rho"] == pytest.approx(rho_graph, rel=1e-9)
    rounds = [c for c in ledger if c["what"].startswith("PrivMRF round") and c["what"].endswith("scores")]
    assert rounds, "no refinement round ran"
    for c, entry in zip(rounds, syn.log_):
        k = entry["queried"]
        assert c["l2_sensitivity"] == pytest.approx(q_sens * math.sqrt(k), rel=1e-12)
        assert c["sigma"] == pytest.approx(q_sens * math.sqrt(k) / math.sqrt(2 * c["rho"]), rel=1e-12)
        assert c["sigma"] == pytest.approx(noisy_score_sigma(c["rho"], k, q_sens), rel=1e-12)
    assert sum(c["rho"] for c in rounds) == pytest.approx(0.1 * rho, rel=1e-9)
    # exact spend; every charge recomputes from its parameters
    assert sum(c["rho"] for c in ledger) == pytest.approx(rho, rel=1e-9)
    for c in ledger:
        assert recompute_rho(c) == pytest.approx(c["rho"], rel=1e-9)
    # every marginal shares one σ (Δ₂ = 1 or √2)
    sig = {round(c["sigma"], 9) for c in ledger if c["what"].startswith(("PrivMRF initial", "PrivMRF round"))
           and not c["what"].endswith("scores")}
    assert len(sig) == 1


def test_closed_form_helper():
    assert noisy_score_sigma(0.02, 10, 4.0) == pytest.approx(4.0 * math.sqrt(10) / math.sqrt(0.04))
    assert noisy_score_sigma(0.5, 1, 1.0) == pytest.approx(1.0)


def _chain(n=3000, k=10, d=6, seed=0) -> Dataset:
    """d copies (with a little noise) of one k-valued attribute: every pair strongly dependent."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, k, n)
    cols = [np.where(rng.random(n) < 0.95, x, rng.integers(0, k, n)) for _ in range(d)]
    return Dataset(np.column_stack(cols), Domain([f"x{i}" for i in range(d)], [k] * d))


def test_graph_respects_the_clique_cap_and_is_maximal():
    """With every pair dependent the greedy graph grows until no edge fits: each maximal clique of
    the triangulated graph has at most max_clique_size cells, and any further edge would break it."""
    dom = Domain([f"x{i}" for i in range(6)], [10] * 6)
    sel = PrivMRFSelector(max_clique_size=1000)  # three attributes of 10 values
    tvd = np.ones((6, 6)) - np.eye(6)
    cliques = sel.graph(dom, tvd)
    assert all(dom.size(c) <= 1000 for c in cliques)
    assert max(len(c) for c in cliques) == 3  # the cap binds: it is not a tree of pairs
    edges = {frozenset(p) for c in cliques for p in itertools.combinations(c, 2)}
    for a, b in itertools.combinations(dom.attrs, 2):
        if frozenset((a, b)) in edges:
            continue
        grown = JunctionTree.build(dom, list(cliques) + [(a, b)])
        assert max(dom.size(c) for c in grown.cliques) > 1000, (a, b)


def test_measured_junction_tree_stays_within_the_cap():
    """The junction tree Private-PGM builds over everything measured keeps its largest clique within
    the cap, and the graph's cliques do too."""
    data = _chain()
    cap = 1000
    syn = _fit(data, max_clique_size=cap, theta=0.05)  # a loose usefulness limit: 3-way marginals allowed
    dom = data.domain
    graph = [tuple(c) for c in syn.selection_.extra["graph"]]
    assert all(dom.size(c) <= cap for c in graph)
    tree = JunctionTree.build(dom, [m.attrs for m in syn.measurements_])
    assert max(dom.size(c) for c in tree.cliques) <= cap
    assert max(len(m.attrs) for m in syn.measurements_) >= 2


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
def test_usefulness_limit_bounds_the_marginals(neighbour):
    """Every measured marginal of two or more attributes is θ-useful at the noise it got."""
    data = _chain(n=20000, k=12)  # a 144-cell pair is useful, a 1,728-cell triple is not
    syn = _fit(data, neighbour, theta=6.0)
    n_hat = syn.selection_.extra["record_count"]
    multi = [m for m in syn.measurements_ if len(m.attrs) > 1]
    assert multi
    for m in multi:
        limit = n_hat / (6.0 * m.sigma * math.sqrt(2 / math.pi))
        assert data.domain.size(m.attrs) < limit, m.attrs


def _plan_at(sel, dom, n_hat, rho):
    """The selector's plan on one maximal clique of all attributes with flat noisy TVDs (without the
    score reserve it returns last: σ already reflects it)."""
    from types import SimpleNamespace

    d = len(dom)
    tvd = np.full((d, d), 0.1) - 0.1 * np.eye(d)
    prng = np.random.default_rng(0)
    return sel._plan(dom, [tuple(dom.attrs)], tvd, n_hat, int(0.8 * d), 0.1 * rho, rho, 1.0, prng,
                     SimpleNamespace(zeros=[]))[:5]


def test_plan_resizes_when_the_planned_limit_leaves_too_little_to_measure():
    """Four 33-value attributes: sized for the plan's 7 marginals the usefulness limit falls just under
    a pair's 1,089 cells, so only the four 1-way marginals fit; sized for 6 it admits pairs. The plan
    measures more than 4, every pair is θ-useful at the σ it gets, and a plan that already fits
    (a larger N̂) is the plan's own count."""
    dom = Domain(["a", "b", "c", "d"], [33] * 4)
    sel = PrivMRFSelector(theta=6.0)
    rho = 1.0
    sig7 = math.sqrt(7 / (2 * 0.9 * rho))
    n_hat = 1080.0 * 6.0 * sig7 * math.sqrt(2 / math.pi)  # limit at 7 marginals: 1,080 cells
    init, pool, n_refine, steps, sigma = _plan_at(sel, dom, n_hat, rho)
    count = len(init) + n_refine
    assert 4 < count <= 6
    assert sigma == pytest.approx(math.sqrt(count / (2 * (0.9 if steps else 1.0) * rho)), rel=1e-12)
    assert any(len(c) > 1 for c in init)
    for c in init:
        if len(c) > 1:
            assert dom.size(c) < n_hat / (6.0 * sigma * math.sqrt(2 / math.pi))
    # without refinement nothing is reserved for scores: σ and the limit are the marginals' own
    sel0 = PrivMRFSelector(theta=6.0, steps=0)
    init0, _, n0, steps0, sigma0 = _plan_at(sel0, dom, n_hat, rho)
    assert steps0 == 0 and n0 == 0
    assert sigma0 == pytest.approx(math.sqrt(len(init0) / (2 * rho)), rel=1e-12)
    assert all(dom.size(c) < n_hat / (6.0 * sigma0 * math.sqrt(2 / math.pi)) for c in init0 if len(c) > 1)
    assert max(len(c) for c in init0) == 2  # sized at 4 marginals and no reserve: pairs fit
    # with ample rows the plan sized for 7 (3-way families) is kept as it is
    init, pool, n_refine, steps, sigma = _plan_at(sel, dom, 100 * n_hat, rho)
    from types import SimpleNamespace

    first = sel.initial(dom, [tuple(dom.attrs)], np.full((4, 4), 0.1) - 0.1 * np.eye(4),
                        sel._limit(100 * n_hat, sig7), np.random.default_rng(0), SimpleNamespace(zeros=[]))
    assert init == first and max(len(c) for c in init) == 3


def test_seeded_runs_repeat_and_seeds_differ():
    data = correlated_table(n=1500)
    a, b, c = _fit(data, seed=4), _fit(data, seed=4), _fit(data, seed=5)
    assert [m.attrs for m in a.measurements_] == [m.attrs for m in b.measurements_]
    for x, y in zip(a.measurements_, b.measurements_):
        assert np.array_equal(x.y, y.y)
    assert np.array_equal(a.sample_codes(300), b.sample_codes(300))
    assert not np.array_equal(a.sample_codes(300), c.sample_codes(300))


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
def test_no_refinement_spends_everything_on_the_initial_marginals(neighbour):
    syn = _fit(correlated_table(n=1500), neighbour, steps=0)
    ledger = syn.privacy_report()["ledger"]
    assert not any(c["what"].startswith("PrivMRF round") for c in ledger)
    assert sum(c["rho"] for c in ledger) == pytest.approx(syn.rho_total, rel=1e-9)


def test_preset_is_registered_and_runs():
    syn = registry.make_preset("privmrf", 1.0, 1e-6, seed=2, generator=PGM(iters=30), **FAST)
    syn.fit(correlated_table(n=1000))
    assert syn.privacy_report()["rho_spent"] == pytest.approx(syn.rho_total, rel=1e-9)
    assert ("privmrf", "pgm") in registry.pairs()


@pytest.mark.parametrize("bad", [dict(theta=0), dict(graph_share=1.2), dict(count_share=0.2),
                                 dict(graph_share=0.5, score_share=0.5), dict(max_marginal_attrs=0),
                                 dict(steps=-1), dict(max_clique_size=0)])
def test_bad_parameters_are_refused(bad):
    with pytest.raises(ValueError):
        PrivMRFSelector(**bad)


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
@pytest.mark.parametrize("d", [1, 2])
def test_tiny_domains_spend_exactly(neighbour, d):
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 3, size=(300, d))
    data = Dataset(codes, Domain([f"x{i}" for i in range(d)], [3] * d))
    syn = _fit(data, neighbour)
    ledger = syn.privacy_report()["ledger"]
    assert sum(c["rho"] for c in ledger) == pytest.approx(syn.rho_total, rel=1e-9)
    assert {a for m in syn.measurements_ for a in m.attrs} == set(data.domain.attrs)


def test_replace_one_run_measures_pairs_when_the_planned_limit_falls_just_under_them():
    """End to end under replace-one (N public, so the limit is exact): N is chosen so that the limit
    sized for the plan's 7 marginals is 1,080 cells, under the 1,089 of a 33 × 33 pair. The run
    measures more than the four 1-way marginals the old plan was left with, at least one pair, each
    multi-attribute marginal θ-useful at its own σ, and spends ρ exactly."""
    rho = 0.02
    sig7 = math.sqrt(2.0) * math.sqrt(7 / (2 * 0.8 * rho))  # Δ₂ = √2; 0.1ρ graph, 0.1ρ scores
    n = int(1080.0 * 6.0 * sig7 * math.sqrt(2 / math.pi))
    rng = np.random.default_rng(0)
    x = rng.integers(0, 33, n)
    cols = [np.where(rng.random(n) < 0.7, x, rng.integers(0, 33, n)) for _ in range(4)]
    data = Dataset(np.column_stack(cols), Domain(["a", "b", "c", "d"], [33] * 4))
    syn = Synthesizer(PrivMRFSelector(**FAST), PGM(iters=20), epsilon=None, delta=None, rho=rho, seed=0,
                      neighbour="replace_one").fit(data)
    multi = [m for m in syn.measurements_ if len(m.attrs) > 1]
    assert len(syn.measurements_) > 4 and multi
    for m in multi:
        assert data.domain.size(m.attrs) < n / (6.0 * m.sigma * math.sqrt(2 / math.pi)), m.attrs
    ledger = syn.privacy_report()["ledger"]
    assert sum(c["rho"] for c in ledger) == pytest.approx(rho, rel=1e-9)
