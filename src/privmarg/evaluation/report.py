"""Evaluation report: every metric of a synthetic table, as a dict (JSON) and a self-contained HTML page.

:func:`evaluate` computes the metrics; :func:`render_html` draws the plots (real vs synthetic 1-way
distributions, the worst 2-way marginals, correlation heatmaps side by side, error per metric) and
embeds them as base64 PNG, so the page is one file with no external resources.
"""

from __future__ import annotations

import base64
import html
import io
import math
import time
from collections.abc import Sequence

import numpy as np

from ..data import Dataset
from ..privacy import rho_by_phase
from ..core import all_kway
from .metrics import (
    conditional_query_error,
    counting_query_error,
    covariance_error,
    range_query_error,
    sw1_2way,
    thresholding_query_error,
    tv_per_marginal,
    workload_error,
)
from .verdicts import correlations, verdicts

#: scalar metrics shown in the "error per metric" plot, with a one-line meaning each
METRIC_INFO = {
    "tv_1way": "mean total variation of 1-way marginals, in [0, 1]",
    "tv_2way": "mean total variation of 2-way marginals, in [0, 1] (PrivPGD Eq. 11)",
    "l1_2way": "mean L1 of normalised 2-way marginals (= 2·tv_2way; PrivPGD reference code)",
    "sw1_2way": "mean sliced W1 of embedded 2-way marginals (PrivPGD Eq. 10)",
    "workload_error_3way": "mean L1 of normalised 3-way marginals, in [0, 2] (AIM workload error)",
    "covariance_error": "relative Frobenius error of embedded covariances (PrivPGD)",
    "counting_query_error": "relative mean error, 200 3-sparse interval counting queries",
    "thresholding_query_error": "relative mean error, 200 3-sparse linear threshold queries",
    "range_query_error": "mean |error| of 1000 3-way range/point queries, fraction of rows (Chen et al.)",
    "conditional_query_error": "weighted TV of conditional distributions over key groups, in [0, 1]",
}

ALL_METRICS = tuple(METRIC_INFO) + ("ml_efficacy",)


def _key(t: Sequence[str]) -> str:
    return "|".join(t)


