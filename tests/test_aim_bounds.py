"""AIM's error bounds: coverage, no privacy cost, and the supported-case formula."""

import math

import numpy as np
import pytest

from privmarg import AIM, Dataset
from test_mechanisms import correlated_table


def true_error(data, syn, r):
    return np.abs(data.project(r) / len(data) - syn.project(r) / len(syn)).sum()


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
def test_bounds_cover_true_error(neighbour):
    data = correlated_table(n=4000)
    viol = total = 0
    kinds = set()
    for seed in range(6):
        mech = AIM(1.0, 1e-6, workload="all-2way", seed=seed, neighbour=neighbour, iters=60, final_iters=200)
        mech.fit(data)
        syn = Dataset(mech.sample_codes(), data.domain)
        spent = mech.accountant_.rho_spent
        for r in mech.weights_:
            b = mech.error_bound(r, confidence=0.95)
            kinds.add(b.supported)
            assert 0 < b.l1_bound <= 2
            total += 1
            viol += true_error(data, syn, r) > b.l1_bound
        assert mech.accountant_.rho_spent == spent  # bounds are free
        assert len(mech.error_bounds()) == len(mech.workload_)
    assert kinds == {True, False}
    assert viol <= 0.05 * total, (viol, total)


def test_supported_bound_matches_formula_for_one_way():
    data = correlated_table(n=4000)
    mech = AIM(0.5, 1e-6, workload="all-2way", seed=0, neighbour="replace_one", iters=60, final_iters=200).fit(data)
    codes = mech.sample_codes()
    syn = Dataset(codes, data.domain)
    b = mech.error_bound(("a",), confidence=0.9)
    assert b.supported
    covering = [m for m in mech.measurements_ if "a" in m.attrs]
    n_r = data.domain["a"]
    num, den = np.zeros(n_r), 0.0
    for m in covering:
        arr = m.y.reshape(data.domain.sizes(m.attrs))
        ax = tuple(i for i, x in enumerate(m.attrs) if x != "a")
        y = arr.sum(axis=ax) if ax else arr
        w = n_r / (data.domain.size(m.attrs) * m.sigma**2)
        num, den = num + w * y.ravel(), den + w
    lam = math.sqrt(2 * math.log(10))
    s = syn.project(["a"]) / len(syn)
    N = len(data)
    ybar = num / den
    from privmarg.select.aim_bounds import l1_noise_quantile

    budget = math.sqrt(den**-1) * l1_noise_quantile(n_r, 0.1)
    assert budget <= math.sqrt(den**-1) * (math.sqrt(2 / math.pi) * n_r + lam * math.sqrt(n_r))
    # true counts are not negative: a cell measured below zero uses its distance to zero of the budget
    forced = -ybar[ybar < 0].sum()
    closed = (np.abs(np.maximum(ybar, 0) - N * s).sum() + budget - forced) / N
    triangle = (budget + np.abs(ybar - N * s).sum()) / N
    assert closed == pytest.approx(triangle - 2 * forced / N, rel=1e-9)
    # a 1-way marginal has no smaller released marginal; under replace-one its total is N exactly
    from privmarg.select.l1_bounds import ProjectionBall, consistent_l1_max

    total = ProjectionBall(np.zeros(n_r, dtype=np.int64), np.array([float(N)]), 0.0)
    assert b.l1_bound == pytest.approx(consistent_l1_max(ybar, N * s, budget, [total]) / N, rel=1e-9)
    assert b.l1_bound <= closed * (1 + 1e-9)


def test_bound_rejects_marginals_outside_the_workload():
    data = correlated_table(n=2000)
    mech = AIM(1.0, 1e-6, workload=[("a", "b")], seed=0, iters=30, final_iters=50).fit(data)
    with pytest.raises(ValueError):
        mech.error_bound(("c", "d"))


@pytest.mark.parametrize("n", [1, 4, 30, 300])
def test_l1_noise_quantile_holds_and_is_never_looser_than_concentration(n):
    from privmarg.select.aim_bounds import l1_noise_quantile

    fail = 0.05
    a = l1_noise_quantile(n, fail)
    assert a <= math.sqrt(2 / math.pi) * n + math.sqrt(2 * math.log(1 / fail)) * math.sqrt(n)
    assert a > math.sqrt(2 / math.pi) * n  # above the mean
    z = np.abs(np.random.default_rng(n).standard_normal((40000, n))).sum(axis=1)
    assert (z >= a).mean() <= fail


def test_the_empty_marginal_and_the_programme_budget_are_handled(monkeypatch):
    """The empty marginal (the total) gets a bound, not an error; with the consistency programme's
    cell budget spent, a bound is the closed form (as with the programme switched off)."""
    import privmarg.select.aim_bounds as ab
    from privmarg.select.aim_bounds import BoundWork, measured_error_bound

    data = correlated_table(n=3000)
    mech = AIM(1.0, 1e-6, workload="all-2way", seed=0, iters=60, final_iters=200).fit(data)
    total = measured_error_bound(mech, ())
    assert total.supported and 0 <= total.l1_bound <= 2
    covered = [b.attrs for b in mech.error_bounds() if b.supported]
    free = [measured_error_bound(mech, r) for r in covered]
    work = BoundWork(lp_cells=0)  # nothing left for the programme: every bound is the closed form
    spent = [measured_error_bound(mech, r, work=work).l1_bound for r in covered]
    monkeypatch.setattr(ab, "CONSISTENT_MAX_CELLS", 0)
    closed = [measured_error_bound(mech, r).l1_bound for r in covered]
    assert spent == closed
    assert any(f.l1_bound != c for f, c in zip(free, closed))  # the programme changed some bounds
