"""JAM vs AIM: CPU seconds and workload error, interleaved on one core (issue 18).

For each (seed, ε, split) JAM then AIM run in this one process, so both see the same machine
load; CPU seconds are the process's (``time.process_time``) for fit + sample (``fit_seconds``: the
fit alone). Settings as in benchmarks/jam.py (all 3-way workload, δ = 1e-9, replace-one,
``--max-model-size 20``; the presets' default is 80); JAM's estimation settings from ``--iters`` /
``--final-iters`` (default: JAM's defaults), AIM at its defaults. ``--label`` tags the records (e.g.
the code version: run the "before" with PYTHONPATH pointing at the old tree). AIM does not see the
public table, so it runs once per (seed, ε); ``--aim-public`` also times AIM given each split's public
table (its public start, method ``aim_public``).

Run:  taskset -c 1 .venv/bin/python benchmarks/jam_speed.py --label after [--datasets adult-025 adult-100]
          [--epsilons 0.1] [--seeds 0 1 2] [--out benchmarks/results/jam_speed.jsonl]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from jam import DATASETS, DELTA, WORKLOAD, load

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", required=True)
    ap.add_argument("--datasets", nargs="+", default=["adult-025", "adult-050", "adult-075", "adult-100"])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--final-iters", type=int, default=None)
    ap.add_argument("--max-model-size", type=float, default=20.0)
    ap.add_argument("--aim-public", action="store_true")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "jam_speed.jsonl"))
    args = ap.parse_args()

    import privmarg
    from privmarg import AIM, JAM, Dataset
    from privmarg.core import parse_workload
    from privmarg.evaluation import workload_error

    data = {name: load(name) for name in args.datasets}
    jam_kw = {"max_model_size": args.max_model_size}
    if args.iters is not None:
        jam_kw["iters"] = args.iters
    if args.final_iters is not None:
        jam_kw["final_iters"] = args.final_iters
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def cell(method, name, eps, seed):
        private, public = data[name]
        t0, w0 = time.process_time(), time.perf_counter()
        if method == "jam":
            mech = JAM(eps, DELTA, workload=WORKLOAD, seed=seed, **jam_kw).fit(private, public=public)
            extra = {"public_marginals": len(mech.public_marginals_), "private_marginals": len(mech.private_marginals_),
                     "iters": mech.iters, "final_iters": mech.final_iters}
        else:
            mech = AIM(eps, DELTA, workload=WORKLOAD, seed=seed, neighbour="replace_one",
                       max_model_size=args.max_model_size).fit(private, public=public if method == "aim_public" else None)
            extra = {"private_marginals": len(mech.measurements_), "rounds": mech.rounds_,
                     "public_start": mech.public_start_}
        fit = time.process_time() - t0
        syn = Dataset(mech.sample_codes(), private.domain)
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
        rec = {"label": args.label, "dataset": name, "method": method, "epsilon": eps, "seed": seed,
               "cpu_seconds": cpu, "fit_seconds": fit, "wall_seconds": wall,
               "workload_error": workload_error(private, syn, parse_workload(WORKLOAD, private.domain)),
               "privmarg": str(Path(privmarg.__file__).parent), **extra}
        print(json.dumps(rec), flush=True)
        with open(out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")

    for seed in args.seeds:
        for eps in args.epsilons:
            for i, name in enumerate(args.datasets):
                cell("jam", name, eps, seed)
                if args.aim_public:
                    cell("aim_public", name, eps, seed)
                if i == 0:
                    cell("aim", name, eps, seed)  # same private table for every split


if __name__ == "__main__":
    main()
