"""Metrics comparing a real and a synthetic table over the same domain."""

from __future__ import annotations

import numpy as np

from ..dataset import Dataset
from ..workload import Workload


def workload_error(real: Dataset, synthetic: Dataset, workload: Workload) -> float:
    """AIM's workload error: weighted mean over the workload of ‖M_r(D)/N − M_r(D̂)/N̂‖₁.

    Each table is normalised by its own size (the synthetic one is rescaled to N rows), so the
    value lies in [0, 2·max weight]; with unit weights it is the mean L1 distance of normalised
    marginals (twice the mean total variation).
    """
    if real.domain != synthetic.domain:
        raise ValueError("real and synthetic tables must share a domain")
    n, m = len(real), len(synthetic)
    if n == 0 or m == 0:
        raise ValueError("both tables must be non-empty")
    errs = [w * np.abs(real.project(r) / n - synthetic.project(r) / m).sum() for r, w in workload]
    return float(np.mean(errs))
