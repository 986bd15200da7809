"""The issue-20 tables of RESULTS.md from deep_full.yaml's results: per dataset, every ε, the deep
methods beside the paper sweep's (imported) cells; mean over the seeds each cell has (column n).

    cd benchmarks && PYTHONPATH=../src python deep_full_table.py [results.jsonl]
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from privmarg.benchmark.results import load_results
from privmarg.benchmark.summary import flatten

METHODS = {"real": "real data", "dpmerf": "**DP-MERF**", "tabddpm": "**DP-TabDDPM**", "aim": "AIM*",
           "mst": "MST*", "privpgd": "PrivPGD*", "independent": "Independent*"}
COLS = [("downstream", "down."), ("mean_f1", "mean F1"), ("tv_1way", "TV 1w"),
        ("tv_2way", "TV 2w"),
        ("sw1_2way", "SW1 2w"), ("workload_error_3way", "3-way"), ("covariance_error", "cov."),
        ("counting_query_error", "count."), ("thresholding_query_error", "thresh."),
        ("range_query_error", "range"), ("conditional_query_error", "cond."), ("fit_seconds", "fit s"),
        ("sample_seconds", "sample s"), ("cpu_seconds", "CPU s"), ("peak_rss_mb", "peak MB")]


def fmt(v: float, col: str) -> str:
    if pd.isna(v):
        return "–"
    if col in ("fit_seconds", "sample_seconds", "cpu_seconds", "peak_rss_mb"):
        return f"{v:.0f}" if v >= 10 else f"{v:.1f}"
    return f"{v:.3f}" if abs(v) >= 0.01 or v == 0 else f"{v:.1e}"


def main(path: str) -> None:
    df = pd.DataFrame([flatten(r) for r in load_results(Path(path)) if r.get("status") == "ok"])
    df = df.drop_duplicates(subset=["dataset", "method", "epsilon", "seed"], keep="last")
    g = df.assign(epsilon=df["epsilon"].fillna(0.0)).groupby(["dataset", "method", "epsilon"])
    mean, n = g[[c for c, _ in COLS if c in df]].mean(), g.size()
    for ds in ("adult", "titanic", "fire", "salary"):
        print(f"\n**{ds}**\n")
        print("| ε | method | n | " + " | ".join(h for _, h in COLS) + " |")
        print("|---|---|---|" + "---|" * len(COLS))
        for eps in (0.0, 0.2, 1.0, 2.5):
            for m, label in METHODS.items():
                if (ds, m, eps) not in mean.index or (m == "real") != (eps == 0.0):
                    continue
                row = mean.loc[(ds, m, eps)]
                e = "–" if eps == 0.0 else f"{eps:g}"
                print(f"| {e} | {label} | {n.loc[(ds, m, eps)]} | "
                      + " | ".join(fmt(row.get(c), c) for c, _ in COLS) + " |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parent / "_work/deep_full/results.jsonl"))
