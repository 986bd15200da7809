"""Exact discrete Gaussian / discrete Laplace noise (privacy.discrete): distribution against the exact
pmf at fixed seeds, integrality, symmetry, parameter rounding, and the discrete options of the
mechanisms, the session and PrivTree."""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privmarg.data import MemorySource
from privmarg.core import Domain
from privmarg.measure import MeasurementSession
from privmarg.privacy import Accountant, discrete_gaussian_mechanism, discrete_laplace_mechanism, recompute_rho
from privmarg.privacy.discrete import (
    _bern_exp,
    _bern_exp_scalar,
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_sigma2,
    discrete_gaussian_variance,
    discrete_laplace,
    discrete_laplace_pmf,
    discrete_laplace_scale,
)
from privmarg.privacy.privtree import privtree_split


def exact_moments(sigma2: float):
    """Variance and 4th moment of N_Z(0, sigma2), summed here from the unnormalised pmf."""
    m = int(40 * math.sqrt(sigma2)) + 50
    k = np.arange(-m, m + 1, dtype=float)
    w = np.exp(-k * k / (2 * sigma2))
    w /= w.sum()
    return float((k**2 * w).sum()), float((k**4 * w).sum())


def chi2_pvalue(samples: np.ndarray, pmf) -> float:
    """Chi-square goodness of fit of integer samples to ``pmf(k)``, cells with expected count >= 5,
    the two tails pooled into one cell each."""
    n = samples.size
    lo, hi = int(samples.min()), int(samples.max())
    k = np.arange(lo - 200, hi + 201)
    p = pmf(k)
    keep = np.flatnonzero(p * n >= 5)
    a, b = k[keep[0]], k[keep[-1]]
    obs = [np.sum(samples < a)] + [np.sum(samples == v) for v in range(a, b + 1)] + [np.sum(samples > b)]
    inner = pmf(np.arange(a, b + 1))
    tail_lo = float(pmf(k[k < a]).sum())
    tail_hi = float(pmf(k[k > b]).sum())
    exp = np.concatenate([[tail_lo], inner, [tail_hi]])
    exp = exp / exp.sum() * n
    cells = exp > 0
    return float(stats.chisquare(np.asarray(obs)[cells], exp[cells]).pvalue)


SIGMAS = [0.625, 3.0, 25.5]


@pytest.mark.parametrize("sigma", SIGMAS)
def test_discrete_gaussian_matches_exact_pmf(sigma):
    x = discrete_gaussian(sigma, 200_000, np.random.default_rng(11))
    assert x.dtype == np.int64 and x.shape == (200_000,)
    s2 = float(discrete_gaussian_sigma2(sigma))
    assert s2 == sigma**2  # these sigmas are dyadic enough to be kept exactly
    var, m4 = exact_moments(s2)
    assert discrete_gaussian_variance(sigma) == pytest.approx(var, rel=1e-12)
    n = x.size
    assert abs(x.mean()) < 5 * math.sqrt(var / n)
    assert abs(x.var() - var) < 5 * math.sqrt((m4 - var**2) / n)
    assert chi2_pvalue(x, lambda k: discrete_gaussian_pmf(sigma, k)) > 1e-3
    # the same test has the power to see a 3% wrong scale
    assert chi2_pvalue(x, lambda k: discrete_gaussian_pmf(sigma * 1.03, k)) < 1e-6


def test_discrete_gaussian_variance_below_sigma2():
    # CKS Cor. 9: Var[N_Z(0, σ²)] < σ²; for small σ visibly so (σ = 0.6: about 0.16, not 0.36)
    var, _ = exact_moments(0.36)
    assert var < 0.36 and discrete_gaussian_variance(0.6) == pytest.approx(var)
    assert var == pytest.approx(2 * (math.exp(-1 / 0.72) + 4 * math.exp(-4 / 0.72) + 9 * math.exp(-9 / 0.72))
                                / (1 + 2 * (math.exp(-1 / 0.72) + math.exp(-4 / 0.72) + math.exp(-9 / 0.72))),
                                rel=1e-6)
    # ... and for σ = 1 only just below σ² (by Poisson summation the gap is about 8π²σ⁴e^{−2π²σ²})
    gap = 1.0 - discrete_gaussian_variance(1.0)
    assert gap == pytest.approx(8 * math.pi**2 * math.exp(-2 * math.pi**2), rel=0.01)


