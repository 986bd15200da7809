"""The default binning of a wide numeric column: PrivTree leaves, heavy values found by DP counts,
noisy leaf counts, then leaves merged into bins of equal noisy mass (issue #15). Charged to the
caller's session; everything after the counts is post-processing."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ..privacy import gaussian_sigma, marginal_l2
from ..privacy.discovery import keys_at_risk, threshold_for
from ..schema import ColumnSpec
from ..schema.column import HEAVY_FIXED_MAX_VALUES, HEAVY_MAX_ATOMS
from .binning import bin_index, merge_leaves, privtree_edges, quantile_grid, resolution_bins
from .codec import ColumnCodec


#: integer columns with at most this many values (binned adaptively by default) look for heavy values
#: by fixed-domain counts; wider ones and float columns by thresholded counts (δ)
HEAVY_MAX_VALUES = HEAVY_FIXED_MAX_VALUES


#: expected number of values of a column that pass the heavy-value test by noise alone
HEAVY_FALSE_VALUES = 0.05


#: a heavy value found by the search keeps its own code when it holds at least 1/this of an average
#: bin's rows (N̂ / the resolution, :func:`_keep_heavy`)
HEAVY_BIN_FRACTION_INV = 4.0


#: PrivTree's depth cap for the leaves of an adaptive column (they are merged into at most ``bins``
#: bins afterwards, so the cap on bins need not cap the leaves: dense data gets narrow leaves, and
#: decoding within a bin follows them; PrivTree's bias stops the tree where data is thin)
ADAPTIVE_LEAF_DEPTH = 16


def _adaptive_codec(session, col: ColumnSpec, rho: float, rho_model: float, columns: int,
                    delta: float = 0.0) -> ColumnCodec:
    """The default binning of a wide numeric column (issue #15); charges ``rho`` zCDP, in two halves,
    or in three thirds where it looks for heavy values (an integer column of at most
    :data:`HEAVY_MAX_VALUES` values; a float or wider integer column when ``delta`` > 0, which it then
    spends as the approximate δ of the thresholded counts; ``"heavy_values": false``: never).
    ``binning: quantiles`` skips steps 1 and 2 (a public fine grid, :func:`~.binning.quantile_grid`,
    instead of the PrivTree leaves; all its atoms kept) and spends the whole ``rho`` on step 3; it
    merges into ``bins`` bins when given.

    1. PrivTree (θ = 0, depth cap :data:`ADAPTIVE_LEAF_DEPTH`, not ``log2 bins``) splits the public range
       into leaves, finest where the data is dense (its bias stops it where data is thin); the schema's
       atoms whose leaf reached the width of ``log2 bins`` levels keep codes of their own.
    2. Integer columns: the noisy count of every value (:func:`_heavy_values`); float columns (and
       wider integer ranges): thresholded noisy counts of the values present
       (:func:`_threshold_heavy_values`). Values far above the noise (point masses: a common seat
       count, a delay of 0 minutes, a rounded grid, an imputed constant) become atoms too, at most
       :data:`~privmarg.schema.column.HEAVY_MAX_ATOMS` of them; the bins below shrink by as many, by
       ``ColumnSpec.heavy_in_bins`` at most (the schema's bound on codes, ``ColumnSpec.base_size``,
       counts the rest).
    3. The Gaussian mechanism (Δ₂ = 1 add/remove, √2 replace-one) releases the count of each leaf
       (atom values left out) and of each atom.
    4. Free post-processing: leaves are merged into about :func:`resolution_bins` bins (at most
       ``bins`` less the heavy atoms) of equal noisy mass (DP quantiles), so each 2-way marginal cell
       can hold more rows than noise; decoding draws a leaf within the bin in proportion to its noisy
       count, then a value within the leaf (never an atom of an integer column), so a wide tail bin
       does not spread its rows evenly up to the bound.
    """
    fixed = col.binning != "quantiles" and col.heavy_fixed
    heavy = fixed or (col.binning != "quantiles" and col.heavy_threshold and delta > 0)
    l2 = marginal_l2(session.neighbour)
    n_heavy, found = 0, np.zeros(0)
    if col.binning == "quantiles":  # a public fine grid instead of the tree: the whole rho on its counts
        leaves, atoms, rho_counts = quantile_grid(col), np.asarray(col.atoms, dtype=float), rho
    else:
        part = rho / 3 if heavy else rho / 2
        leaves = privtree_edges(session, col.name, col, part, max_depth=ADAPTIVE_LEAF_DEPTH)
        atoms = _dense_atoms(col, leaves, np.asarray(col.atoms, dtype=float))
        if heavy:
            found = (_heavy_values(session, col, part, l2, HEAVY_MAX_ATOMS) if fixed
                     else _threshold_heavy_values(session, col, part, l2, HEAVY_MAX_ATOMS, delta))
            found = np.setdiff1d(found, atoms)
            atoms = np.union1d(atoms, found)
        rho_counts = rho - 2 * part if heavy else rho - part
    sigma = gaussian_sigma(rho_counts, l2)
    counts = session.range_histogram(col.name, leaves, atoms)
    noisy = session.gaussian(counts, sigma, l2, f"bin counts {col.name}", counts=True)
    rows = float(np.maximum(noisy, 0.0).sum())
    target = resolution_bins(rows, columns, rho_model)
    leaf_w = np.maximum(noisy[:len(leaves) - 1], 0.0)
    if len(found):
        atoms, back = _keep_heavy(atoms, noisy[len(leaves) - 1:], found, leaves, rows / (HEAVY_BIN_FRACTION_INV * target))
        leaf_w += back
        n_heavy = int(np.isin(found, atoms).sum())
    if heavy and col.lattice and len(atoms):  # a leaf whose integers are all atoms holds no other value
        inside = np.searchsorted(atoms, leaves[1:], side="left") - np.searchsorted(atoms, leaves[:-1], side="left")
        leaf_w[np.diff(leaves) <= inside] = 0.0
    if col.binning == "quantiles":  # bins when given; the cap on the grid's merged cells otherwise
        target = min(target, col.bins) if col.adaptive else col.bins
    else:
        target = min(target, col.bins - min(n_heavy, col.heavy_in_bins))
    group = merge_leaves(leaf_w, target)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    edges = np.r_[leaves[starts], leaves[-1]]
    tot = np.bincount(group, weights=leaf_w)
    share = np.where(tot[group] > 0, leaf_w / np.where(tot[group] > 0, tot[group], 1.0), 0.0)
    width = np.diff(leaves)
    wtot = np.bincount(group, weights=width)
    share = np.where(tot[group] > 0, share, width / wtot[group])  # no noisy mass: by width
    within = np.cumsum(share) - np.r_[0.0, np.cumsum(np.bincount(group, weights=share))][group]
    cum = group + np.minimum(within, 1.0)
    cum[np.r_[starts[1:] - 1, len(group) - 1]] = np.arange(len(starts)) + 1.0  # each bin's last leaf ends at j+1
    codec = ColumnCodec(col, edges=edges, atoms=atoms, rho=rho, leaf_edges=leaves, leaf_cum=cum,
                        leaf_scale=_leaf_decay(leaf_w, width))
    codec.rows_estimate = rows
    return codec


def _heavy_values(session, col: ColumnSpec, rho: float, l2: float, most: int) -> np.ndarray:
    """Integer values that hold many rows (point masses: a common seat count, a delay of 0 minutes),
    to be coded exactly as atoms instead of being smeared over a bin; charges ``rho`` zCDP.

    The Gaussian mechanism (Δ₂ = ``l2``) releases the count of every integer of the public range
    ``min..max`` (a fixed domain, so no δ is needed); a value is heavy when its noisy count exceeds
    ``z·σ`` with ``z`` the normal quantile at which :data:`HEAVY_FALSE_VALUES` values are expected to
    pass by noise alone (``Pr[N(0,1) > z] = HEAVY_FALSE_VALUES / values``: a false atom far in a tail
    would collect noise mass there). At most ``most``, the largest first. The selection is
    post-processing of the noisy counts: free."""
    values = np.arange(col.lo, col.hi + 2, dtype=float)  # one interval [v, v+1) per integer
    sigma = gaussian_sigma(rho, l2)
    counts = session.range_histogram(col.name, values, np.array([], dtype=float))
    noisy = session.gaussian(counts, sigma, l2, f"value counts {col.name}", counts=True)
    z = NormalDist().inv_cdf(1.0 - HEAVY_FALSE_VALUES / len(counts))
    hit = np.flatnonzero(noisy > z * sigma)
    hit = hit[np.argsort(-noisy[hit], kind="stable")[:most]]
    return np.sort(values[hit])


def _threshold_heavy_values(session, col: ColumnSpec, rho: float, l2: float, most: int,
                            delta: float) -> np.ndarray:
    """Values of a float (or wide integer) column that hold many rows, to be coded exactly as atoms;
    ``rho`` zCDP and ``delta`` approximate. No public list of the values exists, so the exact values
    present are released by thresholded Gaussian counts (:meth:`MeasurementSession.frequent_values`):
    σ = Δ₂/√(2ρ) (Δ₂ = ``l2``), ``τ = 1 + σ·Φ̄⁻¹(δ/keys_at_risk)`` (:func:`threshold_for`), so the
    ledger holds ``ρ`` and ``approx_delta = δ`` and both recompute. At most ``most``, the largest noisy
    counts first (free post-processing)."""
    sigma = gaussian_sigma(rho, l2)
    tau = threshold_for(sigma, delta, keys_at_risk(session.neighbour), discrete=session.noise == "discrete")
    keys, noisy = session.frequent_values(col.name, sigma, l2, tau, f"heavy values {col.name}")
    top = np.argsort(-noisy, kind="stable")[:most]
    return np.sort(np.asarray(keys, dtype=float)[top])


def _leaf_decay(counts: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Within-leaf shape for decoding (free post-processing of noisy leaf counts): a leaf less dense
    than its denser neighbour gets a density that starts at that neighbour's level at the shared edge
    and decays exponentially away from it, holding the leaf's count; others stay uniform. Returns the
    decay length (+: from the left edge, −: from the right edge; ``inf``: uniform)."""
    d = counts / width
    dl = np.r_[0.0, d[:-1]]
    dr = np.r_[d[1:], 0.0]
    head = np.maximum(dl, dr)
    sign = np.where(dl >= dr, 1.0, -1.0)
    decay = (head > d * (1 + 1e-9)) & (counts > 0)
    scale = np.full(len(counts), np.inf)
    if decay.any():
        c, w, h = counts[decay], width[decay], head[decay]
        lo, hi = np.log(w * 1e-6), np.log(w * 1e6)  # solve h·s·(1 − e^(−w/s)) = c for s (increasing in s)
        for _ in range(80):
            mid = (lo + hi) / 2
            sm = np.exp(mid)
            big = h * sm * (-np.expm1(-w / sm)) > c
            hi, lo = np.where(big, mid, hi), np.where(big, lo, mid)
        scale[decay] = np.exp((lo + hi) / 2)
    return sign * scale


def _keep_heavy(atoms: np.ndarray, atom_counts: np.ndarray, found: np.ndarray, leaves: np.ndarray,
                least: float) -> tuple[np.ndarray, np.ndarray]:
    """(the atoms kept, the noisy mass to add to each leaf): a heavy value found by the search keeps a
    code of its own only when its noisy count holds ``least`` rows (the caller: a quarter of an
    average bin's, N̂ / (4·resolution)). A lighter one goes back into its leaf: its 2-way marginals
    against another finely coded column would hold less than noise a cell. (A column of many
    repeated values, diamonds' x in hundredths of a mm, found 256 heavy values at ε = 10, so AIM
    could never afford to measure two such columns together, and released them nearly independent.) The schema's atoms and
    PrivTree's dense ones always stay. Post-processing of DP counts: free."""
    light = np.isin(atoms, found) & (atom_counts < least)
    back = np.zeros(len(leaves) - 1)
    if light.any():
        j = np.clip(np.searchsorted(leaves, atoms[light], side="right") - 1, 0, len(leaves) - 2)
        back = np.bincount(j, weights=np.maximum(atom_counts[light], 0.0), minlength=len(leaves) - 1)
    return atoms[~light], back


def _dense_atoms(col: ColumnSpec, edges: np.ndarray, atoms: np.ndarray) -> np.ndarray:
    """The atoms PrivTree found dense: those whose leaf the tree split down to its finest width (its
    depth cap). An atom in a wider leaf holds few rows; a code of its own would only collect noise
    (mass the generator then puts exactly at a bound, an outlier). Post-processing of the tree: free."""
    if not len(atoms):
        return atoms
    depth = int(math.floor(math.log2(col.bins)))
    span = (col.hi + 1 - col.lo) if col.lattice else (col.hi - col.lo)
    finest = span / 2 ** depth
    if col.lattice:
        finest = max(1.0, math.ceil(finest))
    j = bin_index(atoms, edges)
    width = edges[j + 1] - edges[j]
    return atoms[width <= finest * (1 + 1e-9)]


def _fewer_codes_hint(spec: ColumnSpec) -> str:
    """What would give a column fewer codes, in the schema's own terms."""
    if spec.numeric and spec.binning != "exact" and "bins" in spec.to_dict():
        return "drop \"bins\" to let PrivTree size the bins, or give fewer"
    if spec.numeric:
        return "bin it: \"binning\": \"privtree\" lets the budget size the bins"
    return "list fewer categories, or set \"merge_rare\": true"
