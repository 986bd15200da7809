"""DP bounds of a numeric column nobody can bound publicly (``"bounds": "dp"``, issue #15).

A public, data-independent grid of signed powers of two (:func:`bounds_grid`) is counted through the
preprocessing session with the Gaussian mechanism (one row lies in one bucket: Δ₂ = 1 add/remove, √2
replace-one; plain zCDP, no δ); the bounds are then the edges of the outermost buckets that clearly
stand out of the noise (:func:`bounds_from_counts`, free post-processing). They are bucket edges, so
up to a factor of two looser than the data; the column's bins (PrivTree by default) adapt within them.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from ..privacy import gaussian_sigma, marginal_l2
from ..schema import ColumnSpec

__all__ = ["GRID_MAX_EXP", "FLOAT_MIN_EXP", "TAIL_SHARE", "FALSE_BUCKET_RATE", "bounds_grid", "bounds_from_counts",
           "dp_bounds"]

#: the grid's widest magnitude: values beyond ±2**GRID_MAX_EXP fall in its outermost buckets
GRID_MAX_EXP = 51
#: float columns: the finest magnitude the grid resolves (2**-10 ≈ 0.001); integers stop at 1
FLOAT_MIN_EXP = -10
#: a bucket counts as occupied when its noisy count exceeds this share of the noisy total ...
TAIL_SHARE = 0.001
#: ... and stands out of the noise: the chance that any empty bucket of the grid passes is below this
FALSE_BUCKET_RATE = 1e-3
#: the bounds then grow into the adjacent 1, 2, 4, 8 or 16 buckets while their noisy sum exceeds this many σ
#: of its noise (a false step only loosens a bound by a few buckets next to the data)
EXTEND_SIGMAS = 2.5


def bounds_grid(col: ColumnSpec) -> np.ndarray:
    """Edges of the public grid for ``col`` (fixed by its type alone): ``0``, ``±2^k`` for ``k`` from 0
    (integer) or :data:`FLOAT_MIN_EXP` (float) to :data:`GRID_MAX_EXP`. Bucket ``j`` is
    ``[e_j, e_{j+1})``, the last closed; values are clipped to ``[e_0, e_B]`` before counting."""
    k0 = 0 if col.lattice else FLOAT_MIN_EXP
    pos = 2.0 ** np.arange(k0, GRID_MAX_EXP + 1)
    return np.concatenate([-pos[::-1], [0.0], pos])


def bounds_from_counts(edges: np.ndarray, noisy: np.ndarray, sigma: float, lattice: bool) -> tuple[float, float, dict]:
    """Bounds ``(lo, hi, facts)`` from noisy bucket counts (free post-processing).

    A bucket is occupied when its noisy count exceeds ``max(TAIL_SHARE·N̂, z·σ)``, ``N̂`` the noisy
    total and ``z = Φ̄⁻¹(FALSE_BUCKET_RATE/B)`` over the grid's ``B`` buckets (so an empty bucket far
    out almost never widens the bounds). ``lo`` is the left edge of the lowest occupied bucket, ``hi``
    the right edge of the highest (minus 1 on integer grids: bounds are inclusive). Each bound then
    grows outward by the next ``w`` = 1, 2, 4, 8 or 16 buckets (the first that passes) while their
    noisy sum exceeds ``EXTEND_SIGMAS·σ·√w``: thin mass next to the data (a column near 0 spreads over
    many small buckets) is kept, a far empty bucket is not. Rows outside are clipped to the bounds.
    ``facts``: ``ok`` (False when no bucket is occupied: then the bucket with the largest noisy count
    seeds the bounds), ``visible_rows`` (the threshold), ``rows`` (``N̂``) and ``rows_sd`` (its noise,
    ``σ·√B``); a threshold that is a sizeable share of ``N̂`` means thinly spread values may lie
    outside the bounds.
    """
    c = np.asarray(noisy, dtype=float)
    n_hat = max(float(c.sum()), 0.0)
    z = float(norm.isf(FALSE_BUCKET_RATE / len(c)))
    need = max(TAIL_SHARE * n_hat, z * sigma)
    occupied = np.flatnonzero(c > need)
    ok = len(occupied) > 0
    i, j = (int(occupied[0]), int(occupied[-1])) if ok else (int(np.argmax(c)),) * 2
    i, j = len(c) - 1 - _grow(c[::-1], len(c) - 1 - i, sigma), _grow(c, j, sigma)
    lo, hi = float(edges[i]), float(edges[j + 1])
    return lo, (hi - 1.0 if lattice else hi), {"ok": ok, "visible_rows": float(need), "rows": n_hat,
                                               "rows_sd": float(sigma * np.sqrt(len(c)))}


def _grow(c: np.ndarray, j: int, sigma: float) -> int:
    """Index ``j`` moved up over the adjacent buckets of ``c`` while 1, 2, 4, 8 or 16 of them stand out."""
    while True:
        for w in (1, 2, 4, 8, 16):
            if j + w < len(c) and c[j + 1:j + 1 + w].sum() > EXTEND_SIGMAS * sigma * np.sqrt(w):
                j += w
                break
        else:
            return j


def dp_bounds(session, col: ColumnSpec, rho: float) -> tuple[float, float, dict]:
    """DP bounds of raw numeric column ``col`` through ``session`` (a preprocessing
    :class:`~privmarg.measure.MeasurementSession` whose column is clipped to the grid's range):
    Gaussian counts of the :func:`bounds_grid` buckets at ``rho`` zCDP (σ = Δ₂/√(2ρ)), then
    :func:`bounds_from_counts`. Returns ``(lo, hi, facts)`` on the column's axis."""
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError(f"DP bounds need a positive budget, got rho={rho!r}")
    edges = bounds_grid(col)
    l2 = marginal_l2(session.neighbour)
    sigma = gaussian_sigma(rho, l2)
    counts = session.range_histogram(col.name, edges, np.array([], dtype=float))
    noisy = session.gaussian(counts, sigma, l2, f"DP bounds {col.name}", counts=True)
    return bounds_from_counts(edges, noisy, sigma, col.lattice)
