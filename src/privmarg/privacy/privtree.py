"""PrivTree (Zhang et al. 2016; SPEC §9.3): DP splitting of an interval by noisy counts.

The splitting decisions are the only randomness and are drawn here, with the charge first. The
caller supplies a counting oracle over the private values; nothing else about the data is read.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import numpy as np

from .accountant import Accountant

PRIVTREE_FANOUT = 2  # β
PRIVTREE_THRESHOLD = 0.0  # θ


def privtree_parameters(rho: float, neighbour: str) -> dict:
    """Calibration of one PrivTree run costing ``rho`` zCDP.

    PrivTree with fan-out β and Laplace scale ``λ ≥ (2β−1)/((β−1)ε)``, bias ``δ = λ ln β`` is ``ε``-DP
    under add/remove; ``ε``-DP implies ``ε²/2``-zCDP, so ``ε = √(2ρ)``. A replace-one neighbour is a
    removal plus an addition: the tree is run at ``ε/2`` (group privacy).
    """
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"PrivTree needs a positive budget, got rho={rho}")
    beta = PRIVTREE_FANOUT
    epsilon = math.sqrt(2.0 * rho)
    group = 1 if neighbour == "add_remove" else 2
    scale = (2 * beta - 1) / ((beta - 1) * (epsilon / group))
    return {"epsilon": epsilon, "scale": scale, "bias": scale * math.log(beta), "fanout": beta,
            "threshold": PRIVTREE_THRESHOLD, "group": group}


def privtree_split(accountant: Accountant, count: Callable[[float, float, bool], int], lo: float, hi: float,
                   *, lattice: bool, max_depth: int, rho: float, rng: np.random.Generator,
                   what: str = "PrivTree", threshold: float = PRIVTREE_THRESHOLD) -> np.ndarray:
    """Leaf edges of PrivTree on ``[lo, hi)`` (``hi`` closed for non-lattice intervals); charges ``rho``.

    ``count(left, right, closed)``: private values in ``[left, right)`` (``]`` when closed). An
    interval at depth ``h`` with ``c`` values is split in two when ``max(c − δh, θ − δ) + Lap(λ) > θ``;
    data-independent stops: depth ``max_depth`` and, on lattice intervals, a single value. ``threshold``
    (θ, rows) is public (a constant or a DP output); the guarantee holds for any θ. The
    ledger entry (mechanism ``"privtree"``) records ``epsilon``, ``scale``, ``bias``, ``fanout``,
    ``threshold`` and ``group``; ``rho = epsilon²/2``.
    """
    p = privtree_parameters(rho, accountant.neighbour)
    if not math.isfinite(threshold):
        raise ValueError(f"PrivTree threshold must be finite, got {threshold}")
    p["threshold"] = float(threshold)
    accountant.charge(p["epsilon"] ** 2 / 2.0, what, "privtree", **p)
    lam, delta, theta = p["scale"], p["bias"], p["threshold"]
    leaves: list[tuple[float, float]] = []
    queue = deque([(lo, hi, 0)])
    while queue:
        left, right, depth = queue.popleft()
        if lattice:
            splittable = right - left >= 2
            mid = math.floor((left + right) / 2)
        else:
            mid = (left + right) / 2
            splittable = left < mid < right
        if depth >= max_depth or not splittable:
            leaves.append((left, right))
            continue
        c = count(left, right, right == hi and not lattice)
        biased = max(c - delta * depth, theta - delta)
        if biased + rng.laplace(0.0, lam) > theta:
            queue.append((left, mid, depth + 1))
            queue.append((mid, right, depth + 1))
        else:
            leaves.append((left, right))
    leaves.sort()
    return np.array([a for a, _ in leaves] + [leaves[-1][1]], dtype=float)
