"""Empirical privacy audit (privmarg.audit, privmarg.evaluation.audit): the statistics against
closed forms, and fast audits at fixed seeds: correct mechanisms stay below their claimed ε, a
deliberately under-noised variant is flagged. The bigger runs are in benchmarks/audit.py."""

import math

import numpy as np
import pytest
from scipy import stats

from privmarg.audit import (audit_discovery, audit_exponential, audit_gaussian, audit_selector, likelihood_ratio_score,
                            neighbouring_tables, tiny_table)
from privmarg.evaluation.audit import clopper_pearson_upper, epsilon_from_rates, epsilon_lower_bound
from privmarg.generate import PGM
from privmarg.privacy import cdp_rho
from privmarg.select import AIMSelector
from privmarg.select.mst import MSTSelector


def test_clopper_pearson_closed_forms():
    # k = 0: the upper bound solves (1 − p)^n = α
    assert clopper_pearson_upper(0, 50, 0.025)[()] == pytest.approx(1 - 0.025 ** (1 / 50), rel=1e-10)
    assert clopper_pearson_upper(50, 50, 0.025)[()] == 1.0
    # k > 0: P[Bin(n, p_upper) ≤ k] = α
    p = clopper_pearson_upper(7, 100, 0.05)[()]
    assert stats.binom.cdf(7, 100, p) == pytest.approx(0.05, rel=1e-8)


def test_epsilon_from_rates():
    assert epsilon_from_rates(0.1, 0.2)[()] == pytest.approx(math.log(8))
    assert epsilon_from_rates(0.2, 0.1, 0.05)[()] == pytest.approx(math.log(0.75 / 0.1))
    assert epsilon_from_rates(0.5, 0.5)[()] == 0.0  # a coin flip proves nothing
    assert epsilon_from_rates(0.0, 0.3)[()] == math.inf


def test_lower_bound_is_sound_and_tight_for_a_known_pair():
    # randomized response with ε = 1: the best test has FPR = FNR = 1/(1+e); the bound must be below
    # 1 and, with many runs, close to it
    rng = np.random.default_rng(0)
    p = 1 / (1 + math.e)
    n = 400_000
    s0 = (rng.random(n) < p).astype(float)
    s1 = (rng.random(n) >= p).astype(float)
    b = epsilon_lower_bound(s0, s1, confidence=0.95)
    assert 0.97 < b.epsilon_lb < 1.0 and b.epsilon_point == pytest.approx(1.0, abs=0.02)
    assert b.runs0 == n // 2


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
@pytest.mark.parametrize("noise", ["continuous", "discrete"])
def test_gaussian_audit_flags_half_noise_only(neighbour, noise):
    rho = cdp_rho(1.0, 1e-5)
    ok = audit_gaussian(rho, 400_000, neighbour=neighbour, noise=noise, seed=1)
    bad = audit_gaussian(rho, 400_000, neighbour=neighbour, noise=noise, sigma_factor=0.5, seed=2)
    assert ok.epsilon_claimed == pytest.approx(1.0, rel=1e-6)
    assert not ok.violated and 0.2 < ok.bound.epsilon_lb < 1.0
    assert bad.violated, bad.to_dict()


def test_neighbouring_tables_and_score():
    d = tiny_table(rows=20)
    d0, d1 = neighbouring_tables(d, [1, 0, 1], "add_remove")
    assert len(d1) == 21 and np.array_equal(d1.codes[-1], [1, 0, 1])
    r0, r1 = neighbouring_tables(d, [1, 0, 1], "replace_one")
    assert len(r1) == 20 and np.array_equal(r1.codes[0], [1, 0, 1]) and np.array_equal(r1.codes[1:], d.codes[1:])
    from privmarg.core import Measurement

    # an exact answer of D' scores Σ ‖diff‖²/σ²; of D scores 0
    m1 = [Measurement(("a0", "a1"), d1.project(("a0", "a1")), 2.0)]
    m0 = [Measurement(("a0", "a1"), d0.project(("a0", "a1")), 2.0)]
    assert likelihood_ratio_score(m1, d0, d1) == pytest.approx(1 / 4)
    assert likelihood_ratio_score(m0, d0, d1) == 0.0


SELECTORS = {
    "MST": lambda: MSTSelector(loop=PGM(iters=20)),
    "AIM": lambda: AIMSelector("all-2way", rounds=12, loop=PGM(iters=20)),
}


