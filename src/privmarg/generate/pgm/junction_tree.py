"""Junction trees over attribute cliques (greedy elimination, maximal cliques, spanning tree).

Cliques are handled as integer bit masks over the domain's attributes: AIM asks for the size of
hundreds of hypothetical models per round, so this must stay cheap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ...core import Domain

MB = 2**20
TABLE_ATTRS = 20  # domains up to this wide keep every mask's cell count in one array (8 MB)


class _Masks:
    """Bit-mask helpers for one domain (cell counts cached per mask)."""

    def __init__(self, domain: Domain):
        self.domain = domain
        self.index = {a: i for i, a in enumerate(domain.attrs)}
        self.sizes = domain.shape
        self._cells: dict[int, int] = {0: 1}
        self._table: np.ndarray | None = None
        self.sizes_mb: dict[frozenset[int], float] = {}  # model_size_mb by maximal clique masks
        # every cell count, and a sum of one per attribute, fits an int64: sizes in numpy are exact
        self.exact_int64 = len(self.sizes) <= 62 and math.prod(int(s) for s in self.sizes) * len(self.sizes) < 2**63

    def mask(self, attrs: Iterable[str]) -> int:
        m = 0
        for a in attrs:
            m |= 1 << self.index[a]
        return m

    def cell_table(self) -> np.ndarray | None:
        """Cells of every mask, indexed by the mask (int64), for up to TABLE_ATTRS attributes."""
        if len(self.sizes) > TABLE_ATTRS:
            return None
        if self._table is None:
            t = np.ones(1, dtype=np.int64)
            for s in self.sizes:  # masks with bit i set follow those without, times size i
                t = np.concatenate([t, t * s])
            self._table = t
        return self._table

    def attrs(self, mask: int) -> tuple[str, ...]:
        return tuple(a for i, a in enumerate(self.domain.attrs) if mask >> i & 1)

    def cells(self, mask: int) -> int:
        c = self._cells.get(mask)
        if c is None:
            c = 1
            m, i = mask, 0
            while m:
                if m & 1:
                    c *= self.sizes[i]
                m >>= 1
                i += 1
            self._cells[mask] = c
        return c


_MASKS: dict[Domain, _Masks] = {}


def _masks(domain: Domain) -> _Masks:
    m = _MASKS.get(domain)
    if m is None:
        if len(_MASKS) > 64:
            _MASKS.clear()
        m = _MASKS[domain] = _Masks(domain)
    return m


def bit_masks(domain: Domain) -> _Masks:
    """The domain's shared bit-mask helpers: ``mask(attrs)``, ``attrs(mask)``, ``cells(mask)`` (cached)."""
    return _masks(domain)


def _eliminate(masks: _Masks, cliques: list[int], within: int | None = None) -> tuple[list[int], list[int]]:
    """Greedy elimination (SPEC §3.3 step 2). Returns (order as attribute indices, elimination cliques).

    Each step eliminates the attribute whose neighbourhood (the union of the cliques holding it) has
    the fewest cells, the first in index order on ties. The unions are kept per attribute and updated
    in place: eliminating ``a`` with union ``U`` removes only cliques inside ``U`` and adds
    ``U − {a}``, so for every ``b`` in ``U − {a}`` the new union is ``(old & ~a) | (U − {a})`` and
    the others do not change (AIM and JAM size hundreds of candidate models a round). ``within``:
    eliminate only these attributes (a bit mask; the cliques must lie inside it)."""
    n = len(masks.sizes)
    union = [0] * n
    for c in cliques:
        m, i = c, 0
        while m:
            if m & 1:
                union[i] |= c
            m >>= 1
            i += 1
    cells = masks.cells
    cost = [cells(u) if u else 1 for u in union]
    unmarked = list(range(n)) if within is None else [i for i in range(n) if within >> i & 1]
    order: list[int] = []
    elim_cliques: list[int] = []
    for _ in range(len(unmarked)):
        best = min(unmarked, key=cost.__getitem__)  # the first of the cheapest, as in index order
        bit = 1 << best
        unmarked.remove(best)
        order.append(best)
        elim_cliques.append(union[best] | bit)
        rest = union[best] & ~bit
        m, i = rest, 0
        while m:
            if m & 1:
                u = union[i] = (union[i] & ~bit) | rest
                cost[i] = cells(u)
            m >>= 1
            i += 1
    return order, elim_cliques


