"""The schema's rules (:mod:`privmarg.schema.rules`) over the coded domain: bin edges, protected
categories, structural zeros, and a count of the records that break them.

Every step here is post-processing of public facts (the rules) and of the encoder's released
parameters: no privacy cost. Each comparison is evaluated on every code as the set of raw values the
code can decode to (a bin's interval, an atom, a group of merged categories, a missing value), in
three-valued logic: "can be true" and "can be false". With the rules' constants as bin edges and the
categories they name kept out of merged groups, every comparison is decided on every code, so a cell
where a rule cannot be true holds no valid record and a cell where it can be true holds no invalid
one; the first become structural zeros.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Domain, StructuralZero
from ..schema.column import ColumnSpec
from ..schema.values import value_key
from ..schema.rules import (And, Compare, CompareColumns, Expr, IsNull, Member, Not, Or, Rule, RuleError,
                            datetime_units)

__all__ = ["rule_cuts", "protected_values", "cut_codec", "rule_zeros", "broken", "violations"]

MAX_RULE_CELLS = 1 << 22  # a rule's mask over its columns' codes


# ---------------------------------------------------------------------------------- literals
def _number(spec: ColumnSpec, v: Any) -> float:
    return datetime_units(spec, v) if spec.type == "datetime" else float(v)


def _base_index(spec: ColumnSpec, v: Any) -> int:
    """A categorical/boolean literal's base code (as the encoder numbers base values)."""
    if spec.type == "boolean":
        if isinstance(v, bool):
            return int(v)
        labels = list(spec.labels or ())
        return labels.index(next(lab for lab in labels if value_key(lab) == value_key(v)))
    keys = [value_key(x) for x in spec.values]
    if value_key(v) in keys:
        return keys.index(value_key(v))
    return len(keys)  # the "other" value (checked when the schema was read)


def rule_cuts(rules: Sequence[Rule], columns: dict[str, ColumnSpec]) -> tuple[dict[str, list[float]],
                                                                              dict[str, list[float]]]:
    """Per numeric column, (edges, atoms) that decide each of its comparisons with a constant on
    every code. Integer and datetime columns: an edge where the comparison flips between two
    integers. Float columns: an edge at the constant, and for ``<=`` and ``>`` an atom there too
    (the constant itself is then a code of its own, not the first value of the bin above)."""
    cuts: dict[str, set[float]] = {}
    atoms: dict[str, set[float]] = {}
    for rule in rules:
        for node in rule.comparisons():
            if not isinstance(node, (Compare, Member)):
                continue
            spec = columns[node.column]
            if not spec.numeric:
                continue
            lits = node.values if isinstance(node, Member) else (node.value,)
            out = cuts.setdefault(node.column, set())
            for v in lits:
                c = _number(spec, v)
                if not spec.lattice:
                    out.add(c)
                    if node.op in ("<=", ">") and spec.lo <= c <= spec.hi:
                        atoms.setdefault(node.column, set()).add(c)
                    continue
                op = "==" if isinstance(node, Member) else node.op
                if op in ("<", ">="):
                    out.add(float(math.ceil(c)))
                elif op in ("<=", ">"):
                    out.add(float(math.floor(c) + 1))
                elif float(c).is_integer():  # == / != / in: the value's own one-integer bin
                    out.update((c, c + 1))
    return {k: sorted(v) for k, v in cuts.items()}, {k: sorted(v) for k, v in atoms.items()}


def protected_values(rules: Sequence[Rule], columns: dict[str, ColumnSpec]) -> dict[str, set[int]]:
    """Per categorical column, the base codes a rule names: never merged with rare categories."""
    out: dict[str, set[int]] = {}
    for rule in rules:
        for node in rule.comparisons():
            if isinstance(node, (Compare, Member)) and columns[node.column].type == "categorical":
                lits = node.values if isinstance(node, Member) else (node.value,)
                out.setdefault(node.column, set()).update(_base_index(columns[node.column], v) for v in lits)
    return out


