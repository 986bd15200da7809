"""PMW^Pub on adult-025 at ε = 1 beside JAM's numbers (issue 19): all 3-way workload error.

Same data, workload, δ and neighbour relation as ``benchmarks/jam.py`` (adult-public-split private
+ public-025, all 3-way marginals, δ = 1e-9, replace-one); error = AIM's workload error. Appends one
JSON line per run to benchmarks/results/pmw_pub.jsonl.

Run:  nice -n 10 .venv/bin/python benchmarks/pmw_pub.py [--seeds 0] [--epsilon 1] [--public 025]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import pandas as pd

from _data import folder

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "pmw_pub.jsonl"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--public", default="025")
    ap.add_argument("--method", default="pmw-pub")
    ap.add_argument("--params", default="{}")
    args = ap.parse_args()
    from privmarg import Dataset, Domain, registry
    from privmarg.core import all_kway
    from privmarg.evaluation import workload_error

    base = folder("adult-public-split")
    dom = Domain.from_json(base / "domain.json")
    priv = Dataset.from_frame(pd.read_csv(base / "private.csv.gz"), dom)
    pub = Dataset.from_frame(pd.read_csv(base / f"public-{args.public}.csv.gz"), dom)
    workload = all_kway(dom, 3)
    for seed in args.seeds:
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        m = registry.make_preset(args.method, args.epsilon, 1e-9, seed=seed, neighbour="replace_one",
                                 **json.loads(args.params)).fit(priv, public=pub)
        fit_s = time.perf_counter() - t0
        err = workload_error(priv, Dataset(m.sample_codes(), dom), workload)
        rec = {"method": args.method, "public": args.public, "epsilon": args.epsilon, "seed": seed,
               "params": json.loads(args.params), "error_3way": err, "fit_s": fit_s, "rounds": len(m.log_),
               "load_before": load0, "load_after": os.getloadavg()[0]}
        OUT.parent.mkdir(parents=True, exist_ok=True)
        with OUT.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
