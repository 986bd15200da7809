"""Benchmarks: methods × datasets × epsilons × seeds, resumable, in parallel worker processes.

``privmarg bench CONFIG.yaml`` (see :mod:`.config` for the format) runs :func:`run_benchmark`,
appends one JSON line per finished cell to ``OUTPUT/results.jsonl`` and writes the summary table and
the PrivPGD-style log2-ratio figure (:mod:`.summary`).
"""

from .config import BenchConfig, Cell, ConfigError, load_config
from .methods import METHODS, MethodUnavailable, check_available, resolve
from .runner import Outcome, run_benchmark, run_cell, split_dataset
from .summary import collect, summary_table, write_summary

__all__ = [
    "METHODS",
    "BenchConfig",
    "Cell",
    "ConfigError",
    "MethodUnavailable",
    "Outcome",
    "check_available",
    "collect",
    "load_config",
    "resolve",
    "run_benchmark",
    "run_cell",
    "split_dataset",
    "summary_table",
    "write_summary",
]
