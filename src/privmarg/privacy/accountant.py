"""zCDP budget accountant / privacy filter (SPEC §1.7).

zCDP composes additively (also adaptively): the :class:`Accountant` holds a total budget
``rho_total`` and records every charge in an append-only ledger. A charge that would take
the spent budget above ``rho_total * (1 + 1e-9)`` is refused with :class:`BudgetExceededError`
and nothing is recorded, so ``sum(rho_t) <= rho_total`` holds on every execution path.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .conversions import _check_delta, _check_eps, cdp_eps, cdp_rho
from .sensitivity import check_neighbour

__all__ = ["BudgetExceededError", "Charge", "Accountant", "recompute_rho"]

_REL_TOL = 1e-9
_RESERVED = ("what", "mechanism", "rho")


class BudgetExceededError(ValueError):
    """Raised when a charge would exceed the accountant's total zCDP budget."""


def _jsonable(x: Any) -> Any:
    """Convert numpy scalars/arrays and tuples to plain JSON-serialisable Python objects."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return float(x)
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if x is None or isinstance(x, str):
        return x
    return str(x)


@dataclass(frozen=True)
class Charge:
    """One ledger entry: ``rho`` (zCDP) spent by ``mechanism`` on ``what``.

    ``params`` holds the mechanism's calibration (e.g. ``sigma`` and ``l2_sensitivity``),
    from which ``rho`` can be recomputed.
    """

    what: str
    mechanism: str
    rho: float
    params: dict = field(default_factory=dict)

    def recompute(self) -> float:
        """``rho`` recomputed from the calibration in ``params`` alone (independent of :attr:`rho`).

        Raises ``ValueError`` for a mechanism whose cost cannot be derived from its parameters, or
        when PrivTree's parameters are inconsistent with one another.
        """
        return recompute_rho(self.to_dict())

    def to_dict(self) -> dict:
        """Flat JSON-serialisable dict ``{"what", "mechanism", "rho", **params}``."""
        out = {"what": str(self.what), "mechanism": str(self.mechanism), "rho": float(self.rho)}
        for k, v in self.params.items():
            out[str(k)] = _jsonable(v)
        return out


def recompute_rho(entry: dict) -> float:
    """zCDP cost of one ledger entry (as in a JSON report) from its calibration parameters."""
    mech = entry["mechanism"]
    if mech in ("gaussian", "discrete_gaussian"):  # same zCDP cost (CKS 2020, Thm 4)
        return entry["l2_sensitivity"] ** 2 / (2.0 * entry["sigma"] ** 2)
    if mech == "exponential":
        return entry["epsilon"] ** 2 / 8.0
    if mech in ("laplace", "discrete_laplace"):
        eps = entry["l1_sensitivity"] / entry["scale"] if entry["l1_sensitivity"] else 0.0
        return eps**2 / 2.0
    if mech == "gumbel_top_q":
        return entry["q"] * entry["sensitivity"] ** 2 / (2.0 * entry["beta"] ** 2)
    if mech in ("privtree", "privtree_discrete"):
        # the Laplace scale determines epsilon: λ = group·(2β−1)/((β−1)ε); the bias is λ ln β
        # (continuous) or its ceiling (discrete noise on integer counts, see privacy.privtree)
        fan = entry["fanout"]
        eps = entry["group"] * (2 * fan - 1) / ((fan - 1) * entry["scale"])
        bias = entry["scale"] * math.log(fan)
        if mech == "privtree_discrete":
            bias_ok = entry["bias"] == math.ceil(bias) and float(entry["threshold"]).is_integer()
        else:
            bias_ok = math.isclose(entry["bias"], bias, rel_tol=1e-9)
        if not math.isclose(eps, entry["epsilon"], rel_tol=1e-9) or not bias_ok:
            raise ValueError(f"inconsistent PrivTree calibration in {entry.get('what')!r}")
        return eps**2 / 2.0
    if mech == "subsampled_gaussian":  # DP-SGD: its zCDP equivalent after the charges before it (see .rdp)
        from .rdp import rho_equivalent

        return rho_equivalent(entry)
    raise ValueError(f"cannot recompute the cost of mechanism {mech!r}")


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


class Accountant:
    """zCDP privacy filter with a total budget ``rho_total`` (zCDP units).

    ``epsilon``/``delta`` are informational (recorded in :meth:`to_dict`); use
    :meth:`from_epsilon_delta` to derive ``rho_total`` from an ``(epsilon, delta)`` target.
    ``neighbour`` is the neighbouring relation all charged sensitivities refer to.
    """

    def __init__(
        self,
        rho_total: float,
        neighbour: str = "add_remove",
        epsilon: float | None = None,
        delta: float | None = None,
    ) -> None:
        try:
            rt = float(rho_total)
        except (TypeError, ValueError):
            raise ValueError(f"rho_total must be a real number, got {rho_total!r}") from None
        if not math.isfinite(rt) or rt < 0:
            raise ValueError(f"rho_total must be a finite number >= 0, got {rho_total!r}")
        self._rho_total = rt
        self._neighbour = check_neighbour(neighbour)
        self._epsilon = None if epsilon is None else _check_eps(epsilon)
        self._delta = None if delta is None else _check_delta(delta)
        self._rho_spent = 0.0
        self._ledger: list[Charge] = []

    @classmethod
    def from_epsilon_delta(cls, epsilon: float, delta: float, neighbour: str = "add_remove") -> "Accountant":
        """Accountant with ``rho_total = cdp_rho(epsilon, delta)`` (exact CKS conversion)."""
        return cls(cdp_rho(epsilon, delta), neighbour=neighbour, epsilon=epsilon, delta=delta)

    # ------------------------------------------------------------------ properties
    @property
    def rho_total(self) -> float:
        """Total zCDP budget."""
        return self._rho_total

    @property
    def rho_spent(self) -> float:
        """zCDP budget charged so far (sum of the ledger)."""
        return self._rho_spent

    @property
    def rho_remaining(self) -> float:
        """``max(0, rho_total - rho_spent)``."""
        return max(0.0, self._rho_total - self._rho_spent)

    @property
    def ledger(self) -> tuple[Charge, ...]:
        """All charges in order (immutable snapshot)."""
        return tuple(self._ledger)

    @property
    def neighbour(self) -> str:
        """Neighbouring relation (``"add_remove"`` or ``"replace_one"``)."""
        return self._neighbour

    @property
    def epsilon(self) -> float | None:
        return self._epsilon

    @property
    def delta(self) -> float | None:
        return self._delta

    # ------------------------------------------------------------------ charging
    @staticmethod
    def _check_charge(rho: float) -> float:
        try:
            r = float(rho)
        except (TypeError, ValueError):
            raise ValueError(f"charge rho must be a real number, got {rho!r}") from None
        if math.isnan(r) or r < 0 or math.isinf(r):
            raise ValueError(f"charge rho must be a finite number >= 0, got {rho!r}")
        return r

    def can_afford(self, rho: float) -> bool:
        """Whether charging ``rho`` now would be accepted."""
        r = self._check_charge(rho)
        return self._rho_spent + r <= self._rho_total * (1.0 + _REL_TOL)

    def charge(self, rho: float, what: str = "", mechanism: str = "", **params: Any) -> Charge:
        """Record a ``rho``-zCDP charge and return it.

        Raises :class:`BudgetExceededError` (and records nothing) if
        ``rho_spent + rho > rho_total * (1 + 1e-9)``; ``ValueError`` for negative/NaN ``rho``.
        """
        r = self._check_charge(rho)
        if self._ledger and self._ledger[-1].mechanism == "subsampled_gaussian":
            raise ValueError("a DP-SGD phase must be a run's last charge: its rho is its zCDP equivalent "
                             "given the charges before it (privacy.rdp)")
        clash = [k for k in params if k in _RESERVED]
        if clash:
            raise ValueError(f"charge params may not use reserved names {clash}")
        if not self._rho_spent + r <= self._rho_total * (1.0 + _REL_TOL):
            raise BudgetExceededError(
                f"charging rho={r:.6g} for {what!r} ({mechanism}) would exceed the budget: "
                f"spent {self._rho_spent:.6g} of {self._rho_total:.6g} (remaining {self.rho_remaining:.6g})"
            )
        c = Charge(what=str(what), mechanism=str(mechanism), rho=r, params=dict(params))
        self._ledger.append(c)
        self._rho_spent += r
        return c

    # ------------------------------------------------------------------ reporting
    def epsilon_spent(self, delta: float) -> float:
        """Epsilon (CKS conversion) of the budget spent so far at the given ``delta``. A ledger ending
        in a DP-SGD phase is composed in RDP again (its ``rho`` is an equivalent at its own δ only)."""
        last = self._ledger[-1] if self._ledger else None
        if last is not None and last.mechanism == "subsampled_gaussian":
            from .rdp import composed_epsilon

            p = last.params
            return composed_epsilon(p["rho_before"], delta, p["neighbour"], [p], p.get("orders"))
        return cdp_eps(self._rho_spent, delta)

    def to_dict(self) -> dict:
        """JSON-serialisable summary: epsilon, delta, neighbour, rho_total, rho_spent and the ledger."""
        return {
            "epsilon": self._epsilon,
            "delta": self._delta,
            "neighbour": self._neighbour,
            "rho_total": float(self._rho_total),
            "rho_spent": float(self._rho_spent),
            "ledger": [c.to_dict() for c in self._ledger],
        }

    def __repr__(self) -> str:
        return (
            f"Accountant(rho_total={self._rho_total:.6g}, rho_spent={self._rho_spent:.6g}, "
            f"neighbour={self._neighbour!r}, charges={len(self._ledger)})"
        )
