"""Discretising numeric columns: uniform bins on public bounds (free) and PrivTree (DP; SPEC §9.1, §9.3).

Bins are given by their edges ``e_0 < e_1 < … < e_B`` on the column's encoding axis (numbers for
float columns, whole units for integer and datetime columns):

* float columns: bin ``j`` is ``[e_j, e_{j+1})``, the last bin closed (``e_B = max``);
* *lattice* columns (integer, datetime): edges are integers, bin ``j`` holds the integers
  ``e_j .. e_{j+1}-1`` (``e_0 = min``, ``e_B = max + 1``), so every bin holds at least one value.
"""

from __future__ import annotations

import math

import numpy as np

from ..privacy.privtree import PRIVTREE_FANOUT, privtree_parameters
from ..schema import ColumnSpec

__all__ = ["uniform_edges", "bin_index", "privtree_edges", "privtree_parameters", "PRIVTREE_FANOUT",
           "resolution_bins", "merge_leaves", "quantile_grid", "QUANTILE_CELLS", "CELL_SIGMAS"]

#: ``binning: quantiles``: cells of the fine public grid whose noisy counts give the quantiles
QUANTILE_CELLS = 256
#: rows an average cell of a 2-way marginal should hold, in units of the noise σ (see
#: :func:`resolution_bins`; was 1 before issue 15's v4, benchmarks/RESULTS.md)
CELL_SIGMAS = 4.0


def uniform_edges(col: ColumnSpec) -> np.ndarray:
    """Edges of ``col.bins`` equal-width bins on the schema's bounds (public: no data involved).

    Lattice columns with at most ``bins`` values, and ``exact`` columns, get one bin per value.
    """
    lo, hi, bins = col.lo, col.hi, col.bins
    if col.binning == "exact":
        return np.arange(lo, hi + 2, dtype=float)
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


def privtree_edges(session, column: str, col: ColumnSpec, rho: float, threshold: float = 0.0,
                   max_depth: int | None = None) -> np.ndarray:
    """PrivTree bins for ``col`` through ``session`` (a preprocessing
    :class:`~privmarg.measure.MeasurementSession` over the raw columns); charges ``rho`` first.

    The root interval is the schema's public range (never the data's); at most ``col.bins`` bins
    (depth ``floor(log2 bins)``, or ``max_depth`` when given: leaves to be merged into bins later);
    ``threshold``: PrivTree's θ in rows (public); see :func:`privmarg.privacy.privtree.privtree_split`.
    """
    hi_end = col.hi + 1 if col.lattice else col.hi
    depth = int(math.floor(math.log2(col.bins))) if max_depth is None else int(max_depth)
    return session.privtree(column, col.lo, hi_end, lattice=col.lattice, max_depth=depth, rho=rho,
                            what=f"PrivTree bins {col.name}", threshold=threshold)


def resolution_bins(rows: float, columns: int, rho_model: float) -> float:
    """How many bins per column a 2-way marginal can resolve: ``sqrt(rows / (CELL_SIGMAS · sigma))``.

    ``sigma = sqrt(columns / rho_model)`` is the Gaussian noise (rows) of one measurement when a
    synthesizer spends ``rho_model`` zCDP on ``2·columns`` marginals (a 1-way and a 2-way per column);
    a ``B × B`` marginal holds about ``rows / B²`` rows a cell *on average*, but two dependent columns
    put their rows in a few cells and leave the rest empty, and the estimate keeps part of the
    positive noise of every empty cell (far from the diagonal, where it hurts a correlation most). So
    the average cell is asked to hold :data:`CELL_SIGMAS` σ of rows. ``rows`` may be a noisy count.
    Pure arithmetic on public or DP inputs: free.
    """
    if rows <= 0 or columns <= 0 or not rho_model > 0:
        return 1.0
    sigma = math.sqrt(columns / rho_model)
    return max(1.0, math.sqrt(rows / (CELL_SIGMAS * sigma)))


def merge_leaves(weights: np.ndarray, bins: float) -> np.ndarray:
    """Group index of each leaf: contiguous groups of about equal weight, at most ``ceil(bins)`` of them
    (quantiles of the weights' cumulative sum; free post-processing of noisy counts)."""
    c = np.maximum(np.asarray(weights, dtype=float), 0.0)
    total = c.sum()
    b = max(1, int(math.ceil(bins)))
    if total <= 0 or b == 1:
        return np.zeros(len(c), dtype=np.int64)
    mid = np.cumsum(c) - c / 2
    g = np.minimum(b - 1, np.floor(mid * b / total)).astype(np.int64)
    return np.unique(g, return_inverse=True)[1].astype(np.int64)


def quantile_grid(col: ColumnSpec) -> np.ndarray:
    """The fine public grid of ``binning: quantiles`` (fixed by the bounds alone): :data:`QUANTILE_CELLS`
    equal-width cells on ``[min, max]``, or one cell per value on a lattice column with fewer values.
    Its noisy cell counts (Gaussian, one row in one cell) are merged by :func:`merge_leaves` into bins
    of about equal noisy mass: DP quantiles."""
    lo, hi = col.lo, col.hi
    if col.lattice:
        if hi - lo + 1 <= QUANTILE_CELLS:
            return np.arange(lo, hi + 2, dtype=float)
        return np.unique(np.floor(np.linspace(lo, hi + 1, QUANTILE_CELLS + 1)))
    return np.linspace(lo, hi, QUANTILE_CELLS + 1)
