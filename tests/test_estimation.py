"""Exactness of the estimation engine against brute force over the full joint table."""

import functools
import importlib
import itertools
import random

import numpy as np
import pytest

from privmarg import Dataset, Domain, Measurement, StructuralZero, datasets, estimate, model_size_mb
from privmarg.generate.pgm import loss_of

estimation_module = importlib.import_module("privmarg.generate.pgm.estimate")


# brute-force helpers over the full joint table ---------------------------------------------------
def joint_marginal(P, dom, attrs):
    attrs = dom.canonical(attrs)
    ax = tuple(i for i, a in enumerate(dom.attrs) if a not in attrs)
    return P.sum(axis=ax).ravel() if ax else P.ravel()


def model_joint(model):
    """The model's full joint table computed from its potentials (no inference code involved)."""
    dom = model.domain
    logp = np.zeros(dom.shape)
    for c, t in zip(model.tree.cliques, model.theta):
        shape = tuple(dom[a] if a in c else 1 for a in dom.attrs)
        logp = logp + t.reshape(shape)
    p = np.exp(logp - logp[np.isfinite(logp)].max())
    return p / p.sum() * model.total


def ipf_maxent(dom, targets, iters=20000):
    """Maximum-entropy joint matching consistent marginals: iterative proportional fitting."""
    P = np.full(dom.shape, 1.0 / dom.size())
    for _ in range(iters):
        worst = 0.0
        for attrs, y in targets:
            cur = joint_marginal(P, dom, attrs)
            worst = max(worst, np.abs(cur - y).max())
            ratio = np.where(cur > 0, y / np.where(cur > 0, cur, 1), 0.0)
            shape = tuple(dom[a] if a in attrs else 1 for a in dom.attrs)
            P = P * ratio.reshape(shape)
        if worst < 1e-13:
            break
    return P


def brute_force_loss(dom, measurements, total, iters=30000):
    """min over all joint tables p >= 0, sum p = total, of the MLE loss (FISTA + simplex projection)."""
    n = dom.size()
    A, b, w = [], [], []
    for m in measurements:
        attrs = dom.canonical(m.attrs)
        idx = np.arange(n).reshape(dom.shape)
        ax = tuple(i for i, a in enumerate(dom.attrs) if a not in attrs)
        cell = np.zeros(dom.shape, dtype=np.int64)
        sizes = dom.sizes(attrs)
        grids = np.indices(dom.shape)
        pos = [dom.attrs.index(a) for a in attrs]
        cell = np.ravel_multi_index(tuple(grids[p] for p in pos), sizes).ravel()
        M = np.zeros((int(np.prod(sizes)), n))
        M[cell, idx.ravel()] = 1.0
        A.append(M)
        b.append(m.y)
        w.append(1 / (2 * m.sigma**2))

    def f(p):
        return sum(wi * np.sum((Ai @ p - bi) ** 2) for Ai, bi, wi in zip(A, b, w))

    def grad(p):
        return sum(2 * wi * Ai.T @ (Ai @ p - bi) for Ai, bi, wi in zip(A, b, w))

    H = sum(2 * wi * Ai.T @ Ai for Ai, wi in zip(A, w))
    L = np.linalg.eigvalsh(H).max()

    def proj(v):  # Euclidean projection onto {p >= 0, sum p = total}
        u = np.sort(v)[::-1]
        css = np.cumsum(u) - total
        k = np.nonzero(u - css / np.arange(1, n + 1) > 0)[0][-1]
        return np.maximum(v - css[k] / (k + 1), 0)

    p = np.full(n, total / n)
    z, t = p.copy(), 1.0
    for _ in range(iters):
        p_new = proj(z - grad(z) / L)
        t_new = (1 + np.sqrt(1 + 4 * t * t)) / 2
        z = p_new + (t - 1) / t_new * (p_new - p)
        p, t = p_new, t_new
    return f(p)


