"""Wide tables (issue #47): AIM's weights in linear time, the Gumbel-max selection over the
candidates that fit, and the size checks it asks for."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import chisquare

from privmarg import AIM, Dataset, Domain
from privmarg.core import downward_closure
from privmarg.privacy import Accountant, exponential_mechanism_fitting, exponential_probabilities


def _closure_reference(workload, domain):
    """The definition: every subset r of a workload clique, weight Σ_i c_i·|r ∩ s_i|."""
    cand = set()
    for s, c in workload:
        for k in range(1, len(s) + 1):
            cand.update(itertools.combinations(s, k))
    order = {a: i for i, a in enumerate(domain.attrs)}
    keyed = sorted(cand, key=lambda r: (len(r), [order[a] for a in r]))
    return {r: float(sum(c * len(set(r) & set(s)) for s, c in workload)) for r in keyed}


@pytest.mark.parametrize("seed", range(5))
def test_closure_weights_match_the_definition(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(3, 12))
    dom = Domain([f"x{i}" for i in range(d)], [2] * d)
    workload = []
    for _ in range(int(rng.integers(1, 25))):
        k = int(rng.integers(1, min(d, 4) + 1))
        clique = tuple(sorted(rng.choice(d, size=k, replace=False)))
        w = float(rng.choice([1.0, 0.5, 2.0, 3.25]))
        workload.append((tuple(dom.attrs[i] for i in clique), w))
    got = downward_closure(workload, dom)
    want = _closure_reference(workload, dom)
    assert list(got) == list(want)  # same candidates, same order
    for r in want:
        assert got[r] == pytest.approx(want[r], rel=1e-12)


def test_gumbel_walk_is_the_exponential_mechanism_over_the_fitting_set():
    scores = np.array([3.0, 9.0, 1.0, 7.0, 5.0, 8.5, 0.0, 6.0])
    fitting = np.array([True, False, True, True, True, False, True, True])
    eps, sens, runs = 1.0, 1.0, 20_000
    rng = np.random.default_rng(0)
    acc = Accountant(runs * eps**2 / 8 * 1.01)
    counts = np.zeros(len(scores))
    asked = 0

    def fits(i):
        nonlocal asked
        asked += 1
        return bool(fitting[i])

    for _ in range(runs):
        counts[exponential_mechanism_fitting(acc, scores, eps, sens, rng, fits)] += 1
    assert counts[~fitting].sum() == 0
    p = exponential_probabilities(scores[fitting], eps, sens)
    stat = chisquare(counts[fitting], p * runs)
    assert stat.pvalue > 1e-3, stat
    # the walk stops at the first that fits: far fewer checks than one per candidate
    assert asked < 3 * runs
    assert acc.rho_spent == pytest.approx(runs * eps**2 / 8)
    # the test can fail: the same mechanism at twice the epsilon is told apart
    wrong = exponential_probabilities(scores[fitting], 2 * eps, sens)
    assert chisquare(counts[fitting], wrong * runs).pvalue < 1e-6


def test_gumbel_walk_charges_nothing_when_nothing_fits():
    acc = Accountant(1.0)
    pick = exponential_mechanism_fitting(acc, np.ones(5), 1.0, 1.0, np.random.default_rng(0), lambda i: False)
    assert pick is None and acc.rho_spent == 0.0


@pytest.mark.parametrize("d,seed", [(8, 0), (14, 4), (40, 1), (70, 2), (200, 3)])
def test_shortlist_and_lazy_fit_check_agree_with_the_full_check(d, seed):
    from types import SimpleNamespace

    from privmarg.generate.pgm import PGM
    from privmarg.generate.pgm.junction_tree import JunctionTree, batch_sizes_exact, model_size_mb, model_sizes_mb
    from privmarg.select.adaptive import AdaptiveSelector, RoundState

    rng = np.random.default_rng(seed)
    dom = Domain([f"a{i}" for i in range(d)], rng.integers(2, 12, size=d).tolist())
    attrs = dom.attrs
    # a base of 1-way marginals and random 2- and 3-way cliques (a sparse random graph)
    base = [(a,) for a in attrs] + [dom.canonical(rng.choice(attrs, size=int(rng.integers(2, 4)), replace=False))
                                    for _ in range(d // 2)]
    cands = list(dict.fromkeys(dom.canonical(rng.choice(attrs, size=int(rng.integers(1, 4)), replace=False))
                               for _ in range(300)))
    tree = JunctionTree.build(dom, base)
    session = SimpleNamespace(measurements=[SimpleNamespace(attrs=c) for c in base])
    state = RoundState(session, SimpleNamespace(zeros=[]), dom, cands, {r: 1.0 for r in cands},
                       model=SimpleNamespace(cliques=tree.cliques))
    sel = AdaptiveSelector(loop=PGM())
    full_sizes = model_sizes_mb(dom, base, cands)
    assert full_sizes == pytest.approx([model_size_mb(dom, base + [r]) for r in cands], rel=1e-12)
    inside = {r for r in cands if any(set(r) <= set(c) for c in tree.cliques)}
    for limit in np.quantile(full_sizes, [0.1, 0.5, 0.9]):
        fitting = {r for r, s in zip(cands, full_sizes) if s <= limit or r in inside}
        assert fitting  # the test needs both kinds
        at, all_fit = sel.shortlist(state, limit)
        short = [cands[i] for i in at]
        assert fitting <= set(short)
        assert all_fit == batch_sizes_exact(dom)  # then every candidate is checked, in numpy
        if all_fit:
            assert set(short) == fitting
        fits = sel.fit_check(state, limit)
        assert {r for r in cands if fits(r)} == fitting


def test_piped_synth_prints_one_line_per_round(tmp_path):
    import json

    import pandas as pd
    from typer.testing import CliRunner

    from privmarg.cli import app

    rng = np.random.default_rng(0)
    pd.DataFrame({"a": rng.integers(0, 3, 400), "b": rng.integers(0, 4, 400)}).to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "domain.json").write_text(json.dumps({"a": 3, "b": 4}))
    r = CliRunner().invoke(app, ["synth", str(tmp_path / "d.csv"), "--domain", str(tmp_path / "domain.json"),
                                 "--method", "aim", "--epsilon", "1", "--workload", "all-2way",
                                 "--output", str(tmp_path / "s.csv")])
    assert r.exit_code == 0, r.output
    rounds = [ln for ln in r.output.splitlines() if ln.startswith("aim: ") and "AIM round" in ln]
    assert rounds and all("% of the budget" in ln for ln in rounds)
    assert any("AIM round 1:" in ln for ln in rounds)


def test_batched_l1_errors_match_one_query_per_candidate():
    """Candidates across the model's independent parts are scored in numpy batches: same values as
    one projection per candidate, whatever the attribute order and the parts' shapes."""
    from privmarg.core import Measurement
    from privmarg.generate.pgm import PGM
    from privmarg.generate.pgm.batch_queries import l1_errors

    rng = np.random.default_rng(0)
    dom = Domain([f"a{i}" for i in range(9)], [2, 3, 4, 2, 5, 3, 2, 4, 3])
    data = Dataset(rng.integers(0, dom.shape, size=(500, 9)), dom)
    ms = [Measurement(c, data.project(c) + rng.normal(0, 3, dom.size(c)), 3.0)
          for c in [(a,) for a in dom.attrs] + [("a0", "a1"), ("a1", "a2", "a3"), ("a5", "a7")]]
    model = PGM(iters=100).generate(ms, dom)
    cands = [dom.canonical(c) for k in (1, 2, 3) for c in itertools.combinations(dom.attrs, k)]
    cands += [("a7", "a0", "a5"), ("a3", "a1", "a8"), ("a8", "a2")]  # non-canonical orders too
    tables = [data.project(c) if c == dom.canonical(c) else
              np.ascontiguousarray(data.project(dom.canonical(c)).reshape(dom.sizes(dom.canonical(c)))
                                   .transpose([dom.canonical(c).index(a) for a in c])).ravel() for c in cands]
    want = np.array([np.abs(t - model.project(c)).sum() for c, t in zip(cands, tables)])
    got = l1_errors(model, cands, tables)
    assert got == pytest.approx(want, rel=1e-10, abs=1e-9)
    assert len({len(model._components(c)) for c in cands}) > 1  # both paths exercised


