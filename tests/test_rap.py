"""RAP, RAP++ and the relaxed-projection generator (issue #19): the simplex projection, fitting
noiseless marginals, warm starts and seeds, the Gumbel top-q charge against its closed form, exact
spend with a recomputable ledger under both neighbour relations, and saved models."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from privmarg import Dataset, Domain, Measurement, load, registry  # noqa: E402
from privmarg.data import MemorySource  # noqa: E402
from privmarg.generate.relaxed import RelaxedModel, RelaxedProjection, _Layout, simplex_project  # noqa: E402
from privmarg.measure import MeasurementSession  # noqa: E402
from privmarg.privacy import Accountant, recompute_rho  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_contract import table, zeros  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def chain(n=2000, seed=0) -> Dataset:
    rng = np.random.default_rng(seed)
    dom = Domain(["a", "b", "c", "d", "e"], [4, 3, 5, 2, 6])
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.8, a % 3, rng.integers(0, 3, n))
    c = (2 * b + rng.integers(0, 2, n)) % 5
    d = ((c > 2) ^ (rng.random(n) < 0.1)).astype(int)
    e = (a + 3 * d + rng.integers(0, 2, n)) % 6
    return Dataset(np.column_stack([a, b, c, d, e]), dom)


def marginals(data: Dataset, cliques) -> list[np.ndarray]:
    return MemorySource(data).marginals(cliques)


def tv(p, q) -> float:
    return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())


# ------------------------------------------------------------------------------ the generator
def _simplex_reference(v: np.ndarray) -> np.ndarray:
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1
    k = np.nonzero(u - css / np.arange(1, v.size + 1) > 0)[0][-1]
    return np.maximum(v - css[k] / (k + 1), 0)


def test_simplex_projection_in_float32_near_a_projected_iterate_and_at_large_scale():
    """What RAP's loop projects: float32 rows a small Adam-like step away from the simplex (a few
    fixed-point passes), and rows of entries up to ~100; 1-value blocks are exactly 1, blocks sum to 1,
    and the result matches the sort algorithm. The layout pickles without its device tensors."""
    import pickle

    dom = Domain(["a", "b", "c", "d"], [1, 3, 16, 40])
    lay = _Layout(dom)
    g = torch.Generator().manual_seed(1)
    P = simplex_project(torch.rand(200, lay.width, generator=g), lay)
    for X in (P + 1e-3 * torch.randn(200, lay.width, generator=g), 30 * torch.randn(50, lay.width, generator=g)):
        out = simplex_project(X, lay).numpy()
        assert (out >= 0).all()
        assert (out[:, lay.cols("a")] == 1.0).all()
        for a in dom.attrs:
            cols = lay.cols(a)
            np.testing.assert_allclose(out[:, cols].sum(1), 1.0, atol=1e-5)
            for n in range(0, len(out), 7):
                ref = _simplex_reference(X.numpy()[n, cols].astype(np.float64))
                np.testing.assert_allclose(out[n, cols], ref, atol=2e-5)
    state = pickle.loads(pickle.dumps(lay)).__dict__
    assert "_tensors" not in state and state["width"] == lay.width


def test_simplex_projection_matches_the_sort_algorithm_per_block():
    dom = Domain(["a", "b", "c"], [1, 4, 7])
    lay = _Layout(dom)
    X = torch.randn(30, lay.width, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2
    P = simplex_project(X, lay).numpy()
    for j, a in enumerate(dom.attrs):
        cols = lay.cols(a)
        for n in range(30):
            np.testing.assert_allclose(P[n, cols], _simplex_reference(X.numpy()[n, cols]), atol=1e-12)
        np.testing.assert_allclose(P[:, cols].sum(1), 1.0, atol=1e-12)
    assert (P >= 0).all()
    np.testing.assert_allclose(simplex_project(torch.as_tensor(P), lay).numpy(), P, atol=1e-12)  # idempotent


def test_noiseless_two_way_marginals_are_reproduced():
    data = chain()
    dom, n = data.domain, len(data)
    pairs = list(itertools.combinations(dom.attrs, 2))
    ms = [Measurement(p, y, 1.0) for p, y in zip(pairs, marginals(data, pairs))]
    model = RelaxedProjection(n_prime=500, iters=400, lr=0.01, seed=0).generate(ms, dom, total=n)
    assert model.total == n
    exact_tv = np.mean([tv(model.project(m.attrs), m.y) for m in ms])
    assert exact_tv < 0.02, exact_tv
    rows = model.sample(20_000, np.random.default_rng(1))
    got = marginals(Dataset(rows, dom), pairs)
    sampled_tv = np.mean([tv(g, m.y) for g, m in zip(got, ms)])
    assert sampled_tv < 0.02, sampled_tv
    # and it is not a product of 1-ways: the independent model is far off on these pairs
    indep = np.mean([tv(np.outer(model.project(p[:1]), model.project(p[1:])).ravel(), m.y)
                     for p, m in zip(pairs, ms)])
    assert indep > 3 * exact_tv


def test_selected_cells_and_linear_queries_are_fitted():
    data = chain()
    dom, n = data.domain, len(data)
    (ab,) = marginals(data, [("a", "b")])
    cells = np.array([0, 4, 7])
    Q = np.zeros((3, 12))
    Q[np.arange(3), cells] = 1.0
    S = np.vstack([np.ones(12), np.arange(12) % 2])  # a dense query: the total and a parity count
    ms = [Measurement(("a", "b"), ab[cells], 1.0, query=Q), Measurement(("a", "b"), S @ ab, 1.0, query=S)]
    model = RelaxedProjection(n_prime=200, iters=600, lr=0.02, seed=1).generate(ms, dom, total=n)
    fit = model.project(("a", "b"))
    np.testing.assert_allclose(fit[cells] / n, ab[cells] / n, atol=0.01)
    np.testing.assert_allclose(S[1] @ fit / n, S[1] @ ab / n, atol=0.01)


def test_project_is_the_exact_expectation_of_the_rows():
    dom = Domain(["a", "b", "c"], [2, 3, 2])
    lay = _Layout(dom)
    X = simplex_project(torch.rand(4, lay.width, generator=torch.Generator().manual_seed(3)), lay).numpy()
    m = RelaxedModel(dom, X, total=10.0)
    joint = np.zeros((2, 3, 2))
    for row in X:
        joint += np.einsum("i,j,k->ijk", row[0:2], row[2:5], row[5:7])
    joint *= 10.0 / 4
    np.testing.assert_allclose(m.project(("a", "b", "c")), joint.ravel(), rtol=1e-6)
    np.testing.assert_allclose(m.project(("c", "a")), joint.sum(1).T.ravel(), rtol=1e-6)
    assert m.project(()) == pytest.approx([10.0])


def test_seeds_and_warm_starts():
    data = chain(500)
    dom = data.domain
    pairs = [("a", "b"), ("b", "c")]
    ms = [Measurement(p, y, 1.0) for p, y in zip(pairs, marginals(data, pairs))]
    g = RelaxedProjection(n_prime=50, iters=30, seed=4)
    one, two = g.generate(ms, dom), g.generate(ms, dom)
    assert np.array_equal(one.relaxed, two.relaxed)  # seeded, CPU: deterministic
    other = g.generate(ms, dom, seed=np.random.SeedSequence(5))
    assert not np.array_equal(one.relaxed, other.relaxed)
    # warm: zero steps keep the earlier D'; more steps lower the loss further
    assert np.array_equal(g.clone(iters=0).generate(ms, dom, warm=one).relaxed, one.relaxed)
    more = g.generate(ms, dom, warm=one)
    assert more.info["loss"] < one.info["loss"]
    # a warm model over another N' is ignored (a fresh start)
    assert g.clone(n_prime=60).generate(ms, dom, warm=one).n_prime == 60


def test_structural_zeros_hold_in_samples_and_conditionals():
    data = table()
    z = zeros(data.domain)
    pairs = list(itertools.combinations(data.domain.attrs, 2))
    ms = [Measurement(p, y + 3.0, 1.0) for p, y in zip(pairs, marginals(data, pairs))]  # noisy-ish
    model = RelaxedProjection(n_prime=40, iters=20, seed=0).generate(ms, data.domain, zeros=z)
    rows = model.sample(3000, np.random.default_rng(0))
    assert z[0].violations(rows, data.domain) == 0
    cond = model.sample_conditional(500, np.random.default_rng(1), {"a": 3})
    assert (cond[:, 0] == 3).all() and z[0].violations(cond, data.domain) == 0


# ------------------------------------------------------------------------------ privacy
def test_gumbel_top_q_charge_is_the_closed_form():
    acc = Accountant(1.0, "add_remove")
    s = MeasurementSession(MemorySource(table()), acc, np.random.default_rng(0))
    q, rho, delta = 3, 0.02, 2.0
    idx = s.top_q(np.arange(10.0), q, rho, delta, what="top")
    assert len(set(idx.tolist())) == q
    (c,) = acc.to_dict()["ledger"]
    beta = delta * math.sqrt(q / (2 * rho))  # SPEC §1.4
    assert c["mechanism"] == "gumbel_top_q" and c["beta"] == pytest.approx(beta, rel=1e-12)
    assert c["rho"] == pytest.approx(q * delta**2 / (2 * beta**2), rel=1e-12) == pytest.approx(rho)
    assert recompute_rho(c) == pytest.approx(rho, rel=1e-12)


def _fit(name, nb, seed=3, **kw):
    params = dict(rounds=3, n_prime=40, iters=15)
    params.update(kw)
    if name == "rap":
        params.setdefault("top_k", 4)
    data = table()
    return registry.make_preset(name, 1.0, 1e-6, seed=seed, neighbour=nb, **params).fit(data)


@pytest.mark.parametrize("nb", ["add_remove", "replace_one"])
def test_rappp_spends_exactly_with_the_planned_split_and_never_renoises(nb):
    m = _fit("rap++", nb, top_q=2)
    rep = m.privacy_report()
    led = rep["ledger"]
    T = 3
    assert sum(c["rho"] for c in led) == pytest.approx(m.rho_total, rel=1e-9)
    sel = [c for c in led if c["mechanism"] == "gumbel_top_q"]
    meas = [c for c in led if c["mechanism"] == "gaussian"]
    assert len(sel) == T and len(meas) == 2 * T
    for c in sel:
        assert c["rho"] == pytest.approx(m.rho_total / (2 * T), rel=1e-9) and c["q"] == 2
        assert c["beta"] == pytest.approx(c["sensitivity"] * math.sqrt(2 / (2 * c["rho"])), rel=1e-12)
    l2 = 1.0 if nb == "add_remove" else math.sqrt(2)
    for c in meas:
        assert c["l2_sensitivity"] == pytest.approx(l2)
        assert c["sigma"] == pytest.approx(l2 * math.sqrt(2 / (2 * m.rho_total / (2 * T))), rel=1e-9)
    for c in led:
        assert recompute_rho(c) == pytest.approx(c["rho"], rel=1e-9)
    cliques = [x.attrs for x in m.measurements_]
    assert len(cliques) == len(set(cliques)) == 2 * T  # each marginal measured once, answers kept
    # score sensitivity: 2 under replace-one; under add/remove 2 only before N̂ exists (round 1)
    want = [2.0, 1.0, 1.0] if nb == "add_remove" else [2.0, 2.0, 2.0]
    assert [c["sensitivity"] for c in sel] == want


@pytest.mark.parametrize("nb", ["add_remove", "replace_one"])
def test_rap_spends_exactly_with_cells_at_their_joint_sensitivity(nb):
    m = _fit("rap", nb)
    led = m.privacy_report()["ledger"]
    assert sum(c["rho"] for c in led) == pytest.approx(m.rho_total, rel=1e-9)
    for c in led:
        assert recompute_rho(c) == pytest.approx(c["rho"], rel=1e-9)
    sel = [c for c in led if c["mechanism"] == "gumbel_top_q"]
    assert len(sel) == 3 and all(c["sensitivity"] == 1.0 and c["q"] == 4 for c in sel)
    gauss = [c for c in led if c["mechanism"] == "gaussian"]
    if nb == "add_remove":  # the record count first, then one release per round
        assert "count" in gauss[0]["what"] and gauss[0]["l2_sensitivity"] == 1.0
        assert gauss[0]["rho"] == pytest.approx(0.01 * m.rho_total, rel=1e-9)
        gauss = gauss[1:]
    assert len(gauss) == 3
    by_round: dict[int, dict] = {}
    for x in m.measurements_:
        if "round" in x.meta:
            by_round.setdefault(x.meta["round"], {})[x.attrs] = x.y.size
    for c, t in zip(gauss, sorted(by_round)):
        per = by_round[t].values()
        want = len(per) if nb == "add_remove" else sum(min(k, 2) for k in per)
        assert sum(per) == 4 and c["l2_sensitivity"] == pytest.approx(math.sqrt(want))
    # no cell measured twice
    seen = set()
    for x in m.measurements_:
        if x.query is not None and "round" in x.meta:
            for cell in np.flatnonzero(x.query.any(0)):
                assert (x.attrs, cell) not in seen
                seen.add((x.attrs, cell))


def test_runs_repeat_with_a_seed_and_differ_without():
    a, b, c = (_fit("rap++", "add_remove", seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.sample_codes(300), b.sample_codes(300))
    assert np.array_equal(a.model_.relaxed, b.model_.relaxed)
    assert not np.array_equal(a.model_.relaxed, c.model_.relaxed)


def test_saved_model_samples_identically(tmp_path):
    m = registry.make_preset("rap++", 1.0, 1e-6, seed=2, rounds=2, n_prime=40, iters=10)
    data = table()
    m.fit(data, zeros=zeros(data.domain))
    m.save(tmp_path / "m")
    back = load(tmp_path / "m")
    assert isinstance(back.model_, RelaxedModel)
    assert back.sample(200, seed=9).equals(m.sample(200, seed=9))
    assert back.sample(50, seed=3, conditions={"a": 1}).equals(m.sample(50, seed=3, conditions={"a": 1}))
    assert zeros(data.domain)[0].violations(back.sample_codes(2000, seed=1), data.domain) == 0


def test_names_with_plus_signs_resolve():
    assert registry.entry("preset", "RAP++").name == "rap++"
    assert registry.entry("selector", "rap++").target.endswith("RAPppSelector")
    import privmarg

    assert privmarg.RAPpp is registry.preset_class("rap++") and privmarg.RAP is registry.preset_class("rap")
    assert {"torch", "workload", "adaptive"} <= registry.entry("preset", "rap++").flags


def test_rap_plus_round_one_score_has_sensitivity_two_for_any_loop_model():
    # Round 1 under add/remove scores ‖M_r(D) − N·dist(model_r)‖₁ with the exact N. The bound of 2
    # must hold whatever the loop model returns (a user's model may give negative cells or a wrong
    # total): the fitted marginal is clipped and normalised first, so N·dist has L1 norm N.
    from privmarg.select.rap import _distribution

    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(2000):
        k = int(rng.integers(1, 8))
        a = rng.integers(0, 6, size=k).astype(float)
        x = rng.normal(0, 3, size=k) * rng.choice([1e-9, 1.0, 1e6])  # negative, tiny, huge, wrong totals
        b = a.copy()
        if a.sum() > 0 and rng.random() < 0.5:
            b[rng.choice(np.flatnonzero(a > 0))] -= 1  # a neighbour without one record
        else:
            b[rng.integers(k)] += 1  # with one more
        s_a = np.abs(a - a.sum() * _distribution(x)).sum()
        s_b = np.abs(b - b.sum() * _distribution(x)).sum()
        worst = max(worst, abs(s_a - s_b))
        d = _distribution(x)
        assert (d >= 0).all() and d.sum() == pytest.approx(1.0)
    assert worst <= 2.0 + 1e-9
