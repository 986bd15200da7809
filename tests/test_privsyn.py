"""PrivSyn (DenseMarg selection + GUM) and the Gaussian workload baseline (issue #19)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privmarg import Dataset, Domain, Measurement, load, registry
from privmarg.generate import gum
from privmarg.generate.gum import GUM, make_consistent, norm_sub, update_records
from privmarg.generate.records import RecordsModel
from privmarg.privacy import recompute_rho
from privmarg.select.privbayes import dependence_score
from privmarg.select.privsyn import (
    combine,
    connect_uncovered,
    greedy_pairs,
    indif_sensitivity,
    indif_sigma,
    noise_error,
    small_cliques,
)

FAST_GUM = dict(iters=8, consistency_iters=30)


def correlated(n=2000, seed=0) -> Dataset:
    rng = np.random.default_rng(seed)
    dom = Domain(["a", "b", "c", "d", "e"], [4, 3, 5, 2, 3])
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.8, a % 3, rng.integers(0, 3, n))
    c = (2 * b + rng.integers(0, 2, n)) % 5
    d = ((c > 2) ^ (rng.random(n) < 0.1)).astype(int)
    e = rng.integers(0, 3, n)
    return Dataset(np.column_stack([a, b, c, d, e]), dom)


def marginal(data: Dataset, attrs) -> np.ndarray:
    return data.project(attrs)


# ------------------------------------------------------------------------ InDif and its noise
@pytest.mark.parametrize("nb, delta", [("add_remove", 4.0), ("replace_one", 6.0)])
def test_indif_noise_scale_is_the_closed_form(nb, delta):
    m, rho = 10, 0.003
    assert indif_sensitivity(nb) == delta
    assert indif_sigma(nb, m, rho) == pytest.approx(delta * math.sqrt(m) / math.sqrt(2 * rho), rel=1e-12)
    # and that is what a run charges: one Gaussian release of all pairs, phase "selection"
    data = correlated(300)
    fit = registry.make_preset("privsyn", rho=0.05, seed=1, neighbour=nb, generator=GUM(**FAST_GUM)).fit(data)
    ledger = fit.privacy_report()["ledger"]
    (entry,) = [e for e in ledger if "InDif" in e["what"]]
    pairs = math.comb(len(data.domain), 2)
    rho_indif = 0.1 * fit.rho_total
    assert entry["sigma"] == pytest.approx(delta * math.sqrt(pairs) / math.sqrt(2 * rho_indif), rel=1e-12)
    assert entry["l2_sensitivity"] == pytest.approx(delta * math.sqrt(pairs))
    assert recompute_rho(entry) == pytest.approx(rho_indif, rel=1e-12)
    assert entry["phase"] == "selection"
    assert fit.privacy_report()["rho_by_phase"]["selection"] == pytest.approx(rho_indif, rel=1e-12)
    assert fit.selection_.extra["indif_sigma"] == entry["sigma"]


def test_indif_sensitivity_holds_on_neighbouring_tables():
    """Largest change of one pair's InDif over random tables and their neighbours stays under the
    stated bound (add/remove < 4, replace-one <= 6), and gets within a factor 2.5 of it (the search
    is not vacuous)."""
    rng = np.random.default_rng(0)
    worst = {"add_remove": 0.0, "replace_one": 0.0}
    for _ in range(400):
        ka, kb = rng.integers(2, 5, 2)
        n = int(rng.integers(1, 12))
        t = np.zeros((ka, kb))
        np.add.at(t, (rng.integers(0, ka, n), rng.integers(0, kb, n)), 1)
        s = dependence_score(t)
        i, j = rng.integers(0, ka), rng.integers(0, kb)
        added = t.copy()
        added[i, j] += 1
        worst["add_remove"] = max(worst["add_remove"], abs(dependence_score(added) - s))
        src = np.argwhere(t > 0)[rng.integers(0, int((t > 0).sum()))]
        moved = t.copy()
        moved[tuple(src)] -= 1
        moved[i, j] += 1
        worst["replace_one"] = max(worst["replace_one"], abs(dependence_score(moved) - s))
    for nb, w in worst.items():
        assert indif_sensitivity(nb) / 2.5 < w <= indif_sensitivity(nb), (nb, w)


# -------------------------------------------------------------------------------- selection
def test_noise_error_is_the_expected_l1_noise_of_the_allocation():
    cells, rho = np.array([4.0, 30.0, 100.0]), 0.2
    s = (cells ** (2 / 3)).sum()
    sig = 1 / np.sqrt(2 * rho * cells ** (2 / 3) / s)  # σ_i with ρ_i ∝ n_i^{2/3}
    assert noise_error(cells, rho) == pytest.approx(float((cells * sig * math.sqrt(2 / math.pi)).sum()), rel=1e-12)


def test_greedy_picks_the_dependent_pairs_and_stops():
    dom = Domain(["a", "b", "c", "d"], [2, 2, 2, 2])
    pairs = list(itertools.combinations(dom.attrs, 2))  # ab ac ad bc bd cd
    indif = np.array([90_000.0, 0, 0, 0, 0, 60_000.0])
    cells = np.full(6, 4.0)
    chosen = greedy_pairs(indif, cells, rho=1.0, l2=1.0, gap=20_000)
    assert [pairs[j] for j in chosen] == [("a", "b"), ("c", "d")]  # largest first; then no gain
    # a noisy budget makes a second pair not worth its noise: only the first (always kept)
    noisy = greedy_pairs(np.array([90_000.0, 0, 0, 0, 0, 60_000.0]), np.full(6, 1e6), rho=0.01, l2=1.0, gap=20_000)
    assert noisy == [0]
    # a large gap stops after the first pair too
    assert greedy_pairs(indif, cells, rho=1.0, l2=1.0, gap=70_000) == [0]


def test_uncovered_attributes_connect_through_their_best_pair():
    dom = Domain(["a", "b", "c", "d"], [2, 2, 2, 2])
    pairs = list(itertools.combinations(dom.attrs, 2))  # ab ac ad bc bd cd
    indif = np.array([100.0, 5.0, 1.0, 7.0, 9.0, 50.0])
    extra = connect_uncovered(dom.attrs, pairs, indif, [0])  # a, b covered
    # c joins through bc (7 > 5), d through bd (9 > 1); never through cd (both uncovered)
    assert [pairs[j] for j in extra] == [("b", "c"), ("b", "d")]


def test_combine_merges_cliques_under_the_cell_limit():
    dom = Domain(["a", "b", "c", "d", "e"], [2, 3, 4, 5, 6])
    chosen = [("a", "b"), ("a", "c"), ("b", "c"), ("c", "d"), ("d", "e")]
    assert combine(dom, chosen) == [("a", "b", "c"), ("c", "d"), ("d", "e")]
    assert combine(dom, chosen, max_cells=24) == chosen  # abc has 24 cells: not < 24
    # two triangles sharing one attribute both combine; a third sharing 3 does not
    dom4 = Domain(list("abcdef"), [2] * 6)
    tri = [("a", "b"), ("a", "c"), ("b", "c"), ("c", "d"), ("c", "e"), ("d", "e")]
    assert combine(dom4, tri) == [("a", "b", "c"), ("c", "d", "e")]
    k4 = list(itertools.combinations("abcd", 2))
    out = combine(dom4, k4)
    assert out[0] == ("a", "b", "c", "d") and len(out) == 1  # its triangles share 3 attributes


def test_small_cliques_enumerates_exactly_the_cliques_below_the_limit():
    dom = Domain(list("abcde"), [2, 3, 4, 5, 6])
    got = set(small_cliques(dom, None, 50))
    want = {c for k in range(3, 6) for c in itertools.combinations(dom.attrs, k) if dom.size(c) < 50}
    assert got == want and want


def test_selector_measures_with_power_two_thirds_allocation_and_spends_exactly():
    data = correlated()
    fit = registry.make_preset("privsyn", 1.0, 1e-6, seed=2, gap=0.0, generator=GUM(**FAST_GUM)).fit(data)
    rep = fit.privacy_report()
    assert sum(e["rho"] for e in rep["ledger"]) == pytest.approx(fit.rho_total, rel=1e-12)
    marginals = fit.selection_.extra["marginals"]
    assert marginals and all(len(c) >= 2 for c in marginals)
    chosen = [e for e in rep["ledger"] if e["what"].startswith("PrivSyn marginal")]
    assert len(chosen) == len(marginals)
    ratio = [e["rho"] / data.domain.size(c) ** (2 / 3) for e, c in zip(chosen, marginals)]
    assert np.allclose(ratio, ratio[0], rtol=1e-12)
    assert sum(e["rho"] for e in chosen) == pytest.approx(0.8 * fit.rho_total, rel=1e-12)
    ones = [e for e in rep["ledger"] if "1-way" in e["what"]]
    assert len(ones) == 5 and sum(e["rho"] for e in ones) == pytest.approx(0.1 * fit.rho_total, rel=1e-12)
    # the strongly dependent pairs are found: a-b and b-c appear in some marginal
    covered = {p for c in marginals for p in itertools.combinations(c, 2)}
    assert ("a", "b") in covered and ("b", "c") in covered


def test_seeded_runs_repeat_and_seeds_differ():
    data = correlated(600)

    def run(seed):
        return registry.make_preset("privsyn", 1.0, 1e-6, seed=seed, generator=GUM(**FAST_GUM)).fit(data)

    a, b, c = run(4), run(4), run(5)
    assert np.array_equal(a.sample_codes(300), b.sample_codes(300))
    assert a.selection_.extra["indif"] == b.selection_.extra["indif"]
    assert a.selection_.extra["indif"] != c.selection_.extra["indif"]


# ---------------------------------------------------------------------------------------- GUM
# the default margin (every record kept: five per cell); a small one (Bernoulli pre-selection,
# some cells short); none (cells often short: the redraw path)
@pytest.mark.parametrize("spare", [(8.0, 4.0), (0.5, 0.0), (0.0, 0.0)])
def test_gum_leavers_are_uniform_subsets_of_each_cell(monkeypatch, spare):
    """GUM's draw of the records that leave a cell: exactly the quota, from that cell, and every
    pair of subsets (one per giving cell) equally likely: uniform within cells, independent across."""
    monkeypatch.setattr(gum, "_SPARE", spare[0])
    monkeypatch.setattr(gum, "_SPARE_SD", spare[1])
    cell = np.array([0, 1, 0, 2, 0, 1, 0, 2, 1, 2, 2, 1, 0, 2, 1])  # five records in each cell
    counts = np.bincount(cell)
    take = np.array([2, 0, 3])
    rng = np.random.default_rng(0)
    seen: dict = {}
    trials = 20000
    for _ in range(trials):
        got = gum._uniform_subsets(cell, counts, take, rng)
        assert len(set(got.tolist())) == got.size == 5
        assert not np.any(cell[got] == 1)
        joint = tuple(tuple(sorted(int(i) for i in got if cell[i] == c)) for c in (0, 2))
        assert [len(j) for j in joint] == [2, 3]
        seen[joint] = seen.get(joint, 0) + 1
    n_joint = math.comb(5, 2) * math.comb(5, 3)
    assert len(seen) == n_joint
    expected = trials / n_joint
    chi2 = sum((v - expected) ** 2 / expected for v in seen.values())
    assert chi2 < 99 + 5 * math.sqrt(2 * 99)  # df 99: p ~ 1e-5 under uniformity and independence


def test_gum_copies_come_from_uniform_records_of_their_cell():
    """Whole-record copies into an under-full cell take their sources uniformly (with replacement)
    from the records already there: an id column shows which record was copied."""
    n, lenders = 200, 10
    ids = np.arange(n)
    a = (ids < lenders).astype(np.int64)  # cell 1 holds 10 records, cell 0 the rest
    target = np.array([0.5, 0.5])
    used = np.zeros(n, dtype=np.int64)
    for seed in range(1500):
        r = np.stack([a, ids], axis=1)
        update_records(r, [0], [2], target, 1.0, 1.0, np.random.default_rng(seed))
        moved = (a == 0) & (r[:, 0] == 1)
        assert moved.sum() == lenders  # min(p − q, α·q)·N = 10 copies
        np.add.at(used, r[moved, 1], 1)
    assert used[lenders:].sum() == 0  # sources only from the lending cell
    expected = used.sum() / lenders
    chi2 = ((used[:lenders] - expected) ** 2 / expected).sum()
    assert chi2 < 9 + 5 * math.sqrt(18)  # df 9


def test_gum_grouping_lists_each_wanted_cell_whole():
    rng = np.random.default_rng(1)
    cell = rng.integers(0, 70000, size=5000)
    # above 2^16 cells the general sort, at or below it the 16-bit radix one: both sides of the
    # boundary with the top cell occupied, and a small table
    for cells, ncell in ((cell, 70000), (cell % 65537, 65537), (cell % 65536, 65536), (cell % 300, 300)):
        cells = np.append(cells, ncell - 1)
        counts = np.bincount(cells, minlength=ncell)
        wanted = rng.random(counts.size) < 0.3
        wanted[-1] = True
        members, start = gum._grouped(cells, counts, wanted)
        assert sorted(members.tolist()) == np.flatnonzero(wanted[cells]).tolist()
        for c in [*np.flatnonzero(wanted & (counts > 0))[:50], ncell - 1]:
            assert members[start[c]:start[c] + counts[c]].tolist() == np.flatnonzero(cells == c).tolist()


def test_gum_step_moves_the_marginal_to_its_planned_counts():
    """One step's marginal is fixed up to rounding, whatever records are drawn: over cells lose,
    under and empty cells gain what they ask for, short of it by at most the quotas' rounding."""
    rng = np.random.default_rng(2)
    n = 4000
    records = np.stack([rng.integers(0, 3, size=n), rng.integers(0, 4, size=n), rng.integers(0, 2, size=n)], axis=1)
    records[records[:, 0] == 2, 1] = 0  # cells (2, 1..3) empty
    target = rng.dirichlet(np.ones(12)).reshape(3, 4)
    q = np.bincount(records[:, 0] * 4 + records[:, 1], minlength=12) / n
    p = target.ravel()
    under, empty = (q < p) & (q > 0), (q == 0) & (p > 0)
    want = np.zeros(12)
    want[under] = np.rint(np.minimum(p - q, 1.0 * q)[under] * n)
    want[empty] = np.rint(p[empty] * n)
    for seed in range(3):
        r = records.copy()
        update_records(r, [0, 1], [3, 4], target, 1.0, 0.5, np.random.default_rng(seed))
        after = np.bincount(r[:, 0] * 4 + r[:, 1], minlength=12)
        before = np.round(q * n).astype(int)
        gained = after - before
        asks = under | empty
        assert np.all((gained[asks] >= 0) & (gained[asks] <= want[asks]))
        # the over cells' rounded quotas may fall short of the requests by under one record each
        assert (want - gained)[asks].sum() <= (q > p).sum() / 2
        assert np.all(gained[~asks] <= 0)
        assert gained.sum() == 0
        assert np.abs(after / n - p).sum() < np.abs(q - p).sum()


