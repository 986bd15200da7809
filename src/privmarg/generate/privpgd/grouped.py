"""PrivPGD's targets on grouped values: marginals measured over columns whose codes were merged into
groups (a grouping query, :func:`~privmarg.core.measurement.grouping_query`), made consistent with
the fine marginals, fitted by particles snapped to their group, and the particles then placed inside
their groups by the fine 1-way marginals. All post-processing of released measurements.

Why: a 2-way marginal of two 100-value columns has 10,000 cells, and at PrivPGD's even split its
noise sums to several times N; the same pair over 24 groups each has 576 cells and a quarter of N
in noise (benchmarks/history/methods.md, "PrivPGD on grouped 2-way marginals").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ...core import Domain, Measurement, grouping_query, query_groups
from .geometry import bin_centres


@dataclass
class Grouped:
    """One grouped marginal: its clique (domain order), noisy counts over the groups (row-major over
    ``sizes``, the group counts), and its noise σ (merged measurements: ``1/√(2·Σw)``)."""

    attrs: tuple[str, ...]
    y: np.ndarray
    sigma: float
    sizes: tuple[int, ...]


def split_grouped(measurements: Sequence[Measurement], domain: Domain
                  ) -> tuple[list[Measurement], list[Grouped], dict[str, np.ndarray]]:
    """(the measurements fitted as fine marginals, the grouped marginals, each grouped attribute's
    code → group map). A measurement is kept grouped when its query is a product grouping whose
    every attribute either keeps its codes in order or is grouped, the same way by all of them; any
    other stays with the fine ones (whose targets spread a group's count evenly over its cells).
    Loss weight 0 is left out; repeated grouped cliques of one shape are merged by their weights."""
    found = []
    maps: dict[str, np.ndarray] = {}
    clash: set[str] = set()
    for m in measurements:
        g = query_groups(m.query, domain.sizes(m.attrs)) if m.query is not None and m.weight else None
        if g is not None and any(_reordered(domain, a, x) for a, x in zip(m.attrs, g)):
            g = None  # codes kept but permuted: the fine path undoes the query
        coarse = g is not None and any(_merges(domain, a, x) for a, x in zip(m.attrs, g))
        found.append(g if coarse else None)
        for a, x in zip(m.attrs, g if coarse else ()):
            if not _merges(domain, a, x):
                continue
            if a in maps and not np.array_equal(maps[a], x):
                clash.add(a)
            maps.setdefault(a, x)
    fine, acc = [], {}
    for m, g in zip(measurements, found):
        if g is None or any(a in clash for a, x in zip(m.attrs, g) if _merges(domain, a, x)):
            fine.append(m)
            continue
        canon = domain.canonical(m.attrs)
        order = [m.attrs.index(a) for a in canon]
        sizes = [int(x.max()) + 1 for x in g]
        y = np.asarray(m.y, dtype=float).reshape(sizes).transpose(order).ravel()
        slot = acc.setdefault((canon, tuple(sizes[i] for i in order)), [0.0, 0.0])
        slot[0] = slot[0] + m.weight * y
        slot[1] += float(m.weight)
    grouped = [Grouped(c, num / w, 1.0 / np.sqrt(2.0 * w), sizes) for (c, sizes), (num, w) in acc.items()]
    used = {a for t in grouped for a in t.attrs}
    return fine, grouped, {a: x for a, x in maps.items() if a in used and a not in clash}


def _merges(domain: Domain, attr: str, groups: np.ndarray) -> bool:
    """Whether a grouping of the attribute's codes merges any of them."""
    return int(groups.max()) + 1 < domain[attr]


def _reordered(domain: Domain, attr: str, groups: np.ndarray) -> bool:
    """Whether a grouping keeps every code on its own but not in their order."""
    return not _merges(domain, attr, groups) and not np.array_equal(groups, np.arange(domain[attr]))


def consistent_mixed(items: list[tuple[tuple[str, ...], np.ndarray, float]], sizes: list[tuple[int, ...]],
                     domain: Domain, maps: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Fine and grouped marginals made to agree on their totals and on every attribute's margin
    (least squares under their noise), PrivSyn's consistency step with groups.

    ``items``: (clique in domain order, flat noisy counts, σ); ``sizes``: each one's shape (a grouped
    attribute has its group count). Totals first: the inverse-variance average, spread evenly. Then
    per attribute: the fine holders' margins are averaged (per value), the grouped holders' (per
    group), and the two combined per group by their variances; the fine values take their group's
    correction evenly. Each holder is shifted to that margin, the difference spread evenly over the
    cells behind each value or group (with equal totals, a shift along one attribute leaves the
    others' margins as they were). Returns the shifted counts."""
    arrs = [np.asarray(y, dtype=float).reshape(s).copy() for (_, y, _), s in zip(items, sizes)]
    var = [max(float(sig) ** 2, 1e-300) for _, _, sig in items]
    cells = [int(np.prod(s)) for s in sizes]
    wt = np.array([1.0 / (n * v) for n, v in zip(cells, var)])
    totals = np.array([a.sum() for a in arrs])
    t_bar = float(wt @ totals / wt.sum())
    for a, t, n in zip(arrs, totals, cells):
        a += (t_bar - t) / n
    for attr in domain.attrs:
        holders = [(i, items[i][0].index(attr)) for i in range(len(items)) if attr in items[i][0]]
        if len(holders) < 2:
            continue
        g = maps.get(attr)
        fine = [(i, ax) for i, ax in holders if sizes[i][ax] == domain[attr]]
        coarse = [(i, ax) for i, ax in holders if sizes[i][ax] != domain[attr]]
        x_f = _average(arrs, fine, var, cells, sizes)
        x_c = _average(arrs, coarse, var, cells, sizes)
        if x_c is not None and x_f is not None:
            (mf, vf), (mc, vc) = x_f, x_c
            members = np.bincount(g, minlength=mc.size)
            yf = np.bincount(g, weights=mf, minlength=mc.size)  # the fine estimate's group totals
            t = (yf / (members * vf) + mc / vc) / (1.0 / (members * vf) + 1.0 / vc)
            t += (mf.sum() - t.sum()) / t.size  # the common total again (unequal groups weigh unequally)
            fine_target, coarse_target = mf + ((t - yf) / members)[g], t
        else:
            fine_target = None if x_f is None else x_f[0]
            coarse_target = None if x_c is None else x_c[0]
        for group, target in ((fine, fine_target), (coarse, coarse_target)):
            for i, ax in group:
                _shift(arrs[i], ax, target)
    return [a.ravel() for a in arrs]


def _average(arrs, holders, var, cells, sizes):
    """Inverse-variance average of the holders' margins on their axis, and its per-value variance;
    None without holders."""
    if not holders:
        return None
    w = np.array([1.0 / (var[i] * cells[i] / sizes[i][ax]) for i, ax in holders])
    margins = [_margin(arrs[i], ax) for i, ax in holders]
    return np.tensordot(w / w.sum(), np.stack(margins), axes=1), 1.0 / w.sum()


def _margin(arr: np.ndarray, ax: int) -> np.ndarray:
    return arr.sum(axis=tuple(j for j in range(arr.ndim) if j != ax))


def _shift(arr: np.ndarray, ax: int, target: np.ndarray) -> None:
    behind = arr.size / arr.shape[ax]
    shape = [1] * arr.ndim
    shape[ax] = arr.shape[ax]
    arr += ((target - _margin(arr, ax)) / behind).reshape(shape)


def group_centres(k: int, groups: np.ndarray) -> np.ndarray:
    """Each group's position in the embedding: the mean of its codes' bin centres."""
    n = int(groups.max()) + 1
    return np.bincount(groups, weights=bin_centres(k), minlength=n) / np.bincount(groups, minlength=n)


def grouped_centres(domain: Domain, attrs: tuple[str, ...], kept: Sequence[bool],
                    maps: dict[str, np.ndarray]) -> np.ndarray:
    """The embedded cells of a grouped marginal, ``(cells) × r``, row-major (``kept`` attributes, over
    their own codes, at their bin centres)."""
    axes = [bin_centres(domain[a]) if keep else group_centres(domain[a], maps[a]) for a, keep in zip(attrs, kept)]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([x.ravel() for x in mesh], axis=-1)


def grouped_valid(valid: np.ndarray | None, domain: Domain, attrs: tuple[str, ...], sizes: Sequence[int],
                  maps: dict[str, np.ndarray]) -> np.ndarray | None:
    """A grouped cell (``sizes``: the marginal's shape) may carry mass when any of its cells may."""
    if valid is None:
        return None
    groups = [maps[a] if n != domain[a] else None for a, n in zip(attrs, sizes)]
    return grouping_query(domain.sizes(attrs), groups) @ valid.astype(float) > 0


class Snap:
    """Particles moved to their group's position on the grouped attributes (the loss of a grouped
    target reads only which group a particle is in; its gradient moves the particle itself)."""

    def __init__(self, domain: Domain, maps: dict[str, np.ndarray], device, dtype):
        self.cols = [(domain.attrs.index(a), domain[a],
                      torch.as_tensor(group_centres(domain[a], g)[g], device=device, dtype=dtype))
                     for a, g in maps.items()]

    def beside(self, Z: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``out`` (m × 2d) filled with the particles, then their snapped copy (a grouped target's
        columns index the copy at ``d + j``)."""
        d = Z.shape[1]
        out[:, :d] = Z
        out[:, d:] = Z
        for j, k, lut in self.cols:
            out[:, d + j] = lut[torch.clamp((Z[:, j] * k).long(), 0, k - 1)]
        return out


def place_in_groups(Z: torch.Tensor, domain: Domain, maps: dict[str, np.ndarray],
                    one_way: dict[str, np.ndarray]) -> torch.Tensor:
    """Each grouped attribute with a fine 1-way target: the particles of each group spread over the
    group's codes by that target's shares, in their current order (a monotone rearrangement inside
    the group, so every grouped target's loss is unchanged). Positions stay inside their code's bin."""
    Z = Z.clone()
    for a, g in maps.items():
        p = one_way.get(a)
        if p is None:
            continue
        j, k = domain.attrs.index(a), domain[a]
        z = Z[:, j].cpu().numpy().astype(np.float64)
        grp = g[np.clip((z * k).astype(np.int64), 0, k - 1)]
        out = z.copy()
        for b in range(int(g.max()) + 1):
            idx = np.flatnonzero(grp == b)
            if idx.size == 0:
                continue
            codes = np.flatnonzero(g == b)
            q = np.maximum(np.asarray(p, dtype=float)[codes], 0.0)
            q = q / q.sum() if q.sum() > 0 else np.full(codes.size, 1.0 / codes.size)
            cdf = np.cumsum(q)
            cdf[-1] = 1.0
            order = idx[np.argsort(z[idx], kind="stable")]
            t = (np.arange(idx.size) + 0.5) / idx.size
            c = np.minimum(np.searchsorted(cdf, t, side="right"), codes.size - 1)
            below = np.concatenate([[0.0], cdf])[c]
            # inside the bin, clear of its edges in float32 (ceil(k·z) − 1 reads the code back)
            u = np.clip((t - below) / np.maximum(q[c], 1e-12), 1e-3, 1.0 - 1e-3)
            out[order] = (codes[c] + u) / k
        Z[:, j] = torch.as_tensor(out, dtype=Z.dtype, device=Z.device)
    return Z