def evaluate(real: Dataset, synthetic: Dataset, *, test: Dataset | None = None, target: str | None = None,
             metrics: Sequence[str] | None = None, seed: int = 0, numeric: Sequence[str] = (),
             ml_models: Sequence[str] | None = None, ml_baseline: bool = True, query_data: str = "real",
             worst: int = 6, ml_train: Dataset | None = None, ml_task: str = "auto",
             baseline: bool = False, findings: bool = True) -> dict:
    """All metrics of ``synthetic`` against ``real`` as a JSON-ready dict.

    Top level: one float per metric in :data:`METRIC_INFO` (those asked for in ``metrics``; default
    all), ``ml_efficacy`` when ``test`` and ``target`` are given (see :func:`ml.ml_efficacy`; with
    ``ml_baseline`` also trained on ``real``), plus details: ``tv_per_column``, ``worst_2way`` (the
    ``worst`` 2-way marginals by TV), ``rows_real``/``rows_synthetic`` and ``metric_seconds``.
    The benchmark-paper metrics (``range_query_error``, ``conditional_query_error``) are computed
    against ``test`` when ``query_data="test"`` and a test split is given (as Chen et al. do), else
    against ``real``; every other metric compares with ``real``. ``numeric`` lists the attributes that get
    range (not point) queries. ``ml_train`` replaces ``synthetic`` as the ML training table (e.g. a
    subsample, for speed); ``ml_task`` is ``auto``, ``classification`` or ``regression``.
    ``baseline``: also score :func:`independence_baseline` of ``real`` on the same metrics (no ML),
    under ``baseline``: a synthetic table should beat it on the dependence metrics. ``findings``:
    plain-words ``verdicts`` (:mod:`privmarg.evaluation.verdicts`).
    """
    wanted = set(ALL_METRICS if metrics is None else metrics)
    unknown = wanted - set(ALL_METRICS)
    if unknown:
        raise ValueError(f"unknown metric(s) {sorted(unknown)}: choose from {', '.join(ALL_METRICS)}")
    dom = real.domain
    out: dict = {"rows_real": len(real), "rows_synthetic": len(synthetic), "columns": list(dom.attrs)}
    secs: dict[str, float] = {}

    def timed(name, fn):
        t0 = time.perf_counter()
        val = fn()
        secs[name] = time.perf_counter() - t0
        return val

    tv1 = timed("tv_1way", lambda: tv_per_marginal(real, synthetic, 1))
    out["tv_per_column"] = {k[0]: v for k, v in tv1.items()}
    if "tv_1way" in wanted:
        out["tv_1way"] = float(np.mean(list(tv1.values())))
    if len(dom) >= 2 and wanted & {"tv_2way", "l1_2way"}:
        tv2 = timed("tv_2way", lambda: tv_per_marginal(real, synthetic, 2))
        mean2 = float(np.mean(list(tv2.values())))
        if "tv_2way" in wanted:
            out["tv_2way"] = mean2
        if "l1_2way" in wanted:
            out["l1_2way"] = 2.0 * mean2
        top = sorted(tv2.items(), key=lambda kv: -kv[1])[:worst]
        out["worst_2way"] = [{"attrs": list(k), "tv": v} for k, v in top]
    if "sw1_2way" in wanted:
        out["sw1_2way"] = timed("sw1_2way", lambda: sw1_2way(real, synthetic, seed=seed))
    if "workload_error_3way" in wanted:
        out["workload_error_3way"] = timed("workload_error_3way",
                                           lambda: workload_error(real, synthetic, all_kway(dom, 3)))
    if "covariance_error" in wanted:
        out["covariance_error"] = timed("covariance_error", lambda: covariance_error(real, synthetic))
    if "counting_query_error" in wanted:
        out["counting_query_error"] = timed("counting_query_error",
                                            lambda: counting_query_error(real, synthetic, seed=seed))
    if "thresholding_query_error" in wanted:
        out["thresholding_query_error"] = timed("thresholding_query_error",
                                                lambda: thresholding_query_error(real, synthetic, seed=seed))
    ref = test if (query_data == "test" and test is not None) else real
    if "range_query_error" in wanted:
        out["range_query_error"] = timed("range_query_error",
                                         lambda: range_query_error(ref, synthetic, seed=seed, numeric=numeric))
    if "conditional_query_error" in wanted and len(dom) >= 2:
        out["conditional_query_error"] = timed("conditional_query_error",
                                               lambda: conditional_query_error(ref, synthetic))
    if "ml_efficacy" in wanted and test is not None and target is not None:
        from .ml import DEFAULT_MODELS, ml_efficacy

        out["ml_efficacy"] = timed("ml_efficacy", lambda: ml_efficacy(
            synthetic if ml_train is None else ml_train, test, target, models=ml_models or DEFAULT_MODELS,
            task=ml_task, seed=seed, real_train=real if ml_baseline else None))
    if baseline:
        base = evaluate(real, independence_baseline(real, seed=seed), metrics=[m for m in wanted if m in METRIC_INFO],
                        seed=seed, numeric=numeric, worst=0, findings=False)
        out["baseline"] = {"name": BASELINE_NAME, **{m: base[m] for m in METRIC_INFO if m in base}}
    if findings:
        out["verdicts"] = verdicts(out, real, synthetic)
    out["metric_seconds"] = secs
    return out


BASELINE_NAME = "independent columns (each real column shuffled on its own)"


def independence_baseline(real: Dataset, seed: int = 0) -> Dataset:
    """A non-private reference table: every column of ``real`` permuted independently, so each
    column's distribution is exact and every dependence between columns is gone. Not a release."""
    rng = np.random.default_rng(seed)
    codes = real.codes.copy()
    for j in range(codes.shape[1]):
        codes[:, j] = codes[rng.permutation(len(codes)), j]
    return Dataset(codes, real.domain, validate=False)


