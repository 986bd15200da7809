"""Empirical privacy audit (privmarg.audit): ε lower bounds with 95% Clopper–Pearson confidence from
many runs on neighbouring tables, against the claimed ε = cdp_eps(ρ, δ = 1e-5).

* the Gaussian primitive (one histogram release), claims ε = 1 and 4, both neighbour relations,
  continuous and discrete noise, and a broken variant with half the noise (must be flagged);
* MST and AIM selections (tiny table: 60 rows, 3 binary columns; AIM with its default rounds and
  the all-2way workload; the model in their loops runs 20 mirror-descent iterations, which only
  changes post-processing), claim ε = 2, scored with the Gaussian likelihood-ratio statistic over
  everything they measured, and broken variants with a quarter of the noise.

One JSON line per audit in ``--out`` (selector audits also keep their raw scores).

Run:  python benchmarks/audit.py --out benchmarks/results/audit.jsonl [--gaussian-runs 1000000]
      [--mst-runs 1000] [--aim-runs 500] [--only mst aim] [--cases add_remove:continuous:0.25 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/audit.jsonl")
    ap.add_argument("--gaussian-runs", type=int, default=1_000_000)
    ap.add_argument("--mst-runs", type=int, default=1000)
    ap.add_argument("--aim-runs", type=int, default=500)
    ap.add_argument("--only", nargs="*", default=["gaussian", "mst", "aim"])
    ap.add_argument("--cases", nargs="*", default=["add_remove:continuous:1", "add_remove:discrete:1",
                                                    "replace_one:continuous:1", "add_remove:continuous:0.25"],
                    help="selector audits as NEIGHBOUR:NOISE:SIGMA_FACTOR (1 = the correct mechanism)")
    ap.add_argument("--seed", type=int, default=200, help="first selector audit seed")
    args = ap.parse_args()

    from privmarg.audit import audit_gaussian, audit_selector, likelihood_ratio_score, tiny_table
    from privmarg.generate import PGM
    from privmarg.privacy import cdp_rho
    from privmarg.select import AIMSelector
    from privmarg.select.mst import MSTSelector

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    host = {"python": platform.python_version(), "host": platform.node()}

    def emit(res, seconds, extra=None):
        row = {**res.to_dict(), "seconds": seconds, **(extra or {}), **host}
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{row['mechanism']:28s} {row['neighbour']:11s} {row['noise']:10s} claim {row['epsilon_claimed']:.3f} "
              f"lb {row['epsilon_lb']:.3f} point {row['epsilon_point']:.3f} violated {row['violated']} "
              f"({seconds:.0f} s)", flush=True)

    if "gaussian" in args.only:
        seed = 100
        for eps in (1.0, 4.0):
            for neighbour in ("add_remove", "replace_one"):
                for noise in ("continuous", "discrete"):
                    for factor in (1.0, 0.5):
                        seed += 1
                        t = time.perf_counter()
                        r = audit_gaussian(cdp_rho(eps, 1e-5), args.gaussian_runs, neighbour=neighbour, noise=noise,
                                           sigma_factor=factor, seed=seed)
                        emit(r, time.perf_counter() - t, {"seed": seed})

    table = tiny_table(rows=60)
    row = [1, 0, 1]
    rho = cdp_rho(2.0, 1e-5)
    makers = {"mst": ("MST", lambda: MSTSelector(loop=PGM(iters=20)), args.mst_runs),
              "aim": ("AIM", lambda: AIMSelector("all-2way", loop=PGM(iters=20)), args.aim_runs)}
    seed = args.seed
    cases = []
    for c in args.cases:
        neighbour, noise, factor = c.split(":")
        cases.append((neighbour, noise, None if float(factor) == 1.0 else float(factor)))
    for key in ("mst", "aim"):
        if key not in args.only:
            continue
        name, make, runs = makers[key]
        for neighbour, noise, broken in cases:
            seed += 1
            scores: list[list[float]] = []

            def keep(ms, d0, d1):
                s = likelihood_ratio_score(ms, d0, d1)
                scores.append(s)
                return s

            t = time.perf_counter()
            r = audit_selector(make, table, row, rho, runs, neighbour=neighbour, noise=noise, seed=seed, name=name,
                               broken=broken, score=keep)
            emit(r, time.perf_counter() - t, {"seed": seed, "table_rows": len(table), "row": row,
                                              "scores_D": scores[:runs], "scores_D_prime": scores[runs:]})


if __name__ == "__main__":
    main()
