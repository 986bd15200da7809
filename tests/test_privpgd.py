"""PrivPGD: projection, sliced Wasserstein, particle descent, constraints, mechanism wiring."""

import itertools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from privmarg import AIM, MST, Dataset, Domain, Measurement, StructuralZero  # noqa: E402
from privmarg.generate.privpgd.constraints import ThresholdConstraint  # noqa: E402
from privmarg.generate.privpgd.privpgd import (  # noqa: E402
    PrivPGDGenerator,
    embed_codes,
    grid_centres,
    nearest_codes,
    project_signed_measures,
    quantise,
    sliced_w1,
    sparse_adam_step,
)
from privmarg import PrivPGD  # noqa: E402
from privmarg.privacy import cdp_rho  # noqa: E402


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def chain_table(n=3000, seed=0):
    """Four attributes with strong pairwise (chain) structure."""
    rng = np.random.default_rng(seed)
    dom = Domain(["a", "b", "c", "d"], [4, 3, 5, 2])
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(0, 2, n)) % 3
    c = (2 * b + rng.integers(0, 2, n)) % 5
    d = (c > 2).astype(int) ^ (rng.random(n) < 0.1)
    return Dataset(np.column_stack([a, b, c, d]), dom)


def exact_2way(data):
    pairs = list(itertools.combinations(data.domain.attrs, 2))
    return pairs, [Measurement(p, data.project(p), 1.0) for p in pairs]


def tv_2way(real, codes):
    synth = Dataset(codes, real.domain)
    pairs = itertools.combinations(real.domain.attrs, 2)
    return float(np.mean([0.5 * np.abs(real.project(p) / len(real) - synth.project(p) / len(synth)).sum()
                          for p in pairs]))


SMALL = dict(proj_iters=50, proj_num_projections=50)


# ----------------------------------------------------------------------------- embedding
def test_embedding_and_finalisation_round_trip():
    shape = (4, 3, 1, 7)
    codes = np.array([[0, 0, 0, 0], [3, 2, 0, 6], [1, 1, 0, 3]])
    z = embed_codes(codes, shape)
    assert np.allclose(z[1], [7 / 8, 5 / 6, 0.5, 13 / 14])
    assert (nearest_codes(z, shape) == codes).all()
    # a bin boundary is a tie between two centres: the lower one wins; outside [0,1] clips
    assert nearest_codes(np.array([[0.5, 1 / 3, 0.0, 1.0]]), shape).tolist() == [[1, 0, 0, 6]]
    assert nearest_codes(np.array([[-0.2, 1.3, 0.7, 0.0]]), shape).tolist() == [[0, 2, 0, 0]]


# ----------------------------------------------------------------------------- projection
def test_sw1_in_1d_is_the_l1_distance_of_cdfs():
    rng = np.random.default_rng(0)
    k = 9
    u = torch.tensor(rng.dirichlet(np.ones(k)))
    v = torch.tensor(rng.normal(1 / k, 0.1, k))
    v = v - v.mean() + 1 / k  # signed, total mass 1
    centres = torch.tensor(grid_centres((k,)))
    cdf_l1 = (torch.cumsum(u - v, 0)[:-1].abs().sum() / k).item()
    # every random unit direction in 1-D is +1 or -1
    dirs = torch.tensor(rng.normal(size=(25, 1)))
    dirs = dirs / dirs.abs()
    assert sliced_w1(u, v, centres, dirs).item() == pytest.approx(cdf_l1, rel=1e-12)
    assert sliced_w1(u, v, centres, torch.tensor([[1.0]], dtype=torch.float64)).item() == pytest.approx(cdf_l1)


@pytest.mark.parametrize("sizes", [(7,), (3, 4), (2, 3, 2)])
def test_projection_of_a_probability_vector_is_itself(sizes):
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(int(np.prod(sizes))))
    p[1] = 0.0
    p /= p.sum()
    (u,) = project_signed_measures([p], [sizes], iters=200, num_projections=50, seed=0)
    assert np.abs(u - p).max() < 1e-6


def _noisy_marginals():
    """Five small marginals (1- to 3-way) plus Gaussian noise: signed, with negatives."""
    rng = np.random.default_rng(2)
    sizes = [(5,), (3, 4), (6, 5), (2, 2, 3), (4, 4)]
    truth = [rng.dirichlet(np.ones(int(np.prod(s)))) for s in sizes]
    return sizes, [p + rng.normal(0, 0.04, p.size) for p in truth]


