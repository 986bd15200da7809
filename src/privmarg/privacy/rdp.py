"""DP-SGD's subsampled Gaussian steps on the zCDP ledger, through Rényi DP (SPEC §1.6, §10.7).

A run's ledger is zCDP: every charge has a ``rho``. DP-SGD (``T`` steps of a Gaussian on the sum of
per-record gradients clipped to norm ``C``, each over a random batch) is not ``rho``-zCDP for a
useful ``rho``: its privacy comes from subsampling, which only an RDP (or PLD) accountant sees.
So a DP-SGD phase is accounted in RDP and *converted back* onto the ledger:

* the zCDP charges before it sum to ``rho_before``; ``rho``-zCDP is ``(α, αρ)``-RDP for every α,
  so the run's RDP curve is ``α·rho_before + ε_SGM(α)``, with ``ε_SGM`` the subsampled Gaussian's
  curve from dp-accounting's :class:`~dp_accounting.rdp.RdpAccountant` (Mironov–Talwar–Zhang 2019
  for Poisson sampling; Wang–Balle–Kasiviswanathan 2019 for fixed-size batches without
  replacement), on the orders :func:`orders_for`, converted to ``ε`` once at the run's ``δ``
  (the accountant's conversion, Canonne–Kamath–Steinke 2020 / Asoodeh et al. 2020);
* the phase's ledger entry (mechanism ``"subsampled_gaussian"``) carries its *zCDP equivalent at
  that δ*: ``rho = cdp_rho(ε, δ) − rho_before``, i.e. the zCDP that, added to the charges before
  it, gives the same ``(ε, δ)``. Its parameters (``noise_multiplier``, ``sample_rate`` or
  ``batch_size``/``population``, ``steps``, ``delta``, ``rho_before``, ``orders``) recompute it
  (:func:`recompute_rho <privmarg.privacy.ledger.recompute_rho>`). So the ledger still sums to
  ``rho_spent`` and ``cdp_eps(rho_spent, δ)`` is the composed RDP ε at the run's δ.

That equivalence holds at the run's δ and for the charges before the phase only, hence two rules
kept by the :class:`~privmarg.privacy.Accountant`: a DP-SGD phase is the run's last charge, and
``epsilon_spent(δ')`` of a ledger with one composes in RDP again (right at any δ').

Neighbouring relations: under add/remove, batches are Poisson samples at rate ``q`` (which must not
depend on the private ``N``: callers use a released noisy count) and the sum of clipped gradients
has L2 sensitivity ``C``; under replace-one (``N`` public), batches are ``B`` records drawn without
replacement and the sensitivity is ``2C``. ``noise_multiplier`` ``z`` is always relative to that
sensitivity: the noise std is ``z·C`` (add/remove) or ``z·2C`` (replace-one).

Needs the optional ``dp-accounting`` package (the ``deep`` extra).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Sequence

from .conversions import cdp_eps, cdp_rho
from .sensitivity import check_neighbour

__all__ = ["ORDERS", "ORDERS_WOR", "orders_for", "SGM", "sgm_l2", "composed_epsilon", "rho_equivalent", "calibrate_noise_multiplier"]

SGM = "subsampled_gaussian"
# RDP orders (the conversion takes the best): dp-accounting's default grid for Poisson sampling
# (add/remove); for sampling without replacement (replace-one) integers and a sparse top, as the
# WBK bound costs O(α²) per order and interpolates between integers anyway
ORDERS: tuple[float, ...] = tuple([1 + x / 10 for x in range(1, 100)] + list(range(11, 64))
                                  + [64, 80, 96, 128, 160, 192, 256, 384, 512])
ORDERS_WOR: tuple[float, ...] = tuple([1.5] + list(range(2, 33)) + [40, 48, 56, 64, 96, 128, 192, 256])


def orders_for(neighbour: str) -> tuple[float, ...]:
    """The RDP orders a DP-SGD phase is accounted on under ``neighbour``."""
    return ORDERS if check_neighbour(neighbour) == "add_remove" else ORDERS_WOR


def _dp():
    try:
        import dp_accounting
    except ImportError:  # pragma: no cover - the deep extra pins it
        raise ImportError("accounting DP-SGD needs dp-accounting: pip install dp-accounting==0.6.0 "
                          "(or the privmarg[deep] extra)") from None
    return dp_accounting


def sgm_l2(neighbour: str, clip: float) -> float:
    """L2 sensitivity of a sum of per-record vectors clipped to norm ``clip``: ``clip`` (add/remove)
    or ``2·clip`` (replace-one)."""
    return float(clip) if check_neighbour(neighbour) == "add_remove" else 2.0 * float(clip)


def _event(dp, noise_multiplier: float, steps: int, neighbour: str, sample_rate: float | None,
           batch_size: int | None, population: int | None):
    g = dp.GaussianDpEvent(float(noise_multiplier))
    if neighbour == "add_remove":
        if sample_rate is None or not 0 < sample_rate <= 1:
            raise ValueError(f"add/remove DP-SGD needs a Poisson sample_rate in (0, 1], got {sample_rate}")
        one = dp.PoissonSampledDpEvent(float(sample_rate), g)
    else:
        if batch_size is None or population is None or not 1 <= batch_size <= population:
            raise ValueError(f"replace-one DP-SGD needs 1 <= batch_size <= population, got {batch_size}, {population}")
        one = dp.SampledWithoutReplacementDpEvent(int(population), int(batch_size), g)
    return dp.SelfComposedDpEvent(one, int(steps))


def composed_epsilon(rho_before: float, delta: float, neighbour: str, phases: Sequence[dict],
                     orders: Sequence[float] | None = None) -> float:
    """ε at ``delta`` of ``rho_before``-zCDP composed with DP-SGD ``phases`` (dicts with
    ``noise_multiplier``, ``steps`` and ``sample_rate`` (add/remove) or ``batch_size`` and
    ``population`` (replace-one)), by dp-accounting's RDP accountant on ``orders`` (default
    :func:`orders_for` the relation). Pure function of
    public numbers, memoised (the bound for sampling without replacement is slow at high orders)."""
    key = tuple((float(p["noise_multiplier"]), int(p["steps"]), p.get("sample_rate"), p.get("batch_size"),
                 p.get("population")) for p in phases)
    return _composed(float(rho_before), float(delta), check_neighbour(neighbour), key,
                     tuple(float(a) for a in (orders_for(neighbour) if orders is None else orders)))


@functools.lru_cache(maxsize=4096)
def _composed(rho_before: float, delta: float, nb: str, phases: tuple, orders: tuple) -> float:
    dp = _dp()
    from dp_accounting.rdp import RdpAccountant

    rel = dp.NeighboringRelation.ADD_OR_REMOVE_ONE if nb == "add_remove" else dp.NeighboringRelation.REPLACE_ONE
    acc = RdpAccountant(list(orders), rel)
    log = logging.getLogger("absl")  # an order whose series does not converge is dropped (a looser bound,
    level = log.level                # still valid); the accountant says so at WARNING, once per order
    log.setLevel(logging.ERROR)
    try:
        if rho_before > 0:
            acc.compose(dp.ZCDpEvent(rho_before))
        for z, steps, q, b, pop in phases:
            acc.compose(_event(dp, z, steps, nb, q, b, pop))
        return float(acc.get_epsilon(delta))
    finally:
        log.setLevel(level)


def rho_equivalent(entry: dict) -> float:
    """The ledger ``rho`` of a DP-SGD entry, from its parameters alone: ``cdp_rho(ε, δ) − rho_before``,
    ε being the RDP composition of ``rho_before`` and the phase at the entry's ``delta``."""
    eps = composed_epsilon(entry["rho_before"], entry["delta"], entry["neighbour"], [entry], entry.get("orders"))
    return max(0.0, cdp_rho(eps, entry["delta"]) - float(entry["rho_before"]))


