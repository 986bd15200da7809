"""AIM's public start (issue #42): the public table's tree model as AIM's first model."""

import json
import math

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privmarg import AIM, JAM, Dataset, Domain, datasets
from privmarg.cli import app
from privmarg.core import all_kway, parse_workload
from privmarg.data import MemorySource
from privmarg.evaluation import workload_error
from privmarg.generate.pgm import GraphicalModel
from privmarg.privacy import cdp_rho, marginal_l2
from privmarg.select.adaptive import mean_cells
from privmarg.select.jam import PAPER_PLAN, noise_ratio
from privmarg.select.public_start import (PUBLIC_START_NOISE_RATIO, chance_information, mutual_information,
                                          public_tree, starts_public)

from test_jam import FAST, chain_table


def test_mutual_information_closed_forms():
    assert mutual_information(np.outer([1, 2, 3], [4, 5])) == pytest.approx(0.0, abs=1e-12)
    assert mutual_information(np.eye(2) * 7) == pytest.approx(math.log(2))
    assert mutual_information(np.eye(3)) == pytest.approx(math.log(3))
    p = np.array([[0.4, 0.1], [0.2, 0.3]])
    pa, pb = p.sum(1), p.sum(0)
    expected = sum(p[i, j] * math.log(p[i, j] / (pa[i] * pb[j])) for i in range(2) for j in range(2))
    assert mutual_information(100 * p) == pytest.approx(expected)
    assert mutual_information(np.zeros((2, 2))) == 0.0


def test_public_tree_is_the_maximum_spanning_tree():
    data = chain_table(20000)
    pairs = [c for c, _ in all_kway(data.domain, 2)]
    tree = public_tree(MemorySource(data), data.domain, pairs)
    # the chain a-b-c-d and e's copy of a: the only tree whose every edge beats the pairs it skips
    assert sorted(tree) == [("a", "b"), ("a", "e"), ("b", "c"), ("c", "d")]
    # brute force: no spanning tree of the 5 attributes has more mutual information
    import itertools
    tables = {p: y.reshape(data.domain.sizes(p)) for p, y in zip(pairs, MemorySource(data).marginals(pairs))}
    mi = {p: mutual_information(t) for p, t in tables.items()}
    assert all(mi[e] > chance_information(tables[e].shape, len(data)) for e in tree)
    best = sum(mi[e] for e in tree)
    for edges in itertools.combinations(pairs, 4):
        comp = {a: a for a in data.domain.attrs}

        def root(x):
            while comp[x] != x:
                x = comp[x]
            return x
        ok = True
        for a, b in edges:
            ra, rb = root(a), root(b)
            ok = ok and ra != rb
            comp[ra] = rb
        if ok:
            assert sum(mi[e] for e in edges) <= best + 1e-12
    # independent columns carry no information: no edge between them
    dom = Domain(["x", "y"], [2, 2])
    flat = Dataset(np.array([[i, j] for i in range(2) for j in range(2)] * 5), dom)
    assert public_tree(MemorySource(flat), dom, [("x", "y")]) == []


def test_the_budget_rule_is_the_noise_ratio_threshold():
    l2 = marginal_l2("replace_one")
    for rows, cells in [(1000, 50.0), (30000, 400.0)]:
        for rho in np.geomspace(1e-5, 10, 25):
            ratio = noise_ratio(rho, *PAPER_PLAN, l2, rows, cells)
            assert starts_public(rho, l2, rows, cells) == (ratio >= PUBLIC_START_NOISE_RATIO)
        # small budgets start from the public model, large ones do not
        assert starts_public(1e-6, l2, rows, cells) and not starts_public(10.0, l2, rows, cells)


def _aim(epsilon, seed, **kw):
    return AIM(epsilon, 1e-6, workload="all-2way", seed=seed, neighbour="replace_one", **FAST, **kw)


def test_public_start_keeps_the_tree_free_and_spends_the_budget_exactly():
    data = chain_table(3000)
    public = chain_table(2000, seed=5)
    mech = _aim(0.2, 0, public_start=True).fit(data, public=public)
    assert mech.public_start_
    pub = [m for m in mech.measurements_ if m.source == "public"]
    pairs = [c for c, _ in all_kway(data.domain, 2)]
    assert sorted(m.attrs for m in pub) == sorted(public_tree(MemorySource(public), data.domain, pairs))
    assert all(m.weight == 0.0 and m.sigma is None for m in pub)
    for m in pub:  # the public marginals rescaled to N
        assert m.y.sum() == pytest.approx(len(data))
    ledger = mech.privacy_report()["ledger"]
    assert sum(c["rho"] for c in ledger) == pytest.approx(mech.rho_total, rel=1e-9)
    assert not any("public" in c["what"].lower() for c in ledger)  # the public table is not charged
    # the released model keeps the public tree in its structure
    assert isinstance(mech.model_, GraphicalModel)
    for m in pub:
        assert mech.model_.tree.find_clique(m.attrs) is not None


