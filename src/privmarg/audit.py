"""Privacy audit harness: run a mechanism many times on neighbouring tables and lower-bound its ε.

For a selector (AIM, MST, ...) each run is the selection-and-measurement phase on ``D`` or ``D'``
through a fresh :class:`~privmarg.measure.MeasurementSession` with budget ``rho`` (the generator
is post-processing and is skipped). The score of a run is the Gaussian likelihood-ratio statistic
of its released measurements,

    ``Σ_i ⟨y_i − M_i(D), M_i(D') − M_i(D)⟩ / σ_i²``

(the optimal test statistic for the measurements taken, whichever they were), so a mechanism that
under-noises any marginal it measures is seen. :func:`privmarg.evaluation.audit.epsilon_lower_bound`
turns the two samples of scores into an ε lower bound with Clopper–Pearson confidence; a correct
mechanism must stay below its claimed ``ε = cdp_eps(rho, delta)``.

``mechanism="gaussian"`` audits the Gaussian primitive itself (one count, sensitivity 1);
``sigma_factor`` < 1 is a deliberately mis-calibrated variant (noise scaled down while the ledger
charges the nominal σ), which the audit must flag. Nothing here is for private data: the auditor
chooses ``D``; it costs no privacy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .core import Domain, Measurement
from .data import Dataset, MemorySource
from .evaluation.audit import AuditBound, epsilon_lower_bound
from .measure import MeasurementSession
from .privacy import (Accountant, cdp_eps, check_neighbour, check_noise, exponential_epsilon, exponential_mechanism,
                      exponential_mechanism_fitting, exponential_mechanism_lazy, gaussian_sigma,
                      marginal_l2)
from .privacy.discovery import gaussian_threshold, threshold_for
from .privacy.discrete import discrete_gaussian
from .select.base import Context

__all__ = ["AuditResult", "neighbouring_tables", "likelihood_ratio_score", "audit_gaussian", "audit_exponential",
           "audit_discovery", "audit_privtree", "audit_dpsgd", "audit_selector", "UnderNoisedSession", "tiny_table"]


@dataclass(frozen=True)
class AuditResult:
    """An audit: the bound, the claimed ε it is compared with, and what was run."""

    mechanism: str
    neighbour: str
    noise: str
    rho: float
    delta: float
    epsilon_claimed: float
    bound: AuditBound
    runs: int

    @property
    def violated(self) -> bool:
        """Whether the lower bound exceeds the claimed ε (evidence of a privacy bug)."""
        return self.bound.epsilon_lb > self.epsilon_claimed

    def to_dict(self) -> dict:
        return {"mechanism": self.mechanism, "neighbour": self.neighbour, "noise": self.noise, "rho": self.rho,
                "delta": self.delta, "epsilon_claimed": self.epsilon_claimed, "runs_per_table": self.runs,
                "violated": self.violated, **self.bound.to_dict()}


def neighbouring_tables(data: Dataset, row: Any, neighbour: str) -> tuple[Dataset, Dataset]:
    """``(D, D')``: ``D'`` is ``D`` plus ``row`` (add/remove) or ``D`` with its first record replaced
    by ``row`` (replace-one)."""
    return data, data.neighbour(row, check_neighbour(neighbour))


def likelihood_ratio_score(measurements: list[Measurement], d: Dataset, d_prime: Dataset) -> float:
    """``Σ_i ⟨y_i − M_i(D), M_i(D') − M_i(D)⟩ / σ_i²`` over the noisy measurements (``σ`` set):
    large when the run looks like ``D'``."""
    score = 0.0
    for m in measurements:
        if m.sigma is None:
            continue
        a = d.project(m.attrs)
        diff = d_prime.project(m.attrs) - a
        score += float(np.dot(np.asarray(m.y) - a, diff)) / m.sigma**2
    return score


class UnderNoisedSession(MeasurementSession):
    """A deliberately broken session for audits: charges the nominal σ but adds ``factor·σ`` noise."""

    factor = 0.5

    def _gaussian(self, values, sigma, l2_sensitivity, what, *, counts=False, **note):
        rho = (l2_sensitivity / sigma) ** 2 / 2.0
        self.accountant.charge(rho, what, "gaussian", sigma=float(sigma), l2_sensitivity=float(l2_sensitivity))
        x = np.asarray(values, dtype=np.float64)
        return x + self.rng.normal(0.0, self.factor * sigma, size=x.shape)


def _claim(rho: float, delta: float) -> float:
    return float(cdp_eps(rho, delta))


def audit_gaussian(rho: float, runs: int, *, neighbour: str = "add_remove", noise: str = "continuous",
                   sigma_factor: float = 1.0, delta: float = 1e-5, confidence: float = 0.95,
                   seed: int = 0) -> AuditResult:
    """Audit the Gaussian mechanism on a histogram at ``rho`` zCDP: σ = ``Δ₂/√(2ρ)`` (Δ₂ = 1
    add/remove: one count moves by one; √2 replace-one: a record moves from one cell to another),
    times ``sigma_factor`` for a broken variant. ``runs`` releases on each table; the score is the
    likelihood-ratio statistic: the noisy count of the added record's cell (add/remove) or the
    difference of the two cells' noisy counts (replace-one)."""
    check_neighbour(neighbour)
    check_noise(noise)
    l2 = marginal_l2(neighbour)
    sigma = gaussian_sigma(rho, l2) * sigma_factor
    ss = np.random.SeedSequence(seed)
    r0, r1 = (np.random.default_rng(s) for s in ss.spawn(2))
    cells = np.array([[100, 40], [101, 40]]) if neighbour == "add_remove" else np.array([[100, 40], [101, 39]])

    def release(rng, counts):
        if noise == "discrete":
            z = discrete_gaussian(sigma, (runs, 2), rng).astype(np.float64)
        else:
            z = rng.normal(0.0, sigma, size=(runs, 2))
        y = counts + z
        return y[:, 0] if neighbour == "add_remove" else y[:, 0] - y[:, 1]

    s0, s1 = release(r0, cells[0]), release(r1, cells[1])
    bound = epsilon_lower_bound(s0, s1, delta=delta, confidence=confidence, seed=seed)
    name = "gaussian" if sigma_factor == 1.0 else f"gaussian (sigma x {sigma_factor:g})"
    return AuditResult(name, neighbour, noise, float(rho), float(delta), _claim(rho, delta), bound, int(runs))


def audit_exponential(rho: float, runs: int, *, epsilon_factor: float = 1.0, fitting: bool = False,
                      bounded: bool = False, delta: float = 0.05, confidence: float = 0.95,
                      seed: int = 0) -> AuditResult:
    """Audit the exponential mechanism at ``rho`` zCDP (ε = √(8ρ), sensitivity 1) through the
    library's own primitive: two candidates whose scores swap between the tables (D: (1, 0),
    D': (0, 1), each moving by the sensitivity: the worst case), the score of a run being whether
    it picked the first. ``fitting``: :func:`~privmarg.privacy.exponential_mechanism_fitting`
    instead, with a third, higher-scoring candidate that does not fit (the lazy walk must still be
    the mechanism over the fitting set); ``bounded`` (with ``fitting``):
    :func:`~privmarg.privacy.exponential_mechanism_lazy`, each score known first by a bound a
    quarter above it and asked for only where that bound leaves it a chance (as the adaptive
    rounds' scoring). ``epsilon_factor`` > 1: a broken variant drawing with ε × factor while the
    claim stays ρ, which the audit must flag."""
    if bounded and not fitting:
        raise ValueError("bounded scores are audited on the fitting walk: pass fitting=True too")
    eps = exponential_epsilon(rho) * epsilon_factor
    ss = np.random.SeedSequence(seed)
    acc = Accountant(2 * runs * eps * eps)  # the claim is ``rho``: this ledger only absorbs the charges
    tables = ([1.0, 0.0, 5.0], [0.0, 1.0, 5.0]) if fitting else ([1.0, 0.0], [0.0, 1.0])
    out = []
    for scores, child in zip(tables, ss.spawn(2)):
        rng = np.random.default_rng(child)
        q = np.array(scores)
        if fitting and bounded:
            picks = [exponential_mechanism_lazy(acc, q + 0.25, lambda idx: q[idx], eps, 1.0, rng, lambda i: i != 2,
                                                first=1) for _ in range(runs)]
        elif fitting:
            picks = [exponential_mechanism_fitting(acc, q, eps, 1.0, rng, lambda i: i != 2) for _ in range(runs)]
        else:
            picks = [exponential_mechanism(acc, q, eps, 1.0, rng) for _ in range(runs)]
        out.append(np.array(picks) == 0)
    bound = epsilon_lower_bound(out[0].astype(float), out[1].astype(float), delta=delta, confidence=confidence,
                                seed=seed)
    name = "exponential" + (" (bounded scores)" if fitting and bounded else " (lazy walk)" if fitting else "")
    if epsilon_factor != 1.0:
        name += f" (epsilon x {epsilon_factor:g})"
    return AuditResult(name, "add_remove", "gumbel", float(rho), float(delta), _claim(rho, delta), bound, int(runs))


def audit_discovery(rho: float, runs: int, *, new_key: bool = True, key_delta: float = 0.01,
                    conversion_delta: float = 0.04, noise_factor: float = 1.0, confidence: float = 0.95,
                    seed: int = 0) -> AuditResult:
    """Audit DP value discovery (:func:`~privmarg.privacy.discovery.gaussian_threshold`, add/remove;
    noise σ for ``rho``, threshold set for ``key_delta``), against the claim
    (``cdp_eps(rho, conversion_delta)``, ``key_delta + conversion_delta``). ``D`` holds one key 50
    times. ``new_key``: ``D'`` adds a record with a key of its own, and a run's score is whether that
    key came out (never on ``D``): a release rate above ``key_delta`` shows as an ε above the claim.
    Otherwise ``D'`` adds a record to the existing key, and the score is its released noisy count
    (the ε part). ``noise_factor``: a broken variant whose noise is that many times σ while the
    threshold and the claim stay those of σ (2: the new key crosses far too often; 0.5: the count is
    under-noised)."""
    sigma = gaussian_sigma(rho, 1.0)
    tau = threshold_for(sigma, key_delta, 1)
    tables = (np.array([50.0]), np.array([50.0, 1.0])) if new_key else (np.array([50.0]), np.array([51.0]))
    ss = np.random.SeedSequence(seed)
    out = []
    for counts, child in zip(tables, ss.spawn(2)):
        rng = np.random.default_rng(child)
        scores = []
        for _ in range(runs):
            acc = Accountant(rho / min(noise_factor, 1.0) ** 2, "add_remove", None, 0.999, delta_budget=0.99)
            kept, noisy = gaussian_threshold(acc, counts, sigma * noise_factor, 1.0, tau, rng)
            if new_key:
                scores.append(float(1 in kept))
            else:  # the shared key's noisy count (-inf if it was not released)
                scores.append(float(noisy[list(kept).index(0)]) if 0 in kept else -np.inf)
        out.append(np.array(scores))
    total_delta = key_delta + conversion_delta
    bound = epsilon_lower_bound(out[0], out[1], delta=total_delta, confidence=confidence, seed=seed)
    name = "value discovery" + (" (new key)" if new_key else " (count)")
    if noise_factor != 1.0:
        name += f" (noise x {noise_factor:g})"
    return AuditResult(name, "add_remove", "continuous", float(rho), float(total_delta),
                       _claim(rho, conversion_delta), bound, int(runs))


def audit_privtree(rho: float, runs: int, *, epsilon_factor: float = 1.0, noise: str = "continuous",
                   confidence: float = 0.95, seed: int = 0, depth: int = 6) -> AuditResult:
    """Audit PrivTree (:func:`~privmarg.privacy.privtree.privtree_split`, add/remove, fan-out 2) at
    ``rho`` zCDP against its pure claim ``ε = √(2ρ)`` (δ = 0): ``D`` is empty, ``D'`` one record at
    0 on the lattice ``[0, 2^depth)``; a run's score is the depth of the leaf holding 0. With ``D``
    empty every node's biased count sits at the threshold or below it, and the record lifts the
    counts on its path, each by one: the event "the leaf is at least k deep" has the largest
    likelihood ratio PrivTree allows on one path (about ``2ε/3`` at ``ε = 2``).
    ``epsilon_factor`` > 1: a broken variant building the tree at ``ε × factor`` (scale and bias
    both from that ε) while the claim stays ``ε``; at ``ε ≥ 2`` and factor 2 its largest ratio
    exceeds the claim, so the audit must flag it."""
    from .privacy.privtree import privtree_split

    eps = math.sqrt(2.0 * rho)
    ss = np.random.SeedSequence(seed)
    acc = Accountant(2 * runs * rho * epsilon_factor**2)  # the claim is ``rho``: this ledger only absorbs the charges
    hi = float(2**depth)
    out = []
    for values, child in zip(((), (0.0,)), ss.spawn(2)):
        rng = np.random.default_rng(child)
        pts = np.array(values)

        def count(left, right, closed, pts=pts):
            return int(((pts >= left) & ((pts <= right) if closed else (pts < right))).sum())

        scores = np.empty(runs)
        for k in range(runs):
            edges = privtree_split(acc, count, 0.0, hi, lattice=True, max_depth=depth, rho=rho * epsilon_factor**2,
                                   rng=rng, noise=noise)
            scores[k] = math.log2(hi / (edges[1] - edges[0]))  # the leaf [0, w): depth log2(hi / w)
        out.append(scores)
    bound = epsilon_lower_bound(out[0], out[1], delta=0.0, confidence=confidence, seed=seed)
    name = "privtree" + (f" (epsilon x {epsilon_factor:g})" if epsilon_factor != 1.0 else "")
    return AuditResult(name, "add_remove", noise, float(rho), 0.0, eps, bound, int(runs))


def audit_dpsgd(rho: float, runs: int, *, neighbour: str = "add_remove", steps: int = 4, noise_factor: float = 1.0,
                delta: float = 0.05, rows: int = 20, confidence: float = 0.95, seed: int = 0) -> AuditResult:
    """Audit a DP-SGD phase (:func:`~privmarg.privacy.dpsgd.dp_sgd_phase`, accounted in RDP at
    ``delta``) against its claim ``cdp_eps(rho, delta)``: a one-parameter linear model
    (loss ``−x·θ`` per record, gradient ``−x``) trained for ``steps`` full-batch steps (sampling
    rate 1 under add/remove, the whole table as the batch under replace-one: the worst case for
    the sampling), clip 1. ``D`` holds ``rows`` records with ``x = 0`` (replace-one: the first is
    ``x = −5``); ``D'`` adds (replaces it with) a canary ``x = 5``, whose clipped gradient pushes θ
    by the whole sensitivity every step. A run's score is the trained θ. ``noise_factor`` < 1: a
    broken variant adding that fraction of the charged noise."""
    from .privacy.dpsgd import dp_sgd_phase

    check_neighbour(neighbour)
    base = np.zeros(rows)
    if neighbour == "add_remove":
        tables = (base, np.append(base, 5.0))
    else:
        first = base.copy()
        first[0] = -5.0
        canary = base.copy()
        canary[0] = 5.0
        tables = (first, canary)
    ss = np.random.SeedSequence(seed)
    out = []
    for records, child in zip(tables, ss.spawn(2)):
        rng = np.random.default_rng(child)
        scores = np.empty(runs)
        for k in range(runs):
            acc = Accountant(rho, neighbour, None, delta)
            kw = dict(sample_rate=1.0, denominator=float(rows)) if neighbour == "add_remove" else dict(batch_size=len(records))
            phase = dp_sgd_phase(acc, records, rng, rho=rho, steps=steps, clip=1.0, size=1, what="audit", **kw)
            phase.sigma *= noise_factor  # the broken variant: the charge stays the nominal one
            theta = 0.0
            for _ in range(steps):
                g = phase.step(lambda batch: -batch[:, None].astype(np.float64))
                theta -= 0.1 * float(g[0]) / phase.denominator
            scores[k] = theta
        out.append(scores)
    bound = epsilon_lower_bound(out[0], out[1], delta=delta, confidence=confidence, seed=seed)
    name = "DP-SGD" + (f" (noise x {noise_factor:g})" if noise_factor != 1.0 else "")
    return AuditResult(name, neighbour, "continuous", float(rho), float(delta), _claim(rho, delta), bound, int(runs))


def audit_selector(make_selector: Callable[[], Any], data: Dataset, row: Any, rho: float, runs: int, *,
                   neighbour: str = "add_remove", noise: str = "continuous", delta: float = 1e-5,
                   confidence: float = 0.95, seed: int = 0, name: str = "", broken: float | None = None,
                   score: Callable | None = None) -> AuditResult:
    """Audit a selector's measurements (``make_selector()`` gives a fresh one per run) on ``data``
    and its neighbour with ``row`` (see :func:`neighbouring_tables`), ``runs`` runs per table, each
    spending ``rho`` zCDP; ``broken``: under-noise every measurement by this factor while charging
    the nominal σ (an audit of the audit). ``score(measurements, D, D')`` defaults to
    :func:`likelihood_ratio_score`."""
    check_noise(noise)
    d0, d1 = neighbouring_tables(data, row, neighbour)
    score = score or likelihood_ratio_score
    seeds = np.random.SeedSequence(seed).spawn(2 * runs)
    out: list[list[float]] = [[], []]
    for side, d in enumerate((d0, d1)):
        for i in range(runs):
            rng = np.random.default_rng(seeds[side * runs + i])
            acc = Accountant(rho, neighbour)
            if broken is None:
                session = MeasurementSession(MemorySource(d), acc, rng, noise=noise)
            else:
                session = UnderNoisedSession(MemorySource(d), acc, rng, noise=noise)
                session.factor = broken
            total = float(len(d)) if neighbour == "replace_one" else None
            sel = make_selector()
            selection = sel.run(session, Context(rho, total))
            out[side].append(score(list(selection.released or selection.measurements), d0, d1))
    bound = epsilon_lower_bound(out[0], out[1], delta=delta, confidence=confidence, seed=seed)
    label = name or type(make_selector()).__name__
    if broken is not None:
        label += f" (sigma x {broken:g})"
    return AuditResult(label, neighbour, noise, float(rho), float(delta), _claim(rho, delta), bound, int(runs))


def tiny_table(rows: int = 60, attrs: int = 3, size: int = 2, seed: int = 0) -> Dataset:
    """A small public test table for audits: ``attrs`` columns with ``size`` values, correlated."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, size, size=rows)
    cols = [first] + [np.where(rng.random(rows) < 0.8, first, rng.integers(0, size, size=rows))
                      for _ in range(attrs - 1)]
    dom = Domain(tuple(f"a{i}" for i in range(attrs)), (size,) * attrs)
    return Dataset(np.stack(cols, axis=1), dom)
