"""AIM's a-posteriori error bounds (AIM paper §5, App. B; SPEC §4.5). Post-processing only.

Two cases for a marginal ``r`` in the downward closure of the workload:

* supported (``r`` ⊆ some measured clique): the inverse-variance weighted average ȳ_r of every
  measurement covering ``r`` is unbiased with N(0, σ̄²) noise per cell, so ‖M_r(D) − ȳ_r‖₁ is at
  most σ̄ times a provable quantile of the L1 norm of n_r standard normals; the true counts are
  then the nonnegative tables in that ball that also agree with the released marginals of r's
  subsets and with the total (:mod:`~privmarg.select.l1_bounds`), and the bound is the largest
  distance from the synthetic marginal to any of them;
* unsupported: in the latest round t whose model p̂_{t−1} was kept and where ``r`` was a candidate
  (:func:`candidate_round`), the exponential mechanism's utility guarantee and the lower tail of
  the selected measurement's L1 error bound ‖M_r(D) − M_r(p̂_{t−1})‖₁ (SPEC §4.5, Theorem 4 /
  Corollary 5); with no such round, the trivial bound 2.

Either is turned into a bound on ‖M_r(D)/N − s‖₁ for the normalised synthetic marginal s by the
triangle inequality. Under add/remove N is private: it is replaced by the released estimate N̂ with
a Gaussian confidence interval (the estimate is an inverse-variance average of noisy totals), which
takes a tenth of the failure probability; ‖x/N − s‖₁ ≤ (‖x − N̂s‖₁ + |N − N̂|)/N̂ for counts x
summing to N.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.stats import norm

from ..core import Factor
from .adaptive import fit_rule, uncached_query
from .l1_bounds import ProjectionBall, consistent_l1_max, l1_noise_quantile, nonnegative_l1_max

__all__ = ["ErrorBound", "BoundWork", "aim_error_bound", "measured_error_bound", "covering_measurements",
           "candidate_round", "released_table", "l1_noise_quantile", "nonnegative_l1_max"]

_C = math.sqrt(2.0 / math.pi)
MAIN_SHARE = 0.9  # of a supported bound's failure probability: the marginal's own measurements
CONSISTENT_MAX_CELLS = 20_000  # larger marginals: the closed form only (one linear programme each)
#: cells of the marginals one release bounds with the consistency programme (~0.1-0.4 ms a cell), in
#: the order asked; the rest get the closed form (valid, looser). Charged by size and order only
#: (public), never by a noisy value: a route chosen from the noise would void the failure split.
CONSISTENT_WORK_CELLS = 30_000


@dataclass(frozen=True)
class ErrorBound:
    attrs: tuple[str, ...]
    supported: bool
    round: int | None  # round whose selection supplies the bound (unsupported), else None
    l1_bound: float | None  # bound on ‖M(D)/N − M(D̂)/N̂‖₁; None: no bound (nothing released bounds it)
    confidence: float

    def to_dict(self) -> dict:
        d = asdict(self)
        d["attrs"] = list(self.attrs)
        return d


def _total_interval(measurements, fail: float) -> tuple[float, float]:
    """(N̂, half-width) of a two-sided (1 − fail) interval for N from the measurements' totals."""
    num = den = 0.0
    for m in measurements:
        if m.query is not None or m.sigma is None:
            continue
        var = m.sigma**2 * m.y.size
        num += m.y.sum() / var
        den += 1.0 / var
    return num / den, float(norm.ppf(1 - fail / 2) / math.sqrt(den))


def _n_interval(mech, beta: float, work: "BoundWork") -> tuple[float, float, float]:
    """(failure share spent on N, N̂, half-width): N is public under replace-one (nothing spent);
    under add/remove its released estimate takes a tenth of ``beta`` (shared by one release's bounds)."""
    if mech.public_rows_ is not None:
        return 0.0, float(mech.public_rows_), 0.0
    beta_n = beta / 10
    if beta_n not in work.totals:
        work.totals[beta_n] = _total_interval(mech.measurements_, beta_n)
    return (beta_n, *work.totals[beta_n])


@dataclass
class BoundWork:
    """What the bounds of one release share (:meth:`privmarg.presets.AIM.error_bounds` asks 10^5
    on wide tables): the N̂ interval per failure share, each round's candidate rule, the combined
    measurements of each subset the consistency programme uses, and its cell budget."""

    totals: dict[float, tuple[float, float]] = field(default_factory=dict)
    rules: dict = field(default_factory=dict)
    lp_cells: int = CONSISTENT_WORK_CELLS  # cells the consistency programme may still take
    released: dict = field(default_factory=dict)  # subset -> (ȳ, σ̄) of its covering measurements, or None


