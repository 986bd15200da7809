"""PrivMRF's attribute graph search (step 3), made incremental. Post-processing of the noisy TVDs.

PrivMRFSelector.graph adds, each step, the non-edge ij whose graph state + ij, triangulated by the
junction tree's greedy elimination (junction_tree._eliminate: repeatedly eliminate the vertex
whose union of cliques has the fewest cells, the lowest index on ties), fits both caps and scores
highest. Done plainly that is d²/2 eliminations of d vertices a step (86 columns: ~4 s a step,
~10 min a graph). What the search below relies on, each point exact (tests/test_privmrf_graph.py
checks the whole against the plain search):

* Greedy elimination splits over connected components: eliminating a vertex changes only its
  neighbours' unions, and the overall pick restricted to one component is that component's own
  pick. So the maximal cliques of state + ij are those of the other components with those of
  comp(i) ∪ comp(j) + ij, the caps and the score are totals over components, and a pair's result
  holds until comp(i) or comp(j) changes.
* The state graph is chordal and its own greedy elimination adds nothing (the search keeps the
  triangulation's maximal cliques, and greedy elimination of its own result repeats itself). With
  ij added, the elimination goes as without it until i or j is eliminated (only their unions
  differ, each by the other: their costs never fall, every other pick stays the cheapest and
  first). From there a pair's run is the base elimination with the vertices whose union differs
  kept aside (_Trace.pair): the cheapest of the others is the base's own pick, so a step costs
  the vertices aside, and the run has met the base (the rest is the base's) when none is left.
* The elimination clique of v (v and its neighbours left) is a maximal clique unless the clique
  of some u eliminated earlier is exactly it plus u, so a run knows which of its cliques so far
  are maximal: it stops at a clique above the clique cap or once the maximal ones pass the cells
  the other components leave (kept as a lower bound, looked at again if those ever leave more).
* Totals over components add up in another order than the plain sum over the adjacency matrix, so
  they only shortlist: every fitting pair within a margin far above rounding of the best is scored
  the plain way (the same triangulation, adjacency and sums) and the first best of those in pair
  order wins, as in the plain search.
"""

from __future__ import annotations

import math

import numpy as np

from ..core import Domain
from ..generate.pgm.junction_tree import maximal_masks

_CELLS_CACHE = 1 << 20  # cell counts kept per graph search


def _bit_list(m: int) -> list[int]:
    """Indices of the bits set in ``m``, ascending."""
    out = []
    while m:
        low = m & -m
        out.append(low.bit_length() - 1)
        m ^= low
    return out


class _Kit:
    """Cached helpers of one graph search: ``cells(mask)``, ``bits(mask)`` (the indices set,
    ascending) and ``rows`` (the TVDs as lists)."""

    __slots__ = ("cells", "bits", "rows")

    def __init__(self, sizes: tuple[int, ...], rows: list[list[float]]):
        cache: dict[int, int] = {}
        bit_cache: dict[int, list[int]] = {}
        get, bget = cache.get, bit_cache.get

        def bits(m: int) -> list[int]:
            out = bget(m)
            if out is None:
                if len(bit_cache) >= _CELLS_CACHE:
                    bit_cache.clear()
                out = bit_cache[m] = _bit_list(m)
            return out

        def cells(m: int) -> int:
            c = get(m)
            if c is None:
                if len(cache) >= _CELLS_CACHE:
                    cache.clear()
                c = 1
                for b in bits(m):
                    c *= sizes[b]
                cache[m] = c
            return c

        self.cells, self.bits, self.rows = cells, bits, rows


