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
from .discrete import check_noise, discrete_laplace

PRIVTREE_FANOUT = 2  # β
PRIVTREE_THRESHOLD = 0.0  # θ


def privtree_parameters(rho: float, neighbour: str, noise: str = "continuous") -> dict:
    """Calibration of one PrivTree run costing ``rho`` zCDP.

    PrivTree with fan-out β and Laplace scale ``λ ≥ (2β−1)/((β−1)ε)``, bias ``δ = λ ln β`` is ``ε``-DP
    under add/remove; ``ε``-DP implies ``ε²/2``-zCDP, so ``ε = √(2ρ)``. A replace-one neighbour is a
    removal plus an addition: the tree is run at ``ε/2`` (group privacy).

    ``noise="discrete"``: discrete Laplace ``Lap_Z(λ)`` on the integer counts with the integer bias
    ``δ = ⌈λ ln β⌉`` and integer threshold θ, so every comparison is between integers. It is
    ``ε``-DP with the same ``λ``. Sketch (add/remove, ``α = e^{−1/λ}``, ``x = c − δ·depth``): the
    split probability is ``G(y) = Pr[Z ≥ θ + 1 − y]`` at the biased count ``y = max(x, θ − δ)``.
    Nodes off the added record's path are unchanged; on the path ``c`` becomes ``c + 1``, which
    changes ``y`` (to ``y + 1``) only where ``x ≥ θ − δ``. ``ln G(y+1)/G(y)`` is ``1/λ`` for ``y ≤ θ`` and at most
    ``α^{y−θ}(1−α) ≤ α^{y−θ}/λ`` for ``y ≥ θ + 1``; the non-split ratio is at most ``1/λ`` and
    occurs once (the leaf). Along the path ``x`` drops by ``≥ δ`` per level, so at most two nodes
    lie in ``[θ − δ, θ]`` (then the rest are ``≥ θ + δ``) or one (then the rest are ``≥ θ + 1``),
    and since ``α^δ ≤ 1/β`` the sum is at most ``(2 + 1/(β−1))/λ`` or ``(1 + β/(β−1))/λ``, both
    ``(2β−1)/((β−1)λ) = ε``, the continuous PrivTree's bound.
    """
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"PrivTree needs a positive budget, got rho={rho}")
    beta = PRIVTREE_FANOUT
    epsilon = math.sqrt(2.0 * rho)
    group = 1 if neighbour == "add_remove" else 2
    scale = (2 * beta - 1) / ((beta - 1) * (epsilon / group))
    bias = scale * math.log(beta)
    if check_noise(noise) == "discrete":
        bias = float(math.ceil(bias))
    return {"epsilon": epsilon, "scale": scale, "bias": bias, "fanout": beta,
            "threshold": PRIVTREE_THRESHOLD, "group": group}


def privtree_split(accountant: Accountant, count: Callable[[float, float, bool], int], lo: float, hi: float,
                   *, lattice: bool, max_depth: int, rho: float, rng: np.random.Generator,
                   what: str = "PrivTree", threshold: float = PRIVTREE_THRESHOLD,
                   noise: str = "continuous") -> np.ndarray:
    """Leaf edges of PrivTree on ``[lo, hi)`` (``hi`` closed for non-lattice intervals); charges ``rho``.

    ``count(left, right, closed)``: private values in ``[left, right)`` (``]`` when closed). An
    interval at depth ``h`` with ``c`` values is split in two when ``max(c − δh, θ − δ) + Lap(λ) > θ``;
    data-independent stops: depth ``max_depth`` and, on lattice intervals, a single value. ``threshold``
    (θ, rows) is public (a constant or a DP output); the guarantee holds for any θ. The
    ledger entry (mechanism ``"privtree"``) records ``epsilon``, ``scale``, ``bias``, ``fanout``,
    ``threshold`` and ``group``; ``rho = epsilon²/2``. ``noise="discrete"``: discrete Laplace noise
    and an integer bias (mechanism ``"privtree_discrete"``; see :func:`privtree_parameters`); the
    threshold is then rounded to the nearest integer (the proof compares integers only).
    """
    p = privtree_parameters(rho, accountant.neighbour, noise)
    discrete = noise == "discrete"
    if not math.isfinite(threshold):
        raise ValueError(f"PrivTree threshold must be finite, got {threshold}")
    p["threshold"] = float(round(threshold)) if discrete else float(threshold)
    accountant.charge(p["epsilon"] ** 2 / 2.0, what, "privtree_discrete" if discrete else "privtree", **p)
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
        z = discrete_laplace(lam, None, rng) if discrete else rng.laplace(0.0, lam)
        if biased + z > theta:
            queue.append((left, mid, depth + 1))
            queue.append((mid, right, depth + 1))
        else:
            leaves.append((left, right))
    leaves.sort()
    return np.array([a for a, _ in leaves] + [leaves[-1][1]], dtype=float)
