"""DP rare-category merging with the dual threshold (Chen et al. Algorithm 1; SPEC §9.2)."""

from __future__ import annotations

import numpy as np

from ..privacy import gaussian_sigma, marginal_l2

__all__ = ["RARE_THRESHOLD", "rare_categories"]

RARE_THRESHOLD = 0.002  # θ: a category is rare below 0.2% of the (noisy) row count


def rare_categories(session, column: str, k: int, rho: float, *, threshold: float = RARE_THRESHOLD,
                    what: str = "") -> np.ndarray:
    """Indices of the rare values among ``0..k-1`` (the public domain), or an empty array.

    Releases the histogram of raw column ``column`` through ``session`` (a preprocessing
    :class:`~privmarg.measure.MeasurementSession`; missing values not counted) over the whole public domain
    with the Gaussian mechanism at ``rho`` zCDP (Δ₂ = 1 add/remove, √2 replace-one), then calls rare
    every value whose noisy count is at most ``max(threshold·N̂, 3σ)``, ``N̂`` the noisy total. Fewer
    than two rare values are left alone (merging one value changes nothing).
    """
    l2 = marginal_l2(session.neighbour)
    sigma = gaussian_sigma(rho, l2)
    noisy = session.gaussian(session.histogram(column, k), sigma, l2, what or "rare-category counts", counts=True)
    n_hat = float(noisy.sum())
    rare = np.flatnonzero(noisy <= max(threshold * n_hat, 3.0 * sigma))
    return rare if len(rare) >= 2 else np.array([], dtype=np.int64)
