"""PrivBayes vs MST on adult (issue #14): 3-way workload error and fit time.

Adult, ε = 1, δ = 1e-9, add/remove neighbours, workload = all 3-way marginals (364), error =
:func:`privmarg.evaluation.workload_error` (mean L1 distance of normalised real and synthetic
marginals) on ``sample_codes()`` (the model's own N̂ rows). The reference from the issue: dpmm's
PrivBayes 0.289 on the same data and workload.

Each finished run is appended to a JSONL file (resumable: a (tag, method, seed) already there is
skipped). ``--tag``/``--params`` label and configure a PrivBayes variant (selector parameters as
JSON, e.g. ``'{"degree": 3, "theta": 2}'``); ``--split tuning`` marks runs on seeds other than the
reported ones (10 and 11 chose the defaults).

Run:  taskset -c 1 .venv/bin/python benchmarks/privbayes.py [--seeds 0 1 2] [--methods privbayes mst]
          [--tag default] [--params '{}'] [--epsilon 1] [--split report|tuning] [--summary]
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
DATA = ROOT.parent / "shared" / "data" / "adult"
OUT = ROOT / "benchmarks" / "results" / "privbayes.jsonl"
DPMM_PRIVBAYES = 0.289  # issue #14: dpmm's PrivBayes, adult, ε = 1, all 3-way


def fit(method: str, data, eps: float, seed: int, params: dict):
    from privmarg.presets import MST, PrivBayes

    t0 = time.perf_counter()
    mech = (PrivBayes(eps, 1e-9, seed=seed, **params) if method == "privbayes" else MST(eps, 1e-9, seed=seed)).fit(data)
    codes = mech.sample_codes()
    return mech, codes, time.perf_counter() - t0


def main():
    args = seed_sweep_args(["privbayes", "mst"], OUT,
                           **{"--tag": dict(default="default"),
                              "--split": dict(default="report", help='"report" (the seeds reported) or "tuning" (others)'),
                              "--params": dict(default="{}", help="PrivBayes selector/preset parameters as JSON")})
    out = args.out
    if args.summary:
        return summarize(out)

    from privmarg import Dataset, Domain
    from privmarg.evaluation import workload_error
    from privmarg.core import all_kway

    dom = Domain.from_json(DATA / "domain.json")
    data = Dataset.read(DATA / "adult.csv", dom)
    wl = all_kway(dom, 3)
    params = json.loads(args.params)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done.add((r["split"], r["tag"], r["method"], r["epsilon"], r["seed"]))
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for seed in args.seeds:
        for method in args.methods:
            tag = args.tag if method == "privbayes" else "mst"
            if (args.split, tag, method, args.epsilon, seed) in done:
                continue
            mech, codes, secs = fit(method, data, args.epsilon, seed, params if method == "privbayes" else {})
            rec = {"split": args.split, "tag": tag, "method": method, "params": params if method == "privbayes" else {},
                   "epsilon": args.epsilon, "delta": 1e-9, "seed": seed,
                   "workload_error": workload_error(data, Dataset(codes, dom), wl), "seconds": secs,
                   "measurements": [list(m.attrs) for m in mech.measurements_],
                   "rho_spent": mech.privacy_report()["rho_spent"], "rho_total": mech.rho_total,
                   "cpu_affinity": sorted(os.sched_getaffinity(0)), **versions}
            if method == "privbayes":
                rec["network"] = mech.selection_.extra["network"]
            print(json.dumps({k: rec[k] for k in ("tag", "method", "seed", "workload_error", "seconds")}), flush=True)
            with open(out, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
    summarize(out)


def summarize(path: Path):
    rows = [json.loads(l) for l in Path(path).read_text().splitlines()]
    groups: dict[tuple, list] = {}
    for r in rows:
        groups.setdefault((r["split"], r["tag"], r["method"], r["epsilon"]), []).append(r)
    print(f"| split | variant | ε | seeds | error per seed | mean error | mean s | vs dpmm {DPMM_PRIVBAYES} |")
    print("|---|---|---|---|---|---|---|---|")
    for (split, tag, method, eps), rs in sorted(groups.items(), key=lambda kv: kv[0][0]):
        rs = sorted(rs, key=lambda r: r["seed"])
        err = np.mean([r["workload_error"] for r in rs])
        per = ", ".join(f"{r['workload_error']:.4f}" for r in rs)
        print(f"| {split} | {method}:{tag} | {eps:g} | {','.join(str(r['seed']) for r in rs)} | {per} | {err:.4f} | "
              f"{np.mean([r['seconds'] for r in rs]):.1f} | {err / DPMM_PRIVBAYES:.3f} |")


if __name__ == "__main__":
    main()
