"""What a release's guarantee means for one person in the data, from the ledger alone (no data).

Differential privacy bounds every test an attacker can run on the release. From the release's
privacy profile — the (ε, δ) pairs it satisfies, from ρ-zCDP by the CKS conversion, or from the
accountant's own conversion where a step is approximate or accounted in Rényi DP — three bounds
follow for any attacker, whatever they know besides:

- **membership inference**: a test "was this person in the data?" that wrongly accuses a
  non-member with probability ``fpr`` finds a member with probability at most
  ``min over (ε, δ) of min(1, e^ε·fpr + δ, 1 − e^−ε·(1 − δ − fpr))`` (the (ε, δ) trade-off curve,
  Kairouz, Oh & Viswanath 2015; Dong, Roth & Su 2022, f-DP);
- the **largest membership advantage** (true- minus false-positive rate, over all tests):
  ``min over (ε, δ) of (e^ε − 1 + 2δ)/(e^ε + 1)`` (the total-variation bound of (ε, δ)-DP);
- the **largest AUC** of a membership test: the area under that trade-off curve (an empirical
  attack's ROC lies below it);
- **attribute inference**: an attacker who would guess a person's sensitive value right with
  probability ``p`` without the release guesses it right with probability at most
  ``e^ε'·p + δ'`` with it, where (ε', δ') protect a change of that person's record: (ε, δ) under
  replace-one, (2ε, (1 + e^ε)·δ) under add/remove (a change is a removal and an addition).

These are upper bounds (the worst case over attackers and data); the actual risk of a given
attack is usually far lower. Post-processing of the ledger: no privacy cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .conversions import cdp_delta

FPRS = (0.001, 0.01, 0.1)  # false-positive rates the panel reports
WEAK_EPSILON = 10.0  # above this ε, the panel's bounds are close to no protection
BASELINES = (0.01, 0.1, 0.5)  # an attacker's success without the release (attribute inference)
_EPS_GRID = np.concatenate([[0.0], np.geomspace(1e-4, 200.0, 400)])
_DELTA_GRID = np.geomspace(1e-15, 0.5, 160)


@dataclass(frozen=True)
class RiskPanel:
    """The bounds of a release (see the module docstring); every number is a probability."""

    membership_tpr: dict[float, float]  # false-positive rate → largest true-positive rate
    max_advantage: float  # largest true- minus false-positive rate of a membership test
    attribute_success: dict[float, float]  # success without the release → largest success with it
    max_auc: float = 1.0  # largest area under a membership test's ROC curve

    def to_dict(self) -> dict:
        return {"membership_tpr_at_fpr": {f"{k:g}": v for k, v in self.membership_tpr.items()},
                "max_membership_advantage": self.max_advantage, "max_membership_auc": self.max_auc,
                "attribute_success_from_baseline": {f"{k:g}": v for k, v in self.attribute_success.items()},
                "note": "worst-case upper bounds over every attacker, from the privacy ledger alone"}


def zcdp_profile(rho: float) -> np.ndarray:
    """(ε, δ) pairs that ``rho``-zCDP implies (CKS), as rows of a 2-column array."""
    if rho == 0:
        return np.array([[0.0, 0.0]])
    return np.array([[e, cdp_delta(rho, e) if e > 0 else 1.0] for e in _EPS_GRID])


def accountant_profile(accountant) -> np.ndarray:
    """(ε, δ) pairs of what ``accountant`` has spent. Plain zCDP ledgers use :func:`zcdp_profile`;
    ledgers with approximate steps or a DP-SGD phase use the accountant's own conversion over a grid
    of δ (each pair is a guarantee it states, so any of them bounds the risk)."""
    if accountant.rho_spent == 0 and not accountant.delta_spent:
        return np.array([[0.0, 0.0]])
    ledger = accountant.ledger if hasattr(accountant, "ledger") else []
    plain = not accountant.delta_spent and not (ledger and ledger[-1].mechanism == "subsampled_gaussian")
    if plain:
        return zcdp_profile(accountant.rho_spent)
    rows = []
    for d in _DELTA_GRID:
        if d <= accountant.delta_spent:
            continue
        try:
            rows.append([accountant.epsilon_spent(float(d)), float(d)])
        except (ValueError, ArithmeticError):
            continue
    return np.array(rows) if rows else np.array([[math.inf, 0.0]])


def membership_tpr(profile: np.ndarray, fpr: float) -> float:
    eps, delta = profile[:, 0], profile[:, 1]
    with np.errstate(over="ignore"):
        a = np.exp(eps) * fpr + delta
        b = 1.0 - np.exp(-eps) * (1.0 - delta - fpr)
    return float(min(1.0, np.min(np.minimum(a, b))))


def max_auc(profile: np.ndarray, points: int = 2000) -> float:
    """The largest AUC of any membership test: the area under the trade-off curve
    (:func:`membership_tpr` at every false-positive rate), as an upper Riemann sum (the curve is
    increasing, so the sum is an upper bound; ``points`` steps)."""
    fpr = np.linspace(0.0, 1.0, points + 1)[1:]
    eps, delta = profile[:, 0][None, :], profile[:, 1][None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        a = np.exp(eps) * fpr[:, None] + delta
        b = 1.0 - np.exp(-eps) * (1.0 - delta - fpr[:, None])
    tpr = np.minimum(1.0, np.nanmin(np.minimum(a, b), axis=1))
    return float(min(1.0, tpr.sum() / points))


def max_advantage(profile: np.ndarray) -> float:
    eps, delta = profile[:, 0], profile[:, 1]
    with np.errstate(over="ignore", invalid="ignore"):
        adv = np.where(np.isfinite(eps), (np.expm1(eps) + 2.0 * delta) / (np.exp(eps) + 1.0), 1.0)
    return float(min(1.0, np.nanmin(adv)))


def attribute_success(profile: np.ndarray, baseline: float, neighbour: str) -> float:
    eps, delta = profile[:, 0], profile[:, 1]
    if neighbour == "add_remove":  # group privacy for two steps
        eps, delta = 2.0 * eps, (1.0 + np.exp(eps)) * delta
    with np.errstate(over="ignore"):
        return float(min(1.0, np.min(np.exp(eps) * baseline + delta)))


def panel(profile: np.ndarray, neighbour: str) -> RiskPanel:
    """The panel of a privacy profile ((ε, δ) rows) under ``neighbour``."""
    return RiskPanel({f: membership_tpr(profile, f) for f in FPRS}, max_advantage(profile),
                     {b: attribute_success(profile, b, neighbour) for b in BASELINES}, max_auc(profile))


def risk_panel(accountant) -> RiskPanel:
    """The panel of what ``accountant`` has spent (see the module docstring)."""
    return panel(accountant_profile(accountant), accountant.neighbour)
