"""Tests for privmarg.privacy: conversions (SPEC §1.5), sensitivities (§1.1), accountant (§1.7), primitives."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from scipy import stats

from privmarg.privacy import (
    NEIGHBOURS,
    Accountant,
    BudgetExceededError,
    Charge,
    cdp_delta,
    cdp_eps,
    cdp_rho,
    check_neighbour,
    count_l2,
    exponential_epsilon,
    exponential_mechanism,
    exponential_probabilities,
    gaussian_mechanism,
    gaussian_rho,
    gaussian_sigma,
    gumbel_top_q,
    laplace_mechanism,
    marginal_l1,
    marginal_l2,
    noise_rngs,
    score_sensitivity,
    simple_delta,
    simple_eps,
    simple_rho,
)

# (eps, delta, rho CKS, rho simple) -- SPEC §1.5 reference table
TABLE = [
    (0.2, 1e-5, 0.00155884, 0.000861125),
    (1.0, 1e-5, 0.0305566, 0.0208199),
    (2.0, 1e-5, 0.108256, 0.0800454),
    (2.5, 1e-5, 0.161847, 0.122720),
    (1.0, 1e-9, 0.0149731, 0.0117812),
    (10.0, 1e-9, 1.09079, 0.981240),
    (0.5, 2e-6, 0.00711491, 0.00467423),
    (2.0, 8e-6, 0.105934, 0.0786386),
]


# --------------------------------------------------------------------------- conversions
@pytest.mark.parametrize("eps,delta,rho_cks,rho_simple", TABLE)
def test_reference_table(eps, delta, rho_cks, rho_simple):
    assert cdp_rho(eps, delta) == pytest.approx(rho_cks, rel=1e-4)
    assert simple_rho(eps, delta) == pytest.approx(rho_simple, rel=1e-4)
    # CKS is never looser than the simple bound
    assert cdp_rho(eps, delta) > simple_rho(eps, delta)


def test_reference_point_values():
    assert cdp_delta(0.1, 1.0) == pytest.approx(0.0089332, rel=1e-4)
    assert simple_delta(0.1, 1.0) == pytest.approx(0.13199, rel=1e-4)
    assert cdp_eps(0.5, 1e-6) == pytest.approx(5.22153, rel=1e-4)
    assert simple_eps(0.5, 1e-6) == pytest.approx(5.75652, rel=1e-4)


@pytest.mark.parametrize("eps,delta,_r,_s", TABLE)
def test_round_trips(eps, delta, _r, _s):
    rho = cdp_rho(eps, delta)
    assert cdp_eps(rho, delta) == pytest.approx(eps, rel=1e-6)
    assert cdp_delta(rho, eps) <= delta  # conservative end
    assert cdp_delta(rho * (1 + 1e-6), eps) > delta  # and tight
    rs = simple_rho(eps, delta)
    assert simple_eps(rs, delta) == pytest.approx(eps, rel=1e-9)
    assert simple_delta(rs, eps) == pytest.approx(delta, rel=1e-6)


def test_zero_rho():
    assert cdp_delta(0.0, 1.0) == 0.0
    assert cdp_eps(0.0, 1e-6) == 0.0
    assert simple_delta(0.0, 1.0) == 0.0
    assert simple_eps(0.0, 1e-6) == 0.0


def test_monotonicity():
    rhos = np.geomspace(1e-4, 5.0, 15)
    epss = np.geomspace(0.05, 20.0, 15)
    d_by_rho = [cdp_delta(r, 1.0) for r in rhos]
    assert all(a <= b for a, b in zip(d_by_rho, d_by_rho[1:]))
    assert d_by_rho[0] < d_by_rho[-1]
    d_by_eps = [cdp_delta(0.5, e) for e in epss]
    assert all(a >= b for a, b in zip(d_by_eps, d_by_eps[1:]))
    assert d_by_eps[0] > d_by_eps[-1]
    e_by_rho = [cdp_eps(r, 1e-6) for r in rhos]
    assert all(a < b for a, b in zip(e_by_rho, e_by_rho[1:]))
    r_by_eps = [cdp_rho(e, 1e-6) for e in epss]
    assert all(a < b for a, b in zip(r_by_eps, r_by_eps[1:]))
    r_by_delta = [cdp_rho(1.0, d) for d in (1e-12, 1e-9, 1e-6, 1e-3, 0.1)]
    assert all(a < b for a, b in zip(r_by_delta, r_by_delta[1:]))
    # CKS delta never exceeds the simple bound
    for r in rhos:
        assert cdp_delta(r, 2.0) <= simple_delta(r, 2.0) + 1e-15


@pytest.mark.parametrize(
    "fn,args",
    [
        (cdp_rho, (1.0, 0.0)),
        (cdp_rho, (1.0, -1e-5)),
        (cdp_rho, (1.0, 1.0)),
        (cdp_rho, (1.0, 1.5)),
        (cdp_rho, (0.0, 1e-5)),
        (cdp_rho, (-1.0, 1e-5)),
        (cdp_rho, (float("nan"), 1e-5)),
        (cdp_eps, (-0.1, 1e-5)),
        (cdp_eps, (0.1, 0.0)),
        (cdp_eps, (0.1, 1.0)),
        (cdp_delta, (-0.1, 1.0)),
        (cdp_delta, (0.1, 0.0)),
        (cdp_delta, (0.1, -1.0)),
        (simple_rho, (1.0, 0.0)),
        (simple_rho, (0.0, 1e-5)),
        (simple_eps, (-1.0, 1e-5)),
        (simple_eps, (1.0, 1.0)),
        (simple_delta, (0.1, 0.0)),
        (simple_delta, (-0.1, 1.0)),
    ],
)
def test_invalid_inputs_raise(fn, args):
    with pytest.raises(ValueError):
        fn(*args)


def test_conversions_fast():
    t = time.perf_counter()
    for eps, delta, *_ in TABLE:
        cdp_rho(eps, delta)
        cdp_eps(0.5, delta)
    per_call = (time.perf_counter() - t) / (2 * len(TABLE))
    assert per_call < 0.02


# --------------------------------------------------------------------------- sensitivities
def test_sensitivities():
    assert NEIGHBOURS == ("add_remove", "replace_one")
    assert check_neighbour("replace_one") == "replace_one"
    with pytest.raises(ValueError, match="add_remove"):
        check_neighbour("bounded")
    assert marginal_l1("add_remove") == 1.0
    assert marginal_l1("replace_one") == 2.0
    assert marginal_l1("add_remove", 3) == 3.0
    assert marginal_l1("replace_one", 3) == 6.0
    assert marginal_l2("add_remove") == 1.0
    assert marginal_l2("replace_one") == pytest.approx(math.sqrt(2))
    assert marginal_l2("add_remove", 4) == pytest.approx(2.0)
    assert marginal_l2("replace_one", 8) == pytest.approx(4.0)
    assert count_l2("add_remove") == 1.0
    assert count_l2("replace_one") == 0.0
    assert score_sensitivity("add_remove") == 1.0
    assert score_sensitivity("replace_one") == 2.0
    assert score_sensitivity("add_remove", -0.5) == 0.5
    assert score_sensitivity("replace_one", -0.5) == 1.0
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError):
            marginal_l1("add_remove", bad)
    with pytest.raises(ValueError):
        marginal_l2("unbounded")


# --------------------------------------------------------------------------- accountant
def test_accountant_ledger_recomputes_rho():
    acc = Accountant(10.0)
    noise, _ = noise_rngs(0)
    gaussian_mechanism(acc, np.arange(5), sigma=3.0, l2_sensitivity=math.sqrt(2), rng=noise, what="m1")
    exponential_mechanism(acc, [1.0, 2.0, 3.0], epsilon=0.7, sensitivity=2.0, rng=noise, what="sel")
    laplace_mechanism(acc, [4.0, 5.0], scale=2.5, l1_sensitivity=2.0, rng=noise, what="lap")
    gumbel_top_q(acc, np.arange(10.0), q=3, rho=0.2, sensitivity=1.5, rng=noise, what="top")
    led = acc.ledger
    assert [c.mechanism for c in led] == ["gaussian", "exponential", "laplace", "gumbel_top_q"]
    assert [c.what for c in led] == ["m1", "sel", "lap", "top"]
    g, e, l, t = (c.to_dict() for c in led)
    assert g["rho"] == pytest.approx(g["l2_sensitivity"] ** 2 / (2 * g["sigma"] ** 2), rel=1e-12)
    assert g["rho"] == pytest.approx(2.0 / 18.0)
    assert e["rho"] == pytest.approx(e["epsilon"] ** 2 / 8, rel=1e-12)
    assert e["rho"] == pytest.approx(0.49 / 8)
    assert l["epsilon"] == pytest.approx(l["l1_sensitivity"] / l["scale"])
    assert l["rho"] == pytest.approx(l["epsilon"] ** 2 / 2, rel=1e-12)
    assert l["rho"] == pytest.approx(0.8**2 / 2)
    assert t["rho"] == pytest.approx(t["q"] * t["sensitivity"] ** 2 / (2 * t["beta"] ** 2), rel=1e-12)
    assert t["rho"] == pytest.approx(0.2)
    assert acc.rho_spent == pytest.approx(sum(c.rho for c in led))
    assert acc.rho_remaining == pytest.approx(10.0 - acc.rho_spent)
    assert isinstance(led, tuple) and all(isinstance(c, Charge) for c in led)


def test_accountant_refuses_overspend():
    acc = Accountant(1.0)
    acc.charge(0.6, "a", "test")
    before = acc.ledger
    with pytest.raises(BudgetExceededError):
        acc.charge(0.5, "b", "test")
    assert acc.ledger == before and acc.rho_spent == pytest.approx(0.6)
    assert not acc.can_afford(0.5) and acc.can_afford(0.4)
    # a primitive refusing the charge draws no noise and records nothing
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    with pytest.raises(BudgetExceededError):
        gaussian_mechanism(acc, np.zeros(3), sigma=0.1, l2_sensitivity=1.0, rng=rng)
    with pytest.raises(BudgetExceededError):
        exponential_mechanism(acc, [0.0, 1.0], epsilon=10.0, sensitivity=1.0, rng=rng)
    with pytest.raises(BudgetExceededError):
        gumbel_top_q(acc, [0.0, 1.0], q=1, rho=1.0, sensitivity=1.0, rng=rng)
    with pytest.raises(BudgetExceededError):
        laplace_mechanism(acc, [0.0], scale=0.1, l1_sensitivity=1.0, rng=rng)
    assert rng.bit_generator.state == state
    assert acc.ledger == before
    assert isinstance(BudgetExceededError("x"), ValueError)


def test_accountant_exact_total_allowed():
    acc = Accountant(0.3)
    for _ in range(3):
        acc.charge(0.1, "x", "test")  # 0.1+0.1+0.1 != 0.3 in floats; tolerance 1e-9 applies
    assert acc.rho_remaining == 0.0 or acc.rho_remaining < 1e-15
    acc2 = Accountant(0.5)
    acc2.charge(0.5)
    assert acc2.rho_spent == 0.5 and acc2.rho_remaining == 0.0
    with pytest.raises(BudgetExceededError):
        acc2.charge(1e-6)
    acc2.charge(0.0)  # free post-processing-style entries are allowed
    assert len(acc2.ledger) == 2


def test_accountant_invalid_charges_and_init():
    acc = Accountant(1.0)
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            acc.charge(bad)
    assert acc.ledger == ()
    with pytest.raises(ValueError):
        Accountant(-1.0)
    with pytest.raises(ValueError):
        Accountant(1.0, neighbour="bounded")
    with pytest.raises(ValueError):
        Accountant.from_epsilon_delta(1.0, 0.0)


def test_accountant_from_epsilon_delta_and_to_dict():
    acc = Accountant.from_epsilon_delta(1.0, 1e-5, neighbour="replace_one")
    assert acc.rho_total == pytest.approx(0.0305566, rel=1e-4)
    assert acc.neighbour == "replace_one"
    noise, _ = noise_rngs(3)
    gaussian_mechanism(acc, np.ones(4), sigma=np.float64(20.0), l2_sensitivity=marginal_l2("replace_one"), rng=noise)
    gumbel_top_q(acc, np.arange(5.0), q=np.int64(2), rho=0.001, sensitivity=2.0, rng=noise)
    d = acc.to_dict()
    s = json.dumps(d)
    back = json.loads(s)
    assert back["epsilon"] == 1.0 and back["delta"] == 1e-5 and back["neighbour"] == "replace_one"
    assert back["rho_spent"] == pytest.approx(1 / 400 + 0.001)
    assert [c["mechanism"] for c in back["ledger"]] == ["gaussian", "gumbel_top_q"]
    assert back["ledger"][1]["q"] == 2
    assert acc.epsilon_spent(1e-5) == pytest.approx(cdp_eps(acc.rho_spent, 1e-5))
    assert acc.epsilon_spent(1e-5) < 1.0
    assert Accountant(1.0).epsilon_spent(1e-5) == 0.0


# --------------------------------------------------------------------------- primitives
def test_gaussian_calibration_and_noise():
    assert gaussian_sigma(0.5, 1.0) == pytest.approx(1.0)
    assert gaussian_sigma(0.02, math.sqrt(2)) == pytest.approx(math.sqrt(2) / math.sqrt(0.04))
    assert gaussian_rho(gaussian_sigma(0.37, 1.3), 1.3) == pytest.approx(0.37)
    assert gaussian_rho(1.0, 0.0) == 0.0
    with pytest.raises(ValueError):
        gaussian_sigma(0.0, 1.0)
    acc = Accountant(1.0)
    noise, _ = noise_rngs(12345)
    sigma = 2.5
    vals = np.full(200_000, 7.0)
    out = gaussian_mechanism(acc, vals, sigma=sigma, l2_sensitivity=2.5, rng=noise)
    assert out.dtype == np.float64 and out.shape == vals.shape
    assert np.all(vals == 7.0)  # input untouched
    z = out - 7.0
    assert abs(z.std() / sigma - 1) < 0.02
    assert abs(z.mean()) < 4 * sigma / math.sqrt(z.size)
    assert acc.rho_spent == pytest.approx(0.5)
    out2 = gaussian_mechanism(acc, np.eye(3, dtype=int), sigma=1.0, l2_sensitivity=0.5, rng=noise)
    assert out2.shape == (3, 3) and out2.dtype == np.float64


def test_laplace_noise():
    acc = Accountant(1.0)
    noise, _ = noise_rngs(7)
    out = laplace_mechanism(acc, np.zeros(200_000), scale=2.0, l1_sensitivity=1.0, rng=noise)
    assert abs(out.std() / (2.0 * math.sqrt(2)) - 1) < 0.02
    assert abs(np.mean(np.abs(out)) / 2.0 - 1) < 0.02
    assert acc.rho_spent == pytest.approx(0.5**2 / 2)


def test_exponential_probabilities():
    p = exponential_probabilities([0.0, 1.0, 2.0], epsilon=2.0, sensitivity=1.0)
    expected = np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum()
    np.testing.assert_allclose(p, expected, rtol=1e-12)
    # stable for huge scores, -inf gets probability 0
    p = exponential_probabilities([1e6, 1e6 + 2.0, -np.inf], epsilon=1.0, sensitivity=0.5)
    np.testing.assert_allclose(p, [1 / (1 + math.e**2), math.e**2 / (1 + math.e**2), 0.0], rtol=1e-12)
    p = exponential_probabilities([3.0, -np.inf, 1.0], epsilon=0.0, sensitivity=1.0)
    np.testing.assert_allclose(p, [0.5, 0.0, 0.5])
    assert exponential_epsilon(0.125) == pytest.approx(1.0)
    for bad in (dict(sensitivity=0.0), dict(sensitivity=-1.0)):
        with pytest.raises(ValueError):
            exponential_probabilities([0.0, 1.0], epsilon=1.0, **bad)
    with pytest.raises(ValueError):
        exponential_probabilities([-np.inf, -np.inf], epsilon=1.0, sensitivity=1.0)
    with pytest.raises(ValueError):
        exponential_probabilities([np.nan, 0.0], epsilon=1.0, sensitivity=1.0)


SCORES = np.array([0.0, 1.0, 2.5, 3.0, -np.inf, 1.5])


def test_exponential_mechanism_frequencies():
    eps, sens, n = 1.2, 1.0, 100_000
    p = exponential_probabilities(SCORES, eps, sens)
    acc = Accountant(n * eps**2 / 8)
    noise, _ = noise_rngs(2024)
    draws = np.array([exponential_mechanism(acc, SCORES, eps, sens, noise) for _ in range(n)])
    counts = np.bincount(draws, minlength=SCORES.size)
    assert counts[4] == 0
    keep = p > 0
    assert stats.chisquare(counts[keep], n * p[keep]).pvalue > 1e-3
    assert np.max(np.abs(counts / n - p)) < 0.01
    assert len(acc.ledger) == n and acc.rho_spent == pytest.approx(acc.rho_total)


def test_gumbel_top1_matches_em():
    rho, sens, n = 0.05, 2.0, 100_000
    acc = Accountant(n * rho)
    noise, _ = noise_rngs(99)
    draws = np.array([gumbel_top_q(acc, SCORES, 1, rho, sens, noise)[0] for _ in range(n)])
    beta = acc.ledger[0].params["beta"]
    assert beta == pytest.approx(sens * math.sqrt(1 / (2 * rho)))
    p = exponential_probabilities(SCORES, 2 * sens / beta, sens)
    counts = np.bincount(draws, minlength=SCORES.size)
    assert counts[4] == 0
    keep = p > 0
    assert stats.chisquare(counts[keep], n * p[keep]).pvalue > 1e-3
    assert np.max(np.abs(counts / n - p)) < 0.01


def test_gumbel_top_q_output():
    acc = Accountant(10.0)
    noise, _ = noise_rngs(5)
    scores = np.array([0.0, 100.0, 50.0, -np.inf, 75.0, 10.0])
    idx = gumbel_top_q(acc, scores, 3, rho=5.0, sensitivity=1.0, rng=noise)  # tiny noise
    assert idx.tolist() == [1, 4, 2]
    idx = gumbel_top_q(acc, scores, 5, rho=1.0, sensitivity=1.0, rng=noise)
    assert sorted(idx.tolist()) == [0, 1, 2, 4, 5]  # -inf never chosen
    with pytest.raises(ValueError):
        gumbel_top_q(acc, scores, 6, rho=1.0, sensitivity=1.0, rng=noise)
    with pytest.raises(ValueError):
        gumbel_top_q(acc, scores, 0, rho=1.0, sensitivity=1.0, rng=noise)
    assert acc.rho_spent == pytest.approx(6.0)


def test_noise_rngs():
    a1, b1 = noise_rngs(42)
    a2, b2 = noise_rngs(42)
    x = a1.random(5)
    np.testing.assert_array_equal(x, a2.random(5))
    np.testing.assert_array_equal(b1.random(5), b2.random(5))
    a3, b3 = noise_rngs(42)
    assert not np.array_equal(a3.random(5), b3.random(5))
    assert not np.array_equal(noise_rngs(43)[0].random(5), x)
    n1, _ = noise_rngs(None)
    n2, _ = noise_rngs(None)
    assert not np.array_equal(n1.random(5), n2.random(5))


@pytest.mark.parametrize("delta", [5e-324, 1e-300, 1e-9])
def test_conversions_at_the_smallest_deltas_are_finite_and_valid(delta):
    """1/δ overflows below ~5.6e-309: the conversions use −ln δ, so they stay finite (and no
    bisection starts from an infinite bracket, which hung for ever)."""
    import math

    from privmarg.privacy.conversions import cdp_delta, cdp_eps, cdp_rho, simple_eps, simple_rho

    eps = cdp_eps(0.5, delta)
    rho = cdp_rho(1.0, delta)
    assert math.isfinite(eps) and 0 < eps <= simple_eps(0.5, delta)
    assert 0 < simple_rho(1.0, delta) <= rho < 1.0
    assert cdp_delta(0.5, eps) <= delta and cdp_delta(rho, 1.0) <= delta
