"""Exact conditional sampling vs rejection sampling at a ~1% condition (issue #17).

Fits one model on the bundled adult table (MST, ε = 1, seed 0, or AIM with ``--method aim``),
saves it and loads it back (timing both), then picks the condition whose model probability is
closest to 1%: a single value of one column, or failing that a pair of values of two columns. It
times drawing ``--rows`` rows that carry the condition

* conditionally: ``sample_codes(rows, conditions=...)``, the evidence clamped in the junction tree,
  one recalibration, then forward sampling (randomized rounding);
* by rejection: unconditioned batches of 100,000 rows, keeping the matching ones, until enough;

``--repeats`` times each (median and all runs reported, one process, no other work), checks that both
sets of rows carry the condition, and reports the mean L1 distance of each to the model's exact
conditional on the pair of columns most dependent on the condition (with the L1 expected of i.i.d. draws). Also times a partial table
of ``--rows`` rows whose given column varies (one clamped model per distinct value).

Run:  .venv/bin/python benchmarks/conditional_sampling.py [--method mst|aim] [--rows 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import time

import numpy as np
import pandas as pd

from privmarg import AIM, MST, datasets, load


def pick_condition(model, dom, target=0.01):
    best = None
    for a in dom.attrs:
        p = model.project([a]) / model.total
        for v, pv in enumerate(p):
            if pv > 0 and (best is None or abs(np.log(pv / target)) < abs(np.log(best[1] / target))):
                best = ({a: v}, float(pv))
    if abs(np.log(best[1] / target)) > np.log(1.5):
        small = [a for a in dom.attrs if dom[a] <= 16]
        for a, b in itertools.combinations(small, 2):
            p = model.project([a, b]).reshape(dom[a], dom[b]) / model.total
            for (i, j), pv in np.ndenumerate(p):
                if pv > 0 and abs(np.log(pv / target)) < abs(np.log(best[1] / target)):
                    best = ({a: i, b: j}, float(pv))
    return best


def rejection(model, rows, evidence, rng, dom, batch=100_000):
    cols = [(dom.attrs.index(a), v) for a, v in evidence.items()]
    kept, have, drawn = [], 0, 0
    while have < rows:
        s = model.sample(batch, rng)
        drawn += batch
        ok = np.ones(batch, dtype=bool)
        for j, v in cols:
            ok &= s[:, j] == v
        kept.append(s[ok])
        have += int(ok.sum())
    return np.concatenate(kept)[:rows], drawn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", default="mst", choices=["mst", "aim"])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    df, dom = datasets.load("adult")
    t0 = time.perf_counter()
    synth = (MST(1.0, 1e-9, seed=0) if args.method == "mst"
             else AIM(1.0, 1e-9, workload="all-2way", seed=0)).fit(df, dom)
    fit_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        synth.save(f"{tmp}/m")
        save_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        loaded = load(f"{tmp}/m")
        load_s = time.perf_counter() - t0
    model = loaded.model_
    evidence, prob = pick_condition(model, dom)
    cond_t, rej_t, drawn, conds, rejs = [], [], [], [], []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        c = loaded.sample_codes(args.rows, seed=r, conditions=evidence)
        cond_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        j, n = rejection(model, args.rows, evidence, np.random.default_rng(100 + r), dom)
        rej_t.append(time.perf_counter() - t0)
        drawn.append(n)
        conds.append(c)
        rejs.append(j)
        for a, v in evidence.items():
            assert (c[:, dom.attrs.index(a)] == v).all() and (j[:, dom.attrs.index(a)] == v).all()
    # accuracy on the pair of other columns whose conditional differs most from the unconditioned one
    cm = model.condition(evidence)
    others = [a for a in dom.attrs if a not in evidence and dom[a] <= 16]
    shift = {(a, b): np.abs(cm.project([a, b]) / cm.total - model.project([a, b]) / model.total).sum()
             for a, b in itertools.combinations(others, 2)}
    a, b = max(shift, key=shift.get)
    p = cm.project([a, b]) / cm.total

    def l1(rows):
        q = np.bincount(rows[:, dom.attrs.index(a)] * dom[b] + rows[:, dom.attrs.index(b)], minlength=p.size)
        return float(np.abs(q / len(rows) - p).sum())

    col = next(iter(evidence))
    given = pd.DataFrame({col: np.random.default_rng(0).integers(0, dom[col], args.rows)})
    t0 = time.perf_counter()
    loaded.sample_codes(seed=0, conditions=given)
    partial_s = time.perf_counter() - t0
    out = {
        "method": args.method, "fit_s": fit_s, "save_s": save_s, "load_s": load_s,
        "condition": {k: int(v) for k, v in evidence.items()}, "model_probability": prob, "rows": args.rows,
        "conditional_s": cond_t, "rejection_s": rej_t, "rejection_rows_drawn": drawn,
        "conditional_median_s": statistics.median(cond_t), "rejection_median_s": statistics.median(rej_t),
        "speedup": statistics.median(rej_t) / statistics.median(cond_t),
        "check_pair": [a, b], "l1_conditional_mean": statistics.mean(map(l1, conds)),
        "l1_rejection_mean": statistics.mean(map(l1, rejs)),
        "l1_expected_iid": float(np.sqrt(2 * p * (1 - p) / (np.pi * args.rows)).sum()),
        "partial_table": {"column": col, "distinct_values": int(given[col].nunique()), "seconds": partial_s},
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
