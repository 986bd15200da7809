"""Replaying a ledger: each entry's cost recomputed from its calibration alone, and the ledger
summed by phase. Reads the JSON form of a ledger (``Accountant.to_dict()["ledger"]`` or a saved
report), so an auditor can check a release without the code that made it.

One rule per mechanism in :data:`COST_RULES` (ρ, zCDP) and :data:`DELTA_RULES` (the δ of an
approximate-zCDP step); a new mechanism adds its rule here. Privacy cost: none (reads a ledger).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .discovery import threshold_delta


def _gaussian(e: dict) -> float:
    # the same zCDP cost for the continuous and the discrete Gaussian (CKS 2020, Thm 4)
    return e["l2_sensitivity"] ** 2 / (2.0 * e["sigma"] ** 2)


def _exponential(e: dict) -> float:
    return e["epsilon"] ** 2 / 8.0


def _laplace(e: dict) -> float:
    eps = e["l1_sensitivity"] / e["scale"] if e["l1_sensitivity"] else 0.0
    return eps**2 / 2.0


def _gumbel_top_q(e: dict) -> float:
    return e["q"] * e["sensitivity"] ** 2 / (2.0 * e["beta"] ** 2)


def _privtree(e: dict) -> float:
    # the Laplace scale determines epsilon: λ = group·(2β−1)/((β−1)ε); the bias is λ ln β
    # (continuous) or its ceiling (discrete noise on integer counts, see privacy.privtree)
    fan = e["fanout"]
    eps = e["group"] * (2 * fan - 1) / ((fan - 1) * e["scale"])
    bias = e["scale"] * math.log(fan)
    if e["mechanism"] == "privtree_discrete":
        bias_ok = e["bias"] == math.ceil(bias) and float(e["threshold"]).is_integer()
    else:
        bias_ok = math.isclose(e["bias"], bias, rel_tol=1e-9)
    if not math.isclose(eps, e["epsilon"], rel_tol=1e-9) or not bias_ok:
        raise ValueError(f"inconsistent PrivTree calibration in {e.get('what')!r}")
    return eps**2 / 2.0


def _subsampled_gaussian(e: dict) -> float:
    # DP-SGD: its zCDP equivalent after the charges before it (see .rdp)
    from .rdp import rho_equivalent  # dp-accounting is imported only for DP-SGD ledgers

    return rho_equivalent(e)


COST_RULES: dict[str, Callable[[dict], float]] = {
    "gaussian": _gaussian, "discrete_gaussian": _gaussian,
    "gaussian_threshold": _gaussian, "discrete_gaussian_threshold": _gaussian,
    "exponential": _exponential,
    "laplace": _laplace, "discrete_laplace": _laplace,
    "gumbel_top_q": _gumbel_top_q,
    "privtree": _privtree, "privtree_discrete": _privtree,
    "subsampled_gaussian": _subsampled_gaussian,
}


def _threshold_delta(e: dict) -> float:
    """DP key discovery (:mod:`privmarg.privacy.discovery`): each of the ``keys_at_risk`` keys
    present in only one of two neighbouring tables has count 1 there and is released with
    probability ``P(1 + N(0, σ²) > τ)``, so ``δ = keys_at_risk · Φ̄((τ − 1)/σ)`` (the discrete
    Gaussian's tail for ``discrete_gaussian_threshold``)."""
    return threshold_delta(e["sigma"], e["threshold"], e["keys_at_risk"],
                           discrete=e["mechanism"] == "discrete_gaussian_threshold")


DELTA_RULES: dict[str, Callable[[dict], float]] = {
    "gaussian_threshold": _threshold_delta, "discrete_gaussian_threshold": _threshold_delta,
}


def recompute_rho(entry: dict) -> float:
    """zCDP cost of one ledger entry (as in a JSON report) from its calibration parameters."""
    rule = COST_RULES.get(entry["mechanism"])
    if rule is None:
        raise ValueError(f"cannot recompute the cost of mechanism {entry['mechanism']!r}")
    return rule(entry)


def recompute_delta(entry: dict) -> float:
    """δ of an approximate-zCDP ledger entry from its parameters (0 for plain zCDP mechanisms)."""
    rule = DELTA_RULES.get(entry["mechanism"])
    return 0.0 if rule is None else rule(entry)


PHASES = ("preprocessing", "selection", "measurement")
SELECTION_MECHANISMS = ("exponential", "gumbel_top_q")


def rho_by_phase(ledger: Sequence[dict], preprocessing: int = 0) -> dict[str, float]:
    """ρ (zCDP) of a ledger (``Accountant.to_dict()["ledger"]``) summed by phase: its first
    ``preprocessing`` charges are DP preprocessing (PrivTree bins, noisy bin counts, rare
    categories); of the rest, exponential-mechanism and top-q charges, and charges noted
    ``phase="selection"`` (PrivSyn's noisy InDif scores), are selection and everything else
    measurement."""
    out = dict.fromkeys(PHASES, 0.0)
    for i, e in enumerate(ledger):
        phase = ("preprocessing" if i < preprocessing else
                 "selection" if e.get("mechanism") in SELECTION_MECHANISMS or e.get("phase") == "selection"
                 else "measurement")
        out[phase] += float(e.get("rho", 0.0))
    return out
