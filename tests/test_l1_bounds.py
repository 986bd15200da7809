"""The L1 confidence bounds under every supported error bound: a provable quantile of the L1 norm
of Gaussian noise, and the largest distance to tables consistent with what was released."""

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.stats import norm

from privmarg.select.l1_bounds import ProjectionBall, consistent_l1_max, l1_noise_quantile, nonnegative_l1_max


@pytest.mark.parametrize("fail", [0.045, 0.005])
def test_quantile_of_one_cell_is_the_half_normal_quantile_rounded_up(fail):
    exact = norm.ppf(1 - fail / 2)  # P(|Z| ≥ a) = 2Φ(−a)
    a = l1_noise_quantile(1, fail)
    assert exact <= a <= exact + 0.021  # the grid (0.01) rounds up, never down


@pytest.mark.parametrize("n", [2, 8, 40, 300])
def test_quantile_holds_and_is_tighter_than_chernoff_for_small_marginals(n):
    fail = 0.05
    a = l1_noise_quantile(n, fail)
    z = np.abs(np.random.default_rng(n).standard_normal((200_000, n))).sum(axis=1)
    assert (z >= a).mean() <= fail  # holds
    assert a <= np.quantile(z, 1 - fail) * 1.02  # and is close to the true quantile
    chernoff = min((n * (math.log(2) + lam * lam / 2 + norm.logcdf(lam)) + math.log(1 / fail)) / lam
                   for lam in np.linspace(0.01, 5, 2000))
    assert a < chernoff


def _exact_max(y, t, budget, balls):
    """max ‖M − t‖₁ over M ≥ 0, ‖M − y‖₁ ≤ budget and every projection ball: one linear programme
    per sign pattern of M − t (variables M, u ≥ |M − y|, w_k ≥ |P_k M − c_k|)."""
    n = len(y)
    projections = [np.eye(b.centre.size)[b.cell_to_entry].T for b in balls]  # P_k, entries × cells
    sizes = [p.shape[0] for p in projections]
    nv = 2 * n + sum(sizes)
    best = -np.inf
    for signs in itertools.product([-1.0, 1.0], repeat=n):
        sg = np.array(signs)
        c = np.zeros(nv)
        c[:n] = -sg
        a, b = [], []

        def row(coef, rhs):
            a.append(coef)
            b.append(rhs)

        for i in range(n):
            e = np.zeros(nv); e[i], e[n + i] = 1, -1; row(e, y[i])  # M − y ≤ u
            e = np.zeros(nv); e[i], e[n + i] = -1, -1; row(e, -y[i])  # y − M ≤ u
            e = np.zeros(nv); e[i] = -sg[i]; row(e, -sg[i] * t[i])  # sg (M − t) ≥ 0
        e = np.zeros(nv); e[n:2 * n] = 1; row(e, budget)
        at = 2 * n
        for p, ball in zip(projections, balls):
            for j in range(p.shape[0]):
                e = np.zeros(nv); e[:n], e[at + j] = p[j], -1; row(e, ball.centre[j])
                e = np.zeros(nv); e[:n], e[at + j] = -p[j], -1; row(e, -ball.centre[j])
            e = np.zeros(nv); e[at:at + p.shape[0]] = 1; row(e, ball.radius)
            at += p.shape[0]
        res = linprog(c, A_ub=np.array(a), b_ub=np.array(b), bounds=[(0, None)] * nv, method="highs")
        if res.status == 0:
            best = max(best, -res.fun - float(sg @ t))
    return best


def test_nonnegative_l1_max_is_the_exact_maximum():
    rng = np.random.default_rng(0)
    attained = 0
    for _ in range(60):
        n = int(rng.integers(2, 5))
        y = rng.normal(3, 4, size=n)
        t = rng.uniform(0, 8, size=n)
        budget = -y[y < 0].sum() + rng.uniform(0, 10)  # at least the forced moves: some M exists
        bound = nonnegative_l1_max(y, t, budget)
        lp = _exact_max(y, t, budget, [])
        assert lp <= bound + 1e-7
        assert bound <= np.abs(y - t).sum() + budget + 1e-12  # never looser than the triangle bound
        if (np.maximum(y, 0) >= t).any():
            assert lp == pytest.approx(bound, abs=1e-7)
            attained += 1
    assert attained > 10


def test_consistent_l1_max_bounds_every_consistent_table_and_is_never_looser():
    rng = np.random.default_rng(1)
    tighter = 0
    for _ in range(40):
        rows, cols = 2, int(rng.integers(2, 4))  # a 2 × cols marginal with its row sums and total released
        x = rng.poisson(2.0, rows * cols).astype(float)  # true counts, sparse-ish
        y = x + rng.normal(0, 1.5, x.size)
        t = np.maximum(x + rng.normal(0, 1.0, x.size), 0)  # a synthetic marginal near the truth
        row_of = np.repeat(np.arange(rows), cols)
        yr = np.bincount(row_of, x) + rng.normal(0, 1.0, rows)
        balls = [ProjectionBall(row_of, yr, np.abs(yr - np.bincount(row_of, x)).sum() * 1.3 + 0.2),
                 ProjectionBall(np.zeros(x.size, dtype=np.int64), np.array([x.sum() + 0.5]), 1.0)]
        budget = np.abs(x - y).sum() * 1.3 + 0.2
        bound = consistent_l1_max(y, t, budget, balls)
        exact = _exact_max(y, t, budget, balls)
        assert np.abs(x - t).sum() <= exact + 1e-7  # the truth is one of the tables
        assert exact <= bound + 1e-6  # a valid bound
        closed = nonnegative_l1_max(y, t, budget)
        assert bound <= closed + 1e-12
        tighter += bound < closed - 1e-6
    assert tighter >= 10  # the released subsets and total do constrain the tables


def test_consistent_l1_max_without_balls_is_the_closed_form():
    y, t = np.array([3.0, -1.0, 5.0]), np.array([2.0, 0.5, 4.0])
    assert consistent_l1_max(y, t, 6.0, []) == nonnegative_l1_max(y, t, 6.0)


def test_an_exact_total_moves_mass_only_between_cells():
    # two cells, truth (5, 5) with N public: the worst table keeps the total at 10
    y, t = np.array([5.0, 5.0]), np.array([5.0, 5.0])
    free = consistent_l1_max(y, t, 4.0, [])
    fixed = consistent_l1_max(y, t, 4.0, [ProjectionBall(np.zeros(2, dtype=np.int64), np.array([10.0]), 0.0)])
    assert free == pytest.approx(4.0)
    assert fixed == pytest.approx(4.0)  # (7, 3): still 4, moving 2 units costs 4 of the budget
    tight = consistent_l1_max(y, np.array([6.0, 4.0]), 2.0,
                              [ProjectionBall(np.zeros(2, dtype=np.int64), np.array([10.0]), 0.0)])
    assert tight == pytest.approx(_exact_max(y, np.array([6.0, 4.0]), 2.0,
                                             [ProjectionBall(np.zeros(2, dtype=np.int64), np.array([10.0]), 0.0)]),
                                  abs=1e-6)
