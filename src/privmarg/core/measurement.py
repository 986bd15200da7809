"""Noisy linear measurements of marginals: the input of every generator."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class Measurement:
    """``y = Q · M_attrs(D) + N(0, sigma² I)``, weighted by ``weight`` in a generator's loss.

    ``attrs`` is the clique (any order; the flat marginal is row-major over ``attrs`` as given),
    ``y`` the released answer, ``sigma`` the noise standard deviation (None for an answer that is not
    a noisy release, such as JAM's public proxies), ``query`` the linear map ``Q`` (identity when
    None). ``weight`` is the measurement's weight in the Private-PGM loss ``Σ w‖Q μ − y‖²``; by
    default ``1/(2σ²)`` (maximum likelihood). ``source`` tags where it came from ("private",
    "public", ...).
    """

    attrs: tuple[str, ...]
    y: np.ndarray
    sigma: float | None
    query: np.ndarray | None = None
    source: str = "private"
    meta: dict[str, Any] = field(default_factory=dict)
    weight: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "attrs", tuple(self.attrs))
        y = np.asarray(self.y, dtype=float).ravel()
        object.__setattr__(self, "y", y)
        if not np.all(np.isfinite(y)):
            raise ValueError(f"measurement on {self.attrs}: y holds non-finite values")
        if self.sigma is not None and not (self.sigma > 0 and math.isfinite(self.sigma)):
            raise ValueError(f"measurement on {self.attrs}: sigma must be positive and finite")
        if self.weight is None:
            if self.sigma is None:
                raise ValueError(f"measurement on {self.attrs}: give sigma or weight")
            object.__setattr__(self, "weight", 1.0 / (2.0 * self.sigma**2))
        elif not (self.weight >= 0 and math.isfinite(self.weight)):
            raise ValueError(f"measurement on {self.attrs}: weight must be finite and >= 0")
        if self.query is not None:
            q = np.asarray(self.query, dtype=float)
            if q.ndim != 2 or q.shape[0] != y.size:
                raise ValueError(f"measurement on {self.attrs}: query must have shape ({y.size}, n_cells)")
            object.__setattr__(self, "query", q)


def estimate_total(measurements: Sequence[Measurement], domain: Any = None) -> float:
    """N̂ from the measurements (SPEC §3.2): inverse-variance average of each one's total, at least 1."""
    num = den = 0.0
    for m in measurements:
        if m.sigma is None:  # not a noisy release (a public proxy): says nothing about N
            continue
        if m.query is None:
            e, var = m.y.sum(), m.sigma**2 * m.y.size
        else:
            v, *_ = np.linalg.lstsq(m.query.T, np.ones(m.query.shape[1]), rcond=None)
            if not np.allclose(m.query.T @ v, 1.0, atol=1e-8):
                continue
            e, var = float(v @ m.y), m.sigma**2 * float(v @ v)
        num += e / var
        den += 1.0 / var
    return max(1.0, num / den) if den > 0 else 1.0
