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
    "dependence_sensitivity",
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


def dependence_sensitivity(neighbour: str) -> float:
    """Sensitivity of :func:`privmarg.select.privbayes.dependence_score` between neighbouring datasets: 4 (add/remove), 6
    (replace-one); in record counts, for any table shape and any N (N itself need not be public).

    Add/remove, one record added at cell (i, j) of a table with total N ≥ 1 (N = 0 gives S = 0
    on both sides): the change of ``C − abᵀ/N`` is exactly the rank-one matrix
    ``(N eᵢ − a)(N eⱼ − b)ᵀ / (N(N+1))``, whose L1 norm is
    ``2(N − aᵢ)·2(N − bⱼ)/(N(N+1)) ≤ 4N/(N+1) < 4``; S changes by at most that (triangle inequality).
    Replace-one (N fixed), a record moved, ``u``/``v`` the changes of ``a``/``b`` (L1 ≤ 2 each):
    ``Δ(C − abᵀ/N) = [ΔC − uvᵀ/N] − (avᵀ + ubᵀ)/N``; the bracket has L1 ≤ 2 and the rest
    ``(‖a‖₁‖v‖₁ + ‖u‖₁‖b‖₁)/N ≤ 4``, so 6 (the paper's 3/n for R = S/(2N)).
    """
    return 4.0 if check_neighbour(neighbour) == "add_remove" else 6.0