def calibrate_noise_multiplier(rho: float, rho_before: float, delta: float, neighbour: str, steps: int, *,
                               sample_rate: float | None = None, batch_size: int | None = None,
                               population: int | None = None, z_min: float = 0.5, z_max: float = 1e4) -> float:
    """The smallest noise multiplier ``z`` (up to 1e-12 relative) whose DP-SGD phase, after
    ``rho_before`` zCDP, has a zCDP equivalent (:func:`rho_equivalent`) of at most ``rho``: the
    target is the ε of ``rho_before + rho`` zCDP at ``delta``, so the run's (ε, δ) is never
    exceeded. Data-independent (public parameters only). ``z`` is kept in ``[z_min, z_max]``."""
    return _calibrate(float(rho), float(rho_before), float(delta), check_neighbour(neighbour), int(steps),
                      sample_rate, batch_size, population, float(z_min), float(z_max))


@functools.lru_cache(maxsize=256)
def _calibrate(rho, rho_before, delta, nb, steps, sample_rate, batch_size, population, z_min, z_max) -> float:
    from scipy.optimize import brentq

    if not rho > 0:
        raise ValueError(f"a DP-SGD phase needs a positive budget, got rho={rho}")
    target = cdp_eps(rho_before + rho, delta)
    kw = dict(steps=int(steps), sample_rate=sample_rate, batch_size=batch_size, population=population)

    def excess(logz: float) -> float:
        return composed_epsilon(rho_before, delta, nb, [dict(noise_multiplier=math.exp(logz), **kw)]) - target

    lo, hi = math.log(z_min), math.log(z_max)
    if excess(hi) > 0:
        raise ValueError(f"the budget rho={rho:.3g} is too small for {steps} DP-SGD steps (noise multiplier "
                         f"{z_max:g} would not do): train for fewer steps or spend more")
    if excess(lo) <= 0:
        return z_min  # more budget than the least noise we allow needs: spend less
    logz = brentq(excess, lo, hi, xtol=1e-13, rtol=1e-13)
    z = math.exp(logz)
    while excess(math.log(z)) > 0:  # the safe side of the root
        z *= 1 + 1e-12
    return z