class _Trace:
    """Greedy elimination of the graph with ``cliques`` (bit masks) on the vertices ``verts``, as
    :func:`maximal_masks` does it (the key ``cells << shift | vertex``: ``min`` of the keys is the
    first of the cheapest), recorded step by step for runs of the graph with one more edge
    (:meth:`pair`): the unions before each step (0 once eliminated) and the vertices eliminated
    before it; per step the vertex, its key, its clique with that clique's cells and edge sum of
    ``rows``, and the first and last steps whose clique is this one plus their vertex (this one is
    not maximal after them); sums and maxima of those up to each step and from it."""

    __slots__ = ("n", "shift", "pos", "order", "vbit", "elim", "ecells", "es", "bkey", "snap_u", "done",
                 "pre_e", "suf_e", "pre_max", "suf_max", "pre_msum", "first", "wmin", "wmax")

    def __init__(self, verts: list[int], cliques: list[int], d: int, kit: _Kit):
        cells, bits, rows = kit.cells, kit.bits, kit.rows
        sh = self.shift = d.bit_length()
        low = (1 << sh) - 1
        U = [0] * d
        for c in cliques:
            for b in bits(c):
                U[b] |= c
        K = [_GONE] * d
        for v in verts:
            K[v] = (cells(U[v]) if U[v] else 1) << sh | v
        n = self.n = len(verts)
        self.pos: dict[int, int] = {}
        vbit: list[int] = []
        elim: list[int] = []
        cs: list[int] = []
        es: list[float] = []
        self.snap_u: list[list[int]] = []
        self.done = [0]
        dm = 0
        for s in range(n):
            self.snap_u.append(U[:])
            key = min(K)
            v = key & low
            bit = 1 << v
            u = U[v] | bit
            self.pos[v] = s
            vbit.append(bit)
            elim.append(u)
            cs.append(key >> sh)
            K[v] = _GONE
            U[v] = 0
            rest, keep = u ^ bit, ~bit
            row, e = rows[v], 0.0
            for b in bits(rest):
                U[b] = nu = (U[b] & keep) | rest
                K[b] = cells(nu) << sh | b
                e += row[b]
            es.append(e)
            dm |= bit
            self.done.append(dm)
        self.snap_u.append(U[:])
        self.vbit, self.elim, self.ecells, self.es = vbit, elim, cs, es
        self.order = [b.bit_length() - 1 for b in vbit]
        self.bkey = [c << sh | v for c, v in zip(cs, self.order)]  # each pick's key
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for s, (b, c) in enumerate(zip(vbit, elim)):
            first.setdefault(c ^ b, s)
            last[c ^ b] = s
        self.first = first
        self.wmin = [first.get(c, n) for c in elim]
        self.wmax = [last.get(c, -1) for c in elim]
        self.pre_e, self.pre_max, self.pre_msum = [0.0], [0], [0]
        for s in range(n):
            self.pre_e.append(self.pre_e[-1] + es[s])
            self.pre_max.append(max(self.pre_max[-1], cs[s]))
            self.pre_msum.append(self.pre_msum[-1] + (cs[s] if self.wmin[s] == n else 0))
        self.suf_e, self.suf_max = [0.0] * (n + 1), [0] * (n + 1)
        for s in range(n - 1, -1, -1):
            self.suf_e[s] = self.suf_e[s + 1] + es[s]
            self.suf_max[s] = max(self.suf_max[s + 1], cs[s])

    def pair(self, i: int, j: int, cap: float, limit: float, kit: _Kit):
        """The elimination of this graph plus the edge ``ij``, from step ``t0`` = min(pos i, pos j):

        * ``(CAP, t0, picks, early)`` where a clique has more than ``cap`` cells;
        * ``(OVER, t0, picks, early, lower bound)`` where its maximal cliques have more than
          ``limit`` cells in all;
        * ``(FITS, t0, end, cells of the largest clique, cells of the maximal cliques, edge sum of
          rows over the triangulated graph)``, ``end`` the step it met this elimination again.

        ``picks``: the vertices the run eliminated before it stopped; ``early``: whether it stopped
        before meeting this elimination (``GraphSearch.accept`` keeps such results).

        The run is this elimination at step ``sb`` with the vertices of ``over`` changed (their
        union, 0 once eliminated); every other vertex is as here, so the cheapest of them is this
        elimination's pick at ``sb`` unless that one is in ``over`` (then ``sb`` moves on, taking
        into ``over`` the vertices its step changes). So a step costs the size of ``over``, not
        that of the clique, and the run has met this elimination when ``over`` is empty."""
        n = self.n
        t0 = min(self.pos[i], self.pos[j])
        if self.pre_max[t0] > cap:
            return CAP, t0, 0, False
        if self.snap_u[t0][i] & 1 << j:  # ij is an edge by then: the elimination is this one
            if self.pre_max[n] > cap:
                return CAP, t0, 0, False
            if self.pre_msum[n] > limit:
                return OVER, t0, 0, False, self.pre_msum[n]
            return FITS, -1, n, self.pre_max[n], self.pre_msum[n], self.pre_e[n]
        lb = self.pre_msum[t0]  # cells of the maximal cliques so far
        if lb > limit:
            return OVER, t0, 0, True, lb
        walk = self._walk(i, j, t0, cap, limit, lb, kit)
        if walk[0] != FITS:
            return walk
        return self._finish(t0, *walk[1:], cap, limit, kit)

    def _walk(self, i: int, j: int, t0: int, cap: float, limit: float, lb: int, kit: _Kit):
        """:meth:`pair`'s run from step ``t0`` until it meets this elimination again: a stop
        (``CAP``/``OVER`` as :meth:`pair` returns them) or ``(FITS, end, largest clique, cells of the
        maximal cliques so far, edge sum of the base's steps taken, inner cliques, changed steps)``."""
        n = self.n
        cells, bits = kit.cells, kit.bits
        bi, bj = 1 << i, 1 << j
        sh = self.shift
        low = (1 << sh) - 1
        order, vbit, elim, es, ecells, bkey = self.order, self.vbit, self.elim, self.es, self.ecells, self.bkey
        snap_u, done, first = self.snap_u, self.done, self.first
        over = {i: snap_u[t0][i] | bj, j: snap_u[t0][j] | bi}
        okey = {i: cells(over[i]) << sh | i, j: cells(over[j]) << sh | j}  # keys of those left
        om = bi | bj  # the vertices of over
        inner: set[int] = set()  # this run's cliques less their vertex
        seg: list[tuple[int, int]] = []  # (vertex, clique less it) of the steps not the base's
        e, big, dm, sb = 0.0, 0, done[t0], t0
        while True:
            while sb < n and om >> order[sb] & 1:  # the base's pick is changed here: move past it
                snap = snap_u[sb]
                for b in bits(elim[sb] ^ vbit[sb]):
                    if not om >> b & 1:
                        over[b] = snap[b]
                        okey[b] = cells(snap[b]) << sh | b
                        om |= 1 << b
                sb += 1
                snap = snap_u[sb]
                for b in bits(elim[sb - 1]):  # its vertex and neighbours: as the base's now?
                    if over.get(b, -1) == snap[b]:
                        del over[b]
                        okey.pop(b, None)
                        om ^= 1 << b
            if not om:
                break
            dkey = min(okey.values()) if okey else _GONE
            touch = 0
            while sb < n and bkey[sb] < dkey and not om >> order[sb] & 1:  # the base's, cheaper
                u = elim[sb]
                c = ecells[sb]
                if c > cap:
                    return CAP, t0, dm & ~done[t0], True
                if c > big:
                    big = c
                bit = vbit[sb]
                dm |= bit
                if u not in inner and first.get(u, n) >= t0:  # maximal
                    lb += c
                    if lb > limit:
                        return OVER, t0, dm & ~done[t0], True, lb
                inner.add(u ^ bit)
                e += es[sb]
                sb += 1
                touch = u & om
                if touch:  # its neighbours in over: their unions change as the base's did
                    break
            if touch:
                rest, keep = u ^ bit, ~bit
                changed = _bit_list(touch)
                for b in changed:
                    over[b] = nu = (over[b] & keep) | rest
                    okey[b] = cells(nu) << sh | b
            elif sb < n and om >> order[sb] & 1:
                continue
            else:  # a changed vertex is the cheapest
                key = dkey
                v = key & low
                bit = 1 << v
                u = over[v] | bit
                c = key >> sh
                if c > cap:
                    return CAP, t0, dm & ~done[t0], True
                if c > big:
                    big = c
                dm |= bit
                if u not in inner and first.get(u, n) >= t0:  # maximal
                    lb += c
                    if lb > limit:
                        return OVER, t0, dm & ~done[t0], True, lb
                rest, keep = u ^ bit, ~bit
                inner.add(rest)
                seg.append((v, rest))
                over[v] = 0
                del okey[v]
                snap = snap_u[sb]
                changed = bits(rest)
                for b in changed:
                    over[b] = nu = (over.get(b, snap[b]) & keep) | rest
                    okey[b] = cells(nu) << sh | b
                om |= rest
                changed = changed + [v]
            snap = snap_u[sb]
            for b in changed:
                if over[b] == snap[b]:
                    del over[b]
                    okey.pop(b, None)
                    om ^= 1 << b
        return FITS, sb, big, lb, e, inner, seg

    def _finish(self, t0: int, end: int, big: int, lb: int, e: float, inner: set[int],
                seg: list[tuple[int, int]], cap: float, limit: float, kit: _Kit):
        """:meth:`pair`'s result once its run met this elimination at step ``end``: the base's steps
        from there, and the edge sums of the run's own steps."""
        n, bits = self.n, kit.bits
        if self.suf_max[end] > cap:
            return CAP, t0, 0, False
        elim, wmin, wmax, ecells = self.elim, self.wmin, self.wmax, self.ecells
        for s in range(end, n):  # maximal unless after a step of the base's outside this run's
            if wmin[s] >= t0 and wmax[s] < end and elim[s] not in inner:
                lb += ecells[s]
        if lb > limit:
            return OVER, t0, 0, False, lb
        for v, rest in seg:
            row = kit.rows[v]
            e += sum([row[b] for b in bits(rest)])
        return FITS, t0, end, max(self.pre_max[t0], big, self.suf_max[end]), lb, self.pre_e[t0] + e + self.suf_e[end]


