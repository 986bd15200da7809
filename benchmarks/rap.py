"""RAP++ (and RAP) vs MST on the bundled adult table (issue #19): mean 2-way TV and fit time.

Adult (48,842 rows, 14 columns), ε = 1, δ = 1e-9, add/remove neighbours for RAP++ and MST (the
benchmark modules' relation); RAP runs under its own default, replace-one. RAP++ and RAP with the
all-2way workload (the benchmark's RAP++ setting) and their defaults otherwise. Metric:
:func:`privmarg.evaluation.metrics.tv_kway` (mean over the 91 2-way marginals of the total variation
between real and synthetic) on ``sample_codes()`` (N̂ rows), plus fit seconds, the number of
relaxed-projection steps, and the 1-minute load average at the start and end of the run (the machine
is shared: times are not comparisons). One torch thread (the fastest under load).

Cells are appended to a JSONL file as they finish; a rerun skips finished cells.

Run:  nice -n 10 .venv/bin/python benchmarks/rap.py [--seeds 0] [--methods rap++ mst rap] [--summary]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "rap_adult.jsonl"


def fit(method: str, data, eps: float, seed: int, params: dict):
    from privmarg import registry

    kw = dict(seed=seed, **params)
    if method in ("rap++", "rap"):
        kw.setdefault("workload", "all-2way")
    t0 = time.perf_counter()
    mech = registry.make_preset(method, eps, 1e-9, **kw).fit(data)
    codes = mech.sample_codes()
    return mech, codes, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--methods", nargs="+", default=["rap++", "mst"])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--tag", default="default")
    ap.add_argument("--params", default="{}", help="preset parameters (JSON) for rap/rap++")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    if args.summary:
        return summarize(out)
    import torch

    torch.set_num_threads(1)
    from privmarg import Dataset, datasets
    from privmarg.evaluation.metrics import tv_kway

    df, dom = datasets.load("adult")
    real = Dataset.from_frame(df, dom)
    params = json.loads(args.params)
    done = set()
    if out.exists():
        done = {(r["tag"], r["method"], r["epsilon"], r["seed"]) for r in map(json.loads, out.read_text().splitlines())}
    out.parent.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        for method in args.methods:
            tag = args.tag if method != "mst" else "mst"
            if (tag, method, args.epsilon, seed) in done:
                continue
            load0 = os.getloadavg()[0]
            p = params if method != "mst" else {}
            mech, codes, secs = fit(method, real, args.epsilon, seed, p)
            syn = Dataset(codes, real.domain)
            rounds = getattr(mech, "log_", []) or []
            rec = {"tag": tag, "method": method, "params": p, "epsilon": args.epsilon, "delta": 1e-9, "seed": seed,
                   "neighbour": mech.neighbour, "tv_2way": tv_kway(real, syn, 2), "fit_seconds": secs,
                   "rows": int(codes.shape[0]), "rounds": len(rounds),
                   "loop_steps": sum(r.get("loop_steps") or 0 for r in rounds),
                   "final_steps": (mech.model_.info.get("steps") if method != "mst" else None),
                   "rho_spent": mech.privacy_report()["rho_spent"], "rho_total": mech.rho_total,
                   "load_start": load0, "load_end": os.getloadavg()[0]}
            with out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(json.dumps(rec))
    summarize(out)


def summarize(out: Path):
    rows = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    print("| method | tag | seed | mean 2-way TV | fit s | relaxed steps (rounds + final) | load (start/end) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        steps = "" if r["method"] == "mst" else f"{r['loop_steps']} + {r['final_steps']}"
        print(f"| {r['method']} | {r['tag']} | {r['seed']} | {r['tv_2way']:.4f} | {r['fit_seconds']:.1f} | {steps} | "
              f"{r['load_start']:.1f}/{r['load_end']:.1f} |")


if __name__ == "__main__":
    main()
