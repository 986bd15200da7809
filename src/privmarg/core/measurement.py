"""Noisy linear measurements of marginals: the input of every generator."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True, eq=False)
class Measurement:
    """``y = Q · M_attrs(D) + N(0, sigma² I)``, weighted by ``weight`` in a generator's loss.

    ``attrs`` is the clique (any order; the flat marginal is row-major over ``attrs`` as given),
    ``y`` the released answer, ``sigma`` the noise standard deviation (None for an answer that is not
    a noisy release, such as JAM's public proxies), ``query`` the linear map ``Q`` (identity when
    None): a dense array, or a scipy sparse matrix (kept as CSR), such as a grouping of the cells
    (:func:`grouping_query`). ``weight`` is the measurement's weight in the Private-PGM loss ``Σ w‖Q μ − y‖²``; by
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
            q = sp.csr_array(self.query, dtype=float) if sp.issparse(self.query) else np.asarray(self.query, dtype=float)
            if q.ndim != 2 or q.shape[0] != y.size:
                raise ValueError(f"measurement on {self.attrs}: query must have shape ({y.size}, n_cells)")
            object.__setattr__(self, "query", q)


def _grouped_cells(sizes: Sequence[int], maps: Sequence[np.ndarray]) -> np.ndarray:
    """The grouped cell of every cell of a marginal over ``sizes`` (row-major both ways)."""
    rows = np.zeros(1, dtype=np.int64)
    for m in maps:
        rows = (rows[:, None] * (int(m.max()) + 1) + m[None, :]).ravel()
    return rows


def grouping_query(sizes: Sequence[int], groups: Sequence[np.ndarray | None]) -> sp.csr_array:
    """The 0/1 map summing a marginal over attributes of ``sizes`` (flat, row-major) into cells of
    grouped values: ``groups[i]`` maps attribute ``i``'s codes to groups ``0..g_i − 1`` (None keeps
    its codes). The grouped marginal is row-major over the groups. Each cell lands in exactly one
    grouped cell, so the grouped marginal has the marginal's sensitivity."""
    maps = [np.arange(int(k)) if g is None else np.asarray(g, dtype=np.int64) for k, g in zip(sizes, groups)]
    for k, m in zip(sizes, maps):
        if m.shape != (int(k),) or m.min() < 0 or np.unique(m).size != m.max() + 1:
            raise ValueError(f"a grouping of {k} codes must map them onto 0..g-1, every group used")
    rows = _grouped_cells(sizes, maps)
    shape = (int(np.prod([int(m.max()) + 1 for m in maps])), rows.size)
    return sp.csr_array((np.ones(rows.size), (rows, np.arange(rows.size))), shape=shape)


def _group_of_cells(q: Any) -> np.ndarray | None:
    """The row each cell (column) of ``q`` sums into, when ``q`` is a grouping (0/1 entries, every
    cell in exactly one row); None otherwise. The caller's matrix is not changed."""
    q = sp.csc_array(q, copy=True)
    q.sum_duplicates()
    q.eliminate_zeros()
    return q.indices if np.all(np.diff(q.indptr) == 1) and np.all(q.data == 1.0) else None


def is_grouping(q: Any) -> bool:
    """Whether a query sums cells into groups: 0/1 entries, every cell in exactly one row."""
    return q is not None and _group_of_cells(q) is not None


def query_groups(q: Any, sizes: Sequence[int]) -> list[np.ndarray] | None:
    """Per attribute, its codes' groups when ``q`` is a :func:`grouping_query` over ``sizes`` (the
    inverse of that function); None for any other query."""
    if q is None or q.shape[1] != int(np.prod(sizes)):
        return None
    rows = _group_of_cells(q)
    if rows is None:
        return None
    cells = rows.reshape(tuple(int(k) for k in sizes))
    maps = [np.unique(cells[tuple(slice(None) if j == i else 0 for j in range(len(sizes)))],
                      return_inverse=True)[1].astype(np.int64) for i in range(len(sizes))]
    groups = int(np.prod([int(m.max()) + 1 for m in maps]))
    if groups != q.shape[0] or not np.array_equal(_grouped_cells(sizes, maps), rows):
        return None
    return maps


def estimate_total(measurements: Sequence[Measurement], domain: Any = None) -> float:
    """N̂ from the measurements (SPEC §3.2): inverse-variance average of each one's total, at least 1."""
    num = den = 0.0
    for m in measurements:
        if m.sigma is None:  # not a noisy release (a public proxy): says nothing about N
            continue
        if m.query is None or is_grouping(m.query):  # every record counted once
            e, var = m.y.sum(), m.sigma**2 * m.y.size
        else:
            q = m.query.toarray() if sp.issparse(m.query) else m.query
            v, *_ = np.linalg.lstsq(q.T, np.ones(q.shape[1]), rcond=None)
            if not np.allclose(q.T @ v, 1.0, atol=1e-8):
                continue
            e, var = float(v @ m.y), m.sigma**2 * float(v @ v)
        num += e / var
        den += 1.0 / var
    return max(1.0, num / den) if den > 0 else 1.0