def test_public_start_lowers_the_error_at_a_small_budget():
    """The bundled adult public split at ε = 0.1, all 3-way marginals (issue #42's case)."""
    private = Dataset.from_frame(*datasets.load("adult-public-split"))
    public = Dataset.from_frame(*datasets.load("adult-public-split", table="public-050"))
    dom = private.domain
    wl = parse_workload("all-3way", dom)
    flat, started = [], []
    for seed in range(3):
        kw = dict(seed=seed, neighbour="replace_one")
        flat.append(workload_error(private, Dataset(AIM(0.1, 1e-9, **kw).fit(private).sample_codes(), dom), wl))
        mech = AIM(0.1, 1e-9, **kw).fit(private, public=public)
        assert mech.public_start_  # by the budget rule
        started.append(workload_error(private, Dataset(mech.sample_codes(), dom), wl))
    # measured: 0.465 against 0.366 (benchmarks/aim_public_start.py)
    assert np.mean(started) < 0.9 * np.mean(flat)


def test_a_large_budget_ignores_the_public_table_row_for_row():
    data = chain_table(3000)
    public = chain_table(2000, seed=5)
    dom = data.domain
    wl = parse_workload("all-2way", dom)
    rho = cdp_rho(20.0, 1e-6)
    assert not starts_public(rho, marginal_l2("replace_one"), len(data), mean_cells(dom, wl))
    with_pub = _aim(20.0, 3).fit(data, public=public)
    without = _aim(20.0, 3).fit(data)
    assert not with_pub.public_start_
    assert np.array_equal(with_pub.sample_codes(), without.sample_codes())
    off = _aim(0.05, 3, public_start=False).fit(data, public=public)
    assert not off.public_start_ and all(m.source != "public" for m in off.measurements_)


def test_public_start_under_add_remove():
    """N is private: the start is sized by the low estimate from the noisy 1-way marginals."""
    data = chain_table(3000)
    mech = AIM(0.02, 1e-6, workload="all-2way", seed=0, **FAST).fit(data, public=chain_table(2000, seed=5))
    assert mech.neighbour == "add_remove" and mech.public_start_
    ledger = mech.privacy_report()["ledger"]
    assert sum(c["rho"] for c in ledger) == pytest.approx(mech.rho_total, rel=1e-9)
    assert len(mech.sample_codes()) > 0


def test_bad_public_start():
    with pytest.raises(ValueError, match="public_start"):
        AIM(1.0, 1e-6, public_start="yes")


def test_cli_aim_with_public(tmp_path):
    data = chain_table(800)
    dom = data.domain
    (tmp_path / "domain.json").write_text(json.dumps(dict(zip(dom.attrs, map(int, dom.shape)))))
    data.to_frame().to_csv(tmp_path / "priv.csv", index=False)
    chain_table(500, seed=9).to_frame().to_csv(tmp_path / "pub.csv", index=False)
    runner = CliRunner()
    base = ["synth", str(tmp_path / "priv.csv"), "--domain", str(tmp_path / "domain.json"),
            "--epsilon", "0.1", "--delta", "1e-6", "--seed", "0", "--public", str(tmp_path / "pub.csv")]
    r = runner.invoke(app, base + ["--method", "mst", "--output", str(tmp_path / "x.csv")])
    assert r.exit_code == 2 and "--public is not used by --method mst" in r.output
    assert not (tmp_path / "x.csv").exists()
    out, rep = tmp_path / "syn.csv", tmp_path / "rep.json"
    r = runner.invoke(app, base + ["--method", "aim", "--workload", "all-2way", "--output", str(out),
                                   "--report", str(rep), "--save-model", str(tmp_path / "model")])
    assert r.exit_code == 0, r.output
    assert "AIM started from the public table's model" in r.output
    assert list(pd.read_csv(out).columns) == list(dom.attrs)  # add/remove: about 800 rows
    report = json.loads(rep.read_text())
    assert report["public_start"] is True
    assert report["privacy"]["rho_spent"] == pytest.approx(report["privacy"]["rho_total"], rel=1e-9)
    assert "public" in {m["source"] for m in report["measurements"]}
    # the saved model keeps the public tree (weight-0 measurements) and samples again for free
    again = tmp_path / "again.csv"
    r = runner.invoke(app, ["sample", str(tmp_path / "model"), "--rows", "50", "-o", str(again)])
    assert r.exit_code == 0, r.output
    assert len(pd.read_csv(again)) == 50


