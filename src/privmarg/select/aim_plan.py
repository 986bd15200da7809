"""Before spending: AIM's noise and expected workload error from public inputs only (issue #41).

:func:`plan_aim` reads the domain (or a schema), ε, δ, the neighbour relation, the workload and the
curator's estimate of the number of rows N, and nothing from the data. It returns a :class:`Plan`:
the zCDP budget, the rounds AIM plans for and the noise σ of its first (1-way) and later
measurements (the same public rules :class:`~privmarg.select.aim.AIMSelector` applies), and a
prediction of the mean workload error (:func:`~privmarg.evaluation.metrics.workload_error`: mean L1
distance, 0-2, between normalised real and synthetic marginals) with one per workload marginal.

The prediction needs some picture of what a table looks like; it uses a public *surrogate*, fixed by
the domain and a seed alone: a mixture of :data:`SURROGATE_CLASSES` product distributions whose
columns are skewed (Zipf-like, exponent :data:`SURROGATE_SKEW`) and differ between classes
(Dirichlet concentration :data:`SURROGATE_CONCENTRATION`), so columns depend on each other. Its exact
marginals give, for each workload marginal r:

- the sampling floor F: expected L1 distance between a marginal and the same marginal of N rows drawn
  from it (binomial mean absolute deviation per cell), what even a perfect model pays by sampling N rows;
- the model error M: the best of the estimates AIM's measurements allow: from the noisy 1-way
  marginals (σ₁) assuming independence; from a measured (k-1)-way sub-marginal (σ of a round) and a
  1-way; or r measured itself (σ of a round). The noise of a measurement is drawn once (seeded) and
  projected onto the simplex (nonnegative, sums to one), as an estimate from it would be; a missed
  dependence and noise combine in quadrature, as independent errors do;
- the error sqrt(F² + M²).

Accuracy (benchmarks/plan_accuracy.py, benchmarks/history/records.md, session 27): within a factor
of 2 of AIM's measured error on adult at ε ∈ {0.1, 1, 10}; how other tables do is recorded there.
The surrogate's three constants were chosen on tables other than adult and the held-out ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import gammaln

from ..core import Domain, downward_closure, parse_workload
from ..privacy import cdp_rho, check_neighbour, discovery_delta, marginal_l2, round_plan
from ..privacy.risk import WEAK_EPSILON
from .aim import budget_rounds, default_rounds, low_total

#: latent classes of the public surrogate (a mixture of product distributions)
SURROGATE_CLASSES = 16
#: Zipf exponent of a surrogate column's overall shape (value ranks in a seeded random order)
SURROGATE_SKEW = 1.5
#: Dirichlet concentration (per value) of each class's column distribution around that shape:
#: small values make classes differ, i.e. columns depend on each other
SURROGATE_CONCENTRATION = 1.0
#: workload marginals evaluated at most (a seeded sample of larger workloads; the mean is over them)
MAX_MARGINALS = 400
#: below this ε a release keeps little beyond the columns' own distributions
SMALL_EPSILON = 0.05


@dataclass(frozen=True)
class MarginalPlan:
    """The predicted error of one workload marginal: ``error`` = sqrt(``floor``² + ``model``²), L1 of
    normalised marginals (0-2); ``source`` says which of AIM's estimates it assumes."""

    attrs: tuple[str, ...]
    cells: int
    error: float
    floor: float
    model: float
    source: str  # "measured", "sub-marginal" or "1-way"