def test_norm_sub_is_the_projection_onto_the_scaled_simplex():
    rng = np.random.default_rng(1)
    for i in range(60):
        x = rng.normal(3, 5, 12)
        if i % 3 == 1:
            x = np.round(x)  # ties at the threshold
        total = 1000.0 if i % 3 == 2 else 40.0  # above the sum: δ < 0, every cell lifted
        y = norm_sub(x, total)
        assert (y >= 0).all() and y.sum() == pytest.approx(total)
        pos = y > 0  # KKT: one shift δ for every positive cell, and the zero cells lie below it
        d = x[pos] - y[pos]
        assert np.allclose(d, d[0]) and (x[~pos] <= d[0] + 1e-9).all()
    mask = np.array([True, False, True, True])
    assert norm_sub(np.array([5.0, 5.0, -1.0, 2.0]), 6.0, mask)[1] == 0.0


def test_consistency_makes_shared_attributes_agree():
    dom = Domain(["a", "b", "c"], [3, 4, 2])
    rng = np.random.default_rng(2)
    est = {("a", "b"): (rng.uniform(0, 20, (3, 4)), 1.0), ("b", "c"): (rng.uniform(0, 30, (4, 2)), 4.0),
           ("a",): (rng.uniform(0, 40, 3), 0.5)}
    out = make_consistent(est, dom, 100.0)
    for v in out.values():
        assert (v >= 0).all() and v.sum() == pytest.approx(100.0)
    assert np.allclose(out[("a", "b")].sum(axis=0), out[("b", "c")].sum(axis=1), atol=1e-3)
    assert np.allclose(out[("a", "b")].sum(axis=1), out[("a",)], atol=1e-3)


