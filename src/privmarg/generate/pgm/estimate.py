"""Private-PGM estimation: the graphical model that best explains noisy marginal measurements.

Entropic mirror descent with an Armijo line search over log potentials on a junction tree
(SPEC §3.6, scheme A), warm starts, a stopping tolerance, unknown totals (§3.2) and structural
zeros (§3.7). Pure post-processing: no privacy cost.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ...core import Domain, Factor, Measurement, StructuralZero
from ...core.measurement import estimate_total
from ...core.broadcast import apply_broadcast
from ...core.sums import sum_out
from .belief import _Plan, belief_propagation, belief_propagation_exp, broadcast_shape, sum_axes
from .graphical_model import GraphicalModel
from .junction_tree import JunctionTree
from .optimise import _dot, _line_search, _momentum
from .sum_tree import plan_sum_tree


@dataclass
class FitInfo:
    loss: float
    iterations: int
    seconds: float
    converged: bool
    history: list[float] = field(default_factory=list)
    evaluations: int = 0  # belief-propagation passes


def _canonical_measurement(domain: Domain, m: Measurement):
    """(canonical attrs, y, Q) with Q's columns (or y) permuted to canonical cell order."""
    canon = domain.canonical(m.attrs)
    if len(canon) != len(m.attrs):
        raise ValueError(f"measurement on {m.attrs}: repeated attribute")
    n = domain.size(canon)
    cols = n if m.query is None else m.query.shape[1]
    if cols != n:
        raise ValueError(f"measurement on {m.attrs}: expected {n} cells, got {cols}")
    if canon == m.attrs:
        return canon, m.y, m.query
    if m.query is None:
        return canon, Factor.from_flat(domain, m.attrs, m.y).transpose(canon).flat, None
    # column j of Q belongs to cell j of the m.attrs layout: find each canonical cell's column
    perm = Factor.from_flat(domain, m.attrs, np.arange(n)).transpose(canon).flat
    return canon, m.y, m.query[:, perm]


DENSE_CLIQUE_CELLS = 4096  # cliques this big map to/from the potentials by numpy sums, smaller ones by CSR