def aim_error_bound(mech, attrs, confidence: float = 0.95, synthetic=None, work: BoundWork | None = None
                    ) -> ErrorBound:
    """See :meth:`privmarg.presets.AIM.error_bound`; ``work``: shared by the bounds of one release."""
    work = BoundWork() if work is None else work
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    dom = mech.domain_
    r = dom.canonical(attrs)
    if r not in mech.weights_:
        raise ValueError(f"{list(attrs)} is not in the downward closure of the workload")
    beta = 1.0 - confidence
    n_r = dom.size(r)
    beta_n, n_hat, dn = _n_interval(mech, beta, work)
    s = _synthetic_marginal(mech, r, synthetic)  # normalised, sums to 1
    covering = covering_measurements(mech, r)
    if covering:
        a = _supported_counts_bound(mech, r, covering, beta - beta_n, n_hat, dn, s, work)
        supported, rnd = True, None
    else:
        rnd = candidate_round(mech, r, work.rules)
        if rnd is None:  # no kept round had it as a candidate: only the trivial bound holds
            return ErrorBound(attrs=r, supported=False, round=None, l1_bound=2.0, confidence=confidence)
        entry = mech.log_[rnd - 1]
        b = (beta - beta_n) / 2
        lam1, lam2 = math.sqrt(2 * math.log(1 / b)), math.log(1 / b)
        sig, eps, sens = entry["sigma"], entry["epsilon"], entry["sensitivity"]
        sel = tuple(entry["selected"])
        n_sel = dom.size(sel)
        w_r, w_sel = mech.weights_[r], mech.weights_[sel]
        # the round's shortlist holds every candidate (a superset of them: the bound stays valid)
        em = (2 * sens / eps) * (math.log(entry["n_candidates"]) + lam2)
        b_r = _C * sig * n_r + (w_sel * (entry["model_error_selected"] - _C * sig * n_sel
                                         + lam1 * sig * math.sqrt(n_sel)) + em) / w_r
        prev = mech.round_models_[rnd]
        a = b_r + np.abs(uncached_query(prev)(r) - n_hat * s).sum()  # one-off: no need to fill its cache
        supported = False
    bound = (a + dn) / max(n_hat, 1.0)  # ‖x/N − s‖₁ ≤ |N − N̂|/N̂ + ‖x − N̂s‖₁/N̂ with N = Σx
    return ErrorBound(attrs=r, supported=supported, round=rnd, l1_bound=float(min(bound, 2.0)),
                      confidence=confidence)


def covering_measurements(mech, r: tuple[str, ...]) -> list:
    """The released Gaussian measurements that cover ``r``: identity queries on the release's own
    domain (a measurement on a compressed domain or through a query matrix does not count)."""
    dom, rs = mech.domain_, set(r)
    return [m for m in mech.measurements_ if rs <= set(m.attrs) and m.query is None and m.sigma is not None
            and set(m.attrs) <= set(dom.attrs) and np.size(m.y) == dom.size(m.attrs)]


def _combined(dom, r, covering) -> tuple[np.ndarray, float]:
    """(ȳ_r, σ̄): the inverse-variance average of the covering measurements projected to ``r``."""
    n_r = dom.size(r)
    num, den = np.zeros(n_r), 0.0
    for m in covering:
        y = Factor.from_flat(dom, m.attrs, m.y).project(r).flat
        w = n_r / (dom.size(m.attrs) * m.sigma**2)
        num += w * y
        den += w
    return num / den, math.sqrt(1 / den)


