"""PrivSyn (DenseMarg + GUM) vs MST on adult (issue #19): mean 2-way TV and fit time.

Adult (bundled, 48,842 rows, 14 columns), ε = 1, δ = 1e-9, add/remove neighbours; error =
:func:`privmarg.evaluation.tv_kway` (k = 2: mean total variation over all 91 two-way marginals) of
``sample_codes()`` (N̂ rows). Methods: ``privsyn`` (the preset: DenseMarg + GUM, paper defaults),
``privsyn-pgm`` (the same selection fitted by Private-PGM), ``mst`` (the preset), and
``gaussian-2way-gum`` (every 2-way marginal measured with ρ_i ∝ n_i^{2/3}, fitted by GUM).

Each finished run is appended to a JSONL file (resumable: a (method, seed) already there is skipped),
with the machine's load average at the start, since timings taken on a shared machine are not
comparisons.

Run:  nice -n 10 .venv/bin/python benchmarks/privsyn.py [--seeds 0 1 2] [--methods privsyn mst] [--summary]
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from _data import seed_sweep_args  # the benchmarks folder (scripts run from it)

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "privsyn.jsonl"
METHODS = ["privsyn", "privsyn-pgm", "mst", "gaussian-2way-gum"]


def make(method: str, eps: float, seed: int):
    from privmarg import registry

    if method == "privsyn":
        return registry.make_preset("privsyn", eps, 1e-9, seed=seed)
    if method == "privsyn-pgm":
        return registry.make_preset("privsyn", eps, 1e-9, seed=seed, generator="pgm")
    if method == "mst":
        return registry.make_preset("mst", eps, 1e-9, seed=seed)
    if method == "gaussian-2way-gum":
        return registry.make_preset("gaussian", eps, 1e-9, seed=seed, workload="all-2way", generator="gum")
    raise SystemExit(f"unknown method {method!r}")


def main():
    args = seed_sweep_args(METHODS[:3], OUT)
    out = args.out
    if args.summary:
        return summarize(out)

    from privmarg import Dataset, datasets
    from privmarg.evaluation import tv_kway

    ex = datasets.load("adult")
    real = Dataset.from_frame(ex.data, ex.domain)
    done = set()
    if out.exists():
        done = {(r["method"], r["seed"], r["epsilon"]) for r in map(json.loads, out.read_text().splitlines())}
    for method in args.methods:
        for seed in args.seeds:
            if (method, seed, args.epsilon) in done:
                continue
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            mech = make(method, args.epsilon, seed).fit(real)
            fit_s = time.perf_counter() - t0
            syn = Dataset(mech.sample_codes(), real.domain)
            row = {"method": method, "seed": seed, "epsilon": args.epsilon, "tv2": tv_kway(real, syn, 2),
                   "fit_s": round(fit_s, 2), "load_avg_1min": round(load, 2), "cpus": os.cpu_count(),
                   "machine": platform.node(),
                   "marginals": [list(m.attrs) for m in mech.measurements_ if len(m.attrs) > 1]}
            print(json.dumps({k: v for k, v in row.items() if k != "marginals"}), flush=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
    summarize(out)


def summarize(out: Path) -> None:
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    print("| method | ε | mean 2-way TV (seeds) | fit s (load avg) |\n|---|---|---|---|")
    for method in dict.fromkeys(r["method"] for r in rows):
        for eps in sorted({r["epsilon"] for r in rows if r["method"] == method}):
            rs = [r for r in rows if r["method"] == method and r["epsilon"] == eps]
            tv = np.array([r["tv2"] for r in rs])
            print(f"| {method} | {eps:g} | {tv.mean():.4f} ± {tv.std():.4f} ({', '.join(str(r['seed']) for r in rs)}) "
                  f"| {np.mean([r['fit_s'] for r in rs]):.1f} ({np.mean([r['load_avg_1min'] for r in rs]):.1f}) |")


if __name__ == "__main__":
    main()
