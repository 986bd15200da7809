"""zCDP <-> (epsilon, delta)-DP conversions (SPEC §1.5).

Two families are provided:

* ``cdp_*``: the exact Canonne–Kamath–Steinke (2020) bound
  ``delta(rho, eps) = inf_{a>1} exp((a-1)(a*rho - eps)) / (a-1) * (1 - 1/a)^a``,
  evaluated with the bisection recipe of SPEC §1.5 (the recipe of
  ``private-pgm``'s ``cdp2adp.py``). Every bisection is run until the bracket
  stops shrinking (at most 1000 halvings) and returns the conservative end.
* ``simple_*``: the Bun–Steinke (2016, Prop. 1.3) bound
  ``eps = rho + 2*sqrt(rho*ln(1/delta))``, looser but closed form.

Units: ``rho`` is the zCDP parameter (nats), ``eps`` the DP epsilon (nats),
``delta`` a probability in (0, 1). Pure DP (``delta = 0``) and ``delta >= 1``
are rejected with :class:`ValueError` (SPEC §1.5 [DEC]).
"""

from __future__ import annotations

import math

__all__ = [
    "cdp_delta",
    "cdp_eps",
    "cdp_rho",
    "simple_delta",
    "simple_eps",
    "simple_rho",
]

_MAX_ITER = 1000
_ALPHA_MIN = 1.01


# --------------------------------------------------------------------------- validation
def _check_rho(rho: float) -> float:
    try:
        r = float(rho)
    except (TypeError, ValueError):
        raise ValueError(f"rho must be a real number, got {rho!r}") from None
    if not math.isfinite(r) or r < 0:
        raise ValueError(f"rho must be a finite number >= 0 (zCDP budget), got {rho!r}")
    return r


def _check_eps(eps: float) -> float:
    try:
        e = float(eps)
    except (TypeError, ValueError):
        raise ValueError(f"epsilon must be a real number, got {eps!r}") from None
    if not math.isfinite(e) or e <= 0:
        raise ValueError(f"epsilon must be a finite number > 0, got {eps!r}")
    return e


def _check_delta(delta: float) -> float:
    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"delta must be a real number, got {delta!r}") from None
    if not math.isfinite(d) or d <= 0 or d >= 1:
        raise ValueError(
            f"delta must lie strictly between 0 and 1, got {delta!r} "
            "(pure DP, delta = 0, cannot be obtained from zCDP; pass rho directly instead)"
        )
    return d


# --------------------------------------------------------------------------- CKS bound
def _cks_delta(rho: float, eps: float) -> float:
    """Unchecked CKS delta for ``rho >= 0``, ``eps >= 0``."""
    if rho == 0.0:
        return 0.0
    lo, hi = _ALPHA_MIN, (eps + 1.0) / (2.0 * rho) + 2.0
    alpha = 0.5 * (lo + hi)
    for _ in range(_MAX_ITER):
        alpha = 0.5 * (lo + hi)
        if alpha <= lo or alpha >= hi:  # bracket no longer shrinks
            break
        deriv = (2.0 * alpha - 1.0) * rho - eps + math.log1p(-1.0 / alpha)
        if deriv < 0:
            lo = alpha
        else:
            hi = alpha
    log_delta = (alpha - 1.0) * (alpha * rho - eps) + alpha * math.log1p(-1.0 / alpha) - math.log(alpha - 1.0)
    if log_delta >= 0.0:
        return 1.0
    return min(1.0, math.exp(log_delta))


def cdp_delta(rho: float, eps: float) -> float:
    """Smallest delta such that ``rho``-zCDP implies ``(eps, delta)``-DP (CKS 2020).

    ``rho >= 0`` (zCDP), ``eps > 0``. Returns a probability in [0, 1]; 0 when ``rho == 0``.
    Any alpha > 1 gives a valid bound, so numerical slack only makes delta larger.
    """
    return _cks_delta(_check_rho(rho), _check_eps(eps))


def cdp_eps(rho: float, delta: float) -> float:
    """Smallest epsilon such that ``rho``-zCDP implies ``(epsilon, delta)``-DP (CKS 2020).

    Bisection on ``eps in [0, rho + 2*sqrt(rho*ln(1/delta))]`` keeping
    ``cdp_delta(rho, eps_hi) <= delta``; returns ``eps_hi`` (conservative). 0 when ``rho == 0``.
    """
    rho = _check_rho(rho)
    delta = _check_delta(delta)
    if rho == 0.0:
        return 0.0
    lo = 0.0
    hi = rho + 2.0 * math.sqrt(rho * -math.log(delta))
    while _cks_delta(rho, hi) > delta:  # safety net; never triggers for the CKS bound
        if not math.isfinite(hi):
            raise ValueError(f"no finite epsilon for rho={rho!r} at delta={delta!r}")
        lo, hi = hi, 2.0 * hi
    for _ in range(_MAX_ITER):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _cks_delta(rho, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def cdp_rho(eps: float, delta: float) -> float:
    """Largest zCDP ``rho`` such that ``rho``-zCDP implies ``(eps, delta)``-DP (CKS 2020).

    Bisection on ``rho in [0, eps + 1]`` keeping ``cdp_delta(rho_lo, eps) <= delta``; returns
    ``rho_lo`` (the conservative end). This is what mechanisms call to turn (eps, delta) into a budget.
    """
    eps = _check_eps(eps)
    delta = _check_delta(delta)
    lo, hi = 0.0, eps + 1.0
    while _cks_delta(hi, eps) <= delta:  # safety net: make sure hi violates the target
        if not math.isfinite(hi):
            raise ValueError(f"no finite rho for eps={eps!r} at delta={delta!r}")
        lo, hi = hi, 2.0 * hi
    for _ in range(_MAX_ITER):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _cks_delta(mid, eps) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


# --------------------------------------------------------------------------- simple bound
def simple_delta(rho: float, eps: float) -> float:
    """Bun–Steinke delta: ``exp(-(eps - rho)^2 / (4 rho))`` for ``eps >= rho``, else 1; 0 when ``rho == 0``."""
    rho = _check_rho(rho)
    eps = _check_eps(eps)
    if rho == 0.0:
        return 0.0
    if eps < rho:
        return 1.0
    return math.exp(-((eps - rho) ** 2) / (4.0 * rho))


def simple_eps(rho: float, delta: float) -> float:
    """Bun–Steinke epsilon: ``rho + 2*sqrt(rho*ln(1/delta))``."""
    rho = _check_rho(rho)
    delta = _check_delta(delta)
    return rho + 2.0 * math.sqrt(rho * -math.log(delta))


def simple_rho(eps: float, delta: float) -> float:
    """Inverse of :func:`simple_eps`: ``(sqrt(eps + ln(1/delta)) - sqrt(ln(1/delta)))^2``."""
    eps = _check_eps(eps)
    delta = _check_delta(delta)
    L = -math.log(delta)
    # (sqrt(e+L) - sqrt(L))^2 written without cancellation: e^2 / (sqrt(e+L) + sqrt(L))^2
    return eps * eps / (math.sqrt(eps + L) + math.sqrt(L)) ** 2