def _eliminate_reference(masks: _Masks, cliques: list[int]) -> tuple[list[int], list[int]]:
    """The plain greedy elimination (every union recomputed from the clique list each step): the
    reference :func:`_eliminate` is tested against."""
    K = list(dict.fromkeys(c for c in cliques if c))
    unmarked = list(range(len(masks.sizes)))
    order: list[int] = []
    elim_cliques: list[int] = []
    for _ in range(len(unmarked)):
        best_cost, best, best_union = None, None, 0
        for a in unmarked:
            bit = 1 << a
            union = 0
            for c in K:
                if c & bit:
                    union |= c
            cost = masks.cells(union) if union else 1
            if best_cost is None or cost < best_cost:
                best_cost, best, best_union = cost, a, union
        bit = 1 << best
        unmarked.remove(best)
        order.append(best)
        elim_cliques.append(best_union | bit)
        rest = best_union & ~bit
        K = [c for c in K if not c & bit]
        if rest and rest not in K:
            K.append(rest)
    return order, elim_cliques


def _maximal(cliques: list[int]) -> list[int]:
    uniq = sorted(set(cliques), key=lambda m: -bin(m).count("1"))
    out: list[int] = []
    for c in uniq:
        if not any(c & o == c for o in out):
            out.append(c)
    return out


def model_size_mb(domain: Domain, cliques: Iterable[Sequence[str]]) -> float:
    """JT-SIZE (SPEC §3.4): megabytes (2**20 bytes) of float64 tables of the junction tree's maximal cliques."""
    masks = _masks(domain)
    return _size_mb(masks, frozenset(_maximal([masks.mask(c) for c in cliques])))


