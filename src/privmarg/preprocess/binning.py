"""Discretising numeric columns: uniform bins on public bounds (free) and PrivTree (DP; SPEC §9.1, §9.3).

Bins are given by their edges ``e_0 < e_1 < … < e_B`` on the column's encoding axis (numbers for
float columns, whole units for integer and datetime columns):

* float columns: bin ``j`` is ``[e_j, e_{j+1})``, the last bin closed (``e_B = max``);
* *lattice* columns (integer, datetime): edges are integers, bin ``j`` holds the integers
  ``e_j .. e_{j+1}-1`` (``e_0 = min``, ``e_B = max + 1``), so every bin holds at least one value.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ..privacy import Accountant
from ..schema import ColumnSpec

__all__ = ["uniform_edges", "bin_index", "privtree_edges", "privtree_parameters", "PRIVTREE_FANOUT"]

PRIVTREE_FANOUT = 2  # β
PRIVTREE_THRESHOLD = 0.0  # θ


def uniform_edges(col: ColumnSpec) -> np.ndarray:
    """Edges of ``col.bins`` equal-width bins on the schema's bounds (public: no data involved).

    Lattice columns with at most ``bins`` values get one bin per value.
    """
    lo, hi, bins = col.lo, col.hi, col.bins
    if col.lattice:
        n_values = int(hi - lo + 1)
        if n_values <= bins:
            return np.arange(lo, hi + 2, dtype=float)
        return np.unique(np.floor(np.linspace(lo, hi + 1, bins + 1)))
    return np.linspace(lo, hi, bins + 1)


def bin_index(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bin of each (finite, clipped) value ``x``: ``j`` with ``e_j <= x < e_{j+1}``, the last bin closed."""
    j = np.searchsorted(edges, x, side="right") - 1
    return np.clip(j, 0, len(edges) - 2).astype(np.int64)


def privtree_parameters(rho: float, neighbour: str) -> dict:
    """Calibration of one PrivTree run costing ``rho`` zCDP (SPEC §9.3).

    PrivTree with fan-out β and Laplace scale ``λ ≥ (2β−1)/((β−1)ε)``, bias ``δ = λ ln β`` is ``ε``-DP
    under add/remove (Zhang et al. 2016); ``ε``-DP implies ``ε²/2``-zCDP, so ``ε = √(2ρ)``. A
    replace-one neighbour is a removal plus an addition: the tree is run at ``ε/2`` (group privacy).
    """
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"PrivTree needs a positive budget, got rho={rho}")
    beta = PRIVTREE_FANOUT
    epsilon = math.sqrt(2.0 * rho)
    group = 1 if neighbour == "add_remove" else 2
    eps_tree = epsilon / group
    scale = (2 * beta - 1) / ((beta - 1) * eps_tree)
    return {"epsilon": epsilon, "scale": scale, "bias": scale * math.log(beta), "fanout": beta,
            "threshold": PRIVTREE_THRESHOLD, "group": group}


def privtree_edges(accountant: Accountant, x: np.ndarray, col: ColumnSpec, rho: float,
                   rng: np.random.Generator) -> np.ndarray:
    """PrivTree bins for ``col`` from its clipped, non-missing values ``x``; charges ``rho`` first.

    The root interval is the schema's public range (never the data's). Intervals are processed FIFO;
    an interval at depth ``h`` with ``c`` records is split in two when
    ``max(c − δh, θ − δ) + Lap(λ) > θ``. Data-independent stopping rules (no noise drawn, no count
    read): depth ``floor(log2 bins)`` (so at most ``bins`` bins) and, on lattice columns, intervals
    holding a single value. The ledger entry (mechanism ``"privtree"``) records ``epsilon``, ``scale``
    (λ), ``bias`` (δ), ``fanout``, ``threshold`` and ``group``; ``rho = epsilon²/2``.
    """
    p = privtree_parameters(rho, accountant.neighbour)
    accountant.charge(p["epsilon"] ** 2 / 2.0, f"PrivTree bins {col.name}", "privtree", **p)
    lam, delta, theta = p["scale"], p["bias"], p["threshold"]
    max_depth = int(math.floor(math.log2(col.bins)))
    xs = np.sort(np.asarray(x, dtype=float))
    lo = col.lo
    hi_end = col.hi + 1 if col.lattice else col.hi

    def count(left: float, right: float, last: bool) -> int:
        a = np.searchsorted(xs, left, side="left")
        b = np.searchsorted(xs, right, side="right" if last else "left")
        return int(b - a)

    leaves: list[tuple[float, float]] = []
    queue = deque([(lo, hi_end, 0)])
    while queue:
        left, right, depth = queue.popleft()
        if col.lattice:
            splittable = right - left >= 2
            mid = math.floor((left + right) / 2)
        else:
            mid = (left + right) / 2
            splittable = left < mid < right
        if depth >= max_depth or not splittable:
            leaves.append((left, right))
            continue
        c = count(left, right, last=(right == hi_end and not col.lattice))
        biased = max(c - delta * depth, theta - delta)
        if biased + rng.laplace(0.0, lam) > theta:
            queue.append((left, mid, depth + 1))
            queue.append((mid, right, depth + 1))
        else:
            leaves.append((left, right))
    leaves.sort()
    return np.array([a for a, _ in leaves] + [leaves[-1][1]], dtype=float)
