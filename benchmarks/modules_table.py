"""The issue-19 module tables of RESULTS.md (the benchmark paper's Figure 8) from modules.yaml's results.

Two sweeps share the pair privsyn/pgm: selection modules (each × PGM) and generation modules (each
fed PrivSyn's selection). Per dataset and ε: the mean over seeds (± sample std, n) of the 3-way
workload error, and each pair's rank within its sweep (1 = lowest error); then each module's mean
rank over every (dataset, ε) cell it has, and cost per cell (fit seconds, peak RSS of the worker:
``fresh_worker`` cells only, else the fit's extra RSS is shown with a ``+``).

    cd benchmarks && ../.venv/bin/python modules_table.py [results.jsonl] [--metric workload_error_3way]

Only cells of the current ``--config`` (default modules.yaml) count: a record of an older spec of a
cell (e.g. before a generator setting changed) has another key.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from privmarg.benchmark.results import load_results

SELECTION = ["aim/pgm", "privmrf/pgm", "privsyn/pgm", "rap++/pgm"]
GENERATION = ["privsyn/pgm", "privsyn/gum", "privsyn/relaxed", "privsyn/genetic", "privsyn/gem"]
DATASETS = ["adult", "titanic", "salary", "fire"]
EPS = [0.2, 1.0, 2.5]


def _metric(metrics: dict, name: str):
    """A metric of a record; ``downstream`` (and other ML efficacy fields) live under ``ml_efficacy``."""
    if name in metrics:
        return metrics[name]
    ml = metrics.get("ml_efficacy") or {}
    return ml.get(name) if isinstance(ml, dict) else None


def frame(path: Path | list[Path], metric: str, config: Path) -> pd.DataFrame:
    from privmarg.benchmark import load_config

    keys = {c.key for c in load_config(config).cells()}  # cells of an older spec are left out
    rows, seen = [], set()
    paths = list(path) if isinstance(path, (list, tuple)) else [path]
    for r in (r for p in paths for r in load_results(p)):
        if r["key"] in seen:  # the same cell in two files (a seeded copy): count it once
            continue
        seen.add(r["key"])
        if r.get("status", "ok") != "ok" or r["method"] == "real" or r["key"] not in keys:
            continue
        m = r.get("memory", {})
        rows.append({"dataset": r["dataset"], "method": r["method"], "eps": r["epsilon"], "seed": r["seed"],
                     "value": _metric(r["metrics"], metric), "fit_s": r["timing"]["fit_seconds"],
                     "cpu_s": r["timing"].get("cpu_seconds"), "peak_mb": m.get("peak_rss_mb"),
                     "extra_mb": m.get("fit_extra_mb"), "pid": r.get("pid")})
    df = pd.DataFrame(rows)
    # cells that shared a worker process with earlier cells: their peak RSS includes what those left
    shared = df.groupby("pid")["pid"].transform("size") > 1
    df["fresh"] = ~shared
    return df


def sweep_table(df: pd.DataFrame, pairs: list[str], label: str = "pair") -> tuple[str, pd.DataFrame]:
    agg = df[df.method.isin(pairs)].groupby(["dataset", "eps", "method"]).agg(
        mean=("value", "mean"), std=("value", "std"), n=("value", "size")).reset_index()
    agg["rank"] = agg.groupby(["dataset", "eps"])["mean"].rank(method="min")
    cols = [(d, e) for d in DATASETS for e in EPS if ((agg.dataset == d) & (agg.eps == e)).any()]
    head = f"| {label} | " + " | ".join(f"{d} ε={e:g}" for d, e in cols) + " | mean rank |"
    lines = [head, "|---" * (len(cols) + 2) + "|"]
    for p in pairs:
        cells, ranks = [], []
        for d, e in cols:
            row = agg[(agg.dataset == d) & (agg.eps == e) & (agg.method == p)]
            if row.empty:
                cells.append("–")
                continue
            r = row.iloc[0]
            sd = "" if np.isnan(r["std"]) else f" ± {r['std']:.3f}"
            n = "" if r["n"] == 3 else f" (n={int(r['n'])})"
            cells.append(f"{r['mean']:.3f}{sd} [{int(r['rank'])}]{n}")
            ranks.append(r["rank"])
        lines.append(f"| {p} | " + " | ".join(cells) + f" | {np.mean(ranks):.2f} |" if ranks else f"| {p} | "
                     + " | ".join(cells) + " | – |")
    return "\n".join(lines), agg


def cost_table(df: pd.DataFrame, pairs: list[str] | None = None, label: str = "pair") -> str:
    pairs = list(dict.fromkeys(pairs or SELECTION + GENERATION))
    ds = [d for d in DATASETS if (df.dataset == d).any()]
    lines = [f"| {label} | " + " | ".join(f"{d}: fit s (max) / peak MB" for d in ds) + " |",
             "|---" * (len(ds) + 1) + "|"]
    for p in pairs:
        cells = []
        for d in ds:
            sub = df[(df.method == p) & (df.dataset == d)]
            if sub.empty:
                cells.append("–")
                continue
            fresh = sub[sub.fresh]
            mem = (f"{fresh.peak_mb.max():.0f}" if len(fresh) else f"+{sub.extra_mb.max():.0f}")
            cells.append(f"{sub.fit_s.mean():.1f} ({sub.fit_s.max():.0f}) / {mem}")
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(df: pd.DataFrame, path: Path, metric: str) -> None:
    """Two panels (the paper's Figure 8 layout): for each sweep, every pair's error over the best
    pair's in each (dataset, ε) cell, mean over seeds; 1 = best of its sweep."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(12, 7), constrained_layout=True)
    for ax, (title, pairs) in zip(axes, (("selection modules × PGM", SELECTION),
                                         ("generation modules fed PrivSyn's selection", GENERATION))):
        _, agg = sweep_table(df, pairs)
        cols = [(d, e) for d in DATASETS for e in EPS if ((agg.dataset == d) & (agg.eps == e)).any()]
        width = 0.8 / len(pairs)
        for k, p in enumerate(pairs):
            ys = []
            for d, e in cols:
                cell = agg[(agg.dataset == d) & (agg.eps == e)]
                row = cell[cell.method == p]
                ys.append(float(row["mean"].iloc[0] / cell["mean"].min()) if len(row) else np.nan)
            ax.bar(np.arange(len(cols)) + (k - (len(pairs) - 1) / 2) * width, ys, width, label=p)
        ax.set_xticks(np.arange(len(cols)), [f"{d}\nε={e:g}" for d, e in cols], fontsize=8)
        ax.axhline(1.0, color="black", lw=0.6)
        ax.set_ylabel(f"{metric} / best of sweep")
        ax.set_title(title)
        ax.legend(fontsize=8, ncol=len(pairs))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="?", default="results/modules.jsonl")
    ap.add_argument("--metric", default="workload_error_3way")
    ap.add_argument("--config", default="modules.yaml")
    ap.add_argument("--figure", type=Path, default=None, help="write the two-panel figure (PNG) here")
    args = ap.parse_args()
    df = frame(Path(args.results), args.metric, Path(args.config))
    for title, pairs in (("Selection modules × PGM", SELECTION), ("Generation modules fed PrivSyn's selection", GENERATION)):
        text, _ = sweep_table(df, pairs)
        print(f"**{title}** ({args.metric}: mean ± std over seeds [rank in the sweep])\n\n{text}\n")
    print("**Cost per cell** (mean fit seconds over the cells run, (max); peak RSS MB of a fresh worker, or "
          "+extra RSS of the fit where the worker was shared)\n")
    print(cost_table(df))
    if args.figure:
        figure(df, args.figure, args.metric)


if __name__ == "__main__":
    main()
