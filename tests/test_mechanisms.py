"""Mechanisms end to end on small tables: budget arithmetic, reproducibility, basic utility."""

import math

import numpy as np
import pandas as pd
import pytest

from privmarg import Dataset, Domain
from privmarg.evaluation import workload_error
from privmarg import AIM, MST, MWEM, Independent
from privmarg.privacy import cdp_rho
from privmarg.core import all_kway, downward_closure, parse_workload


def correlated_table(n=3000, seed=0):
    """Five attributes with strong pairwise structure (a chain) and one rare-valued column."""
    rng = np.random.default_rng(seed)
    dom = Domain(["a", "b", "c", "d", "e"], [4, 3, 5, 2, 6])
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(0, 2, n)) % 3
    c = (2 * b + rng.integers(0, 2, n)) % 5
    d = (c > 2).astype(int) ^ (rng.random(n) < 0.1)
    e = np.where(rng.random(n) < 0.9, a, 5)  # value 4 never occurs
    return Dataset(np.column_stack([a, b, c, d, e]), dom)


def recompute(charge: dict) -> float:
    if charge["mechanism"] == "gaussian":
        return charge["l2_sensitivity"] ** 2 / (2 * charge["sigma"] ** 2)
    if charge["mechanism"] == "exponential":
        return charge["epsilon"] ** 2 / 8
    raise AssertionError(charge["mechanism"])


FAST = dict(iters=100)


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
def test_aim_spends_exactly_its_budget(epsilon, seed, neighbour):
    data = correlated_table(seed=seed)
    mech = AIM(epsilon, 1e-6, workload="all-2way", seed=seed, neighbour=neighbour, final_iters=100, **FAST)
    mech.fit(data)
    rep = mech.privacy_report()
    rho = cdp_rho(epsilon, 1e-6)
    assert rep["rho_total"] == pytest.approx(rho, rel=1e-12)
    spent = sum(c["rho"] for c in rep["ledger"])
    assert spent <= rho * (1 + 1e-9)
    assert abs(spent - rho) <= 1e-9 * rho
    for c in rep["ledger"]:
        assert c["rho"] == pytest.approx(recompute(c), rel=1e-12)
        if c["mechanism"] == "gaussian":
            assert c["l2_sensitivity"] == pytest.approx(1.0 if neighbour == "add_remove" else math.sqrt(2))
    assert mech.rounds_ >= 1
    assert rep["neighbour"] == neighbour


@pytest.mark.parametrize("cls", [MST, MWEM, Independent])
@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
def test_other_mechanisms_spend_exactly_their_budget(cls, neighbour):
    data = correlated_table()
    kw = {"workload": "all-2way"} if cls is MWEM else {}
    mech = cls(1.0, 1e-6, seed=3, neighbour=neighbour, **kw).fit(data)
    rep = mech.privacy_report()
    spent = sum(recompute(c) for c in rep["ledger"])
    assert spent == pytest.approx(rep["rho_total"], rel=1e-9)
    assert mech.accountant_.rho_spent <= rep["rho_total"] * (1 + 1e-9)
    syn = mech.sample()
    assert list(syn.columns) == list(data.domain.attrs)
    if neighbour == "replace_one":
        assert len(syn) == len(data)  # N is public
    else:
        assert abs(len(syn) - len(data)) < 0.2 * len(data)  # a noisy N


@pytest.mark.parametrize("cls", [AIM, MST, MWEM, Independent])
def test_seeded_runs_are_identical_and_seeds_differ(cls):
    data = correlated_table()
    kw = {"workload": "all-2way", "iters": 50} if cls in (AIM, MWEM) else {}
    if cls is AIM:
        kw["final_iters"] = 50
    a = cls(1.0, 1e-6, seed=11, **kw).fit(data).sample()
    b = cls(1.0, 1e-6, seed=11, **kw).fit(data).sample()
    c = cls(1.0, 1e-6, seed=12, **kw).fit(data).sample()
    pd.testing.assert_frame_equal(a, b)
    assert not (len(a) == len(c) and (a.values == c.values).all())