CLIQUE_SETS = {
    "tree": [("a", "b"), ("b", "c"), ("b", "d")],
    "cycle": [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")],
    "overlapping": [("a", "b", "c"), ("b", "c", "d"), ("c", "e")],
    "duplicated": [("a", "b"), ("a", "b"), ("b", "c"), ("b", "a")],
    "disjoint": [("a", "b"), ("c", "d")],
    "unmeasured": [("a", "c"), ("c",)],
}


def random_case(seed, n_attrs):
    rng = np.random.default_rng(seed)
    names = "abcdef"[:n_attrs]
    dom = Domain(list(names), rng.integers(2, 5, size=n_attrs))
    P = rng.dirichlet(np.full(dom.size(), 0.7)).reshape(dom.shape)
    return rng, dom, P


def assert_three_way_queries_exact(seed):
    """A model fitted to five overlapping noisy marginals of a random 6-attribute table: each of its
    3-way marginals (most need elimination over several cliques) equals the one summed from the
    model's full joint table."""
    rng, dom, P = random_case(seed, 6)
    cliques = [("a", "b", "c"), ("b", "c", "d"), ("c", "d", "e"), ("b", "e", "f"), ("a", "f")]
    ms = [Measurement(c, joint_marginal(P, dom, c) * 500 + rng.normal(0, 3, dom.size(c)), 3.0) for c in cliques]
    model = estimate(dom, ms, iters=50)
    J = model_joint(model)
    for attrs in itertools.combinations(dom.attrs, 3):
        np.testing.assert_allclose(model.project(attrs, cache=False), joint_marginal(J, dom, attrs), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("kind", sorted(CLIQUE_SETS))
@pytest.mark.parametrize("seed,method", [(0, "precond"), (1, "precond"), (0, "md"), (1, "momentum")])
def test_noiseless_measurements_reproduced_and_maxent(kind, seed, method):
    cliques = CLIQUE_SETS[kind]
    n_attrs = max(4, len({a for c in cliques for a in c}))
    n_attrs = 5 if kind in ("overlapping",) else n_attrs
    rng, dom, P = random_case(seed, n_attrs + (1 if kind == "unmeasured" else 0))
    ms = [Measurement(c, joint_marginal(P, dom, c).reshape(dom.sizes(dom.canonical(c)))
                      .transpose([dom.canonical(c).index(a) for a in c]).ravel(), 1.0) for c in cliques]
    model = estimate(dom, ms, total=1.0, iters=20000, tol=0, method=method)
    for c in cliques:
        np.testing.assert_allclose(model.project(dom.canonical(c)), joint_marginal(P, dom, c), atol=1e-6)
        # marginals come back in the order asked for
        flat = model.project(c).reshape(dom.sizes(c))
        np.testing.assert_allclose(flat.transpose([c.index(a) for a in dom.canonical(c)]).ravel(),
                                   joint_marginal(P, dom, c), atol=1e-6)
    # unmeasured sets equal the maximum-entropy fit of the full table
    targets = [(dom.canonical(c), joint_marginal(P, dom, c)) for c in cliques]
    Q = ipf_maxent(dom, targets)
    for r in [2, 3]:
        for attrs in itertools.combinations(dom.attrs, r):
            np.testing.assert_allclose(model.project(attrs), joint_marginal(Q, dom, attrs), atol=1e-6)


@functools.lru_cache(maxsize=None)
def noisy_case(kind):
    cliques = CLIQUE_SETS[kind]
    rng, dom, P = random_case(7, 5)
    N = 1000.0
    ms = []
    for c in cliques:
        sigma = float(rng.uniform(5, 30))
        y = joint_marginal(P, dom, c) * N + rng.normal(0, sigma, dom.size(c))
        ms.append(Measurement(dom.canonical(c), y, sigma))
    return dom, ms, N, brute_force_loss(dom, ms, N)


@pytest.mark.parametrize("kind", sorted(CLIQUE_SETS))
@pytest.mark.parametrize("method,maps", [("precond", "sparse"), ("md", "sparse"), ("precond", "dense"),
                                         ("momentum", "sparse"), ("momentum", "dense")])
def test_noisy_loss_matches_brute_force_optimum(kind, method, maps, monkeypatch):
    # the clique <-> potential maps: CSR for small cliques, numpy sums for big ones (forced here)
    monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", 0 if maps == "dense" else 10**12)
    dom, ms, N, best = noisy_case(kind)
    model = estimate(dom, ms, total=N, iters=5000, tol=1e-10, method=method)
    ours = loss_of(dom, ms, model.project)
    assert abs(ours - model.info.loss) <= 1e-6 * max(1.0, ours)
    assert ours <= best * 1.001 + 1e-6, (ours, best)


def test_project_any_attribute_set_matches_joint():
    rng, dom, P = random_case(3, 6)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f"), ("a", "f"), ("b", "e")]
    ms = [Measurement(c, joint_marginal(P, dom, c) * 500 + rng.normal(0, 3, dom.size(c)), 3.0) for c in cliques]
    model = estimate(dom, ms, iters=300)
    J = model_joint(model)
    for r in [1, 2, 3, 4]:
        for attrs in itertools.combinations(dom.attrs, r):
            np.testing.assert_allclose(model.project(attrs), joint_marginal(J, dom, attrs), rtol=1e-8, atol=1e-8)


def test_narrow_projection_summed_from_a_cached_wider_one(monkeypatch):
    """After the 3-way marginals are cached, every 2-way one across cliques is summed from one of
    them (no elimination) and still equals the brute-force joint's; clearing the cache forgets them."""
    import privmarg.generate.pgm.graphical_model as gm

    rng, dom, P = random_case(5, 6)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f"), ("b", "e")]
    ms = [Measurement(c, joint_marginal(P, dom, c) * 500 + rng.normal(0, 3, dom.size(c)), 3.0) for c in cliques]
    model = estimate(dom, ms, iters=300)
    J = model_joint(model)
    for attrs in itertools.combinations(dom.attrs, 3):
        model.project(attrs)
    calls = []
    elim = gm.GraphicalModel._eliminate
    monkeypatch.setattr(gm.GraphicalModel, "_eliminate", lambda self, attrs: calls.append(attrs) or elim(self, attrs))
    across = [r for r in itertools.combinations(dom.attrs, 2) if not any(set(r) <= set(c) for c in model.cliques)]
    assert across
    for attrs in itertools.combinations(dom.attrs, 2):
        np.testing.assert_allclose(model.project(attrs), joint_marginal(J, dom, attrs), rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(model.project(attrs[::-1]),
                                   joint_marginal(J, dom, attrs).reshape(dom.sizes(attrs)).T.ravel(), rtol=1e-8, atol=1e-8)
    assert calls == []
    for r in across:  # an uncached query neither reads nor fills the cache
        model.project(r, cache=False)
    assert calls == across
    calls.clear()
    model.clear_cache()
    for r in across:
        model.project(r)
    assert calls == across


@pytest.mark.parametrize("seed", range(6))
def test_pairwise_contraction_matches_einsum(seed):
    """The two-table contraction (batched matrix product) equals np.einsum for attributes held by
    both tables and kept (batch), by both and summed (inner), by one and kept, or by one and summed."""
    import privmarg.generate.pgm.graphical_model as gm

    rng = np.random.default_rng(seed)
    dom = Domain(list("abcdefg"), rng.integers(1, 5, size=7))
    for _ in range(30):
        fa = tuple(rng.permutation(dom.attrs)[: rng.integers(1, 5)])
        fb = tuple(rng.permutation(dom.attrs)[: rng.integers(1, 5)])
        both = sorted(set(fa) | set(fb))
        out = tuple(rng.permutation(both)[: rng.integers(0, len(both) + 1)])
        a, b = rng.uniform(size=dom.sizes(fa)), rng.uniform(size=dom.sizes(fb)).astype(rng.choice(["f4", "f8"]))
        letters = {x: i for i, x in enumerate(dom.attrs)}
        want = np.einsum(a, [letters[x] for x in fa], b, [letters[x] for x in fb], [letters[x] for x in out])
        got = gm._einsum([(fa, a.ravel() if rng.random() < 0.3 else a), (fb, b)], out, dom)
        assert got.shape == tuple(dom.sizes(out))
        np.testing.assert_allclose(got, want, rtol=1e-6 if b.dtype == np.float32 else 1e-12)


def test_projection_uses_the_smallest_covering_subtree():
    """A marginal across cliques is eliminated over the connected set of cliques with the fewest
    cells that covers it (brute force over every connected subset of a 7-clique tree)."""
    rng = np.random.default_rng(11)
    dom = Domain(list("abcdefgh"), rng.integers(2, 5, size=8))
    cliques = [("a", "b", "c"), ("c", "d"), ("d", "e", "f"), ("b", "g"), ("g", "h"), ("a", "h"), ("e", "h")]
    ms = [Measurement(c, rng.uniform(0, 50, dom.size(c)), 3.0) for c in cliques]
    model = estimate(dom, ms, iters=5)
    tree = model.tree
    n = len(tree.cliques)
    cells = [dom.size(c) for c in tree.cliques]

    def connected(nodes):
        seen, todo = set(), [min(nodes)]
        while todo:
            x = todo.pop()
            seen.add(x)
            todo += [c for p, c in tree.edges if p == x and c in nodes and c not in seen]
            todo += [p for p, c in tree.edges if c == x and p in nodes and p not in seen]
        return seen == set(nodes)

    subsets = [set(s) for k in range(1, n + 1) for s in itertools.combinations(range(n), k) if connected(set(s))]
    for attrs in itertools.chain(itertools.combinations(dom.attrs, 2), itertools.combinations(dom.attrs, 3)):
        covers = [s for s in subsets if set(attrs) <= set().union(*(tree.cliques[i] for i in s))]
        nodes, edges = model._subtree(attrs)
        assert set(nodes) in covers and connected(set(nodes))
        assert sum(cells[i] for i in nodes) == min(sum(cells[i] for i in s) for s in covers), attrs
        assert all(p in nodes and c in nodes for p, c in edges) and len(edges) == len(nodes) - 1


def test_projection_across_independent_components_matches_joint():
    """Cliques joined only by empty separators are independent: a marginal across them is the
    product of each part's (and equals the brute-force joint's)."""
    rng, dom, P = random_case(13, 6)
    cliques = [("a", "b"), ("b", "c"), ("d", "e"), ("f",)]
    ms = [Measurement(c, joint_marginal(P, dom, c) * 500 + rng.normal(0, 3, dom.size(c)), 3.0) for c in cliques]
    model = estimate(dom, ms, iters=300)
    assert len(model._components(("a", "c", "d", "f"))) == 3
    J = model_joint(model)
    for attrs in [("a", "d"), ("a", "c", "e"), ("a", "c", "d", "f"), ("b", "e", "f")]:
        np.testing.assert_allclose(model.project(attrs), joint_marginal(J, dom, attrs), rtol=1e-8, atol=1e-8)
    # in the order asked for
    ace = model.project(("a", "c", "e")).reshape(dom.sizes(("a", "c", "e")))
    np.testing.assert_allclose(model.project(("e", "a", "c")), ace.transpose(2, 0, 1).ravel(), rtol=1e-12)


def test_float32_tables_track_float64():
    """dtype="float32": the same fit to float32 precision; the potentials and the loss stay float64."""
    rng, dom, P = random_case(12, 6)
    cliques = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f"), ("a", "f")]
    ms = [Measurement(c, joint_marginal(P, dom, c) * 5000 + rng.normal(0, 5, dom.size(c)), 5.0) for c in cliques]
    fits = {dt: estimate(dom, ms, total=5000.0, iters=200, tol=0, method="precond", dtype=dt)
            for dt in ("float64", "float32")}
    lo, hi = fits["float32"], fits["float64"]
    assert all(m.dtype == np.float32 for m in lo.marginals) and all(m.dtype == np.float64 for m in hi.marginals)
    assert all(v.dtype == np.float64 for v in lo.potentials.values())
    assert lo.info.loss == pytest.approx(hi.info.loss, rel=1e-4)
    for attrs in [("a",), ("a", "b"), ("a", "c", "e")]:
        np.testing.assert_allclose(lo.project(attrs), hi.project(attrs), rtol=1e-3, atol=1e-2)
    with pytest.raises(ValueError, match="dtype"):
        estimate(dom, ms, dtype="float16")


@pytest.mark.parametrize("exp_space", [False, True])
def test_float32_fit_released_in_float64(exp_space, monkeypatch):
    """model_dtype="float64" after a float32 fit: the same potentials as the float32 fit, and the
    model's tables are the float64 marginals of those potentials (structural zeros exactly zero)."""
    monkeypatch.setattr(estimation_module, "EXP_SPACE", exp_space)
    monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", 20)
    rng = np.random.default_rng(4)
    dom = Domain(list("abcdef"), [3, 4, 2, 5, 3, 4])
    cliques = [("a", "b", "c"), ("b", "c", "d"), ("d", "e"), ("e", "f"), ("a", "f")]
    ms = [Measurement(c, rng.uniform(0, 80, dom.size(c)), 1.0) for c in cliques]
    zero = StructuralZero.from_cells(dom, ("d", "e"), [[0, 1], [2, 2]])
    kw = dict(total=900.0, iters=20, tol=0, method="precond", zeros=[zero], dtype="float32")
    lo = estimate(dom, ms, **kw)
    out = estimate(dom, ms, **kw, model_dtype="float64")
    assert all(m.dtype == np.float64 for m in out.marginals) and all(t.dtype == np.float64 for t in out.theta)
    for r in lo.potentials:
        np.testing.assert_array_equal(out.potentials[r], lo.potentials[r])
    assert out.info.loss == lo.info.loss and out.info.iterations == lo.info.iterations
    exact = estimate(dom, ms, total=900.0, iters=0, zeros=[zero], warm=lo.potentials, dtype="float64")
    for a, b in zip(out.marginals, exact.marginals):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)
    assert np.all(out.project(("d", "e")).reshape(5, 3)[[0, 2], [1, 2]] == 0)
    with pytest.raises(ValueError, match="model_dtype"):
        estimate(dom, ms, model_dtype="float16")


@pytest.mark.parametrize("scale", [1.0, 200.0, 700.0])
def test_float64_tables_of_a_float32_fit_are_a_float64_pass(scale, monkeypatch):
    """A float32 fit's float64 tables are those a float64 evaluation at the same potentials makes,
    bit for bit, also where products of big potentials underflow and cliques are redone in log
    space (scaled potentials; exp space forced on small cliques): the drift bounds that spare
    scoring (select/lazy_scores.py) rest on these tables being float64 throughout."""
    monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", 20)
    made = []
    real = estimation_module._fitted_model

    def fitted(domain, tree, plan, evaluate, phi, mu, total, recast):
        made.append((evaluate.exp_space, recast))
        return real(domain, tree, plan, evaluate, phi, mu, total, recast)

    monkeypatch.setattr(estimation_module, "_fitted_model", fitted)
    rng = np.random.default_rng(1)
    dom = Domain(list("abcdef"), [3, 4, 2, 5, 3, 4])
    cliques = [("a", "b", "c"), ("b", "c", "d"), ("d", "e"), ("e", "f"), ("a", "f")]
    zero = StructuralZero.from_cells(dom, ("d", "e"), [[0, 1], [2, 2]])
    ms = [Measurement(c, rng.uniform(0, 80, dom.size(c)), 1.0) for c in cliques]
    kw = dict(total=900.0, zeros=[zero])
    fit = estimate(dom, ms, iters=15, tol=0, method="precond", dtype="float32", **kw)
    pot = {r: v * scale for r, v in fit.potentials.items()}
    recast = estimate(dom, ms, iters=0, warm=pot, dtype="float32", model_dtype="float64", **kw)
    assert made[-1] == (True, np.dtype("float64"))  # the products' path, not the log-space one
    exact = estimate(dom, ms, iters=0, warm=pot, dtype="float64", **kw)
    for a, b in zip(recast.marginals, exact.marginals):
        assert a.dtype == np.float64
        np.testing.assert_array_equal(a, b)
    for a, b in zip(recast.theta, exact.theta):
        np.testing.assert_array_equal(a, b)


def test_total_estimated_from_measurements():
    rng, dom, P = random_case(4, 4)
    N = 2000
    sig = 0.001
    ms = [Measurement(c, joint_marginal(P, dom, c) * N + rng.normal(0, sig, dom.size(c)), sig)
          for c in [("a", "b"), ("c",)]]
    model = estimate(dom, ms, iters=50)
    assert abs(model.total - N) < 0.01
    assert abs(model.project(["a"]).sum() - N) < 0.01


def test_model_size_counts_maximal_cliques():
    dom = Domain(list("abcd"), [10, 20, 30, 40])
    # a cycle a-b-c-d-a triangulates into two triangles of 3 attributes
    size = model_size_mb(dom, [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")])
    options = [10 * 20 * 30 + 10 * 30 * 40, 20 * 30 * 40 + 10 * 20 * 40]
    assert any(abs(size - 8 * o / 2**20) < 1e-12 for o in options)
    assert model_size_mb(dom, [("a", "b")]) == pytest.approx(8 * (200 + 30 + 40) / 2**20)


def test_warm_start_continues_from_potentials():
    rng, dom, P = random_case(5, 5)
    N = 1000.0
    ms = [Measurement(c, joint_marginal(P, dom, c) * N + rng.normal(0, 5, dom.size(c)), 5.0)
          for c in [("a", "b"), ("b", "c"), ("d", "e")]]
    first = estimate(dom, ms, total=N, iters=2000, tol=1e-12)
    again = estimate(dom, ms, total=N, iters=3, warm=first.potentials)
    cold = estimate(dom, ms, total=N, iters=3)
    assert again.info.loss <= first.info.loss * (1 + 1e-6)
    assert again.info.loss < cold.info.loss


def test_precond_warm_start_resumes_its_step():
    """A preconditioned fit warm-started from another resumes its preconditioned step (the generator
    passes ``model.precond_step`` on) instead of restarting at 0.5 and having its first tries
    rejected down to the scale the last fit had found: a lower loss than a restarted fit reaches
    with as many evaluations."""
    from privmarg import PGM

    rng, dom, P = random_case(21, 5)
    N = 2000.0
    ms = [Measurement(c, joint_marginal(P, dom, c) * N + rng.normal(0, 20, dom.size(c)), 20.0)
          for c in [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")]]
    ms += [Measurement(("a", "e"), joint_marginal(P, dom, ("a", "e")) * N, 1.0)]  # exact: empty cells
    first = estimate(dom, ms, total=N, iters=30, tol=1e-15, method="precond")
    assert 0 < first.precond_step < 0.1
    resumed = PGM(iters=10, tol=1e-15, method="precond").generate(ms, dom, total=N, warm=first)
    direct = estimate(dom, ms, total=N, iters=10, tol=1e-15, method="precond", warm=first.potentials,
                      step=first.step_size, precond_step=first.precond_step)
    assert resumed.info.history == direct.info.history
    restarted = [estimate(dom, ms, total=N, iters=k, tol=1e-15, method="precond", warm=first.potentials,
                          step=first.step_size) for k in range(1, 11)]
    assert resumed.info.evaluations < restarted[-1].info.evaluations
    affordable = [m.info.loss for m in restarted if m.info.evaluations <= resumed.info.evaluations]
    assert affordable and resumed.info.loss < min(affordable)
    with pytest.raises(ValueError, match="precond_step"):
        estimate(dom, ms, total=N, iters=5, method="precond", precond_step=0.0)


def test_momentum_warm_start_and_zeros():
    rng, dom, P = random_case(6, 4)
    zero_mask = np.zeros(dom.sizes(("a", "b")), dtype=bool)
    zero_mask[0, 1] = True
    N = 3000.0
    ms = [Measurement(c, joint_marginal(P, dom, c) * N + rng.normal(0, 10, dom.size(c)), 10.0)
          for c in [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]]
    z = [StructuralZero(("a", "b"), zero_mask)]
    first = estimate(dom, ms, total=N, iters=300, zeros=z, method="momentum")
    ab = first.project(("a", "b")).reshape(dom.sizes(("a", "b")))
    assert np.all(ab[zero_mask] == 0.0) and ab[~zero_mask].min() > 0
    again = estimate(dom, ms, total=N, iters=5, zeros=z, warm=first.potentials, step=first.step_size, method="momentum")
    assert again.info.loss <= first.info.loss * (1 + 1e-9)
    md = estimate(dom, ms, total=N, iters=2000, tol=1e-12, zeros=z, method="md")
    assert first.info.loss <= md.info.loss * 1.001


def test_momentum_needs_fewer_passes_than_mirror_descent():
    """One belief-propagation pass per step, and a lower loss than plain mirror descent at the same
    number of passes on a noisy problem whose optimum is known (the reason it is the default)."""
    dom, ms, N, best = noisy_case("overlapping")
    md = estimate(dom, ms, total=N, iters=30, tol=0, method="md")
    mom = estimate(dom, ms, total=N, iters=md.info.evaluations // 2, tol=0, method="momentum")
    assert mom.info.evaluations <= md.info.evaluations
    assert mom.info.loss - best < 0.05 * (md.info.loss - best)  # measured: 0.0085 vs 0.82


def test_structural_zeros_stay_zero_in_model_and_samples():
    rng, dom, P = random_case(6, 4)
    zero_mask = np.zeros(dom.sizes(("a", "b")), dtype=bool)
    zero_mask[0, 1] = True
    zero_mask[1, 0] = True
    N = 3000.0
    ms = [Measurement(c, joint_marginal(P, dom, c) * N + rng.normal(0, 10, dom.size(c)), 10.0)
          for c in [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]]
    model = estimate(dom, ms, total=N, iters=500, zeros=[StructuralZero(("a", "b"), zero_mask)])
    ab = model.project(("a", "b")).reshape(dom.sizes(("a", "b")))
    assert np.all(ab[zero_mask] == 0.0)
    assert ab[~zero_mask].min() > 0
    J = model_joint(model)
    assert np.all(joint_marginal(J, dom, ("a", "b")).reshape(zero_mask.shape)[zero_mask] == 0.0)
    for method in ("round", "sample"):
        x = model.synthetic_data(5000, np.random.default_rng(0), method=method)
        bad = zero_mask[x[:, 0], x[:, 1]]
        assert not bad.any()


def _adult():
    return Dataset.from_frame(*datasets.load("adult"))


def test_synthetic_counts_match_model_on_every_clique():
    data = _adult()
    dom = data.domain
    rng = np.random.default_rng(1)
    cliques = [("age", "education-num"), ("education-num", "occupation"), ("occupation", "sex", "income>50K"),
               ("race", "native-country"), ("marital-status", "relationship", "sex"), ("workclass", "hours-per-week")]
    ms = [Measurement((a,), data.project([a]) + rng.normal(0, 10, dom[a]), 10.0) for a in dom.attrs]
    ms += [Measurement(c, data.project(c) + rng.normal(0, 10, dom.size(c)), 10.0) for c in cliques]
    model = estimate(dom, ms, iters=200)
    syn = Dataset(model.synthetic_data(rng=np.random.default_rng(0)), dom)
    assert len(syn) == int(model.total)
    for c in model.cliques:
        diff = np.abs(syn.project(c) - model.project(c) * len(syn) / model.total)
        assert diff.mean() <= 2.0, (c, diff.mean())
    # seeded sampling is reproducible
    again = model.synthetic_data(rng=np.random.default_rng(0))
    np.testing.assert_array_equal(again, syn.codes)


def test_dataset_marginals_follow_the_order_asked():
    dom = Domain(["a", "b", "c"], [2, 3, 4])
    rng = np.random.default_rng(0)
    data = Dataset(np.column_stack([rng.integers(0, k, 500) for k in dom.shape]), dom)
    ab = data.project(["a", "b"]).reshape(2, 3)
    ba = data.project(["b", "a"]).reshape(3, 2)
    np.testing.assert_array_equal(ab, ba.T)
    direct = np.zeros((2, 3))
    np.add.at(direct, (data.codes[:, 0], data.codes[:, 1]), 1)
    np.testing.assert_array_equal(ab, direct)
    assert data.project([]).tolist() == [500.0]
    with pytest.raises(KeyError):
        data.project(["a", "zz"])


@pytest.mark.parametrize("method", ["precond", "md", "momentum"])
def test_overlong_trial_step_is_rejected_not_fatal(method):
    # a step so long that the potentials overflow (seen in JAM with equal weights on big cliques):
    # the trial must be rejected and the step shrunk, ending at the same optimum as a sane start
    rng, dom, P = random_case(6, 4)
    N = 1000.0
    ms = [Measurement(c, joint_marginal(P, dom, c) * N + rng.normal(0, 5, dom.size(c)), 1.0, weight=1.0)
          for c in [("a", "b"), ("b", "c"), ("c", "d")]]
    wild = estimate(dom, ms, total=N, iters=400, tol=1e-12, step=1e300, method=method)
    sane = estimate(dom, ms, total=N, iters=400, tol=1e-12, method=method)
    assert np.isfinite(wild.info.loss)
    assert wild.info.loss <= sane.info.loss * 1.01 + 1e-6


def test_precond_does_not_saturate_on_a_dominant_cell():
    # adult's public capital-gain x capital-loss (90% of the rows in one cell, 98% of the cells
    # empty) next to a noisy income marginal, equal weights (JAM's round 2): an unclipped Newton-like
    # step put all the mass on the big cell (potential ~900) and both optimisers stalled there, 1000x
    # above the optimum
    private = Dataset.from_frame(*datasets.load("adult-public-split"))
    public = Dataset.from_frame(*datasets.load("adult-public-split", table="public-050"))
    dom = private.domain
    N = float(len(private))
    rng = np.random.default_rng(0)
    ms = [Measurement(("income>50K",), private.project(("income>50K",)) + rng.normal(0, 159, 2), 159.0, weight=1.0),
          Measurement(("capital-gain", "capital-loss"), public.project(("capital-gain", "capital-loss")) * N / len(public),
                      None, source="public", weight=1.0)]
    best = estimate(dom, ms, total=N, iters=2000, tol=1e-12, method="md")
    fit = estimate(dom, ms, total=N, iters=100, tol=1e-6, method="precond")
    assert fit.info.loss <= best.info.loss * 1.01 + 1.0


@pytest.mark.parametrize("kind", sorted(CLIQUE_SETS))
def test_dense_and_sparse_clique_maps_agree(kind, monkeypatch):
    """Same fit, step for step, whichever way potentials and marginals are mapped (with zeros too)."""
    dom, ms, N, _ = noisy_case(kind)
    zero = StructuralZero.from_cells(dom, ms[0].attrs, [[0] * len(ms[0].attrs)])
    # the maps only: belief propagation in log space for both (its exp-space path for big cliques
    # rounds differently, and these fits run to the rounding floor; compared in its own test)
    monkeypatch.setattr(estimation_module, "EXP_SPACE", False)
    fits = []
    for cells in (10**12, 0):
        monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", cells)
        fits.append(estimate(dom, ms, total=N, iters=60, tol=0, zeros=[zero]))
    a, b = fits
    assert len(a.info.history) == len(b.info.history)
    np.testing.assert_allclose(a.info.history, b.info.history, rtol=1e-9)
    for c in [m.attrs for m in ms] + [tuple(dom.attrs[:3])]:
        np.testing.assert_allclose(a.project(c), b.project(c), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_exp_space_belief_propagation_matches_log_space(dtype, monkeypatch):
    """Belief propagation from products of the potentials' exponentials gives the log-space pass's
    marginals, with small, big and key-less cliques, structural zeros, and potentials far apart
    (products that underflow: those cliques are redone in log space)."""
    rng = np.random.default_rng(21)
    dom = Domain(list("abcdefg"), [3, 4, 2, 5, 3, 4, 2])
    cliques = [("a", "b", "c"), ("b", "c", "d"), ("d", "e"), ("e", "f", "g"), ("a", "g")]
    ms = [Measurement(c, rng.uniform(0, 80, dom.size(c)), 1.0) for c in cliques]
    zero = StructuralZero.from_cells(dom, ("d", "e"), [[0, 1], [2, 2]])
    monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", 20)  # (d, e) and (a, g) stay small
    extra = [("a", "b", "c", "d")]  # a maximal clique with measured keys inside, and none of its own
    for scale in (1.0, 300.0):  # 300: exp(φ − max φ) products underflow in float32 and float64
        fits = {}
        for flag in (False, True):
            monkeypatch.setattr(estimation_module, "EXP_SPACE", flag)
            warm = {c: rng.normal(0, scale, dom.size(c)) for c in cliques} if flag is False else warm
            fits[flag] = estimate(dom, ms, total=500.0, iters=0, zeros=[zero], warm=warm, dtype=dtype,
                                  extra_cliques=extra)
        tol = 1e-9 if dtype == "float64" else 2e-4
        for a, b in zip(fits[False].marginals, fits[True].marginals):
            np.testing.assert_allclose(b, a, rtol=tol, atol=tol * 500)
        assert fits[True].info.loss == pytest.approx(fits[False].info.loss, rel=tol)


def test_theta_of_a_big_clique_fit_is_made_on_first_use(monkeypatch):
    """A fit over big cliques (exp space) leaves θ to be made when asked for, holding only the map
    that makes it: the model's marginals are the fit's μ, and θ then is the potentials spread over
    the cliques (−inf on structural zeros), whose marginals are μ; a pickle and compact() carry the
    same θ bit for bit. A tree of mostly small cliques makes θ at once (the map would be larger)."""
    import pickle

    from privmarg.generate.pgm.belief import belief_propagation, broadcast_shape

    rng = np.random.default_rng(5)
    dom = Domain(list("abcdef"), [6, 7, 5, 8, 3, 4])
    cliques = [("a", "b", "c"), ("b", "c", "d"), ("d", "e"), ("e", "f"), ("a", "f")]
    ms = [Measurement(c, rng.uniform(0, 80, dom.size(c)), 1.0) for c in cliques]
    zero = StructuralZero.from_cells(dom, ("d", "e"), [[0, 1], [2, 2]])
    monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", 100)
    kw = dict(total=900.0, iters=15, tol=0, method="precond", zeros=[zero], dtype="float32")
    # mostly small cliques: their sparse map would outweigh θ, which the fit then makes at once
    made = []
    later = estimation_module._Evaluator.theta_later
    monkeypatch.setattr(estimation_module._Evaluator, "theta_later",
                        lambda ev, p, dtype=None: made.append(later(ev, p, dtype)) or made[-1])
    mixed = Domain(list("abcdefgh"), [10, 10, 9, 9, 9, 9, 9, 9])
    parts = [("a", "b"), ("b", "c"), ("c", "d"), ("e", "f"), ("g", "h")]  # one clique of 100 cells, four small
    fit = estimate(mixed, [Measurement(c, rng.uniform(0, 80, mixed.size(c)), 1.0) for c in parts],
                   **{**kw, "zeros": []})
    assert made == [None] and fit._theta is not None
    monkeypatch.setattr(estimation_module._Evaluator, "theta_later", later)
    model = estimate(dom, ms, **kw)
    assert model._theta is None  # not made by the fit
    held = {type(c.cell_contents).__name__: c.cell_contents for c in model._theta_source.__closure__}
    spread = held["_Problem"]  # only the map θ = Aᵀφ: no loss terms, no partial-sum tables of the fit
    assert not hasattr(spread, "W") and spread.dense and all(g._bufs is None for g in spread.dense)
    assert 2 <= held["ndarray"].size < 100  # the zeros' cells, not a tree-sized mask
    marginals = [m.copy() for m in model.marginals]
    theta = model.theta
    assert model._theta_source is None
    key = dom.canonical(zero.attrs)
    mask = zero.factor(dom).transpose(key).values.astype(bool)
    for i, (clique, t) in enumerate(zip(model.tree.cliques, theta)):
        want = np.zeros(dom.sizes(clique))
        for r, phi in model.potentials.items():
            if model.tree.find_clique(r) == i:  # each potential sits on one clique
                want = want + phi.reshape(broadcast_shape(dom, r, clique))
        if model.tree.find_clique(key) == i:
            want[np.broadcast_to(mask.reshape(broadcast_shape(dom, key, clique)), want.shape)] = -np.inf
        assert t.dtype == np.float32
        np.testing.assert_allclose(t, want, rtol=1e-6, atol=1e-5)
    for a, b in zip(model.marginals, marginals):
        assert np.array_equal(a, b)  # asking for θ leaves the fit's marginals as they were
    again, _, _ = belief_propagation(model._plan, [t.astype(np.float64) for t in theta], 900.0)
    for a, b in zip(again, marginals):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)
    back = pickle.loads(pickle.dumps(estimate(dom, ms, **kw)))
    assert back._theta_source is None and all(np.array_equal(a, b) for a, b in zip(back.theta, theta))
    small = estimate(dom, ms, **kw).compact()
    assert all(np.array_equal(a, b) for a, b in zip(small.theta, theta))


def test_dense_partial_sums_match_sparse_maps_with_many_keys_per_clique(monkeypatch):
    """Many keys (3-, 2- and 1-way, nested and not) on one maximal clique: the dense maps' shared
    partial sums give x = Aμ and θ = Aᵀφ exactly as the sparse matrix does, and the same fit."""
    from privmarg.generate.pgm.belief import _Plan
    from privmarg.generate.pgm.junction_tree import JunctionTree

    rng = np.random.default_rng(7)
    dom = Domain(list("abcde"), [3, 4, 2, 5, 3])
    keys = [("a", "b", "c"), ("b", "c", "d"), ("a", "d", "e"), ("c", "e"), ("b",), ("a", "b", "c", "d", "e"),
            ("d", "e"), ("a",)]
    tree = JunctionTree.build(dom, [("a", "b", "c", "d", "e")])
    plan = _Plan(tree)
    ms = [Measurement(k, rng.uniform(0, 50, dom.size(k)), 1.0) for k in keys]
    probs = {}
    for cells in (10**12, 0):
        monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", cells)
        probs[cells] = estimation_module._Problem(dom, tree, plan, ms, keys)
    sparse, dense = probs[10**12], probs[0]
    assert not sparse.dense and len(dense.dense) == 1 and len(dense.dense[0].nodes) >= 1
    mu = rng.uniform(0, 1, sparse.mu_off[-1])
    phi = rng.normal(size=sparse.x_off[-1])
    np.testing.assert_allclose(dense.to_x(mu), sparse.to_x(mu), rtol=1e-12)
    np.testing.assert_allclose(dense.to_theta(phi), sparse.to_theta(phi), rtol=1e-12, atol=1e-12)
    fits = []
    for cells in (10**12, 0):
        monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", cells)
        fits.append(estimate(dom, ms, total=100.0, iters=40, tol=0, method="precond"))
    np.testing.assert_allclose(fits[0].info.history, fits[1].info.history, rtol=1e-9)


def test_model_size_ignores_cliques_inside_others_and_cache_agrees():
    """JT-SIZE of a clique set equals that of its maximal cliques (what the size cache keys on), and a
    cached answer equals a fresh greedy elimination."""
    from privmarg.generate.pgm import junction_tree as jt

    rng = np.random.default_rng(3)
    dom = Domain([f"x{i}" for i in range(9)], rng.integers(2, 9, size=9))
    masks = jt._masks(dom)
    for _ in range(40):
        big = [tuple(sorted(rng.choice(dom.attrs, size=int(rng.integers(2, 4)), replace=False),
                            key=dom.attrs.index)) for _ in range(int(rng.integers(2, 7)))]
        subs = [c[: int(rng.integers(1, len(c) + 1))] for c in big]  # prefixes: inside a big one
        _, elim = jt._eliminate(masks, [masks.mask(c) for c in big + subs])
        fresh = 8.0 * sum(masks.cells(c) for c in jt._maximal(elim)) / jt.MB
        _, elim = jt._eliminate(masks, [masks.mask(c) for c in big])
        assert 8.0 * sum(masks.cells(c) for c in jt._maximal(elim)) / jt.MB == fresh
        masks.sizes_mb.clear()
        assert model_size_mb(dom, big + subs) == fresh  # computed
        assert model_size_mb(dom, subs + big) == fresh  # cached, other order
        assert model_size_mb(dom, big) == fresh  # cached, without the subsets


@pytest.mark.parametrize("n_attrs", [6, 62, 63, 70])
def test_covered_matches_subset_test(n_attrs, monkeypatch):
    """The bit-mask containment check (numpy up to 62 attributes, Python ints past that) says the
    same as set inclusion, the empty clique included."""
    import privmarg.generate.pgm.junction_tree as jt
    from privmarg.generate.pgm.junction_tree import covered

    rng = np.random.default_rng(n_attrs)
    dom = Domain([f"x{i}" for i in range(n_attrs)], [2] * n_attrs)
    pick = lambda k: tuple(rng.choice(dom.attrs, size=k, replace=False))  # noqa: E731
    cliques = [pick(int(rng.integers(0, 4))) for _ in range(300)]

    for within in ([], [pick(3) for _ in range(2)], [dom.attrs[:3], dom.attrs[-4:]]):
        want = [any(set(c) <= set(w) for w in within) for c in cliques]
        assert covered(dom, cliques, within) == want
        monkeypatch.setattr(jt, "INSIDE_CELLS", 7)  # a few rows at a time
        assert covered(dom, cliques, within) == want
        monkeypatch.undo()
        if within:
            assert any(want) and not all(want)


def test_model_sizes_batch_matches_one_by_one():
    from privmarg.generate.pgm.junction_tree import _masks, model_sizes_mb

    rng = np.random.default_rng(5)
    dom = Domain([f"x{i}" for i in range(8)], rng.integers(2, 9, size=8))
    base = [("x0", "x1", "x2"), ("x1", "x2"), ("x2", "x3"), ("x4", "x5", "x6")]
    extra = [tuple(sorted(rng.choice(dom.attrs, size=int(rng.integers(1, 4)), replace=False), key=dom.attrs.index))
             for _ in range(60)] + [("x1", "x2"), ("x0", "x1", "x2", "x3")]
    _masks(dom).sizes_mb.clear()
    batch = model_sizes_mb(dom, base, extra)
    _masks(dom).sizes_mb.clear()
    assert batch == [model_size_mb(dom, base + [r]) for r in extra]


@pytest.mark.parametrize("table", [True, False])
def test_model_sizes_in_numpy_equal_the_greedy_elimination(table, monkeypatch):
    """A round's candidate models are sized all at once in int64 arrays: the same JT-SIZE as the
    one-model elimination, ties included (sizes 1-5 make many), with every mask's cell count from
    one table or multiplied out per mask; a domain whose cell counts could overflow int64 is sized
    one model at a time."""
    from privmarg.generate.pgm import junction_tree as jt

    monkeypatch.setattr(jt, "TABLE_ATTRS", 20 if table else 0)
    rng = np.random.default_rng(23)
    for _ in range(150):
        d = int(rng.integers(2, 16))
        dom = Domain([f"x{i}" for i in range(d)], rng.integers(1, 6, size=d))
        masks = jt._masks(dom)
        keys = [frozenset(jt._maximal([masks.mask(rng.choice(dom.attrs, size=int(rng.integers(1, min(d, 4) + 1)),
                                                            replace=False)) for _ in range(int(rng.integers(1, 12)))]))
                for _ in range(int(rng.integers(1, 30)))]
        got = jt._sizes_mb_batch(masks, keys)
        for k, g in zip(keys, got):
            _, elim = jt._eliminate(masks, list(k))
            assert g == 8.0 * sum(masks.cells(c) for c in jt._maximal(elim)) / jt.MB
    wide = Domain([f"x{i}" for i in range(12)], [5000] * 12)  # 5000^12 cells: past int64
    assert not jt._masks(wide).exact_int64
    base = [("x0", "x1"), ("x1", "x2"), ("x3", "x4")]
    extra = [(f"x{i}", f"x{j}") for i in range(12) for j in range(i + 1, 12)]
    jt._masks(wide).sizes_mb.clear()
    batch = jt.model_sizes_mb(wide, base, extra)
    jt._masks(wide).sizes_mb.clear()
    assert batch == [model_size_mb(wide, base + [r]) for r in extra]


def test_incremental_greedy_elimination_equals_the_plain_one():
    """The per-attribute unions updated in place give the same order and elimination cliques as
    recomputing every union from the clique list, ties included (small sizes make many)."""
    from privmarg.generate.pgm import junction_tree as jt

    rng = np.random.default_rng(11)
    for _ in range(400):
        d = int(rng.integers(1, 14))
        dom = Domain([f"x{i}" for i in range(d)], rng.integers(1, 5, size=d))
        masks = jt._masks(dom)
        cliques = [masks.mask(rng.choice(dom.attrs, size=int(rng.integers(1, min(d, 4) + 1)), replace=False))
                   for _ in range(int(rng.integers(0, 20)))]
        assert jt._eliminate(masks, cliques) == jt._eliminate_reference(masks, cliques)


def test_mixed_small_and_big_clique_maps_write_every_cell(monkeypatch):
    """Some cliques mapped by CSR, some by dense sums, one big clique with no key of its own: θ = Aᵀφ
    written into a dirty buffer (reused across evaluations) equals the all-sparse map, as does x = Aμ."""
    from privmarg.generate.pgm.belief import _Plan
    from privmarg.generate.pgm.junction_tree import JunctionTree

    rng = np.random.default_rng(11)
    dom = Domain(list("abcdef"), [4, 5, 3, 6, 4, 2])
    # the 4-cycle a-b-c-d triangulates into (a, b, d) and (b, c, d); the extra clique (b, d, e) holds
    # no key. At the threshold below the 120-cell cliques take the dense maps, the others CSR.
    keys = [("a", "b"), ("b", "c"), ("c", "d"), ("a", "d"), ("e", "f")]
    extra = [("b", "d", "e")]
    tree = JunctionTree.build(dom, keys + extra)
    plan = _Plan(tree)
    ms = [Measurement(k, rng.uniform(0, 50, dom.size(k)), 1.0) for k in keys]
    sizes = sorted(int(np.prod(s)) for s in plan.shapes)
    threshold = 100
    assert sizes[0] < threshold <= sizes[-1]
    probs = {}
    for cells in (10**12, threshold):
        monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", cells)
        probs[cells] = estimation_module._Problem(dom, tree, plan, ms, keys)
    sparse, mixed = probs[10**12], probs[threshold]
    assert mixed.small_idx is not None and mixed.small_idx.size and mixed.dense and mixed.bare
    phi = rng.normal(size=sparse.x_off[-1])
    want = sparse.to_theta(phi)
    buf = np.full(sparse.mu_off[-1], np.nan)
    for _ in range(2):  # the second call finds the first one's values in the buffer
        got = mixed.to_theta(phi, out=buf)
        assert got is buf
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        phi = rng.normal(size=sparse.x_off[-1])
        want = sparse.to_theta(phi)
    mu = rng.uniform(0, 1, sparse.mu_off[-1])
    for _ in range(2):
        np.testing.assert_allclose(mixed.to_x(mu), sparse.to_x(mu), rtol=1e-12)
    fits = []
    for cells in (10**12, threshold):
        monkeypatch.setattr(estimation_module, "DENSE_CLIQUE_CELLS", cells)
        fits.append(estimate(dom, ms, total=100.0, iters=40, tol=0, method="momentum", extra_cliques=extra))
    np.testing.assert_allclose(fits[0].info.history, fits[1].info.history, rtol=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_belief_propagation_far_apart_peaks_match_brute_force(dtype):
    """A child whose own belief and the message it receives peak 640 nats apart: their scaled
    exponentials' product falls below 1e-250 and the pass redoes that clique in log space (the
    branch taken here); marginals and log Z match the brute-force joint, with and without (dirty)
    output buffers."""
    from scipy.special import logsumexp

    from privmarg.generate.pgm.belief import _Plan, belief_propagation
    from privmarg.generate.pgm.junction_tree import JunctionTree

    dom = Domain(list("abc"), [2, 2, 3])
    tree = JunctionTree.build(dom, [("a", "b"), ("b", "c")])
    plan = _Plan(tree)
    rng = np.random.default_rng(0)
    # (a, b) prefers b = 1 by 650 and (b, c) prefers b = 0 by 640: the joint has b = 1 ahead by
    # about 10 nats, so both separator values carry mass, but the child's own belief and the message
    # it receives peak 640 nats apart
    pots = {("a", "b"): rng.normal(size=(2, 2)) + np.array([0.0, 650.0]),
            ("b", "c"): rng.normal(size=(2, 3)) + np.array([[0.0], [-640.0]])}
    theta = [pots[tuple(c)].astype(dtype) for c in tree.cliques]
    joint = pots[("a", "b")][:, :, None] + pots[("b", "c")][None, :, :]
    log_z = float(logsumexp(joint))
    p = np.exp(joint - log_z) * 10.0
    # float32 potentials near 650 carry ~4e-5 absolute rounding in log space
    rtol, atol = (1e-9, 1e-300) if dtype == np.float64 else (2e-4, 1e-30)
    for out in (None, [np.full(s, np.nan, dtype=dtype) for s in plan.shapes]):
        mu, lz, _ = belief_propagation(plan, [t.copy() for t in theta], 10.0, out=out)
        assert lz == pytest.approx(log_z, rel=rtol)
        for c, m in zip(tree.cliques, mu):
            assert m.dtype == dtype
            axes = tuple(i for i, a in enumerate("abc") if a not in c)
            np.testing.assert_allclose(m, p.sum(axis=axes), rtol=rtol, atol=atol)


def test_buffer_pool_hands_out_only_unreferenced_arrays(monkeypatch):
    pool = estimation_module._Buffers(5)
    a = pool.take()
    b = pool.take()  # a is still referenced: a second array
    assert a is not b
    view = b[1:3]
    del b
    c = pool.take()  # b lives on through its view
    assert c is not a and c is not view.base
    del a, c
    assert pool.take() is pool.arrays[0] and len(pool.arrays) == 3
    del view
    assert len(pool.arrays) == 3
    # never more than MAX_ARRAYS kept: further arrays are handed out unpooled
    monkeypatch.setattr(estimation_module._Buffers, "MAX_ARRAYS", 3)
    held = [pool.take() for _ in range(5)]
    assert len(pool.arrays) == 3 and len({id(h) for h in held}) == 5


def test_belief_propagation_torch_exp_matches_numpy(monkeypatch):
    """Big tables are exponentiated by torch in place: same marginals as numpy's exp (to rounding)."""
    from privmarg.generate.pgm import belief as gm
    from privmarg.generate.pgm.junction_tree import JunctionTree

    rng = np.random.default_rng(5)
    dom = Domain(list("abcde"), [3, 4, 5, 2, 6])
    tree = JunctionTree.build(dom, [("a", "b", "c"), ("c", "d"), ("d", "e"), ("a", "e")])
    plan = gm._Plan(tree)
    theta = [rng.normal(scale=3.0, size=s) for s in plan.shapes]
    runs = []
    for cells in (1 << 62, 0):
        monkeypatch.setattr(gm, "EXP_TORCH_CELLS", cells)
        runs.append(gm.belief_propagation(plan, theta, 50.0))
    (mu_np, lz_np, _), (mu_t, lz_t, _) = runs
    assert lz_t == pytest.approx(lz_np, rel=1e-13)
    for a, b in zip(mu_np, mu_t):
        np.testing.assert_allclose(b, a, rtol=1e-12)


def test_queries_reuse_partial_contractions_with_the_same_answers():
    """Scoring asks one model hundreds of marginals that share partial contractions: a model that
    kept them answers bit for bit like fresh copies that did not, and setting new marginals drops
    them (they would be stale)."""
    import privmarg.generate.pgm.graphical_model as gm

    rng = np.random.default_rng(17)
    dom = Domain(list("abcdefgh"), rng.integers(2, 5, size=8))
    cliques = [("a", "b", "c"), ("b", "c", "d"), ("c", "d", "e"), ("d", "e", "f"), ("e", "g"), ("f", "h")]
    ms = [Measurement(c, rng.uniform(0, 50, dom.size(c)), 3.0) for c in cliques]
    model = estimate(dom, ms, iters=5)
    queries = [q for q in itertools.combinations(dom.attrs, 3) if not any(set(q) <= set(c) for c in model.cliques)]
    got = [model.project(q, cache=False) for q in queries]
    assert model._pieces and model._piece_cells == sum(t.size for t in model._pieces.values())
    assert model._piece_cells <= gm.PIECE_CELLS_PER_CELL * sum(m.size for m in model.marginals)
    for q, g in zip(queries, got):
        fresh = gm.GraphicalModel(dom, model.tree, model.theta, model.total)
        assert np.array_equal(fresh.project(q, cache=False), g), q
    new = [m * rng.uniform(0.5, 1.5, m.shape) for m in model.marginals]  # not a calibrated tree: any change
    model.marginals = new
    assert not model._pieces
    fresh = gm.GraphicalModel(dom, model.tree, model.theta, model.total, marginals=new)
    assert np.array_equal(model.project(queries[0], cache=False), fresh.project(queries[0], cache=False))
    assert not np.allclose(fresh.project(queries[0], cache=False), got[0])


def test_einsum_contracts_two_tables_at_a_time_with_the_same_answers(monkeypatch):
    """Elimination steps over three or more big tables run pairwise, the smallest joint table
    first, each step a batched matrix product (numpy's einsum ran them in its slow plain loop);
    every marginal still matches the brute-force joint with the pairwise steps forced on for all
    sizes."""
    import privmarg.generate.pgm.graphical_model as gm

    dom = Domain(list("abcdef"), [2, 3, 4, 5, 6, 7])
    # abc·cde·abd: abc⋈abd is 2·3·4·5 = 120 cells, the smallest pair; its result (abcd, keeping
    # c and d for cde) goes to the end of the list
    path = gm._pairwise_path([("a", "b", "c"), ("c", "d", "e"), ("a", "b", "d")], ("a", "e"), dom)
    assert path == [(0, 2), (0, 1)]
    # four tables: ab·b (6 cells) leaves [ef, f, a]; then f·a (14 cells, less than ef·f's 42),
    # leaving [ef, af]; then those two
    path = gm._pairwise_path([("a", "b"), ("e", "f"), ("b",), ("f",)], ("a", "e"), dom)
    assert path == [(0, 2), (1, 2), (0, 1)]
    # a step's result past the cap (abcd, 120 cells): numpy's own search instead
    assert gm._pairwise_path([("a", "b"), ("c", "d"), ("e", "f")], ("a", "b", "c", "d", "e", "f"), dom,
                             cap=100) is None
    rng = np.random.default_rng(5)
    f = [(("a", "b", "c"), rng.random((2, 3, 4))), (("c", "d", "e"), rng.random((4, 5, 6))),
         (("a", "b", "d"), rng.random((2, 3, 5)))]
    monkeypatch.setattr(gm, "PLAIN_EINSUM_CELLS", 0)
    np.testing.assert_allclose(gm._einsum(f, ("a", "e"), dom),
                               np.einsum("abc,cde,abd->ae", *(t for _, t in f)), rtol=1e-12)
    assert_three_way_queries_exact(21)


@pytest.mark.parametrize("seed", range(4))
def test_einsum_in_pairs_matches_numpy_on_random_tables(monkeypatch, seed):
    """Three to five tables over random attribute sets (scalars, flat tables and non-contiguous
    views among them), contracted in pairs onto random outputs (the empty one too): numpy's
    einsum's shapes and values."""
    import privmarg.generate.pgm.graphical_model as gm

    monkeypatch.setattr(gm, "PLAIN_EINSUM_CELLS", 0)
    rnd, rng = random.Random(seed), np.random.default_rng(seed)
    for _ in range(150):
        names = list("abcdef"[:rnd.randint(2, 6)])
        dom = Domain(names, [rnd.randint(1, 4) for _ in names])
        factors = []
        for _ in range(rnd.randint(3, 5)):
            attrs = tuple(rnd.sample(names, rnd.randint(0, min(3, len(names)))))
            t = rng.random(dom.sizes(attrs))
            form = rnd.randint(0, 2)
            if form == 1:
                t = t.ravel()
            elif form == 2 and t.ndim >= 2:
                t = np.ascontiguousarray(t.T).T
            factors.append((attrs, t, None))
        present = sorted({a for f in factors for a in f[0]})
        out = tuple(rnd.sample(present, rnd.randint(0, len(present))))
        ops = [x for a, t, _ in factors for x in (t.reshape(dom.sizes(a)), [names.index(v) for v in a])]
        want = np.einsum(*ops, [names.index(v) for v in out])
        got = gm._einsum(factors, out, dom)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)


def _round_case(seed, new_sigma=2.0):
    """An AIM-like round on a tiny domain: a fit of two marginals, then a third, precise one."""
    rng, dom, P = random_case(seed, 4)
    N = 5000.0
    old = [Measurement(c, joint_marginal(P, dom, c) * N + rng.normal(0, 20, dom.size(c)), 20.0)
           for c in [("a", "b"), ("c", "d")]]
    new = Measurement(("b", "c"), joint_marginal(P, dom, ("b", "c")) * N + rng.normal(0, new_sigma, dom.size(("b", "c"))),
                      new_sigma)
    first = estimate(dom, old, total=N, iters=2000, tol=1e-12)
    return dom, old + [new], first, N


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_new_starts_where_the_new_clique_is_explained(seed):
    """A warm refit with ``fit_new`` starts (before any optimiser step) at a lower loss than the
    warm start as it is, with the new clique's model marginal moved to its measurement; with no
    new clique it changes nothing; and it reaches the same optimum."""
    dom, ms, first, N = _round_case(seed)
    plain = estimate(dom, ms, total=N, iters=0, warm=first.potentials)
    moved = estimate(dom, ms, total=N, iters=0, warm=first.potentials, fit_new=True)
    assert moved.info.loss < 0.5 * plain.info.loss
    y = ms[-1].y
    assert np.abs(moved.project(("b", "c")) - y).sum() < 0.5 * np.abs(plain.project(("b", "c")) - y).sum()
    # nothing new: the same fit bit for bit
    again = estimate(dom, ms[:2], total=N, iters=5, warm=first.potentials, fit_new=True)
    same = estimate(dom, ms[:2], total=N, iters=5, warm=first.potentials)
    assert again.info.history == same.info.history
    # a fit from either start reaches the same optimum
    full = [estimate(dom, ms, total=N, iters=3000, tol=1e-13, warm=first.potentials, fit_new=f) for f in (False, True)]
    assert full[1].info.loss == pytest.approx(full[0].info.loss, rel=1e-6)
    short = [estimate(dom, ms, total=N, iters=10, warm=first.potentials, fit_new=f) for f in (False, True)]
    assert short[1].info.loss < short[0].info.loss


def test_fit_new_step_is_floored_capped_and_only_kept_when_it_helps(monkeypatch):
    """The step is log(max(ȳ, 1) / max(x, 1)) capped at ±3 per cell, never up for a cell measured
    within its noise σ of zero (ȳ < max(σ, 1)); a step that would raise the
    loss is halved, and dropped after the last try (the fit then starts from the warm start)."""
    mod = estimation_module
    dom, ms, first, N = _round_case(3, new_sigma=1500.0)  # some of its 4 cells within the noise of zero
    seen = []
    real = mod._new_clique_step

    def spy(prob, new, phi, xs):
        step = real(prob, new, phi, xs)
        sl = prob.slices[new[0]]
        y, sigma = prob.ybar[sl], np.sqrt(0.5 / prob.W[sl])
        expect = np.clip(np.log(np.maximum(y, 1.0) / np.maximum(xs[sl], 1.0)), -3, 3)
        quiet = y < np.maximum(sigma, 1.0)  # within the noise of zero: lowered, never raised
        expect[quiet] = np.minimum(expect[quiet], 0.0)
        assert quiet.any() and (~quiet).any()
        np.testing.assert_allclose(step[sl], expect)
        assert not step[np.setdiff1d(np.arange(step.size), np.arange(step.size)[sl])].any()
        seen.append(new)
        return step

    monkeypatch.setattr(mod, "_new_clique_step", spy)
    estimate(dom, ms, total=N, iters=0, warm=first.potentials, fit_new=True)
    assert seen == [[("b", "c")]]

    # a step that only ever raises the loss is dropped: the fit starts from the warm start
    monkeypatch.setattr(mod, "_new_clique_step", lambda prob, new, phi, xs: np.full_like(phi, 50.0))
    bad = estimate(dom, ms, total=N, iters=0, warm=first.potentials, fit_new=True)
    plain = estimate(dom, ms, total=N, iters=0, warm=first.potentials)
    assert bad.info.loss == pytest.approx(plain.info.loss, rel=1e-12)  # summation order only


def test_pgm_generator_passes_fit_new_on_warm_starts_only():
    from privmarg import PGM

    dom, ms, first, N = _round_case(4)
    gen = PGM(iters=0, fit_new=True)
    assert gen.get_params()["fit_new"] is True and gen.clone().fit_new is True
    warm = gen.generate(ms, dom, total=N, warm=first)
    direct = estimate(dom, ms, total=N, iters=0, warm=first.potentials, step=first.step_size, fit_new=True)
    assert warm.info.loss == pytest.approx(direct.info.loss, rel=1e-12)
    assert gen.generate(ms, dom, total=N).info.loss == pytest.approx(estimate(dom, ms, total=N, iters=0).info.loss, rel=1e-12)
