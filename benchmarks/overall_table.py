"""The issue-19 overall comparison of RESULTS.md (the benchmark paper's Table 3 shape) from
overall.yaml's results: per dataset and ε, each method's mean (± std over seeds, [rank among the
methods]) of one metric per table, then mean ranks and cost per cell.

    cd benchmarks && ../.venv/bin/python overall_table.py [results.jsonl ...] [--metrics workload_error_3way tv_2way]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from modules_table import cost_table, frame, sweep_table

METHODS = ["aim", "mst", "privpgd", "privbayes", "privmrf", "privsyn", "gsd", "rap++", "rap", "gem", "gaussian",
           "independent"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # the committed results: the paper sweep's cells (aim, mst, privpgd, independent) and this grid's
    ap.add_argument("results", nargs="*", default=["paper_results/results.jsonl", "results/overall.jsonl"])
    ap.add_argument("--metrics", nargs="+", default=["workload_error_3way", "tv_2way", "downstream"])
    ap.add_argument("--config", default="overall.yaml")
    args = ap.parse_args()
    for metric in args.metrics:
        df = frame([Path(p) for p in args.results], metric, Path(args.config))
        text, _ = sweep_table(df, [m for m in METHODS if (df.method == m).any()], "method")
        print(f"**{metric}** (mean ± std over seeds [rank among the methods run in that column])\n\n{text}\n")
    print("**Cost per cell** (mean fit seconds (max) / peak RSS MB of a fresh worker, or +extra RSS of the fit "
          "where the worker was shared)\n")
    print(cost_table(df, [m for m in METHODS if (df.method == m).any()], "method"))


if __name__ == "__main__":
    main()