@pytest.mark.parametrize("name", list(SELECTORS))
def test_selector_audit(name):
    # 24 runs per table: the largest provable bound is about 1, so the claim is ε = 0.5
    rho = cdp_rho(0.5, 1e-5)
    d = tiny_table(rows=40)
    ok = audit_selector(SELECTORS[name], d, [1, 0, 1], rho, 24, seed=3, name=name)
    assert not ok.violated and ok.bound.epsilon_lb < 0.5
    bad = audit_selector(SELECTORS[name], d, [1, 0, 1], rho, 24, seed=4, name=name, broken=0.01)
    assert bad.violated and bad.bound.epsilon_lb > 0.8, bad.to_dict()


@pytest.mark.parametrize("fitting,bounded", [(False, False), (True, False), (True, True)],
                         ids=["gumbel-max", "lazy-walk", "bounded-scores"])
def test_exponential_mechanism_audit_flags_twice_the_epsilon_only(fitting, bounded):
    """The library's own exponential mechanism (its lazy Gumbel walk over a fitting set, and that
    walk asking for scores only where their bounds leave them a chance) on two candidates whose
    scores swap between the tables: within its claim at ρ = 1/8 (ε = 0.737 at δ = 0.05), flagged
    when it draws with twice its ε."""
    ok = audit_exponential(0.125, 20_000, fitting=fitting, bounded=bounded, seed=1)
    bad = audit_exponential(0.125, 20_000, fitting=fitting, bounded=bounded, epsilon_factor=2.0, seed=2)
    assert ok.epsilon_claimed == pytest.approx(0.737, abs=1e-3)
    assert not ok.violated and ok.bound.epsilon_lb < 0.5  # exact: ε = 0.414 at this δ
    assert bad.violated and bad.bound.epsilon_lb > 0.8, bad.to_dict()  # exact: 0.93


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
def test_gaussian_audit_at_a_large_delta_flags_half_noise_with_few_runs(neighbour):
    """At δ = 0.05 a Gaussian with half its noise is flagged from 20,000 runs a table (at δ = 1e-5
    it takes about 10^5–10^6: the test must resolve events of probability δ)."""
    ok = audit_gaussian(0.125, 20_000, neighbour=neighbour, delta=0.05, seed=1)
    bad = audit_gaussian(0.125, 20_000, neighbour=neighbour, delta=0.05, sigma_factor=0.5, seed=2)
    assert not ok.violated and bad.violated and bad.bound.epsilon_lb > 1.0


@pytest.mark.parametrize("new_key,broken", [(True, 2.0), (False, 0.5)], ids=["new-key", "count"])
def test_value_discovery_audit_flags_a_broken_variant_only(new_key, broken):
    """DP value discovery: a new key must come out at most at its δ's rate (twice the noise with
    the same threshold breaks that), a shared key's count must carry its noise (half breaks it)."""
    ok = audit_discovery(0.125, 20_000, new_key=new_key, seed=1)
    bad = audit_discovery(0.125, 20_000, new_key=new_key, noise_factor=broken, seed=2)
    assert not ok.violated and bad.violated, (ok.to_dict(), bad.to_dict())


def test_privtree_audit_flags_twice_the_epsilon_only():
    """PrivTree against its pure claim ε = √(2ρ) = 3: the path of one record on an empty lattice
    has likelihood ratio e^1.72 at most (a correct tree stays below 3); a tree built at 2ε reaches
    e^3.55 and must be flagged."""
    from privmarg.audit import audit_privtree

    ok = audit_privtree(4.5, 20_000, seed=1)
    bad = audit_privtree(4.5, 20_000, epsilon_factor=2.0, seed=1)
    assert ok.epsilon_claimed == pytest.approx(3.0) and ok.delta == 0.0
    assert not ok.violated and 1.0 < ok.bound.epsilon_lb < 1.8, ok.to_dict()  # exact: 1.72
    assert bad.violated, bad.to_dict()


@pytest.mark.parametrize("neighbour", ["add_remove", "replace_one"])
def test_dpsgd_audit_flags_half_noise_only(neighbour):
    """A DP-SGD phase through privmarg's own charge and steps (a one-parameter model, a canary
    gradient of the clip's norm): below its claim at δ = 0.05, and flagged with half its noise."""
    from privmarg.audit import audit_dpsgd

    pytest.importorskip("dp_accounting")
    ok = audit_dpsgd(0.125, 2_500, neighbour=neighbour, seed=0)
    bad = audit_dpsgd(0.125, 2_500, neighbour=neighbour, noise_factor=0.5, seed=0)
    assert not ok.violated and bad.violated, (ok.to_dict(), bad.to_dict())
