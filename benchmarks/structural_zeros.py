"""AIM with and without structural zeros on the fire data (the AIM paper's Table 3 setting).

Which zeros, and how they were chosen without the private data: the shipped data are integer codes
without labels, so expert knowledge of the labels (ZIP code vs city, station vs city) cannot be
applied directly. We use the public split (`public.csv`, 870 records) instead: for every ordered
pair of attributes we look for a functional dependency child → parent that holds there for at least
90% of the child values seen 5 or more times (three pairs qualify: Priority → Final Priority,
Station Area → City, Neighbourhood → City, all plausible from the organisation of SF fire calls).
For each such child value with a single public parent, every other parent value is declared
impossible. Child values that are rare or ambiguous in the public split get no constraint. The
script also reports how many *real* records fall into a declared zero (a check of the public
mapping, computed for this report only and never used by the mechanism).

Run:  .venv/bin/python benchmarks/structural_zeros.py [--epsilons 0.1 1 10] [--seeds 0]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _data import folder  # the bundled datasets, or ../shared/data for fire and salary

ROOT = Path(__file__).resolve().parents[1]
FIRE = folder("fire")  # not bundled: ../shared/data/fire
PAIRS = [  # (child, parent): the child determines the parent in the public split
    ("Priority", "Final Priority"),
    ("Station Area", "City"),
    ("Neighborhooods - Analysis Boundaries", "City"),
]
MIN_SUPPORT = 5


def public_zeros(domain, public: pd.DataFrame):
    from privmarg.core import StructuralZero

    zeros = []
    for child, parent in PAIRS:
        g = public.groupby(child)[parent].agg(["unique", "size"])
        mask = np.zeros(domain.sizes((child, parent)), dtype=bool)
        for c, row in g.iterrows():
            if row["size"] >= MIN_SUPPORT and len(row["unique"]) == 1:
                mask[c, :] = True
                mask[c, row["unique"][0]] = False
        if mask.any():
            zeros.append(StructuralZero((child, parent), mask))
    return zeros


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--workload", default="all-2way")
    ap.add_argument("--max-model-size", type=float, default=80.0, help="AIM model capacity (MB)")
    ap.add_argument("--iters", type=int, default=250, help="AIM mirror-descent iterations per round")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "structural_zeros.jsonl"))
    args = ap.parse_args()

    from privmarg import AIM, Dataset, Domain
    from privmarg.evaluation import workload_error
    from privmarg.core import parse_workload

    dom = Domain.from_json(FIRE / "domain.json")
    data = Dataset.read(FIRE / "private.csv.gz", dom)
    public = pd.read_csv(FIRE / "public.csv")
    zeros = public_zeros(dom, public)
    cells = sum(z.cells for z in zeros)
    real_viol = sum(z.violations(data.codes, dom) for z in zeros)
    print(f"{len(zeros)} attribute pairs, {cells} structural-zero cells; real records in a declared zero: "
          f"{real_viol} of {len(data)}", flush=True)
    wl = parse_workload(args.workload, dom)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["epsilon"], r["seed"], r["zeros"]) for r in map(json.loads, out.read_text().splitlines())} \
        if out.exists() else set()
    for eps in args.epsilons:
        for seed in args.seeds:
            for use in (False, True):
                if (eps, seed, use) in done:
                    continue
                t0 = time.perf_counter()
                mech = AIM(eps, 1e-9, workload=args.workload, seed=seed, max_model_size=args.max_model_size,
                           iters=args.iters).fit(data, zeros=zeros if use else None)
                codes = mech.sample_codes()
                rec = {"epsilon": eps, "seed": seed, "zeros": use, "workload": args.workload,
                       "max_model_size": args.max_model_size, "iters": args.iters,
                       "workload_error": workload_error(data, Dataset(codes, dom), wl),
                       "violations": int(sum(z.violations(codes, dom) for z in zeros)),
                       "rows": int(len(codes)), "seconds": time.perf_counter() - t0,
                       "zero_pairs": len(zeros), "zero_cells": cells, "real_records_in_zeros": real_viol}
                print(json.dumps(rec), flush=True)
                with open(out, "a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    df = pd.DataFrame(rows)
    g = df.groupby(["epsilon", "zeros"]).agg(err=("workload_error", "mean"), viol=("violations", "mean"),
                                             secs=("seconds", "mean")).unstack("zeros")
    print("| ε | AIM | AIM+SZ | ratio | violations AIM | violations AIM+SZ |")
    print("|---|---|---|---|---|---|")
    for eps, r in g.iterrows():
        print(f"| {eps:g} | {r[('err', False)]:.4f} | {r[('err', True)]:.4f} | "
              f"{r[('err', False)] / r[('err', True)]:.3f} | {r[('viol', False)]:.0f} | {r[('viol', True)]:.0f} |")


if __name__ == "__main__":
    main()