# ---------------------------------------------------------------------------------- cuts
def cut_codec(codec: Any, cuts: Sequence[float], atoms: Sequence[float] = ()) -> Any:
    """``codec`` (a numeric :class:`~privmarg.preprocess.encoder.ColumnCodec`, changed in place) with each cut inside
    its range made a bin edge and each of ``atoms`` a code of its own. An adaptive codec's leaves
    are split at the cut too (the split leaf's noisy share divided by width) and each bin's
    within-bin shares renormalised."""
    if len(atoms):
        codec.atoms = np.union1d(np.asarray(codec.atoms, dtype=float), np.asarray(atoms, dtype=float))
    edges = np.asarray(codec.edges, dtype=float)
    new = [c for c in cuts if edges[0] < c < edges[-1] and not np.isin(c, edges)]
    if not new:
        return codec
    codec.edges = np.union1d(edges, new)
    if codec.leaf_edges is None:
        return codec
    leaves = np.asarray(codec.leaf_edges, dtype=float)
    old_bin = np.floor(codec.leaf_cum - 1e-12).astype(np.int64)
    old_bin = np.minimum(np.maximum(old_bin, 0), len(edges) - 2)
    prev = np.r_[0.0, codec.leaf_cum[:-1]]
    start = np.r_[True, old_bin[1:] != old_bin[:-1]]
    share = codec.leaf_cum - np.where(start, old_bin, prev)  # each leaf's share of its old bin
    scale = np.asarray(codec.leaf_scale, dtype=float)
    for c in new:
        if np.isin(c, leaves):
            continue
        i = int(np.searchsorted(leaves, c, side="right") - 1)
        w = leaves[i + 1] - leaves[i]
        part = (c - leaves[i]) / w if w > 0 else 0.5
        leaves = np.insert(leaves, i + 1, c)
        share = np.insert(share, i + 1, share[i] * (1 - part))
        share[i] *= part
        scale = np.insert(scale, i + 1, scale[i])
    group = np.searchsorted(codec.edges, leaves[:-1], side="right") - 1
    tot = np.bincount(group, weights=share, minlength=len(codec.edges) - 1)
    width = np.diff(leaves)
    wtot = np.bincount(group, weights=width, minlength=len(codec.edges) - 1)
    s = np.where(tot[group] > 0, share / np.where(tot[group] > 0, tot[group], 1.0), width / wtot[group])
    within = np.cumsum(s) - np.r_[0.0, np.cumsum(np.bincount(group, weights=s))][group]
    cum = group + np.minimum(within, 1.0)
    ends = np.r_[np.flatnonzero(group[1:] != group[:-1]), len(group) - 1]
    cum[ends] = group[ends] + 1.0
    codec.leaf_edges, codec.leaf_cum, codec.leaf_scale = leaves, cum, scale
    return codec


# ---------------------------------------------------------------------------------- evaluation
class _Numeric:
    """The raw values of a numeric column's codes (or rows): from ``lo`` to ``hi``, ``lo`` left out
    where ``lo_open`` (an atom there has a code of its own), ``hi`` where ``open_``; nothing where
    ``null``."""

    def __init__(self, lo, hi, open_, null, lo_open=None):
        self.lo, self.hi, self.open, self.null = lo, hi, open_, null
        self.lo_open = np.zeros_like(open_) if lo_open is None else lo_open

    def compare(self, op: str, c: float):
        lo, hi, op_, lop, null = self.lo, self.hi, self.open, self.lo_open, self.null
        below = (hi < c) | ((hi == c) & op_)  # every value < c
        above = (lo > c) | ((lo == c) & lop)  # every value > c
        if op == "<":
            all_t, all_f = below, lo >= c
        elif op == "<=":
            all_t, all_f = hi <= c, above
        elif op == ">":
            all_t, all_f = above, hi <= c
        elif op == ">=":
            all_t, all_f = lo >= c, below
        else:
            single = (lo == c) & (hi == c) & ~op_ & ~lop
            outside = below | above
            all_t, all_f = (single, outside) if op == "==" else (outside, single)
        return ~(all_f | null), ~(all_t & ~null)  # (can be true, can be false)

    def compare_with(self, op: str, other: "_Numeric"):
        lx, hx, ly, hy = self.lo, self.hi, other.lo, other.hi
        null = self.null | other.null
        if op == "<":
            all_t, all_f = hx < ly, lx >= hy
        elif op == "<=":
            all_t, all_f = hx <= ly, lx > hy
        elif op == ">":
            all_t, all_f = lx > hy, hx <= ly
        elif op == ">=":
            all_t, all_f = lx >= hy, hx < ly
        else:
            single = (lx == hx) & (ly == hy) & (lx == ly)
            apart = (hx < ly) | (hy < lx)
            all_t, all_f = (single, apart) if op == "==" else (apart, single)
        return ~(all_f | null), ~(all_t & ~null)