@pytest.mark.parametrize("sigma", [0.625, 3.0])
def test_discrete_gaussian_symmetric(sigma):
    x = discrete_gaussian(sigma, 200_000, np.random.default_rng(12))
    for k in range(1, 4):
        pos, neg = int(np.sum(x == k)), int(np.sum(x == -k))
        if pos + neg >= 50:
            assert stats.binomtest(pos, pos + neg, 0.5).pvalue > 1e-3


def test_reference_sampler_matches_pmf():
    x = discrete_gaussian(1.5, 20_000, np.random.default_rng(13), method="reference")
    assert x.dtype == np.int64
    assert chi2_pvalue(x, lambda k: discrete_gaussian_pmf(1.5, k)) > 1e-3
    y = discrete_laplace(2.5, 20_000, np.random.default_rng(14), method="reference")
    assert chi2_pvalue(y, lambda k: discrete_laplace_pmf(2.5, k)) > 1e-3


@pytest.mark.parametrize("scale", [0.5, 4.0, 37.5])
def test_discrete_laplace_matches_exact_pmf(scale):
    x = discrete_laplace(scale, 200_000, np.random.default_rng(15))
    a = math.exp(-1 / scale)
    var = 2 * a / (1 - a) ** 2
    assert float(discrete_laplace_scale(scale)) == scale
    assert abs(x.mean()) < 5 * math.sqrt(var / x.size)
    assert chi2_pvalue(x, lambda k: discrete_laplace_pmf(scale, k)) > 1e-3
    assert chi2_pvalue(x, lambda k: discrete_laplace_pmf(scale * 1.05, k)) < 1e-6
    pos, neg = int(np.sum(x > 0)), int(np.sum(x < 0))
    assert stats.binomtest(pos, pos + neg, 0.5).pvalue > 1e-3


@pytest.mark.parametrize("g", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(7, 3)])
def test_bernoulli_exp_building_blocks(g):
    rng = np.random.default_rng(16)
    n = 40_000
    v = _bern_exp(rng, np.full(n, g.numerator, dtype=np.int64), np.full(n, g.denominator, dtype=np.int64))
    p = math.exp(-float(g))
    if g == 0:
        assert v.all()
    else:
        assert stats.binomtest(int(v.sum()), n, p).pvalue > 1e-3
    s = sum(_bern_exp_scalar(rng, g) for _ in range(4000))
    assert stats.binomtest(s, 4000, p).pvalue > 1e-3 if g else s == 4000


def test_parameter_rounding_only_adds_noise():
    assert discrete_gaussian_sigma2(3.0) == 9 and discrete_gaussian_sigma2(0.5) == Fraction(1, 4)
    for sigma in [0.1, 1 / 3, 7.77, 1234.5678, 3e7]:
        s2 = discrete_gaussian_sigma2(sigma)
        exact = Fraction(sigma) ** 2
        assert exact <= s2 < exact * (1 + Fraction(1, 2**23))
        assert s2.denominator & (s2.denominator - 1) == 0  # dyadic
    tau = discrete_laplace_scale(0.1)
    assert Fraction(0.1) <= tau < Fraction(0.1) * (1 + Fraction(1, 2**23))
    with pytest.raises(ValueError):
        discrete_gaussian(0.0, 3)
    with pytest.raises(ValueError):
        discrete_laplace(float("nan"), 3)


def test_extreme_scales_still_integer_and_scaled():
    rng = np.random.default_rng(17)
    assert not np.any(discrete_gaussian(0.001, 10_000, rng))  # Pr[x != 0] ~ exp(-500000)
    big = discrete_gaussian(1e8, 200, rng)  # beyond int64 room: the exact scalar path
    assert big.dtype == np.int64 and 0.5e8 < big.std() < 2e8
    assert isinstance(discrete_gaussian(2.0, None, rng), int)
    assert discrete_gaussian(2.0, (3, 4), rng).shape == (3, 4)


