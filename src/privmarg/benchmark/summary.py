"""Summaries of a results file: mean ± std tables (markdown, CSV) and the PrivPGD-style figure.

The figure follows PrivPGD Fig. 1/2: for each metric and dataset, the log2 ratio of every run's error
to the reference method's mean error (mean ± std over seeds), cut at y = 3 (runs above are drawn at
3 with an upward marker). One PNG per epsilon.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import _atomic, write_table
from .config import BenchConfig
from .results import load_results

#: columns of the markdown table (all scalar columns go to the CSV)
TABLE_METRICS = ["downstream", "covariance_error", "counting_query_error", "thresholding_query_error",
                 "sw1_2way", "tv_2way", "workload_error_3way", "range_query_error", "conditional_query_error",
                 "mean_f1", "fit_seconds", "peak_rss_mb"]
#: panels of the figure (PrivPGD: downstream, covariance, counting, thresholding, SW1, TV)
FIGURE_METRICS = ["downstream", "covariance_error", "counting_query_error", "thresholding_query_error",
                  "sw1_2way", "tv_2way"]


def _num(v):
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v in ("nan", "inf", "-inf"):
        return float(v)
    return None


def flatten(rec: dict) -> dict:
    """One flat row of scalars from a result record."""
    row = {"dataset": rec.get("dataset"), "method": rec.get("method"), "epsilon": rec.get("epsilon"),
           "seed": rec.get("seed")}
    for k, v in (rec.get("metrics") or {}).items():
        if _num(v) is not None:
            row[k] = _num(v)
    ml = (rec.get("metrics") or {}).get("ml_efficacy") or {}
    for k in ("downstream", "mean_f1"):
        if _num(ml.get(k)) is not None:
            row[k] = _num(ml[k])
    for model, res in (ml.get("models") or {}).items():
        for k, v in (res.get("synthetic") or {}).items():
            if k != "seconds" and _num(v) is not None:
                row[f"ml.{model}.{k}"] = _num(v)
    for k, v in (rec.get("timing") or {}).items():
        if _num(v) is not None:
            row[k] = _num(v)
    mem = rec.get("memory") or {}
    for k in ("peak_rss_mb", "fit_extra_mb"):
        if _num(mem.get(k)) is not None:
            row[k] = _num(mem[k])
    return row


def collect(config: BenchConfig) -> pd.DataFrame:
    """Finished records of the config's current cells (stale results of edited configs are ignored)."""
    keys = {c.key for c in config.cells()}
    rows = [flatten(r) for r in load_results(config.results_path) if r.get("status") == "ok" and r.get("key") in keys]
    df = pd.DataFrame(rows)
    if not df.empty:
        df = df.drop_duplicates(subset=["dataset", "method", "epsilon", "seed"], keep="last")
        # the config's order (datasets, then the real-data baseline and methods, then ε and seed),
        # not the order cells happened to finish in
        ds = {d.name: i for i, d in enumerate(config.datasets)}
        ms = {"real": -1} | {m.name: i for i, m in enumerate(config.methods)}
        df = df.sort_values(["dataset", "method", "epsilon", "seed"], na_position="first", kind="stable",
                            key=lambda col: col.map(ds) if col.name == "dataset"
                            else col.map(ms) if col.name == "method" else col).reset_index(drop=True)
    return df


