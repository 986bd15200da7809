"""Private-GSD's genetic generator, GEM's generator network and selection, PMW^Pub and GEM^Pub (issue #19)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privmarg import Dataset, Measurement, MemorySource, load, registry
from privmarg.generate.genetic import GeneticGenerator, GSDState, _start
from privmarg.generate.pmw_pub import PublicReweighting
from privmarg.generate.records import RecordsModel
from privmarg.generate.targets import marginal_targets
from privmarg.privacy import recompute_rho
from privmarg.select.gem import gem_measure_share

from test_contract import table, zeros

torch = pytest.importorskip("torch")

PAIRS = lambda dom: list(itertools.combinations(dom.attrs, 2))  # noqa: E731


def exact_pairs(data: Dataset) -> list[Measurement]:
    """Noiseless 2-way marginals (sigma only sets the loss weight)."""
    return [Measurement(c, data.project(c), 1.0) for c in PAIRS(data.domain)]


def mean_tv(codes: np.ndarray, data: Dataset) -> float:
    syn = Dataset(codes, data.domain)
    return float(np.mean([0.5 * np.abs(syn.project(c) / len(codes) - data.project(c) / len(data)).sum()
                          for c in PAIRS(data.domain)]))


# ------------------------------------------------------------------------------- genetic
def test_incremental_fitness_equals_recomputation():
    data = table(300)
    dom = data.domain
    rng = np.random.default_rng(1)
    ms = [Measurement(c, data.project(c) + rng.normal(0, 3, dom.size(c)), 3.0) for c in PAIRS(dom)]
    ms.append(Measurement(("a",), data.project(("a",)), 0.5))  # another weight: the weighting is checked too
    targets = marginal_targets(ms, dom)
    st = GSDState(dom, targets, 300.0, _start(targets, dom, 200, rng), zeros(dom))
    for _ in range(3):
        rows, new = st.candidates(rng, 20, 20)
        dl = st.deltas(rows, new)
        base = st.loss_of(st.X)
        assert st.loss() == pytest.approx(base, rel=1e-12, abs=1e-15)
        for p in range(len(rows)):
            X = st.X.copy()
            X[rows[p]] = new[p]
            if np.isfinite(dl[p]):
                assert dl[p] == pytest.approx(st.loss_of(X) - base, rel=1e-9, abs=1e-12)
            else:  # a candidate in the structural zero: never accepted
                assert any(z.violations(X, dom) for z in zeros(dom))
        for _ in range(50):
            st.generation(rng, 20, 20, 5)
    # after many accepted generations the kept residuals are still the from-scratch ones
    cells = st.X @ st.strides + st.offsets
    fresh = st.target - np.bincount(cells.ravel(), minlength=st.target.size)
    assert np.allclose(st.R, fresh, rtol=0, atol=1e-9)  # ±1 increments vs one subtraction: rounding only
    assert np.array_equal(st.cells, cells)
    assert st.loss() == pytest.approx(st.loss_of(st.X), rel=1e-12)


def test_genetic_reproduces_noiseless_two_way_marginals():
    data = table(1000)
    model = GeneticGenerator(generations=20_000).generate(exact_pairs(data), data.domain,
                                                          zeros=zeros(data.domain), seed=0)
    codes = model.sample(1000, np.random.default_rng(0))
    assert mean_tv(codes, data) < 0.02
    assert model.fit_info["loss"] < model.fit_info["initial_loss"] / 100
    assert all(z.violations(codes, data.domain) == 0 for z in zeros(data.domain))


def test_genetic_rows_cap_and_resampling():
    data = table(400)
    model = GeneticGenerator(generations=50, max_rows=100).generate(exact_pairs(data), data.domain, total=400.0,
                                                                    seed=0)
    assert model.codes_.shape == (100, 4) and model.total == 400.0
    assert model.project(("a",)).sum() == pytest.approx(400.0)
    big = model.sample(400, np.random.default_rng(1))  # every record, then draws with replacement
    assert len(big) == 400 and len(np.unique(big, axis=0)) <= len(np.unique(model.codes_, axis=0))
    again = GeneticGenerator(generations=50, max_rows=100).generate(exact_pairs(data), data.domain, total=400.0,
                                                                    seed=0)
    assert np.array_equal(again.codes_, model.codes_)


# ----------------------------------------------------------------------------------- GEM
def test_gem_reproduces_noiseless_two_way_marginals_and_is_seeded():
    from privmarg.generate.gem import GEMGenerator

    data = table(1000)
    gen = GEMGenerator(steps=400, hidden=(128, 128), latent_dim=32, batch_size=256, device="cpu")
    model = gen.generate(exact_pairs(data), data.domain, zeros=zeros(data.domain), seed=4)
    codes = model.sample(20_000, np.random.default_rng(0))
    assert mean_tv(codes, data) < 0.02
    assert all(z.violations(codes, data.domain) == 0 for z in zeros(data.domain))
    # the relaxed answers are what the samples follow
    rel = np.mean([0.5 * np.abs(model.project(c) / model.total - data.project(c) / len(data)).sum()
                   for c in PAIRS(data.domain)])
    assert abs(rel - mean_tv(codes, data)) < 0.01
    again = GEMGenerator(steps=20, hidden=(128, 128), latent_dim=32, batch_size=256, device="cpu")
    a = again.generate(exact_pairs(data), data.domain, seed=4)
    b = again.generate(exact_pairs(data), data.domain, seed=4)
    assert all(torch.equal(p, q) for p, q in zip(a.params, b.params))
    assert np.array_equal(a.sample(50, np.random.default_rng(2)), b.sample(50, np.random.default_rng(2)))


def test_gem_warm_start_continues_training():
    from privmarg.generate.gem import GEMGenerator

    data = table(500)
    gen = GEMGenerator(steps=30, hidden=(32, 32), latent_dim=8, batch_size=64)
    first = gen.generate(exact_pairs(data), data.domain, seed=1)
    more = gen.generate(exact_pairs(data), data.domain, warm=first)
    assert torch.equal(more.latent, first.latent)  # the same fixed batch
    assert more.fit_info["max_error"] < first.fit_info["max_error"]


def test_gem_rounds_use_gems_split():
    """ε₀ = √(2ρ/(T(α² + (1−α)²))); EM with ε = 2αε₀, Gaussian σ = Δ₂/((1−α)ε₀) (SPEC §10.5)."""
    data = table()
    for alpha in (0.5, 0.3):
        s = registry.make_preset("gem", 1.0, 1e-6, seed=0, rounds=3, alpha=alpha, steps=5, batch_size=16,
                                 latent_dim=4, hidden=(8,))
        s.fit(data)
        T, rho = 3, s.rho_total
        eps0 = math.sqrt(2 * rho / (T * (alpha**2 + (1 - alpha) ** 2)))
        assert len(s.log_) == T
        for r in s.log_:
            assert r["epsilon"] == pytest.approx(2 * alpha * eps0, rel=1e-9)
            assert r["sigma"] == pytest.approx(1 / ((1 - alpha) * eps0), rel=1e-9)
        assert s.privacy_report()["rho_spent"] == pytest.approx(rho, rel=1e-9)
    assert gem_measure_share(0.5) == 0.5
    dflt = registry.make_preset("gem", 1.0, 1e-6, seed=0, steps=1, batch_size=8, latent_dim=4, hidden=(8,))
    dflt.fit(table(200))
    assert len(dflt.log_) == 5 * 4  # T = 5d by default


# ------------------------------------------------------------------------- public data
def test_pmw_pub_reweights_the_public_records():
    private, public = table(400), table(300, seed=9)
    s = registry.make_preset("pmw-pub", 1.0, 1e-6, seed=2, workload="all-2way", rounds=6, iters=50)
    s.fit(private, public=public)
    model = s.model_
    assert isinstance(model, RecordsModel) and model.weights is not None
    pub_rows = {tuple(r) for r in public.codes}
    assert all(tuple(r) in pub_rows for r in s.sample_codes(500))  # only public records appear
    start = PublicReweighting().pretrain(MemorySource(public), private.domain, PAIRS(private.domain), 400.0)
    # the private rounds moved the distribution toward the private data
    assert mean_tv(s.sample_codes(20_000, seed=0), private) < mean_tv(start.sample(20_000, np.random.default_rng(0)),
                                                                      private)
    for c in s.privacy_report()["ledger"]:
        assert recompute_rho(c) == pytest.approx(c["rho"], rel=1e-9)


def test_pmw_pub_needs_public_data_and_records():
    from privmarg import PrecomputedSource

    with pytest.raises(ValueError, match="public"):
        registry.make_preset("pmw-pub", 1.0, 1e-6, rounds=2).fit(table())
    pub = PrecomputedSource.from_source(MemorySource(table(100, seed=3)), PAIRS(table().domain))
    with pytest.raises(ValueError, match="table"):
        registry.make_preset("pmw-pub", 1.0, 1e-6, rounds=2, workload="all-2way").fit(table(), public=pub)


def test_gem_pub_starts_from_the_public_marginals():
    private, public = table(400), table(300, seed=9)
    s = registry.make_preset("gem-pub", 1.0, 1e-6, seed=2, workload="all-2way", rounds=2, steps=5,
                             pretrain_steps=300, batch_size=128, latent_dim=16, hidden=(64, 64))
    s.fit(private, public=public)
    sel = s.selector
    # the start alone (rebuilt the same way) already fits the public marginals
    start = sel.loop.pretrain(MemorySource(public), private.domain, PAIRS(private.domain), 400.0)
    assert mean_tv(start.sample(20_000, np.random.default_rng(0)), public) < 0.05
    assert s.privacy_report()["rho_spent"] == pytest.approx(s.rho_total, rel=1e-9)
    assert all(m.source == "private" for m in s.measurements_)  # the public marginals are not releases


# ------------------------------------------------------------------------- saved models
@pytest.mark.parametrize("name, params, public", [
    ("gsd", dict(generations=200), False),
    ("gem", dict(rounds=2, steps=5, batch_size=16, latent_dim=4, hidden=(8, 8)), False),
    ("pmw-pub", dict(rounds=2, iters=5, workload="all-2way"), True),
])
def test_saved_models_sample_identically(tmp_path, name, params, public):
    data = table()
    s = registry.make_preset(name, 1.0, 1e-6, seed=1, **params)
    s.fit(data, zeros=zeros(data.domain), **({"public": table(150, seed=9)} if public else {}))
    s.save(tmp_path / "m")
    loaded = load(tmp_path / "m")
    assert np.array_equal(loaded.sample_codes(300, seed=7), s.sample_codes(300, seed=7))
    for c in PAIRS(data.domain):
        assert np.allclose(loaded.model_.project(c), s.model_.project(c))
    assert loaded.privacy_report()["rho_spent"] == pytest.approx(s.privacy_report()["rho_spent"], rel=1e-12)


def test_gem_conditional_sampling_matches_the_mixture():
    from privmarg.generate.gem import GEMGenerator

    data = table(500)
    model = GEMGenerator(steps=50, hidden=(32, 32), latent_dim=8, batch_size=64).generate(
        exact_pairs(data), data.domain, zeros=zeros(data.domain), seed=0)
    codes = model.sample_conditional(40_000, np.random.default_rng(0), {"a": 3})
    assert (codes[:, 0] == 3).all()
    assert all(z.violations(codes, data.domain) == 0 for z in zeros(data.domain))
    # P(b | a=3) from the relaxed marginal (zero cell moved by the repair: compare the other cells)
    joint = model.project(("a", "b")).reshape(4, 3)[3]
    want = joint / joint.sum()
    got = np.bincount(codes[:, 1], minlength=3) / len(codes)
    assert got[2] == 0 and np.allclose(got[:2] / got[:2].sum(), want[:2] / want[:2].sum(), atol=0.02)


def test_gem_relaxed_answers_of_larger_cliques_equal_the_einsum():
    """3- and 4-way relaxed answers (outer product then one matrix product) equal the batch mean of
    the per-row outer products, in the measured order of mixed 1-, 2-, 3- and 4-way cliques."""
    import torch

    from privmarg.core import Domain
    from privmarg.generate.gem import _Answers

    dom = Domain(["a", "b", "c", "d"], [2, 3, 4, 5])
    starts = dict(zip(dom.attrs, np.cumsum([0, 2, 3, 4])))
    cliques = [("a", "b", "c"), ("b",), ("a", "c", "d"), ("c", "d"), ("a", "b", "c", "d")]
    S = torch.rand(7, 14, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = _Answers(dom, cliques, starts, "cpu")(S)
    blk = {a: S[:, starts[a]:starts[a] + dom[a]] for a in dom.attrs}
    want = []
    for c in cliques:
        sub = ",".join("z" + "ijkl"[i] for i in range(len(c))) + "->" + "ijkl"[:len(c)]
        want.append(torch.einsum(sub, *[blk[a] for a in c]).reshape(-1) / S.shape[0])
    torch.testing.assert_close(got, torch.cat(want), rtol=1e-12, atol=1e-15)


def test_gem_answers_of_chosen_cells_and_their_gradient_match_the_full_vector():
    """The answers of a few chosen cells (what a training step differentiates) equal those entries
    of the full answer vector, and so does the gradient of their mean."""
    import torch

    from privmarg.core import Domain
    from privmarg.generate.gem import _Answers

    dom = Domain(["a", "b", "c", "d"], [2, 3, 4, 5])
    starts = dict(zip(dom.attrs, np.cumsum([0, 2, 3, 4])))
    cliques = [("a", "b", "c"), ("b",), ("a", "c", "d"), ("c", "d"), ("a", "b", "c", "d")]
    ans = _Answers(dom, cliques, starts, "cpu")
    S = torch.rand(7, 14, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
    full = ans(S)
    idx = torch.tensor([0, 23, 24, 26, 40, 100, len(full) - 1, 5])
    part = ans.cells(S, idx)
    torch.testing.assert_close(part, full[idx], rtol=1e-12, atol=1e-15)
    g_full, = torch.autograd.grad(full[idx].mean(), S)
    g_part, = torch.autograd.grad(part.mean(), S)
    torch.testing.assert_close(g_part, g_full, rtol=1e-12, atol=1e-15)


def test_weighted_records_are_drawn_systematically():
    """Each record ⌊n·p⌋ or ⌈n·p⌉ times, mean exactly n·p over seeds, zero weights never drawn."""
    from privmarg.generate.draws import systematic_draw

    w = np.random.default_rng(3).random(50)
    w[[4, 17]] = 0.0
    p = w / w.sum()
    n = 333
    counts = np.array([np.bincount(systematic_draw(w, n, np.random.default_rng(s)), minlength=50)
                       for s in range(3000)])
    assert (counts.sum(axis=1) == n).all()
    assert (counts >= np.floor(n * p)).all() and (counts <= np.ceil(n * p)).all()
    assert counts[:, [4, 17]].max() == 0
    # the mean count is n·p: within 4 standard errors of a Bernoulli remainder
    se = np.sqrt(np.maximum((n * p % 1) * (1 - n * p % 1), 1e-12) / 3000)
    assert (np.abs(counts.mean(axis=0) - n * p) <= 4 * se + 1e-9).all()
    # random order, not grouped by record
    draw = systematic_draw(w, n, np.random.default_rng(0))
    assert (np.diff(draw) != 0).sum() > n / 2


def _squared_miss(codes, counts, target, marginals, sizes):
    """Σ over the marginals' cells of (target − drawn)², the balanced draw's objective."""
    total = 0.0
    for cols in marginals:
        cell = np.ravel_multi_index(tuple(codes[:, c] for c in cols), tuple(sizes[c] for c in cols))
        want = np.bincount(cell, weights=target, minlength=int(np.prod([sizes[c] for c in cols])))
        got = np.bincount(cell, weights=counts, minlength=want.size)
        total += float(((want - got) ** 2).sum())
    return total


def test_balanced_draw_keeps_the_bounds_and_beats_the_systematic_one():
    """Each record still ⌊n·p⌋ or ⌈n·p⌉ times (zero weights never), the same seed gives the same
    rows, and the 1-/2-/3-way cells of the drawn rows are closer to n·p than the systematic draw it
    starts from (the same uniform number), by a wide margin on a table drawn down by a fifth."""
    from privmarg.generate.draws import balanced_draw, balancing_marginals, systematic_draw

    rng = np.random.default_rng(5)
    sizes = (3, 4, 2, 5, 3, 2)
    codes = np.column_stack([rng.integers(0, k, 2000) for k in sizes])
    codes[:, 1] = (codes[:, 0] + rng.integers(0, 2, 2000)) % 4  # a dependence to keep
    w = rng.random(2000)
    w[:7] = 0.0
    n = 1600
    p = w / w.sum()
    marginals = balancing_marginals(len(sizes), len(codes))
    assert len(marginals) == 6 + 15 + 20  # all of them fit the work limit here
    for seed in range(3):
        drawn = balanced_draw(codes, w, n, sizes, np.random.default_rng(seed))
        counts = np.bincount(drawn, minlength=2000)
        assert counts.sum() == n and counts[:7].max() == 0
        assert (counts >= np.floor(n * p)).all() and (counts <= np.ceil(n * p)).all()
        assert np.array_equal(drawn, balanced_draw(codes, w, n, sizes, np.random.default_rng(seed)))
        start = np.bincount(systematic_draw(w, n, np.random.default_rng(seed)), minlength=2000)
        before = _squared_miss(codes, start, n * p, marginals, sizes)
        after = _squared_miss(codes, counts, n * p, marginals, sizes)
        assert after < 0.5 * before, (before, after)


def test_balancing_marginals_fit_the_work_limit(monkeypatch):
    """Wide or long tables balance fewer marginals: 1-way first, then 2-way, within BALANCE_WORK."""
    from privmarg.generate import draws

    monkeypatch.setattr(draws, "BALANCE_WORK", 1000)
    got = draws.balancing_marginals(10, 40)  # 25 marginals fit
    assert len(got) == 25 and got[:10] == [(i,) for i in range(10)] and got[10] == (0, 1)
    assert draws.balancing_marginals(10, 2000) == []


def test_systematic_draw_never_lands_on_trailing_zero_weights():
    """Rounding dust in the cumulative weights (0.1 × 10 sums to 0.9999999999999999) must not give
    the zero-weight record after them the last sliver of [0, 1)."""
    from privmarg.generate.draws import systematic_draw

    class Top:  # the largest uniform below 1
        def random(self):
            return float(np.nextafter(1.0, 0.0))

        def shuffle(self, x):
            pass

    w = np.array([0.1] * 10 + [0.0])
    assert systematic_draw(w, 1, Top()).tolist() == [9]


def test_balanced_draw_of_a_few_records_of_a_wide_table_stays_cheap():
    """A conditional draw can meet 30 records of 200 columns: the balanced marginals are capped."""
    from privmarg.generate import draws

    assert len(draws.balancing_marginals(200, 30)) == draws.MAX_BALANCED
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 3, size=(30, 200))
    w = rng.random(30)
    got = np.bincount(draws.balanced_draw(codes, w, 220, (3,) * 200, rng), minlength=30)
    assert got.sum() == 220 and (np.abs(got - 220 * w / w.sum()) < 1).all()


def test_a_draw_of_a_few_rows_stays_systematic():
    """Below MIN_BALANCED_ROWS rows (a conditional draw per evidence pattern) the draw is the
    systematic one, rows for rows."""
    from privmarg.generate import draws

    rng = np.random.default_rng(2)
    codes = rng.integers(0, 4, size=(500, 5))
    w = rng.random(500)
    n = draws.MIN_BALANCED_ROWS - 1
    got = draws.balanced_draw(codes, w, n, (4,) * 5, np.random.default_rng(7))
    want = draws.systematic_draw(w / w.sum(), n, np.random.default_rng(7))
    assert np.array_equal(np.sort(got), np.sort(want))


def test_a_draw_of_many_copies_per_record_stays_systematic():
    """From MAX_BALANCED_COPIES copies per record on, the draw is the systematic one."""
    from privmarg.generate import draws

    rng = np.random.default_rng(3)
    codes = rng.integers(0, 4, size=(50, 5))
    w = rng.random(50)
    n = 50 * draws.MAX_BALANCED_COPIES
    got = draws.balanced_draw(codes, w, n, (4,) * 5, np.random.default_rng(1))
    want = draws.systematic_draw(w / w.sum(), n, np.random.default_rng(1))
    assert np.array_equal(np.sort(got), np.sort(want))