def test_discrete_mechanisms_charge_and_refuse_non_integers():
    acc = Accountant(10.0)
    rng = np.random.default_rng(0)
    y = discrete_gaussian_mechanism(acc, np.array([3, 5, 7]), 2.0, 1.0, rng, what="m")
    assert y.dtype == np.float64 and np.all(y == np.round(y))
    c = acc.ledger[-1]
    assert c.mechanism == "discrete_gaussian" and c.rho == pytest.approx(1 / 8) and recompute_rho(c.to_dict()) == c.rho
    z = discrete_laplace_mechanism(acc, np.array([1.0, 2.0]), 4.0, 2.0, rng, what="l")
    assert np.all(z == np.round(z)) and acc.ledger[-1].rho == pytest.approx(0.5**2 / 2)
    assert recompute_rho(acc.ledger[-1].to_dict()) == pytest.approx(0.125)
    spent = acc.rho_spent
    with pytest.raises(ValueError, match="integer"):
        discrete_gaussian_mechanism(acc, np.array([0.5, 1.0]), 2.0, 1.0, rng)
    assert acc.rho_spent == spent  # refused before any charge


def test_session_discrete_noise_and_fallback():
    dom = Domain(("a", "b"), (3, 4))
    data = np.random.default_rng(1).integers(0, 3, size=(500, 2))
    from privmarg.data import Dataset

    src = MemorySource(Dataset(data, dom))
    acc = Accountant(10.0)
    s = MeasurementSession(src, acc, np.random.default_rng(2), noise="discrete")
    m = s.measure(("a", "b"), 3.0)
    assert np.all(m.y == np.round(m.y)) and acc.ledger[-1].mechanism == "discrete_gaussian"
    s.gaussian(np.array([0.25, 1.5]), 3.0, 1.0, what="smoothed statistic")
    last = acc.ledger[-1]
    assert last.mechanism == "gaussian" and last.params["fallback"] == "non-integer values"
    with pytest.raises(ValueError):
        MeasurementSession(src, acc, np.random.default_rng(2), noise="gauss")


def test_discrete_noise_follows_the_statistic_not_its_values():
    """Whether the exact values happen to be integers must not pick the mechanism: that would
    release one uncharged bit (discrete output is always integral, continuous almost never)."""
    dom = Domain(("a", "b"), (3, 4))
    from privmarg.data import Dataset

    src = MemorySource(Dataset(np.random.default_rng(1).integers(0, 3, size=(500, 2)), dom))
    acc = Accountant(10.0)
    s = MeasurementSession(src, acc, np.random.default_rng(2), noise="discrete")
    s.gaussian(np.array([4.0, 0.0, 7.0]), 3.0, 1.0, what="a score that is integral on this table")
    assert acc.ledger[-1].mechanism == "gaussian"
    s.gaussian(np.array([4.0, 0.0, 7.0]), 3.0, 1.0, what="record counts", counts=True)
    assert acc.ledger[-1].mechanism == "discrete_gaussian"


def test_privtree_discrete_ledger_and_integer_bias():
    vals = np.sort(np.random.default_rng(3).normal(500, 100, size=2000))

    def count(lo, hi, closed):
        return int(np.sum((vals >= lo) & ((vals <= hi) if closed else (vals < hi))))

    acc = Accountant(1.0)
    edges = privtree_split(acc, count, 0.0, 1000.0, lattice=False, max_depth=8, rho=0.5,
                           rng=np.random.default_rng(4), noise="discrete")
    c = acc.ledger[-1].to_dict()
    assert c["mechanism"] == "privtree_discrete" and float(c["bias"]).is_integer()
    assert c["bias"] == math.ceil(c["scale"] * math.log(2)) and recompute_rho(c) == pytest.approx(0.5)
    assert edges[0] == 0.0 and edges[-1] == 1000.0 and len(edges) > 3  # dense data gets split
    bad = dict(c, bias=c["bias"] + 0.5)
    with pytest.raises(ValueError):
        recompute_rho(bad)
