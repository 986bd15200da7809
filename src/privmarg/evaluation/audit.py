"""Empirical privacy auditing: lower bounds on ε from distinguishing two neighbouring datasets.

A mechanism run many times on ``D`` and on a neighbour ``D'`` yields one score per run. Any test
"say ``D'`` when the score is above (or below) ``τ``" has a false positive rate ``FPR`` (on runs of
``D``) and a false negative rate ``FNR`` (on runs of ``D'``); an ``(ε, δ)``-DP mechanism forces
``FPR + e^ε·FNR ≥ 1 − δ`` and ``FNR + e^ε·FPR ≥ 1 − δ`` (Kairouz et al. 2015), so

    ``ε ≥ max( ln((1 − δ − FNR)/FPR), ln((1 − δ − FPR)/FNR) )``.

With one-sided Clopper–Pearson upper bounds on both rates in place of the rates, the result is a
lower bound on the true ε at the stated confidence (Jagielski et al. 2020; Nasr et al. 2021). The
threshold and the direction are chosen on one half of the runs and the bound is computed on the
other half, so the confidence statement holds for the one test actually evaluated.

Units: scores are whatever the caller computes (e.g. a noisy count, or a likelihood-ratio score);
``epsilon`` is the DP ε (nats); ``delta`` a probability. Nothing here reads private data or costs
privacy: it is a test of a mechanism on data the auditor chooses.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = ["AuditBound", "clopper_pearson_upper", "epsilon_from_rates", "epsilon_lower_bound"]


def clopper_pearson_upper(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided ``1 − alpha`` Clopper–Pearson upper bound on a rate from ``k`` events in ``n``
    trials (1 where ``k == n``)."""
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        up = stats.beta.ppf(1.0 - alpha, k + 1.0, n - k)
    return np.where(k >= n, 1.0, up)


def epsilon_from_rates(fpr: np.ndarray | float, fnr: np.ndarray | float, delta: float = 0.0) -> np.ndarray:
    """The smallest ε that an ``(ε, delta)``-DP mechanism may have if a test achieves (``fpr``,
    ``fnr``): ``max(ln((1−δ−fnr)/fpr), ln((1−δ−fpr)/fnr), 0)``."""
    fpr = np.asarray(fpr, dtype=np.float64)
    fnr = np.asarray(fnr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.clip(1.0 - delta - fnr, 0.0, None) / fpr)
        b = np.log(np.clip(1.0 - delta - fpr, 0.0, None) / fnr)
    out = np.fmax(np.nan_to_num(a, nan=0.0, neginf=0.0, posinf=np.inf),
                  np.nan_to_num(b, nan=0.0, neginf=0.0, posinf=np.inf))
    return np.maximum(out, 0.0)


@dataclass(frozen=True)
class AuditBound:
    """Result of :func:`epsilon_lower_bound`.

    ``epsilon_lb``: ε lower bound at ``confidence``; ``epsilon_point``: the same test's bound from
    the raw rates (no confidence interval); ``threshold`` and ``direction`` (+1: "``D'``" when the
    score is above it, −1: below) chosen on the selection half; ``fpr``/``fnr`` and their upper
    bounds on the evaluation half of ``runs0`` + ``runs1`` runs."""

    epsilon_lb: float
    epsilon_point: float
    threshold: float
    direction: int
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    runs0: int
    runs1: int
    confidence: float
    delta: float

    def to_dict(self) -> dict:
        return {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in asdict(self).items()}


def _rates(s0: np.ndarray, s1: np.ndarray, thr: np.ndarray, direction: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts of false positives (runs of D flagged) and false negatives (runs of D' not flagged)."""
    a, b = np.sort(s0), np.sort(s1)
    if direction > 0:  # flag when score > τ
        fp = a.size - np.searchsorted(a, thr, side="right")
        fn = np.searchsorted(b, thr, side="right")
    else:  # flag when score < τ
        fp = np.searchsorted(a, thr, side="left")
        fn = b.size - np.searchsorted(b, thr, side="left")
    return fp, fn


def epsilon_lower_bound(scores0, scores1, *, delta: float = 0.0, confidence: float = 0.95,
                        seed: int = 0) -> AuditBound:
    """Lower bound on ε from scores of runs on ``D`` (``scores0``) and on ``D'`` (``scores1``).

    The runs of each side are split at random (``seed``) into a selection half, on which the
    threshold and direction with the largest Clopper–Pearson bound are chosen among the observed
    scores (all of the most extreme ones, a geometric grid of ranks towards the middle) by a
    Clopper–Pearson bound at a 100 times smaller error level (against the winner's curse), and an
    evaluation half, on which the bound is reported; each rate gets a one-sided
    bound at ``1 − (1 − confidence)/2``, so the reported ``epsilon_lb`` holds with probability at
    least ``confidence``.
    """
    s0 = np.asarray(scores0, dtype=np.float64).ravel()
    s1 = np.asarray(scores1, dtype=np.float64).ravel()
    if s0.size < 4 or s1.size < 4:
        raise ValueError("need at least 4 runs on each dataset")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    p0, p1 = rng.permutation(s0.size), rng.permutation(s1.size)
    sel0, ev0 = s0[p0[: s0.size // 2]], s0[p0[s0.size // 2:]]
    sel1, ev1 = s1[p1[: s1.size // 2]], s1[p1[s1.size // 2:]]
    alpha = (1.0 - confidence) / 2.0
    pooled = np.sort(np.concatenate([sel0, sel1]))
    # candidate thresholds: every pooled score near both ends (where the best tests are), a
    # geometric grid of ranks in between
    ranks = np.unique(np.round(np.geomspace(1, pooled.size, 1500)).astype(np.int64) - 1)
    thr = np.unique(np.concatenate([pooled[ranks], pooled[pooled.size - 1 - ranks]]))
    best = (-1.0, 0.0, 1)
    a_sel = alpha / 100.0  # stricter on the selection half: prefers tests resting on more events
    for direction in (1, -1):
        fp, fn = _rates(sel0, sel1, thr, direction)
        eps = epsilon_from_rates(clopper_pearson_upper(fp, sel0.size, a_sel),
                                 clopper_pearson_upper(fn, sel1.size, a_sel), delta)
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), float(thr[i]), direction)
    _, tau, direction = best
    fp, fn = _rates(ev0, ev1, np.array([tau]), direction)
    fpr_u = float(clopper_pearson_upper(fp, ev0.size, alpha)[0])
    fnr_u = float(clopper_pearson_upper(fn, ev1.size, alpha)[0])
    fpr, fnr = float(fp[0] / ev0.size), float(fn[0] / ev1.size)
    lb = float(epsilon_from_rates(fpr_u, fnr_u, delta))
    point = float(epsilon_from_rates(fpr, fnr, delta))
    if not math.isfinite(point):
        point = math.inf
    return AuditBound(lb, point, tau, direction, fpr, fnr, fpr_u, fnr_u, int(ev0.size), int(ev1.size),
                      float(confidence), float(delta))
