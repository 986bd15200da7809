"""AIM's public start (issue #42): the first model is the public table's tree model, not a flat one.

The public table's maximum spanning tree of 2-way marginals (by their mutual information, over the
workload's pairs whose association in the public table is beyond chance) is fitted alone, and AIM's
first fit is warm-started from that model. The tree's marginals stay in the model's structure at
loss weight 0: a fit's gradient reaches only measured cells, so where AIM measures nothing the
public interactions remain, and where it measures they give way to the private answers. The rounds
then spend the budget where the public model is wrong. Reading the public table is free.

A public interaction stays in the model even where private measurements explain the same
association through other attributes, so the start pays only when AIM can measure little:
:func:`starts_public` (public inputs only) allows it when a round of the JAM paper's plan would
measure a mean-sized workload marginal with expected L1 noise of at least
:data:`PUBLIC_START_NOISE_RATIO` times N.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import Domain, Measurement
from .jam import PAPER_PLAN, noise_ratio

#: the start is used when a JAM-paper round's noise on a mean-sized workload marginal is at least this
#: many times N in L1. Measured against AIM without it (3-way workload error): lower on the adult
#: splits at ratios 66, 7.2 and 3.7 (ε = 0.1, 1, 2), higher on adult-075/100 at 2.5 and 1.6 (ε = 3, 5);
#: on the GSS pair, whose public table is closer, lower down to 0.57 (benchmarks/history/public-data.md,
#: session 31). The farthest public tables tried set the line.
PUBLIC_START_NOISE_RATIO = 3.0
#: public 2-way marginals read at once by :func:`public_tree` (memory, on wide tables)
PAIRS_PER_READ = 4096


def start_noise_ratio(rho: float, l2: float, rows: float, workload_cells: float) -> float:
    """The ratio :func:`starts_public` compares with :data:`PUBLIC_START_NOISE_RATIO`: a JAM-paper
    round's expected L1 noise on a marginal of ``workload_cells`` cells, over ``rows``."""
    return noise_ratio(rho, *PAPER_PLAN, l2, rows, workload_cells)


def starts_public(rho: float, l2: float, rows: float, workload_cells: float) -> bool:
    """Whether AIM starts from the public model at budget ``rho`` (zCDP), Δ₂ ``l2``, ``rows`` N (or a
    low estimate of it) and a workload of marginals of ``workload_cells`` cells on average: public
    inputs only (see the module's docstring)."""
    return start_noise_ratio(rho, l2, rows, workload_cells) >= PUBLIC_START_NOISE_RATIO


def mutual_information(joint: np.ndarray) -> float:
    """Mutual information (nats) of a 2-D table of counts (0 for an empty table)."""
    total = joint.sum()
    if total <= 0:
        return 0.0
    p = joint / total
    outer = p.sum(1, keepdims=True) * p.sum(0, keepdims=True)
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / outer[nz])))


def chance_information(shape: tuple[int, int], rows: float) -> float:
    """The mutual information (nats) that two independent columns of ``shape`` values rarely exceed by
    chance in ``rows`` records: ``(k + 3·√(2k)) / (2·rows)``, k = (a − 1)(b − 1). Under independence
    2·rows·MI is about χ² with k degrees of freedom (the G-test), of mean k and variance 2k: this is
    three standard deviations above the mean. Infinite without rows, or when a column has one value
    (no association is possible: its computed information is rounding)."""
    k = (shape[0] - 1) * (shape[1] - 1)
    return (k + 3.0 * math.sqrt(2.0 * k)) / (2.0 * rows) if rows > 0 and k > 0 else math.inf


def public_tree(public: Any, domain: Domain, pairs: Sequence[tuple[str, str]],
                max_cells: float = math.inf) -> list[tuple[str, str]]:
    """A maximum spanning forest of ``pairs`` by their mutual information in ``public`` (a
    :class:`~privmarg.data.MarginalSource`), built by Kruskal's rule (ties: the earlier pair). A pair
    enters only if its information is beyond what chance gives (:func:`chance_information`: a small
    public table shows spurious associations between wide columns) and its table keeps the forest's
    tables within ``max_cells`` cells (a model-size limit; public). Ranking by the information less
    its chance level instead was worse on adult, fire and salary at ε = 0.1
    (benchmarks/history/public-data.md, session 31)."""
    pairs = [domain.canonical(p) for p in pairs]
    info, chance = [], []
    for i in range(0, len(pairs), PAIRS_PER_READ):  # a wide table's pairs a batch at a time
        part = pairs[i:i + PAIRS_PER_READ]
        for p, y in zip(part, public.marginals(part)):
            t = np.asarray(y, dtype=float).reshape(domain.sizes(p))
            info.append(mutual_information(t))
            chance.append(chance_information(t.shape, t.sum()))
    parent = {a: a for a in domain.attrs}

    def root(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    edges, cells = [], 0
    for k in sorted(range(len(pairs)), key=lambda k: -info[k]):
        (a, b), size = pairs[k], domain.size(pairs[k])
        if info[k] <= chance[k] or cells + size > max_cells or root(a) == root(b):
            continue
        parent[root(a)] = root(b)
        edges.append(pairs[k])
        cells += size
    return sorted(edges)


@dataclass(frozen=True)
class PublicTree:
    """The public tree's pairs, their public 2-way marginals (counts, flat) and the public table's
    record count: everything the start reads from the public data, read before any budget is spent."""

    edges: tuple
    tables: tuple
    rows: float


def read_public_tree(public: Any, domain: Domain, pairs: Sequence[tuple[str, str]],
                     max_cells: float = math.inf) -> PublicTree:
    """:func:`public_tree` and the public data the start needs, read at once (no edges when the
    public table has no records)."""
    rows = float(public.count())
    edges = public_tree(public, domain, pairs, max_cells) if rows > 0 else []
    tables = [np.asarray(y, dtype=float) for y in public.marginals(edges)] if edges else []
    return PublicTree(tuple(edges), tuple(tables), rows)


def public_start(loop: Any, tree: PublicTree, domain: Domain, total: float,
                 zeros: Sequence = ()) -> tuple[Any, list[Measurement]]:
    """(the model of the public ``tree``'s 2-way marginals rescaled to ``total`` records, fitted by
    ``loop``; those marginals as free public measurements of loss weight 0 for the session to
    record); (None, []) without edges. Reads nothing more from the public data."""
    edges = tree.edges
    if not edges:
        return None, []
    answers = [total / tree.rows * y for y in tree.tables]
    fit = [Measurement(e, y, None, source="public", weight=1.0) for e, y in zip(edges, answers)]
    model = loop.generate(fit, domain, zeros=list(zeros), total=total)
    kept = [Measurement(e, y, None, source="public", weight=0.0, meta={"role": "public start"})
            for e, y in zip(edges, answers)]
    return model, kept