def budget_by_phase(privacy: dict) -> dict[str, float]:
    """ρ by phase (preprocessing, selection, measurement) of a privacy report
    (``privacy_report()`` or a synth report's ``"privacy"``); see :func:`privmarg.privacy.rho_by_phase`."""
    if "rho_by_phase" in privacy:
        return dict(privacy["rho_by_phase"])
    return rho_by_phase(privacy.get("ledger") or [], int(privacy.get("preprocessing_charges", 0)))


# ------------------------------------------------------------------------------------------
# plots
# ------------------------------------------------------------------------------------------
def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


REAL_C, SYN_C = "#1f77b4", "#ff7f0e"


def _ticks(ax, axis: str, labels: list[str] | None, k: int, limit: int = 24) -> None:
    """Category names / bin ranges on an axis with at most ``limit`` ticks (long names shortened)."""
    if labels is None or len(labels) != k:
        return
    step = max(1, math.ceil(k / limit))
    pos = list(range(0, k, step))
    names = [labels[i] if len(labels[i]) <= 18 else labels[i][:17] + "…" for i in pos]
    if axis == "x":
        ax.set_xticks(pos)
        ax.set_xticklabels(names, rotation=60, ha="right", fontsize=6)
    else:
        ax.set_yticks(pos)
        ax.set_yticklabels(names, fontsize=6)


QUANTILE_BINS = 20  # numeric columns with raw values are plotted on this many real-data quantile bins