def test_the_tree_stays_within_a_size_limit():
    data = chain_table(5000)
    src, dom = MemorySource(data), data.domain
    pairs = [c for c, _ in all_kway(dom, 2)]
    full = public_tree(src, dom, pairs)
    cells = sum(dom.size(e) for e in full)
    for cap in (cells - 1, cells // 2, 12):
        capped = public_tree(src, dom, pairs, max_cells=cap)
        assert sum(dom.size(e) for e in capped) <= cap and capped != full
        # a forest: no edge joins two attributes already connected
        comp = {a: {a} for a in dom.attrs}
        for a, b in capped:
            assert comp[a] is not comp[b]
            merged = comp[a] | comp[b]
            for x in merged:
                comp[x] = merged
    assert public_tree(src, dom, pairs, max_cells=0) == []


def test_add_remove_sizes_the_rule_by_the_noisy_rows_not_the_true_count(monkeypatch):
    """N is private under add/remove: the rule reads the low estimate from the charged 1-ways."""
    import privmarg.select.aim as aim_module
    from privmarg.select.aim import low_total

    seen = []
    real = aim_module.starts_public
    monkeypatch.setattr(aim_module, "starts_public", lambda rho, l2, rows, cells: seen.append(rows) or real(rho, l2, rows, cells))
    data = chain_table(3000)
    mech = AIM(0.02, 1e-6, workload="all-2way", seed=0, **FAST).fit(data, public=chain_table(2000, seed=5))
    assert mech.neighbour == "add_remove" and len(seen) == 1
    ones = [m for m in mech.measurements_ if len(m.attrs) == 1 and m.sigma is not None]
    expected = low_total(float(np.median([m.y.sum() for m in ones])), ones[0].sigma, max(m.y.size for m in ones))
    assert seen[0] == pytest.approx(expected) and seen[0] != len(data)


def test_jam_hands_a_precise_budget_to_aim_without_the_start():
    data = chain_table(3000)
    jam = JAM(20.0, 1e-6, workload="all-2way", seed=0).fit(data, public=chain_table(2000, seed=5))
    assert jam.selection_.extra["delegated_to"] == "aim" and jam.selection_.extra["public_start"] is False
    assert all(m.source == "private" for m in jam.measurements_)


def test_weight_zero_measurements_are_not_fitted_by_other_generators():
    """AIM's public start (and JAM's superseded public answers) stay on the record at weight 0:
    generators fitting targets leave them out."""
    from privmarg.core import Measurement
    from privmarg.generate.privpgd.measurements import _merge_measurements
    from privmarg.generate.targets import marginal_targets

    dom = Domain(["a", "b"], [2, 3])
    kept = Measurement(("a",), np.array([30.0, 70.0]), 1.0)
    ignored = Measurement(("b", "a"), np.arange(6.0), None, source="public", weight=0.0)
    targets = marginal_targets([kept, ignored], dom)
    assert [t.attrs for t in targets] == [("a",)]
    assert [m[0] for m in _merge_measurements([kept, ignored], dom)] == [("a",)]
    # with only the weight-0 answer on a clique, that clique has no target at all
    assert marginal_targets([ignored], dom) == []


def test_compressed_aim_sees_the_public_table_on_its_own_domain():
    from privmarg import Synthesizer
    from privmarg.generate.pgm import PGM
    from privmarg.select import AIMSelector, Compressed

    rng = np.random.default_rng(0)
    dom = Domain(["a", "b", "c"], [2, 40, 3])
    n = 2000
    a = rng.integers(0, 2, n)
    b = np.where(rng.random(n) < 0.95, a, rng.integers(0, 40, n))  # most of b's 40 values are rare
    c = (a + rng.integers(0, 2, n)) % 3
    data = Dataset(np.column_stack([a, b, c]), dom)
    mech = Synthesizer(Compressed(AIMSelector("all-2way", public_start=True, loop=PGM(iters=50))), PGM(iters=100),
                       epsilon=0.3, delta=1e-6, seed=0).fit(data, public=data)
    cdom = mech.selection_.extra["compressed_domain"]
    assert cdom["b"] < 40  # compressed
    pub = [m for m in mech.selection_.measurements if m.source == "public"]
    assert pub and all(m.y.size == cdom.size(m.attrs) for m in pub)
    assert len(mech.sample_codes()) > 0


def test_plan_says_whether_a_public_table_would_be_used():
    from privmarg.cli.plan import plan_lines

    dom = Domain(["a", "b", "c", "d"], [4, 3, 5, 2])
    for epsilon, rows, used in [(0.05, 500, True), (20.0, 50_000, False)]:
        lines = [x for x in plan_lines(dom, "aim", epsilon, 1e-6, rows, "all-2way") if "--public" in x]
        assert len(lines) == 1
        rho = cdp_rho(epsilon, 1e-6)
        cells = mean_cells(dom, parse_workload("all-2way", dom))
        assert starts_public(rho, marginal_l2("add_remove"), rows, cells) == used
        assert ("would start from the public table's model" in lines[0]) == used


def test_chance_associations_of_a_small_public_table_are_left_out():
    """Two independent 20-value columns in 200 records show about (19·19)/(2·200) = 0.9 nats of mutual
    information by chance (standard deviation about √(2·361)/400); a real association survives."""
    rng = np.random.default_rng(3)
    dom = Domain(["x", "y", "z"], [20, 20, 2])
    x = rng.integers(0, 20, 200)
    noise = Dataset(np.column_stack([x, rng.integers(0, 20, 200), rng.integers(0, 2, 200)]), dom)
    t = MemorySource(noise).marginals([("x", "y")])[0].reshape(20, 20)
    assert mutual_information(t) > 0.5  # spurious, about the chance level
    assert chance_information((20, 20), 200) == pytest.approx((361 + 3 * math.sqrt(722)) / 400)
    for seed in range(20):  # independent columns stay out of the forest
        r = np.random.default_rng(seed)
        indep = Dataset(np.column_stack([r.integers(0, 20, 200), r.integers(0, 20, 200), r.integers(0, 2, 200)]), dom)
        assert public_tree(MemorySource(indep), dom, [("x", "y")]) == []
    assert chance_information((2, 2), 0) == math.inf
    assert public_tree(MemorySource(noise), dom, [("x", "y")]) == []
    copy = Dataset(np.column_stack([x, x, rng.integers(0, 2, 200)]), dom)  # y a copy of x: ln 20 > 0.9
    assert public_tree(MemorySource(copy), dom, [("x", "y")]) == [("x", "y")]



def test_a_public_source_that_cannot_answer_fails_before_any_charge():
    """The tree is read from the public source before AIM measures anything."""
    from privmarg.data import PrecomputedSource

    data = chain_table(2000)
    abc = MemorySource(data).marginals([("a", "b", "c")])[0]
    public = PrecomputedSource(data.domain, {("a", "b", "c"): abc}, count=2000)  # no pair with d or e
    mech = _aim(0.02, 0)
    with pytest.raises(KeyError, match="covering"):
        mech.fit(data, public=public)
    assert mech.accountant_.rho_spent == 0


def test_a_large_budget_with_a_public_n_reads_nothing_public():
    """Under replace-one N is public, so where the rule says no the public table is not read at all:
    the source that cannot answer the tree's pairs is never asked, and the fit spends its budget."""
    from privmarg.data import PrecomputedSource

    data = chain_table(2000)
    abc = MemorySource(data).marginals([("a", "b", "c")])[0]
    public = PrecomputedSource(data.domain, {("a", "b", "c"): abc}, count=2000)
    mech = _aim(20.0, 0).fit(data, public=public)
    assert not mech.public_start_
    assert mech.accountant_.rho_spent == pytest.approx(mech.rho_total, rel=1e-9)


def test_a_one_value_column_never_enters_the_tree():
    """Its mutual information is rounding (about 1e-16), never beyond chance."""
    dom = Domain(["a", "b", "c"], [1, 7, 3])
    for seed in range(30):
        r = np.random.default_rng(seed)
        data = Dataset(np.column_stack([np.zeros(50, dtype=int), r.integers(0, 7, 50), r.integers(0, 3, 50)]), dom)
        tree = public_tree(MemorySource(data), dom, [("a", "b"), ("a", "c")])
        assert tree == []
    assert chance_information((1, 7), 50) == math.inf


def test_the_tree_is_read_in_batches_alike(monkeypatch):
    import privmarg.select.public_start as ps

    data = chain_table(3000)
    pairs = [c for c, _ in all_kway(data.domain, 2)]
    whole = public_tree(MemorySource(data), data.domain, pairs)
    monkeypatch.setattr(ps, "PAIRS_PER_READ", 3)
    assert public_tree(MemorySource(data), data.domain, pairs) == whole


def test_aims_model_size_limit_caps_the_public_tree():
    data = chain_table(3000)
    public = chain_table(2000, seed=5)
    full = _aim(0.2, 0, public_start=True).fit(data, public=public)
    small = _aim(0.2, 0, public_start=True, max_model_size=2e-4).fit(data, public=public)
    tree = lambda m: [x.attrs for x in m.measurements_ if x.source == "public"]
    assert len(tree(small)) < len(tree(full))
    assert sum(data.domain.size(e) for e in tree(small)) * 8 <= 2e-4 * 2**20