class _Category:
    """The base values of a categorical/boolean column's codes (``member[code, base]``, laid along
    ``shape`` when given: the column's axis of a rule's grid) or rows (``base`` per row, -1 missing)."""

    def __init__(self, member=None, base=None, null=None, shape=None):
        self.member, self.base, self.shape = member, base, shape
        self.flat_null = null
        self.null = null if shape is None else null.reshape(shape)

    def isin(self, codes: list[int]):
        if self.base is not None:
            hit = np.isin(self.base, codes)
            return hit & ~self.null, ~hit | self.null
        inside = self.member[:, codes].sum(axis=1) if codes else np.zeros(len(self.member))
        size = self.member.sum(axis=1)
        t, f = (inside > 0) & ~self.flat_null, (inside < size) | self.flat_null
        return (t, f) if self.shape is None else (t.reshape(self.shape), f.reshape(self.shape))


def _truth(e: Expr, cols: dict[str, Any], specs: dict[str, ColumnSpec]):
    """(can be true, can be false) of ``e`` over the cells (broadcast arrays)."""
    if isinstance(e, Not):
        t, f = _truth(e.arg, cols, specs)
        return f, t
    if isinstance(e, (And, Or)):
        parts = [_truth(a, cols, specs) for a in e.args]
        ts, fs = [p[0] for p in parts], [p[1] for p in parts]
        if isinstance(e, And):
            return np.logical_and.reduce(np.broadcast_arrays(*ts)), np.logical_or.reduce(np.broadcast_arrays(*fs))
        return np.logical_or.reduce(np.broadcast_arrays(*ts)), np.logical_and.reduce(np.broadcast_arrays(*fs))
    if isinstance(e, IsNull):
        null = cols[e.column].null
        return (~null, null) if e.negated else (null, ~null)
    if isinstance(e, CompareColumns):
        return cols[e.left].compare_with(e.op, cols[e.right])
    spec = specs[e.column]
    d = cols[e.column]
    if isinstance(e, Member):
        if spec.numeric:  # integer membership: any of the values (a non-whole one is never held)
            parts = [d.compare("==", _number(spec, v)) for v in e.values if float(_number(spec, v)).is_integer()]
            if not parts:
                t, f = np.zeros_like(d.null), np.ones_like(d.null)
            else:
                t = np.logical_or.reduce(np.broadcast_arrays(*[p[0] for p in parts]))
                f = np.logical_and.reduce(np.broadcast_arrays(*[p[1] for p in parts]))
        else:
            t, f = d.isin(sorted({_base_index(spec, v) for v in e.values}))
        if e.negated:  # a missing value is in no list, and "not in" is false for it too
            return f & ~d.null, t | d.null
        return t, f
    if spec.numeric:
        c = _number(spec, e.value)
        if spec.lattice and e.op in ("==", "!=") and not float(c).is_integer():  # no integer equals it
            never = np.zeros_like(d.null)
            return (never, ~never | d.null) if e.op == "==" else (~d.null, d.null.copy())
        return d.compare(e.op, c)
    t, f = d.isin([_base_index(spec, e.value)])
    if e.op == "!=":
        return f & ~d.null, t | d.null
    return t, f


