"""Sensitivities under the two neighbouring relations (SPEC §1.1).

* ``"add_remove"`` (unbounded): neighbours differ by adding/removing one record; ``N`` is private.
* ``"replace_one"`` (bounded): neighbours differ in the values of one record; ``N`` is public.

All functions return sensitivities in record-count units (one record changes a count by 1).
"""

from __future__ import annotations

import math
import numbers

__all__ = [
    "NEIGHBOURS",
    "check_neighbour",
    "marginal_l1",
    "marginal_l2",
    "count_l2",
    "score_sensitivity",
]

NEIGHBOURS: tuple[str, ...] = ("add_remove", "replace_one")


def check_neighbour(neighbour: str) -> str:
    """Return ``neighbour`` if it is one of :data:`NEIGHBOURS`, else raise ``ValueError``."""
    if not isinstance(neighbour, str) or neighbour not in NEIGHBOURS:
        raise ValueError(
            f"unknown neighbouring relation {neighbour!r}; valid choices are "
            + ", ".join(repr(n) for n in NEIGHBOURS)
        )
    return neighbour


def _check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"k (number of marginals measured jointly) must be an integer >= 1, got {k!r}")
    return int(k)


def marginal_l1(neighbour: str, k: int = 1) -> float:
    """L1 sensitivity of ``k`` marginals measured jointly: ``k`` (add/remove) or ``2k`` (replace-one)."""
    check_neighbour(neighbour)
    k = _check_k(k)
    return float(k) if neighbour == "add_remove" else float(2 * k)


def marginal_l2(neighbour: str, k: int = 1) -> float:
    """L2 sensitivity of ``k`` marginals measured jointly: ``sqrt(k)`` (add/remove) or ``sqrt(2k)`` (replace-one)."""
    check_neighbour(neighbour)
    k = _check_k(k)
    return math.sqrt(k) if neighbour == "add_remove" else math.sqrt(2 * k)


def count_l2(neighbour: str) -> float:
    """L2 (= L1) sensitivity of the record count ``N``: 1 (add/remove) or 0 (replace-one, ``N`` public)."""
    check_neighbour(neighbour)
    return 1.0 if neighbour == "add_remove" else 0.0


def score_sensitivity(neighbour: str, weight: float = 1.0) -> float:
    """Sensitivity of the quality score ``w * ||M_r(D) - v||_1`` (``v`` fixed): ``|w|`` or ``2|w|``."""
    check_neighbour(neighbour)
    w = float(weight)
    if not math.isfinite(w):
        raise ValueError(f"weight must be finite, got {weight!r}")
    return abs(w) if neighbour == "add_remove" else 2.0 * abs(w)
