"""Exact discrete Laplace and discrete Gaussian noise (Canonne, Kamath & Steinke 2020, "CKS").

The discrete Gaussian ``N_Z(0, σ²)`` has ``Pr[x] ∝ exp(−x²/(2σ²))`` on the integers; the discrete
Laplace ``Lap_Z(τ)`` has ``Pr[x] ∝ exp(−|x|/τ)``. Added to an integer-valued query they give the
same guarantees as their continuous counterparts (CKS Thm 4 / Thm 14: the discrete Gaussian on a
query with L2 sensitivity ``Δ₂`` is ``Δ₂²/(2σ²)``-zCDP; the discrete Laplace on a query with L1
sensitivity ``Δ₁`` is ``Δ₁/τ``-DP), without the floating-point artefacts of continuous noise.

What is exact. Every random decision is a comparison of a uniform random *integer* (numpy's
``Generator.integers``, which is unbiased) with an integer: Bernoulli(``n/d``) is
``integers(0, d) < n``; Bernoulli(``exp(−n/d)``) is CKS Algorithm 1 built from such coins; the
discrete Laplace is CKS Algorithm 2; the discrete Gaussian is rejection from a discrete Laplace
with exact acceptance probability ``exp(−(|y| − c)²/(2σ²))``. No floating-point number enters a
sampling decision, so, given ideal random bits, the output distribution is exactly the stated one
for the *rational* parameter actually used:

* ``σ²`` (and the Laplace scale ``τ``) is first rounded **up** to a dyadic rational with at least
  24 significant bits (:func:`discrete_gaussian_sigma2`, :func:`discrete_laplace_scale`; a float
  like 3.0 or 0.5 is kept exactly). Rounding up only adds noise, so the cost charged for the
  requested ``σ`` (or ``τ``) is an upper bound on the true cost.
* The vectorized samplers run batches of CKS's loops in int64 numpy arrays (the rejection shift
  ``c`` is a rational close to ``σ``, chosen so every integer stays below 2^62). Parameters whose
  integers would not fit (``σ`` below about 2^-9 or above about 2^25) and the astronomically rare
  proposals far in the tail go to the scalar reference (``method="reference"``, CKS's algorithms
  verbatim on Python integers), which is exact for any rational parameter.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np

from .accountant import Accountant
from .primitives import gaussian_rho

__all__ = [
    "NOISES",
    "check_noise",
    "discrete_gaussian",
    "discrete_gaussian_sigma2",
    "discrete_gaussian_pmf",
    "discrete_gaussian_variance",
    "discrete_laplace",
    "discrete_laplace_scale",
    "discrete_laplace_pmf",
    "discrete_gaussian_mechanism",
    "discrete_laplace_mechanism",
    "is_integral",
]

_BITS = 24  # significant bits kept when rounding σ² or τ up to a dyadic rational
_LIMIT = 1 << 62  # every int64 product stays below this
_SMALL = 1 << 52  # proposal scale numerator and acceptance denominator must stay below this


# --------------------------------------------------------------------------- parameters
def _fraction(x: Any, name: str) -> Fraction:
    if isinstance(x, Fraction):
        f = x
    elif isinstance(x, numbers.Integral) and not isinstance(x, bool):
        f = Fraction(int(x))
    else:
        try:
            v = float(x)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a real number, got {x!r}") from None
        if not math.isfinite(v):
            raise ValueError(f"{name} must be finite, got {x!r}")
        f = Fraction(v)  # exact value of the float
    if f <= 0:
        raise ValueError(f"{name} must be > 0, got {x!r}")
    return f


def _dyadic_ceil(x: Fraction, bits: int = _BITS) -> Fraction:
    """Smallest ``a / 2^j ≥ x`` with ``j ≥ 0`` chosen so ``a`` has about ``bits`` bits (exact if
    ``x`` already is such a number)."""
    e = x.numerator.bit_length() - x.denominator.bit_length()  # floor(log2 x) or one less
    j = max(0, bits - e)
    a = -((-x.numerator << j) // x.denominator)  # ceil(x · 2^j)
    return Fraction(a, 1 << j)


def discrete_gaussian_sigma2(sigma: Any) -> Fraction:
    """The variance parameter ``σ²`` (record counts squared) the discrete Gaussian sampler uses for
    noise scale ``sigma``: ``sigma²`` rounded up to a dyadic rational with ≥ 24 significant bits
    (exactly ``sigma²`` for floats like 3.0 or 0.5; relative increase below 2^-23 otherwise).
    ``sigma`` may be a float, int or :class:`~fractions.Fraction`."""
    return _dyadic_ceil(_fraction(sigma, "sigma") ** 2)


def discrete_laplace_scale(scale: Any) -> Fraction:
    """The scale ``τ`` (record counts) the discrete Laplace sampler uses for ``scale``: rounded up
    to a dyadic rational with ≥ 24 significant bits (exact for dyadic floats)."""
    return _dyadic_ceil(_fraction(scale, "scale"))


def discrete_gaussian_pmf(sigma: Any, x: Any) -> np.ndarray:
    """``Pr[N_Z(0, σ²) = x]`` (float64) for the ``σ²`` of :func:`discrete_gaussian_sigma2`; the
    normaliser is summed over ``|k| ≤ 40σ + 50`` (the rest is below 1e-300)."""
    s2 = float(discrete_gaussian_sigma2(sigma))
    m = int(40 * math.sqrt(s2)) + 50
    k = np.arange(-m, m + 1, dtype=np.float64)
    z = np.exp(-(k * k) / (2.0 * s2)).sum()
    x = np.asarray(x, dtype=np.float64)
    return np.exp(-(x * x) / (2.0 * s2)) / z


def discrete_gaussian_variance(sigma: Any) -> float:
    """Variance of ``N_Z(0, σ²)`` (record counts squared) by summing the pmf, for the ``σ²`` of
    :func:`discrete_gaussian_sigma2`; strictly below that ``σ²`` (CKS Cor. 9)."""
    s2 = float(discrete_gaussian_sigma2(sigma))
    m = int(40 * math.sqrt(s2)) + 50
    k = np.arange(-m, m + 1, dtype=np.float64)
    w = np.exp(-(k * k) / (2.0 * s2))
    return float((k * k * w).sum() / w.sum())


def discrete_laplace_pmf(scale: Any, x: Any) -> np.ndarray:
    """``Pr[Lap_Z(τ) = x] = (1−α)/(1+α)·α^|x|`` with ``α = exp(−1/τ)`` (float64), ``τ`` from
    :func:`discrete_laplace_scale`. Its variance is ``2α/(1−α)²``."""
    a = math.exp(-1.0 / float(discrete_laplace_scale(scale)))
    x = np.abs(np.asarray(x, dtype=np.float64))
    return (1.0 - a) / (1.0 + a) * np.power(a, x)


# --------------------------------------------------------------------------- scalar reference (Python ints)
def _randbelow(rng: np.random.Generator, n: int) -> int:
    """Uniform integer in ``[0, n)`` for any ``n ≥ 1`` (rejection on whole bytes beyond int64)."""
    if n < _LIMIT:
        return int(rng.integers(0, n))
    k = n.bit_length()
    nbytes = (k + 7) // 8
    while True:
        r = int.from_bytes(rng.bytes(nbytes), "little") >> (8 * nbytes - k)
        if r < n:
            return r


def _bern_exp_unit_scalar(rng: np.random.Generator, g: Fraction) -> bool:
    """Bernoulli(exp(−g)) for rational ``0 ≤ g ≤ 1`` (CKS Algorithm 1)."""
    k = 1
    while _randbelow(rng, g.denominator * k) < g.numerator:
        k += 1
    return k % 2 == 1


def _bern_exp_scalar(rng: np.random.Generator, g: Fraction) -> bool:
    """Bernoulli(exp(−g)) for rational ``g ≥ 0`` (CKS Algorithm 1, integer part one e^-1 coin at a time)."""
    whole = g.numerator // g.denominator
    for _ in range(whole):
        if not _bern_exp_unit_scalar(rng, Fraction(1)):
            return False
    return _bern_exp_unit_scalar(rng, g - whole)


def _dlap_scalar(rng: np.random.Generator, t: int, s: int) -> int:
    """One draw of the discrete Laplace with scale ``t/s`` (CKS Algorithm 2)."""
    while True:
        u = _randbelow(rng, t)
        if not _bern_exp_unit_scalar(rng, Fraction(u, t)):
            continue
        v = 0
        while _bern_exp_unit_scalar(rng, Fraction(1)):
            v += 1
        y = (u + t * v) // s
        neg = _randbelow(rng, 2) == 1
        if neg and y == 0:
            continue
        return -y if neg else y


def _dgauss_scalar(rng: np.random.Generator, sigma2: Fraction) -> int:
    """One draw of ``N_Z(0, sigma2)`` (CKS Algorithm 3: proposal ``Lap_Z(t)``, ``t = ⌊σ⌋ + 1``)."""
    t = math.isqrt(sigma2.numerator // sigma2.denominator) + 1
    while True:
        y = _dlap_scalar(rng, t, 1)
        if _bern_exp_scalar(rng, (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)):
            return y


# --------------------------------------------------------------------------- vectorized (int64 numpy)
def _bern_exp_unit(rng: np.random.Generator, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Bernoulli(exp(−num/den)) elementwise for ``0 ≤ num ≤ den`` (CKS Algorithm 1, in batches)."""
    k = np.ones(num.shape[0], dtype=np.int64)
    live = np.arange(num.shape[0])
    while live.size:
        kk = k[live]
        d = den[live]
        if np.any(d > _LIMIT // kk):  # needs k ≥ 2^10: probability below 1/1024!
            raise RuntimeError("discrete sampler: integer range exceeded")
        hit = rng.integers(0, d * kk) < num[live]
        live = live[hit]
        k[live] += 1
    return (k & 1).astype(bool)


def _bern_exp(rng: np.random.Generator, num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Bernoulli(exp(−num/den)) elementwise for ``num ≥ 0``: ``⌊num/den⌋`` coins of e^-1, then the rest."""
    whole, rem = np.divmod(num, den)
    out = np.ones(num.shape[0], dtype=bool)
    live = np.flatnonzero(whole > 0)
    j = 0
    while live.size:
        one = np.ones(live.size, dtype=np.int64)
        ok = _bern_exp_unit(rng, one, one)
        out[live[~ok]] = False
        live = live[ok]
        j += 1
        live = live[whole[live] > j]
    idx = np.flatnonzero(out)
    out[idx] = _bern_exp_unit(rng, rem[idx], den[idx])
    return out


def _geometric_e1(rng: np.random.Generator, n: int) -> np.ndarray:
    """Successes of Bernoulli(e^-1) before the first failure, ``n`` times."""
    v = np.zeros(n, dtype=np.int64)
    live = np.arange(n)
    while live.size:
        one = np.ones(live.size, dtype=np.int64)
        live = live[_bern_exp_unit(rng, one, one)]
        v[live] += 1
    return v


def _dlap_batch(rng: np.random.Generator, m: int, t: int, s: int) -> np.ndarray:
    """The accepted outcomes of ``m`` runs of CKS Algorithm 2's loop body (scale ``t/s``): i.i.d.
    discrete Laplace draws, about ``0.6 m`` of them."""
    u = rng.integers(0, t, size=m)
    u = u[_bern_exp_unit(rng, u, np.full(m, t, dtype=np.int64))]
    v = _geometric_e1(rng, u.size)
    if v.size and int(v.max()) > _LIMIT // t:
        raise RuntimeError("discrete sampler: integer range exceeded")
    y = (u + t * v) // s
    neg = rng.integers(0, 2, size=y.size).astype(bool)
    return np.where(neg, -y, y)[~(neg & (y == 0))]


def _collect(n: int, batch) -> np.ndarray:
    """First ``n`` of a stream of i.i.d. accepted draws (``batch(m)`` returns some from ``m`` tries)."""
    parts, need = [], n
    while need > 0:
        got = batch(int(need * 2.2) + 16)[:need]
        parts.append(got)
        need -= got.size
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _size(size: Any) -> tuple[tuple[int, ...], int]:
    shape = () if size is None else (tuple(int(s) for s in size) if np.ndim(size) else (int(size),))
    if any(s < 0 for s in shape):
        raise ValueError(f"size must be non-negative, got {size!r}")
    return shape, int(np.prod(shape, dtype=np.int64))


def discrete_laplace(scale: Any, size: Any = None, rng: np.random.Generator | None = None, *,
                     method: str = "vectorized") -> np.ndarray | int:
    """Exact i.i.d. draws of ``Lap_Z(τ)``, ``Pr[x] ∝ exp(−|x|/τ)`` on the integers (int64 array of
    shape ``size``, or an int when ``size`` is None). ``scale`` τ is in the units of the values noised
    (record counts); it is used as :func:`discrete_laplace_scale` (rounded up). Drawing noise costs
    no privacy by itself: :func:`discrete_laplace_mechanism` charges ``Δ₁/τ``-DP."""
    rng = np.random.default_rng() if rng is None else rng
    tau = discrete_laplace_scale(scale)
    shape, n = _size(size)
    t, s = tau.numerator, tau.denominator
    if method == "reference" or t >= _SMALL or s >= _LIMIT:
        out = np.array([_dlap_scalar(rng, t, s) for _ in range(n)], dtype=np.int64)
    elif method == "vectorized":
        out = _collect(n, lambda m: _dlap_batch(rng, m, t, s))
    else:
        raise ValueError(f"method must be 'vectorized' or 'reference', got {method!r}")
    return int(out[0]) if size is None else out.reshape(shape)


def discrete_gaussian(sigma: Any, size: Any = None, rng: np.random.Generator | None = None, *,
                      method: str = "vectorized") -> np.ndarray | int:
    """Exact i.i.d. draws of the discrete Gaussian ``N_Z(0, σ²)`` (int64 array of shape ``size``, or
    an int when ``size`` is None). ``sigma`` is in the units of the values noised (record counts);
    the variance parameter used is :func:`discrete_gaussian_sigma2` (rounded up). The variance of
    the output is :func:`discrete_gaussian_variance`, slightly below ``σ²``. Drawing noise costs no
    privacy by itself: :func:`discrete_gaussian_mechanism` charges ``Δ₂²/(2σ²)`` zCDP.

    ``method="vectorized"`` (default): batches of rejection from a discrete Laplace in int64 numpy
    arrays; ``"reference"``: CKS's scalar algorithm on Python integers (slow; for cross-checks).
    """
    rng = np.random.default_rng() if rng is None else rng
    s2 = discrete_gaussian_sigma2(sigma)
    shape, n = _size(size)
    if method not in ("vectorized", "reference"):
        raise ValueError(f"method must be 'vectorized' or 'reference', got {method!r}")
    a, b = s2.numerator, s2.denominator
    # rejection shift c = p/q ≈ σ with qσ ≥ 16; proposal Lap_Z(σ²/c) = Lap_Z(t/s); accept with
    # probability exp(−(|y| − c)²/(2σ²)) = exp(−num/den), num = b(q|y| − p)², den = 2aq²
    q = 1
    while q * q * a < 256 * b:
        q *= 2
    p = math.isqrt(a * q * q // b)
    t, s, den = a * q, b * p, 2 * a * q * q
    if method == "reference" or t >= _SMALL or den >= _SMALL or s >= _LIMIT:
        out = np.array([_dgauss_scalar(rng, s2) for _ in range(n)], dtype=np.int64)
        return int(out[0]) if size is None else out.reshape(shape)
    ylim = (math.isqrt(_LIMIT // b) - p) // q  # |y| ≤ ylim keeps num below 2^62

    def batch(m: int) -> np.ndarray:
        y = _dlap_batch(rng, m, t, s)
        ay = np.abs(y)
        acc = np.zeros(y.size, dtype=bool)
        fits = ay <= ylim
        d = q * ay[fits] - p
        acc[fits] = _bern_exp(rng, b * d * d, np.full(d.size, den, dtype=np.int64))
        for i in np.flatnonzero(~fits):  # far tail: exact on Python integers
            acc[i] = _bern_exp_scalar(rng, Fraction(b * (q * int(ay[i]) - p) ** 2, den))
        return y[acc]

    out = _collect(n, batch)
    return int(out[0]) if size is None else out.reshape(shape)


# --------------------------------------------------------------------------- mechanisms
NOISES = ("continuous", "discrete")


def check_noise(noise: str) -> str:
    """Validate a noise kind: ``"continuous"`` (float Gaussian/Laplace) or ``"discrete"`` (exact
    discrete Gaussian/Laplace on integer-valued releases)."""
    if noise not in NOISES:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    return noise


def is_integral(values: Any) -> bool:
    """Whether every entry of ``values`` is a finite integer (integer dtype, or floats with no
    fractional part and below 2^53 in magnitude, where float64 holds integers exactly)."""
    x = np.asarray(values)
    if x.dtype.kind in "iub":
        return True
    if x.dtype.kind != "f":
        return False
    return bool(np.all(np.isfinite(x)) and np.all(np.abs(x) < 2.0**53) and np.all(np.floor(x) == x))


def _integer_values(values: Any, what: str) -> np.ndarray:
    # integer noise on a non-integer value would publish its fractional part exactly
    if not is_integral(values):
        raise ValueError(f"discrete noise needs integer values ({what or 'release'} has non-integer "
                         "entries, e.g. weighted counts): use continuous noise for it")
    return np.asarray(values).astype(np.int64)


def discrete_gaussian_mechanism(accountant: Accountant, values: Any, sigma: float, l2_sensitivity: float,
                                rng: np.random.Generator, what: str = "", **note: str) -> np.ndarray:
    """Release integer ``values + N_Z(0, σ²)`` i.i.d. per entry (float64 holding integers, same
    shape) at ``l2_sensitivity²/(2σ²)`` zCDP, the same cost as the continuous Gaussian (CKS 2020,
    Thm 4 and Thm 14 for vectors; the ``σ²`` actually used is rounded up, so the charge is an upper
    bound). ``values`` must be integers (record counts); non-integer values raise ``ValueError``.
    Charges first (mechanism ``"discrete_gaussian"``, params ``sigma``, ``l2_sensitivity``).
    """
    x = _integer_values(values, what)
    rho = gaussian_rho(sigma, l2_sensitivity)
    if rho > 0:
        discrete_gaussian_sigma2(sigma)  # validate before charging
    accountant.charge(rho, what, "discrete_gaussian", sigma=float(sigma), l2_sensitivity=float(l2_sensitivity),
                      **note)
    if rho == 0.0:
        return x.astype(np.float64)
    return (x + discrete_gaussian(sigma, x.shape, rng)).astype(np.float64)


def discrete_laplace_mechanism(accountant: Accountant, values: Any, scale: float, l1_sensitivity: float,
                               rng: np.random.Generator, what: str = "") -> np.ndarray:
    """Release integer ``values + Lap_Z(scale)`` i.i.d. per entry (float64 holding integers, same
    shape): pure ``epsilon = l1_sensitivity/scale`` DP, charged as ``epsilon²/2`` zCDP (mechanism
    ``"discrete_laplace"``, params ``epsilon``, ``l1_sensitivity``, ``scale``). Integer ``values``
    only (``ValueError`` otherwise)."""
    x = _integer_values(values, what)
    d, b = float(l1_sensitivity), float(scale)
    if not (math.isfinite(d) and d >= 0 and math.isfinite(b) and b >= 0):
        raise ValueError(f"l1_sensitivity and scale must be finite and >= 0, got {l1_sensitivity!r}, {scale!r}")
    if d > 0 and b == 0:
        raise ValueError("scale must be > 0 when l1_sensitivity > 0 (noiseless release is not private)")
    eps = d / b if d > 0 else 0.0
    accountant.charge(eps * eps / 2.0, what, "discrete_laplace", epsilon=eps, l1_sensitivity=d, scale=b)
    if eps == 0.0:
        return x.astype(np.float64)
    return (x + discrete_laplace(b, x.shape, rng)).astype(np.float64)