@dataclass(frozen=True)
class Plan:
    """What an AIM release at this budget would look like, from public inputs only (no privacy cost).

    ``rho`` is the whole zCDP budget, ``rho_selection`` what AIM spends (less the schema's DP
    preprocessing share); ``initial_rounds`` the T the 1-way marginals are measured for, ``rounds`` the
    T the later rounds are planned for (4·d when ``noise_ratio``, AIM's budget rule, is small enough:
    :data:`~privmarg.select.aim.PRECISE_NOISE_RATIO`); ``first_sigma`` the noise (counts
    per cell) of each 1-way marginal, ``round_sigma`` that of each later round's marginal (annealing
    halves it when a round barely moves the model). With ``rows`` given: ``mean_error`` the predicted
    mean workload error (0-2), ``floor`` its sampling part, ``marginals`` one prediction per evaluated
    workload marginal (``evaluated`` of ``n_marginals``); else those are None / empty."""

    epsilon: float
    delta: float
    rho: float
    rho_selection: float
    neighbour: str
    domain: Domain
    workload: str
    rows: int | None
    n_marginals: int
    n_candidates: int
    initial_rounds: int
    rounds: int
    first_sigma: float
    round_sigma: float
    mean_error: float | None = None
    floor: float | None = None
    marginals: tuple[MarginalPlan, ...] = ()
    evaluated: int = 0
    warnings: tuple[str, ...] = ()
    simulated_error: float | None = None  # AIM run on the surrogate (AIM.plan(simulate=True)); else None
    noise_ratio: float | None = None  # the budget rule's expected L1 noise / N of a mean-sized marginal
    notes: tuple[str, ...] = field(default=())

    def worst(self, k: int = 3) -> list[MarginalPlan]:
        """The ``k`` workload marginals predicted to be least accurate."""
        return sorted(self.marginals, key=lambda m: -m.error)[:k]

    def best(self, k: int = 3) -> list[MarginalPlan]:
        """The ``k`` workload marginals predicted to be most accurate."""
        return sorted(self.marginals, key=lambda m: m.error)[:k]

    def lines(self) -> list[str]:
        """The prediction in plain words (the budget and warnings are stated by the caller)."""
        out = [f"AIM's noise: each 1-way marginal sigma {self.first_sigma:.3g} counts per cell, then rounds of "
               f"sigma {self.round_sigma:.3g} (T = {self.rounds} planned; a round that barely moves the model halves it)"]
        if self.mean_error is None:
            return out + ["give --rows (your estimate of the table's size) for the predicted error"]
        what = f"{self.evaluated:,} of {self.n_marginals:,}" if self.evaluated < self.n_marginals else f"{self.n_marginals:,}"
        out.append(f"predicted mean workload error {self.mean_error:.3f} (L1 of normalised marginals, 0-2; "
                   f"over {what} {self.workload} marginals), of which sampling {self.rows:,} rows alone gives about "
                   f"{self.floor:.3f}; expect a factor of 2 either way (it assumes a typical table, not yours)")
        if self.simulated_error is not None:
            out.append(f"AIM run on a public surrogate table of {self.rows:,} rows: mean workload error "
                       f"{self.simulated_error:.3f}")
        fmt = lambda ms: ", ".join(f"{'×'.join(m.attrs)} {m.error:.2f}" for m in ms)  # noqa: E731
        out.append(f"least accurate: {fmt(self.worst())}; most accurate: {fmt(self.best())}")
        return out + list(self.notes)

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "rho": self.rho, "rho_selection": self.rho_selection,
                "neighbour": self.neighbour, "domain": dict(zip(self.domain.attrs, self.domain.shape)), "workload": self.workload,
                "rows": self.rows, "n_marginals": self.n_marginals, "n_candidates": self.n_candidates,
                "initial_rounds": self.initial_rounds, "rounds": self.rounds, "noise_ratio": self.noise_ratio,
                "first_sigma": self.first_sigma, "round_sigma": self.round_sigma,
                "mean_error": self.mean_error, "floor": self.floor, "evaluated": self.evaluated,
                "simulated_error": self.simulated_error, "warnings": list(self.warnings),
                "marginals": [{"attrs": list(m.attrs), "cells": m.cells, "error": m.error, "floor": m.floor,
                               "model": m.model, "source": m.source} for m in self.marginals]}


# ------------------------------------------------------------------------------ the surrogate
def surrogate(domain: Domain, seed: int = 0) -> tuple[np.ndarray, list[np.ndarray]]:
    """(class weights, per column a classes × values table): the public surrogate's mixture."""
    rng = np.random.default_rng(seed)
    k = SURROGATE_CLASSES
    weights = rng.dirichlet(np.ones(k))
    tables = []
    for n in domain.shape:
        shape = 1.0 / np.arange(1, n + 1) ** SURROGATE_SKEW
        shape = (shape / shape.sum())[rng.permutation(n)]
        tables.append(rng.dirichlet(SURROGATE_CONCENTRATION * n * shape + 1e-3, size=k))
    return weights, tables


def surrogate_marginal(mix: tuple[np.ndarray, list[np.ndarray]], idx: list[int]) -> np.ndarray:
    """The surrogate's exact marginal on columns ``idx`` (in that order; sums to 1)."""
    weights, tables = mix
    letters = "abcdefghijklmnopqrstuvwxyz"[:len(idx)]
    spec = "k," + ",".join("k" + c for c in letters) + "->" + letters
    return np.einsum(spec, weights, *[tables[i] for i in idx])