def quantile_shares(real: np.ndarray, synthetic: np.ndarray, bins: int = QUANTILE_BINS
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(edges, real shares, synthetic shares) of a numeric column on the real values' quantiles
    (missing values left out; equal quantiles merged, so a point mass is one bin): a skewed column
    shows its shape instead of one or two bars of the public bounds' grid."""
    r = real[np.isfinite(real)]
    s = synthetic[np.isfinite(synthetic)]
    if r.size == 0:
        return np.array([0.0, 1.0]), np.zeros(1), np.zeros(1)
    edges = np.unique(np.quantile(r, np.linspace(0, 1, bins + 1)))
    if edges.size < 2:
        edges = np.array([edges[0], edges[0] + 1.0])
    inner = edges[1:-1]
    p = np.bincount(np.searchsorted(inner, r, side="right"), minlength=edges.size - 1) / max(r.size, 1)
    q = np.bincount(np.searchsorted(inner, np.clip(s, edges[0], edges[-1]), side="right"),
                    minlength=edges.size - 1) / max(s.size, 1)
    return edges, p, q


def plot_1way(real: Dataset, synthetic: Dataset, tv: dict[str, float], ncols: int = 4,
              labels: dict[str, list[str]] | None = None, measured: set | None = None,
              values: dict[str, tuple[np.ndarray, np.ndarray]] | None = None):
    """Real vs synthetic 1-way distributions, one panel per column; ``labels`` names the codes,
    ``measured`` (column names) marks the columns a released measurement covers; ``values``: raw
    (real, synthetic) values of numeric columns, plotted on the real values' quantile bins
    (:func:`quantile_shares`) instead of the codes."""
    plt = _plt()
    dom = real.domain
    d = len(dom)
    nrows = math.ceil(d / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 2.6 * nrows), squeeze=False)
    for i, a in enumerate(dom.attrs):
        ax = axes[i // ncols][i % ncols]
        mark = "" if measured is None else ("  measured" if a in measured else "  not measured")
        if values and a in values:
            edges, p, q = quantile_shares(*values[a])
            x = np.arange(len(p))
            ax.bar(x - 0.2, p, 0.4, color=REAL_C, label="real")
            ax.bar(x + 0.2, q, 0.4, color=SYN_C, label="synthetic")
            ax.set_title(f"{a}  (TV {tv.get(a, float('nan')):.3f}){mark}\non the real values' quantiles", fontsize=8)
            step = max(1, len(x) // 5)
            ax.set_xticks(x[::step])
            ax.set_xticklabels([f"{e:.3g}" for e in edges[:-1][::step]], fontsize=7, rotation=30)
            ax.tick_params(labelsize=7)
            ax.set_ylabel("share of rows", fontsize=7)
            if i == 0:
                ax.legend(fontsize=7)
            continue
        k = dom.shape[i]
        p = np.bincount(real.codes[:, i], minlength=k) / len(real)
        q = np.bincount(synthetic.codes[:, i], minlength=k) / len(synthetic)
        x = np.arange(k)
        if k <= 40:
            ax.bar(x - 0.2, p, 0.4, color=REAL_C, label="real")
            ax.bar(x + 0.2, q, 0.4, color=SYN_C, label="synthetic")
        else:
            ax.step(x, p, where="mid", color=REAL_C, label="real")
            ax.step(x, q, where="mid", color=SYN_C, label="synthetic", alpha=0.8)
        ax.set_title(f"{a}  (TV {tv.get(a, float('nan')):.3f}){mark}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.set_ylabel("share of rows", fontsize=7)
        _ticks(ax, "x", (labels or {}).get(a), k)
        if i == 0:
            ax.legend(fontsize=7)
    for j in range(d, nrows * ncols):
        axes[j // ncols][j % ncols].axis("off")
    fig.subplots_adjust(hspace=0.9 if labels else 0.45, wspace=0.3)
    return fig


def plot_worst_2way(real: Dataset, synthetic: Dataset, worst: list[dict],
                    labels: dict[str, list[str]] | None = None, measured: Sequence[Sequence[str]] | None = None):
    """The 2-way marginals with the largest TV: real | synthetic | synthetic − real, one row each;
    ``labels`` names the codes on the axes, ``measured`` (cliques) says whether the pair was measured."""
    plt = _plt()
    from matplotlib.colors import PowerNorm

    dom = real.domain
    fig, axes = plt.subplots(len(worst), 3, figsize=(12, 3.2 * len(worst)), squeeze=False)
    for r, item in enumerate(worst):
        a, b = item["attrs"]
        i, j = dom.attrs.index(a), dom.attrs.index(b)
        ki, kj = dom.shape[i], dom.shape[j]
        p = np.bincount(real.codes[:, i] * kj + real.codes[:, j], minlength=ki * kj).reshape(ki, kj) / len(real)
        q = np.bincount(synthetic.codes[:, i] * kj + synthetic.codes[:, j],
                        minlength=ki * kj).reshape(ki, kj) / len(synthetic)
        vmax = max(p.max(), q.max()) or 1.0
        lim = np.abs(q - p).max() or 1.0
        norm = PowerNorm(0.5, vmin=0, vmax=vmax)  # square-root scale: small cells stay visible
        for c, (mat, title, kw) in enumerate([
            (p, "real (√ scale)", dict(cmap="viridis", norm=norm)),
            (q, "synthetic (√ scale)", dict(cmap="viridis", norm=norm)),
            (q - p, "synthetic − real", dict(cmap="RdBu_r", vmin=-lim, vmax=lim)),
        ]):
            ax = axes[r][c]
            im = ax.imshow(mat, aspect="auto", interpolation="nearest", origin="lower", **kw)
            ax.set_xlabel(b, fontsize=8)
            ax.set_ylabel(a, fontsize=8)
            note = ""
            if c == 0:
                note = f"   (TV {item['tv']:.3f})"
                if measured is not None:
                    note += "  measured" if _covered((a, b), measured) else "  not measured: the model's inference"
            ax.set_title(f"{title}{note}", fontsize=9)
            ax.tick_params(labelsize=7)
            _ticks(ax, "x", (labels or {}).get(b), kj)
            if c == 0:
                _ticks(ax, "y", (labels or {}).get(a), ki)
            else:  # the rows' labels stand on the first panel only, or they run into the colour bars
                ax.set_yticks([])
                ax.set_ylabel("")
            if c == 1:  # one colour bar for the two distributions, one for the difference
                fig.colorbar(im, ax=[axes[r][0], axes[r][1]], fraction=0.03, pad=0.02)
            elif c == 2:
                fig.colorbar(im, ax=ax, fraction=0.046)
    fig.subplots_adjust(hspace=0.8 if labels else 0.45, wspace=0.5)
    return fig


def _covered(attrs: Sequence[str], measured: Sequence[Sequence[str]]) -> bool:
    s = set(attrs)
    return any(s <= set(m) for m in measured)


def plot_correlations(real: Dataset, synthetic: Dataset):
    """Pearson correlations of the embedded codes: real | synthetic | difference."""
    plt = _plt()
    dom = real.domain
    cr, cs = correlations(real), correlations(synthetic)
    d = len(dom)
    size = max(4.0, 0.35 * d)
    fig, axes = plt.subplots(1, 3, figsize=(3 * size + 2, size))
    lim = np.abs(cs - cr).max() or 1.0
    for ax, mat, title, kw in [
        (axes[0], cr, "real", dict(vmin=-1, vmax=1)),
        (axes[1], cs, "synthetic", dict(vmin=-1, vmax=1)),
        (axes[2], cs - cr, "synthetic − real", dict(vmin=-lim, vmax=lim)),
    ]:
        im = ax.imshow(mat, cmap="RdBu_r", interpolation="nearest", **kw)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(d))
        ax.set_yticks(range(d))
        ax.set_xticklabels(dom.attrs, rotation=90, fontsize=7)
        ax.set_yticklabels(dom.attrs, fontsize=7)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.subplots_adjust(wspace=0.45)
    return fig


def plot_errors(result: dict):
    """One bar per scalar metric (log scale), value printed next to it; the independence baseline's
    value beside it in grey when the result has one."""
    plt = _plt()
    names = [m for m in METRIC_INFO if isinstance(result.get(m), (int, float)) and math.isfinite(result[m])]
    vals = [result[m] for m in names]
    base = result.get("baseline") or {}
    bvals = [base.get(m) for m in names]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(names) + 1))
    pos = np.arange(len(names))[::-1]
    floor = min([v for v in vals + [b for b in bvals if isinstance(b, float)] if v > 0], default=1e-6) / 10
    h = 0.4 if base else 0.8
    ax.barh(pos + (h / 2 if base else 0), [max(v, floor) for v in vals], height=h, color="#4c72b0", label="synthetic")
    if base:
        ax.barh(pos - h / 2, [max(b, floor) if isinstance(b, float) else floor for b in bvals], height=h,
                color="#bbbbbb", label="independence baseline")
        ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=2, frameon=False)
    ax.set_xscale("log")
    ax.set_yticks(pos)
    ax.set_yticklabels(names, fontsize=9)
    for y, v in zip(pos, vals):
        ax.text(max(v, floor), y + (h / 2 if base else 0), f" {v:.3g}", va="center", fontsize=8)
    ax.set_xlabel("error (log scale; lower is better)")
    return fig


