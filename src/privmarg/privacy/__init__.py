"""Privacy foundations: zCDP conversions, sensitivities, the budget accountant and the mechanisms.

Every access to private data goes through a primitive in :mod:`.primitives`, which charges its zCDP
cost to an :class:`Accountant` before releasing anything (SPEC §1).
"""

from .accountant import Accountant, BudgetExceededError, Charge
from .ledger import recompute_delta, recompute_rho, rho_by_phase
from .calibrate import (DISCOVERY_DELTA_SHARE, RoundPlan, discovery_delta, even_epsilon, even_sigma, power_split,
                        preprocess_budget, round_plan)
from .discrete import (
    NOISES,
    check_noise,
    discrete_gaussian,
    discrete_gaussian_mechanism,
    discrete_laplace,
    discrete_laplace_mechanism,
    is_integral,
)
from .conversions import cdp_delta, cdp_eps, cdp_rho, simple_delta, simple_eps, simple_rho
from .primitives import (
    exponential_epsilon,
    exponential_mechanism,
    exponential_mechanism_fitting,
    exponential_mechanism_lazy,
    exponential_probabilities,
    gaussian_mechanism,
    gaussian_rho,
    gaussian_sigma,
    gumbel_top_q,
    laplace_mechanism,
    noise_rngs,
)
from .sensitivity import (
    NEIGHBOURS,
    check_neighbour,
    count_l2,
    dependence_sensitivity,
    marginal_l1,
    marginal_l2,
    score_sensitivity,
)

__all__ = [
    "Accountant",
    "BudgetExceededError",
    "Charge",
    "RoundPlan",
    "even_epsilon",
    "even_sigma",
    "power_split",
    "preprocess_budget",
    "DISCOVERY_DELTA_SHARE",
    "discovery_delta",
    "recompute_rho",
    "recompute_delta",
    "rho_by_phase",
    "round_plan",
    "cdp_delta",
    "cdp_eps",
    "cdp_rho",
    "simple_delta",
    "simple_eps",
    "simple_rho",
    "NEIGHBOURS",
    "check_neighbour",
    "marginal_l1",
    "marginal_l2",
    "count_l2",
    "score_sensitivity",
    "dependence_sensitivity",
    "gaussian_sigma",
    "gaussian_rho",
    "gaussian_mechanism",
    "exponential_probabilities",
    "exponential_mechanism",
    "exponential_mechanism_fitting",
    "exponential_mechanism_lazy",
    "exponential_epsilon",
    "laplace_mechanism",
    "NOISES",
    "check_noise",
    "discrete_gaussian",
    "discrete_gaussian_mechanism",
    "discrete_laplace",
    "discrete_laplace_mechanism",
    "is_integral",
    "gumbel_top_q",
    "noise_rngs",
]
