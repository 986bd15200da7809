"""An audit that can fail (issue #43): each mechanism and a variant with twice its ε (the Gaussian
and the selectors' measurements with half their noise, the exponential mechanism drawing with
twice its ε; value discovery with twice the noise on a new key or half on a shared key's count; DP-SGD with half its noise), at
ρ = 1/8 and δ = 0.05 (claimed ε = 0.737), where a few thousand runs resolve the difference.
PrivTree is pure ε-DP: audited at ρ = 4.5 against ε = √(2ρ) = 3 with δ = 0, the broken variant
building its tree at 2ε. 95% Clopper–Pearson lower bounds (privmarg.audit); one JSON line per audit in --out.

Run:  python benchmarks/audit_2x.py --out benchmarks/results/audit_2x.jsonl [--only gaussian exponential
      discovery privtree dpsgd MST AIM]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main() -> None:
    from privmarg import PGM, __version__
    from privmarg.audit import (audit_discovery, audit_dpsgd, audit_exponential, audit_gaussian, audit_privtree,
                                audit_selector, tiny_table)
    from privmarg.select.aim import AIMSelector
    from privmarg.select.mst import MSTSelector

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="benchmarks/results/audit_2x.jsonl")
    ap.add_argument("--primitive-runs", type=int, default=20_000)
    ap.add_argument("--mst-runs", type=int, default=10_000)
    ap.add_argument("--aim-runs", type=int, default=5_000)
    ap.add_argument("--only", nargs="*", default=["gaussian", "exponential", "discovery", "privtree", "dpsgd", "MST",
                                                         "AIM"])
    args = ap.parse_args()
    rho, delta = 0.125, 0.05
    table = tiny_table(rows=60)
    jobs = []
    for nb in ("add_remove", "replace_one") if "gaussian" in args.only else ():
        for f in (1.0, 0.5):
            jobs.append(lambda nb=nb, f=f: audit_gaussian(rho, args.primitive_runs, neighbour=nb, sigma_factor=f,
                                                          delta=delta, seed=1))
    for fitting, bounded in ((False, False), (True, False), (True, True)) if "exponential" in args.only else ():
        for f in (1.0, 2.0):
            jobs.append(lambda fitting=fitting, bounded=bounded, f=f: audit_exponential(
                rho, args.primitive_runs, fitting=fitting, bounded=bounded, epsilon_factor=f, delta=delta, seed=1))
    for new_key, broken in ((True, 2.0), (False, 0.5)) if "discovery" in args.only else ():
        for f in (1.0, broken):
            jobs.append(lambda new_key=new_key, f=f: audit_discovery(rho, args.primitive_runs, new_key=new_key,
                                                                     noise_factor=f, seed=1))
    for noise in ("continuous", "discrete") if "privtree" in args.only else ():
        for f in (1.0, 2.0):
            jobs.append(lambda noise=noise, f=f: audit_privtree(4.5, args.primitive_runs, epsilon_factor=f, noise=noise,
                                                                seed=1))
    for nb in ("add_remove", "replace_one") if "dpsgd" in args.only else ():
        for f in (1.0, 0.5):
            jobs.append(lambda nb=nb, f=f: audit_dpsgd(rho, args.primitive_runs, neighbour=nb, noise_factor=f,
                                                       delta=delta, seed=1))
    selectors = {"MST": (lambda: MSTSelector(loop=PGM(iters=20)), args.mst_runs),
                 "AIM": (lambda: AIMSelector("all-2way", rounds=12, loop=PGM(iters=20)), args.aim_runs)}
    for name, (make, runs) in ((n, v) for n, v in selectors.items() if n in args.only):
        for broken in (None, 0.5):
            jobs.append(lambda make=make, runs=runs, name=name, broken=broken: audit_selector(
                make, table, [1, 0, 1], rho, runs, delta=delta, seed=3, name=name, broken=broken))
    with open(args.out, "a") as fh:
        for job in jobs:
            t0 = time.process_time()
            res = job()
            rec = {**res.to_dict(), "cpu_seconds": time.process_time() - t0, "privmarg": __version__,
                   "python": platform.python_version()}
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            print(f"{rec['mechanism']:32s} {rec['neighbour']:10s} runs {rec['runs_per_table']:>6} "
                  f"lb {rec['epsilon_lb']:.3f} claim {rec['epsilon_claimed']:.3f} "
                  f"{'FLAGGED' if rec['violated'] else 'ok'} ({rec['cpu_seconds']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
