"""Weighted records drawn down to a release's size: systematic against balanced draws (session 29).

A public table of M rows released as N < M rows (JAM's blend at λ = 0, PMW^Pub) is drawn from its
distinct records weighted by frequency. The systematic draw gives each record ⌊N·p⌋ or ⌈N·p⌉ copies
at random; ``privmarg.generate.draws.balanced_draw`` then swaps copies to keep the drawn rows' 1-, 2-
and 3-way marginals close. Each draw is scored by the 3-way workload error against the private
table (what the must-show measures) and against the public table itself; seconds per draw.

Run:  OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/balanced_draw.py [--datasets gss adult-025]
          [--seeds 0 1 2] [--out benchmarks/results/balanced_draw.jsonl]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from jam import DATASETS, WORKLOAD, load

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["gss", "adult-025", "titanic"], choices=list(DATASETS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "balanced_draw.jsonl"))
    args = ap.parse_args()

    from privmarg import Dataset
    from privmarg.core import parse_workload
    from privmarg.evaluation import workload_error
    from privmarg.generate.draws import balanced_draw, systematic_draw
    from privmarg.generate.records import distinct_records

    with open(args.out, "a") as fh:
        for name in args.datasets:
            private, public = load(name)
            dom, n = private.domain, len(private)
            wl = parse_workload(WORKLOAD, dom)
            records = distinct_records(np.asarray(public.codes), dom, n)
            codes, w = records.codes_, records.weights
            draws = {"systematic": lambda rng: systematic_draw(w, n, rng),
                     "balanced": lambda rng: balanced_draw(codes, w, n, dom.shape, rng)}
            base = {"dataset": name, "rows_private": n, "rows_public": len(public), "distinct_public": len(codes),
                    "public_as_is": workload_error(private, public, wl)}
            for seed in args.seeds:
                for how, draw in draws.items():
                    t0 = time.perf_counter()
                    idx = draw(np.random.default_rng(seed))
                    secs = time.perf_counter() - t0
                    drawn = Dataset(codes[idx], dom)
                    rec = {**base, "draw": how, "seed": seed, "seconds": secs,
                           "error_vs_private": workload_error(private, drawn, wl),
                           "error_vs_public": workload_error(public, drawn, wl)}
                    print(json.dumps(rec), flush=True)
                    fh.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