def surrogate_rows(domain: Domain, rows: int, seed: int = 0) -> np.ndarray:
    """``rows`` records (integer codes) drawn from the surrogate: a public table, for a simulation."""
    weights, tables = surrogate(domain, seed)
    rng = np.random.default_rng([seed, 1])
    z = rng.choice(len(weights), size=rows, p=weights)
    cols = []
    for t in tables:
        cdf = np.cumsum(t, axis=1)[z]
        cols.append(np.minimum((rng.random(rows)[:, None] > cdf).sum(axis=1), t.shape[1] - 1))
    return np.stack(cols, axis=1) if cols else np.zeros((rows, 0), dtype=np.int64)


# ------------------------------------------------------------------------------ error pieces
def sampling_floor(p: np.ndarray, rows: int) -> float:
    """Expected ‖X/N − p‖₁ for N = ``rows`` records drawn from ``p``: per cell the binomial mean
    absolute deviation (De Moivre) ``2ν·C(N,ν)·p^ν·(1−p)^(N−ν+1)``, ν = ⌊Np⌋ + 1, over N."""
    q = np.asarray(p, dtype=float).ravel()
    q = q[(q > 0) & (q < 1)]
    n = float(rows)
    nu = np.floor(n * q) + 1
    log = (math.log(2.0) + np.log(nu) + gammaln(n + 1) - gammaln(nu + 1) - gammaln(n - nu + 1)
           + nu * np.log(q) + (n - nu + 1) * np.log1p(-q))
    return float(np.exp(log[nu <= n]).sum() / n)


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection onto the probability simplex (Duchi et al. 2008)."""
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    j = np.arange(1, len(u) + 1)
    r = np.nonzero(u - (css - 1) / j > 0)[0][-1]
    return np.maximum(v - (css[r] - 1) / (r + 1), 0.0)


def noise_error(p: np.ndarray, sigma: float, rows: int, rng: np.random.Generator) -> float:
    """L1 error (normalised) of an estimate of ``p`` from one Gaussian measurement of its counts
    (σ = ``sigma`` per cell, N = ``rows``), projected onto the simplex: one seeded draw."""
    p = np.asarray(p, dtype=float).ravel()
    return float(np.abs(project_simplex(p + (sigma / rows) * rng.standard_normal(p.size)) - p).sum())


def marginal_prediction(mix, idx: list[int], attrs: tuple[str, ...], rows: int, one: dict, one_err: dict,
                        sub_err: dict, sigma: float, rng: np.random.Generator) -> MarginalPlan:
    """The predicted error of the workload marginal on columns ``idx`` (see the module's text).
    ``one``/``one_err``: each column's surrogate marginal and its error from the 1-way measurement;
    ``sub_err``: errors of measured (k-1)-way sub-marginals, filled as they are needed."""
    p = surrogate_marginal(mix, idx)
    floor = sampling_floor(p, rows)
    k = len(idx)
    if k == 1:
        return MarginalPlan(attrs, p.size, math.hypot(floor, one_err[idx[0]]), floor, one_err[idx[0]], "1-way")
    indep = surrogate_marginal((np.ones(1), [one[i][None, :] for i in idx]), list(range(k)))
    options = [(math.sqrt(np.abs(p - indep).sum() ** 2 + sum(one_err[i] ** 2 for i in idx)), "1-way")]
    if k >= 3:
        for o in range(k):
            key = tuple(idx[j] for j in range(k) if j != o)
            sub = surrogate_marginal(mix, list(key))
            if key not in sub_err:
                sub_err[key] = noise_error(sub, sigma, rows, rng)
            approx = np.moveaxis(np.multiply.outer(sub, one[idx[o]]), k - 1, o)
            gap = np.abs(p - approx).sum()
            options.append((math.sqrt(gap ** 2 + sub_err[key] ** 2 + one_err[idx[o]] ** 2), "sub-marginal"))
    options.append((noise_error(p, sigma, rows, rng), "measured"))
    model, source = min(options)
    return MarginalPlan(attrs, int(p.size), math.hypot(floor, model), floor, model, source)


def aim_sigmas(domain: Domain, rho: float, neighbour: str, workload, rows: float | None, alpha: float = 0.9,
               rounds: int | None = None) -> tuple[int, int, int, float, float, float | None]:
    """(candidates, initial T, T, σ of the 1-way marginals, σ of a later round, the budget rule's noise
    ratio or None) by AIMSelector's own rules:
    T = ``rounds`` or :func:`default_rounds`; with N known (``rows``), 4·d rounds when a round would
    measure a mean-sized workload marginal with L1 noise of at most PRECISE_NOISE_RATIO·N
    (:func:`~privmarg.select.aim.budget_rounds`; under add/remove AIM reads N off its noisy 1-way
    marginals less 3σ√cells, :func:`~privmarg.select.aim.low_total`: the same here)."""
    l2 = marginal_l2(neighbour)
    n_cand = len(downward_closure(workload, domain))
    t0 = t = rounds or default_rounds(len(domain), n_cand)
    first = round_plan(rho, alpha, l2, t).sigma
    later, ratio = first, None
    if rounds is None and rows:
        n = low_total(float(rows), first, max(domain.shape)) if neighbour == "add_remove" else float(rows)
        ratio, t = budget_rounds(first, domain, workload, n, t0)
        if t < t0:
            later = round_plan(rho, alpha, l2, t).sigma
    return n_cand, t0, t, first, later, ratio


def schema_budget(schema, epsilon: float, delta: float, preprocess_share: float) -> tuple[float, float]:
    """(ρ of the release, ρ left to AIM's selection) for a raw table through ``schema``: value
    discovery takes its δ share, DP preprocessing ``preprocess_share`` of ρ (the encoder's rules)."""
    rho = cdp_rho(epsilon, delta - discovery_delta(delta, schema.needs_delta))
    return rho, rho * (1 - preprocess_share) if schema.needs_dp else rho


def public_sizes(schema) -> Domain:
    """Each column's number of codes in the schema's public encoding; a column whose bounds or values
    a DP step finds gets its largest encoding (:attr:`~privmarg.schema.ColumnSpec.max_size`: the step
    usually finds fewer). Public inputs only."""
    from ..preprocess import TableEncoder
    from ..schema import Schema

    fixed = [c for c in schema.columns if not c.dp_discovery]
    if len(fixed) == len(schema.columns):
        return TableEncoder(schema.public_encoding()).fit().domain
    sizes = {}
    if fixed:  # the columns a public encoding fixes, with the rules among them (a rule's cut adds a code)
        spec = schema.to_dict()
        names = {c.name for c in fixed}
        rules = [r.text for r in schema.rules if set(r.columns) <= names]
        sub = Schema.from_dict({"columns": {c.name: spec["columns"][c.name] for c in fixed},
                                **({"rules": rules} if rules else {})})
        sizes = dict(zip(sub.names, TableEncoder(sub.public_encoding()).fit().domain.shape))
    return Domain(schema.names, [sizes.get(c.name, c.max_size) for c in schema.columns])


def planned_domain(schema, epsilon: float, delta: float, rows: int | None, preprocess_share: float = 0.1) -> Domain:
    """The domain a schema's encoding would give at this budget, from public inputs: an adaptive
    numeric column (DP bounds included) gets about :func:`~privmarg.preprocess.binning.resolution_bins`
    bins for N = ``rows`` (the encoder's own rule; at most its ``bins``, which may exceed the public
    encoding's uniform bins), plus its stated atoms (three where the bounds are DP: both bounds and 0)
    and missing code (heavy values found in the data would add codes: not counted); a column whose
    values DP discovery finds, its largest encoding; every other column its public encoding's size.
    Without ``rows``, :func:`public_sizes`."""
    from ..preprocess.binning import resolution_bins

    public = public_sizes(schema)
    if not rows:
        return public
    _, rho_model = schema_budget(schema, epsilon, delta, preprocess_share)
    bins = math.ceil(resolution_bins(rows, len(schema), rho_model))
    sizes = [min(c.bins, bins) + (max(3, len(c.atoms)) if c.dp_bounds else len(c.atoms)) + int(c.missing)
             if c.binning == "privtree" and c.adaptive else n for c, n in zip(schema.columns, public.shape)]
    return Domain(public.attrs, sizes)


def plan_aim(domain: Any, epsilon: float, delta: float = 1e-9, *, rows: int | None = None,
             workload: Any = "all-3way", neighbour: str = "add_remove", alpha: float = 0.9,
             rounds: int | None = None, preprocess_share: float = 0.1, seed: int = 0) -> Plan:
    """AIM's plan at this budget from public inputs only: ``domain`` a Domain or a Schema (its encoding
    at this budget: :func:`planned_domain`), ε, δ, ``rows`` the curator's estimate of N (needed for
    the predicted error), the workload and AIM's settings. Deterministic (``seed``); reads no data
    and costs no privacy. See the module's text for the model."""
    check_neighbour(neighbour)
    if not (epsilon > 0 and math.isfinite(epsilon)) or not 0 < delta < 1:
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}")
    if rows is not None and rows < 1:
        raise ValueError(f"rows must be >= 1, got {rows}")
    rho = rho_sel = cdp_rho(epsilon, delta)
    notes: tuple[str, ...] = ()
    if not isinstance(domain, Domain):  # a schema: its DP preprocessing takes a share of the budget
        schema = domain
        rho, rho_sel = schema_budget(schema, epsilon, delta, preprocess_share)
        domain = planned_domain(schema, epsilon, delta, rows, preprocess_share)
        dp = [c.name for c in schema.columns if c.dp_discovery]
        if dp:
            notes += (f"{len(dp)} column(s) ({', '.join(dp[:4])}{', ...' if len(dp) > 4 else ''}) take their bounds "
                      "or values from DP steps at fit time, which this plan cannot know: a column with DP values is "
                      "planned at its max_values and one code for the rest (discovery usually finds fewer), one "
                      "with DP bounds as adaptive bins at this budget (a narrow integer range found may get a code "
                      "per value instead); read the prediction loosely",)
        heavy = [c.name for c in schema.columns if c.heavy_fixed or c.heavy_threshold]
        if heavy and rows:
            notes += (f"the encoding assumed: {', '.join(f'{a} {n}' for a, n in zip(domain.attrs, domain.shape))} codes; "
                     f"{len(heavy)} column(s) ({', '.join(heavy[:4])}{', ...' if len(heavy) > 4 else ''}) also get a code "
                     "for each value the DP preprocessing finds to hold many rows, which this plan cannot know: finer "
                     "codes raise the error (on raw tables at epsilon 10 this plan was up to 5 times too low)",)
    wl = parse_workload(workload, domain)
    n_cand, t0, t, first, later, ratio = aim_sigmas(domain, rho_sel, neighbour, wl, rows, alpha, rounds)
    label = workload if isinstance(workload, str) else "custom"
    base = dict(epsilon=epsilon, delta=delta, rho=rho, rho_selection=rho_sel, neighbour=neighbour, domain=domain,
                workload=label, rows=rows, n_marginals=len(wl), n_candidates=n_cand, initial_rounds=t0, rounds=t,
                noise_ratio=ratio,
                first_sigma=first, round_sigma=later, warnings=tuple(plan_warnings(epsilon, delta, rows)), notes=notes)
    if not rows:
        return Plan(**base)
    marginals = predict_marginals(domain, wl, rows, first, later, seed)
    weights = {c: w for c, w in wl}
    errs = np.array([weights[m.attrs] * m.error for m in marginals])
    floors = np.array([weights[m.attrs] * m.floor for m in marginals])
    return Plan(**base, mean_error=float(errs.mean()), floor=float(floors.mean()), marginals=tuple(marginals),
                evaluated=len(marginals))


def predict_marginals(domain: Domain, workload, rows: int, first: float, later: float, seed: int = 0
                      ) -> list[MarginalPlan]:
    """One :class:`MarginalPlan` per workload marginal (a seeded sample of :data:`MAX_MARGINALS` of
    larger workloads), on the surrogate of ``domain``."""
    wl = list(workload)
    if len(wl) > MAX_MARGINALS:
        pick = np.random.default_rng(seed).choice(len(wl), MAX_MARGINALS, replace=False)
        wl = [wl[i] for i in sorted(pick)]
    mix = surrogate(domain, seed)
    rng = np.random.default_rng([seed, 2])
    col = {a: i for i, a in enumerate(domain.attrs)}
    one = {i: surrogate_marginal(mix, [i]) for i in range(len(domain))}
    one_err = {i: noise_error(one[i], first, rows, rng) for i in range(len(domain))}
    sub_err: dict = {}
    return [marginal_prediction(mix, [col[a] for a in c], tuple(c), rows, one, one_err, sub_err, later, rng)
            for c, _ in wl]


def plan_warnings(epsilon: float, delta: float, rows: int | None, weak: bool = True) -> list[str]:
    """Plain-words warnings from the budget and N alone (``weak``: also that a large ε protects little)."""
    out = []
    if rows and delta >= 1.0 / rows:
        out.append(f"warning: delta {delta:g} is not below 1/N for N = {rows:,}: choose delta far below 1/N")
    if weak and epsilon > WEAK_EPSILON:
        out.append(f"warning: epsilon {epsilon:g} protects individuals only weakly")
    if epsilon < SMALL_EPSILON:
        out.append(f"warning: epsilon {epsilon:g} is very small: the noise will swamp most of what the table holds "
                   "beyond its columns' own distributions")
    return out