@pytest.mark.parametrize("refit_method", ["precond", "md"])
def test_aim_beats_independent_on_correlated_data(refit_method):
    data = correlated_table(n=5000)
    wl = all_kway(data.domain, 2)
    aim = AIM(2.0, 1e-6, workload="all-2way", seed=0, refit_method=refit_method).fit(data)
    ind = Independent(2.0, 1e-6, seed=0).fit(data)
    e_aim = workload_error(data, Dataset(aim.sample_codes(), data.domain), wl)
    e_ind = workload_error(data, Dataset(ind.sample_codes(), data.domain), wl)
    assert e_aim < 0.1 < e_ind


def test_mst_compresses_values_never_seen():
    data = correlated_table(n=5000)
    mech = MST(1.0, 1e-6, seed=0).fit(data)
    assert 4 not in set(mech.supports_.get("e", [0, 1, 2, 3, 5]))
    syn = mech.sample()
    assert syn["e"].max() <= 5 and syn["e"].min() >= 0


def test_workload_parsing_and_closure():
    dom = Domain(["a", "b", "c"], [2, 2, 2])
    assert parse_workload("all-2way", dom) == [(("a", "b"), 1.0), (("a", "c"), 1.0), (("b", "c"), 1.0)]
    assert parse_workload("all-2way:target=c", dom) == [(("a", "c"), 1.0), (("b", "c"), 1.0)]
    assert parse_workload([["b", "a"], [["c"], 2.0]], dom) == [(("a", "b"), 1.0), (("c",), 2.0)]
    closure = downward_closure([(("a", "b"), 1.0), (("b", "c"), 2.0)], dom)
    assert list(closure) == [("a",), ("b",), ("c",), ("a", "b"), ("b", "c")]
    assert closure[("b",)] == 3.0 and closure[("a",)] == 1.0 and closure[("b", "c")] == 5.0
    with pytest.raises(KeyError):
        parse_workload([["a", "zzz"]], dom)
    with pytest.raises(ValueError):
        parse_workload("all-9", dom)


def test_invalid_parameters_rejected():
    with pytest.raises(ValueError):
        AIM(0.0, 1e-9)
    with pytest.raises(ValueError):
        AIM(1.0, 0.0)
    with pytest.raises(ValueError):
        AIM(1.0, 1.0)
    with pytest.raises(ValueError, match="refit_method"):
        AIM(1.0, 1e-9, refit_method="adam")
    with pytest.raises(ValueError):
        MST(1.0, 1e-9, neighbour="swap")
    with pytest.raises(RuntimeError):
        MST(1.0, 1e-9).sample()


@pytest.mark.parametrize("cls", [AIM, MST, MWEM, Independent])
def test_structural_zeros_are_honoured(cls):
    from privmarg.core import StructuralZero

    data = correlated_table(n=3000)
    dom = data.domain
    # b and a: (a + {0,1}) % 3 never gives b == (a + 2) % 3; declare those cells impossible
    zero = StructuralZero.from_predicate(dom, ("a", "b"), lambda a, b: b == (a + 2) % 3)
    zero_e = StructuralZero.from_cells(dom, ("e",), [[4]])
    assert zero.violations(data.codes, dom) == 0 and zero_e.violations(data.codes, dom) == 0
    kw = {"workload": "all-2way", "iters": 60} if cls in (AIM, MWEM) else {}
    mech = cls(0.3, 1e-6, seed=0, **kw).fit(data, zeros=[zero, zero_e])
    codes = mech.sample_codes()
    assert zero.violations(codes, dom) == 0
    assert zero_e.violations(codes, dom) == 0
    if hasattr(mech, "model_"):
        ab = mech.model_.project(("a", "b")).reshape(zero.mask.shape)
        assert np.all(ab[zero.mask] == 0)
