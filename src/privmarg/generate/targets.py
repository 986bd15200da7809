"""Measurements as per-clique target marginals: what query-matching generators (GSD, GEM, PMW^Pub) fit.

Each measurement becomes noisy cell counts over its clique in canonical (domain) order; a linear
``query`` is undone first (solve, or least squares when it is not square); repeated cliques are
merged by their loss weights. Post-processing only: no privacy cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..core import Domain, Factor, Measurement, StructuralZero, is_grouping
from ..core.measurement import estimate_total


@dataclass
class Target:
    """Noisy counts ``y`` (flat, row-major over ``attrs`` in domain order) and their merged loss
    ``weight`` (Σ of the measurements' weights)."""

    attrs: tuple[str, ...]
    y: np.ndarray
    weight: float


def cell_values(m: Measurement) -> np.ndarray:
    """The noisy counts per cell: ``y`` itself, or ``Q^{-1} y`` (least squares when Q is not square;
    a grouping's count spread evenly over the group's cells)."""
    if m.query is None:
        return m.y
    q = m.query
    if is_grouping(q):  # least squares with the fewest counts: each group's count spread evenly over its cells
        q = sp.csr_array(q)
        size = q.sum(axis=1)
        return q.T @ np.divide(m.y, size, out=np.zeros(size.shape), where=size > 0)
    if sp.issparse(q):
        q = q.toarray()
    if q.shape[0] == q.shape[1]:
        try:
            return np.linalg.solve(q, m.y)
        except np.linalg.LinAlgError:
            pass
    return np.linalg.lstsq(q, m.y, rcond=None)[0]


def marginal_targets(measurements: Sequence[Measurement], domain: Domain) -> list[Target]:
    """One :class:`Target` per distinct measured clique, in first-seen order; empty cliques and
    cliques whose measurements all have loss weight 0 (kept on the record, not fitted: a superseded
    public answer, AIM's public start) are left out."""
    acc: dict[tuple[str, ...], list] = {}
    for m in measurements:
        if not m.attrs:
            continue
        y = cell_values(m)
        if y.size != domain.size(m.attrs):
            raise ValueError(f"measurement on {m.attrs}: expected {domain.size(m.attrs)} cells, got {y.size}")
        canon = domain.canonical(m.attrs)
        y = Factor.from_flat(domain, m.attrs, y).transpose(canon).flat
        w = float(m.weight)
        if canon in acc:
            acc[canon][0] += w * y
            acc[canon][1] += w
        else:
            acc[canon] = [w * y, w]
    return [Target(a, s / w, w) for a, (s, w) in acc.items() if w > 0]


def resolve_total(measurements: Sequence[Measurement], domain: Domain, total: float | None) -> float:
    """The public record count when given, else N̂ from the measurements (SPEC §3.2)."""
    if total is None:
        total = estimate_total(list(measurements), domain)
    total = float(total)
    if not (total > 0 and np.isfinite(total)):
        raise ValueError(f"total must be positive and finite, got {total}")
    return total


def cell_index(codes: np.ndarray, domain: Domain, attrs: Sequence[str]) -> np.ndarray:
    """Flat cell of each record (rows of codes over ``domain``) in the marginal on ``attrs``."""
    return column_cells(codes, [domain.attrs.index(a) for a in attrs], domain.sizes(attrs))


def column_cells(codes: np.ndarray, cols: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    """Flat cell of each record in the marginal on columns ``cols`` of sizes ``sizes``."""
    return np.ravel_multi_index(tuple(codes[:, j] for j in cols), tuple(sizes))


def forbidden(codes: np.ndarray, domain: Domain, zeros: Sequence[StructuralZero]) -> np.ndarray:
    """Boolean per record: does it fall in a structural-zero cell?"""
    bad = np.zeros(len(codes), dtype=bool)
    for z in zeros:
        bad |= z.mask.reshape(-1)[cell_index(codes, domain, z.attrs)]
    return bad


def repair_zeros(codes: np.ndarray, domain: Domain, zeros: Sequence[StructuralZero], rng: np.random.Generator,
                 weights=None) -> np.ndarray:
    """Move records in a structural-zero cell to an allowed cell of that zero's attributes, drawn
    uniformly, or ∝ ``weights(rows, attrs)`` when given: an array rows × cells (per record), or one
    vector of cells shared by every moved record. In place; returns ``codes``. Overlapping zeros:
    repeated until clean (an error if it does not settle)."""
    for _ in range(20):
        clean = True
        for z in zeros:
            mask = z.mask.reshape(-1)
            bad = np.flatnonzero(mask[cell_index(codes, domain, z.attrs)])
            if bad.size == 0:
                continue
            clean = False
            ok = ~mask
            if not ok.any():
                raise ValueError(f"structural zeros on {z.attrs} forbid every cell")
            p = ok.astype(float) if weights is None else np.asarray(weights(bad, z.attrs), dtype=float) * ok
            if p.ndim == 1:  # one distribution for every moved record
                p = p if p.sum() > 0 else ok.astype(float)
                cell = rng.choice(ok.size, bad.size, p=p / p.sum())
            else:
                p = np.where(p.sum(1, keepdims=True) > 0, p, ok.astype(float))
                c = np.cumsum(p, axis=1)
                u = (1.0 - rng.random(bad.size)) * c[:, -1]  # in (0, total]: never a zero-width cell
                cell = np.minimum((c < u[:, None]).sum(1), ok.size - 1)
            cols = [domain.attrs.index(a) for a in z.attrs]
            codes[np.ix_(bad, cols)] = np.column_stack(np.unravel_index(cell, domain.sizes(z.attrs)))
        if clean:
            return codes
    raise ValueError("structural zeros could not all be satisfied (overlapping zeros leave no allowed record?)")


class SharedMargins:
    """Noisy marginals made to agree on the attribute sets they share, by inverse variance.

    For each set ``A`` of ``shared`` held by two or more ``cliques`` (in that order; a clique's
    attributes in domain order, as in ``A``), each holder ``c`` implies a marginal on ``A`` with
    per-cell variance ``σ_c²·n_c/n_A``; :meth:`apply` replaces each holder's by their
    inverse-variance average, spreading the difference evenly over the ``n_c/n_A`` cells behind each
    cell of ``A`` (PrivSyn's consistency step; one pass, sets in order). The per-set constants depend
    only on the cliques, the noise and the public domain, so they are computed once. Post-processing
    of released answers: no privacy cost."""

    def __init__(self, cliques: Sequence[tuple[str, ...]], var: Sequence[float], domain: Domain,
                 shared: Sequence[tuple[str, ...]]):
        self.plan = []
        for a in shared:
            holders = [(c, v) for c, v in zip(cliques, var) if set(a) <= set(c)]
            if len(holders) < 2:
                continue
            ratio = [domain.size(c) / domain.size(a) for c, _ in holders]
            w = np.array([1.0 / (v * r) for (_, v), r in zip(holders, ratio)])
            self.plan.append(([(c, tuple(i for i, b in enumerate(c) if b not in a),
                                [domain[b] if b in a else 1 for b in c], r) for (c, _), r in zip(holders, ratio)],
                              w / w.sum()))

    def apply(self, vals: dict) -> float:
        """Shift ``vals`` (clique → float array of its shape, owned by the caller: updated in place);
        returns the largest cell move."""
        moved = 0.0
        for parts, w in self.plan:
            projs = [vals[c].sum(axis=axes) for c, axes, _, _ in parts]
            mean = np.tensordot(w, np.stack(projs), axes=1)
            for (c, _, shape, r), p in zip(parts, projs):
                diff = (mean - p) / r
                vals[c] += diff.reshape(shape)
                moved = max(moved, float(np.abs(diff).max()))
        return moved
