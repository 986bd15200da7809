"""GUM, PrivSyn's record updates (Zhang et al. 2021, §5; SPEC §10.1): a synthetic table nudged,
marginal by marginal, until its marginals match the noisy ones.

Post-processing only: it reads released measurements (and public facts: the domain, structural
zeros, the record count when public), never the data.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..core import Domain, Measurement, StructuralZero
from ..core.measurement import estimate_total
from .records import RecordsModel
from .targets import SharedMargins, cell_index, column_cells, repair_zeros

Clique = tuple[str, ...]


# ---------------------------------------------------------------------------------- estimates
def clique_estimates(measurements: Sequence[Measurement], domain: Domain) -> dict[Clique, tuple[np.ndarray, float]]:
    """One estimate per clique (domain order, an array shaped over it) with its per-cell variance.

    A measurement with a linear query ``Q`` of full column rank is turned into ``Q⁺y`` (variance
    ``σ²·tr((QᵀQ)⁻¹)/n``); one that is not identifiable on its own is skipped. A public answer
    (no σ) counts with variance ``1/(2·weight)``. Several estimates of one clique are averaged with
    inverse-variance weights."""
    acc: dict[Clique, list] = {}
    for m in measurements:
        if m.sigma is not None:
            var = m.sigma**2
        elif m.weight and m.weight > 0:
            var = 1.0 / (2.0 * m.weight)
        else:
            continue
        y = m.y
        if m.query is not None:
            q = m.query
            if q.shape[0] < q.shape[1]:  # fewer answers than cells (a grouping): not invertible
                continue
            q = q.toarray() if sp.issparse(q) else q
            if np.linalg.matrix_rank(q) < q.shape[1]:
                continue
            y = np.linalg.lstsq(q, y, rcond=None)[0]
            var = var * float(np.trace(np.linalg.inv(q.T @ q))) / q.shape[1]
        attrs = tuple(m.attrs)
        canon = domain.canonical(attrs)
        arr = y.reshape(domain.sizes(attrs)).transpose([attrs.index(a) for a in canon])
        slot = acc.setdefault(canon, [0.0, 0.0])
        slot[0] = slot[0] + arr / var
        slot[1] += 1.0 / var
    return {c: (num / den, 1.0 / den) for c, (num, den) in acc.items()}


def _zero_masks(zeros: Sequence[StructuralZero], domain: Domain, clique: Clique) -> np.ndarray | None:
    """Cells of the marginal on ``clique`` forbidden by a structural zero whose attributes it holds."""
    out = None
    for z in zeros:
        if not set(z.attrs) <= set(clique):
            continue
        canon = domain.canonical(z.attrs)
        m = z.mask.reshape(domain.sizes(z.attrs)).transpose([z.attrs.index(a) for a in canon])
        shape = [domain[a] if a in canon else 1 for a in clique]
        m = np.broadcast_to(m.reshape(shape), domain.sizes(clique))
        out = m.copy() if out is None else out | m
    return out


def norm_sub(x: np.ndarray, total: float, allowed: np.ndarray | None = None) -> np.ndarray:
    """PrivSyn's Norm-Sub: the non-negative ``max(x − δ, 0)`` summing to ``total`` (δ shared by all
    cells; the Euclidean projection onto the scaled simplex), over the ``allowed`` cells only
    (others 0). δ by Michelot's fixed point instead of a sort: from the mean excess (a lower bound on
    δ), ``δ ← (Σ_{v>δ} v − total)/#{v>δ}`` only grows and stops when the cells above δ stop changing
    (exact, a few linear passes; the consistency loop calls this hundreds of times on 3-way tables)."""
    flat = np.asarray(x, dtype=float).ravel()
    ok = None if allowed is None else np.asarray(allowed, dtype=bool).ravel()
    v = flat if ok is None else flat[ok]
    if v.size == 0 or total <= 0:
        return np.zeros(x.shape)
    delta = (v.sum() - total) / v.size
    count = v.size
    cand = v  # the cells still above δ: δ only grows, so later passes read only these
    while True:
        above = cand > delta
        c = int(np.count_nonzero(above))
        if c != count:
            cand = cand[above]
        nxt = (cand.sum() - total) / c
        if c == count or not nxt > delta:
            delta = max(delta, nxt) if c == count else delta
            break
        delta, count = nxt, c
    res = np.subtract(v, delta)
    np.maximum(res, 0.0, out=res)
    if ok is None:
        return res.reshape(x.shape)
    out = np.zeros(flat.size)
    out[ok] = res
    return out.reshape(x.shape)


def make_consistent(est: Mapping[Clique, tuple[np.ndarray, float]], domain: Domain, total: float,
                    zeros: Sequence[StructuralZero] = (), iters: int = 501, tol: float = 1e-6
                    ) -> dict[Clique, np.ndarray]:
    """Noisy marginals made (nearly) consistent and non-negative, all summing to ``total``.

    PrivSyn's procedure, in a vectorised equivalent: each round, for every attribute set ``A``
    shared by two or more marginals (their pairwise intersections, smallest first), the marginals'
    projections onto ``A`` are replaced by their inverse-variance average (the difference spread
    evenly over the cells that sum to each cell of ``A``; variance per ``A``-cell ``σ²·n_r/n_A``),
    then every marginal goes through :func:`norm_sub` (non-negative, total ``total``, structural
    zero cells 0). Rounds stop after ``iters`` or when no cell moves by more than ``tol·total``.
    Consistency can fail only where non-negativity forbids it; Norm-Sub goes last, so the result
    is always a valid distribution per marginal. Post-processing: no privacy cost."""
    cliques = list(est)
    vals = {c: est[c][0].astype(float).copy() for c in cliques}
    var = {c: est[c][1] for c in cliques}
    forbidden = {c: _zero_masks(zeros, domain, c) for c in cliques}
    allowed = {c: None if f is None else ~f for c, f in forbidden.items()}
    common = sorted({tuple(a for a in c1 if a in c2) for c1, c2 in itertools.combinations(cliques, 2)} - {()},
                    key=lambda a: (len(a), domain.axes(a)))
    shared = SharedMargins(cliques, [var[c] for c in cliques], domain, common)
    for c in cliques:
        vals[c] = norm_sub(vals[c], total, allowed[c])
    for _ in range(iters):
        moved = shared.apply(vals)
        for c in cliques:
            new = norm_sub(vals[c], total, allowed[c])
            moved = max(moved, float(np.abs(new - vals[c]).max()))
            vals[c] = new
        if moved <= tol * max(total, 1.0):
            break
    return vals


# ------------------------------------------------------------------------------ record updates
def _largest_remainder(p: np.ndarray, n: int) -> np.ndarray:
    """Integer counts summing to ``n`` closest to ``n·p`` (``p`` a distribution)."""
    raw = p * n
    base = np.floor(raw).astype(np.int64)
    short = n - int(base.sum())
    if short > 0:
        base[np.argsort(-(raw - base), kind="stable")[:short]] += 1
    return base


# Bernoulli pre-selection keeps _SPARE + _SPARE_SD·√quota records of a giving cell beyond its quota
# in expectation (about _SPARE_SD standard deviations of the kept count for large quotas), so the
# exact draw below sorts little more than the leavers and a cell rarely falls short.
_SPARE, _SPARE_SD = 8.0, 4.0


def _grouped(cell: np.ndarray, counts: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the records whose cell is ``wanted``, grouped by cell (ascending; record order
    within a cell), and where each cell's group starts in them (by cell; meaningless elsewhere)."""
    members = np.flatnonzero(wanted[cell])
    key = cell[members]
    if counts.size <= 1 << 16:
        key = key.astype(np.uint16)  # a stable sort of 16-bit keys is a radix sort
    members = members[np.argsort(key, kind="stable")]
    sizes = np.where(wanted, counts, 0)
    return members, np.cumsum(sizes) - sizes