def _supported_counts_bound(mech, r, covering, fail: float, n_hat: float, dn: float, s: np.ndarray,
                            work: BoundWork) -> float:
    """Bound on ‖M_r(D) − N̂·s‖₁ (counts) holding with probability ≥ 1 − ``fail``: the noise has
    ‖M_r(D) − ȳ_r‖₁ ≤ σ̄·:func:`l1_noise_quantile` (n_r, ·), true counts are never negative, and
    M_r(D) must agree with what else was released about it (:func:`consistent_l1_max`): the
    marginal of each proper subset of ``r`` that a measurement covers (its own L1 ball, the subsets
    sharing ``1 − MAIN_SHARE`` of ``fail``) and the total, within ``dn`` of N̂ (its failure share
    was taken with N̂; 0 under replace-one, where N is public); cliques of more than 4 attributes
    use the subsets of one and of |r| − 1 attributes. Within ``work.lp_cells``, else the closed form
    (:func:`nonnegative_l1_max`); also the closed form where that already normalises to the trivial
    bound 2 (which always holds)."""
    dom = mech.domain_
    ybar, sbar = _combined(dom, r, covering)
    t = n_hat * s
    n_r = dom.size(r)
    closed = nonnegative_l1_max(ybar, t, sbar * l1_noise_quantile(n_r, fail))
    # which route a marginal takes may depend on public facts only (its size, the order asked): the
    # two routes hold on different events. A closed form reported as the trivial 2 always holds.
    if not r or n_r > min(CONSISTENT_MAX_CELLS, work.lp_cells):
        return closed
    work.lp_cells -= n_r
    if (closed + dn) / max(n_hat, 1.0) >= 2:
        return closed
    sizes = range(1, len(r)) if len(r) <= 4 else (1, len(r) - 1)  # wide cliques: 2^|r| balls is too many
    for q in (q for k in sizes for q in itertools.combinations(r, k) if q not in work.released):
        cov = covering_measurements(mech, q)  # shared by the marginals of one release
        work.released[q] = _combined(dom, q, cov) if cov else None
    subsets = [(q, work.released[q]) for k in sizes for q in itertools.combinations(r, k) if work.released[q]]
    main = fail * (MAIN_SHARE if subsets else 1.0)
    cell = np.indices(dom.sizes(r)).reshape(len(r), -1)  # each cell's value of each attribute
    balls = [ProjectionBall(np.zeros(n_r, dtype=np.int64), np.array([n_hat]), dn)]
    for q, (yq, sq) in subsets:
        at = [r.index(a) for a in q]
        entry = np.ravel_multi_index(tuple(cell[i] for i in at), dom.sizes(q))
        balls.append(ProjectionBall(entry, yq, sq * l1_noise_quantile(dom.size(q), (fail - main) / len(subsets))))
    return consistent_l1_max(ybar, t, sbar * l1_noise_quantile(n_r, main), balls)


def measured_error_bound(mech, attrs, confidence: float = 0.95, synthetic=None,
                         work: BoundWork | None = None) -> ErrorBound:
    """The supported bound of any release made of Gaussian measurements (MST, MWEM, PrivBayes,
    PrivMRF, JAM, Gaussian, ...): for a marginal covered by a measurement, as AIM's supported case;
    for any other, ``l1_bound=None`` (no bound: the selection released nothing that bounds it).
    Post-processing of released quantities: no privacy cost."""
    work = BoundWork() if work is None else work
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    dom = mech.domain_
    r = dom.canonical(attrs)
    covering = covering_measurements(mech, r)
    if not covering:
        return ErrorBound(attrs=r, supported=False, round=None, l1_bound=None, confidence=confidence)
    beta = 1.0 - confidence
    beta_n, n_hat, dn = _n_interval(mech, beta, work)
    s = _synthetic_marginal(mech, r, synthetic)
    a = _supported_counts_bound(mech, r, covering, beta - beta_n, n_hat, dn, s, work)
    bound = (a + dn) / max(n_hat, 1.0)
    return ErrorBound(attrs=r, supported=True, round=None, l1_bound=float(min(bound, 2.0)), confidence=confidence)


def candidate_round(mech, r: tuple[str, ...], rules: dict | None = None) -> int | None:
    """The latest round with a kept model in which ``r`` was a candidate, by the rounds' own rule
    (:func:`~privmarg.select.adaptive.fit_rule`, recomputed from released cliques and public
    limits); None if no kept round. ``rules``: a dict kept across calls (round -> its rule)."""
    rules = {} if rules is None else rules
    for t in sorted(mech.round_models_, reverse=True):
        if t not in rules:
            entry = mech.log_[t - 1]
            base = [m.attrs for m in mech.measurements_[:entry["n_measured"]]] + [z.attrs for z in mech.zeros_]
            inside = list(getattr(mech.round_models_[t], "cliques", ()))
            rules[t] = fit_rule(mech.domain_, mech.selector.loop, base, inside, entry["size_limit_mb"])
        if rules[t](r):
            return t
    return None


def released_table(mech, synthetic):
    """The synthetic table the bounds are about, as a Dataset (validated once), or None for the
    model's own marginals: ``synthetic`` if given, else the last ``sample()``."""
    from ..data import Dataset  # late: data sits above select

    if synthetic is None:
        synthetic = getattr(mech, "last_sample_", None)
    if synthetic is None or isinstance(synthetic, Dataset):
        return synthetic
    return Dataset(np.asarray(synthetic), mech.domain_)


def _synthetic_marginal(mech, r, synthetic) -> np.ndarray:
    released = released_table(mech, synthetic)
    if released is None:
        m = mech.model_.project(r)
    else:
        m = released.project(r)  # the synthetic table: public
    total = m.sum()
    return m / total if total > 0 else m
