"""Budget plans: every split of a zCDP budget into noise scales is computed here, in one place.

Units: ``rho`` in zCDP, ``sigma`` a Gaussian noise standard deviation in record counts, ``epsilon``
the exponential mechanism's parameter (cost ``epsilon²/8``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .primitives import exponential_epsilon, gaussian_rho, gaussian_sigma


@dataclass(frozen=True)
class RoundPlan:
    """One select-then-measure round: EM with ``epsilon``, then a Gaussian marginal with ``sigma``."""

    sigma: float
    epsilon: float

    def cost(self, l2_sensitivity: float) -> float:
        """zCDP of the round: ``Δ₂²/(2σ²) + ε²/8``."""
        return gaussian_rho(self.sigma, l2_sensitivity) + self.epsilon**2 / 8.0


def round_plan(rho: float, measure_share: float, l2_sensitivity: float, rounds: int = 1) -> RoundPlan:
    """``rounds`` equal rounds out of ``rho``: each gives ``measure_share`` of its ``rho/rounds`` to
    the Gaussian measurement and the rest to the exponential-mechanism selection."""
    if not 0 < measure_share < 1:
        raise ValueError(f"measure_share must be in (0, 1), got {measure_share}")
    per = rho / rounds
    return RoundPlan(gaussian_sigma(measure_share * per, l2_sensitivity),
                     exponential_epsilon((1 - measure_share) * per))


def even_sigma(rho: float, k: int, l2_sensitivity: float) -> float:
    """σ of each of ``k`` Gaussian measurements (sensitivity ``l2_sensitivity`` each) that together
    cost ``rho``: ``Δ₂·√(k/(2ρ))``."""
    return gaussian_sigma(rho / k, l2_sensitivity)


def even_epsilon(rho: float, k: int) -> float:
    """ε of each of ``k`` exponential-mechanism selections that together cost ``rho``."""
    return exponential_epsilon(rho / k)


def power_split(rho: float, weights, power: float = 2 / 3) -> list[float]:
    """``rho`` split over measurements in proportion to ``weights**power``: ``ρ_i = ρ·w_i^p/Σ_j w_j^p``.

    With ``weights`` = cells ``n_i`` and ``power`` = 2/3 this is PrivSyn's allocation (Zhang et al.
    2021, §4.2), which minimises the total expected L1 noise ``Σ_i n_i·σ_i`` of Gaussian marginals
    under ``Σ ρ_i = ρ`` (Lagrange: ``n_i σ_i³ ∝ const``, i.e. ``ρ_i ∝ n_i^{2/3}``)."""
    w = [float(x) ** power for x in weights]
    if not w or min(w) <= 0:
        raise ValueError("power_split needs at least one positive weight")
    total = sum(w)
    return [rho * x / total for x in w]


def preprocess_budget(rho_total: float, share: float, needs_dp: bool) -> float:
    """zCDP for DP preprocessing (PrivTree, rare merging): ``share·rho_total`` when the schema asks
    for such a step, else nothing."""
    if not 0 < share < 1:
        raise ValueError(f"preprocess_share must be in (0, 1), got {share}")
    return share * rho_total if needs_dp else 0.0


#: share of the run's δ reserved for DP value discovery (approximate zCDP) when a schema asks for it
#: (``"values": "dp"``, or a float column binned by default, whose heavy values are found the same way)
DISCOVERY_DELTA_SHARE = 0.1


def discovery_delta(delta: float, needs_delta: bool) -> float:
    """δ reserved for DP value discovery (``"values": "dp"`` columns): ``DISCOVERY_DELTA_SHARE·delta``
    when the schema asks for it, else 0. The zCDP budget is then calibrated at ``delta`` less this."""
    return DISCOVERY_DELTA_SHARE * delta if needs_delta else 0.0
