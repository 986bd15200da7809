"""Belief propagation on a junction tree, in log space (:func:`belief_propagation`) or from the
potentials' exponentials with exact log-space fallbacks where a product underflows
(:func:`belief_propagation_exp`), and the tree's message plan (:class:`_Plan`). Post-processing of
released measurements: no privacy cost."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...core import Domain
from ...core.broadcast import apply_broadcast
from ...core.sums import sum_out
from .junction_tree import JunctionTree


def broadcast_shape(domain: Domain, attrs: Sequence[str], target: Sequence[str]) -> tuple[int, ...]:
    """Shape that lets a table over ``attrs`` broadcast against one over ``target`` (both canonical)."""
    s = set(attrs)
    return tuple(domain[a] if a in s else 1 for a in target)


def sum_axes(attrs: Sequence[str], target: Sequence[str]) -> tuple[int, ...]:
    """Axes of a table over ``target`` to sum out to get one over ``attrs``."""
    s = set(attrs)
    return tuple(i for i, a in enumerate(target) if a not in s)


class _Plan:
    """Precomputed message shapes of one junction tree."""

    def __init__(self, tree: JunctionTree):
        d = tree.domain
        self.tree = tree
        self.shapes = [d.sizes(c) for c in tree.cliques]
        self.children: list[list[int]] = [[] for _ in tree.cliques]
        self.edges = tree.edges
        self.child_axes, self.in_parent, self.parent_axes, self.in_child, self.seps = {}, {}, {}, {}, {}
        for p, c in tree.edges:
            self.children[p].append(c)
            sep = tuple(a for a in tree.cliques[c] if a in set(tree.cliques[p]))
            self.seps[c] = sep
            self.child_axes[c] = sum_axes(sep, tree.cliques[c])
            self.parent_axes[c] = sum_axes(sep, tree.cliques[p])
            self.in_parent[c] = broadcast_shape(d, sep, tree.cliques[p])
            self.in_child[c] = broadcast_shape(d, sep, tree.cliques[c])
        self.bfs = [0] + [c for _, c in tree.edges]


def belief_propagation(plan: _Plan, theta: list[np.ndarray], total: float, out: list[np.ndarray] | None = None):
    """Calibrate the tree (Hugin-style, log space). Returns (marginals scaled to ``total``, log Z, None).

    ``out``: arrays (one per clique) to write the marginals into, e.g. views of one flat buffer; they
    also serve as the pass's working memory, so a pass allocates only separator-sized arrays.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return _bp(plan, theta, total, out)


# tables this big are exponentiated by torch (its vectorised exp runs ~3x numpy's float64 one); from
# 4M cells (~25 ms saved a call) torch's import (~2.5 CPU s, once) pays for itself within a fit
EXP_TORCH_CELLS = 1 << 22


def _exp_shifted(src: np.ndarray, shift: float, dst: np.ndarray) -> np.ndarray:
    """``dst = exp(src − shift)`` in place, with no temporary (fresh pages cost more than the exp)."""
    np.subtract(src, shift, out=dst)
    if dst.size >= EXP_TORCH_CELLS and dst.flags.c_contiguous:
        import torch

        torch.from_numpy(dst).exp_()
    else:
        np.exp(dst, out=dst)
    return dst


# a separator value's total (or a clique's largest cell) below this, in a table scaled to at most
# 1, may have lost cells to underflow (float64 flushes below 1e-308, float32's normal range ends at
# 1e-38): where another clique favours them that matters, so they are redone in log space. Above
# it, a thousand flushed cells would move a total by less than 1e-55 (float64) or 1e-7 (float32).
FAR_BELOW = {"d": 1e-250, "f": 1e-28}


def _log_belief(theta: np.ndarray, ups: list[np.ndarray], down: np.ndarray | None = None) -> np.ndarray:
    """A clique's belief in log space (a new table): θ plus its children's upward messages ``ups``
    and, once known, the message ``down`` from its parent."""
    bel = theta.copy()
    for u in ups:
        bel += u
    if down is not None:
        bel += down
    return bel