def test_aim_scores_batched_or_not_select_the_same(monkeypatch):
    import privmarg.select.adaptive as adaptive_mod
    from test_mechanisms import correlated_table

    data = correlated_table(n=2000)
    runs = []
    for threshold in (10**9, 0):  # one query per candidate, then every round batched
        monkeypatch.setattr(adaptive_mod, "BATCH_CANDIDATES", threshold)
        mech = AIM(1.0, 1e-6, workload="all-3way", seed=3, iters=60, final_iters=100).fit(data)
        runs.append([m.attrs for m in mech.measurements_])
    assert runs[0] == runs[1] and len(runs[0]) > len(data.domain)


@pytest.mark.parametrize("d,seed", [(6, 0), (30, 1), (90, 2), (200, 3)])
def test_sizes_with_a_clique_by_components_equal_the_full_size(d, seed):
    from privmarg.generate.pgm.junction_tree import SizesWith, model_size_mb

    rng = np.random.default_rng(seed)
    dom = Domain([f"a{i}" for i in range(d)], rng.integers(2, 9, size=d).tolist())
    attrs = dom.attrs
    # a base leaving some attributes out, with a few larger components
    base = [(a,) for a in attrs[: d - 2]] + [dom.canonical(rng.choice(attrs, size=int(rng.integers(2, 4)),
                                                                     replace=False)) for _ in range(d // 3)]
    sizes = SizesWith(dom, base)
    assert sizes.total == pytest.approx(model_size_mb(dom, base), rel=1e-12)
    for _ in range(60):
        r = dom.canonical(rng.choice(attrs, size=int(rng.integers(1, 5)), replace=False))
        assert sizes.size_mb(r) == pytest.approx(model_size_mb(dom, base + [r]), rel=1e-12), r


def test_privbayes_reads_no_table_above_its_cap(monkeypatch):
    from privmarg import PrivBayes
    from privmarg.measure import MeasurementSession

    rng = np.random.default_rng(0)
    dom = Domain(["a", "b", "c", "d"], [150, 150, 150, 2])
    data = Dataset(rng.integers(0, dom.shape, size=(300, 4)), dom)
    cap = 1.0 * 2**20 / 8  # max_model_size=1 MB of float64 cells
    asked = []
    answers = MeasurementSession.answers

    def spy(self, cliques):
        asked.extend(dom.size(c) for c in cliques)
        return answers(self, cliques)

    monkeypatch.setattr(MeasurementSession, "answers", spy)
    from privmarg.generate.pgm import PGM

    PrivBayes(1.0, 1e-6, seed=0, degree=2, max_model_size=1.0, generator=PGM(iters=20)).fit(data)
    assert asked and max(asked) <= cap


def test_adaptive_edge_cases_a_loop_without_size_limit_and_nothing_that_fits():
    from types import SimpleNamespace

    from privmarg import MWEM
    from privmarg.select.adaptive import AdaptiveSelector, RoundState

    class NoLimit:  # a loop with no junction tree: every model size is unknown (None)
        def model_size_mb(self, domain, cliques):
            return None

    dom = Domain(["a", "b", "c"], [30, 30, 30])
    cands = [("a",), ("a", "b"), ("a", "b", "c")]
    state = RoundState(SimpleNamespace(measurements=[]), SimpleNamespace(zeros=[]), dom, cands, {},
                       model=SimpleNamespace(cliques=[]))
    sel = AdaptiveSelector(loop=NoLimit())
    at, all_fit = sel.shortlist(state, 1e-6)
    assert at.tolist() == [0, 1, 2] and not all_fit and all(sel.fit_check(state, 1e-6)(r) for r in cands)
    rng = np.random.default_rng(0)
    data = Dataset(rng.integers(0, 30, size=(200, 3)), dom)
    with pytest.raises(ValueError, match="no candidate fits"):
        MWEM(1.0, 1e-6, seed=0, max_model_size=1e-6).fit(data)


def test_sizes_with_an_empty_clique_in_the_base():
    from privmarg.generate.pgm.junction_tree import SizesWith, model_size_mb

    dom = Domain(["a", "b", "c"], [3, 4, 5])
    sizes = SizesWith(dom, [()])
    assert sizes.total == pytest.approx(model_size_mb(dom, [()]))
    assert sizes.size_mb(("a", "c")) == pytest.approx(model_size_mb(dom, [(), ("a", "c")]))


def test_default_rounds_keep_the_papers_T_up_to_1000_candidates_then_shrink():
    from privmarg.select.aim import PAPER_CANDIDATES, default_rounds

    for d, k in [(9, 129), (15, 575), (16, 696), (17, 833), (14, 469)]:
        assert default_rounds(d, k) == 16 * d
    assert default_rounds(20, PAPER_CANDIDATES) == 320
    # K = C(86,3) + C(86,2) + 86: Caravan's all-3way closure
    k = 102340 + 3655 + 86
    assert default_rounds(86, k) == round(16 * 86 * (np.log(1000) / np.log(k)) ** 2) == 490
    ts = [default_rounds(50, k) for k in np.geomspace(10, 10**9, 40).astype(int)]
    assert all(a >= b for a, b in zip(ts, ts[1:])) and min(ts) >= 50
    assert default_rounds(600, 10**300) == 600  # never fewer rounds than attributes


def test_aim_sizes_its_first_measurements_with_the_default_rounds():
    """20 binary attributes, all-3way: 1,350 candidates, so T = round(320 (ln 1000 / ln 1350)²) =
    294 and each initial 1-way marginal is measured with round_plan(ρ, α, Δ₂, 294).σ; a given
    ``rounds`` overrides it."""
    from privmarg.privacy import round_plan
    from privmarg.select.aim import default_rounds

    dom = Domain([f"x{i}" for i in range(20)], [2] * 20)
    data = Dataset(np.random.default_rng(0).integers(0, 2, size=(300, 20)), dom)
    assert default_rounds(20, 1350) == 294
    for rounds, T in [(None, 294), (100, 100)]:
        m = AIM(1.0, 1e-9, seed=0, rounds=rounds).fit(data, dom)
        sigma = round_plan(m.rho_total, 0.9, 1.0, T).sigma
        first = [x for x in m.measurements_ if len(x.attrs) == 1][:20]
        assert len(first) == 20 and all(x.sigma == pytest.approx(sigma) for x in first)


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
def test_aim_plans_fewer_rounds_when_the_budget_is_large(neighbour):
    """After the 1-way marginals (sized for the default T), the rounds are planned for 4·d when a
    round would measure a mean-sized workload marginal with L1 noise of at most 250·N: N public under
    replace-one, else the noisy 1-way marginals' median total less 3σ of a total. Small budget: T unchanged;
    explicit rounds: never replanned."""
    import math

    from privmarg.privacy import round_plan
    from privmarg.select.aim import PRECISE_NOISE_RATIO, default_rounds

    dom = Domain([f"x{i}" for i in range(6)], [3] * 6)  # all-3way: 20 marginals of 27 cells
    data = Dataset(np.random.default_rng(1).integers(0, 3, size=(2000, 6)), dom)
    T0 = default_rounds(6, 41)  # closure: 20 + 15 + 6 cliques
    assert T0 == 96
    for eps, precise in [(1.0, True), (1e-6, False)]:
        m = AIM(eps, 1e-9, seed=0, neighbour=neighbour, iters=30, final_iters=30).fit(data, dom)
        x = m.selection_.extra
        sigma = round_plan(m.rho_total, 0.9, 1.0 if neighbour == "add_remove" else math.sqrt(2), T0).sigma
        ones = [mm for mm in m.measurements_ if len(mm.attrs) == 1][:6]
        assert all(o.sigma == pytest.approx(sigma) for o in ones)  # the 1-ways at the default T
        n = 2000 if neighbour == "replace_one" else np.median([o.y.sum() for o in ones]) - 3 * sigma * math.sqrt(3)
        assert x["noise_ratio"] == pytest.approx(math.sqrt(2 / math.pi) * sigma * 27 / max(1.0, n))
        assert (x["noise_ratio"] <= PRECISE_NOISE_RATIO) is precise
        assert x["planned_rounds"] == (24 if precise else T0)
        if precise:  # the first round after the 1-ways: planned for 24 rounds (annealing only halves σ)
            first = [mm for mm in m.measurements_ if len(mm.attrs) > 1][0]
            l2 = 1.0 if neighbour == "add_remove" else math.sqrt(2)
            assert first.sigma == pytest.approx(round_plan(m.rho_total, 0.9, l2, 24).sigma)
    mine = AIM(1.0, 1e-9, seed=0, rounds=50, iters=30, final_iters=30).fit(data, dom)
    assert mine.selection_.extra["planned_rounds"] == 50 and mine.selection_.extra["noise_ratio"] is None


@pytest.mark.parametrize("bad", [float("nan"), 0.0, -5.0, "big"])
def test_model_size_caps_refuse_nan_and_non_positive(bad):
    """NaN passed every `<= 0` check and turned the cap off without a word."""
    from privmarg import registry

    takers = [n for n in registry.names("preset") if registry.accepts(n, "max_model_size")]
    assert {"aim", "mwem", "jam", "privbayes"} <= set(takers)
    for name in takers:
        with pytest.raises(ValueError, match="max_model_size"):
            registry.make_preset(name, 1.0, 1e-9, max_model_size=bad)
    assert AIM(1.0, 1e-9, max_model_size=float("inf")).max_model_size == float("inf")  # no cap, explicitly


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sum_tree_marginals_equal_direct_sums(seed):
    """Every key's marginal through the shared tree of partial sums equals summing the table
    directly, for random tables and key sets (repeated keys, the whole table, one attribute)."""
    from privmarg.generate.pgm.sum_tree import marginals_of, plan_sum_tree

    rng = np.random.default_rng(seed)
    d = int(rng.integers(3, 7))
    dom = Domain([f"x{i}" for i in range(d)], rng.integers(2, 5, size=d).tolist())
    table = rng.random(dom.shape)
    subsets = [c for k in range(1, d + 1) for c in itertools.combinations(dom.attrs, k)]
    keys = [subsets[i] for i in rng.choice(len(subsets), size=12)] + [dom.attrs, (dom.attrs[-1],)]
    got = marginals_of(table, dom.attrs, keys, dom)
    for key, g in zip(keys, got):
        axes = tuple(j for j, a in enumerate(dom.attrs) if a not in key)
        assert g == pytest.approx(table.sum(axis=axes).ravel(), rel=1e-12)
    tree = plan_sum_tree(dom, dom.attrs, keys)
    assert all(set(k) <= set(tree.attrs[n]) for k, n in zip(keys, tree.key_node))
    assert tree.nodes, "12 random keys share at least one partial sum"


def test_project_many_equals_one_query_each(monkeypatch):
    """AIM's scoring queries every candidate through ``project_many``: same marginals as one
    ``project`` each, inside big cliques (shared sums), across cliques (elimination) and summed from
    a listed query with one attribute more."""
    import privmarg.generate.pgm.graphical_model as gm
    from privmarg.core import Measurement
    from privmarg.generate.pgm import PGM

    monkeypatch.setattr(gm, "SHARED_SUM_CELLS", 1)  # every clique counts as big on this tiny model
    rng = np.random.default_rng(4)
    dom = Domain([f"a{i}" for i in range(7)], [2, 3, 4, 2, 3, 2, 3])
    data = Dataset(rng.integers(0, dom.shape, size=(400, 7)), dom)
    ms = [Measurement(c, data.project(c) + rng.normal(0, 2, dom.size(c)), 2.0)
          for c in [(a,) for a in dom.attrs] + [("a0", "a1", "a2", "a3"), ("a2", "a3", "a4"), ("a5", "a6")]]
    model = PGM(iters=50).generate(ms, dom)
    cands = [c for k in (1, 2, 3) for c in itertools.combinations(dom.attrs, k)] + [("a3", "a0")]
    calls = []
    eliminate = gm.GraphicalModel._eliminate
    monkeypatch.setattr(gm.GraphicalModel, "_eliminate", lambda self, r: calls.append(r) or eliminate(self, r))
    got = model.project_many(cands)
    outside = [c for c in cands if model._smallest_clique(c) is None]
    # the 2-way queries across the first two cliques are summed from a 3-way answer (a table of 18
    # cells, against 72 in the cliques an elimination reads) instead of eliminated once more
    # (the elimination left is the piece that 3-way products across components share)
    assert calls.count(("a0", "a4")) == 1 and calls.count(("a1", "a4")) == 1
    assert len(outside) > 30
    for c, g in zip(cands, got):
        assert g == pytest.approx(model.project(c, cache=False), rel=1e-10, abs=1e-9)
    inside = [c for c in cands if set(c) <= {"a0", "a1", "a2", "a3"}]
    assert len(inside) > 10 and len(cands) - len(inside) > 10  # both paths exercised


def test_batched_answers_equal_one_projection_each():
    """A batch of exact marginals (cliques sharing a prefix share its codes) equals one projection
    per clique, in any order; bad cliques and codes fail as a projection does."""
    rng = np.random.default_rng(0)
    dom = Domain([f"x{i}" for i in range(6)], [3, 1, 7, 2, 5, 4])
    data = Dataset(np.column_stack([rng.integers(0, k, 500) for k in dom.shape]), dom)
    cliques = list(downward_closure([(tuple(dom.attrs[i] for i in sorted(rng.choice(6, 3, replace=False))), 1.0)
                                     for _ in range(8)], dom))
    cliques += [("x4", "x0", "x2"), ("x4", "x0", "x5"), ("x3",), (), ("x5", "x1")]
    got = data.marginals(cliques)
    assert len(got) == len(cliques)
    for c, g in zip(cliques, got):
        assert np.array_equal(g, data.project(c)) and g.dtype == np.float64
    for bad in [("x0", "x0"), ("x0", "nope")]:
        with pytest.raises((ValueError, KeyError)):
            data.project(bad)
        with pytest.raises((ValueError, KeyError)):
            data.marginals([("x1", "x2"), bad])
    # codes not checked on the way in: a code past its attribute's size fails, as a projection does
    codes = data.codes.copy()
    codes[0, 5] = 4  # x5 has 4 values
    loose = Dataset(codes, dom, validate=False)
    with pytest.raises(ValueError):
        loose.project(("x0", "x5"))
    with pytest.raises(ValueError):
        loose.marginals([("x0", "x5")])
