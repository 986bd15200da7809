"""DP discovery of a categorical column's frequent values (``"values": "dp"``, issue #15).

The values present in the data are not public: they are released by thresholded Gaussian counts
(:func:`privmarg.privacy.discovery.gaussian_threshold`, ``ρ`` zCDP and ``δ`` approximate), and the
column is then coded over the released list plus ``other``. Values are matched by
:func:`~privmarg.schema.value_key` (``1`` and ``1.0`` are one value).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..privacy import gaussian_sigma, marginal_l2
from ..privacy.discovery import keys_at_risk, threshold_for
from ..schema import ColumnSpec

__all__ = ["discover_values", "key_value"]


def key_value(key: str) -> Any:
    """The value a :func:`~privmarg.schema.value_key` stands for (None for a non-finite number)."""
    kind, _, text = key.partition(":")
    if kind == "bool":
        return text == "True"
    if kind == "num":
        try:
            return int(text)
        except ValueError:
            f = float(text)
            return f if math.isfinite(f) else None
    return text


def _order(v: Any) -> tuple:
    if isinstance(v, bool):
        return (0, float(v), "")
    if isinstance(v, (int, float)):
        return (1, float(v), "")
    return (2, 0.0, str(v))


def discover_values(session, col: ColumnSpec, rho: float, delta: float) -> tuple[list, dict]:
    """The frequent values of raw categorical column ``col`` through ``session`` (a preprocessing
    :class:`~privmarg.measure.MeasurementSession` whose column holds value keys), at ``rho`` zCDP and
    ``delta`` approximate: σ = Δ₂/√(2ρ) and ``τ = 1 + σ·Φ̄⁻¹(δ/keys_at_risk)``. Of the values whose
    noisy count exceeds τ, the ``col.max_values`` with the largest noisy counts are kept (free
    post-processing), in a canonical order (booleans, numbers, strings; so the encoding depends on the
    released set only). Returns ``(values, facts)``, facts for the report: ``threshold``, ``sigma``."""
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"DP value discovery needs a positive budget, got rho={rho!r}")
    l2 = marginal_l2(session.neighbour)
    sigma = gaussian_sigma(rho, l2)
    tau = threshold_for(sigma, delta, keys_at_risk(session.neighbour), discrete=session.noise == "discrete")
    keys, noisy = session.frequent_values(col.name, sigma, l2, tau, f"DP values {col.name}")
    top = np.lexsort((np.asarray(keys, dtype=str), -noisy))[:col.max_values] if len(keys) else np.array([], int)
    values = [key_value(str(keys[i])) for i in top]
    values = [v for v in values if v is not None and not (col.other and v == col.other_label)]
    return sorted(values, key=_order), {"threshold": float(tau), "sigma": float(sigma)}
