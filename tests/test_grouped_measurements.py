"""Marginals measured over grouped values: the grouping query, its privacy charge, and every reader
of a measurement (N's estimate, targets, Private-PGM's loss, saved models)."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from privmarg import Dataset, Domain, Measurement
from privmarg.core import grouping_query, is_grouping, query_groups
from privmarg.core.measurement import estimate_total
from privmarg.data.source import MemorySource
from privmarg.generate.pgm import estimate
from privmarg.generate.targets import cell_values
from privmarg.measure import MeasurementSession
from privmarg.privacy import Accountant
from privmarg.select.kway import contiguous_groups, group_count


def test_grouping_query_sums_cells_into_their_groups_and_is_read_back():
    rng = np.random.default_rng(0)
    for _ in range(30):
        sizes = [int(k) for k in rng.integers(1, 7, rng.integers(1, 4))]
        groups = []
        for k in sizes:
            g = rng.integers(0, k, k) if rng.random() < 0.7 else None
            groups.append(None if g is None else np.unique(g, return_inverse=True)[1])
        q = grouping_query(sizes, groups)
        x = rng.random(int(np.prod(sizes)))
        # brute force: each cell's count added to the cell of its groups, row-major over the groups
        maps = [np.arange(k) if g is None else g for k, g in zip(sizes, groups)]
        gs = [int(m.max()) + 1 for m in maps]
        want = np.zeros(gs)
        for idx in np.ndindex(*sizes):
            want[tuple(m[i] for m, i in zip(maps, idx))] += x[np.ravel_multi_index(idx, sizes)]
        assert np.allclose(q @ x, want.ravel())
        assert is_grouping(q)
        back = query_groups(q, sizes)
        assert back is not None and all(np.array_equal(b, m) for b, m in zip(back, maps))


def test_queries_that_are_not_groupings_are_told_apart():
    q = grouping_query([3, 2], [np.array([0, 0, 1]), None]).toarray()
    assert is_grouping(q) and query_groups(q, [3, 2]) is not None
    assert not is_grouping(2 * q)  # not 0/1
    two = q.copy()
    two[0, 5] = 1.0  # a cell in two groups
    assert not is_grouping(two)
    # a grouping of cells that is no product of per-column groups
    diag = np.zeros((2, 4))
    diag[0, [0, 3]] = diag[1, [1, 2]] = 1.0
    assert is_grouping(diag) and query_groups(diag, [2, 2]) is None


def session(data, neighbour="replace_one", rho=1.0, seed=0):
    return MeasurementSession(MemorySource(data), Accountant(rho, neighbour), np.random.default_rng(seed))


def table(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 12, n)
    b = np.clip(a + rng.integers(-2, 3, n), 0, 11)
    c = rng.integers(0, 3, n)
    return Dataset(np.column_stack([a, b, c]), Domain(["a", "b", "c"], [12, 12, 3]))


@pytest.mark.parametrize("neighbour", ["replace_one", "add_remove"])
def test_a_grouped_marginal_costs_what_the_marginal_costs(neighbour):
    data = table()
    q = grouping_query([12, 12], [contiguous_groups(12, 4), contiguous_groups(12, 4)])
    s = session(data, neighbour)
    m = s.measure(("a", "b"), 3.0, query=q)
    fine_session = session(data, neighbour)
    fine_session.measure(("a", "b"), 3.0)
    l2 = math.sqrt(2) if neighbour == "replace_one" else 1.0
    assert s.accountant.ledger[-1].rho == pytest.approx(l2**2 / (2 * 3.0**2))
    assert s.accountant.rho_spent == pytest.approx(fine_session.accountant.rho_spent)
    assert m.query is not None and m.y.size == 16
    exact = q @ data.project(("a", "b"))
    # the noise, standardised, over 40 sessions' releases (640 draws): N(0, σ²) on the grouped counts
    z = np.concatenate([(session(data, neighbour, seed=s).measure(("a", "b"), 3.0, query=q).y - exact) / 3.0
                        for s in range(40)])
    assert abs(z.mean()) < 0.15 and 0.88 < z.std() < 1.12
    with pytest.raises(ValueError, match="groups"):
        s.measure(("a", "b"), 3.0, query=2 * q)  # a sum with weights would change the sensitivity


def test_readers_of_a_grouped_measurement():
    data = table()
    q = grouping_query([12, 3], [contiguous_groups(12, 5), None])
    y = q @ data.project(("a", "c")) + np.random.default_rng(1).normal(0, 2.0, q.shape[0])
    m = Measurement(("a", "c"), y, 2.0, query=q)
    assert sp.issparse(m.query)
    # N: every record counted once, the total's variance σ² per answer
    fine = Measurement(("b",), data.project(("b",)) + 3.0, 1.0)
    w1, w2 = 1 / (2.0**2 * y.size), 1 / (1.0**2 * 12)
    assert estimate_total([m, fine]) == pytest.approx((w1 * y.sum() + w2 * fine.y.sum()) / (w1 + w2))
    # targets: each group's count spread evenly over its cells
    x = cell_values(m).reshape(12, 3)
    g = contiguous_groups(12, 5)
    for grp in range(5):
        block = x[g == grp]
        assert np.allclose(block, block[0]) and block.sum(0) == pytest.approx(y.reshape(5, 3)[grp])


def test_private_pgm_fits_a_sparse_grouping_as_its_dense_form():
    data = table(800)
    dom = data.domain
    rng = np.random.default_rng(2)
    q = grouping_query([12, 12], [contiguous_groups(12, 3), contiguous_groups(12, 4)])
    ms = [Measurement(("a",), data.project(("a",)) + rng.normal(0, 2, 12), 2.0),
          Measurement(("c",), data.project(("c",)) + rng.normal(0, 2, 3), 2.0)]
    y = q @ data.project(("a", "b")) + rng.normal(0, 2, q.shape[0])
    sparse = estimate(dom, ms + [Measurement(("a", "b"), y, 2.0, query=q)], iters=200, total=800.0)
    dense = estimate(dom, ms + [Measurement(("a", "b"), y, 2.0, query=q.toarray())], iters=200, total=800.0)
    for attrs in [("a", "b"), ("c",)]:
        assert np.allclose(sparse.project(attrs), dense.project(attrs), rtol=1e-9, atol=1e-6)
    # the fit matches the grouped answers better than a start that ignores them
    assert np.abs(q @ sparse.project(("a", "b")) - y).sum() < np.abs(q @ np.full(144, 800 / 144) - y).sum() / 3


def test_group_count_closed_form():
    # adult at PrivPGD's setting: σ = 25.47 a cell, N = 48,842: √(2/π)·σ·G² ≤ N/4 gives G = 24
    assert group_count(25.47, 48842, 2) == 24 and group_count(25.47, 48842, 2, share=0.1) == 15
    sigma, rows = 3.0, 10_000
    for arity in (1, 2, 3):
        g = group_count(sigma, rows, arity)
        noise = lambda k: math.sqrt(2 / math.pi) * sigma * k**arity  # noqa: E731
        assert noise(g) <= 0.25 * rows < noise(g + 1)
    assert group_count(1e6, 10, 2) == 4  # never fewer than four groups (MIN_GROUPS)
    assert contiguous_groups(5, 8) is None
    g = contiguous_groups(100, 16)
    assert g.min() == 0 and g.max() == 15 and np.all(np.diff(g) >= 0)
    assert np.bincount(g).max() - np.bincount(g).min() <= 1