def _sw1_to(v, s):
    """w -> SW1(w, v) on the grid of shape ``s``, with a fixed large set of 4000 directions."""
    X = torch.tensor(grid_centres(s))
    d = torch.randn(4000, len(s), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    d = d / d.norm(dim=1, keepdim=True)
    return lambda w: sliced_w1(torch.tensor(w), torch.tensor(v), X, d).item()


def test_projection_returns_probabilities_and_lowers_sw1():
    sizes, noisy = _noisy_marginals()
    assert min(v.min() for v in noisy) < 0
    out = project_signed_measures(noisy, sizes, iters=200, num_projections=50, step=10, gamma=0.8, seed=3)
    for u, v, s in zip(out, noisy, sizes):
        assert u.shape == v.shape
        assert (u >= 0).all() and u.sum() == pytest.approx(1.0, abs=1e-12)
        # the objective does not go up from the clipped-and-normalised start (fixed large direction
        # set), and goes well down where that start is poor
        u0 = np.maximum(v, 0) / np.maximum(v, 0).sum()
        sw = _sw1_to(v, s)
        assert sw(u) <= 1.01 * sw(u0)
        if s in [(3, 4), (6, 5), (4, 4)]:
            assert sw(u) < 0.9 * sw(u0)


def test_projection_with_fixed_directions_and_early_stopping():
    sizes, noisy = _noisy_marginals()
    info = {}
    kw = dict(num_projections=32, step=10, gamma=0.8, seed=3)
    out = project_signed_measures(noisy, sizes, iters=2000, resample=0, stop_tol=0.01, check_every=25, info=info, **kw)
    assert max(info["iters"]) < 2000  # stalled well before the cap
    ref = project_signed_measures(noisy, sizes, iters=200, resample=1, **kw)  # fresh directions (paper)
    for u, w, v, s in zip(out, ref, noisy, sizes):
        assert (u >= 0).all() and u.sum() == pytest.approx(1.0, abs=1e-12)
        u0 = np.maximum(v, 0) / np.maximum(v, 0).sum()
        sw = _sw1_to(v, s)
        assert sw(u) <= 1.05 * sw(w)  # as good as fresh directions every iteration
        if s in [(3, 4), (6, 5), (4, 4)]:
            assert sw(u) < 0.9 * sw(u0)


def test_bounded_argsort_is_a_permutation_sorted_up_to_a_bucket():
    from privmarg.generate.privpgd.privpgd import _argsort_bounded

    g = torch.Generator().manual_seed(0)
    th = torch.randn(3, 4, 2, generator=g)
    th = th / th.norm(dim=-1, keepdim=True)
    Z = torch.rand(3, 5000, 2, generator=g)
    Z[0, :100] = 0.0  # ties at the boundary
    x = torch.einsum("bmr,blr->blm", Z, th)
    lo, hi = th.clamp(max=0).sum(-1, keepdim=True), th.clamp(min=0).sum(-1, keepdim=True)
    idx = _argsort_bounded(x, lo, hi)
    assert idx.dtype == torch.int64
    assert (torch.sort(idx, dim=-1).values == torch.arange(5000)).all()
    bucket = ((hi - lo) / 2 ** (31 - 13)).max().item()
    assert (torch.gather(x, -1, idx).diff(dim=-1) >= -bucket).all()


def test_n_particles_default_and_marginal_init():
    data = chain_table()
    _, ms = exact_2way(data)
    gen = PrivPGDGenerator(epochs=0, init="marginals", **SMALL, seed=0).fit(ms, data.domain, total=len(data))
    assert gen.codes_.shape == (len(data), 4)  # n_particles=None: N particles
    # init="marginals": every 1-way marginal is (nearly) right before any descent
    for j, a in enumerate(data.domain.attrs):
        p = np.bincount(gen.codes_[:, j], minlength=data.domain[a]) / len(data)
        assert 0.5 * np.abs(p - data.project((a,)) / len(data)).sum() < 0.05
    uni = PrivPGDGenerator(n_particles=700, epochs=0, init="uniform", **SMALL, seed=0).fit(ms, data.domain)
    assert uni.codes_.shape == (700, 4)
    with pytest.raises(ValueError):
        PrivPGDGenerator(init="zeros")


def test_structural_zeros_get_no_mass():
    data = chain_table()
    pairs, ms = exact_2way(data)
    mask = np.zeros((4, 3), dtype=bool)
    mask[0, 2] = mask[3, 1] = True  # declared impossible on (a, b)
    zero = StructuralZero(("a", "b"), mask.ravel())
    noisy = [Measurement(m.attrs, m.y + 30.0, 1.0) for m in ms]  # mass everywhere
    gen = PrivPGDGenerator(n_particles=500, epochs=2, **SMALL, seed=0).fit(noisy, data.domain, zeros=[zero])
    u = gen.projected_[("a", "b")]
    assert u.reshape(4, 3)[0, 2] == 0.0 and u.reshape(4, 3)[3, 1] == 0.0
    assert quantise(u, 500).reshape(4, 3)[mask].sum() == 0
    # the zero is given in reversed attribute order: same cells
    zr = StructuralZero(("b", "a"), mask.T.ravel())
    gen2 = PrivPGDGenerator(n_particles=500, epochs=0, **SMALL, seed=0).fit(noisy, data.domain, zeros=[zr])
    assert np.array_equal(gen2.projected_[("a", "b")] == 0, gen.projected_[("a", "b")] == 0)
    # no record lands in a forbidden cell, also after rounding the particles to the grid
    for g in (gen, gen2):
        assert zero.violations(g.sample_codes(), data.domain) == 0
        assert zero.violations(g.sample_codes(2000, np.random.default_rng(0)), data.domain) == 0


def test_packed_key_argsort_is_a_sorting_permutation():
    from privmarg.generate.privpgd.privpgd import _argsort

    rng = np.random.default_rng(0)
    x = torch.tensor(rng.normal(size=(6, 999)).astype(np.float32))
    x[0, :50] = 0.0
    x[1, 10:30] = -0.0
    x[2, ::3] = 1.5  # ties
    idx = _argsort(x)
    assert idx.dtype == torch.int64
    assert (torch.gather(x, -1, idx).diff(dim=-1) >= 0).all()
    assert (torch.sort(idx, dim=-1).values == torch.arange(999)).all()
    y = torch.tensor(rng.normal(size=(3, 500)))  # float64 input: sorted up to float32 rounding
    assert (torch.gather(y, -1, _argsort(y)).diff(dim=-1) >= -1e-6).all()


def test_quantisation_counts():
    u = np.array([0.5, 0.25, 0.125, 0.125])
    assert quantise(u, 8).tolist() == [4, 2, 1, 1]
    c = quantise(np.array([0.3, 0.3, 0.4]), 10_001, torch.Generator().manual_seed(0))
    assert c.sum() == 10_001 and (c >= [3000, 3000, 4000]).all()


# ----------------------------------------------------------------------------- descent
def test_sparse_adam_step_matches_torch_sparse_adam():
    g = torch.Generator().manual_seed(0)
    p1 = torch.rand(50, 4, generator=g)
    p2 = p1.clone().requires_grad_(True)
    opt = torch.optim.SparseAdam([p2], lr=0.1)
    m, v = torch.zeros_like(p1), torch.zeros_like(p1)
    for t in range(1, 6):
        grad = torch.randn(50, 4, generator=g) * (torch.rand(50, 4, generator=g) > 0.8)
        sparse_adam_step(p1, grad, m, v, t, 0.1)
        p2.grad = grad.to_sparse()
        opt.step()
    assert torch.allclose(p1, p2.detach(), atol=1e-6)


def test_noiseless_marginals_are_reproduced():
    data = chain_table()
    _, ms = exact_2way(data)
    gen = PrivPGDGenerator(n_particles=2000, epochs=300, scheduler_step=30, **SMALL, seed=0)
    gen.fit(ms, data.domain, total=len(data))
    assert gen.codes_.shape == (2000, 4)
    assert tv_2way(data, gen.codes_) < 0.02
    assert len(gen.history_) == 300 and gen.history_[-1] < gen.history_[0]


def test_particles_move_without_masking():
    data = chain_table()
    _, ms = exact_2way(data)
    kw = dict(n_particles=500, mask_rate=0.0, **SMALL, seed=4)
    start = PrivPGDGenerator(epochs=0, **kw).fit(ms, data.domain).particles_
    moved = PrivPGDGenerator(epochs=5, **kw).fit(ms, data.domain).particles_
    assert (moved - start).abs().mean() > 1e-2
    assert ((moved >= 0) & (moved <= 1)).all()


def test_seeded_runs_are_identical():
    data = chain_table()
    _, ms = exact_2way(data)
    noisy = [Measurement(m.attrs, m.y + np.random.default_rng(0).normal(0, 20, m.y.size), 20.0) for m in ms]
    seen = []
    for seed in (7, 7, 8):
        calls = []
        gen = PrivPGDGenerator(n_particles=300, epochs=4, **SMALL, seed=seed)
        gen.fit(noisy, data.domain, progress=lambda e, n, loss: calls.append((e, n, loss)))
        seen.append(gen)
        assert [c[0] for c in calls] == [1, 2, 3, 4] and all(c[1] == 4 for c in calls)
    assert torch.equal(seen[0].particles_, seen[1].particles_)
    assert np.array_equal(seen[0].codes_, seen[1].codes_)
    assert seen[0].history_ == seen[1].history_
    assert not torch.equal(seen[0].particles_, seen[2].particles_)


def test_constraint_pushes_statistic_away_monotonically():
    data = chain_table()
    _, ms = exact_2way(data)
    theta, b = np.array([1.0, 1.0, 1.0, 0.0]), 1.5
    s_hat = ThresholdConstraint(theta, b).statistic_of_codes(data.codes, data.domain)[0]
    gaps = []
    for lam in (0.0, 0.1, 1.0, 10.0, 100.0):
        con = ThresholdConstraint(theta, b, estimate=s_hat)
        gen = PrivPGDGenerator(n_particles=1000, epochs=100, scheduler_step=10, constraint_strength=lam,
                               proj_iters=30, proj_num_projections=20, seed=0)
        gen.fit(ms, data.domain, total=len(data), constraint=con)
        gaps.append(abs(con.statistic_of_codes(gen.codes_, data.domain)[0] - s_hat))
    assert all(x < y for x, y in zip(gaps, gaps[1:])), gaps
    assert gaps[0] < 0.02 and gaps[-1] > 0.1


def test_sample_codes_rows():
    data = chain_table(n=500)
    _, ms = exact_2way(data)
    gen = PrivPGDGenerator(n_particles=200, epochs=1, **SMALL, seed=0).fit(ms, data.domain)
    rng = np.random.default_rng(0)
    assert np.array_equal(gen.sample_codes(), gen.codes_)
    sub = gen.sample_codes(50, rng)
    assert sub.shape == (50, 4)
    big = gen.sample_codes(450, rng)
    assert big.shape == (450, 4)
    assert sorted(map(tuple, big)) != sorted(map(tuple, gen.codes_))


def test_measurement_order_queries_and_duplicates_are_handled():
    data = chain_table()
    dom = data.domain
    y_ab = data.project(("a", "b"))
    y_ba = data.project(("b", "a"))
    q = np.diag(np.arange(1.0, 13.0))
    ms = [Measurement(("b", "a"), y_ba, 1.0), Measurement(("a", "b"), q @ y_ab, 1.0, query=q),
          Measurement(("c",), data.project(("c",)), 2.0)]
    gen = PrivPGDGenerator(n_particles=3000, epochs=0, proj_iters=0, seed=0).fit(ms, dom)
    assert set(gen.cliques_) == {("a", "b"), ("c",)}
    assert np.allclose(gen.projected_[("a", "b")], y_ab / len(data))
    assert gen.total_ == pytest.approx(len(data))


# ----------------------------------------------------------------------------- mechanisms
FASTGEN = dict(n_particles=400, epochs=3, proj_iters=20, proj_num_projections=20)


def test_privpgd_mechanism_budget_and_sampling():
    data = chain_table()
    mech = PrivPGD(2.5, 1e-5, seed=3, grouped=False, **FASTGEN).fit(data)
    rep = mech.privacy_report()
    rho = cdp_rho(2.5, 1e-5)
    assert rep["neighbour"] == "replace_one"
    assert sum(c["rho"] for c in rep["ledger"]) == pytest.approx(rho, rel=1e-9)
    assert len(rep["ledger"]) == 6
    for c in rep["ledger"]:
        assert c["l2_sensitivity"] == pytest.approx(math.sqrt(2))
        assert c["sigma"] == pytest.approx(math.sqrt(6 / rho))
    assert mech.default_rows() == 400
    df = mech.sample()
    assert list(df.columns) == list(data.domain.attrs) and len(df) == 400
    assert len(mech.sample(123)) == 123
    again = PrivPGD(2.5, 1e-5, seed=3, grouped=False, **FASTGEN).fit(data)
    assert np.array_equal(again.sample_codes(), mech.sample_codes())
    assert [m.y.tolist() for m in again.measurements_] == [m.y.tolist() for m in mech.measurements_]


def test_privpgd_mechanism_with_threshold_constraint_charges_the_statistic():
    data = chain_table()
    con = ThresholdConstraint({"a": 1.0, "b": 1.0, "c": 1.0}, 1.5)
    mech = PrivPGD(2.5, 1e-5, seed=0, constraint=con, constraint_strength=1.0, grouped=False, **FASTGEN).fit(data)
    ledger = mech.privacy_report()["ledger"]
    rho = cdp_rho(2.5, 1e-5)
    stat = [c for c in ledger if "constraint" in c["what"]]
    assert len(stat) == 1 and stat[0]["rho"] == pytest.approx(cdp_rho(0.5, 2e-6), rel=1e-9)
    assert stat[0]["l2_sensitivity"] == 1.0
    assert sum(c["rho"] for c in ledger) == pytest.approx(rho, rel=1e-9)
    marg = [c for c in ledger if "constraint" not in c["what"]]
    assert marg[0]["sigma"] == pytest.approx(math.sqrt(6 / (rho - cdp_rho(0.5, 2e-6))))
    assert con.estimate_ is None and mech.constraint_.estimate_ is not None  # the user's object is untouched
    assert abs(mech.constraint_.estimate_[0] - mech.constraint_.statistic_of_codes(data.codes, data.domain)[0]) < 0.05


def test_aim_selection_with_privpgd_generation():
    data = chain_table()
    aim = AIM(2.5, 1e-5, workload="all-2way", seed=1, iters=50, final_iters=50)
    mech = AIM(2.5, 1e-5, workload="all-2way", seed=1, iters=50, final_iters=50,
               generator=PrivPGDGenerator(**FASTGEN)).fit(data)
    aim.fit(data)
    assert mech.privacy_report() == aim.privacy_report()  # same selection: the generator is post-processing
    assert [m.attrs for m in mech.measurements_] == [m.attrs for m in aim.measurements_]
    codes = mech.sample_codes()
    assert codes.shape == (400, 4) and (codes < np.array(data.domain.shape)).all()
    assert {m.attrs for m in mech.measurements_} >= {(a,) for a in data.domain.attrs}


def test_mst_compressed_measurements_are_mapped_back():
    rng = np.random.default_rng(0)
    data = chain_table()
    dom = Domain(list(data.domain.attrs) + ["e"], list(data.domain.shape) + [8])
    e = np.where(rng.random(len(data)) < 0.97, data.codes[:, 0], 4 + rng.integers(0, 4, len(data)))
    data = Dataset(np.column_stack([data.codes, e]), dom)
    mech = MST(0.5, 1e-5, seed=0, iters=50, final_iters=50, generator=PrivPGDGenerator(**FASTGEN)).fit(data)
    assert mech.supports_, "the test needs MST to compress something"
    # the generator ran on the compressed domain; records come back on the original one
    assert mech.model_.model.domain == mech.compressed_domain_
    codes = mech.sample_codes()
    assert codes.shape == (400, 5) and (codes < np.array(dom.shape)).all()
    merged = np.setdiff1d(np.arange(8), mech.supports_["e"])
    assert np.isin(codes[:, 4], np.arange(8)).all() and len(merged) > 0
    # the lifted model spreads a merged value's mass uniformly and keeps the total
    p = mech.model_.project(("e",))
    assert p.sum() == pytest.approx(mech.model_.total, rel=1e-6)
    assert np.allclose(p[merged], p[merged][0])


def test_generator_validates_parameters():
    with pytest.raises(ValueError):
        PrivPGDGenerator(mask_rate=1.0)
    with pytest.raises(ValueError):
        PrivPGDGenerator(n_particles=0)
    with pytest.raises(ValueError):
        PrivPGDGenerator(lr=-1)
    with pytest.raises(RuntimeError):
        PrivPGDGenerator().sample_codes()


def test_mechanism_defaults_are_the_generators():
    """PrivPGD(...) without generator settings runs exactly PrivPGDGenerator()'s profile."""
    default = vars(PrivPGDGenerator())
    assert vars(PrivPGDGenerator(**PrivPGD(2.5, 1e-5, grouped=False).generator_params)) == default
    assert vars(PrivPGDGenerator(**PrivPGD(2.5, 1e-5).generator_params)) == default
    set_ = PrivPGD(2.5, 1e-5, epochs=7, mask_rate=0.5).generator_params
    assert set_["epochs"] == 7 and set_["mask_rate"] == 0.5
    with pytest.raises(ValueError, match="epochs"):
        PrivPGD(2.5, 1e-5, epochs=-1)


def test_workspace_argsort_matches_the_allocating_one():
    from privmarg.generate.privpgd.privpgd import _argsort_bounded, _Workspace

    g = torch.Generator().manual_seed(1)
    th = torch.randn(2, 3, 2, generator=g)
    th = th / th.norm(dim=-1, keepdim=True)
    lo, hi = th.clamp(max=0).sum(-1, keepdim=True), th.clamp(min=0).sum(-1, keepdim=True)
    ws = _Workspace()
    for _ in range(3):  # the buffers are reused across calls
        Z = torch.rand(2, 4000, 2, generator=g)
        Z[0, :50] = 1.0  # ties
        x = torch.einsum("bmr,blr->blm", Z, th)
        assert torch.equal(_argsort_bounded(x, lo, hi, ws), _argsort_bounded(x, lo, hi))


def test_marginal_weights_closed_form():
    from privmarg.generate.privpgd.privpgd import _marginal_weights

    assert np.array_equal(_marginal_weights([3.0, 5.0], [4, 100], 1000.0, 0.0), [1.0, 1.0])
    w = _marginal_weights([2.0, 2.0, 4.0], [4, 16, 4], 1000.0, 1.0)
    v = np.array([4 * 4.0, 16 * 4.0, 4 * 16.0])  # n_c sigma_c^2 (the N^2 cancels after normalising)
    assert np.allclose(w, (1 / v) / (1 / v).mean())
    w5 = _marginal_weights([2.0, 2.0, 4.0], [4, 16, 4], 1000.0, 0.5)
    assert np.allclose(w5, (v ** -0.5) / (v ** -0.5).mean())
    with pytest.raises(ValueError):
        PrivPGDGenerator(weight_power=-1.0)


def test_weighted_descent_follows_the_reliable_marginals():
    data = chain_table()
    _, ms = exact_2way(data)
    rng = np.random.default_rng(0)
    # one marginal very noisy (and declared so): with weight_power=1 its target pulls the particles
    # much less, so the particles end further from it
    noisy = [Measurement(m.attrs, m.y + (rng.normal(0, 300, m.y.size) if i == 0 else 0.0), 300.0 if i == 0 else 1.0)
             for i, m in enumerate(ms)]
    kw = dict(n_particles=2000, epochs=150, scheduler_step=15, **SMALL, seed=0)
    fits = [PrivPGDGenerator(weight_power=p, **kw).fit(noisy, data.domain, total=len(data)) for p in (0.0, 1.0)]

    def tv_to_targets(gen):
        out = []
        for c, u in gen.projected_.items():
            synth = Dataset(gen.codes_, data.domain).project(c).ravel() / len(gen.codes_)
            out.append(0.5 * np.abs(synth - u).sum())
        return out[0], float(np.mean(out[1:]))

    (n0, o0), (n1, o1) = map(tv_to_targets, fits)
    assert n1 > n0 + 0.02
    same = [Measurement(m.attrs, m.y, 1.0) for m in ms[:1]]  # one marginal: weight 1 whatever the power
    a = PrivPGDGenerator(n_particles=300, epochs=3, weight_power=0.0, **SMALL, seed=2).fit(same, data.domain)
    b = PrivPGDGenerator(n_particles=300, epochs=3, weight_power=1.0, **SMALL, seed=2).fit(same, data.domain)
    assert torch.equal(a.particles_, b.particles_)


def test_consistency_step_agrees_on_shared_attributes_by_inverse_variance():
    from privmarg.core import Domain
    from privmarg.generate.privpgd.measurements import _consistent

    dom = Domain(["a", "b", "c"], [3, 4, 5])
    rng = np.random.default_rng(0)
    true = rng.dirichlet(np.ones(60)).reshape(3, 4, 5) * 1000
    exact = [(("a", "b"), true.sum(2).ravel(), 2.0), (("a", "c"), true.sum(1).ravel(), 5.0),
             (("b", "c"), true.sum(0).ravel(), 1.0), (("a",), true.sum((1, 2)), 3.0)]
    for (a, y, s), (a2, y2, s2) in zip(exact, _consistent(exact, dom)):  # consistent input: unchanged
        assert a == a2 and s == s2 and np.allclose(y, y2, rtol=0, atol=1e-9)
    noisy = [(a, y + rng.normal(0, s, y.size), s) for a, y, s in exact]
    out = _consistent(noisy, dom)
    arr = {a: y.reshape(dom.sizes(a)) for a, y, _ in out}
    totals = [y.sum() for _, y, _ in out]
    assert np.allclose(totals, totals[0])
    # every marginal holding an attribute implies the same 1-way marginal on it
    assert np.allclose(arr[("a", "b")].sum(1), arr[("a", "c")].sum(1)) and np.allclose(arr[("a", "b")].sum(1), arr[("a",)])
    assert np.allclose(arr[("a", "b")].sum(0), arr[("b", "c")].sum(1))
    assert np.allclose(arr[("a", "c")].sum(0), arr[("b", "c")].sum(0))
    # the common 'c' margin is the inverse-variance average of the two totals-adjusted implied margins
    src = {a: y.reshape(dom.sizes(a)) for a, y, _ in noisy}
    t_w = np.array([1 / (12 * 4.0), 1 / (15 * 25.0), 1 / (20 * 1.0), 1 / (3 * 9.0)])
    t_bar = t_w @ np.array([src[a].sum() for a, _, _ in noisy]) / t_w.sum()
    m_ac = (src[("a", "c")] + (t_bar - src[("a", "c")].sum()) / 15).sum(0)
    m_bc = (src[("b", "c")] + (t_bar - src[("b", "c")].sum()) / 20).sum(0)
    w_ac, w_bc = 1 / (25.0 * 15 / 5), 1 / (1.0 * 20 / 5)
    assert np.allclose(arr[("b", "c")].sum(0), (w_ac * m_ac + w_bc * m_bc) / (w_ac + w_bc))


def test_consistency_option_is_post_processing_and_seeded():
    from privmarg.core import Domain
    from privmarg.generate.privpgd import PrivPGDGenerator

    dom = Domain(["a", "b", "c"], [3, 4, 5])
    rng = np.random.default_rng(1)
    true = rng.dirichlet(np.ones(60)).reshape(3, 4, 5) * 500
    ms = [(("a", "b"), true.sum(2).ravel() + rng.normal(0, 3, 12), 3.0),
          (("b", "c"), true.sum(0).ravel() + rng.normal(0, 3, 20), 3.0)]
    kw = dict(n_particles=500, epochs=3, proj_iters=20, seed=4, consistency=True)
    g1 = PrivPGDGenerator(**kw).fit(ms, dom, total=500.0)
    g2 = PrivPGDGenerator(**kw).fit(ms, dom, total=500.0)
    assert np.array_equal(g1.codes_, g2.codes_) and g1.get_params()["consistency"] is True
    p = g1.projected_
    assert np.allclose(p[("a", "b")].reshape(3, 4).sum(0), p[("b", "c")].reshape(4, 5).sum(1), atol=0.02)


def test_defaults_are_the_weighted_consistent_variant_and_paper_keeps_the_papers():
    from privmarg.generate.privpgd.privpgd import PrivPGDGenerator

    d, paper = PrivPGDGenerator(), PrivPGDGenerator.paper()
    assert (d.weight_power, d.consistency) == (1.0, True)
    assert (paper.weight_power, paper.consistency) == (0.0, False)


# ----------------------------------------------------------------------------- grouped marginals
def wide_table(n=3000, seed=0):
    """Three 50-value columns tied to each other and a binary one: fine 2-way marginals of 2,500
    cells, which PrivPGD's even split at ε = 1 buries in noise."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 50, n)
    b = np.clip(a + rng.integers(-4, 5, n), 0, 49)
    c = np.clip(49 - a + rng.integers(-8, 9, n), 0, 49)
    d = (a > 25).astype(int) ^ (rng.random(n) < 0.2)
    return Dataset(np.column_stack([a, b, c, d]), Domain(["a", "b", "c", "d"], [50, 50, 50, 2]))


@pytest.mark.parametrize("neighbour", ["replace_one", "add_remove"])
def test_grouped_privpgd_measures_fine_one_ways_and_grouped_pairs(neighbour):
    from privmarg.core import query_groups
    from privmarg.core.measurement import estimate_total
    from privmarg.select.kway import contiguous_groups, group_count

    data = wide_table()
    mech = PrivPGD(1.0, 1e-6, seed=0, neighbour=neighbour, **FASTGEN).fit(data)
    rho = cdp_rho(1.0, 1e-6)
    ledger = mech.privacy_report()["ledger"]
    assert len(ledger) == 4 + 6 and sum(c["rho"] for c in ledger) == pytest.approx(rho, rel=1e-9)
    sigma = math.sqrt(10 / rho) * (1.0 if neighbour == "replace_one" else 1 / math.sqrt(2))
    ones, pairs = mech.measurements_[:4], mech.measurements_[4:]
    assert [m.attrs for m in ones] == [(a,) for a in "abcd"] and all(m.query is None for m in ones)
    assert all(m.sigma == pytest.approx(sigma) for m in mech.measurements_)
    # the group count: from σ and N, public under replace-one, else the 1-way measurements' estimate
    rows = len(data) if neighbour == "replace_one" else estimate_total(ones)
    g = group_count(sigma, rows, 2)
    assert mech.selection_.extra["groups"] == g and 2 <= g < 50
    for m, row in zip(pairs, mech.measurements_report()[4:]):
        maps = query_groups(m.query, data.domain.sizes(m.attrs))
        assert maps is not None
        for attr, x in zip(m.attrs, maps):
            want = contiguous_groups(data.domain[attr], g)
            assert np.array_equal(x, np.arange(2) if want is None else want)
        assert row["groups"] == [min(data.domain[a], g) for a in m.attrs]  # the report says so


def test_grouped_measurements_beat_the_fine_ones_on_wide_columns():
    """The point of grouping: on 50-value columns at ε = 1, grouped pairs give a closer covariance
    and 2-way SW1 than the fine all-2-way measurement (three seeds; about 0.06 vs 0.12 and 0.009 vs
    0.019)."""
    from privmarg.evaluation.metrics import covariance_error, sw1_2way

    data = wide_table()
    err = {True: [], False: []}
    for seed in range(3):
        for grouped in (True, False):
            m = PrivPGD(1.0, 1e-6, seed=seed, grouped=grouped, epochs=40, proj_iters=50).fit(data)
            syn = Dataset(m.sample_codes(), data.domain)
            err[grouped].append((covariance_error(data, syn), sw1_2way(data, syn, seed=0)))
    (cov_g, sw_g), (cov_f, sw_f) = np.mean(err[True], axis=0), np.mean(err[False], axis=0)
    assert cov_g < 0.75 * cov_f and sw_g < 0.75 * sw_f


def test_mixed_consistency_agrees_on_values_and_groups():
    from privmarg.generate.privpgd.grouped import consistent_mixed

    dom = Domain(["a", "b"], [6, 3])
    g = np.array([0, 0, 1, 1, 2, 2])
    rng = np.random.default_rng(0)
    true = rng.dirichlet(np.ones(18)).reshape(6, 3) * 1000
    coarse = np.stack([true[g == k].sum(0) for k in range(3)])  # (3 groups, 3)
    sizes = [(6,), (3,), (3, 3)]
    exact = [(("a",), true.sum(1), 2.0), (("b",), true.sum(0), 1.0), (("a", "b"), coarse.ravel(), 3.0)]
    for (_, y, _), out in zip(exact, consistent_mixed(exact, sizes, dom, {"a": g})):
        assert np.allclose(out, y, atol=1e-9)  # consistent input: unchanged
    noisy = [(a, y + rng.normal(0, s, y.size), s) for a, y, s in exact]
    fa, fb, pab = consistent_mixed(noisy, sizes, dom, {"a": g})
    pab = pab.reshape(3, 3)
    assert fa.sum() == pytest.approx(fb.sum()) == pytest.approx(pab.sum())
    assert np.allclose(np.bincount(g, weights=fa), pab.sum(1)) and np.allclose(fb, pab.sum(0))
    # the group totals: the fine 1-way's and the pair's, each after the totals step, by inverse variance
    w = np.array([1 / (6 * 4.0), 1 / (3 * 1.0), 1 / (9 * 9.0)])
    t_bar = w @ np.array([y.sum() for _, y, _ in noisy]) / w.sum()
    ya = noisy[0][1] + (t_bar - noisy[0][1].sum()) / 6
    pa = (noisy[2][1].reshape(3, 3) + (t_bar - noisy[2][1].sum()) / 9).sum(1)
    yf = np.bincount(g, weights=ya)
    vf, vc = 4.0, 9.0 * 3  # a fine value's variance; a group's in the pair (3 cells behind it)
    t = (yf / (2 * vf) + pa / vc) / (1 / (2 * vf) + 1 / vc)
    assert np.allclose(pab.sum(1), t) and np.allclose(fa, ya + ((t - yf) / 2)[g])


def test_mixed_consistency_with_unequal_groups_keeps_one_total():
    from privmarg.generate.privpgd.grouped import consistent_mixed

    dom = Domain(["a", "b"], [7, 4])
    g = np.array([0, 0, 0, 1, 1, 2, 2])  # groups of 3, 2 and 2 values
    rng = np.random.default_rng(3)
    true = rng.dirichlet(np.ones(28)).reshape(7, 4) * 1000
    coarse = np.stack([true[g == k].sum(0) for k in range(3)])
    items = [(("a",), true.sum(1) + rng.normal(0, 4, 7), 4.0), (("b",), true.sum(0) + rng.normal(0, 1, 4), 1.0),
             (("a", "b"), coarse.ravel() + rng.normal(0, 3, 12), 3.0)]
    fa, fb, pab = consistent_mixed(items, [(7,), (4,), (3, 4)], dom, {"a": g})
    pab = pab.reshape(3, 4)
    assert fa.sum() == pytest.approx(fb.sum(), rel=1e-12) and fa.sum() == pytest.approx(pab.sum(), rel=1e-12)
    assert np.allclose(np.bincount(g, weights=fa), pab.sum(1)) and np.allclose(fb, pab.sum(0))


def test_grouped_measurements_split_by_their_own_shapes():
    """A column grouped in one pair and whole in another, a clique measured at two shapes, and a
    grouping that only permutes codes: each marginal is read in its own layout."""
    from privmarg.core import grouping_query
    from privmarg.generate.privpgd.grouped import split_grouped

    dom = Domain(["a", "b", "c"], [6, 4, 3])
    rng = np.random.default_rng(0)
    codes = np.column_stack([rng.integers(0, k, 500) for k in dom.shape])
    data = Dataset(codes, dom)
    ga, gb = np.array([0, 0, 1, 1, 2, 2]), np.array([0, 0, 1, 1])
    q_ab = grouping_query([6, 4], [ga, gb])
    q_ca = grouping_query([3, 6], [None, ga])  # attrs out of domain order
    q_ac = grouping_query([6, 3], [None, np.array([0, 0, 1])])  # a whole, c grouped
    q_bc = grouping_query([4, 3], [None, np.array([2, 0, 1])])  # c's codes permuted: the fine path
    ms = [Measurement(("a", "b"), q_ab @ data.project(("a", "b")), 1.0, query=q_ab),
          Measurement(("c", "a"), q_ca @ data.project(("c", "a")), 1.0, query=q_ca),
          Measurement(("a", "c"), q_ac @ data.project(("a", "c")), 1.0, query=q_ac),
          Measurement(("b", "c"), q_bc @ data.project(("b", "c")), 1.0, query=q_bc)]
    fine, grouped, maps = split_grouped(ms, dom)
    assert [m.attrs for m in fine] == [("b", "c")] and set(maps) == {"a", "b", "c"}
    got = {(t.attrs, t.sizes): t.y.reshape(t.sizes) for t in grouped}
    def want(attrs, groups):
        out = np.zeros([int(x.max()) + 1 for x in groups])
        np.add.at(out, tuple(x[codes[:, dom.attrs.index(a)]] for a, x in zip(attrs, groups)), 1)
        return out
    ident = lambda k: np.arange(k)  # noqa: E731
    assert np.array_equal(got[(("a", "b"), (3, 2))], want(("a", "b"), [ga, gb]))
    assert np.array_equal(got[(("a", "c"), (3, 3))], want(("a", "c"), [ga, ident(3)]))
    assert np.array_equal(got[(("a", "c"), (6, 2))], want(("a", "c"), [ident(6), np.array([0, 0, 1])]))


def test_particles_are_placed_inside_their_groups_by_the_fine_shares():
    from privmarg.generate.privpgd.grouped import place_in_groups

    dom = Domain(["a", "b"], [12, 3])
    g = np.arange(12) // 4
    rng = np.random.default_rng(1)
    Z = torch.rand((3000, 2), generator=torch.Generator().manual_seed(0))
    p = rng.dirichlet(np.ones(12))
    out = place_in_groups(Z, dom, {"a": g}, {"a": p})
    before, after = nearest_codes(Z, dom.shape), nearest_codes(out, dom.shape)
    assert np.array_equal(g[before[:, 0]], g[after[:, 0]])  # every particle stays in its group
    assert torch.equal(out[:, 1], Z[:, 1])
    for k in range(3):
        idx = np.flatnonzero(g[before[:, 0]] == k)
        # order kept inside the group, and the fine shares followed (up to one particle a code)
        assert np.all(np.diff(out[idx[np.argsort(Z[idx, 0].numpy())], 0].numpy()) >= 0)
        counts = np.bincount(after[idx, 0], minlength=12)[g == k]
        assert np.abs(counts - idx.size * p[g == k] / p[g == k].sum()).max() <= 1.0


def test_noiseless_grouped_measurements_are_reproduced():
    from privmarg.core import grouping_query
    from privmarg.select.kway import contiguous_groups

    data = wide_table(2000)
    dom = data.domain
    ms = [Measurement((a,), data.project((a,)), 1e-3) for a in dom.attrs]
    groups = {a: contiguous_groups(dom[a], 6) for a in dom.attrs}
    for pair in itertools.combinations(dom.attrs, 2):
        q = grouping_query(dom.sizes(pair), [groups[a] for a in pair])
        ms.append(Measurement(pair, q @ data.project(pair), 1e-3, query=q))
    gen = PrivPGDGenerator(epochs=60, weight_power=0.0, seed=0, **SMALL).fit(ms, dom, total=2000.0)
    syn = Dataset(gen.codes_, dom)
    for a in dom.attrs:  # the fine 1-ways: placed exactly, up to a particle a code
        assert np.abs(syn.project((a,)) - data.project((a,))).max() <= 6
    for m in ms[4:]:
        tv = 0.5 * np.abs(m.query @ syn.project(m.attrs) - m.y).sum() / 2000
        assert tv < 0.06, (m.attrs, tv)


def test_a_small_pair_keeps_its_joint_next_to_grouped_wide_columns():
    """Two 3-value columns with a strong joint beside wide grouped ones: the 1-way marginals, which
    the grouped mode measures, are not fitted where a pair holds their column (fitted at the weight
    of their small noise they crowded the pairs out: this pair's TV was 0.30-0.33)."""
    rng = np.random.default_rng(0)
    n = 5000
    p = rng.integers(0, 3, n)
    s = np.where(p == 0, rng.choice(3, n, p=[0.0, 0.75, 0.25]),
                 np.where(p == 1, 0, rng.choice(3, n, p=[0.7, 0.1, 0.2])))
    w1 = rng.integers(0, 60, n)
    cols = [p, s, w1, np.clip(w1 + rng.integers(-5, 6, n), 0, 59), rng.integers(0, 200, n)]
    data = Dataset(np.column_stack(cols), Domain(["p", "s", "w1", "w2", "w3"], [3, 3, 60, 60, 200]))
    for seed in range(2):
        m = PrivPGD(2.0, 1e-6, seed=seed, epochs=40, proj_iters=50).fit(data)
        assert m.selection_.extra["groups"] < 60  # the wide columns were grouped
        syn = Dataset(m.sample_codes(), data.domain)
        assert 0.5 * np.abs(syn.project(("p", "s")) - data.project(("p", "s"))).sum() / n < 0.05
