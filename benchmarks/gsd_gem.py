"""Private-GSD and GEM vs MST on adult (issue #19): mean 2-way TV and fit time.

Bundled adult (48 842 rows, 14 columns), ε = 1, δ = 1e-9, add/remove neighbours. Metric: mean over
all 91 2-way marginals of the total-variation distance between the normalised real and synthetic
marginals, on ``sample_codes()`` (N̂ rows). Each finished run is appended to a JSONL file with the
machine's load average before and after (timings on a shared machine are not comparisons).

Run:  nice -n 10 .venv/bin/python benchmarks/gsd_gem.py [--methods gsd gem mst] [--seeds 0]
          [--params '{"gem": {"steps": 50}}'] [--tag default] [--summary]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "gsd_gem.jsonl"


def mean_tv(real, codes) -> float:
    from privmarg import Dataset

    syn = Dataset(codes, real.domain)
    return float(np.mean([0.5 * np.abs(syn.project(c) / len(syn) - real.project(c) / len(real)).sum()
                          for c in itertools.combinations(real.domain.attrs, 2)]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--methods", nargs="+", default=["gsd", "gem", "mst"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--params", default="{}", help='per-method preset parameters as JSON, {"gem": {...}}')
    ap.add_argument("--tag", default="default")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    if args.summary:
        for line in out.read_text().splitlines():
            r = json.loads(line)
            print(f"{r['tag']:>12} {r['method']:>5} seed {r['seed']}: TV {r['tv2']:.4f}  fit {r['fit_s']:.0f} s  "
                  f"load {r['load_before']:.1f}->{r['load_after']:.1f}  {r.get('info', '')}")
        return

    from privmarg import datasets, registry
    from privmarg.synth import as_dataset

    ex = datasets.load("adult")
    data = as_dataset(ex[0], ex[1])
    params = json.loads(args.params)
    out.parent.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        for method in args.methods:
            load0 = os.getloadavg()[0]
            t0 = time.perf_counter()
            mech = registry.make_preset(method, args.epsilon, 1e-9, seed=seed, **params.get(method, {})).fit(data)
            fit_s = time.perf_counter() - t0
            codes = mech.sample_codes()
            info = getattr(mech.model_, "fit_info", None)
            rec = {"tag": args.tag, "method": method, "seed": seed, "epsilon": args.epsilon,
                   "params": params.get(method, {}), "tv2": mean_tv(data, codes), "fit_s": fit_s,
                   "rows": int(len(codes)), "load_before": load0, "load_after": os.getloadavg()[0],
                   "rounds": len(mech.log_), "info": {k: v for k, v in (info or {}).items()
                                                      if isinstance(v, (int, float, str))},
                   "machine": platform.node(), "cpus": os.cpu_count()}
            with out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
