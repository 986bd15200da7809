"""PrivMRF vs AIM vs MST on adult (issue #19): 3-way workload error, 2-way TV and fit time.

Bundled adult (``privmarg.datasets``), ε = 1, δ = 1e-9, add/remove neighbours, each preset at its
defaults (AIM: all 3-way workload). Errors on ``sample_codes()`` (the model's own N̂ rows):
``workload_error`` over all 3-way marginals (mean L1 distance of normalised marginals) and
``tv_kway(k=2)`` (mean total variation over all 2-way marginals). Time = wall seconds of fit +
sample, with the 1-minute load average at the start and end of each run (the machine is shared).

Each finished run is appended to a JSONL file (resumable: a (method, seed) already there is skipped).

Run:  nice -n 10 .venv/bin/python benchmarks/privmrf.py [--seeds 0 1 2] [--methods privmrf aim mst]
          [--summary]     (a method may also be a variant of VARIANTS, e.g. "privmrf[aim-final-fit]")
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
OUT = ROOT / "benchmarks" / "results" / "privmrf.jsonl"


def main():
    args = seed_sweep_args(["privmrf", "mst", "aim"], OUT)
    out = args.out
    if args.summary:
        return summarize(out)

    from privmarg import Dataset, datasets, registry
    from privmarg.core import all_kway
    from privmarg.evaluation import workload_error
    from privmarg.evaluation.metrics import tv_kway

    df, dom = datasets.load("adult")
    data = Dataset.from_frame(df, dom)
    wl = all_kway(dom, 3)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done.add((r["method"], r["epsilon"], r["seed"]))
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for seed in args.seeds:
        for method in args.methods:
            if (method, args.epsilon, seed) in done:
                continue
            load0 = os.getloadavg()[0]
            t0 = time.perf_counter()
            mech = make(registry, method, args.epsilon, seed).fit(data)
            codes = mech.sample_codes()
            secs = time.perf_counter() - t0
            synth = Dataset(codes, dom)
            rec = {"method": method, "epsilon": args.epsilon, "delta": 1e-9, "seed": seed,
                   "workload_error_3way": workload_error(data, synth, wl), "tv_2way": tv_kway(data, synth, 2),
                   "seconds": secs, "load_start": load0, "load_end": os.getloadavg()[0],
                   "measurements": [list(m.attrs) for m in mech.measurements_],
                   "rho_spent": mech.privacy_report()["rho_spent"], "rho_total": mech.rho_total,
                   "cpus": os.cpu_count(), **versions}
            print(json.dumps({k: rec[k] for k in ("method", "seed", "workload_error_3way", "tv_2way", "seconds")}),
                  flush=True)
            with open(out, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
    summarize(out)


VARIANTS = {
    # PrivMRF with AIM's preset final fit (plain mirror descent, tol 1e-5) instead of the default PGM
    # (preconditioned, tol 1e-7): how much of its time is the last fit
    "privmrf[aim-final-fit]": ("privmrf", lambda PGM: {"generator": PGM(iters=1000, tol=1e-5, method="md")}),
}


def make(registry, method: str, eps: float, seed: int):
    from privmarg import PGM

    if method in VARIANTS:
        base, params = VARIANTS[method]
        return registry.make_preset(base, eps, 1e-9, seed=seed, **params(PGM))
    return registry.make_preset(method, eps, 1e-9, seed=seed)


def summarize(path: Path):
    rows = [json.loads(l) for l in Path(path).read_text().splitlines()]
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["method"], r["epsilon"]), []).append(r)
    print("| method | ε | seeds | 3-way workload error | 2-way TV | seconds (mean) | load avg (start–end) | marginals |")
    print("|---|---|---|---|---|---|---|---|")
    for (method, eps), rs in groups.items():
        rs = sorted(rs, key=lambda r: r["seed"])
        w = [r["workload_error_3way"] for r in rs]
        t = [r["tv_2way"] for r in rs]
        sd = lambda x: f" ± {np.std(x, ddof=1):.4f}" if len(x) > 1 else ""  # noqa: E731
        print(f"| {method} | {eps:g} | {','.join(str(r['seed']) for r in rs)} | {np.mean(w):.4f}{sd(w)} | "
              f"{np.mean(t):.4f}{sd(t)} | {np.mean([r['seconds'] for r in rs]):.0f} | "
              f"{min(r['load_start'] for r in rs):.1f}–{max(r['load_end'] for r in rs):.1f} | "
              f"{np.mean([len(r['measurements']) for r in rs]):.0f} |")


if __name__ == "__main__":
    main()
