"""AIM on fire with the paper sweep's cell settings (benchmarks/paper.yaml: 80/20 split seed 0,
replace-one, δ = 1e-5, all-2way workload, 80 MB cap), one fit per line, with the cost of every
round's refit and of the final fit logged, so a variant's time can be split between them.

Each line of ``--out`` (JSONL, resumes): variant, ε, seed, CPU and wall seconds of fit + sample,
rounds, per-round (iterations, CPU s, model MB), final fit iterations and seconds, peak RSS, and
``workload_error_3way`` / ``tv_2way`` against the training split (the sweep's metrics, same code).
The paper sweep's own cells: ``benchmarks/paper_results/results.jsonl``.

Run:  taskset -c 0 .venv/bin/python benchmarks/aim_fire.py --epsilons 1 2.5 --seeds 0 1 2 \
        --variants default= --out benchmarks/results/aim_fire.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

from _data import sweep_train
from aim_variants import _parse

ROOT = Path(__file__).resolve().parents[1]


def one(name: str, kw: dict, epsilon: float, seed: int) -> dict:
    import numpy as np

    from privmarg import AIM, Dataset
    from privmarg.core import all_kway
    from privmarg.evaluation import workload_error
    from privmarg.evaluation.metrics import tv_per_marginal

    train, dom = sweep_train("fire")
    log = []
    c0, t0 = time.process_time(), time.perf_counter()

    def progress(spent, total, msg):
        log.append((round(time.process_time() - c0, 2), msg))
        if os.environ.get("AIM_FIRE_VERBOSE"):
            print(f"{log[-1][0]:8.1f} {msg}", flush=True)

    mech = AIM(epsilon, 1e-5, neighbour="replace_one", workload="all-2way", max_model_size=80,
               seed=seed, **kw).fit(train, progress=progress)
    c1 = time.process_time()
    codes = np.asarray(mech.sample_codes(None))
    c2, t2 = time.process_time(), time.perf_counter()
    synth = Dataset(codes, dom)
    rounds = [{"it": e.get("estimation_iterations"), "s": round(e.get("estimation_seconds", 0), 2),
               "mb": round(e.get("model_size_mb", 0), 1), "sel": e["selected"]}
              for e in mech.log_]
    final = getattr(getattr(mech, "model_", None), "info", None)
    return {"variant": name, "params": kw, "epsilon": epsilon, "seed": seed,
            "cpu_s": round(c2 - c0, 1), "wall_s": round(t2 - t0, 1), "sample_cpu_s": round(c2 - c1, 1),
            "rounds": len(rounds), "refit_cpu_s": round(sum(r["s"] for r in rounds), 1),
            "refit_iters": sum(r["it"] or 0 for r in rounds),
            "final_iters": getattr(final, "iterations", None), "final_s": round(getattr(final, "seconds", 0), 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "workload_error_3way": workload_error(train, synth, all_kway(dom, 3)),
            "tv_2way": float(np.mean(list(tv_per_marginal(train, synth, 2).values()))), "per_round": rounds,
            "load_avg_1m": os.getloadavg()[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--variants", nargs="+", default=["default="])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "aim_fire.jsonl"))
    args = ap.parse_args()
    out = Path(args.out)
    done = set()
    if out.exists():
        done = {(r["variant"], r["epsilon"], r["seed"]) for r in map(json.loads, out.read_text().splitlines())}
    for eps in args.epsilons:
        for seed in args.seeds:
            for spec in args.variants:
                name, kw = _parse(spec)
                if (name, eps, seed) in done:
                    continue
                rec = one(name, kw, eps, seed)
                with out.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
                print(name, eps, seed, rec["cpu_s"], rec["rounds"], rec["refit_cpu_s"], rec["final_s"],
                      round(rec["workload_error_3way"], 4), flush=True)


if __name__ == "__main__":
    main()
