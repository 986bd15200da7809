"""Noisy linear measurements of marginals: the input of every generator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, eq=False)
class Measurement:
    """``y = Q · M_attrs(D) + N(0, sigma² I)``.

    ``attrs`` is the clique (any order; the flat marginal is row-major over ``attrs`` as given),
    ``y`` the released noisy answer, ``sigma`` the noise standard deviation (in JAM, a weight),
    ``query`` the linear map ``Q`` (identity when None). ``source`` tags where it came from
    ("private", "public", ...); it never affects estimation unless a weighting asks for it.
    """

    attrs: tuple[str, ...]
    y: np.ndarray
    sigma: float
    query: np.ndarray | None = None
    source: str = "private"
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "attrs", tuple(self.attrs))
        y = np.asarray(self.y, dtype=float).ravel()
        object.__setattr__(self, "y", y)
        if not np.all(np.isfinite(y)):
            raise ValueError(f"measurement on {self.attrs}: y holds non-finite values")
        if not (self.sigma > 0 and np.isfinite(self.sigma)):
            raise ValueError(f"measurement on {self.attrs}: sigma must be positive and finite")
        if self.query is not None:
            q = np.asarray(self.query, dtype=float)
            if q.ndim != 2 or q.shape[0] != y.size:
                raise ValueError(f"measurement on {self.attrs}: query must have shape ({y.size}, n_cells)")
            object.__setattr__(self, "query", q)
