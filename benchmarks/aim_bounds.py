"""Coverage of AIM's 95% error bounds on adult (ε=1, δ=1e-9, all-3way workload), over seeds.

For every seed and every workload marginal r: the bound b_r = AIM.error_bound(r, 0.95).l1_bound and
the true error e_r = ‖M_r(D)/N − M_r(D̂)/N̂‖₁ of the synthetic table. Reports the share of
(marginal, seed) pairs with e_r > b_r (target ≤ 5%) and the median ratio b_r/e_r for supported and
unsupported marginals (the AIM paper's Figure 4c). Each seed's result is appended to a JSONL file,
so an interrupted run resumes.

Run:  .venv/bin/python benchmarks/aim_bounds.py [--seeds 0..19] [--epsilon 1]
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
DATA = folder("adult")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(20)))
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "aim_bounds.jsonl"))
    args = ap.parse_args()

    from privmarg import AIM, Dataset, Domain
    from privmarg.evaluation import workload_error

    dom = Domain.from_json(DATA / "domain.json")
    data = Dataset.read(DATA / "adult.csv.gz", dom)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["epsilon"], r["seed"]) for r in map(json.loads, out.read_text().splitlines())} if out.exists() else set()
    for seed in args.seeds:
        if (args.epsilon, seed) in done:
            continue
        t0 = time.perf_counter()
        mech = AIM(args.epsilon, 1e-9, workload="all-3way", seed=seed).fit(data)
        syn = Dataset(mech.sample_codes(), dom)
        secs = time.perf_counter() - t0
        rows = []
        for r, _ in mech.workload_:
            b = mech.error_bound(r, 0.95)
            e = float(np.abs(data.project(r) / len(data) - syn.project(r) / len(syn)).sum())
            rows.append((b.supported, b.l1_bound, e))
        rec = {"epsilon": args.epsilon, "seed": seed, "seconds": secs, "rounds": mech.rounds_,
               "workload_error": workload_error(data, syn, mech.workload_),
               "marginals": len(rows), "violations": sum(e > b for _, b, e in rows),
               "supported": [s for s, _, _ in rows], "bound": [b for _, b, _ in rows], "true": [e for _, _, e in rows]}
        print(json.dumps({k: v for k, v in rec.items() if k not in ("supported", "bound", "true")}), flush=True)
        with open(out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    summarize(out, args.epsilon)


def summarize(path, eps):
    recs = [r for r in map(json.loads, Path(path).read_text().splitlines()) if r["epsilon"] == eps]
    sup = np.concatenate([np.array(r["supported"]) for r in recs])
    b = np.concatenate([np.array(r["bound"]) for r in recs])
    e = np.concatenate([np.array(r["true"]) for r in recs])
    viol = e > b
    print(f"seeds: {len(recs)}, (marginal, seed) pairs: {len(b)}, share with true error > 95% bound: "
          f"{viol.mean():.4f} ({viol.sum()})")
    for flag, name in ((True, "supported"), (False, "unsupported")):
        m = sup == flag
        if m.any():
            print(f"{name}: {m.sum()} pairs, violations {viol[m].sum()}, median bound/true {np.median(b[m] / e[m]):.2f}, "
                  f"median bound {np.median(b[m]):.4f}, median true {np.median(e[m]):.4f}")
    print(f"workload error mean {np.mean([r['workload_error'] for r in recs]):.4f}, "
          f"seconds mean {np.mean([r['seconds'] for r in recs]):.1f}")


if __name__ == "__main__":
    main()
