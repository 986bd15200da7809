"""Weighted marginal workloads and their downward closure (SPEC §2)."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from pathlib import Path

from .domain import Domain

Workload = list[tuple[tuple[str, ...], float]]


def all_kway(domain: Domain, k: int, target: str | None = None) -> Workload:
    """All k-way marginals (weight 1); with ``target``, only those containing it."""
    if k < 1:
        raise ValueError("k must be at least 1")
    k = min(k, len(domain))
    out = [(c, 1.0) for c in itertools.combinations(domain.attrs, k)]
    if target is not None:
        if target not in domain:
            raise KeyError(f"unknown target attribute {target!r}")
        out = [(c, w) for c, w in out if target in c]
    return out


def parse_workload(spec: str | Sequence | None, domain: Domain, default: str = "all-3way") -> Workload:
    """A workload from ``"all-2way"``, ``"all-3way:target=col"``, a JSON file, or a list.

    A list holds attribute tuples or ``(attrs, weight)`` pairs (JSON: ``[["a","b"], ...]`` or
    ``[{"attrs": ["a","b"], "weight": 2}, ...]``). Attributes are checked against the domain.
    """
    if spec is None:
        spec = default
    if isinstance(spec, (str, Path)):
        s = str(spec)
        m = re.fullmatch(r"all-(\d+)way(?::target=(.+))?", s)
        if m:
            return all_kway(domain, int(m.group(1)), m.group(2))
        path = Path(s)
        if not path.exists():
            raise ValueError(f"workload {s!r}: expected all-Kway, all-Kway:target=COL or a JSON file")
        with open(path) as fh:
            spec = json.load(fh)
    out: Workload = []
    for item in spec:
        if isinstance(item, dict):
            attrs, w = item["attrs"], float(item.get("weight", 1.0))
        elif len(item) == 2 and isinstance(item[1], (int, float)) and not isinstance(item[0], str):
            attrs, w = item[0], float(item[1])
        else:
            attrs, w = item, 1.0
        attrs = tuple(attrs)
        if not attrs:
            raise ValueError("workload entries must name at least one attribute")
        if w < 0:
            raise ValueError(f"workload weight for {attrs} must be >= 0")
        out.append((domain.canonical(attrs), w))
    if not out or sum(w for _, w in out) <= 0:
        raise ValueError("the workload must have positive total weight")
    return out


def downward_closure(workload: Workload, domain: Domain) -> dict[tuple[str, ...], float]:
    """Every non-empty subset ``r`` of a workload clique with AIM's weight ``Σ_i c_i·|r ∩ s_i|``.

    Ordered by size, then canonical order.
    """
    cand: set[tuple[str, ...]] = set()
    for s, c in workload:
        if c <= 0:
            continue
        for k in range(1, len(s) + 1):
            cand.update(itertools.combinations(s, k))
    order = {a: i for i, a in enumerate(domain.attrs)}
    keyed = sorted(cand, key=lambda r: (len(r), [order[a] for a in r]))
    sets = [(set(s), c) for s, c in workload if c > 0]
    return {r: float(sum(c * len(set(r) & s) for s, c in sets)) for r in keyed}
