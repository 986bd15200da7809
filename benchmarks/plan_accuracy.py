"""Does ``privmarg plan`` predict AIM's error? (issue #41) Predicted vs measured mean workload error.

For each table, ε and seed the script makes the plan from public inputs only (the table's domain, or
its schema's public encoding; ε; δ = 1e-9; the all-3way workload; N = the table's true row count,
standing in for the curator's estimate), then fits AIM at its defaults (δ = 1e-9, add/remove
neighbours) and measures the mean L1 error (normalised, 0-2) of the synthetic table over the
workload's 3-way marginals, as ``benchmarks/wide.py`` does. The truth of a raw table is the real table
through the fitted encoder. Tables:

- ``adult`` and ``fire`` (integer-coded, from ../shared/data), ``salary`` (../shared/data/salary,
  private.csv.gz) and ``titanic`` (../shared/data/titanic, private.csv);
- ``hmeq`` and ``pums`` (raw, bundled, through their public schemas);
- ``caravan`` (benchmarks/data/caravan, 86 columns) and ``gss`` (benchmarks/data/gss, private.csv.gz);
- raw tables with documented schemas from benchmarks/data/raw (see benchmarks/raw_tables.py):
  ``diamonds``, ``bikeshare``, ``wage``, ``weather``, ``fair``, ``randhie``, ``default``.

One JSON line per fit in benchmarks/results/plan_accuracy.jsonl (the prediction, the measured
error, CPU seconds, privmarg version and commit). Run one at a time, pinned to one idle core::

    PYTHONPATH=src OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/plan_accuracy.py \\
        --tables adult hmeq pums --epsilons 0.1 1 10 --seeds 0 1 2

``--simulate`` also runs AIM on the plan's public surrogate (``AIM.plan(simulate=True)``, as slow as
a fit) and records its error. ``--summary`` prints the markdown table (mean over seeds of predicted
and measured, their ratio), with the predictions made again by the current code (``--stored``
keeps the recorded ones).
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "data"
OUT = HERE / "results" / "plan_accuracy.jsonl"
DELTA = 1e-9
WORKLOAD = "all-3way"
INTEGER = {"adult": SHARED / "adult/adult.csv", "fire": SHARED / "fire/private.csv.gz",
           "salary": SHARED / "salary/private.csv.gz", "titanic": SHARED / "titanic/private.csv",
           "gss": HERE / "data/gss/private.csv.gz", "caravan": HERE / "data/caravan/caravan.csv.gz"}
RAW = ("diamonds", "bikeshare", "wage", "weather", "fair", "randhie", "default")
# the commit whose code this process runs (read once: the tree may move on while a long run goes)
COMMIT = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True,
                        text=True).stdout.strip()
ORDER = ["adult", "fire", "salary", "titanic", "hmeq", "pums", "gss", "wage", "diamonds", "weather", "bikeshare",
         "caravan", "fair", "randhie", "default"]


def load(name: str):
    """(data to fit, domain or schema, public domain for the plan, rows)."""
    import privmarg
    from privmarg import Dataset, Domain

    if name in INTEGER:
        dom = Domain.from_json(INTEGER[name].parent / "domain.json")
        path = INTEGER[name]
        data = Dataset(pd.read_csv(path)[list(dom.attrs)].to_numpy(), dom)
        return data, dom, dom, len(data)
    if name in ("hmeq", "pums") or name in RAW:
        from privmarg.preprocess import TableEncoder
        from privmarg.schema import Schema

        if name in RAW:  # benchmarks/data/raw: a public table and the schema written from its documentation
            schema = Schema.load(HERE / "data" / "raw" / f"{name}.schema.json")
            raw = pd.read_csv(HERE / "data" / "raw" / f"{name}.csv.gz")
        else:
            raw, schema = privmarg.datasets.load(name)
        public = TableEncoder(schema.public_encoding()).fit().domain
        return raw[list(schema.names)], schema, public, len(raw)
    raise SystemExit(f"unknown table {name!r}")


def marginal_errors(truth, synthetic: np.ndarray, k: int = 3) -> dict:
    """Normalised L1 error of every k-way marginal (0-2), each marginal one bincount."""
    t = np.asarray(truth.codes, dtype=np.int64)
    s = np.asarray(synthetic, dtype=np.int64)
    shape, attrs = truth.domain.shape, truth.domain.attrs
    out = {}
    for c in itertools.combinations(range(len(shape)), k):
        sz = [shape[i] for i in c]
        n = int(np.prod(sz))
        a = np.bincount(np.ravel_multi_index(t[:, c].T, sz), minlength=n) / len(t)
        b = np.bincount(np.ravel_multi_index(s[:, c].T, sz), minlength=n) / max(len(s), 1)
        out[tuple(attrs[i] for i in c)] = float(np.abs(a - b).sum())
    return out


def predict(dom, epsilon: float, rows: int, simulate: bool = False):
    """The plan from public inputs: the domain, or the schema (its encoding at this budget), ε, N."""
    import privmarg

    return privmarg.AIM(epsilon, DELTA, workload=WORKLOAD).plan(dom, rows, simulate=simulate)


def fit_one(table: str, epsilon: float, seed: int, loaded, plan, times: dict, details: Path | None) -> dict:
    import privmarg
    from privmarg import Dataset

    data, dom, public, rows = loaded
    predicted, planned = plan.mean_error, plan.rounds
    c0 = time.process_time()
    mech = privmarg.AIM(epsilon, DELTA, seed=seed).fit(data, dom)
    fit_s = time.process_time() - c0
    truth = data if mech.encoder_ is None else mech.encoder_.encode(data)
    codes = np.asarray(mech.sample_codes())
    errs = marginal_errors(truth if isinstance(truth, Dataset) else Dataset(truth, mech.domain_), codes)
    measured = float(np.mean(list(errs.values())))
    rec = {"table": table, "epsilon": epsilon, "delta": DELTA, "seed": seed, "workload": WORKLOAD, "rows": rows,
           "columns": len(mech.domain_), "predicted": predicted, "measured": measured,
           "ratio": predicted / measured, "rounds": int(mech.rounds_), "planned_rounds": planned,
           "simulated": plan.simulated_error, "planned_shape": list(plan.domain.shape),
           **times, "fit_cpu_seconds": fit_s, "privmarg": privmarg.__version__, "commit": COMMIT}
    if details is not None:  # per-marginal errors and the rounds (for studying the model; not committed)
        with open(details, "a") as fh:
            fh.write(json.dumps({**rec, "marginals": {",".join(k): v for k, v in errs.items()},
                                 "log": [{"sel": r["selected"], "sigma": r["sigma"]} for r in mech.log_],
                                 "shape": list(mech.domain_.shape), "one_way_sigma": [float(m.sigma) for m in mech.measurements_ if len(m.attrs) == 1],
                                 "measured_cliques": [list(m.attrs) for m in mech.measurements_]}) + "\n")
    return rec


def summary(path: Path, stored: bool) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cells: dict[tuple, list] = {}
    cache: dict = {}
    for r in rows:
        cells.setdefault((r["table"], r["epsilon"]), []).append(r)
    print("| table | rows | ε | seeds | predicted | measured (mean ± sd) | predicted / measured | simulated / measured |")
    print("|---|---|---|---|---|---|---|---|")
    for (table, eps), rs in sorted(cells.items(), key=lambda kv: (ORDER.index(kv[0][0]), kv[0][1])):
        meas = np.array([r["measured"] for r in rs])
        if stored:
            pred = float(np.mean([r["predicted"] for r in rs]))
        else:
            if table not in cache:
                cache[table] = load(table)
            pred = predict(cache[table][1], eps, cache[table][3]).mean_error
        sims = [r["simulated"] for r in rs if r.get("simulated") is not None]
        sim = f"{np.mean(sims) / meas.mean():.2f}" if sims else "-"
        print(f"| {table} | {rs[0]['rows']:,} | {eps:g} | {len(rs)} | {pred:.3f} | {meas.mean():.3f} ± {meas.std():.3f} | "
              f"{pred / meas.mean():.2f} | {sim} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", nargs="+", default=["adult", "fire", "hmeq", "pums", "salary", "titanic"])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--details", default=None, help="also write per-marginal errors and rounds here")
    ap.add_argument("--simulate", action="store_true", help="also run AIM on the plan's public surrogate")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--stored", action="store_true", help="summary: the recorded predictions")
    args = ap.parse_args()
    if args.summary:
        summary(Path(args.out), args.stored)
        return
    for table in args.tables:
        loaded = load(table)
        for eps in args.epsilons:
            t0 = time.process_time()
            plan = predict(loaded[1], eps, loaded[3])  # once per table and ε: deterministic
            t1 = time.process_time()
            if args.simulate:
                plan = predict(loaded[1], eps, loaded[3], simulate=True)
            times = {"plan_cpu_seconds": t1 - t0, "simulate_cpu_seconds": time.process_time() - t1 if args.simulate else None}
            for seed in args.seeds:
                rec = fit_one(table, eps, seed, loaded, plan, times, Path(args.details) if args.details else None)
                with open(args.out, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                print(f"{table} ε={eps:g} seed {seed}: predicted {rec['predicted']:.3f} measured {rec['measured']:.3f} "
                      f"ratio {rec['ratio']:.2f} simulated {rec['simulated']} ({rec['fit_cpu_seconds']:.0f} s)",
                      flush=True)


if __name__ == "__main__":
    main()
