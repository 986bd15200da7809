"""A Markov random field on a junction tree: marginal queries, conditioning, sampling (belief
propagation itself lives in :mod:`.belief`).

Potentials live in log space, one table per maximal clique (attributes in canonical domain order).
Everything here is post-processing of released measurements: no privacy cost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ...core import Domain
from ...core.sums import sum_out
from .belief import _Plan, belief_propagation, broadcast_shape, sum_axes
from .junction_tree import JunctionTree, bit_masks
from .query_order import elimination_order, step as elimination_step
from ..state import domain_state, read_total
from .contract import contract_pair
from .sum_tree import marginals_of


_LAZY: list = []  # marker: marginals left to compute on first use (see GraphicalModel.compact)


# partial contractions kept for reuse by later queries: at most this many times the model's cells,
# and at most PIECE_CELLS in all
PIECE_CELLS_PER_CELL = 4
PIECE_CELLS = 1 << 22
# project_many sums queries inside a clique of at least this many cells through a shared tree of
# partial sums (below, a direct sum per query is as cheap as planning the tree)
SHARED_SUM_CELLS = 1 << 16


class GraphicalModel:
    """A fitted model: junction tree, log potentials per maximal clique, total record count.

    ``project(attrs)`` gives the model's marginal (counts summing to ``total``) on any attribute set;
    ``synthetic_data(rows, rng)`` draws records by randomized rounding. ``theta`` may be given as a
    function of no arguments that makes the log potentials when first asked for (a fit that already
    holds the marginals: scoring queries read only those, and on a tree of big cliques making θ
    costs as much as a belief-propagation pass).
    """

    state_kind: ClassVar[str] = "graphical_model"  # in saved models (:mod:`privmarg.generate.state`)

    def __init__(self, domain: Domain, tree: JunctionTree,
                 theta: list[np.ndarray] | Callable[[], list[np.ndarray]], total: float,
                 plan: _Plan | None = None, marginals: list[np.ndarray] | None = None):
        self.domain = domain
        self.tree = tree
        self._theta, self._theta_source = (None, theta) if callable(theta) else (theta, None)
        self.total = float(total)
        self._plan = plan or _Plan(tree)
        if marginals is _LAZY:
            marginals = None
        elif marginals is None:
            marginals, _, _ = belief_propagation(self._plan, self.theta, self.total)
        self._marginals: list[np.ndarray] | None = marginals
        self._cache: dict[tuple[str, ...], np.ndarray] = {}
        # attribute set -> (a cached marginal on one attribute more, that attribute's axis)
        self._wider: dict[tuple[str, ...], tuple[tuple[str, ...], int]] = {}
        self._conditionals: dict[int, np.ndarray] = {}  # clique -> conditional on its parent separator
        self._pieces: dict[tuple, np.ndarray] = {}  # partial contractions of queries (see _piece)
        self._piece_cells = 0
        self._clique_sets = [frozenset(c) for c in tree.cliques]

    @property
    def theta(self) -> list[np.ndarray]:
        """The maximal cliques' log potentials (made on first use where the fit left them to make)."""
        if self._theta is None:
            self._theta, self._theta_source = self._theta_source(), None
        return self._theta

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_theta"], state["_theta_source"] = self.theta, None  # a function is not pickled
        return state

    def __setstate__(self, state: dict) -> None:
        if "theta" in state:  # pickled before θ could be made on first use
            state["_theta"], state["_theta_source"] = state.pop("theta"), None
        self.__dict__.update(state)

    @property
    def marginals(self) -> list[np.ndarray]:
        """The maximal cliques' marginals (counts), recomputed from the potentials if dropped."""
        if self._marginals is None:
            self._marginals, _, _ = belief_propagation(self._plan, self.theta, self.total)
        return self._marginals

    @marginals.setter
    def marginals(self, value: list[np.ndarray]) -> None:
        self._marginals = value
        self.clear_cache()  # everything cached is derived from the marginals

    def clear_cache(self) -> None:
        """Forget cached projections, conditionals and kept partial contractions (they can hold
        far more memory than the model)."""
        self._cache = {}
        self._wider = {}
        self._conditionals = {}
        self._pieces, self._piece_cells = {}, 0

    def drop_marginals(self) -> None:
        """Forget the clique marginals and every cache (recomputed from the potentials on the next
        query); warm-start potentials stay. Frees about a model's size before a fit that starts
        from this one."""
        self._marginals = None
        self.clear_cache()

    def compact(self) -> "GraphicalModel":
        """The same model holding its log potentials only (about half the memory, no projection
        cache, no warm-start potentials); the marginals are recomputed from the potentials on the
        first query, bit for bit the same as this model's. Post-processing: no privacy cost."""
        return GraphicalModel(self.domain, self.tree, self.theta, self.total, plan=self._plan, marginals=_LAZY)

    @property
    def cliques(self) -> list[tuple[str, ...]]:
        return self.tree.cliques

    def size_mb(self) -> float:
        return self.tree.size_mb()

    # marginal queries --------------------------------------------------------------------
    def project(self, attrs: Iterable[str], *, cache: bool = True) -> np.ndarray:
        """Model marginal on ``attrs`` as counts (flat, row-major in the order given, sums to ``total``).

        ``cache=False`` neither reads nor fills the projection cache (for one-off queries such as
        scoring every candidate once per model: the values are the same)."""
        attrs = tuple(attrs)
        canon = self.domain.canonical(attrs)
        if canon != attrs:
            if len(canon) != len(attrs):
                raise ValueError(f"repeated attribute in {attrs}")
            arr = self.project(canon, cache=cache).reshape(self.domain.sizes(canon))
            return np.ascontiguousarray(arr.transpose([canon.index(a) for a in attrs])).ravel()
        hit = self._cache.get(attrs) if cache else None
        if hit is not None:
            return hit
        if not attrs:
            return np.array([self.total])
        best = self._smallest_clique(attrs)
        wider = self.__dict__.setdefault("_wider", {})  # models pickled before this index lack it
        if best is not None:
            ax = sum_axes(attrs, self.tree.cliques[best])
            out = sum_out(self.marginals[best], ax)
            out = np.ascontiguousarray(out).ravel()
        elif cache and attrs in wider:
            # a cached marginal on one attribute more holds this one: one sum instead of an
            # elimination over the cliques (scoring asks for every subset of its 3-way candidates)
            big, j = wider[attrs]
            out = np.ascontiguousarray(sum_out(self._cache[big].reshape(self.domain.sizes(big)), (j,))).ravel()
        else:
            out = self._eliminate(attrs)
        if cache and len(self._cache) < 20000:
            self._cache[attrs] = out
            for j in range(len(attrs)):
                wider.setdefault(attrs[:j] + attrs[j + 1:], (attrs, j))
        return out

    def _smallest_clique(self, attrs: Sequence[str]) -> int | None:
        """The index of the smallest clique holding every one of ``attrs`` (None: no clique does)."""
        s = frozenset(attrs)
        best = None
        for i, c in enumerate(self._clique_sets):
            if s <= c and (best is None or self.marginals[i].size < self.marginals[best].size):
                best = i
        return best

    def project_many(self, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """``[self.project(r, cache=False) for r in cliques]``, the cliques inside one maximal clique
        summed from it by a shared tree of partial sums (:func:`~.sum_tree.marginals_of`): one pass
        over a big clique per attribute summed out instead of one per query (AIM scores ~100
        candidates a round inside its biggest cliques); a query inside no clique whose list also
        holds it with one attribute more is summed from that one's answer instead of eliminated
        again (:meth:`_outside`). Same values up to the order of sums."""
        cliques = [tuple(r) for r in cliques]
        out: list[np.ndarray | None] = [None] * len(cliques)
        inside: dict[int, list[int]] = {}
        outside: list[int] = []
        for k, r in enumerate(cliques):
            canon = self.domain.canonical(r)
            if canon != r or not r or len(set(r)) != len(r):
                out[k] = self.project(r, cache=False)
                continue
            best = self._smallest_clique(r)
            if best is None:
                outside.append(k)
            elif self.marginals[best].size < SHARED_SUM_CELLS:
                out[k] = self.project(r, cache=False)
            else:
                inside.setdefault(best, []).append(k)
        for i, ks in inside.items():
            for k, table in zip(ks, marginals_of(self.marginals[i], self.tree.cliques[i],
                                                 [cliques[k] for k in ks], self.domain)):
                out[k] = table
        self._outside(cliques, outside, out)
        return out  # type: ignore[return-value]

    def _outside(self, cliques: list[tuple[str, ...]], ks: list[int], out: list) -> None:
        """``out[k]`` for the canonical queries ``cliques[k]``, ``k`` in ``ks``, that no clique holds:
        each one whose list holds it with one attribute more is summed from that one's answer where
        that table is smaller than those its elimination reads (scoring asks for every 2-way subset
        of its 3-way candidates), the rest eliminated."""
        wider: dict[tuple[str, ...], tuple[int, int]] = {}  # query -> (first listed one holding it, axis)
        for k in ks:
            r = cliques[k]
            for j in range(len(r)):
                wider.setdefault(r[:j] + r[j + 1:], (k, j))
        children: dict[int, list[tuple[int, int]]] = {}  # parent -> (child, axis summed out)
        roots = []
        cells = self._routes()[2]
        for k in ks:
            parent = wider.get(cliques[k])
            # summing the parent beats eliminating only where its table is smaller than the tables the
            # elimination would read (one component; across components the answer is a cheap product)
            if parent is not None and len(self._components(cliques[k])) == 1 and \
                    self.domain.size(cliques[parent[0]]) < sum(cells[i] for i in self._subtree(cliques[k])[0]):
                children.setdefault(parent[0], []).append((k, parent[1]))
            else:
                roots.append(k)
        for root in roots:  # in the order given: queries share partial contractions (_piece) in it
            out[root] = self.project(cliques[root], cache=False)
            stack = [root]
            while stack:
                k = stack.pop()
                for c, j in children.get(k, ()):
                    out[c] = np.ascontiguousarray(sum_out(out[k].reshape(self.domain.sizes(cliques[k])), (j,))).ravel()
                    stack.append(c)

    def _routes(self) -> tuple[list[dict[str, int]], dict[str, int], list[int]]:
        """(gates, component, cells), made once per tree. ``gates[v][a]``: for each clique ``v`` and
        attribute ``a`` of its component (cliques joined by non-empty separators), the path from the
        clique holding ``a`` nearest to ``v`` to ``v``, as a bit mask of cliques; the cliques holding
        ``a`` form a connected subtree, so every path from ``v`` to any of them passes through that
        one (its gate). ``component[a]``: the component of ``a``; ``cells``: each clique's table size."""
        hit = self.__dict__.get("_route_masks")  # models pickled before this cache lack the attribute
        if hit is not None:
            return hit
        n = len(self.tree.cliques)
        adj: list[list[int]] = [[] for _ in range(n)]
        for p, c in self.tree.edges:
            if self._clique_sets[p] & self._clique_sets[c]:  # not across an empty separator: independent parts
                adj[p].append(c)
                adj[c].append(p)
        gates = []
        component: dict[str, int] = {}
        for v in range(n):
            reach = {v: 1 << v}  # clique -> bit mask of the path from it to v
            order = [v]
            for x in order:  # breadth first: the first clique met holding an attribute is its gate
                for y in adj[x]:
                    if y not in reach:
                        reach[y] = reach[x] | 1 << y
                        order.append(y)
            for a in self.tree.cliques[v]:
                component[a] = min(order)
            paths: dict[str, int] = {}
            for x in order:
                for a in self.tree.cliques[x]:
                    if a not in paths:
                        paths[a] = reach[x]
            gates.append(paths)
        cells = [int(np.prod(s)) for s in self._plan.shapes]
        self.__dict__["_route_masks"] = (gates, component, cells)
        return gates, component, cells

    def _components(self, attrs: tuple[str, ...]) -> list[tuple[str, ...]]:
        """``attrs`` split by the model's independent components (order kept within each part)."""
        component = self._routes()[1]
        parts: dict[int, list[str]] = {}
        for a in attrs:
            parts.setdefault(component[a], []).append(a)
        return [tuple(p) for p in parts.values()]

    def _subtree(self, attrs: tuple[str, ...]) -> tuple[list[int], list[tuple[int, int]]]:
        """Cliques and edges of the smallest subtree (fewest cells, then fewest cliques) whose
        cliques cover ``attrs``: every connected cover is the union of the paths from one of its
        cliques to each attribute's gate, so trying each clique as that centre finds the best."""
        gates, _, cells = self._routes()
        cost = self.__dict__.setdefault("_cover_cost", {})  # subtree mask -> (cells, cliques)
        first, rest = attrs[0], attrs[1:]
        best, best_key = 0, None
        for paths in gates:
            m = paths.get(first)
            if m is None:  # another component
                continue
            for a in rest:
                m |= paths[a]
            key = cost.get(m)
            if key is None:
                nodes = [i for i in range(len(cells)) if m >> i & 1]
                key = cost[m] = (sum(cells[i] for i in nodes), len(nodes))
            if best_key is None or key < best_key:
                best, best_key = m, key
        nodes = [i for i in range(len(cells)) if best >> i & 1]
        edges = [(p, c) for p, c in self.tree.edges if best >> p & 1 and best >> c & 1]
        return nodes, edges

    def _conditional(self, i: int, edges: list[tuple[int, int]]) -> np.ndarray:
        """Clique ``i``'s marginal divided by its separator marginal with its parent (0 where empty)."""
        cache = self.__dict__.setdefault("_conditionals", {})  # models pickled before this cache
        hit = cache.get(i)
        if hit is not None:
            return hit
        cl = self.tree.cliques
        p = next(p for p, c in edges if c == i)
        sep = tuple(a for a in cl[i] if a in set(cl[p]))
        mu = self.marginals[i]
        ms = sum_out(mu, sum_axes(sep, cl[i])).reshape(broadcast_shape(self.domain, sep, cl[i]))
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(ms > 0, mu / ms, 0.0)
        cache[i] = out
        return out

    def _piece(self, key: tuple, make: Callable[[], np.ndarray]) -> np.ndarray:
        """A partial contraction of this model's tables, made by ``make`` unless already kept; kept
        while the pieces hold at most PIECE_CELLS_PER_CELL times the model's own cells (and at most
        PIECE_CELLS); :meth:`clear_cache` drops them."""
        pieces = self.__dict__.setdefault("_pieces", {})  # models pickled before this cache lack it
        hit = pieces.get(key)
        if hit is not None:
            return hit
        table = make()
        held = self.__dict__.get("_piece_cells", 0) + table.size
        if held <= min(PIECE_CELLS, PIECE_CELLS_PER_CELL * sum(m.size for m in self.marginals)):
            pieces[key] = table
            self.__dict__["_piece_cells"] = held
        return table

    def _eliminate(self, attrs: tuple[str, ...]) -> np.ndarray:
        """Variable elimination on clique marginals / separator marginals of a covering subtree;
        attributes in independent components (joined by empty separators) as a product."""
        d = self.domain
        parts = self._components(attrs)
        if len(parts) > 1:
            res, order = np.ones(()), []
            for p in parts:
                part = self._piece(("p", p), lambda p=p: self.project(p, cache=False))  # shared by many queries
                res = np.multiply.outer(res, part.reshape(d.sizes(p)) / self.total)
                order += p
            res = res.transpose([order.index(a) for a in attrs])
            return np.ascontiguousarray(res).ravel() * self.total
        nodes, edges = self._subtree(attrs)
        cl = self.tree.cliques
        has_parent = {c for _, c in edges}
        # a factor is (attributes, table, key); the key names how the table was made, so a table
        # another query of this model already made is reused (candidates in one scoring round
        # share most of their partial contractions)
        factors: list[tuple[tuple[str, ...], np.ndarray, tuple]] = []
        for i in nodes:
            # the subtree's root enters as its marginal (the result is renormalised below), every
            # other clique as its conditional given the separator with its parent: the same table
            # for every query, so it is made once per model (scoring projects hundreds of cliques)
            if i in has_parent:
                factors.append((cl[i], self._conditional(i, edges), ("c", i)))
            else:
                factors.append((cl[i], self.marginals[i], ("m", i)))
        keep = set(attrs)
        # first sum every factor down to the variables that are kept or shared with another factor
        # (one pass over each table, instead of one einsum pass per variable eliminated)
        seen: dict[str, int] = {}
        for f_attrs, _, _ in factors:
            for a in f_attrs:
                seen[a] = seen.get(a, 0) + 1
        for k, (f_attrs, table, key) in enumerate(factors):
            ax = tuple(j for j, a in enumerate(f_attrs) if a not in keep and seen[a] == 1)
            if ax:
                key = ("s", key, ax)
                factors[k] = (tuple(a for a in f_attrs if a in keep or seen[a] > 1),
                              self._piece(key, lambda t=table, ax=ax: sum_out(t, ax)), key)
        # the elimination order is planned on bit masks of the attributes (bit i = d.attrs[i])
        mk = bit_masks(d)
        masks = [mk.mask(f[0]) for f in factors]
        elim = 0
        for m in masks:
            elim |= m
        elim &= ~mk.mask(keep)
        for v in elimination_order(masks, elim, mk.cells, mk):
            use, stay, union, gone = elimination_step(masks, elim, v)
            out_attrs = mk.attrs(union & ~gone)
            used = [factors[k] for k in use]
            key = ("e", frozenset((f[0], f[2]) for f in used), out_attrs)
            table = self._piece(key, lambda used=used, o=out_attrs: _einsum(used, o, d))
            factors = [factors[k] for k in stay] + [(out_attrs, table, key)]
            masks = [masks[k] for k in stay] + [union & ~gone]
            elim &= ~gone
        res = _einsum(factors, attrs, d)
        res = np.ascontiguousarray(res).ravel()
        s = res.sum()
        return res * (self.total / s) if s > 0 else res


    # conditioning -------------------------------------------------------------------------
    def condition(self, evidence: Mapping[str, int]) -> "GraphicalModel":
        """The model given ``evidence`` (attribute -> code): every clique potential containing an
        evidence attribute is multiplied by the indicator of its value (-inf elsewhere in log
        space) and the tree is recalibrated. Its marginals are the exact conditional distribution
        (scaled to ``total``); sampling it draws every record with the evidence. Raises
        ``ValueError`` when the evidence has probability zero under the model."""
        d = self.domain
        ev = {}
        for a, v in evidence.items():
            if a not in d:
                raise ValueError(f"unknown attribute {a!r} in the condition")
            v = int(v)
            if not 0 <= v < d[a]:
                raise ValueError(f"condition {a}={v}: code outside 0..{d[a] - 1}")
            ev[a] = v
        if not ev:
            return self
        theta = list(self.theta)
        for i, clique in enumerate(self.tree.cliques):
            hit = [a for a in clique if a in ev]
            if not hit:
                continue
            t = theta[i]
            for a in hit:
                ind = np.full(d[a], -np.inf)
                ind[ev[a]] = 0.0
                t = t + ind.reshape(broadcast_shape(d, (a,), clique))
            theta[i] = t
        try:
            mu, _, _ = belief_propagation(self._plan, theta, self.total)
        except FloatingPointError:
            shown = ", ".join(f"{a}={v}" for a, v in ev.items())
            raise ValueError(f"the condition {shown} has probability zero under the model") from None
        return GraphicalModel(d, self.tree, theta, self.total, plan=self._plan, marginals=mu)

    def sample_conditional(self, rows: int, rng: np.random.Generator, evidence: Mapping[str, int]) -> np.ndarray:
        """``rows`` records drawn from the model given ``evidence`` (attribute -> code), exactly:
        evidence clamped in the junction tree (:meth:`condition`), then forward sampling; no
        rejection. Every record carries the evidence."""
        out = self.condition(evidence).sample(rows, rng)
        for a, v in evidence.items():
            out[:, self.domain.attrs.index(a)] = int(v)  # already so; guards against float dust
        return out

    # sampling -----------------------------------------------------------------------------
    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` records by randomized rounding (see :meth:`synthetic_data`)."""
        return self.synthetic_data(rows, rng)

    def synthetic_data(self, rows: int | None = None, rng: np.random.Generator | None = None,
                       method: str = "round") -> np.ndarray:
        """Records (n x d integer codes) by randomized rounding along the reversed elimination order.

        ``method="round"`` makes every maximal clique's counts match the model within rounding;
        ``"sample"`` draws i.i.d. from the model's conditionals instead.
        """
        rng = rng if rng is not None else np.random.default_rng()
        n = int(self.total) if rows is None else int(rows)
        if n < 0:
            raise ValueError("rows must be non-negative")
        d = self.domain
        out = np.zeros((n, len(d)), dtype=np.int64)
        if n == 0:
            return out
        col = {a: i for i, a in enumerate(d.attrs)}
        used: list[str] = []
        for a in reversed(self.tree.order):
            nbrs = set().union(*(c for c in self._clique_sets if a in c))
            par = [u for u in d.attrs if u in nbrs and u in used]
            used.append(a)
            k = d[a]
            if not par:
                counts = self.project([a]).reshape(1, k)
                group = np.zeros(n, dtype=np.int64)
            else:
                # only the parent values some record has (at most n of them) matter: a table of
                # 10^7-10^8 parent groups is read where occupied, not copied, transposed and scaled
                canon = d.canonical(par + [a])  # par is in domain order already
                table = self.project(canon, cache=False).reshape(d.sizes(canon))
                table = np.moveaxis(table, canon.index(a), -1)  # (parent values..., k), a view
                flat = np.ravel_multi_index(tuple(out[:, col[u]] for u in par), d.sizes(par))
                occupied, group = np.unique(flat, return_inverse=True)
                counts = table[np.unravel_index(occupied, d.sizes(par))]
            out[:, col[a]] = _fill_groups(counts, group.ravel(), rng, method)
        return out

    def to_state(self, key: str, arrays: dict, save) -> dict:
        """The saved form: junction tree (cliques, edges, elimination order) and log-potentials."""
        names = []
        for i, t in enumerate(self.theta):
            arrays[f"{key}.theta.{i}"] = np.asarray(t, dtype=float)
            names.append(f"{key}.theta.{i}")
        tree = self.tree
        return {"domain": domain_state(self.domain), "total": float(self.total),
                "cliques": [list(c) for c in tree.cliques], "edges": [[int(p), int(c)] for p, c in tree.edges],
                "order": list(tree.order), "theta": names}

    @classmethod
    def from_state(cls, state: dict, arrays: dict, domain: Domain, load) -> "GraphicalModel":
        tree = JunctionTree(domain, [tuple(c) for c in state["cliques"]], [(int(p), int(c)) for p, c in state["edges"]],
                            list(state["order"]))
        theta = [np.asarray(arrays[k], dtype=float) for k in state["theta"]]
        if len(theta) != len(tree.cliques):
            raise ValueError("one potential per clique expected")
        for c, t in zip(tree.cliques, theta):
            if t.shape != domain.sizes(c):
                raise ValueError(f"potential of clique {c} has shape {t.shape}, expected {domain.sizes(c)}")
            if np.isnan(t).any() or (t == np.inf).any():  # -inf is a structural zero
                raise ValueError(f"potential of clique {c} holds NaN or +inf")
        return cls(domain, tree, theta, read_total(state))


# einsum's own loop (no path search, no BLAS) is faster up to about this many index combinations
PLAIN_EINSUM_CELLS = 1 << 15
# a pairwise step's result is kept to this many cells (past it, numpy's own path search decides)
PAIRWISE_CELLS = 1 << 24


def _einsum(factors, out_attrs, domain: Domain) -> np.ndarray:
    if len(factors) == 2:
        (fa, a, *_), (fb, b, *_) = factors
        return contract_pair(tuple(fa), a, tuple(fb), b, tuple(out_attrs), domain)
    if len(factors) > 2 and domain.size(tuple({a for f in factors for a in f[0]})) > PLAIN_EINSUM_CELLS:
        path = _pairwise_path([f[0] for f in factors], out_attrs, domain)
        if path is not None:
            return _contract_in_pairs(factors, path, tuple(out_attrs), domain)
    letters: dict[str, int] = {}
    ops = []
    for attrs, arr, *_ in factors:
        ops.append(arr)
        ops.append([letters.setdefault(a, len(letters)) for a in attrs])
    out = [letters.setdefault(a, len(letters)) for a in out_attrs]
    optimize: Any = len(factors) > 1 and domain.size(tuple(letters)) > PLAIN_EINSUM_CELLS
    res = np.einsum(*ops, out, optimize=optimize)
    return res.reshape(domain.sizes(out_attrs)) if out_attrs else res


def _contract_in_pairs(factors, path: list[tuple[int, int]], out_attrs: tuple[str, ...], domain: Domain) -> np.ndarray:
    """``factors`` contracted two at a time along ``path`` (:func:`_pairwise_path`), each step one
    :func:`~.contract.contract_pair` (a batched matrix product) keeping what the result or a table
    still waiting needs. numpy's einsum runs a step with attributes kept on both sides (a batch) in
    its plain loop, an order of magnitude slower on JAM's scoring models."""
    tables = [(tuple(f[0]), f[1]) for f in factors]
    for i, j in path:
        (fa, a), (fb, b) = tables[i], tables[j]
        rest = [t for k, t in enumerate(tables) if k not in (i, j)]
        needed = set(out_attrs).union(*(t[0] for t in rest))
        kept = tuple(x for x in dict.fromkeys(fa + fb) if x in needed) if rest else out_attrs
        tables = rest + [(kept, contract_pair(fa, a, fb, b, kept, domain))]
    return tables[0][1]


def _pairwise_path(factor_attrs, out_attrs, domain: Domain, cap: int = PAIRWISE_CELLS) -> list[tuple[int, int]] | None:
    """A path contracting two tables at a time, the pair with the smallest joint table (the
    product's index space) first; None if a step's result, the attributes still needed by the
    output or another table, would exceed ``cap`` cells."""
    sets = [frozenset(a) for a in factor_attrs]
    path = []
    while len(sets) > 1:
        _, i, j = min((domain.size(tuple(sets[i] | sets[j])), i, j)
                      for i in range(len(sets)) for j in range(i + 1, len(sets)))
        rest = [s for k, s in enumerate(sets) if k not in (i, j)]
        kept = (sets[i] | sets[j]) & frozenset(out_attrs).union(*rest)
        if domain.size(tuple(kept)) > cap:
            return None
        sets = rest + [kept]
        path.append((i, j))
    return path


#: the golden ratio's fractional part: group ``g``'s leftover draws start at ``frac(U + g·φ)``
GOLDEN = 0.6180339887498949


def _leftovers(frac: np.ndarray, extra: np.ndarray, probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Which cells get one more record: ``extra[g]`` cells of each group ``g`` (row of ``frac``, the
    fractional parts of its scaled counts, summing to ``extra[g]``), each cell with probability
    exactly its fractional part (``probs``, the groups' value probabilities, only place float dust).
    Systematic sampling on each group's row laid end to end (points
    ``o_g + j``, ``j < extra[g]``), the start ``o_g = frac(U + g·φ)`` of one uniform ``U``: a
    Kronecker sequence over the groups (in the order of their parent values), so that a value's
    leftovers are spread evenly over the groups instead of independently in each. Against
    independent draws per group this lowers the sampling noise of marginals that sum over groups
    (AIM's 3-way workload error at ε = 10 by about 3%: benchmarks/history/records.md)."""
    G, k = frac.shape
    fs = frac.sum(axis=1)
    f = frac * np.where(fs > 0, extra / np.where(fs > 0, fs, 1.0), 0.0)[:, None]  # rows sum to extra exactly
    starts = np.cumsum(extra) - extra
    bounds = (np.cumsum(f, axis=1) + starts[:, None]).ravel()  # group g's row spans [starts[g], starts[g] + extra[g])
    grp = np.repeat(np.arange(G), extra)
    points = np.arange(grp.size) + (np.arange(G) * GOLDEN + rng.random())[grp] % 1.0
    cells = np.minimum(np.searchsorted(bounds, points, side="right"), G * k - 1)
    # float dust at a row's ends: a point past its group, or on an empty cell, goes to the group's
    # likeliest value (a cell of probability 0, a structural zero among them, is never picked)
    stray = (cells // k != grp) | (f.ravel()[cells] <= 0)
    if stray.any():
        cells[stray] = grp[stray] * k + np.argmax(f[grp[stray]] + probs[grp[stray]], axis=1)
    return np.bincount(cells, minlength=G * k).reshape(G, k)


def _fill_groups(counts: np.ndarray, group: np.ndarray, rng: np.random.Generator, method: str) -> np.ndarray:
    """Assign a value to every row so that each group's values follow its row of ``counts``.

    ``counts`` is (groups x values); ``group`` the group of each row. Rounding: scale a row to the
    group size g, take floors, and hand the g - sum(floors) leftovers to cells with probability
    equal to their fractional parts (:func:`_leftovers`, balanced across groups).
    """
    n = group.size
    G, k = counts.shape
    sizes = np.bincount(group, minlength=G)
    counts = np.clip(counts, 0, None)
    rs = counts.sum(axis=1, keepdims=True)
    probs = np.where(rs > 0, counts / np.where(rs > 0, rs, 1), 1.0 / k)
    if method == "sample":
        cdf = np.cumsum(probs, axis=1)
        u = rng.random(n)
        vals = (u[:, None] > cdf[group]).sum(axis=1)
        return np.minimum(vals, k - 1)
    if method != "round":
        raise ValueError("method must be 'round' or 'sample'")
    target = probs * sizes[:, None]
    integ = np.floor(target).astype(np.int64)
    extra = sizes - integ.sum(axis=1)
    if np.any(extra > 0):
        integ += _leftovers(target - integ, extra, probs, rng)
    for g in np.flatnonzero(integ.sum(axis=1) != sizes):  # floating-point leftovers: rare, tiny
        diff = sizes[g] - integ[g].sum()
        integ[g, np.argmax(integ[g] if diff < 0 else probs[g])] += diff
    # rows of each group get that group's multiset of values, in random order
    perm = rng.permutation(n)
    order = perm[np.argsort(group[perm], kind="stable")]
    values = np.repeat(np.tile(np.arange(k), G), integ.ravel())
    out = np.empty(n, dtype=np.int64)
    out[order] = values
    return out
