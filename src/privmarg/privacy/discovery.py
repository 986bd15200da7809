"""DP discovery of frequent keys (category values nobody lists publicly): thresholded Gaussian counts.

The keys present in a table are not public, so no fixed-domain mechanism can release them. Here every
key present gets its count plus ``N(0, σ²)`` and only keys whose noisy count exceeds ``τ`` are
released. Neighbouring tables either share their key sets (then the counts differ by at most Δ₂ = 1,
add/remove, or √2, replace-one, and the release is ``Δ₂²/(2σ²)``-zCDP) or differ in keys whose count
is 1 on the side that has them: one key under add/remove, at most two under replace-one. Each is
released with probability ``δ₀ = P(1 + N(0, σ²) > τ)``; conditioned on none being released, both sides
release the same distribution (the shared keys' counts are ρ-zCDP-close). Each side is therefore a
mixture ``(1 − δ)·P + δ·P′`` with ``P`` and the other side's ``Q`` ρ-zCDP-close: ``δ``-approximate
``ρ``-zCDP (Bun & Steinke 2016, §8) with ``δ = keys_at_risk · δ₀`` (a union bound over the keys at
risk), which with later zCDP steps gives ``(ε, δ + δ_CKS(ρ_total, ε))``-DP.

``discrete=True``: the exact discrete Gaussian ``N_Z(0, σ²)`` on the integer counts (same ρ, CKS 2020)
and a half-integer threshold; ``δ₀`` is then the discrete Gaussian's tail, summed exactly.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from .accountant import Accountant
from .discrete import discrete_gaussian, discrete_gaussian_pmf, discrete_gaussian_sigma2
from .primitives import gaussian_rho

__all__ = ["keys_at_risk", "threshold_delta", "threshold_for", "gaussian_threshold"]


def keys_at_risk(neighbour: str) -> int:
    """Keys present in only one of two neighbouring tables: 1 (add/remove) or 2 (replace-one)."""
    return 1 if neighbour == "add_remove" else 2


def _discrete_tail(sigma: float, m: int) -> float:
    """``P(N_Z(0, σ²) ≥ m)`` for the σ² the discrete sampler uses (summed to 12σ past ``m``)."""
    s = math.sqrt(float(discrete_gaussian_sigma2(sigma)))
    start = max(int(m), -int(40 * s) - 50)
    z = np.arange(start, max(int(m), 0) + int(12 * s) + 50, dtype=np.float64)
    return float(min(1.0, discrete_gaussian_pmf(sigma, z).sum()))


def threshold_delta(sigma: float, threshold: float, keys: int, discrete: bool = False) -> float:
    """``keys · P(1 + Z > τ)``: the δ of releasing the keys whose noisy count exceeds ``τ``; ``Z`` is
    ``N(0, σ²)``, or ``N_Z(0, σ²)`` when ``discrete`` (then ``1 + Z > τ`` iff ``Z ≥ ⌊τ − 1⌋ + 1``)."""
    if discrete:
        return float(keys) * _discrete_tail(sigma, math.floor(float(threshold) - 1.0) + 1)
    return float(keys) * float(norm.sf((float(threshold) - 1.0) / float(sigma)))


def threshold_for(sigma: float, delta: float, keys: int, discrete: bool = False) -> float:
    """The threshold ``τ = 1 + σ·Φ̄⁻¹(δ/keys)`` (rows) at which :func:`threshold_delta` is ``delta``
    (rounded up so that it is at most ``delta``). ``discrete``: ``m + 1/2`` for the least integer
    ``m`` whose discrete tail ``keys·P(Z ≥ m)`` is at most ``delta``."""
    if not (0 < delta < 1):
        raise ValueError(f"key discovery needs a delta in (0, 1), got {delta!r}")
    tau = 1.0 + float(sigma) * float(norm.isf(float(delta) / keys))
    if discrete:
        m = math.ceil(tau - 1.0)
        while keys * _discrete_tail(sigma, m) > delta:
            m += 1
        while keys * _discrete_tail(sigma, m - 1) <= delta:
            m -= 1
        return m + 0.5
    while threshold_delta(sigma, tau, keys) > delta:  # floating point: never charge above ``delta``
        tau = float(np.nextafter(tau, math.inf)) + 1e-12 * abs(tau)
    return tau


def gaussian_threshold(accountant: Accountant, counts: np.ndarray, sigma: float, l2_sensitivity: float,
                       threshold: float, rng: np.random.Generator, what: str = "", *,
                       discrete: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the keys whose ``count + N(0, σ²)`` exceeds ``threshold``, and those noisy counts.

    ``counts``: the (private) count of every key present, in any order not revealed by the output
    (the caller maps indices back to keys and releases them as a set). Charges first:
    ``ρ = Δ₂²/(2σ²)`` with ``approx_delta = keys_at_risk·Φ̄((τ − 1)/σ)`` (mechanism
    ``"gaussian_threshold"``, params ``sigma``, ``l2_sensitivity``, ``threshold``, ``keys_at_risk``;
    :func:`~privmarg.privacy.recompute_rho` and :func:`~privmarg.privacy.recompute_delta` rederive
    both). ``discrete``: ``N_Z(0, σ²)`` noise on the integer counts (mechanism
    ``"discrete_gaussian_threshold"``, δ from its exact tail)."""
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"key discovery needs a positive finite sigma, got {sigma!r}")
    keys = keys_at_risk(accountant.neighbour)
    delta = threshold_delta(sigma, threshold, keys, discrete)
    x = np.asarray(counts, dtype=np.float64)
    if discrete and not np.all(x == np.round(x)):
        raise ValueError("discrete key discovery needs integer counts")
    accountant.charge(gaussian_rho(sigma, l2_sensitivity), what,
                      "discrete_gaussian_threshold" if discrete else "gaussian_threshold", approx_delta=delta,
                      sigma=float(sigma), l2_sensitivity=float(l2_sensitivity), threshold=float(threshold),
                      keys_at_risk=keys)
    if discrete:
        noisy = x + discrete_gaussian(sigma, x.shape, rng).astype(np.float64)
    else:
        noisy = x + rng.normal(0.0, float(sigma), size=x.shape)
    kept = np.flatnonzero(noisy > threshold)
    return kept, noisy[kept]
