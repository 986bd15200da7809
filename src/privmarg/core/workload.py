"""Weighted marginal workloads and their downward closure (SPEC §2)."""

from __future__ import annotations

import itertools
import json
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from .domain import Domain
from . import strict_json

Workload = list[tuple[tuple[str, ...], float]]


def all_kway(domain: Domain, k: int, target: str | None = None) -> Workload:
    """All k-way marginals (weight 1); with ``target``, only those containing it."""
    if k < 1:
        raise ValueError("k must be at least 1")
    if target is not None:
        if target not in domain:
            raise KeyError(f"unknown target attribute {target!r}")
        return kway_involving(domain, k, [target])
    return [(c, 1.0) for c in itertools.combinations(domain.attrs, min(k, len(domain)))]


def kway_involving(domain: Domain, k: int, cols: Sequence[str]) -> Workload:
    """The k-way marginals (weight 1, k capped at the number of attributes) containing at least one
    of ``cols``, in :func:`all_kway`'s order. Enumerated directly, by the first of ``cols`` each
    clique holds: 600 attributes, k = 3, one column is C(599, 2) cliques, not C(600, 3) filtered."""
    if k < 1:
        raise ValueError("k must be at least 1")
    k = min(k, len(domain))
    idx = domain.axes(_names(domain, cols, "involving"))
    found: list[tuple[int, ...]] = []
    for j, a in enumerate(idx):
        others = sorted(set(range(len(domain))) - set(idx[: j + 1]))
        found += (tuple(sorted(c + (a,))) for c in itertools.combinations(others, k - 1))
    found.sort()
    return [(tuple(domain.attrs[i] for i in c), 1.0) for c in found]


def kway_within(domain: Domain, k: int, groups: Sequence[Sequence[str]]) -> Workload:
    """The k-way marginals (weight 1, k capped at the number of attributes) lying inside one of
    ``groups``, in :func:`all_kway`'s order, each once. A group smaller than k gives none; none at
    all is an error."""
    if k < 1:
        raise ValueError("k must be at least 1")
    k = min(k, len(domain))
    if not groups:
        raise ValueError("workload within=: needs at least one group of columns")
    found: set[tuple[int, ...]] = set()
    for g in groups:
        found.update(itertools.combinations(sorted(domain.axes(_names(domain, g, "within"))), k))
    if not found:
        raise ValueError(f"workload within=: no group has {k} columns, so there is no {k}-way marginal")
    return [(tuple(domain.attrs[i] for i in c), 1.0) for c in sorted(found)]


def _names(domain: Domain, cols: Sequence[str], key: str) -> list[str]:
    """``cols`` checked: not empty, no empty or repeated name, every name a column of ``domain``."""
    cols = list(cols)
    if not cols or "" in cols:
        raise ValueError(f"workload {key}=: empty column list or empty column name in {cols}")
    rep = sorted({a for a in cols if cols.count(a) > 1})
    if rep:
        raise ValueError(f"workload {key}=: column(s) {rep} repeated in {cols}")
    for a in cols:
        if a not in domain:
            hint = " (names are taken exactly, spaces included)" if a.strip() in domain else ""
            raise KeyError(f"workload {key}=: unknown column {a!r}{hint}")
    return cols


_FORMS = "all-Kway, all-Kway:target=COL, all-Kway:involving=A,B,..., all-Kway:within=A,B,...;C,D,..."


