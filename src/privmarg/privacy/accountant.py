"""zCDP budget accountant / privacy filter (SPEC §1.7).

zCDP composes additively (also adaptively): the :class:`Accountant` holds a total budget
``rho_total`` and records every charge in an append-only ledger. A charge that would take
the spent budget above ``rho_total * (1 + 1e-9)`` is refused with :class:`BudgetExceededError`
and nothing is recorded, so ``sum(rho_t) <= rho_total`` holds on every execution path.

Approximate zCDP (Bun & Steinke 2016, Def. 8.1): a step that is ``δ_t``-approximately ``ρ_t``-zCDP
(DP category discovery, whose released keys are not public) records ``approx_delta = δ_t`` next to
its ``ρ_t``. Both compose additively (ibid., Lemma 8.2), and ``δ'``-approximate ``ρ``-zCDP implies
``(ε, δ' + δ_CKS(ρ, ε))``-DP, so such steps need a ``delta_budget`` reserved out of the run's δ:
``rho_total`` is then calibrated at ``delta − delta_budget`` and ``sum(δ_t) <= delta_budget`` is
enforced like the ρ budget.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .conversions import _check_delta, _check_eps, cdp_eps, cdp_rho
from .sensitivity import check_neighbour

__all__ = ["BudgetExceededError", "Charge", "Accountant"]

_REL_TOL = 1e-9
_RESERVED = ("what", "mechanism", "rho", "approx_delta")


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
    approx_delta: float = 0.0  # δ of an approximate-zCDP step (0: plain zCDP)

    def to_dict(self) -> dict:
        """Flat JSON-serialisable dict ``{"what", "mechanism", "rho", **params}``."""
        out = {"what": str(self.what), "mechanism": str(self.mechanism), "rho": float(self.rho)}
        if self.approx_delta:
            out["approx_delta"] = float(self.approx_delta)
        for k, v in self.params.items():
            out[str(k)] = _jsonable(v)
        if self.mechanism == "subsampled_gaussian":
            out["rho_is"] = DPSGD_RHO_IS  # not a zCDP guarantee of its own
        return out


DPSGD_RHO_IS = ("the zCDP rho that gives this run's epsilon at its delta only; the phase is accounted in "
                "Renyi DP (privacy.rdp), not zCDP")


class Accountant:
    """zCDP privacy filter with a total budget ``rho_total`` (zCDP units).

    ``epsilon``/``delta`` are informational (recorded in :meth:`to_dict`); use
    :meth:`from_epsilon_delta` to derive ``rho_total`` from an ``(epsilon, delta)`` target.
    ``neighbour`` is the neighbouring relation all charged sensitivities refer to. ``delta_budget``:
    the part of ``delta`` reserved for approximate-zCDP steps (0: none allowed); ``rho_total`` must
    then have been calibrated at ``delta − delta_budget`` (:meth:`from_epsilon_delta` does so).
    """

    def __init__(
        self,
        rho_total: float,
        neighbour: str = "add_remove",
        epsilon: float | None = None,
        delta: float | None = None,
        delta_budget: float = 0.0,
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
        db = float(delta_budget)
        if not (math.isfinite(db) and db >= 0):
            raise ValueError(f"delta_budget must be a finite number >= 0, got {delta_budget!r}")
        if db > 0 and (self._delta is None or db >= self._delta):
            raise ValueError(f"delta_budget={db:g} needs a target delta above it, got delta={delta!r}")
        self._delta_budget = db
        self._delta_spent = 0.0

    @classmethod
    def from_epsilon_delta(cls, epsilon: float, delta: float, neighbour: str = "add_remove",
                           delta_budget: float = 0.0) -> "Accountant":
        """Accountant with ``rho_total = cdp_rho(epsilon, delta − delta_budget)`` (exact CKS conversion)."""
        return cls(cdp_rho(epsilon, delta - delta_budget), neighbour=neighbour, epsilon=epsilon, delta=delta,
                   delta_budget=delta_budget)

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
    def delta_budget(self) -> float:
        """δ reserved for approximate-zCDP steps (DP category discovery)."""
        return self._delta_budget

    @property
    def delta_spent(self) -> float:
        """δ charged so far by approximate-zCDP steps (sum of the ledger's ``approx_delta``)."""
        return self._delta_spent

    @property
    def conversion_delta(self) -> float | None:
        """The δ left for converting the zCDP part to (ε, δ): ``delta − delta_budget``."""
        return None if self._delta is None else self._delta - self._delta_budget

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

    def can_afford(self, rho: float, approx_delta: float = 0.0) -> bool:
        """Whether charging ``rho`` (and ``approx_delta``) now would be accepted."""
        r = self._check_charge(rho)
        d = self._check_charge(approx_delta)
        return (self._rho_spent + r <= self._rho_total * (1.0 + _REL_TOL)
                and self._delta_spent + d <= self._delta_budget * (1.0 + _REL_TOL))

    def charge(self, rho: float, what: str = "", mechanism: str = "", *, approx_delta: float = 0.0,
               **params: Any) -> Charge:
        """Record a ``rho``-zCDP charge (``approx_delta``-approximate when > 0) and return it.

        Raises :class:`BudgetExceededError` (and records nothing) if
        ``rho_spent + rho > rho_total * (1 + 1e-9)`` or ``delta_spent + approx_delta`` exceeds
        ``delta_budget`` likewise; ``ValueError`` for negative/NaN ``rho``.
        """
        r = self._check_charge(rho)
        d = self._check_charge(approx_delta)
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
        if d > 0 and not self._delta_spent + d <= self._delta_budget * (1.0 + _REL_TOL):
            raise BudgetExceededError(
                f"charging delta={d:.6g} for {what!r} ({mechanism}) would exceed the delta reserved for "
                f"approximate-zCDP steps: spent {self._delta_spent:.6g} of {self._delta_budget:.6g}")
        c = Charge(what=str(what), mechanism=str(mechanism), rho=r, params=dict(params), approx_delta=d)
        self._ledger.append(c)
        self._rho_spent += r
        self._delta_spent += d
        return c

    # ------------------------------------------------------------------ reporting
    def epsilon_spent(self, delta: float) -> float:
        """Epsilon (CKS conversion) of the budget spent so far at the given total ``delta``, of which
        :attr:`delta_spent` goes to approximate-zCDP steps and the rest to the conversion (so ``delta``
        must exceed it). A ledger ending in a DP-SGD phase is composed in RDP again (its ``rho`` is an
        equivalent at its own δ only)."""
        if self._delta_spent:
            if not delta > self._delta_spent:
                raise ValueError(f"delta={delta:g} must exceed the {self._delta_spent:g} spent on approximate-zCDP "
                                 "steps (category discovery)")
            delta = delta - self._delta_spent
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
            **({"delta_budget": self._delta_budget, "delta_spent": float(self._delta_spent)}
               if self._delta_budget else {}),
            "ledger": [c.to_dict() for c in self._ledger],
        }

    def __repr__(self) -> str:
        return (
            f"Accountant(rho_total={self._rho_total:.6g}, rho_spent={self._rho_spent:.6g}, "
            f"neighbour={self._neighbour!r}, charges={len(self._ledger)})"
        )
