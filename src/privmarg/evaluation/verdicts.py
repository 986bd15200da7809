"""What an evaluation sees, in words: the findings a curator must not miss in the plots.

- the release does not beat, or barely beats (by less than :data:`BARELY`), the independence
  baseline on a dependence metric: it keeps little of the relations between columns;
- a strong association of the real table (|r| ≥ :data:`STRONG`, Pearson on the embedded codes) is
  less than half as strong in the synthetic one;
- a column's own distribution is off by a total variation above :data:`COLUMN_TV`.

The evaluation reads the real table: these lines are for the curator, not for publication.
"""

from __future__ import annotations

import numpy as np

from ..data import Dataset
from .metrics import embed

BARELY = 0.10  # relative improvement over the independence baseline below which it is "barely"
STRONG = 0.5
COLUMN_TV = 0.2
COLUMN_NOISE = 0.01  # tv_1way above which a verdict against the (exact) baseline says so
DEPENDENCE_METRICS = ("tv_2way", "sw1_2way", "workload_error_3way", "covariance_error", "conditional_query_error")
MAX_LINES = 5


def correlations(data: Dataset) -> np.ndarray:
    """Pearson correlations of the embedded codes (constant columns: 0 off the diagonal)."""
    x = embed(data)
    x = x - x.mean(axis=0)
    sd = np.sqrt((x * x).mean(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        c = (x.T @ x / max(len(x), 1)) / np.outer(sd, sd)
    c = np.nan_to_num(c)
    np.fill_diagonal(c, 1.0)
    return c


def verdicts(result: dict, real: Dataset, synthetic: Dataset) -> list[str]:
    """Plain-words findings of an :func:`~privmarg.evaluation.report.evaluate` result."""
    out = []
    base = result.get("baseline") or {}
    own = result.get("tv_1way")
    # the baseline shuffles the real columns: exact (and not private) column distributions, so a
    # release whose own columns are noisy starts behind it by that noise
    caveat = (f" (the baseline keeps every column exactly and is not private; this release's columns are "
              f"off by tv_1way {own:.2g}, part of the gap)"
              if isinstance(own, float) and own > COLUMN_NOISE else "")
    for m in DEPENDENCE_METRICS:
        s, b = result.get(m), base.get(m)
        if not (isinstance(s, float) and isinstance(b, float)) or b <= 0:
            continue
        if s >= b:
            out.append(f"{m}: {s:.3g}, no better than the independence baseline ({b:.3g}): the release keeps "
                       f"little or none of the relations between columns this metric sees{caveat}")
        elif s > (1 - BARELY) * b:
            out.append(f"{m}: {s:.3g}, barely better than the independence baseline ({b:.3g}): the release "
                       f"keeps little of the relations between columns{caveat}")
    cr, cs = correlations(real), correlations(synthetic)
    attrs = list(real.domain.attrs)
    lost = []
    for i in range(len(attrs)):
        for j in range(i + 1, len(attrs)):
            r, s = cr[i, j], cs[i, j]
            if abs(r) >= STRONG and abs(s) < abs(r) / 2:
                lost.append((abs(r) - abs(s), attrs[i], attrs[j], r, s))
    for _, a, b, r, s in sorted(lost, reverse=True)[:MAX_LINES]:
        out.append(f"strong association lost: {a} and {b} correlate {r:+.2f} in the real table, {s:+.2f} in the "
                   "synthetic one")
    if len(lost) > MAX_LINES:
        out.append(f"... and {len(lost) - MAX_LINES} more strong associations lost")
    off = sorted(((v, c) for c, v in (result.get("tv_per_column") or {}).items() if v > COLUMN_TV), reverse=True)
    for v, c in off[:MAX_LINES]:
        out.append(f"column {c}: its distribution is off by total variation {v:.2f}")
    return out