def test_gum_reproduces_noiseless_marginals():
    data = correlated(2000)
    dom = data.domain
    pairs = list(itertools.combinations(dom.attrs, 2))
    cliques = [(a,) for a in dom.attrs] + pairs
    meas = [Measurement(c, marginal(data, c), 1e-6) for c in cliques]
    model = GUM().generate(meas, dom, total=float(len(data)), seed=np.random.SeedSequence(0))
    assert isinstance(model, RecordsModel) and model.codes_.shape == (2000, 5)
    tv = [0.5 * np.abs(model.project(p) - marginal(data, p)).sum() / len(data) for p in pairs]
    assert np.mean(tv) < 0.02, tv
    # the starting point (independent 1-ways) is far from them: the updates did the work
    start = GUM(iters=0).generate(meas, dom, total=float(len(data)), seed=np.random.SeedSequence(0))
    tv0 = [0.5 * np.abs(start.project(p) - marginal(data, p)).sum() / len(data) for p in pairs]
    assert np.mean(tv0) > 3 * np.mean(tv)


def test_gum_estimates_the_total_and_samples_from_its_records():
    data = correlated(500)
    dom = data.domain
    meas = [Measurement(c, marginal(data, c) + 0.3, 1.0) for c in [("a", "b"), ("c",), ("d", "e")]]
    model = GUM(**FAST_GUM).generate(meas, dom, seed=np.random.SeedSequence(1))
    assert abs(model.total - 500) < 10 and model.codes_.shape[0] == round(model.total)
    rng = np.random.default_rng(0)
    assert model.sample(20, rng).shape == (20, 5)
    more = model.sample(model.codes_.shape[0] + 7, rng)
    rows = {tuple(r) for r in model.codes_}
    assert all(tuple(r) in rows for r in more)
    cond = model.sample_conditional(30, rng, {"a": 2})
    assert (cond[:, 0] == 2).all()