def _code_cells(codec: Any) -> Any:
    """Descriptors of every code of a fitted column (bins, atoms, the merged group, missing)."""
    spec = codec.spec
    n = codec.size
    null = np.zeros(n, dtype=bool)
    if codec.missing_code is not None:
        null[codec.missing_code] = True
    if codec.edges is not None:
        e = np.asarray(codec.edges, dtype=float)
        nb = len(e) - 1
        a = np.asarray(codec.atoms, dtype=float)
        lo, hi = np.zeros(n), np.zeros(n)
        op, lop = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        lo[:nb] = e[:-1]
        if spec.lattice:  # bin j holds the integers e[j] .. e[j+1] − 1, less the atoms (their own codes)
            hi[:nb] = e[1:] - 1
            lo2, hi2 = lo[:nb] + np.isin(lo[:nb], a), hi[:nb] - np.isin(hi[:nb], a)
            # a bin left with no integer of its own still decodes to one (an atom): keep its range
            empty = lo2 > hi2
            lo[:nb], hi[:nb] = np.where(empty, lo[:nb], lo2), np.where(empty, hi[:nb], hi2)
        else:  # [e[j], e[j+1]), the last bin closed at the upper bound; an atom at an edge is not in it
            hi[:nb] = e[1:]
            op[:nb - 1] = True
            op[:nb] |= np.isin(hi[:nb], a)
            lop[:nb] = np.isin(lo[:nb], a)
        lo[nb:nb + len(a)] = a
        hi[nb:nb + len(a)] = a
        return _Numeric(lo, hi, op, null, lop)
    k = len(codec.labels())
    member = np.zeros((n, k), dtype=bool)
    member[np.arange(len(codec.kept)), codec.kept] = True
    if len(codec.group):
        member[len(codec.kept), codec.group] = True
    return _Category(member=member, null=null)


def _row_cells(spec: ColumnSpec, v: np.ndarray) -> Any:
    if spec.numeric:
        null = np.isnan(v)
        return _Numeric(v, v, np.zeros(len(v), dtype=bool), null)
    return _Category(base=v, null=v < 0)


def rule_zeros(rules: Sequence[Rule], codecs: dict[str, Any], domain: Domain) -> tuple[list[StructuralZero], list[str]]:
    """The structural zeros of ``rules`` over the fitted codes, and notes on cells a rule could not
    decide (none when the encoder applied :func:`rule_cuts` and :func:`protected_values`)."""
    zeros, notes = [], []
    specs = {name: c.spec for name, c in codecs.items()}
    for rule in rules:
        cols = rule.columns
        attrs = tuple(a for a in domain.attrs if a in cols)  # the zero in domain order
        cells = int(np.prod([codecs[a].size for a in attrs]))
        if cells > MAX_RULE_CELLS:
            raise RuleError(f"rule {rule.text!r}: its columns have {cells} code combinations (at most "
                            f"{MAX_RULE_CELLS}); fewer bins or categories")
        desc: dict[str, Any] = {}
        for ax, a in enumerate(attrs):  # each column's codes along its own axis of the rule's grid
            d = _code_cells(codecs[a])
            shape = [1] * len(attrs)
            shape[ax] = -1
            if isinstance(d, _Numeric):
                desc[a] = _Numeric(d.lo.reshape(shape), d.hi.reshape(shape), d.open.reshape(shape),
                                   d.null.reshape(shape), d.lo_open.reshape(shape))
            else:
                desc[a] = _Category(member=d.member, null=d.flat_null, shape=shape)
        t, f = _truth(rule.expr, desc, specs)
        t, f = np.broadcast_to(t, domain.sizes(attrs)), np.broadcast_to(f, domain.sizes(attrs))
        undecided = int((t & f).sum())
        if undecided:
            notes.append(f"rule {rule.text!r}: {undecided} cell(s) hold both valid and invalid values; "
                         "records there are not checked")
        if (~t).any():
            zeros.append(StructuralZero(attrs, ~t))
    return zeros, notes


def broken(rule: Rule, prepared: dict[str, np.ndarray], specs: dict[str, ColumnSpec]) -> np.ndarray:
    """Which records break ``rule``, from the encoder's prepared columns (numeric values with NaN
    for missing, categorical base codes with -1)."""
    cols = {a: _row_cells(specs[a], prepared[a]) for a in rule.columns}
    t, _ = _truth(rule.expr, cols, specs)
    return ~np.asarray(t, dtype=bool)


def violations(rules: Sequence[Rule], prepared: dict[str, np.ndarray], specs: dict[str, ColumnSpec]) -> dict[str, int]:
    """For each rule, the number of records that break it (see :func:`broken`)."""
    return {rule.text: int(broken(rule, prepared, specs).sum()) for rule in rules}