def summary_table(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation (over seeds) of every scalar column, per dataset × method × epsilon."""
    if df.empty:
        return df
    value_cols = [c for c in df.columns if c not in ("dataset", "method", "epsilon", "seed")]
    g = df.assign(epsilon=df["epsilon"].fillna(-1.0)).groupby(["dataset", "method", "epsilon"], sort=False)
    mean = g[value_cols].mean().add_suffix("_mean")
    std = g[value_cols].std(ddof=1).add_suffix("_std")
    n = g.size().rename("runs")
    out = pd.concat([n, mean, std], axis=1).reset_index()
    out["epsilon"] = out["epsilon"].where(out["epsilon"] >= 0, np.nan)
    order = [c for v in value_cols for c in (f"{v}_mean", f"{v}_std")]
    return out[["dataset", "method", "epsilon", "runs"] + order]


def _cell(mean, std) -> str:
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    s = f"{mean:.4g}"
    if std is not None and not (isinstance(std, float) and math.isnan(std)):
        s += f" ± {std:.2g}"
    return s


def markdown(table: pd.DataFrame, metrics=TABLE_METRICS) -> str:
    cols = [m for m in metrics if f"{m}_mean" in table.columns]
    head = "| dataset | method | ε | runs | " + " | ".join(cols) + " |"
    lines = [head, "|" + "---|" * (4 + len(cols))]
    for _, r in table.iterrows():
        eps = "–" if pd.isna(r["epsilon"]) else f"{r['epsilon']:g}"
        vals = [_cell(r[f"{m}_mean"], r[f"{m}_std"]) for m in cols]
        lines.append(f"| {r['dataset']} | {r['method']} | {eps} | {int(r['runs'])} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"


def log2_ratios(df: pd.DataFrame, reference: str, metric: str) -> pd.DataFrame:
    """Per dataset × epsilon × method: mean and std over seeds of log2(error / reference mean error)."""
    out = []
    if metric not in df.columns:
        return pd.DataFrame(columns=["dataset", "epsilon", "method", "mean", "std"])
    sub = df[df["epsilon"].notna() & df[metric].notna()]
    for (ds, eps), grp in sub.groupby(["dataset", "epsilon"], sort=False):
        ref = grp.loc[grp["method"] == reference, metric]
        if ref.empty or not ref.mean() > 0:
            continue
        for m, g in grp.groupby("method", sort=False):
            vals = np.log2(np.maximum(g[metric].to_numpy(), 1e-300) / ref.mean())
            out.append({"dataset": ds, "epsilon": eps, "method": m, "mean": float(vals.mean()),
                        "std": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0})
    return pd.DataFrame(out, columns=["dataset", "epsilon", "method", "mean", "std"])


def plot_log2_ratios(df: pd.DataFrame, reference: str, epsilon: float, metrics=FIGURE_METRICS, cut: float = 3.0):
    """The PrivPGD figure for one epsilon: one panel per metric, datasets on x, one marker per method."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    metrics = [m for m in metrics if m in df.columns]
    datasets = list(dict.fromkeys(df["dataset"]))
    methods = [m for m in dict.fromkeys(df["method"]) if m not in (reference, "real")]
    ncols = min(3, max(1, len(metrics)))
    nrows = math.ceil(len(metrics) / ncols) or 1
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    width = 0.7 / max(1, len(methods))
    for p, metric in enumerate(metrics):
        ax = axes[p // ncols][p % ncols]
        lr = log2_ratios(df[df["epsilon"] == epsilon], reference, metric)
        for mi, m in enumerate(methods):
            pts = lr[lr["method"] == m].set_index("dataset")
            xs, ys, es, clipped = [], [], [], []
            for di, ds in enumerate(datasets):
                if ds in pts.index:
                    xs.append(di - 0.35 + width * (mi + 0.5))
                    v = pts.loc[ds, "mean"]
                    ys.append(min(v, cut))
                    es.append(pts.loc[ds, "std"] if v <= cut else 0.0)
                    clipped.append(v > cut)
            if not xs:
                continue
            xs, ys, clipped = np.array(xs), np.array(ys), np.array(clipped)
            c = colors[mi % len(colors)]
            ax.errorbar(xs[~clipped], ys[~clipped], yerr=np.array(es)[~clipped], fmt="o", color=c, capsize=2,
                        label=m if p == 0 else None)
            if clipped.any():
                ax.scatter(xs[clipped], ys[clipped], marker="^", color=c, zorder=3,
                           label=(m if p == 0 and (~clipped).sum() == 0 else None))
        ax.axhline(0, color="k", lw=0.8)
        ax.axhline(cut, color="grey", ls="--", lw=0.8)
        ax.set_xticks(range(len(datasets)))
        ax.set_xticklabels(datasets, rotation=30, fontsize=8)
        ax.set_title(metric, fontsize=10)
        ax.set_ylabel(f"log2(error / {reference})", fontsize=8)
    for j in range(len(metrics), nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper center", ncol=min(6, len(labels)), fontsize=9,
                   bbox_to_anchor=(0.5, 1.02))
    fig.suptitle(f"ε = {epsilon:g}; below 0 = better than {reference}; ▲ = above {cut:g} (cut)", y=1.07,
                 fontsize=10)
    fig.tight_layout()
    return fig


def write_summary(config: BenchConfig) -> list[Path]:
    """Write ``summary.md``, ``summary.csv`` and ``log2ratio_eps{E}.png`` into the output folder.

    The figure needs matplotlib and finished runs of the reference method (``reference:`` in the
    config, else the first method); ``summary.md`` says why when it is not drawn.
    """
    df = collect(config)
    out = config.output
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    table = summary_table(df)
    ref = config.reference or (config.methods[0].name if config.methods else None)
    have_ref = not df.empty and ref in set(df["method"])
    have_mpl = importlib.util.find_spec("matplotlib") is not None
    md = [f"# Benchmark summary: {config.path.name}\n\n",
          f"{len(df)} finished runs of {len(config.cells())} cells; mean ± std over seeds "
          "(sample std). Lower is better except mean_f1. ε '–' = the real training data (no privacy). "
          "downstream = gradient boosting's 0-1 error (or MSE) trained on synthetic, tested on real test.\n"]
    if table.empty:
        md.append("\nNo finished runs yet.\n")
    else:
        md.append("\n" + markdown(table))
    if not have_mpl:
        md.append("\nNo figure: matplotlib is not installed.\n")
    elif not have_ref:
        md.append(f"\nNo figure: the reference method {ref!r} has no finished runs yet.\n")
    text = "".join(md)
    _atomic(out / "summary.md", lambda tmp: Path(tmp).write_text(text))
    write_table(table, out / "summary.csv")
    paths += [out / "summary.md", out / "summary.csv"]
    if have_mpl and have_ref:
        import matplotlib.pyplot as plt

        for eps in sorted(df["epsilon"].dropna().unique()):
            fig = plot_log2_ratios(df, ref, float(eps), config.figure_metrics or FIGURE_METRICS)
            p = out / f"log2ratio_eps{float(eps):g}.png"
            fig.savefig(p, dpi=110, bbox_inches="tight")
            plt.close(fig)
            paths.append(p)
    return paths
