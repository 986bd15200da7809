"""The zCDP ledger against an independent accountant (Google's dp-accounting, the `test` extra) and
against Rényi divergences computed here from the mechanisms' exact output distributions.

dp-accounting's RDP accountant converts RDP to (ε, δ) with Canonne–Kamath–Steinke Prop. 12, the
same bound as our ``cdp_*`` conversions but minimised over a grid of orders; with a dense grid the
two must agree closely, and ours (minimised over every α > 1) can only be smaller. Its PLD
accountant gives the exact ε of a Gaussian mechanism, which any valid zCDP conversion must not
undercut.
"""

import math

import numpy as np
import pytest
from dp_accounting import dp_event, pld
from dp_accounting.rdp import rdp_privacy_accountant as rdp

from privmarg.privacy import (
    Accountant,
    cdp_eps,
    cdp_rho,
    exponential_probabilities,
    gaussian_mechanism,
    gaussian_rho,
    laplace_mechanism,
    simple_eps,
)
from privmarg.privacy.discrete import discrete_gaussian_pmf

ORDERS = np.concatenate([np.linspace(1.001, 1.5, 500), np.linspace(1.5, 20, 4000), np.geomspace(20, 5000, 2000)])
GRID = [(d, s) for d in (1.0, math.sqrt(2), 2.0, 3.5) for s in (0.3, 1.0, 4.0, 25.0, 300.0)]


def rdp_curve(*events):
    acc = rdp.RdpAccountant(orders=list(ORDERS))
    for e in events:
        acc.compose(e)
    return acc


@pytest.mark.parametrize("l2,sigma", GRID)
def test_gaussian_rho_is_dp_accountings_rdp_over_alpha(l2, sigma):
    # dp-accounting: Gaussian with noise multiplier z = σ/Δ has RDP α/(2z²) at every order α
    acc = rdp_curve(dp_event.GaussianDpEvent(sigma / l2))
    rho = gaussian_rho(sigma, l2)
    np.testing.assert_allclose(acc._rdp / ORDERS, rho, rtol=1e-12)
    assert rho == pytest.approx(l2**2 / (2 * sigma**2), rel=1e-15)