def test_saved_gum_model_samples_identically(tmp_path):
    data = correlated(400)
    fit = registry.make_preset("privsyn", 1.0, 1e-6, seed=3, generator=GUM(**FAST_GUM)).fit(data)
    fit.save(tmp_path / "m")
    back = load(tmp_path / "m")
    assert back.info["model"]["kind"] == "records" and back.info["generator"]["name"] == "gum"
    assert np.array_equal(back.model_.codes_, fit.model_.codes_)
    assert np.array_equal(back.sample_codes(333, seed=11), fit.sample_codes(333, seed=11))
    assert np.array_equal(back.sample_codes(seed=5), fit.sample_codes(seed=5))


# ------------------------------------------------------------------------- Gaussian baseline
@pytest.mark.parametrize("nb", ["add_remove", "replace_one"])
def test_gaussian_measures_every_workload_marginal_with_two_thirds_allocation(nb):
    data = correlated(300)
    wl = [[["a", "b"], 1.0], [["c", "d", "e"], 1.0], [["a", "b"], 1.0]]  # ab twice: weight 2
    fit = registry.make_preset("gaussian", rho=0.1, seed=0, neighbour=nb, workload=wl, generator=GUM(**FAST_GUM)).fit(data)
    ledger = fit.privacy_report()["ledger"]
    assert [e["what"].rsplit(" ", 1)[-1] for e in ledger] == ["a,b", "c,d,e"]
    assert sum(e["rho"] for e in ledger) == pytest.approx(0.1, rel=1e-12)
    w = [(2 * 12) ** (2 / 3), (30) ** (2 / 3)]
    assert [e["rho"] for e in ledger] == pytest.approx([0.1 * x / sum(w) for x in w], rel=1e-12)
    l2 = 1.0 if nb == "add_remove" else math.sqrt(2)
    for e in ledger:
        assert e["sigma"] == pytest.approx(l2 / math.sqrt(2 * e["rho"]), rel=1e-12)


def test_gaussian_default_workload_is_aims():
    from privmarg.select.gaussian import GaussianSelector

    dom = Domain(list("abcd"), [2] * 4)
    assert GaussianSelector().supporting_cliques(dom) == list(itertools.combinations("abcd", 3))