def _inside(masks: _Masks, ms: list[int], within: list[int]) -> list[bool]:
    """For each mask of ``ms``: is it a subset of one of ``within``? (numpy for up to 62 attributes:
    AIM and JAM ask it for every candidate every round)."""
    if not within:
        return [False] * len(ms)
    if len(masks.sizes) > 62:
        return [any(m & b == m for b in within) for m in ms]
    w = np.array(within, dtype=np.int64)[None, :]
    step = max(1, INSIDE_CELLS // len(within))  # rows at a time: the comparison table stays small
    out: list[bool] = []
    for i in range(0, len(ms), step):
        a = np.array(ms[i:i + step], dtype=np.int64)[:, None]
        out += ((a & w) == a).any(axis=1).tolist()
    return out


INSIDE_CELLS = 1 << 20  # cells of _inside's comparison table per step


def covered(domain: Domain, cliques: Sequence[Sequence[str]], within: Iterable[Sequence[str]]) -> list[bool]:
    """For each clique of ``cliques``: does one of ``within`` hold all its attributes?"""
    masks = _masks(domain)
    return _inside(masks, [masks.mask(c) for c in cliques], [masks.mask(c) for c in within])


def model_sizes_mb(domain: Domain, base: Iterable[Sequence[str]], extra: Iterable[Sequence[str]]) -> list[float]:
    """``[model_size_mb(domain, base + [r]) for r in extra]``, sharing the work on ``base``."""
    masks = _masks(domain)
    top = _maximal([masks.mask(c) for c in base])
    top_set = frozenset(top)
    keys = []
    ms = [masks.mask(r) for r in extra]
    for m, inside in zip(ms, _inside(masks, ms, top)):
        if inside:
            keys.append(top_set)
        else:
            keys.append(frozenset([b for b in top if b & m != b] + [m]))
    missing = list(dict.fromkeys(k for k in keys if k not in masks.sizes_mb))
    if len(missing) >= BATCH_MIN and masks.exact_int64:
        if len(masks.sizes_mb) + len(missing) > SIZE_CACHE:
            masks.sizes_mb.clear()
            missing = list(dict.fromkeys(keys))
        masks.sizes_mb.update(zip(missing, _sizes_mb_batch(masks, missing)))
    return [_size_mb(masks, k) for k in keys]


def batch_sizes_exact(domain: Domain) -> bool:
    """Whether :func:`model_sizes_mb` sizes many models at once in numpy on this domain (up to 62
    attributes whose cell counts fit an int64): then checking every candidate of a round costs
    milliseconds; on wider domains it is a Python loop per candidate."""
    return _masks(domain).exact_int64


# a round's candidates are sized together from this many unknown models on (numpy, all at once)
BATCH_MIN = 8
SIZE_CACHE = 100_000  # models' sizes kept per domain


def _sizes_mb_batch(masks: _Masks, keys: Sequence[frozenset[int]]) -> list[float]:
    """JT-SIZE of each clique-mask set in ``keys``: :func:`_eliminate` run on all of them at once as
    integer arrays (same order, ties to the lowest index by ``argmin``, exact int64 cell counts)."""
    n = len(masks.sizes)
    bits = np.int64(1) << np.arange(n, dtype=np.int64)
    table = masks.cell_table()
    sizes = np.array(masks.sizes, dtype=np.int64)

    def cells(u: np.ndarray) -> np.ndarray:  # product of the sizes of each mask's attributes
        if table is not None:
            return table[u]
        return np.where((u[..., None] & bits) != 0, sizes, 1).prod(axis=-1)

    width = max(len(k) for k in keys)
    cl = np.zeros((len(keys), width), dtype=np.int64)
    for row, k in enumerate(keys):
        cl[row, :len(k)] = list(k)
    # union[c, i]: the union of model c's cliques that hold attribute i
    union = np.bitwise_or.reduce(np.where((cl[:, :, None] & bits) != 0, cl[:, :, None], 0), axis=1)
    cost = cells(union)
    rows = np.arange(len(keys))
    done = np.zeros(union.shape, dtype=bool)
    elim = np.empty(union.shape, dtype=np.int64)
    never = np.iinfo(np.int64).max
    for step in range(n):
        best = np.argmin(np.where(done, never, cost), axis=1)
        bit = bits[best]
        u = union[rows, best]
        elim[:, step] = u | bit
        done[rows, best] = True
        rest = u & ~bit
        hit = (rest[:, None] & bits) != 0
        union = np.where(hit, (union & ~bit[:, None]) | rest[:, None], union)
        cost = np.where(hit, cells(union), cost)
    # maximal elimination cliques: drop one inside another, and repeats after their first
    a, b = elim[:, :, None], elim[:, None, :]
    inside = ((a & b) == a) & (a != b)
    first = np.tril(np.ones((n, n), dtype=bool), -1)
    repeat = (a == b) & first
    keep = ~(inside | repeat).any(axis=2)
    total = np.where(keep, cells(elim), 0).sum(axis=1)
    return [8.0 * int(t) / MB for t in total]


def _size_mb(masks: _Masks, key: frozenset[int]) -> float:
    """JT-SIZE of the maximal clique masks ``key``, cached: a clique inside another never changes
    greedy elimination (every union that contains it contains the bigger one, and after each
    elimination step it still lies inside one), so the size depends on the maximal cliques only and
    adaptive selectors asking for the same model again (with a candidate inside a measured clique,
    or round after round when a subset was measured) hit the cache."""
    hit = masks.sizes_mb.get(key)
    if hit is None:
        _, elim = _eliminate(masks, list(key))
        hit = 8.0 * sum(masks.cells(c) for c in _maximal(elim)) / MB
        if len(masks.sizes_mb) >= SIZE_CACHE:
            masks.sizes_mb.clear()
        masks.sizes_mb[key] = hit
    return hit


class SizesWith:
    """JT-SIZE of ``base + [r]`` for one base and many cliques ``r``, exactly as
    :func:`model_size_mb`, by components: greedy elimination never looks across the graph's
    connected components (a vertex's cost depends on its own component only, and ties go to the
    lowest index within any component), so the size is the sum of the components' sizes, and adding
    ``r`` changes only the components it touches (merged into one with ``r``). On wide domains with
    small components, a check costs an elimination over those components, not the whole domain."""

    def __init__(self, domain: Domain, base: Iterable[Sequence[str]]):
        masks = self.masks = _masks(domain)
        n = len(masks.sizes)
        parent = list(range(n))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        top = [c for c in _maximal([masks.mask(c) for c in base]) if c]  # an empty clique sizes nothing
        for c in top:
            low = (c & -c).bit_length() - 1
            m, i = c, 0
            while m:
                if m & 1:
                    parent[find(i)] = find(low)
                m >>= 1
                i += 1
        self.root = [find(i) for i in range(n)]
        self.cliques: dict[int, list[int]] = {}
        for c in top:
            self.cliques.setdefault(self.root[(c & -c).bit_length() - 1], []).append(c)
        for i in range(n):  # an attribute in no clique is eliminated alone: a clique of its own
            if self.root[i] == i and i not in self.cliques:
                self.cliques[i] = [1 << i]
        self.part = {k: self._part_mb(v) for k, v in self.cliques.items()}
        self.total = sum(self.part.values())

    def size_mb(self, clique: Sequence[str]) -> float:
        m = self.masks.mask(clique)
        touched = set()
        rest, i = m, 0
        while rest:
            if rest & 1:
                touched.add(self.root[i])
            rest >>= 1
            i += 1
        merged = [c for k in touched for c in self.cliques[k] if c & m != c] + [m]
        return self.total - sum(self.part[k] for k in touched) + self._part_mb(_maximal(merged))

    def _part_mb(self, cliques: list[int]) -> float:
        """JT-SIZE of one component: its own attributes eliminated, none else."""
        within = 0
        for c in cliques:
            within |= c
        _, elim = _eliminate(self.masks, cliques, within)
        return 8.0 * sum(self.masks.cells(c) for c in _maximal(elim)) / MB


def maximal_masks(domain: Domain, cliques: Sequence[int]) -> list[int]:
    """Maximal cliques, as bit masks over ``domain.attrs``, of the chordal graph that greedy
    elimination (SPEC §3.3, the triangulation :class:`JunctionTree` uses) makes of ``cliques``
    (bit masks too). For searches that try many graphs (PrivMRF's attribute graph)."""
    masks = _masks(domain)
    _, elim = _eliminate(masks, list(cliques))
    return _maximal(elim)


def mask_cells(domain: Domain, mask: int) -> int:
    """Cells of the marginal on the attributes in ``mask`` (bit ``i`` = ``domain.attrs[i]``)."""
    return _masks(domain).cells(mask)


def largest_clique_cells(domain: Domain, cliques: Iterable[Sequence[str]]) -> tuple[int, int]:
    """(cells of the largest maximal clique, cells of all of them) of the junction tree
    :class:`JunctionTree` builds over ``cliques``."""
    masks = _masks(domain)
    cells = [masks.cells(m) for m in maximal_masks(domain, [masks.mask(c) for c in cliques])]
    return (max(cells) if cells else 1), sum(cells)


@dataclass
class JunctionTree:
    """Maximal cliques (canonical attribute tuples), tree edges and elimination order."""

    domain: Domain
    cliques: list[tuple[str, ...]]
    edges: list[tuple[int, int]]  # (parent, child) with clique 0 as root, in BFS order
    order: list[str]  # elimination order

    @classmethod
    def build(cls, domain: Domain, cliques: Iterable[Sequence[str]]) -> "JunctionTree":
        masks = _masks(domain)
        order_idx, elim = _eliminate(masks, [masks.mask(c) for c in cliques])
        maximal = _maximal(elim)
        # keep a deterministic order: largest first, then by attribute bits
        maximal.sort(key=lambda m: (-masks.cells(m), m))
        n = len(maximal)
        # maximum spanning tree on |Ci ∩ Cj| (+1 so that the result is connected: empty separators ok)
        pairs = sorted(
            ((bin(maximal[i] & maximal[j]).count("1"), i, j) for i in range(n) for j in range(i + 1, n)),
            key=lambda t: (-t[0], t[1], t[2]),
        )
        parent = list(range(n))

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        adj: list[list[int]] = [[] for _ in range(n)]
        for _, i, j in pairs:
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[ri] = rj
                adj[i].append(j)
                adj[j].append(i)
        # BFS from the root
        edges: list[tuple[int, int]] = []
        seen = {0}
        queue = [0]
        for u in queue:
            for v in sorted(adj[u]):
                if v not in seen:
                    seen.add(v)
                    edges.append((u, v))
                    queue.append(v)
        return cls(
            domain=domain,
            cliques=[masks.attrs(m) for m in maximal],
            edges=edges,
            order=[domain.attrs[i] for i in order_idx],
        )

    def size_mb(self) -> float:
        return 8.0 * sum(self.domain.size(c) for c in self.cliques) / MB

    def find_clique(self, attrs: Iterable[str]) -> int | None:
        """Index of the smallest maximal clique containing ``attrs`` (None if none does)."""
        s = set(attrs)
        best, best_size = None, None
        for i, c in enumerate(self.cliques):
            if s <= set(c):
                n = self.domain.size(c)
                if best is None or n < best_size:
                    best, best_size = i, n
        return best