def _log_message(theta: np.ndarray, ups: list[np.ndarray], axes: tuple[int, ...]) -> np.ndarray:
    """log Σ over ``axes`` of exp(θ + Σ ``ups``), one shift per kept cell: exact where one scalar
    shift for the whole clique would underflow a separator value's every cell."""
    bel = _log_belief(theta, ups)
    top = np.max(bel, axis=axes, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0).astype(bel.dtype)
    tot = sum_out(np.exp(bel - top), axes)
    return np.log(tot) + top.reshape(tot.shape)


def _zero_mass() -> FloatingPointError:
    return FloatingPointError("the model puts zero mass everywhere (contradictory structural zeros?)")


def _bp(plan: _Plan, theta: list[np.ndarray], total: float, out=None):
    n = len(theta)
    if out is None:
        out = [np.empty(s, dtype=np.result_type(*theta)) for s in plan.shapes] if theta else []
    # out[i] holds clique i's upward log belief (θ_i + its children's messages) while they arrive,
    # then exp(belief − shift[i]), and at the end the marginal
    filled = [False] * n
    shift = [0.0] * n
    up: list[np.ndarray | None] = [None] * n
    up_inf = [False] * n
    for p, c in reversed(plan.edges):
        # one scalar shift per clique saves a pass per message; a separator value whose cells all
        # underflow under it gets its message redone with its own shift
        bc = out[c] if filled[c] else theta[c]
        m = float(bc.max())
        if not np.isfinite(m):
            raise _zero_mass()
        ax = plan.child_axes[c]
        msg = None if ax else bc.copy()
        ec = _exp_shifted(bc, m, out[c])
        shift[c] = m
        if msg is None:
            tot = sum_out(ec, ax)
            if tot.min() > FAR_BELOW[tot.dtype.char]:
                msg = np.log(tot) + m
            else:
                msg = _log_message(theta[c], [up[cc] for cc in plan.children[c]], ax)
        up_inf[c] = not np.isfinite(msg).all()
        msg = msg.reshape(plan.in_parent[c])
        up[c] = msg
        apply_broadcast(np.add, out[p] if filled[p] else theta[p], msg, out[p])
        filled[p] = True
    # the root sent no upward message, so its exponential is still to make
    root = plan.bfs[0]
    br = out[root] if filled[root] else theta[root]
    shift[root] = float(np.max(br))
    if not np.isfinite(shift[root]):
        raise _zero_mass()
    _exp_shifted(br, shift[root], out[root])
    log_z = float(np.log(out[root].sum()) + shift[root])
    for i in plan.bfs:
        ei, m = out[i], shift[i]
        for c in plan.children[i]:
            ax = plan.parent_axes[c]
            sep = np.log(sum_out(ei, ax)) + m
            upc = up[c].reshape(plan.in_child[c])
            down = sep.reshape(plan.in_child[c]) - upc
            if up_inf[c]:  # -inf - -inf on zero-mass separator cells
                down = np.where(np.isneginf(upc), -np.inf, down)
            # the child's belief is its upward one plus a separator-sized message: scale its
            # exponential by exp(message) instead of exponentiating the whole clique again
            s = float(np.max(down))
            if not np.isfinite(s):
                raise _zero_mass()
            ec = apply_broadcast(np.multiply, out[c], np.exp(down - s), out[c])
            shift[c] += s
            if not ec.max() > FAR_BELOW[ec.dtype.char]:  # the two peaks far apart: redo it in log space, exactly
                bc = _log_belief(theta[c], [up[cc] for cc in plan.children[c]], down)
                shift[c] = float(np.max(bc))
                _exp_shifted(bc, shift[c], out[c])
    for i in range(n):
        scale = np.exp(shift[i] - log_z) * total
        np.multiply(out[i], scale, out=out[i])
    return out, log_z, None


