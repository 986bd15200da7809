"""AIM end to end with preconditioned vs plain mirror-descent refits (``AIM(refit_method=...)``).

benchmarks/warm_start.py found plain mirror descent cheaper than the preconditioned step on one
warm-started refit; this checks whether that carries over to whole AIM runs, where every round's
refit is warm started and the selections depend on the fitted models. For each dataset, ε and seed
it fits AIM once per method (the same noise seed, so the runs share their first rounds) and records
the fit time (CPU seconds, one process), the rounds, the estimator's evaluations summed over the
rounds, and the 3-way workload error of 20k sampled rows. Records append to a JSONL file (resumes).

Run:  .venv/bin/python benchmarks/aim_refit.py [--datasets adult] [--epsilons 1] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from _data import folder  # the bundled datasets, or ../shared/data for fire and salary

ROOT = Path(__file__).resolve().parents[1]
FILES = {"adult": "adult.csv.gz", "titanic": "private.csv.gz", "fire": "private.csv.gz", "salary": "private.csv.gz"}


def load(name):
    from privmarg import Dataset, Domain

    d = folder(name)
    dom = Domain.from_json(d / "domain.json")
    return Dataset.read(d / FILES[name], dom)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["adult"])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--workload", default="all-2way")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "aim_refit.jsonl"))
    args = ap.parse_args()

    from privmarg import AIM, Dataset
    from privmarg.evaluation import workload_error
    from privmarg.core import parse_workload

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    recs = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    done = {(r["dataset"], r["epsilon"], r["seed"], r["workload"], r["method"]) for r in recs}
    for name in args.datasets:
        data = load(name)
        w3 = parse_workload("all-3way", data.domain)
        for eps in args.epsilons:
            for seed in args.seeds:
                for method in ("precond", "md"):
                    if (name, eps, seed, args.workload, method) in done:
                        continue
                    t0, c0 = time.perf_counter(), time.process_time()
                    mech = AIM(eps, 1e-5, workload=args.workload, seed=seed, refit_method=method).fit(data)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    syn = Dataset(mech.sample_codes(20000), data.domain)
                    rec = {"dataset": name, "epsilon": eps, "seed": seed, "workload": args.workload,
                           "method": method, "wall_s": wall, "cpu_s": cpu, "rounds": mech.rounds_,
                           "estimation_s": sum(e["estimation_seconds"] for e in mech.log_),
                           "iterations": sum(e["estimation_iterations"] for e in mech.log_),
                           "final_iterations": mech.model_.info.iterations,
                           "model_size_mb": mech.model_.size_mb(),
                           "workload_error_3way": workload_error(data, syn, w3)}
                    print(json.dumps(rec), flush=True)
                    with open(out, "a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                        fh.flush()
                        os.fsync(fh.fileno())
                    recs.append(rec)
    summarize(recs)


def summarize(recs):
    print("| dataset | ε | workload | refit | runs | rounds | CPU s | estimation s | iterations | 3-way error |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    groups = {}
    for r in recs:
        groups.setdefault((r["dataset"], r["epsilon"], r["workload"], r["method"]), []).append(r)
    for (name, eps, wl, method), rs in sorted(groups.items()):
        def m(k):
            return np.mean([r[k] for r in rs])
        print(f"| {name} | {eps:g} | {wl} | {method} | {len(rs)} | {m('rounds'):.1f} | {m('cpu_s'):.1f} | "
              f"{m('estimation_s'):.1f} | {m('iterations'):.0f} | {m('workload_error_3way'):.4f} |")


if __name__ == "__main__":
    main()