@pytest.mark.parametrize("rho", [1e-4, 0.0149731, 0.1, 0.5, 2.0, 10.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
def test_conversion_agrees_with_dp_accounting(rho, delta):
    ours = cdp_eps(rho, delta)
    # a Gaussian with z = 1/√(2ρ) is exactly ρ-zCDP (RDP αρ at every α): same curve as our budget
    theirs = rdp_curve(dp_event.GaussianDpEvent(1 / math.sqrt(2 * rho))).get_epsilon(delta)
    assert ours <= theirs * (1 + 1e-9)  # ours minimises over every α, theirs over a grid
    assert ours >= theirs * (1 - 2e-3)  # ... a dense grid, so hardly better
    assert ours <= simple_eps(rho, delta)  # CKS is tighter than Bun–Steinke


@pytest.mark.parametrize("rho", [1e-4, 0.0149731, 0.5])
def test_conversion_never_undercuts_the_exact_gaussian_curve(rho):
    # the exact privacy curve of a ρ-zCDP Gaussian (privacy loss distribution) is below any valid
    # zCDP conversion, and the CKS bound is not far above it
    p = pld.PLDAccountant(value_discretization_interval=1e-4)
    p.compose(dp_event.GaussianDpEvent(1 / math.sqrt(2 * rho)))
    for delta in (1e-9, 1e-6):
        exact = p.get_epsilon(delta)
        ours = cdp_eps(rho, delta)
        assert exact <= ours <= 1.25 * exact


@pytest.mark.parametrize("eps,delta", [(0.2, 1e-5), (1.0, 1e-9), (2.0, 8e-6), (10.0, 1e-9)])
def test_rho_from_epsilon_delta_round_trips_through_dp_accounting(eps, delta):
    rho = cdp_rho(eps, delta)
    theirs = rdp_curve(dp_event.GaussianDpEvent(1 / math.sqrt(2 * rho))).get_epsilon(delta)
    assert theirs == pytest.approx(eps, rel=2e-3)
    assert theirs >= eps * (1 - 1e-9)  # the budget never converts to more than the target ε


def test_laplace_charge_upper_bounds_its_rdp():
    # we charge a pure ε-DP Laplace ε²/2 zCDP; dp-accounting's exact Laplace RDP must lie below αε²/2
    for b, d in [(0.5, 1.0), (2.0, 1.0), (10.0, 2.0)]:
        acc = Accountant(100.0)
        laplace_mechanism(acc, np.zeros(3), b, d, np.random.default_rng(0))
        charged = acc.rho_spent
        curve = rdp_curve(dp_event.LaplaceDpEvent(b / d))._rdp
        assert np.all(curve <= ORDERS * charged * (1 + 1e-9))
        assert charged == pytest.approx((d / b) ** 2 / 2)


def test_composition_matches_dp_accounting():
    acc = Accountant(1e6)
    events = []
    rng = np.random.default_rng(0)
    for l2, sigma in GRID:
        gaussian_mechanism(acc, np.zeros(2), sigma, l2, rng)
        events.append(dp_event.GaussianDpEvent(sigma / l2))
    curve = rdp_curve(*events)
    np.testing.assert_allclose(curve._rdp / ORDERS, acc.rho_spent, rtol=1e-10)
    assert acc.rho_spent == pytest.approx(sum(l2**2 / (2 * s**2) for l2, s in GRID), rel=1e-12)
    # scaled down so the total is a realistic budget: same ε at δ = 1e-9 from both
    k = 0.5 / acc.rho_spent
    scaled = rdp_curve(*[dp_event.GaussianDpEvent(e.noise_multiplier / math.sqrt(k)) for e in events])
    assert cdp_eps(0.5, 1e-9) == pytest.approx(scaled.get_epsilon(1e-9), rel=2e-3)


def renyi(p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    """D_α(P‖Q) of two discrete distributions (log-sum-exp)."""
    m = p > 0
    logs = alpha * np.log(p[m]) + (1 - alpha) * np.log(q[m])
    top = logs.max()
    return float((top + math.log(np.exp(logs - top).sum())) / (alpha - 1))


ALPHAS = [1.01, 1.5, 2.0, 4.0, 16.0, 64.0]


def test_exponential_mechanism_rho_is_eps_squared_over_8():
    # EM with parameter ε: scores move by at most Δ between neighbours; its output distributions must
    # satisfy D_α ≤ α ε²/8 (bounded range, Cesar–Rogers). Worst cases: two candidates at every
    # log-odds, plus random score vectors moved by ±Δ.
    rng = np.random.default_rng(0)
    for eps in (0.1, 1.0, 3.0):
        worst = 0.0
        cases = [(np.array([0.0, s]), np.array([1.0, s - 1.0])) for s in np.linspace(-40, 40, 161)]
        for _ in range(300):
            q = rng.normal(0, 5, size=int(rng.integers(2, 6)))
            cases.append((q, q + rng.choice([-1.0, 1.0], size=q.size) * rng.uniform(0.5, 1.0, size=q.size)))
        for q, q2 in cases:
            p1 = exponential_probabilities(q, eps, 1.0)
            p2 = exponential_probabilities(q2, eps, 1.0)
            for a in ALPHAS:
                worst = max(worst, renyi(p1, p2, a) / (a * eps**2 / 8))
        assert worst <= 1 + 1e-9
        # nearly attained for small ε (KL of the two-candidate case is (ε/2)·tanh(ε/4) → ε²/8)
        assert worst >= 4 * math.tanh(eps / 4) / eps * (1 - 1e-3)
        # the same search catches a mis-scaled EM (ε/Δ instead of ε/(2Δ) in the exponent)
        bad = max(renyi(exponential_probabilities(q, 2 * eps, 1.0), exponential_probabilities(q2, 2 * eps, 1.0), a)
                  / (a * eps**2 / 8) for q, q2 in cases[:161] for a in ALPHAS)
        assert bad > 2


@pytest.mark.parametrize("sigma", [0.4, 0.75, 2.0, 6.5])
def test_discrete_gaussian_integer_shift_renyi_is_exactly_the_ledger(sigma):
    # CKS: for integer shifts μ, D_α(N_Z(0,σ²) ‖ N_Z(μ,σ²)) ≤ α μ²/(2σ²), the continuous value, with
    # equality when (α−1)μ is an integer (the sum Σ_k exp(−(k−c)²/(2σ²)) is largest at integer c)
    m = int(12 * sigma) + 12 + 32  # the Rényi sums centre at (1−α)μ ≥ −30; 12σ beyond is below 1e-31
    k = np.arange(-m, m + 1)
    np.testing.assert_allclose(discrete_gaussian_pmf(sigma, k)[m - 3:m + 4],
                               np.exp(-(k[m - 3:m + 4] ** 2) / (2 * sigma**2)) / np.exp(-(k**2) / (2 * sigma**2)).sum(),
                               rtol=1e-5)  # σ² = 0.16 is rounded up (2^-23 relative) by the sampler

    def log_pmf(shift):  # over k, normalised over all the integers
        ll = -((k - shift) ** 2) / (2 * sigma**2)
        j = np.arange(-m - 50, m + 51)
        lz = np.log(np.exp(-((j - shift) ** 2) / (2 * sigma**2)).sum())
        return ll - lz

    def renyi_log(lp, lq, a):
        s = a * lp + (1 - a) * lq
        return float((s.max() + np.log(np.exp(s - s.max()).sum())) / (a - 1))

    lp = log_pmf(0)
    for mu in (1, 2):
        for a in ALPHAS[:5]:
            d = renyi_log(lp, log_pmf(mu), a)
            assert d <= a * gaussian_rho(sigma, mu) * (1 + 1e-9)
            if float(a).is_integer():
                assert d == pytest.approx(a * gaussian_rho(sigma, mu), rel=1e-9)


@pytest.mark.parametrize("sigma", [0.3, 0.5, 1.0])
def test_vector_discrete_gaussian_needs_no_extra_term(sigma):
    # The ledger charges a vector of independent N_Z(0, σ²) on integer-valued answers Δ₂²/(2σ²), with
    # no small-σ correction: Rényi divergence adds over independent coordinates, and each coordinate's
    # is at most α μ_j²/(2σ²) (CKS 2020, multivariate discrete Gaussian). The τ-term of the
    # distributed discrete Gaussian is for sums of discrete Gaussians, which are not released here.
    # Brute force over the 2-D grid for shifts with Δ₂² = 2 and 5, at small σ where the pmf is far from
    # the continuous one.
    m = 40
    k = np.arange(-m, m + 1)

    def log_pmf_1d(shift):
        j = np.arange(-m - 60, m + 61)
        return -((k - shift) ** 2) / (2 * sigma**2) - np.log(np.exp(-((j - shift) ** 2) / (2 * sigma**2)).sum())

    for mu in ((1, 1), (1, 2), (2, 1)):
        lp = log_pmf_1d(0)[:, None] + log_pmf_1d(0)[None, :]
        lq = log_pmf_1d(mu[0])[:, None] + log_pmf_1d(mu[1])[None, :]
        for a in (1.5, 2.0, 3.0, 8.0):
            s = (a * lp + (1 - a) * lq).ravel()
            d = float((s.max() + np.log(np.exp(s - s.max()).sum())) / (a - 1))
            assert d <= a * gaussian_rho(sigma, math.hypot(*mu)) * (1 + 1e-9)
            if float(a).is_integer():  # attained: the charge is not loose either
                assert d == pytest.approx(a * gaussian_rho(sigma, math.hypot(*mu)), rel=1e-9)