def belief_propagation_exp(plan: _Plan, tables: list[np.ndarray], shifts, total: float, out: list[np.ndarray],
                           theta: Callable[[int], np.ndarray]):
    """:func:`belief_propagation` from the potentials' exponentials: ``tables[i]`` = exp(θ_i −
    ``shifts[i]``) (read only, or ``out`` itself to work in place). Messages enter a clique as
    products, so no clique's cells are exponentiated; where a product underflows, that clique is
    redone in log space from ``theta(i)`` (clique ``i``'s log potential, asked for at most once a
    clique). Writes the marginals into ``out``; returns (marginals, log Z, None)."""
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        return _bp_exp(plan, tables, list(map(float, shifts)), total, out, theta)


def _bp_exp(plan: _Plan, tables, shift, total, out, theta_fn):
    n = len(tables)
    cur = list(tables)  # where clique i's exponential is: its table until the first write to out[i]
    up: list[np.ndarray | None] = [None] * n
    up_inf = [False] * n
    logs: dict[int, np.ndarray] = {}

    def theta(i: int) -> np.ndarray:
        if i not in logs:
            logs[i] = theta_fn(i)
        return logs[i]

    far = FAR_BELOW[out[0].dtype.char] if n else 0.0
    for p, c in reversed(plan.edges):
        ec = cur[c]
        ax = plan.child_axes[c]
        tot = sum_out(ec, ax) if ax else ec
        if tot.min() > far:
            msg = np.log(tot) + shift[c]
        else:  # a separator value underflowed (or has no mass): exact, in log space
            kids = [up[cc] for cc in plan.children[c]]
            msg = _log_message(theta(c), kids, ax) if ax else theta(c) + sum(kids)
        up_inf[c] = not np.isfinite(msg).all()
        msg = msg.reshape(plan.in_parent[c])
        up[c] = msg
        top = float(msg.max())
        if not np.isfinite(top):
            raise _zero_mass()
        apply_broadcast(np.multiply, cur[p], np.exp(msg - top).astype(out[p].dtype, copy=False), out[p])
        cur[p] = out[p]
        shift[p] += top
    root = plan.bfs[0]
    if cur[root] is not out[root]:
        np.copyto(out[root], cur[root])
        cur[root] = out[root]
    z = float(out[root].sum())
    if not z > far:  # every cell far below the shift: redo the root in log space
        bel = _log_belief(theta(root), [up[cc] for cc in plan.children[root]])
        shift[root] = float(np.max(bel))
        if not np.isfinite(shift[root]):
            raise _zero_mass()
        _exp_shifted(bel, shift[root], out[root])
        z = float(out[root].sum())
    log_z = float(np.log(z) + shift[root])
    log_total = float(np.log(total)) if total > 0 else -np.inf
    np.multiply(out[root], np.exp(shift[root] - log_z) * total, out=out[root])
    # top down: each clique's table becomes its marginal (counts) in the pass that multiplies its
    # parent's message in, so its children's messages come from the marginal
    for i in plan.bfs:
        ei = out[i]
        for c in plan.children[i]:
            sep = np.log(sum_out(ei, plan.parent_axes[c])) + (log_z - log_total)
            upc = up[c].reshape(plan.in_child[c])
            down = sep.reshape(plan.in_child[c]) - upc
            if up_inf[c]:
                down = np.where(np.isneginf(upc), -np.inf, down)
            s = float(np.max(down))
            if not np.isfinite(s):
                raise _zero_mass()
            with np.errstate(over="ignore"):  # an overflow is not foldable: handled just below
                scale = float(np.exp(shift[c] + s - log_z) * total)
            foldable = 1e-30 < scale < 1e30  # the scaled factor stays in range (float32 too)
            factor = np.exp(down - s) * scale if foldable else np.exp(down - s)
            ec = apply_broadcast(np.multiply, cur[c], factor.astype(out[c].dtype, copy=False), out[c])
            cur[c] = out[c]
            shift[c] += s
            if not ec.max() > far * (scale if foldable else 1.0):
                bc = _log_belief(theta(c), [up[cc] for cc in plan.children[c]], down)
                shift[c] = float(np.max(bc))
                _exp_shifted(bc, shift[c], out[c])
                foldable = False
            if not foldable:
                np.multiply(out[c], np.exp(shift[c] - log_z) * total, out=out[c])
    return out, log_z, None
