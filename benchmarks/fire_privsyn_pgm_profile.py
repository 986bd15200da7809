"""Where a fire cell of the module grid's PrivSyn selection x Private-PGM goes (issue 19: a cell that
cannot finish in 60 minutes is profiled and its bottleneck named).

The module sweep's settings (benchmarks/modules.yaml: 80/20 split seed 0, add/remove, δ = 1e-5, PGM
with ``work_mb=4000, min_iters=300``), but the PGM fit is cut to ``--iters`` iterations (tol 0) twice
(``--iters`` and ``2 × --iters``), so the cost of one iteration is the difference over the extra ones
and the full fit's time is extrapolated to the iterations the cell would run. One line of JSON per ε:
junction-tree MB, selection CPU s, setup and per-iteration CPU s, the iterations the cell runs and
its projected CPU minutes, peak RSS, and the top functions of the longer fit by cumulative time.

Run:  taskset -c 1 .venv/bin/python benchmarks/fire_privsyn_pgm_profile.py --epsilons 0.2 1 --iters 3
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import time
from pathlib import Path

from _data import sweep_train

ROOT = Path(__file__).resolve().parents[1]


def fit(train, epsilon: float, seed: int, iters: int, profile: bool):
    from privmarg.benchmark.methods import ModulePair

    pair = ModulePair("privsyn", "pgm", epsilon=epsilon, delta=1e-5, seed=seed, neighbour="add_remove",
                      generator={"iters": iters, "tol": 0.0, "method": "momentum"})
    prof = cProfile.Profile() if profile else None
    c0 = time.process_time()
    if prof:
        prof.enable()
    pair.fit(train)
    if prof:
        prof.disable()
    return pair.synth, time.process_time() - c0, prof


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fire_privsyn_pgm_profile.jsonl")
    a = ap.parse_args()

    from privmarg.generate.pgm import PGM

    train, dom = sweep_train("fire")
    for eps in a.epsilons:
        s1, c1, _ = fit(train, eps, a.seed, a.iters, False)
        s2, c2, prof = fit(train, eps, a.seed, 2 * a.iters, True)
        cliques = [m.attrs for m in s2.measurements_] if hasattr(s2, "measurements_") else None
        grid = PGM(iters=1000, tol=1e-5, work_mb=4000, min_iters=300)
        size = grid.model_size_mb(dom, cliques) if cliques else None
        runs = grid.iterations_for(dom, cliques) if cliques else None
        per_iter = (c2 - c1) / a.iters
        setup = c1 - a.iters * per_iter
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(18)
        rec = {"epsilon": eps, "seed": a.seed, "jt_mb": size, "cell_iterations": runs,
               "cpu_fit_short": round(c1, 1), "cpu_fit_long": round(c2, 1), "iters_short": a.iters,
               "cpu_per_iteration": round(per_iter, 2), "cpu_setup_and_selection": round(setup, 1),
               "projected_cell_cpu_min": None if runs is None else round((setup + runs * per_iter) / 60, 1),
               "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
               "profile_top": [ln.strip() for ln in buf.getvalue().splitlines() if ln.strip()][:30]}
        print(json.dumps({k: v for k, v in rec.items() if k != "profile_top"}), flush=True)
        print("\n".join(rec["profile_top"][6:26]), flush=True)
        with a.out.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
