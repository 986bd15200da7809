"""An empirical membership-inference attack on a synthetic table: a diagnostic, not a bound.

Density-ratio attack (the idea of DOMIAS, van Breugel et al. 2023): a record of the training table
should be more likely under the synthetic table's distribution than under the population's, so
its score is ``log p_syn(x) − log p_ref(x)``, each density a pairwise composite likelihood (the sum
over column pairs of the log of the pair's smoothed relative frequency), the reference
distribution estimated from records known not to be in the training table. Members (training
records) and non-members (held-out records) are scored, and the attack's ROC summarised by its
AUC and its true-positive rates at fixed false-positive rates. Distance to the closest record is
deliberately not used (it measures copying, not membership: Ganev & De Cristofaro 2023).

One attack says what *this* attacker achieves; the provable bound
(:func:`privmarg.privacy.risk.max_auc`) holds for every attacker. Reads the real tables: for the
curator's evaluation, not for release (no privacy cost is charged).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..data import Dataset

__all__ = ["AttackResult", "membership_attack", "pairwise_log_density", "roc_auc"]

ATTACK_FPRS = (0.001, 0.01, 0.1)


@dataclass(frozen=True)
class AttackResult:
    auc: float  # area under the attack's ROC curve (0.5: no better than a coin)
    tpr_at_fpr: dict[float, float]  # empirical true-positive rate at each false-positive rate
    members: int
    non_members: int

    def to_dict(self) -> dict:
        return {"auc": self.auc, "tpr_at_fpr": {f"{k:g}": v for k, v in self.tpr_at_fpr.items()},
                "members": self.members, "non_members": self.non_members,
                "attack": "density ratio (pairwise composite likelihood, synthetic vs reference)",
                "note": "one attack, a diagnostic: the provable bound covers every attacker"}


def pairwise_log_density(fit: Dataset, query: Dataset, smoothing: float = 0.5) -> np.ndarray:
    """``Σ_{i<j} log p̂(x_i, x_j)`` for each record of ``query``, ``p̂`` the 2-way relative
    frequencies of ``fit`` with ``smoothing`` added to every cell (one column: its 1-way)."""
    dom = fit.domain
    a = np.asarray(fit.codes, dtype=np.int64)
    q = np.asarray(query.codes, dtype=np.int64)
    pairs = list(itertools.combinations(range(len(dom)), 2)) or [(0,)]
    out = np.zeros(len(q))
    for c in pairs:
        sizes = [dom.shape[i] for i in c]
        cells = int(np.prod(sizes))
        counts = np.bincount(np.ravel_multi_index(a[:, c].T, sizes), minlength=cells) + smoothing
        logp = np.log(counts) - np.log(counts.sum())
        out += logp[np.ravel_multi_index(q[:, c].T, sizes)]
    return out


def roc_auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(score of a positive > score of a negative) + ½ P(tie): the Mann–Whitney AUC."""
    scores = np.concatenate([pos, neg])
    order = scores.argsort(kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # average ranks over ties
    _, first, counts = np.unique(sorted_scores, return_index=True, return_counts=True)
    avg = first + (counts - 1) / 2.0 + 1.0
    ranks[order] = np.repeat(avg, counts)
    n1, n0 = len(pos), len(neg)
    return float((ranks[:n1].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def _tpr_at(pos: np.ndarray, neg: np.ndarray, fpr: float) -> float:
    """True-positive rate of the threshold that flags at most ``fpr`` of the negatives (scores
    strictly above the (k+1)-th largest negative, k = ⌊fpr·n⌋)."""
    k = int(np.floor(fpr * len(neg)))
    if k >= len(neg):
        return 1.0
    thr = np.sort(neg)[::-1][k]
    return float(np.mean(pos > thr))


def membership_attack(members: Dataset, non_members: Dataset, synthetic: Dataset, reference: Dataset,
                      *, smoothing: float = 0.5) -> AttackResult:
    """Score ``members`` (records of the training table) and ``non_members`` (held-out records of
    the same population) by ``log p_syn − log p_ref`` (:func:`pairwise_log_density`), ``reference``
    being further held-out records (disjoint from ``non_members``). All over one domain."""
    for d in (non_members, synthetic, reference):
        if d.domain != members.domain:
            raise ValueError("the attack's tables must share one domain")
    if min(len(members), len(non_members), len(synthetic), len(reference)) == 0:
        raise ValueError("the attack needs non-empty members, non-members, synthetic and reference tables")

    def score(x: Dataset) -> np.ndarray:
        return pairwise_log_density(synthetic, x, smoothing) - pairwise_log_density(reference, x, smoothing)

    pos, neg = score(members), score(non_members)
    return AttackResult(roc_auc(pos, neg), {f: _tpr_at(pos, neg, f) for f in ATTACK_FPRS}, len(pos), len(neg))
