"""Private-PGM estimation: the graphical model that best explains noisy marginal measurements.

Entropic mirror descent with an Armijo line search over log potentials on a junction tree
(SPEC §3.6, scheme A), warm starts, a stopping tolerance, unknown totals (§3.2) and structural
zeros (§3.7). Pure post-processing: no privacy cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..domain import Domain
from .graphical_model import GraphicalModel, _Plan, belief_propagation, broadcast_shape, sum_axes
from .junction_tree import JunctionTree
from .measurement import Measurement


@dataclass(frozen=True, eq=False)
class StructuralZero:
    """Cells of the marginal on ``attrs`` that are impossible (``mask`` True = impossible)."""

    attrs: tuple[str, ...]
    mask: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "attrs", tuple(self.attrs))
        object.__setattr__(self, "mask", np.asarray(self.mask, dtype=bool))

    @classmethod
    def from_cells(cls, domain: Domain, attrs: Sequence[str], cells: Iterable[Sequence[int]]) -> "StructuralZero":
        """Forbid the listed value combinations (one tuple of codes per cell, in ``attrs`` order)."""
        attrs = tuple(attrs)
        mask = np.zeros(domain.sizes(attrs), dtype=bool)
        cells = np.asarray(list(cells), dtype=np.int64).reshape(-1, len(attrs))
        for j, a in enumerate(attrs):
            if cells.size and (cells[:, j].min() < 0 or cells[:, j].max() >= domain[a]):
                raise ValueError(f"structural zero on {attrs}: code outside the domain of {a!r}")
        mask[tuple(cells.T)] = True
        return cls(attrs, mask)

    @classmethod
    def from_allowed(cls, domain: Domain, attrs: Sequence[str], allowed: Iterable[Sequence[int]]) -> "StructuralZero":
        """Forbid every value combination except the listed ones."""
        z = cls.from_cells(domain, attrs, allowed)
        return cls(z.attrs, ~z.mask)

    @classmethod
    def from_predicate(cls, domain: Domain, attrs: Sequence[str], impossible) -> "StructuralZero":
        """Forbid the cells where ``impossible(*code_grids)`` is True (vectorised over the grid)."""
        attrs = tuple(attrs)
        grids = np.meshgrid(*[np.arange(domain[a]) for a in attrs], indexing="ij")
        return cls(attrs, np.broadcast_to(np.asarray(impossible(*grids), dtype=bool), grids[0].shape).copy())

    @property
    def cells(self) -> int:
        return int(self.mask.sum())

    def violations(self, codes: np.ndarray, domain: Domain) -> int:
        """Number of records (rows of integer codes over ``domain``) that fall in a forbidden cell."""
        cols = [codes[:, domain.attrs.index(a)] for a in self.attrs]
        return int(self.mask[tuple(cols)].sum())


def load_zeros(spec, domain: Domain) -> list[StructuralZero]:
    """Structural zeros from a JSON file or list: ``[{"attrs": [...], "cells": [[...], ...]}``
    or ``{"attrs": [...], "allowed": [[...], ...]}``, ...]`` (codes in ``attrs`` order)."""
    import json
    from pathlib import Path

    if isinstance(spec, (str, Path)):
        with open(spec) as fh:
            spec = json.load(fh)
    out = []
    for item in spec:
        attrs = tuple(item["attrs"])
        domain.canonical(attrs)
        if "cells" in item:
            out.append(StructuralZero.from_cells(domain, attrs, item["cells"]))
        elif "allowed" in item:
            out.append(StructuralZero.from_allowed(domain, attrs, item["allowed"]))
        else:
            raise ValueError(f"structural zero on {attrs}: give 'cells' or 'allowed'")
    return out


@dataclass
class FitInfo:
    loss: float
    iterations: int
    seconds: float
    converged: bool
    history: list[float] = field(default_factory=list)
    evaluations: int = 0  # belief-propagation passes


def estimate_total(measurements: Sequence[Measurement], domain: Domain) -> float:
    """N̂ from the measurements (SPEC §3.2): inverse-variance average of each one's total, at least 1."""
    num = den = 0.0
    for m in measurements:
        if m.query is None:
            e, var = m.y.sum(), m.sigma**2 * m.y.size
        else:
            v, *_ = np.linalg.lstsq(m.query.T, np.ones(m.query.shape[1]), rcond=None)
            if not np.allclose(m.query.T @ v, 1.0, atol=1e-8):
                continue
            e, var = float(v @ m.y), m.sigma**2 * float(v @ v)
        num += e / var
        den += 1.0 / var
    return max(1.0, num / den) if den > 0 else 1.0


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
    perm = np.arange(n).reshape(domain.sizes(canon)).transpose([canon.index(a) for a in m.attrs]).ravel()
    if m.query is None:
        y = np.empty(n)
        y[perm] = m.y
        return canon, y, None
    q = np.zeros_like(m.query)
    q[:, perm] = m.query
    return canon, m.y, q