_GONE = 1 << 4096  # the key of an eliminated vertex (above every other)
CAP, OVER, FITS = 0, 1, 2  # what _Trace.pair found


class GraphSearch:
    """PrivMRF's greedy attribute graph (see the notes above): per pair ``ij`` (``np.triu_indices``
    order) the triangulation of comp(i) ∪ comp(j) + ij, kept until one of the two changes, with
    component totals that shortlist the pairs scored the plain way. ``tvd`` must be symmetric (PrivMRF
    builds it so): pairs are read in either direction."""

    def __init__(self, dom: Domain, tvd: np.ndarray, cap_c: float, cap_g: float, penalty: float):
        d = self.d = len(dom)
        self.dom = dom
        self.tvd_plain = tvd  # as the plain score reads it
        t64 = self.t64 = np.asarray(tvd, dtype=float)
        self.rows = t64.tolist()
        self.finite = bool(np.isfinite(t64).all())
        self.pen, self.cap_c, self.cap_g = penalty, cap_c, cap_g
        self.state = [1 << v for v in range(d)]
        sizes = dom.shape
        self.kit = _Kit(sizes, self.rows)
        self.cells = self.kit.cells
        self.I, self.J = np.triu_indices(d, 1)
        self.pairs = list(zip(self.I.tolist(), self.J.tolist()))
        P = len(self.pairs)
        self.scale = float(np.abs(t64[self.I, self.J]).sum()) if self.finite else 0.0
        # integer totals: x <= cap ⟺ x <= ⌊cap⌋; int64 where every total fits (else Python ints)
        self.int_g = math.floor(cap_g) if math.isfinite(cap_g) else None
        small = all(math.isfinite(c) and c < 2**60 for c in (cap_c, cap_g)) and sum(sizes) < 2**60
        self.dtype = np.int64 if small else object
        self.cmp_c = math.floor(cap_c) if small else cap_c
        self.cmp_g = self.int_g if small else cap_g
        # components, by their smallest vertex
        self.label = np.arange(d)
        self.members = {v: [v] for v in range(d)}
        self.comp_cliques = {v: [1 << v] for v in range(d)}
        self.comp_cells = {v: int(sizes[v]) for v in range(d)}
        self.comp_max = {v: int(sizes[v]) for v in range(d)}
        self.comp_edges = {v: 0.0 for v in range(d)}
        # per pair: up to date, fits, stopped on the clique cap, on the graph cap (with a lower
        # bound on its cells), largest clique, cells, edge sum
        self.fresh = np.zeros(P, dtype=bool)
        self.fits = np.zeros(P, dtype=bool)
        self.capped = np.zeros(P, dtype=bool)
        self.over = np.zeros(P, dtype=bool)
        self.lower = np.zeros(P, dtype=self.dtype)
        self.mmax = np.zeros(P, dtype=self.dtype)
        self.msum = np.zeros(P, dtype=self.dtype)
        self.medge = np.zeros(P)
        # each pair's last run: its first step, where it met the base (fits) or the vertices it
        # eliminated before it stopped (capped, over) and whether that was before meeting the base
        self.run_t0 = np.zeros(P, dtype=np.int64)
        self.run_end = np.zeros(P, dtype=np.int64)
        self.run_picks: list[int] = [0] * P
        self.early = np.zeros(P, dtype=bool)
        self.adj = np.zeros((d, d), dtype=bool)
        self.adj_pair = np.zeros(P, dtype=bool)

    def run(self) -> list[int]:
        """The final graph's maximal cliques (bit masks, in :func:`maximal_masks`' order)."""
        if self.d > 1:
            while (pick := self.best()) is not None:
                self.accept(*pick)
        return self.state

    def _refresh(self) -> None:
        """Triangulate comp(i) ∪ comp(j) + ij for every non-edge not up to date."""
        stale = np.flatnonzero(~self.fresh & ~self.adj_pair)
        if not stale.size:
            return
        label = self.label.tolist()
        cells_all = sum(self.comp_cells.values())
        traces: dict[tuple[int, int], _Trace] = {}
        kit, cap_c = self.kit, self.cap_c
        big = 2**60 if self.dtype is np.int64 else None
        for p in stale.tolist():
            i, j = self.pairs[p]
            li, lj = label[i], label[j]
            key = (li, lj) if li <= lj else (lj, li)
            tr = traces.get(key)
            if tr is None:
                if li == lj:
                    verts, cl = self.members[li], self.comp_cliques[li]
                else:
                    verts = sorted(self.members[li] + self.members[lj])
                    cl = self.comp_cliques[li] + self.comp_cliques[lj]
                tr = traces[key] = _Trace(verts, cl, self.d, kit)
            others = cells_all - self.comp_cells[li] - (self.comp_cells[lj] if lj != li else 0)
            limit = self.int_g - others if self.int_g is not None else math.inf
            res = tr.pair(i, j, cap_c, limit, kit)
            self.fits[p] = self.over[p] = self.capped[p] = False
            self.run_t0[p] = res[1]
            if res[0] == FITS:
                self.fits[p] = True
                self.run_end[p] = res[2]
                self.mmax[p], self.msum[p], self.medge[p] = res[3], res[4], res[5]
                continue
            self.run_picks[p], self.early[p] = res[2], res[3]
            if res[0] == CAP:
                self.capped[p] = True
            else:
                self.over[p] = True
                self.lower[p] = res[4] if big is None else min(res[4], big)
        self.fresh[stale] = True

    def best(self):
        """The pair the plain search adds, as (pair, maximal cliques, adjacency); None if none fits."""
        labels = list(self.members)
        cc = np.zeros(self.d, dtype=self.dtype)
        cm = np.zeros(self.d, dtype=self.dtype)
        ce = np.zeros(self.d)
        for lab in labels:
            cc[lab], cm[lab], ce[lab] = self.comp_cells[lab], self.comp_max[lab], self.comp_edges[lab]
        cells_all = sum(self.comp_cells[lab] for lab in labels)
        ci, cj = self.label[self.I], self.label[self.J]
        same = ci == cj
        zero = np.zeros(1, dtype=self.dtype)[0]
        others = cells_all - cc[ci] - np.where(same, zero, cc[cj])
        while True:
            self._refresh()
            # stopped on the graph cap where the other components left fewer cells than now: again
            again = self.over & ~self.adj_pair & (others + self.lower <= self.cmp_g)
            if not again.any():
                break
            self.fresh[again] = False
        cand = self.fits & ~self.adj_pair
        if not cand.any():
            return None
        total = others + self.msum
        # the largest clique of the components other than comp(i), comp(j): one of the top three
        top = sorted(labels, key=lambda lab: -self.comp_max[lab])[:3]
        top += [-1] * (3 - len(top))
        tmax = [self.comp_max[lab] if lab >= 0 else 0 for lab in top]
        other = np.full(len(ci), tmax[2], dtype=self.dtype)
        for lab, m in zip(top[1::-1], tmax[1::-1]):
            other = np.where((ci != lab) & (cj != lab), np.array(m, dtype=self.dtype), other)
        ok = cand & (np.maximum(other, self.mmax) <= self.cmp_c) & (total <= self.cmp_g)
        idx = np.flatnonzero(ok)
        if not idx.size:
            return None
        pen = self.pen * total[idx].astype(float)
        approx = (sum(self.comp_edges[lab] for lab in labels) - ce[ci[idx]]
                  - np.where(same[idx], 0.0, ce[cj[idx]]) + self.medge[idx]) - pen
        if self.finite and np.isfinite(approx).all():
            margin = 1e-9 * (self.scale + float(np.abs(pen).max()))
            idx = idx[approx >= approx.max() - margin]
        # the plain score of each pair shortlisted, in pair order
        d, dom, bits = self.d, self.dom, [1 << v for v in range(self.d)]
        best = None
        for p in idx.tolist():
            i, j = self.pairs[p]
            cand_ = maximal_masks(dom, self.state + [bits[i] | bits[j]])
            cells = [self.cells(m) for m in cand_]
            if max(cells) > self.cap_c or sum(cells) > self.cap_g:
                continue
            a = np.zeros((d, d), dtype=bool)
            for m in cand_:
                ix = self.kit.bits(m)
                a[np.ix_(ix, ix)] = True
            score = self.tvd_plain[np.triu(a, 1)].sum() - self.pen * sum(cells)
            if best is None or score > best[0]:
                best = (score, p, cand_, a)
        return None if best is None else best[1:]

    def accept(self, p: int, state: list[int], a: np.ndarray) -> None:
        """Take pair ``p``: ``state`` is the new graph's maximal cliques, ``a`` its adjacency."""
        i, j = self.pairs[p]
        li, lj = int(self.label[i]), int(self.label[j])
        new = min(li, lj)
        if li != lj:
            old = max(li, lj)
            members = sorted(self.members[li] + self.members[lj])
            for dct in (self.members, self.comp_cliques, self.comp_cells, self.comp_max, self.comp_edges):
                del dct[old]
        else:
            members = self.members[li]
        mask = 0
        for v in members:
            mask |= 1 << v
        cl = [m for m in state if m & mask]
        self.members[new] = members
        self.comp_cliques[new] = cl
        cs = [self.cells(m) for m in cl]
        self.comp_cells[new], self.comp_max[new] = sum(cs), max(cs)
        sub = np.ix_(members, members)
        self.comp_edges[new] = float(self.t64[sub][np.triu(a[sub], 1)].sum())
        self.label[members] = new
        in_comp = (self.label[self.I] == new) | (self.label[self.J] == new)
        keep = np.zeros(len(self.pairs), dtype=bool)
        if li == lj and self.run_t0[p] >= 0:
            keep = self._still_stopped(p, in_comp & (self.label[self.I] == self.label[self.J]), a)
        self.state, self.adj = state, a
        self.adj_pair = a[self.I, self.J]
        self.fresh[in_comp & ~keep] = False

    def _still_stopped(self, p: int, within: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Pairs inside the component of pair ``p``, just added, whose run stops as before.

        The component's new elimination is the run of ``p`` (greedy elimination of its own
        triangulation repeats itself), so it is the old one before that run's first step t
        and from the step e where it met the old one, and before t the new graph differs only by
        edges between the vertices R they touch, whose unions are only larger. A run of another pair
        from its step t0 <= t that eliminated no vertex of R before stopping eliminates the same
        vertices with the same cliques again (every other cost as before, those of R no smaller)
        and stops at the same step, on the clique cap (every cost then no smaller) or on the graph
        cap (same cliques, maximal by the same earlier ones, the other components unchanged). From
        t0 >= e the run starts from the very same state: one stopped on the clique cap stops again."""
        t, e = int(self.run_t0[p]), int(self.run_end[p])
        touched = 0
        for v in np.flatnonzero((a != self.adj).any(axis=1)).tolist():
            touched |= 1 << v
        keep = np.zeros(len(self.pairs), dtype=bool)
        adj_pair = a[self.I, self.J]
        t0, picks = self.run_t0, self.run_picks
        for q in np.flatnonzero(within & self.early & (self.capped | self.over) & ~adj_pair).tolist():
            if (t0[q] <= t and not picks[q] & touched) or (self.capped[q] and t0[q] >= e):
                keep[q] = True
        return keep
