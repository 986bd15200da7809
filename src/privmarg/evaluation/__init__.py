"""Utility metrics of synthetic tables, the evaluation report.

Metrics take ``(real, synthetic)`` :class:`~privmarg.data.Dataset` objects on one domain; see
:mod:`privmarg.evaluation.metrics` (marginal, geometric and query metrics), :mod:`.ml` (ML
efficacy) and :mod:`.report` (all of them at once, JSON + HTML).
"""

from .metrics import (
    CountingQueries,
    ThresholdQueries,
    conditional_query_error,
    counting_query_error,
    covariance_error,
    embed,
    marginal_distances,
    range_query_error,
    sw1_2way,
    thresholding_query_error,
    tv_kway,
    tv_per_marginal,
    workload_error,
)
from .ml import ml_efficacy
from .labels import code_labels
from .report import budget_by_phase, evaluate, independence_baseline, render_html

__all__ = [
    "CountingQueries",
    "ThresholdQueries",
    "conditional_query_error",
    "counting_query_error",
    "covariance_error",
    "budget_by_phase",
    "code_labels",
    "embed",
    "evaluate",
    "independence_baseline",
    "marginal_distances",
    "ml_efficacy",
    "range_query_error",
    "render_html",
    "sw1_2way",
    "thresholding_query_error",
    "tv_kway",
    "tv_per_marginal",
    "workload_error",
]