# ------------------------------------------------------------------------------------------
# HTML
# ------------------------------------------------------------------------------------------
_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1250px;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
th{background:#f4f4f4}td.num{text-align:right;font-family:monospace}img{max-width:100%}
.note{color:#666;font-size:.85em}td.worse{color:#b00}
"""


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def check_error_bounds(real: Dataset, synthetic: Dataset, bounds: Sequence[dict]) -> dict:
    """Compare a run's released error bounds (``privmarg synth --report``'s ``error_bounds``) with
    the true L1 errors ‖M_r(real)/N − M_r(synthetic)/N̂‖₁: per marginal and in summary (share
    covered, median bound/true ratio for supported and unsupported marginals)."""
    n, m = len(real), len(synthetic)
    rows = []
    for b in bounds:
        attrs = tuple(b["attrs"])
        true = float(np.abs(real.project(attrs) / n - synthetic.project(attrs) / m).sum())
        rows.append({**b, "true_error": true, "covered": true <= b["l1_bound"]})
    out = {"marginals": rows, "covered_share": float(np.mean([r["covered"] for r in rows])) if rows else None}
    for flag, name in ((True, "supported"), (False, "unsupported")):
        sel = [r for r in rows if r["supported"] == flag]
        out[f"{name}_count"] = len(sel)
        out[f"{name}_median_ratio"] = (float(np.median([r["l1_bound"] / max(r["true_error"], 1e-12) for r in sel]))
                                       if sel else None)
    return out


def plot_error_bounds(check: dict):
    """Released bound against true error per marginal, with the diagonal."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 4.5))
    for flag, colour, name in ((True, "tab:blue", "supported"), (False, "tab:orange", "unsupported")):
        sel = [r for r in check["marginals"] if r["supported"] == flag]
        if sel:
            ax.scatter([r["true_error"] for r in sel], [r["l1_bound"] for r in sel], s=10, c=colour, label=name)
    lim = max([r["l1_bound"] for r in check["marginals"]] + [1e-3])
    ax.plot([0, lim], [0, lim], "k--", lw=1, label="bound = true error")
    ax.set_xlabel("true L1 error of the marginal")
    ax.set_ylabel("released 95% bound")
    ax.legend()
    fig.tight_layout()
    return fig


def _risk_html(risk: dict) -> str:
    """The provable risk panel in words: bounds for any attacker, from the ledger alone."""
    rows = [f"<tr><td>a membership test that wrongly accuses {float(f):.1%} of non-members</td>"
            f"<td class='num'>finds at most {float(v):.1%} of members</td></tr>"
            for f, v in risk["membership_tpr_at_fpr"].items()]
    rows.append("<tr><td>the best membership test, true minus false positives</td>"
                f"<td class='num'>at most {float(risk['max_membership_advantage']):.1%}</td></tr>")
    if risk.get("max_membership_auc") is not None:
        rows.append("<tr><td>the best membership test's AUC (0.5: a coin toss)</td>"
                    f"<td class='num'>at most {float(risk['max_membership_auc']):.3f}</td></tr>")
    rows += [f"<tr><td>a guess of someone's sensitive value right {float(b):.0%} of the time without the release</td>"
             f"<td class='num'>right at most {float(v):.1%} of the time with it</td></tr>"
             for b, v in risk["attribute_success_from_baseline"].items()]
    return ("<h2>What the privacy guarantee means for one person</h2><table>" + "".join(rows) + "</table>"
            "<p class='note'>Worst-case upper bounds over every attacker and whatever else they know, "
            "computed from the privacy ledger alone (no data); real attacks usually do far worse. "
            "See docs/privacy.md, \"What ε means for a person\".</p>")


def render_html(result: dict, real: Dataset, synthetic: Dataset, *, title: str = "Synthetic data report",
                sources: dict | None = None, labels: dict[str, list[str]] | None = None,
                measured: Sequence[Sequence[str]] | None = None, budget: dict[str, float] | None = None,
                notes: Sequence[str] = (), risk: dict | None = None,
                values: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> str:
    """A self-contained HTML page for a result of :func:`evaluate` (plots as base64 PNG).

    ``labels``: per column, a name per code (:func:`~privmarg.evaluation.labels.code_labels`) for
    the axes; ``measured``: the cliques the run measured (marked on the plots); ``budget``: ρ by
    phase (:func:`budget_by_phase`); ``notes``: lines shown under "Notes" (clipping, bounds);
    ``risk``: the run's risk panel (``privacy_report()["risk"]``, :mod:`privmarg.privacy.risk`);
    ``values``: raw (real, synthetic) values of numeric columns for their 1-way plots
    (:func:`plot_1way`). Without matplotlib (the core install) the page has every table and no plots.
    """
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    if sources:
        parts.append("<table>" + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
                                         for k, v in sources.items()) + "</table>")
    parts.append(f"<p>{result['rows_real']} real rows, {result['rows_synthetic']} synthetic rows, "
                 f"{len(result['columns'])} columns.</p>")
    parts += [_verdicts_html(result), _metrics_html(result), _rules_html(result.get("rule_violations")),
              _attack_html(result.get("membership_attack")), _sdmetrics_html(result.get("sdmetrics")),
              _budget_html(budget), _risk_html(risk) if risk else "", _notes_html(result, notes),
              _run_html(result.get("run")), _ml_html(result.get("ml_efficacy")),
              _bounds_html(result.get("error_bounds"))]
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:  # the core install: the page without its plots
        parts.append("<p class='note'>Plots need matplotlib: <code>pip install 'privmarg[plots]'</code>.</p>")
    else:
        parts.append(_plots_html(result, real, synthetic, labels, measured, values))
    parts.append("<p class='note'>Metric definitions: SPEC §2 and §11; lower is better for every error."
                 "</p></body></html>")
    return "".join(parts)


def _verdicts_html(result: dict) -> str:
    if result.get("verdicts"):
        return ("<h2>What this report sees</h2><ul class='verdicts'>"
                + "".join(f"<li>{html.escape(v)}</li>" for v in result["verdicts"]) + "</ul>")
    if "verdicts" in result:
        return ("<h2>What this report sees</h2><p>Nothing to flag: every dependence metric beats the "
                "independence baseline, no strong association is lost and every column is close.</p>")
    return ""


def _metrics_html(result: dict) -> str:
    base = result.get("baseline") or {}
    parts = ["<h2>Metrics</h2><table><tr><th>metric</th><th>synthetic</th>"
             + ("<th>independence baseline</th>" if base else "") + "<th>meaning</th></tr>"]
    for m, info in METRIC_INFO.items():
        if m in result:
            cell = ""
            if base:
                b = base.get(m)
                # 1-way metrics: the baseline is exact by construction, nothing to beat
                worse = m != "tv_1way" and isinstance(b, float) and isinstance(result[m], float) and result[m] > b
                cell = (f"<td class='num{' worse' if worse else ''}'>{_fmt(b)}"
                        + (" ◂ synthetic is worse" if worse else "") + "</td>")
            parts.append(f"<tr><td>{m}</td><td class='num'>{_fmt(result[m])}</td>{cell}<td>{html.escape(info)}</td></tr>")
    parts.append("</table>")
    if base:
        parts.append(f"<p class='note'>Independence baseline: {html.escape(base.get('name', BASELINE_NAME))}; "
                     "it keeps every column's distribution and breaks all dependence. It is not private: a "
                     "synthetic table should beat it on the 2- and 3-way metrics.</p>")
    return "".join(parts)


def _rules_html(rv: dict | None) -> str:
    if not rv:
        return ""
    return ("<h2>The schema's rules</h2><table><tr><th>rule</th><th>real records breaking it</th>"
            "<th>synthetic records breaking it</th></tr>"
            + "".join(f"<tr><td>{html.escape(r)}</td><td class='num'>{rv['real'].get(r, 0)}</td>"
                      f"<td class='num{' worse' if rv['synthetic'].get(r, 0) else ''}'>"
                      f"{rv['synthetic'].get(r, 0)}</td></tr>" for r in rv["rules"]) + "</table>")


def _attack_html(att: dict | None) -> str:
    if not att:
        return ""
    bound = att.get("provable_max_auc")
    return ("<h2>A membership attack (diagnostic)</h2><table>"
            f"<tr><td>AUC of the attack (0.5: a coin toss)</td><td class='num'>{_fmt(att['auc'])}</td></tr>"
            + (f"<tr><td>provable largest AUC of any attack (the run's ledger)</td>"
               f"<td class='num'>{_fmt(bound)}</td></tr>" if bound is not None else "")
            + "".join(f"<tr><td>members found when {float(f):.1%} of non-members are accused</td>"
                      f"<td class='num'>{float(v):.1%}</td></tr>" for f, v in att["tpr_at_fpr"].items())
            + f"</table><p class='note'>{html.escape(att['attack'])}: {att['members']} records of the "
            f"real table against {att['non_members']} held-out records. One attacker's result, not a "
            "guarantee: the provable bound holds for every attacker.</p>")


def _sdmetrics_html(sdm: dict | None) -> str:
    if not sdm:
        return ""
    return (f"<h2>sdmetrics QualityReport (sdmetrics {html.escape(str(sdm.get('version', '')))})</h2>"
            "<table><tr><th>property</th><th>score (0–1, higher is better)</th></tr>"
            f"<tr><td>overall</td><td class='num'>{_fmt(sdm['score'])}</td></tr>"
            + "".join(f"<tr><td>{html.escape(k)}</td><td class='num'>"
                      + (_fmt(v) if v is not None else "n/a: nothing to score (no pair strongly "
                         "associated in the real table)" if k == "Column Pair Trends" else "n/a")
                      + "</td></tr>" for k, v in sdm.get("properties", {}).items()) + "</table>")


def _budget_html(budget: dict[str, float] | None) -> str:
    if not budget:
        return ""
    tot = sum(budget.values()) or 1.0
    return ("<h2>Privacy budget by phase</h2><table><tr><th>phase</th><th>ρ (zCDP)</th><th>share</th></tr>"
            + "".join(f"<tr><td>{html.escape(k)}</td><td class='num'>{_fmt(float(v))}</td>"
                      f"<td class='num'>{100 * v / tot:.1f}%</td></tr>" for k, v in budget.items())
            + "</table>")


def _notes_html(result: dict, notes: Sequence[str]) -> str:
    all_notes = list(notes)
    for what, cols in (result.get("clipped_values") or {}).items():
        all_notes.append(f"{what} table: values outside the schema's bounds were clipped to them: "
                         + ", ".join(f"{c} ({n} values)" for c, n in cols.items()))
    if result.get("error_bounds_note"):
        all_notes.append(result["error_bounds_note"])
    if not all_notes:
        return ""
    return "<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in all_notes) + "</ul>"


def _run_html(run: dict | None) -> str:
    if not run:
        return ""
    return ("<h2>Run that produced the data</h2><table>" + "".join(
        f"<tr><th>{html.escape(k)}</th><td class='num'>{_fmt(v)}</td></tr>" for k, v in run.items()) + "</table>")


def _ml_html(ml: dict | None) -> str:
    if not ml:
        return ""
    parts = [f"<h2>ML efficacy (target {html.escape(ml['target'])}, {ml['task']})</h2>"]
    keys = ["error", "accuracy", "f1", "auc"] if ml["task"] == "classification" else ["mse", "r2"]
    parts.append("<table><tr><th>model</th><th>trained on</th>" + "".join(f"<th>{k}</th>" for k in keys)
                 + "<th>seconds</th></tr>")
    for name, res in ml["models"].items():
        for src, sc in res.items():
            parts.append(f"<tr><td>{name}</td><td>{src}</td>" + "".join(
                f"<td class='num'>{_fmt(sc.get(k))}</td>" for k in keys)
                + f"<td class='num'>{_fmt(sc.get('seconds'))}</td></tr>")
    parts.append("</table>")
    for name, note in ml.get("skipped", {}).items():
        parts.append(f"<p class='note'>{html.escape(name)}: {html.escape(note)}</p>")
    return "".join(parts)


def _bounds_html(eb: dict | None) -> str:
    if not eb:
        return ""
    return ("<h2>Released error bounds vs true error</h2><table>"
            f"<tr><th>marginals</th><td class='num'>{len(eb['marginals'])}</td></tr>"
            f"<tr><th>share with true error within the bound</th><td class='num'>{_fmt(eb['covered_share'])}</td></tr>"
            f"<tr><th>median bound / true (supported, {eb['supported_count']})</th>"
            f"<td class='num'>{_fmt(eb['supported_median_ratio'])}</td></tr>"
            f"<tr><th>median bound / true (unsupported, {eb['unsupported_count']})</th>"
            f"<td class='num'>{_fmt(eb['unsupported_median_ratio'])}</td></tr></table>")


def _plots_html(result: dict, real: Dataset, synthetic: Dataset, labels, measured, values=None) -> str:
    eb = result.get("error_bounds")
    figs = [("Error per metric", plot_errors(result))]
    if eb:
        figs.append(("Error bounds vs true errors", plot_error_bounds(eb)))
    covered = None if measured is None else {a for m in measured for a in m}
    figs.append(("Real vs synthetic 1-way distributions",
                 plot_1way(real, synthetic, result["tv_per_column"], labels=labels, measured=covered,
                           values=values)))
    if result.get("worst_2way"):
        figs.append(("Worst 2-way marginals (largest TV)",
                     plot_worst_2way(real, synthetic, result["worst_2way"], labels=labels, measured=measured)))
    if len(real.domain) >= 2:
        figs.append(("Correlations of the embedded codes", plot_correlations(real, synthetic)))
    return "".join(f"<h2>{html.escape(name)}</h2><img alt='{html.escape(name)}' "
                   f"src='data:image/png;base64,{_png(fig)}'>" for name, fig in figs)