class _Objective:
    """L(μ) = Σ_i ω_i ‖Q_i M_{r_i}(μ) − y_i‖² and its gradient, grouped by measured clique."""

    def __init__(self, domain: Domain, tree: JunctionTree, measurements: Sequence[Measurement],
                 weighting: str):
        self.groups: dict[tuple[str, ...], list] = {}
        for m in measurements:
            canon, y, q = _canonical_measurement(domain, m)
            if not canon:
                continue
            if weighting == "mle":
                w = 1.0 / (2.0 * m.sigma**2)
            elif weighting == "inv_sigma":
                w = 1.0 / m.sigma
            elif weighting == "equal":
                w = 1.0
            else:
                raise ValueError("weighting must be 'mle', 'inv_sigma' or 'equal'")
            self.groups.setdefault(canon, []).append((q, y, w))
        self.where: dict[tuple[str, ...], tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
        for r in self.groups:
            i = tree.find_clique(r)
            c = tree.cliques[i]
            self.where[r] = (i, sum_axes(r, c), broadcast_shape(domain, r, c))
        # identity measurements of one clique merge: Σ w‖x−y‖² = W‖x−ȳ‖² + const
        self.const = 0.0
        merged = {}
        for r, items in self.groups.items():
            ident = [(y, w) for q, y, w in items if q is None]
            rest = [(q, y, w) for q, y, w in items if q is not None]
            if len(ident) > 1:
                W = sum(w for _, w in ident)
                ybar = sum(w * y for y, w in ident) / W
                self.const += sum(w * float((y - ybar) @ (y - ybar)) for y, w in ident)
                ident = [(ybar, W)]
            merged[r] = [(None, y, w) for y, w in ident] + rest
        self.groups = merged

    def __call__(self, mu: list[np.ndarray]):
        """(loss, gradient per measured clique, the model's marginal per measured clique)."""
        loss = self.const
        grads: dict[tuple[str, ...], np.ndarray] = {}
        xs: dict[tuple[str, ...], np.ndarray] = {}
        for r, items in self.groups.items():
            i, ax, _ = self.where[r]
            x = (mu[i].sum(axis=ax) if ax else mu[i]).ravel()
            g = None
            for q, y, w in items:
                res = (x if q is None else q @ x) - y
                loss += w * float(res @ res)
                gi = 2.0 * w * (res if q is None else q.T @ res)
                g = gi if g is None else g + gi
            grads[r] = g
            xs[r] = x
        return loss, grads, xs


def estimate(domain: Domain, measurements: Sequence[Measurement], *, total: float | None = None,
             iters: int = 1000, tol: float = 1e-7, warm: dict | None = None,
             zeros: Iterable[StructuralZero] = (), weighting: str = "mle",
             extra_cliques: Iterable[Sequence[str]] = (),
             step: float | None = None, grow: float = 2.0, method: str = "precond",
             callback: Callable[[int, float], None] | None = None) -> GraphicalModel:
    """Fit the graphical model minimising the Private-PGM loss (post-processing: no privacy cost).

    ``total``: the record count if public (replace-one), else estimated from the measurements.
    ``iters``: cap on mirror-descent iterations; stops earlier once the loss improves by less than
    ``tol`` (relative) over 10 iterations. ``warm``: ``model.potentials`` of an earlier fit.
    ``zeros``: structural zeros, kept at exactly zero mass. ``step``: initial mirror-descent step
    (pass ``model.step_size`` of the warm-start model). ``method``: ``"precond"`` (default: a
    diagonally preconditioned step, falling back to mirror descent when it does not decrease the
    loss enough) or ``"md"`` (entropic mirror descent with an Armijo line search, SPEC §3.6 A). Returns a :class:`GraphicalModel` with
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
    obj = _Objective(domain, tree, measurements, weighting)

    # potentials φ_r per measured clique; θ_C = Σ_{r→C} φ_r, plus -inf on structural zeros
    phi: dict[tuple[str, ...], np.ndarray] = {r: np.zeros(domain.sizes(r)) for r in obj.groups}
    for key, val in (warm or {}).items():
        key = domain.canonical(key)
        if tree.find_clique(key) is None:
            continue
        val = np.asarray(val, dtype=float).reshape(domain.sizes(key))
        phi[key] = phi[key] + val if key in phi else val.copy()
    base = [np.zeros(s) for s in plan.shapes]
    for z in zeros:
        key = domain.canonical(z.attrs)
        mask = z.mask.reshape(domain.sizes(z.attrs))
        if key != z.attrs:
            mask = mask.transpose([z.attrs.index(a) for a in key])
        i = tree.find_clique(key)
        base[i] = np.where(mask.reshape(broadcast_shape(domain, key, tree.cliques[i])), -np.inf, base[i])
    assigned: list[list[tuple[tuple[str, ...], tuple[int, ...]]]] = [[] for _ in tree.cliques]
    for r in phi:
        i = tree.find_clique(r)
        assigned[i].append((r, broadcast_shape(domain, r, tree.cliques[i])))

    n_eval = [0]

    def evaluate(params):
        n_eval[0] += 1
        theta = []
        for b, items in zip(base, assigned):
            t = b
            for r, shape in items:
                t = t + params[r].reshape(shape)
            theta.append(t)
        mu, _, _ = belief_propagation(plan, theta, total)
        return (theta, mu) + obj(mu)

    # Diagonal preconditioner (method="precond"): per measured cell, the inverse curvature of the
    # loss in log space, 1 / (2 Σω (x + s)). Near-empty cells then move by O(1) in log space per
    # step (like iterative proportional fitting) instead of by O(ω·|y|·step), which is what makes
    # plain mirror descent crawl when noisy counts of empty cells are negative.
    curv = {r: 2.0 * sum(w * (1.0 if q is None else np.einsum("ij,ij->j", q, q)) for q, _, w in items)
            for r, items in obj.groups.items()}
    smooth = {r: 0.01 * total / max(1, domain.size(r)) for r in obj.groups}

    if method not in ("md", "precond"):
        raise ValueError("method must be 'md' or 'precond'")
    precond = method == "precond"

    def direction(grads, xs):
        if not precond:
            return grads
        return {r: g / (curv[r] * (np.maximum(xs[r], 0.0) + smooth[r])) for r, g in grads.items()}

    def step_from(params, grads, alpha):
        return {r: (v - alpha * grads[r].reshape(v.shape) if r in grads else v) for r, v in params.items()}

    def decrease(grads, xs0, xs1):  # ⟨∇L(μ0), μ0 − μ1⟩ through the measured marginals
        return sum(float(np.vdot(g, xs0[r] - xs1[r])) for r, g in grads.items())

    theta, mu, loss, grads, xs = evaluate(phi)
    history = [loss]
    converged = not obj.groups
    it = 0
    backtracked = False
    alpha = step
    if obj.groups and loss > 0:
        # a step that moves each cell by about its residual (dμ/dθ ≈ μ ≤ N); warm starts reuse theirs
        wmax = max(w for items in obj.groups.values() for _, _, w in items)
        alpha = step if step is not None else 1.0 / (2.0 * wmax * total)
        alpha /= grow
        alpha_p = 0.5  # relative step along the preconditioned direction (1 = a full diagonal Newton step)
        for it in range(1, iters + 1):
            ok = False
            if precond:
                # one try along the preconditioned direction; on failure shrink its step and fall
                # back to a plain mirror-descent step (a second try costs more than it gains)
                alpha_p = min(alpha_p * grow, 1.0)
                cand = step_from(phi, direction(grads, xs), alpha_p)
                theta_c, mu_c, loss_c, grads_c, xs_c = evaluate(cand)
                dec = decrease(grads, xs, xs_c)
                ok = dec > 0 and loss - loss_c >= 0.25 * dec
                if not ok:
                    alpha_p = max(alpha_p * 0.25, 1e-3)
            if not ok:
                alpha *= grow
                for _ in range(30):
                    cand = step_from(phi, grads, alpha)
                    theta_c, mu_c, loss_c, grads_c, xs_c = evaluate(cand)
                    if loss - loss_c >= 0.5 * alpha * decrease(grads, xs, xs_c):
                        break
                    alpha *= 0.5
                    backtracked = True
            phi, theta, mu, loss, grads, xs = cand, theta_c, mu_c, loss_c, grads_c, xs_c
            history.append(loss)
            if callback is not None:
                callback(it, loss)
            # the tolerance applies once the step size has found its scale (first backtrack)
            if (backtracked or precond) and it >= 10 and history[-11] - loss <= tol * max(loss, 1e-300):
                converged = True
                break
            if loss <= 1e-30 * total**2:
                converged = True
                break
    model = GraphicalModel(domain, tree, theta, total, plan=plan, marginals=mu)
    model.potentials = phi
    model.step_size = alpha
    model.zeros = zeros
    model.info = FitInfo(loss=loss, iterations=it, seconds=time.perf_counter() - t0,
                         converged=converged, history=history, evaluations=n_eval[0])
    return model


def _inner(g: np.ndarray, x: np.ndarray) -> float:
    """⟨g, x⟩ where g broadcasts against x (sum x over g's broadcast axes first)."""
    if g.shape != x.shape:
        x = x.sum(axis=tuple(i for i, (a, b) in enumerate(zip(g.shape, x.shape)) if a == 1 and b > 1),
                  keepdims=True)
    return float(np.vdot(g, x))


def loss_of(domain: Domain, measurements: Sequence[Measurement], marginal: Callable[[tuple], np.ndarray],
            weighting: str = "mle") -> float:
    """The Private-PGM loss of any distribution given by ``marginal(attrs)`` (canonical, counts)."""
    total = 0.0
    for m in measurements:
        canon, y, q = _canonical_measurement(domain, m)
        x = np.asarray(marginal(canon), dtype=float).ravel()
        res = (x if q is None else q @ x) - y
        w = {"mle": 1 / (2 * m.sigma**2), "inv_sigma": 1 / m.sigma, "equal": 1.0}[weighting]
        total += w * float(res @ res)
    return total