class _Problem:
    """The loss and its parts as flat vectors and sparse maps, so one evaluation costs a handful of
    vector operations besides belief propagation (per-clique Python loops dominated before).

    Index spaces: ``x`` = the cells of every potential's clique ``r`` (measured or warm-started),
    concatenated; ``mu`` = the cells of every maximal clique. ``A`` sums clique marginals down to
    the ``x`` cells (x = A μ); its transpose spreads potentials over maximal cliques (θ = Aᵀ φ).
    """

    def __init__(self, domain: Domain, tree: JunctionTree, plan: _Plan, measurements: Sequence[Measurement],
                 keys: list[tuple[str, ...]]):
        from scipy import sparse

        self.keys = keys
        sizes = [domain.size(r) for r in keys]
        self.x_off = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.slices = {r: slice(self.x_off[k], self.x_off[k + 1]) for k, r in enumerate(keys)}
        self.shapes = {r: domain.sizes(r) for r in keys}
        mu_sizes = [int(np.prod(s)) for s in plan.shapes]
        self.mu_off = np.concatenate([[0], np.cumsum(mu_sizes)]).astype(int)
        # the CSR maps cover the small cliques' cells only (columns = those cells, in tree order): a
        # matvec over every row of a 10⁸-cell tree costs as much as belief propagation
        small = [n_c < DENSE_CLIQUE_CELLS for n_c in mu_sizes]
        col_off = np.concatenate([[0], np.cumsum([n_c if s else 0 for n_c, s in zip(mu_sizes, small)])]).astype(int)
        rows, cols = [], []
        # keys on big cliques use dense numpy sums/broadcasts instead: a CSR matvec reads an index
        # and gathers per nonzero, ~3x slower per cell than a strided sum (35% of AIM's time on fire)
        dense: dict[int, list[tuple[str, ...]]] = {}
        for k, r in enumerate(keys):
            i = tree.find_clique(r)
            n_c = mu_sizes[i]
            bshape = broadcast_shape(domain, r, tree.cliques[i])
            if n_c >= DENSE_CLIQUE_CELLS:
                dense.setdefault(i, []).append(r)
                continue
            r_idx = np.broadcast_to(np.arange(domain.size(r)).reshape(bshape), plan.shapes[i]).ravel()
            rows.append(self.x_off[k] + r_idx)
            cols.append(col_off[i] + np.arange(n_c))
        rows = np.concatenate(rows) if rows else np.zeros(0, int)
        cols = np.concatenate(cols) if cols else np.zeros(0, int)
        # several keys on one big clique share partial sums (one pass over the clique per attribute
        # summed out, not one per key): JAM's models put many 3-way keys on each maximal clique
        self.dense = [_DenseGroup(domain, tree.cliques[i], plan.shapes[i], slice(self.mu_off[i], self.mu_off[i + 1]),
                                  [(r, self.slices[r]) for r in rs]) for i, rs in dense.items()]
        self.dense_ids = list(dense)
        # big cliques without a key are zero in θ
        self.bare = [slice(self.mu_off[i], self.mu_off[i + 1]) for i, s in enumerate(small) if not s and i not in dense]
        # the small cliques' segments of At @ φ (tree order), for per-clique shifts in exp space
        self.small_ids = [i for i, s in enumerate(small) if s]
        small_sizes = [mu_sizes[i] for i in self.small_ids]
        self.small_starts = np.concatenate([[0], np.cumsum(small_sizes)[:-1]]).astype(int) if small_sizes else None
        self.small_sizes = np.array(small_sizes, dtype=int)
        if all(small):
            self.small_idx = None  # the maps cover all cells, in place
        else:
            parts = [np.arange(self.mu_off[i], self.mu_off[i + 1]) for i, s in enumerate(small) if s]
            self.small_idx = np.concatenate(parts) if parts else np.zeros(0, int)
        self.A = sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(self.x_off[-1], int(col_off[-1])))
        self.At = self.A.T.tocsr()
        # identity measurements merge per clique: Σ w‖x−y‖² = W‖x−ȳ‖² + const
        n = self.x_off[-1]
        self.W = np.zeros(n)
        wy = np.zeros(n)
        self.const = 0.0
        self.linear = []  # (slice, Q, y, w) for measurements with a query matrix
        curv = np.zeros(n)
        for m in measurements:
            canon, y, q = _canonical_measurement(domain, m)
            if not canon:
                continue
            w = m.weight
            sl = self.slices[canon]
            if q is None:
                self.W[sl] += w
                wy[sl] += w * y
                self.const += w * float(y @ y)
                curv[sl] += 2 * w
            else:
                self.linear.append((sl, q, y, w))
                curv[sl] += 2 * w * (np.asarray(q.multiply(q).sum(axis=0)).ravel() if sp.issparse(q)
                                     else np.einsum("ij,ij->j", q, q))
        self.ybar = np.divide(wy, self.W, out=np.zeros(n), where=self.W > 0)
        self.const -= float(self.W @ (self.ybar**2))  # Σ w y² − W ȳ²
        self.curv = np.where(curv > 0, curv, 1.0)
        self.measured = np.zeros(n, dtype=bool)
        self.measured[curv > 0] = True

    def to_x(self, mu_flat: np.ndarray) -> np.ndarray:
        """x = A μ: the model's marginals on the potentials' cliques, from the maximal cliques' ones."""
        if self.small_idx is None:
            x = self.A @ mu_flat
        else:
            x = self.A @ mu_flat[self.small_idx] if self.small_idx.size else np.zeros(self.x_off[-1])
        for g in self.dense:
            g.to_x(mu_flat, x)
        return x

    def spreader(self) -> "_Problem":
        """A copy that can only spread potentials (:meth:`to_theta`): the maps it reads, without the
        loss's terms, the x-space map or the partial-sum tables a fit wrote (what a model that makes
        its θ later keeps)."""
        out = object.__new__(_Problem)
        out.small_idx, out.At, out.mu_off, out.bare = self.small_idx, self.At, self.mu_off, self.bare
        out.dense = [g.without_buffers() for g in self.dense]
        return out

    def to_theta(self, phi: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """θ = Aᵀ φ: the potentials spread over the maximal cliques (log space), written into ``out``
        (every cell) when given."""
        if self.small_idx is None:
            theta = self.At @ phi
            if out is None:
                return theta
            out[:] = theta
            return out
        theta = np.empty(self.mu_off[-1]) if out is None else out
        if self.small_idx.size:
            theta[self.small_idx] = self.At @ phi
        for sl in self.bare:
            theta[sl] = 0.0
        for g in self.dense:
            g.to_theta(phi, theta)
        return theta

    def clique_theta(self, phi: np.ndarray, i: int, dtype: np.dtype) -> np.ndarray:
        """Clique ``i``'s cells of θ = Aᵀ φ (flat, a new array)."""
        n = self.mu_off[i + 1] - self.mu_off[i]
        if i in self.dense_ids:
            g = self.dense[self.dense_ids.index(i)]
            buf = np.empty(self.mu_off[-1], dtype=dtype)  # pages outside the clique are never touched
            g.to_theta(phi, buf)
            return buf[self.mu_off[i]:self.mu_off[i + 1]]
        if self.small_idx is None or i in self.small_ids:
            start = self.mu_off[i] if self.small_idx is None else self.small_starts[self.small_ids.index(i)]
            return self.At[start:start + n] @ phi
        return np.zeros(n)  # a big clique with no potential

    def to_exp(self, phi: np.ndarray, out: np.ndarray) -> np.ndarray:
        """exp(θ − s) with θ = Aᵀ φ and one shift ``s`` per maximal clique (returned, in tree order),
        written into ``out`` (every cell; the largest cell of a clique is at most 1). Big cliques are
        products of their potentials' exponentials (no exp over a clique's cells); small ones are
        exponentiated, shifted by their maxima. Only for trees with some big clique."""
        shifts = np.zeros(len(self.mu_off) - 1)
        if self.small_idx.size:
            theta = self.At @ phi
            top = np.maximum.reduceat(theta, self.small_starts)
            theta -= np.repeat(top, self.small_sizes)
            out[self.small_idx] = np.exp(theta)
            shifts[self.small_ids] = top
        for sl in self.bare:
            out[sl] = 1.0
        for i, g in zip(self.dense_ids, self.dense):
            shifts[i] = g.to_exp(phi, out)
        return shifts

    def __call__(self, mu_flat: np.ndarray):
        """(loss, gradient w.r.t. the x cells, x = the model's marginals on the potentials' cliques)."""
        x = self.to_x(mu_flat)
        res = x - self.ybar
        wres = self.W * res
        loss = self.const + _dot(wres, res)
        g = 2.0 * wres
        for sl, q, y, w in self.linear:
            rl = q @ x[sl] - y
            loss += w * _dot(rl, rl)
            g[sl] += 2.0 * w * (q.T @ rl)
        return loss, g, x


class _DenseGroup:
    """The keys (potentials' cliques) on one big maximal clique, mapped to/from its cells by a tree of
    partial sums (:func:`~.sum_tree.plan_sum_tree`): node 0 is the clique's table, every other node
    sums one attribute out of its parent node's. A key then costs a pass over the smallest node
    holding it instead of over the whole clique."""

    def __init__(self, domain: Domain, clique: tuple[str, ...], shape: tuple[int, ...], msl: slice,
                 keys: list[tuple[tuple[str, ...], slice]]):
        self.msl, self.shape = msl, shape
        tree = plan_sum_tree(domain, clique, [r for r, _ in keys])
        shapes = [tuple(shape)]
        self.nodes: list[tuple[int, int, tuple[int, ...], tuple[int, ...]]] = []  # (parent, axis, shape, bshape)
        for parent, ax in tree.nodes:
            shapes.append(tuple(n for j, n in enumerate(shapes[parent]) if j != ax))
            self.nodes.append((parent, ax, shapes[-1], tuple(1 if j == ax else n for j, n in enumerate(shapes[parent]))))
        self.keys: list[tuple[slice, int, tuple[int, ...], tuple[int, ...]]] = [  # (x slice, node, axes, bshape)
            (sl, node, sum_axes(r, tree.attrs[node]), broadcast_shape(domain, r, tree.attrs[node]))
            for (r, sl), node in zip(keys, tree.key_node)]

        self.children: list[list[int]] = [[] for _ in range(len(self.nodes) + 1)]
        for j, (parent, *_rest) in enumerate(self.nodes, start=1):
            self.children[parent].append(j)
        self.node_keys: list[list[tuple[slice, tuple[int, ...]]]] = [[] for _ in range(len(self.nodes) + 1)]
        for sl, node, _, bshape in self.keys:
            self.node_keys[node].append((sl, bshape))
        self._bufs: list[np.ndarray] | None = None  # the partial-sum nodes' tables, made once

    def without_buffers(self) -> "_DenseGroup":
        """This group's maps, sharing none of its partial-sum tables (made again when next used)."""
        out = copy.copy(self)
        out._bufs = None
        return out

    def _nodes(self, flat: np.ndarray) -> list[np.ndarray]:
        if self._bufs is None or (self._bufs and self._bufs[0].dtype != flat.dtype):
            self._bufs = [np.empty(shape, dtype=flat.dtype) for _, _, shape, _ in self.nodes]
        return [flat[self.msl].reshape(self.shape)] + self._bufs

    def to_x(self, mu_flat: np.ndarray, x: np.ndarray) -> None:
        arrs = self._nodes(mu_flat)
        for j, (parent, ax, _, _) in enumerate(self.nodes, start=1):
            sum_out(arrs[parent], (ax,), out=arrs[j])
        for sl, node, axes, _ in self.keys:
            v = arrs[node]
            x[sl] = sum_out(v, axes).ravel()

    def to_exp(self, phi: np.ndarray, out: np.ndarray) -> float:
        """Write exp(θ − s) over the clique's cells, as the product of exp(φ_r − max φ_r) over its
        potentials (in the tree of :meth:`to_theta`); returns s = Σ_r max φ_r (≥ max θ)."""
        bufs = self._nodes(out)
        shift = 0.0
        for j in range(len(self.nodes), -1, -1):
            terms = []
            for sl, bshape in self.node_keys[j]:
                v = phi[sl]
                top = float(v.max())
                shift += top
                terms.append(np.exp(v - top).astype(out.dtype, copy=False).reshape(bshape))
            self._combine(bufs, j, terms, np.multiply, 1.0)
        return shift

    def to_theta(self, phi: np.ndarray, theta: np.ndarray) -> None:
        """Write the clique's cells of θ (all of them): children after their parents, so spread
        bottom-up; each node's table is written by its first term, not zeroed and then added to."""
        bufs = self._nodes(theta)
        for j in range(len(self.nodes), -1, -1):
            self._combine(bufs, j, [phi[sl].reshape(bshape) for sl, bshape in self.node_keys[j]], np.add, 0.0)

    def _combine(self, bufs: list[np.ndarray], j: int, terms: list[np.ndarray], ufunc, identity: float) -> None:
        """Write node ``j``'s table: ``terms`` and its children's tables combined by ``ufunc``
        (broadcast), or ``identity`` where there are none."""
        terms = terms + [bufs[k].reshape(self.nodes[k - 1][3]) for k in self.children[j]]
        dst = bufs[j]
        if not terms:
            dst.fill(identity)
            return
        # the biggest term first: it is copied, the others combined into it
        terms.sort(key=lambda t: -t.size)
        apply_broadcast(None, None, terms[0], dst)
        for t in terms[1:]:
            apply_broadcast(ufunc, dst, t, dst)


class _Evaluator:
    """The loss at potentials φ: θ = Aᵀφ (−inf on structural zeros), belief propagation to the
    clique marginals μ, then (μ, loss, ∇, x). On a big tree μ of the current point and of the step
    being tried come from a pool of reused arrays, and θ (needed only to compute μ) from one
    scratch array; trees with big cliques propagate from the potentials' exponentials (products of
    small tables) instead of exponentiating every clique cell, θ itself only where a product
    underflows. ``count``: evaluations so far."""

    def __init__(self, domain: Domain, tree: JunctionTree, plan: _Plan, prob: _Problem,
                 zeros: Sequence[StructuralZero], total: float, fdtype: np.dtype):
        self.plan, self.prob, self.total, self.fdtype = plan, prob, total, fdtype
        self.base = np.zeros(prob.mu_off[-1], dtype=fdtype)
        for z in zeros:
            key = domain.canonical(z.attrs)
            mask = z.factor(domain).transpose(key).values
            i = tree.find_clique(key)
            view = self.base[prob.mu_off[i]:prob.mu_off[i + 1]].reshape(plan.shapes[i])
            view[np.broadcast_to(mask.reshape(broadcast_shape(domain, key, tree.cliques[i])), plan.shapes[i])] = -np.inf
        self.has_zeros = bool(zeros)
        self.count = 0
        self.pool = _Buffers(int(prob.mu_off[-1]), fdtype)
        self.exp_space = EXP_SPACE and bool(prob.dense)
        self.scratch = (np.empty(prob.mu_off[-1], dtype=fdtype) if prob.small_idx is not None and not self.exp_space
                        else None)
        self.zmask = (self.base == 0).astype(fdtype) if self.exp_space and self.has_zeros else None

    def views(self, flat: np.ndarray) -> list[np.ndarray]:
        prob, shapes = self.prob, self.plan.shapes
        return [flat[prob.mu_off[i]:prob.mu_off[i + 1]].reshape(shapes[i]) for i in range(len(shapes))]

    def theta_at(self, params: np.ndarray, dtype: np.dtype | None = None) -> np.ndarray:
        """θ = Aᵀφ + the structural zeros' −inf, flat, in ``dtype`` (None: the fit's)."""
        dtype = self.fdtype if dtype is None else np.dtype(dtype)
        theta_flat = self.prob.to_theta(params, out=self.scratch if dtype == self.fdtype else None)
        if theta_flat.dtype != dtype:
            theta_flat = theta_flat.astype(dtype)
        if self.has_zeros:
            theta_flat += self.base
        return theta_flat

    def theta_later(self, params: np.ndarray, dtype: np.dtype | None = None) -> Callable[[], list[np.ndarray]] | None:
        """A function making the cliques' θ at ``params`` (as :meth:`theta_at`, bit for bit) when
        called, or None where it would hold more memory than θ itself (a tree of many small cliques,
        whose sparse map costs more than their cells). It holds the potentials' map
        (:meth:`_Problem.spreader`) and the structural zeros' cells, not the loss's terms nor any
        buffer a fit wrote. ``dtype``: θ's precision (None: the fit's)."""
        prob, shapes = self.prob, self.plan.shapes
        fdtype = self.fdtype if dtype is None else np.dtype(dtype)
        held = prob.At.data.nbytes + prob.At.indices.nbytes + prob.At.indptr.nbytes
        if held > int(prob.mu_off[-1]) * fdtype.itemsize:
            return None
        spread = prob.spreader()
        zero_cells = np.flatnonzero(np.isneginf(self.base)) if self.has_zeros else None

        def make() -> list[np.ndarray]:
            theta = spread.to_theta(params).astype(fdtype, copy=False)
            if zero_cells is not None:
                theta[zero_cells] = -np.inf  # as θ + base: base is 0 but on the zeros
            return [theta[spread.mu_off[i]:spread.mu_off[i + 1]].reshape(s) for i, s in enumerate(shapes)]
        return make

    def model_theta(self, params: np.ndarray,
                    dtype: np.dtype | None = None) -> list[np.ndarray] | Callable[[], list[np.ndarray]]:
        """A fitted model's θ at ``params`` in ``dtype`` (None: the fit's): on big cliques made when
        first asked for (:meth:`theta_later`: a pass as dear as belief propagation, and a fit's model
        is mostly only queried), else the cliques' views of :meth:`theta_at`."""
        theta = self.theta_later(params, dtype) if self.exp_space else None
        return theta if theta is not None else self.views(self.theta_at(params, dtype))

    def theta_log(self, params: np.ndarray, i: int, dtype: np.dtype | None = None) -> np.ndarray:
        """Clique ``i``'s θ (its shape) at ``params`` in ``dtype`` (None: the fit's)."""
        prob, shape = self.prob, self.plan.shapes[i]
        dtype = self.fdtype if dtype is None else np.dtype(dtype)
        theta = prob.clique_theta(params, i, dtype).astype(dtype, copy=False).reshape(shape)
        if self.has_zeros:
            theta = theta + self.base[prob.mu_off[i]:prob.mu_off[i + 1]].reshape(shape)
        return theta

    def exp_tables(self, params: np.ndarray, flat: np.ndarray) -> np.ndarray:
        """exp(θ − s) at ``params`` written into ``flat`` (in its precision; structural zeros 0), one
        shift ``s`` per clique returned (:meth:`_Problem.to_exp`). Trees with big cliques only."""
        shifts = self.prob.to_exp(params, flat)
        if self.zmask is not None:
            np.multiply(flat, self.zmask, out=flat)
        return shifts

    def propagate_exp(self, params: np.ndarray, flat: np.ndarray, shifts: np.ndarray) -> list[np.ndarray]:
        """Belief propagation in place on :meth:`exp_tables`' ``flat``, in its precision (a clique
        whose products underflow redone from θ in that precision): the clique marginals' views."""
        views = self.views(flat)
        belief_propagation_exp(self.plan, views, shifts, self.total, views,
                               lambda i: self.theta_log(params, i, flat.dtype))
        return views

    def __call__(self, params: np.ndarray, trial: bool = False):
        """(μ, loss, grads, x) at ``params``; a trial step that overflows θ returns None."""
        self.count += 1
        prob, plan, total = self.prob, self.plan, self.total
        if self.exp_space:
            # the exponentials go straight into μ's buffer: the pass turns them into marginals in place
            mu_flat = self.pool.take()
            shifts = self.exp_tables(params, mu_flat)
            if not np.isfinite(shifts).all():  # NaN or +inf in φ: an overlong step
                if trial:
                    return None
                raise FloatingPointError("non-finite potentials")
        else:
            theta_flat = self.theta_at(params)
            if trial and theta_flat.size and not theta_flat.max() < np.inf:  # NaN or +inf: one pass
                return None  # an overlong step (tiny curvature on a big clique): reject it, shrink the step
            mu_flat = self.pool.take()
        try:
            with np.errstate(over="ignore" if trial else "warn"):
                if self.exp_space:
                    self.propagate_exp(params, mu_flat, shifts)
                else:
                    belief_propagation(plan, self.views(theta_flat), total, out=self.views(mu_flat))
        except FloatingPointError:
            if trial:
                return None
            raise
        out = (mu_flat,) + prob(mu_flat)
        # μ ≥ 0 or NaN, so its max is finite exactly when every cell is (no boolean temporary)
        if trial and not (np.isfinite(out[1]) and (mu_flat.size == 0 or mu_flat.max() < np.inf)):
            return None
        return out


class _Buffers:
    """Flat arrays of one size reused across evaluations: on a big tree a fresh array costs more in
    page faults than the pass that fills it. An array is handed out again once nothing but this
    pool refers to it (no view of it is alive either: a view holds its base)."""

    MAX_ARRAYS = 8  # a fit holds 2-3 at a time; past this the pool stops keeping new ones

    def __init__(self, size: int, dtype: np.dtype = np.dtype(np.float64)):
        self.size = size
        self.dtype = dtype
        self.arrays: list[np.ndarray] = []
        self._free_refs: int | None = None  # the reference count of an array only the pool holds

    def take(self) -> np.ndarray:
        for i in range(len(self.arrays)):
            if sys.getrefcount(self.arrays[i]) == self._free_refs:
                return self.arrays[i]
        a = np.empty(self.size, dtype=self.dtype)
        if len(self.arrays) >= self.MAX_ARRAYS:
            return a
        self.arrays.append(a)
        del a
        if self._free_refs is None:  # measured, not assumed: interpreters count borrowed refs differently
            self._free_refs = sys.getrefcount(self.arrays[-1])
        return self.arrays[-1]


METHODS = ("precond", "md", "momentum")  # the estimator's step rules (see estimate's ``method``)
LOG_STEP_CAP = 8.0  # largest preconditioned move of one cell's log-potential per step (e^8 ≈ 3000×)
DTYPES = ("float64", "float32")  # precisions of belief propagation's tables
# A warm start's new cliques take one proportional-fitting step before the optimiser: each cell's
# log-potential moves by log(target / model), targets and model floored at one record and the move
# capped at ±NEW_CLIQUE_CAP (a noisy target can be ≤ 0; the optimiser refines what the step sets)
NEW_CLIQUE_FLOOR = 1.0
NEW_CLIQUE_CAP = 3.0
NEW_CLIQUE_TRIES = 4  # the step, then halved until it lowers the loss
EXP_SPACE = True  # trees with big cliques: belief propagation from products of exponentials


def estimate(domain: Domain, measurements: Sequence[Measurement], *, total: float | None = None,
             iters: int = 1000, tol: float = 1e-7, warm: dict | None = None,
             zeros: Iterable[StructuralZero] = (),
             extra_cliques: Iterable[Sequence[str]] = (),
             step: float | None = None, grow: float = 2.0, method: str = "momentum",
             dtype: str = "float64", callback: Callable[[int, float], None] | None = None,
             precond_step: float | None = None, fit_new: bool = False,
             model_dtype: str | None = None) -> GraphicalModel:
    """Fit the graphical model minimising the Private-PGM loss (post-processing: no privacy cost).

    ``total``: the record count if public (replace-one), else estimated from the measurements.
    ``iters``: cap on mirror-descent iterations; stops earlier once the loss improves by less than
    ``tol`` (relative) over 10 iterations. ``warm``: ``model.potentials`` of an earlier fit.
    ``zeros``: structural zeros, kept at exactly zero mass. ``step``: initial mirror-descent step
    (pass ``model.step_size`` of the warm-start model). ``method``: ``"momentum"`` (default: mirror
    descent with heavy-ball momentum and adaptive restart, one belief-propagation pass per step),
    ``"md"`` (entropic mirror descent with an Armijo line search, SPEC §3.6 A) or ``"precond"`` (a
    diagonally preconditioned step, falling back to mirror descent; ``precond_step``: its initial
    relative step, 0.5 by default; pass ``model.precond_step`` of the warm-start model). ``fit_new``:
    with ``warm``, first move each newly measured clique (identity queries) to its measured marginal
    by one proportional-fitting step, kept only if it lowers the loss: the optimiser then starts
    where the new measurement is already explained, not where it is ignored. ``dtype``: precision of the
    clique tables (θ, μ, messages): ``"float32"`` halves the memory and roughly the time of a
    belief-propagation pass, at ~1e-6 relative error in the marginals (cells below e^-87 of their
    clique's largest flush to zero); the potentials and the loss stay float64. ``model_dtype``: the
    returned model's tables when not ``dtype`` (a fit in float32 released in float64: θ from the
    float64 potentials and one more belief-propagation pass). Returns a :class:`GraphicalModel` with
    ``potentials`` (for warm starts) and ``info`` (loss, iterations, seconds).
    """
    t0 = time.perf_counter()
    measurements = list(measurements)
    zeros = list(zeros)
    total = estimate_total(measurements, domain) if total is None else float(total)
    if not total > 0:
        raise ValueError("total must be positive")
    cliques = [domain.canonical(m.attrs) for m in measurements]
    cliques += [domain.canonical(z.attrs) for z in zeros] + [domain.canonical(c) for c in extra_cliques]
    cliques = [c for c in cliques if c]
    tree = JunctionTree.build(domain, cliques)
    plan = _Plan(tree)
    _check_options(method, dtype, precond_step)
    if model_dtype is not None and model_dtype not in DTYPES:
        raise ValueError(f"model_dtype must be one of {DTYPES}, got {model_dtype!r}")
    fdtype = np.dtype(dtype)
    precond = method == "precond"

    keys, warm_vals = _potential_keys(domain, tree, measurements, warm)
    prob = _Problem(domain, tree, plan, measurements, keys)
    phi = np.zeros(prob.x_off[-1])
    for key, val in warm_vals.items():
        phi[prob.slices[key]] += val
    evaluate = _Evaluator(domain, tree, plan, prob, zeros, total, fdtype)  # (μ, loss, ∇, x) at φ

    direction = _preconditioner(domain, prob, keys, total) if precond else (lambda g, x: g)

    mu, loss, grads, xs = evaluate(phi)
    if fit_new and warm_vals:
        state = [phi, mu, loss, grads, xs]
        mu = None
        phi, mu, loss, grads, xs = _explain_new_cliques(evaluate, prob, [r for r in keys if r not in warm_vals], state)
    history = [loss]
    converged = not prob.measured.any()
    it = 0
    alpha = step
    # relative step along the preconditioned direction (1 = a full diagonal Newton step). A warm
    # start resumes at its fit's last one: restarting at 0.5 spent most of a late JAM refit's tries
    # failing down to the scale the last fit had found (1.0, 0.5, … 0.008 rejected in turn)
    alpha_p = 0.5 if precond_step is None else float(precond_step)
    if prob.measured.any() and loss > 0:
        # a step that moves each cell by about its residual (dμ/dθ ≈ μ ≤ N); warm starts reuse theirs
        wmax = max([float(prob.W.max())] + [w for *_, w in prob.linear])
        alpha = step if step is not None else 1.0 / (2.0 * wmax * total)
        if method == "momentum":
            # hand the state over in a list the step empties: a reference kept here would pin a
            # tree-sized μ for the whole fit (the buffer pool reuses only free arrays)
            state = [phi, mu, loss, grads, xs]
            mu = None
            phi, mu, loss, grads, xs, alpha, it, converged = _momentum(
                evaluate, state, alpha, grow, iters, tol, history, callback, 1e-30 * total**2)
        else:
            state = [phi, mu, loss, grads, xs]  # handed over as for the momentum step
            mu = None
            phi, mu, loss, grads, xs, alpha, alpha_p, it, converged = _line_search(
                evaluate, direction, state, alpha / grow, alpha_p, grow, iters, tol, precond, history, callback,
                1e-30 * total**2)
    recast = model_dtype is not None and np.dtype(model_dtype) != fdtype
    if recast:
        mu = None  # the fit's tables go before the model's own are made (memory)
        evaluate.pool.arrays.clear()
    model = _fitted_model(domain, tree, plan, evaluate, phi, mu, total, np.dtype(model_dtype) if recast else None)
    mu = None
    model.potentials = {r: phi[prob.slices[r]].reshape(prob.shapes[r]).copy() for r in keys}
    model.step_size = alpha
    model.precond_step = alpha_p
    model.zeros = zeros
    model.info = FitInfo(loss=loss, iterations=it, seconds=time.perf_counter() - t0,
                         converged=converged, history=history, evaluations=evaluate.count)
    return model


def _fitted_model(domain: Domain, tree: JunctionTree, plan: _Plan, evaluate: _Evaluator, phi: np.ndarray,
                  mu: np.ndarray | None, total: float, recast: np.dtype | None) -> GraphicalModel:
    """The model at the fit's potentials ``phi``: the fit's own tables (θ, and μ as computed), or,
    ``recast`` to another precision, θ from ``phi`` in it and μ by one more belief-propagation pass."""
    if recast is None:  # its marginals are μ
        return GraphicalModel(domain, tree, evaluate.model_theta(phi), total, plan=plan, marginals=evaluate.views(mu))
    if evaluate.exp_space:
        # as the fit's own passes: products of the potentials' exponentials, now in the model's
        # precision, instead of exponentiating every cell of θ (JAM's loop recasts every round)
        flat = np.empty(int(evaluate.prob.mu_off[-1]), dtype=recast)
        mu_views = evaluate.propagate_exp(phi, flat, evaluate.exp_tables(phi, flat))
        return GraphicalModel(domain, tree, evaluate.model_theta(phi, recast), total, plan=plan, marginals=mu_views)
    theta_flat = evaluate.prob.to_theta(phi).astype(recast, copy=False)
    if evaluate.has_zeros:
        theta_flat += evaluate.base  # −inf on the structural zeros, 0 elsewhere
    return GraphicalModel(domain, tree, evaluate.views(theta_flat), total, plan=plan)


def _check_options(method: str, dtype: str, precond_step: float | None) -> None:
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if precond_step is not None and not 0 < precond_step <= 1:
        raise ValueError(f"precond_step must be in (0, 1], got {precond_step!r}")


def _potential_keys(domain: Domain, tree: JunctionTree, measurements: Sequence[Measurement], warm: dict | None
                    ) -> tuple[list[tuple[str, ...]], dict[tuple[str, ...], np.ndarray]]:
    """The cliques that get a potential φ_r (each measured one, and each warm-started one the tree
    holds), and the warm starts' values. θ = Aᵀφ plus -inf on structural zeros."""
    keys = list(dict.fromkeys(domain.canonical(m.attrs) for m in measurements if m.attrs))
    warm_vals = {}
    for key, val in (warm or {}).items():
        key = domain.canonical(key)
        if key and tree.find_clique(key) is not None:
            warm_vals[key] = np.asarray(val, dtype=float).ravel()
            if key not in keys:
                keys.append(key)
    return keys, warm_vals


def _preconditioner(domain: Domain, prob: _Problem, keys: list[tuple[str, ...]], total: float):
    """The diagonal preconditioner of ``method="precond"``: per measured cell, the inverse curvature
    of the loss in log space, 1 / (2 Σω (x + s)). Near-empty cells then move by O(1) in log space
    per step (like iterative proportional fitting) instead of by O(ω·|y|·step), which is what makes
    plain mirror descent crawl when noisy counts of empty cells are negative."""
    smooth = np.concatenate([np.full(domain.size(r), 0.01 * total / max(1, domain.size(r))) for r in keys]) \
        if keys else np.zeros(0)

    def direction(g, x):
        # at most ±LOG_STEP_CAP in log space per cell: the Newton-like ratio residual/x explodes for a
        # cell far below its target (x = 32, y = 29,000 asked for +900) and would saturate the
        # potentials (all mass on one cell, no way back for either optimiser)
        return np.clip(g / (prob.curv * (np.maximum(x, 0.0) + smooth)), -LOG_STEP_CAP, LOG_STEP_CAP)

    return direction


def _explain_new_cliques(evaluate, prob: _Problem, new: list[tuple[str, ...]], state: list):
    """A warm start's new cliques first take one proportional-fitting step (:func:`_new_clique_step`),
    halved up to :data:`NEW_CLIQUE_TRIES` times, kept only if it lowers the loss. ``state`` =
    [φ, μ, loss, ∇, x] is emptied; returns the state after the step (or as it was)."""
    phi, mu, loss, grads, xs = state
    state.clear()
    step_new = _new_clique_step(prob, new, phi, xs) if new else None
    for _ in range(NEW_CLIQUE_TRIES if step_new is not None else 0):
        res = None
        res = evaluate(phi + step_new, trial=True)
        if res is not None and res[1] < loss:
            mu = None  # back to the pool before taking the new state
            mu, loss, grads, xs = res
            return phi + step_new, mu, loss, grads, xs
        step_new *= 0.5
    return phi, mu, loss, grads, xs


def _new_clique_step(prob: _Problem, new: list[tuple[str, ...]], phi: np.ndarray, xs: np.ndarray) -> np.ndarray | None:
    """One proportional-fitting move of each new clique's potential towards its measured marginal
    (cells measured by identity queries only), or None when no new clique has one."""
    step = np.zeros_like(phi)
    moved = False
    for r in new:
        sl = prob.slices[r]
        if not (prob.W[sl] > 0).all():
            continue
        y = prob.ybar[sl]
        move = np.clip(np.log(np.maximum(y, NEW_CLIQUE_FLOOR) / np.maximum(xs[sl], NEW_CLIQUE_FLOOR)),
                       -NEW_CLIQUE_CAP, NEW_CLIQUE_CAP)
        # a cell measured within its noise of zero is never raised: the noise cannot tell it from
        # empty, and mirror descent is slow to bring a small cell back down
        sigma = np.sqrt(0.5 / prob.W[sl])  # the combined measurement's σ (weights are 1/(2σ²))
        step[sl] = np.where(y < np.maximum(sigma, NEW_CLIQUE_FLOOR), np.minimum(move, 0.0), move)
        moved = True
    return step if moved else None


def loss_of(domain: Domain, measurements: Sequence[Measurement], marginal: Callable[[tuple], np.ndarray]) -> float:
    """The Private-PGM loss ``Σ w‖Q μ − y‖²`` of any distribution given by ``marginal(attrs)`` (canonical, counts)."""
    total = 0.0
    for m in measurements:
        canon, y, q = _canonical_measurement(domain, m)
        x = np.asarray(marginal(canon), dtype=float).ravel()
        res = (x if q is None else q @ x) - y
        total += m.weight * float(res @ res)
    return total
