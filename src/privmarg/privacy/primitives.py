"""Privacy primitives: the only functions that touch private data (SPEC §1.2–1.4, §1.6–1.7).

Each mechanism charges its zCDP cost to an :class:`~privmarg.privacy.accountant.Accountant`
*before* drawing any randomness or releasing anything; if the charge is refused the call raises
:class:`~privmarg.privacy.accountant.BudgetExceededError` and the generator is left untouched.
The ledger entry stores the calibration parameters so the cost can be recomputed:

=================  ==========================  ===============================
mechanism          ledger params               rho (zCDP)
=================  ==========================  ===============================
``gaussian``       sigma, l2_sensitivity       l2_sensitivity^2 / (2 sigma^2)
``exponential``    epsilon, sensitivity        epsilon^2 / 8
``laplace``        epsilon, l1_sensitivity,    epsilon^2 / 2, epsilon = l1/scale
                   scale
``gumbel_top_q``   q, beta, sensitivity        q sensitivity^2 / (2 beta^2)
=================  ==========================  ===============================
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from .accountant import Accountant

__all__ = [
    "gaussian_sigma",
    "gaussian_rho",
    "gaussian_mechanism",
    "exponential_probabilities",
    "exponential_mechanism",
    "exponential_mechanism_fitting",
    "exponential_mechanism_lazy",
    "exponential_epsilon",
    "laplace_mechanism",
    "gumbel_top_q",
    "noise_rngs",
]


def _nonneg(name: str, x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {x!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    return v


def _pos(name: str, x: Any) -> float:
    v = _nonneg(name, x)
    if v == 0:
        raise ValueError(f"{name} must be > 0, got {x!r}")
    return v


def _scores(scores: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """Validate a 1-D score vector; return it and its finite mask (``None`` when all finite)."""
    q = np.asarray(scores, dtype=np.float64)
    if q.ndim != 1 or q.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array, got shape {q.shape}")
    finite = np.isfinite(q)
    if finite.all():
        return q, None
    if np.isnan(q).any() or (q == np.inf).any():
        raise ValueError("scores must not contain NaN or +inf (-inf marks an excluded candidate)")
    if not finite.any():
        raise ValueError("all scores are -inf: no candidate can be selected")
    return q, finite


def _em_logits(scores: Any, epsilon: float, sensitivity: float) -> np.ndarray:
    """Unnormalised EM log-probabilities ``(epsilon/(2 sensitivity)) * (q - max q)``; -inf stays -inf."""
    q, finite = _scores(scores)
    eps = _nonneg("epsilon", epsilon)
    delta = _pos("sensitivity", sensitivity)
    c = eps / (2.0 * delta)
    if finite is None:
        return c * (q - q.max())
    if c == 0.0:
        return np.where(finite, 0.0, -np.inf)
    return c * (q - q[finite].max())  # -inf entries map to -inf


# --------------------------------------------------------------------------- Gaussian
def gaussian_sigma(rho: float, l2_sensitivity: float) -> float:
    """Noise std ``sigma = l2_sensitivity / sqrt(2 rho)`` that makes the Gaussian mechanism ``rho``-zCDP."""
    rho = _pos("rho", rho)
    return _nonneg("l2_sensitivity", l2_sensitivity) / math.sqrt(2.0 * rho)


def gaussian_rho(sigma: float, l2_sensitivity: float) -> float:
    """zCDP cost ``l2_sensitivity^2 / (2 sigma^2)`` of Gaussian noise with std ``sigma``."""
    d = _nonneg("l2_sensitivity", l2_sensitivity)
    s = _nonneg("sigma", sigma)
    if d == 0.0:
        return 0.0
    if s == 0.0:
        raise ValueError("sigma must be > 0 when l2_sensitivity > 0 (noiseless release is not private)")
    return d * d / (2.0 * s * s)


def gaussian_mechanism(
    accountant: Accountant,
    values: Any,
    sigma: float,
    l2_sensitivity: float,
    rng: np.random.Generator,
    what: str = "",
    **note: str,
) -> np.ndarray:
    """Release ``values + N(0, sigma^2 I)`` (float64, same shape) at ``l2_sensitivity^2/(2 sigma^2)`` zCDP.

    ``l2_sensitivity`` is the L2 sensitivity of ``values`` as a function of the data. Charges first
    (mechanism ``"gaussian"``, params ``sigma``, ``l2_sensitivity`` and any ``note``, e.g. why the
    discrete Gaussian was not used), then draws the noise.
    """
    x = np.array(values, dtype=np.float64)  # copy: never alias the caller's data
    rho = gaussian_rho(sigma, l2_sensitivity)
    accountant.charge(rho, what, "gaussian", sigma=float(sigma), l2_sensitivity=float(l2_sensitivity), **note)
    return np.asarray(x + rng.normal(0.0, float(sigma), size=x.shape), dtype=np.float64)


# --------------------------------------------------------------------------- exponential
def exponential_epsilon(rho: float) -> float:
    """EM parameter ``epsilon = sqrt(8 rho)`` whose zCDP cost ``epsilon^2/8`` equals ``rho``."""
    return math.sqrt(8.0 * _nonneg("rho", rho))


def exponential_probabilities(scores: Any, epsilon: float, sensitivity: float) -> np.ndarray:
    """EM output distribution ``softmax((epsilon/(2 sensitivity)) * (q - max q))``.

    Higher score = more likely; ``-inf`` scores get probability 0. ``sensitivity`` (> 0) bounds the
    change of any single score between neighbouring datasets.
    """
    p = np.exp(_em_logits(scores, epsilon, sensitivity))
    return p / p.sum()


def exponential_mechanism(
    accountant: Accountant,
    scores: Any,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    what: str = "",
) -> int:
    """Sample an index with :func:`exponential_probabilities`; costs ``epsilon^2/8`` zCDP (``epsilon``-DP).

    Charges first (mechanism ``"exponential"``, params ``epsilon``, ``sensitivity``), then samples
    exactly by Gumbel-max: ``argmax(logits + Gumbel(0, 1))``.
    """
    z = _em_logits(scores, epsilon, sensitivity)
    eps = float(epsilon)
    accountant.charge(eps * eps / 8.0, what, "exponential", epsilon=eps, sensitivity=float(sensitivity))
    return int(np.argmax(z + rng.gumbel(size=z.shape)))


def exponential_mechanism_fitting(
    accountant: Accountant,
    scores: Any,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    fits: Callable[[int], bool],
    what: str = "",
) -> int | None:
    """The exponential mechanism over the indices ``i`` with ``fits(i)`` only, asking ``fits`` of a
    few: Gumbel noise is added to every logit and the indices are walked in descending order of
    noisy logit; the first that fits is ``argmax`` of the noisy logits over the fitting set, which is
    exactly Gumbel-max over that set. ``fits`` must be a public rule (it decides the candidate set;
    here it depends on the domain and on released cliques only). ``sensitivity`` must bound the
    score change of every fitting index (a maximum over a superset is fine). Costs ``epsilon^2/8``
    zCDP, charged once an index fits; returns None, charging nothing, when none fits.
    """
    z = _em_logits(scores, epsilon, sensitivity)
    noisy = z + rng.gumbel(size=z.shape)
    pick = None
    order = np.argsort(-noisy, kind="stable")
    for i in order[np.isfinite(noisy[order])]:  # -inf logits (probability 0) are never picked
        if fits(int(i)):
            pick = int(i)
            break
    if pick is None:
        return None
    eps = float(epsilon)
    accountant.charge(eps * eps / 8.0, what, "exponential", epsilon=eps, sensitivity=float(sensitivity))
    return pick


def exponential_mechanism_lazy(
    accountant: Accountant,
    upper: Any,
    exact: Callable[[np.ndarray], np.ndarray],
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    fits: Callable[[int], bool],
    what: str = "",
    first: int = 16,
) -> int | None:
    """:func:`exponential_mechanism_fitting` over scores asked for only where they can win.

    ``upper[i]`` bounds score ``i`` from above (``+inf``: no bound, ``-inf``: never picked);
    ``exact(indices)`` returns those indices' scores. Gumbel noise ``g`` is drawn for every index
    as there (the same draws from ``rng``); with ``c = ε/(2Δ)``, index ``i`` cannot be the noisy
    argmax once some fitting index has ``c·q + g`` at or above ``c·upper[i] + g[i]``, so its score
    is never asked for. The indices are asked in batches of descending ``c·upper + g`` (the first:
    every unbounded one and ``first`` more; then all still in reach), and the pick is the Gumbel-max
    over the fitting indices exactly, as if every score had been computed. **The bounds must be
    valid**: the pick is the exponential mechanism's (and private) only if no score exceeds its
    bound. A wrong bound on a score that is asked for is caught (every remaining score is then
    asked for); one on a score never asked for cannot be. Same charge: ``epsilon^2/8`` zCDP once an
    index fits; None, charging nothing, when none fits.
    """
    u = np.asarray(upper, dtype=np.float64)
    if u.ndim != 1 or u.size == 0:
        raise ValueError(f"upper must be a non-empty 1-D array, got shape {u.shape}")
    if np.isnan(u).any():
        raise ValueError("upper bounds must not be NaN")
    eps = _nonneg("epsilon", epsilon)
    c = eps / (2.0 * _pos("sensitivity", sensitivity))
    g = rng.gumbel(size=u.shape)
    with np.errstate(invalid="ignore"):  # c·inf with c = 0
        reach = np.where(np.isinf(u), u, c * u + g) if c > 0 else np.where(u == -np.inf, -np.inf, g)
    order = np.argsort(-reach, kind="stable")
    order = order[reach[order] > -np.inf]
    asked = np.zeros(u.shape, dtype=bool)
    best, pick, trusted = -np.inf, None, True
    unbounded = int(np.count_nonzero(reach[order] == np.inf))
    batch = order[:unbounded + max(1, int(first))]
    while batch.size:
        q = np.asarray(exact(batch), dtype=np.float64)
        if q.shape != batch.shape or np.isnan(q).any() or (q == np.inf).any():
            raise ValueError("exact scores must be finite or -inf, one per index asked")
        if trusted and (q > u[batch] + 1e-9 * np.maximum(1.0, np.abs(u[batch]))).any():
            trusted = False  # a bound was wrong: ask for every score left
        asked[batch] = True
        finite = q > -np.inf  # a −inf score is never picked (and 0·(−inf) at ε = 0 is not a number)
        noisy = np.full(q.shape, -np.inf)
        noisy[finite] = c * q[finite] + g[batch][finite]
        for j in np.argsort(-noisy, kind="stable"):
            if not noisy[j] > best:
                break
            if fits(int(batch[j])):
                best, pick = float(noisy[j]), int(batch[j])
                break
        batch = order[~asked[order]]
        if trusted:
            batch = batch[reach[batch] > best]
    if pick is None:
        return None
    accountant.charge(eps * eps / 8.0, what, "exponential", epsilon=eps, sensitivity=float(sensitivity))
    return pick


# --------------------------------------------------------------------------- Laplace
def laplace_mechanism(
    accountant: Accountant,
    values: Any,
    scale: float,
    l1_sensitivity: float,
    rng: np.random.Generator,
    what: str = "",
) -> np.ndarray:
    """Release ``values + Laplace(0, scale)`` noise (float64, same shape).

    Pure ``epsilon = l1_sensitivity / scale`` DP, charged as ``epsilon^2/2`` zCDP (SPEC §1.6;
    mechanism ``"laplace"``, params ``epsilon``, ``l1_sensitivity``, ``scale``).
    """
    x = np.array(values, dtype=np.float64)
    d = _nonneg("l1_sensitivity", l1_sensitivity)
    b = _nonneg("scale", scale)
    if d == 0.0:
        eps = 0.0
    elif b == 0.0:
        raise ValueError("scale must be > 0 when l1_sensitivity > 0 (noiseless release is not private)")
    else:
        eps = d / b
    accountant.charge(eps * eps / 2.0, what, "laplace", epsilon=eps, l1_sensitivity=d, scale=b)
    return np.asarray(x + rng.laplace(0.0, b, size=x.shape), dtype=np.float64)


# --------------------------------------------------------------------------- Gumbel top-q
def gumbel_top_q(
    accountant: Accountant,
    scores: Any,
    q: int,
    rho: float,
    sensitivity: float,
    rng: np.random.Generator,
    what: str = "",
) -> np.ndarray:
    """One-shot report-noisy-top-``q`` with Gumbel noise (SPEC §1.4); costs ``rho`` zCDP.

    Adds i.i.d. ``Gumbel(0, beta)`` with ``beta = sensitivity * sqrt(q / (2 rho))`` to ``scores`` and
    returns the indices of the ``q`` largest noisy scores, best first (int64 array). Equivalent to
    ``q`` peeling EM steps with ``epsilon = 2 sensitivity / beta``; ``-inf`` scores are never chosen.
    Charges first (mechanism ``"gumbel_top_q"``, params ``q``, ``beta``, ``sensitivity``;
    ``rho = q sensitivity^2 / (2 beta^2)``).
    """
    s, finite = _scores(scores)
    if isinstance(q, bool) or not isinstance(q, numbers.Integral) or q < 1:
        raise ValueError(f"q must be an integer >= 1, got {q!r}")
    q = int(q)
    n_ok = s.size if finite is None else int(finite.sum())
    if q > n_ok:
        raise ValueError(f"q={q} exceeds the number of selectable (finite-score) candidates {n_ok}")
    r = _pos("rho", rho)
    delta = _pos("sensitivity", sensitivity)
    beta = delta * math.sqrt(q / (2.0 * r))
    accountant.charge(r, what, "gumbel_top_q", q=q, beta=beta, sensitivity=delta)
    noisy = s + rng.gumbel(0.0, beta, size=s.shape)
    idx = np.argpartition(-noisy, q - 1)[:q] if q < s.size else np.arange(s.size)
    return idx[np.argsort(-noisy[idx], kind="stable")].astype(np.int64)


# --------------------------------------------------------------------------- randomness
def noise_rngs(seed: int | np.random.SeedSequence | None = None) -> tuple[np.random.Generator, np.random.Generator]:
    """Two independent generators ``(noise_rng, sample_rng)`` spawned from ``SeedSequence(seed)``.

    Use ``noise_rng`` for privacy mechanisms and ``sample_rng`` for data-independent sampling, so
    that changing one stream never perturbs the other. ``seed=None`` draws fresh OS entropy.
    """
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    a, b = ss.spawn(2)
    return np.random.default_rng(a), np.random.default_rng(b)