def _uniform_subsets(cell: np.ndarray, counts: np.ndarray, take: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``take[c]`` records of each cell ``c``, drawn uniformly without replacement and
    independently across cells; ascending by cell. ``take`` and ``counts`` are per cell (same
    length, above ``cell.max()``) and ``take <= counts`` (a larger quota yields only ``counts``).

    Each record of a cell with a quota is first kept with probability ``π_c`` (its quota plus a
    margin, over the cell's count); the quota is then drawn uniformly from the kept ones. Given how
    many were kept, the kept set is a uniform subset of the cell, and whether the cell fell short
    depends on that number only, so the draw is uniform; a cell that kept too few (rare, by the
    margin) is drawn from all its records instead. Sorting only the kept records instead of every
    record is the point: this runs once per marginal per GUM iteration."""
    giving = take > 0
    cand = np.flatnonzero(giving[cell])
    ccell = cell[cand]
    k = take.astype(float)
    pi = np.minimum(1.0, (k + _SPARE + _SPARE_SD * np.sqrt(k)) / np.maximum(counts, 1))
    kept = rng.random(cand.size) < pi[ccell]
    cand, ccell = cand[kept], ccell[kept]
    short = giving & (np.bincount(ccell, minlength=take.size) < take)
    if short.any():  # redraw those cells from all their records
        cand = np.concatenate([cand[~short[ccell]], np.flatnonzero(short[cell])])
        ccell = cell[cand]
    order = np.argsort(ccell + 0.5 * rng.random(cand.size))  # by cell, random within
    cand, ccell = cand[order], ccell[order]
    kept_counts = np.bincount(ccell, minlength=take.size)
    start = np.cumsum(kept_counts) - kept_counts
    rank = np.arange(cand.size) - start[ccell]
    return cand[rank < take[ccell]]


def update_records(records: np.ndarray, cols: Sequence[int], sizes: Sequence[int], target: np.ndarray,
                   alpha: float, complete: float, rng: np.random.Generator) -> None:
    """One GUM step on marginal ``cols`` (in place): records leave over-represented cells and are
    rewritten into under-represented ones so the marginal moves towards ``target`` (a distribution).

    With ``q`` the current distribution and ``N`` records: an under cell (``0 < q < p``) asks for
    ``min(p − q, α q)·N`` records, an empty cell with ``p > 0`` for ``α p N``; an over cell gives
    ``min(q − p, β q)·N`` (``β`` by bisection so the two sides balance), chosen at random among its
    records. Empty cells get the records with only ``cols`` rewritten; an under cell gets a
    ``complete`` share as copies of whole records already in it (keeping their other attributes'
    correlations) and the rest with ``cols`` rewritten (PrivSyn's "replace" ratio)."""
    n = records.shape[0]
    ncell = int(np.prod(sizes))
    cell = column_cells(records, cols, sizes)
    counts = np.bincount(cell, minlength=ncell)
    q = counts / n
    p = target.ravel()
    under = np.flatnonzero((q < p) & (q > 0))
    empty = np.flatnonzero((q == 0) & (p > 0))
    over = np.flatnonzero(q > p)
    add = np.rint(np.minimum(p[under] - q[under], alpha * q[under]) * n).astype(np.int64)
    add_empty = np.rint(alpha * p[empty] * n).astype(np.int64)
    need = int(add.sum() + add_empty.sum())
    if need == 0 or over.size == 0:
        return
    excess, qo = q[over] - p[over], q[over]
    lo, hi = 0.0, 1.0
    for _ in range(50):  # smallest β whose removals cover the additions
        mid = (lo + hi) / 2
        if np.minimum(excess, mid * qo).sum() * n < need:
            lo = mid
        else:
            hi = mid
    reduce = np.zeros(ncell, dtype=np.int64)
    reduce[over] = np.minimum(np.rint(np.minimum(excess, hi * qo) * n).astype(np.int64), counts[over])
    leave = rng.permutation(_uniform_subsets(cell, counts, reduce, rng))
    # destinations: empty cells first (partial), then under cells, complete copies then partial
    n_complete = np.rint(complete * add).astype(np.int64)
    dest = np.concatenate([np.repeat(empty, add_empty), np.repeat(under, n_complete), np.repeat(under, add - n_complete)])
    is_copy = np.concatenate([np.zeros(add_empty.sum(), bool), np.ones(n_complete.sum(), bool),
                              np.zeros((add - n_complete).sum(), bool)])
    k = min(leave.size, dest.size)
    if k < dest.size:  # fewer leave than asked: a random subset of the requests is served
        keep = np.sort(rng.choice(dest.size, k, replace=False))
        dest, is_copy = dest[keep], is_copy[keep]
    leave = leave[:k]
    if is_copy.any():
        c = dest[is_copy]
        lends = np.zeros(ncell, dtype=bool)
        lends[c] = True
        members, start = _grouped(cell, counts, lends)
        src = members[start[c] + (rng.random(c.size) * counts[c]).astype(np.int64)]
        records[leave[is_copy]] = records[src]  # sources sit in under cells, never in leaving ones
    part = ~is_copy
    if part.any():
        records[np.ix_(leave[part], list(cols))] = np.stack(np.unravel_index(dest[part], tuple(sizes)), axis=1)


def _own_marginal(records: np.ndarray, domain: Domain):
    """Zero repairs drawn from the synthetic table's own marginal on the zero's attributes."""
    def weights(bad, attrs):
        return np.bincount(cell_index(records, domain, attrs), minlength=domain.size(attrs)).astype(float)
    return weights


# ---------------------------------------------------------------------------------- the model
class GUM:
    """PrivSyn's GUM: records initialised from the noisy 1-way marginals, then updated marginal by
    marginal (:func:`update_records`).

    First the measurements become one non-negative, (nearly) consistent marginal per clique summing
    to the total (:func:`make_consistent`, PrivSyn's consistency + Norm-Sub; ``consistency_iters``
    rounds at most). ``records`` synthetic records (default: the total, rounded) start with each
    attribute drawn independently from its marginal (exact proportions, random order). Then
    ``iters`` (50) iterations: iteration ``t`` uses step ``α_t = decay^⌊t/decay_every⌋``
    (0.84, 20), visits the marginals in decreasing order of their current L1 error and updates
    each, copying whole records for half of the additions on even iterations and for all of them
    on odd ones (the reference's "replace" ratios). Structural-zero cells get no mass in the
    targets, and records left in one are redrawn at the end (:func:`repair_zeros`).

    ``total``: the public record count, else estimated from the measurements. Post-processing: no
    privacy cost. Time ``O(iters·records·#marginals)`` with vectorised steps; memory the records.
    """

    name = "gum"

    def __init__(self, iters: int = 50, records: int | None = None, consistency_iters: int = 501,
                 decay: float = 0.84, decay_every: int = 20):
        for name, v, low in (("iters", iters, 0), ("consistency_iters", consistency_iters, 0),
                             ("decay_every", decay_every, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
        if records is not None and (isinstance(records, bool) or not isinstance(records, int) or records < 1):
            raise ValueError(f"records must be None or an integer >= 1, got {records!r}")
        if not 0 < decay <= 1:
            raise ValueError(f"decay must be in (0, 1], got {decay!r}")
        self.iters, self.records, self.consistency_iters = iters, records, consistency_iters
        self.decay, self.decay_every = float(decay), decay_every

    def get_params(self) -> dict:
        return {"iters": self.iters, "records": self.records, "consistency_iters": self.consistency_iters,
                "decay": self.decay, "decay_every": self.decay_every}

    def model_size_mb(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> None:
        return None  # records, not a junction tree: no model-size limit

    def generate(self, measurements: Sequence[Measurement], domain: Domain, *,
                 zeros: Sequence[StructuralZero] = (), total: float | None = None, warm: Any = None,
                 seed: np.random.SeedSequence | None = None, progress=None, **extra: Any) -> RecordsModel:
        rng = np.random.default_rng(seed)
        say = progress or (lambda msg: None)
        if total is None:
            total = estimate_total(measurements)
        total = max(float(total), 1.0)
        marg = make_consistent(clique_estimates(measurements, domain), domain, total, zeros, self.consistency_iters)
        say(f"GUM: {len(marg)} marginals made consistent")
        n = self.records or max(1, int(round(total)))
        records = np.empty((n, len(domain)), dtype=np.int64)
        for j, a in enumerate(domain.attrs):
            holders = [c for c in marg if a in c]
            if holders:
                c = min(holders, key=lambda c: (len(c), domain.axes(c)))
                p = marg[c].sum(axis=tuple(i for i, b in enumerate(c) if b != a))
            else:
                p = np.ones(domain[a])
            p = p / p.sum() if p.sum() > 0 else np.full(domain[a], 1.0 / domain[a])
            records[:, j] = rng.permutation(np.repeat(np.arange(domain[a]), _largest_remainder(p, n)))
        plan = [(c, [domain.attrs.index(a) for a in c], domain.sizes(c), marg[c].ravel() / total)
                for c in marg if len(c) > 0]
        for t in range(self.iters):
            alpha = self.decay ** (t // self.decay_every)
            errors = [np.abs(np.bincount(column_cells(records, cols, sizes), minlength=p.size) / n - p).sum()
                      for _, cols, sizes, p in plan]
            for i in np.argsort(errors, kind="stable")[::-1]:
                _, cols, sizes, p = plan[i]
                update_records(records, cols, sizes, p, alpha, 0.5 if t % 2 == 0 else 1.0, rng)
            if t % 10 == 9:
                say(f"GUM: iteration {t + 1}/{self.iters}, mean L1 error {np.mean(errors):.4f}")
        repair_zeros(records, domain, list(zeros), rng, _own_marginal(records, domain))
        return RecordsModel(domain, total, records)