def parse_workload(spec: str | Sequence | None, domain: Domain, default: str = "all-3way") -> Workload:
    """A workload from a string form, a JSON file, or a list.

    String forms (weights 1; K is capped at the number of columns):

    - ``all-Kway``, e.g. ``"all-3way"``: every K-way marginal;
    - ``all-Kway:target=COL``: those containing ``COL`` (any characters);
    - ``all-Kway:involving=A,B,C``: those containing at least one of the listed columns;
    - ``all-Kway:within=A,B,C;D,E``: those inside one of the ``;``-separated groups (each once).

    In ``involving`` and ``within`` names are taken exactly (spaces included) and cannot contain
    ``,`` or ``;`` (use a JSON file). Unknown columns raise :class:`KeyError`; empty or repeated
    names, an unknown key, or a ``within`` with no K-way clique raise :class:`ValueError`.

    A list holds cliques or ``(clique, weight)`` pairs; a clique is a list of attribute names
    (JSON: ``[["a","b"], [["c"], 2], {"attrs": ["a","b"], "weight": 2}, ...]``). Strict: a clique
    that is a string (``"ab"``), a top-level object, unknown or repeated attribute names, and
    weights that are not finite positive numbers are errors (before any budget is spent).
    """
    if spec is None:
        spec = default
    where = "workload"
    if isinstance(spec, (str, Path)):
        s = str(spec)
        m = re.fullmatch(r"all-(\d+)way(?::(\w+)=(.*))?", s)
        if m:
            k, key, val = int(m.group(1)), m.group(2), m.group(3)
            if key is None:
                return all_kway(domain, k)
            if key == "target":
                if not val:
                    raise ValueError(f"workload {s!r}: target= needs a column name")
                return all_kway(domain, k, val)
            if key == "involving":
                return kway_involving(domain, k, val.split(","))
            if key == "within":
                return kway_within(domain, k, [g.split(",") for g in val.split(";")])
            raise ValueError(f"workload {s!r}: unknown key {key!r} (expected target, involving or within)")
        path = Path(s)
        if not path.is_file():
            raise ValueError(f"workload {s!r}: expected {_FORMS} or a JSON file")
        where = f"workload {s}"
        try:
            with open(path) as fh:
                spec = strict_json.load(fh, parse_constant=_no_constant)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: not valid JSON: {e}") from None
        except ValueError as e:  # NaN, Infinity (parse_constant) or bad encoding
            raise ValueError(f"{where}: {e}") from None
    if isinstance(spec, (str, bytes, Mapping)) or not isinstance(spec, Sequence):
        raise ValueError(f"{where}: must be a list of cliques (lists of attribute names), "
                         f"got {type(spec).__name__}")
    out: Workload = []
    for i, item in enumerate(spec):
        at = f"{where}, entry {i + 1}"
        if isinstance(item, Mapping):
            unknown = set(item) - {"attrs", "weight"}
            if unknown or "attrs" not in item:
                raise ValueError(f"{at}: an object entry is {{\"attrs\": [...], \"weight\": w}}, "
                                 f"got keys {sorted(map(str, item))}")
            attrs, w = item["attrs"], item.get("weight", 1.0)
        elif _is_list(item) and len(item) == 2 and _is_list(item[0]):
            attrs, w = item
        else:
            attrs, w = item, 1.0
        attrs = _clique(attrs, at, domain)
        out.append((domain.canonical(attrs), _weight(w, attrs, at)))
    if not out:
        raise ValueError(f"{where}: the workload is empty")
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a valid weight (weights must be finite positive numbers)")


def _is_list(x) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, (str, bytes))


def _clique(attrs, at: str, domain: Domain) -> tuple[str, ...]:
    if not _is_list(attrs):
        hint = f" (write [{', '.join(repr(c) for c in attrs)}] for a clique of single letters)" \
            if isinstance(attrs, str) and len(attrs) > 1 and all(c in domain for c in attrs) else ""
        raise ValueError(f"{at}: a clique must be a list of attribute names, got {attrs!r}{hint}")
    if not attrs:
        raise ValueError(f"{at}: a clique must name at least one attribute")
    bad = [a for a in attrs if not isinstance(a, str)]
    if bad:
        raise ValueError(f"{at}: attribute names must be strings, got {bad[0]!r}")
    if len(set(attrs)) != len(attrs):
        raise ValueError(f"{at}: attribute repeated in {list(attrs)}")
    unknown = [a for a in attrs if a not in domain]
    if unknown:
        raise KeyError(f"{at}: unknown attribute(s) {unknown}")
    return tuple(attrs)


def _weight(w, attrs, at: str) -> float:
    if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w) or not w > 0:
        raise ValueError(f"{at}: the weight of {list(attrs)} must be a finite positive number, got {w!r}")
    return float(w)


def downward_closure(workload: Workload, domain: Domain) -> dict[tuple[str, ...], float]:
    """Every non-empty subset ``r`` of a workload clique with AIM's weight ``Σ_i c_i·|r ∩ s_i|``.

    Ordered by size, then canonical order. The weight is linear in ``r``:
    ``Σ_i c_i·|r ∩ s_i| = Σ_{a∈r} Σ_{i: a∈s_i} c_i``, so it is summed from one total per attribute
    (time linear in the closure's size, not closure × workload: 86 attributes, all-3way, is 10^5
    candidates and 10^5 workload cliques).
    """
    per_attr: dict[str, float] = {}
    cand: set[tuple[str, ...]] = set()
    for s, c in workload:
        if c <= 0:
            continue
        for a in s:
            per_attr[a] = per_attr.get(a, 0.0) + c
        for k in range(1, len(s) + 1):
            cand.update(itertools.combinations(s, k))
    order = {a: i for i, a in enumerate(domain.attrs)}
    keyed = sorted(cand, key=lambda r: (len(r), [order[a] for a in r]))
    return {r: float(sum(per_attr[a] for a in r)) for r in keyed}
