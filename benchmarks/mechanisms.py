"""AIM and MST on adult: workload error (all 3-way) and wall time, privmarg vs smartnoise-synth.

Same data, same domain (the public domain file, not categories inferred from the data), same
(ε, δ = 1e-9), add/remove neighbouring for privmarg. smartnoise-synth 1.0.8 is the only pip peer
shipping AIM/MST (mbi 2.0.0 on PyPI has the engine only); it runs in `.venv-snsynth` (make bench-deps).
smartnoise's AIM uses its own default workload (all 2-way marginals up to 10k cells), ours the
all-3way workload the error is measured on.

Each finished cell is appended to a JSONL file, so an interrupted run resumes.

Run:  .venv/bin/python benchmarks/mechanisms.py [--epsilons 0.3 1 3] [--seeds 0 1 2]
          [--peer-epsilons 1] [--peer-seeds 0] [--peer-timeout 1800]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _data import folder  # the bundled datasets, or ../shared/data for fire and salary

ROOT = Path(__file__).resolve().parents[1]
DATA = folder("adult")
sys.path.insert(0, str(Path(__file__).resolve().parent))


def load():
    from privmarg import Dataset, Domain

    dom = Domain.from_json(DATA / "domain.json")
    return dom, Dataset.read(DATA / "adult.csv.gz", dom)


def run_privmarg(method, data, eps, seed):
    from privmarg import AIM, MST

    cls = {"aim": AIM, "mst": MST}[method]
    kw = {"workload": "all-3way"} if method == "aim" else {}
    t0 = time.perf_counter()
    mech = cls(eps, 1e-9, seed=seed, **kw).fit(data)
    codes = mech.sample_codes()
    return codes, time.perf_counter() - t0


def run_peer(method, data, eps, seed, timeout):
    from peers import smartnoise_synth

    df = data.to_frame()
    t0 = time.perf_counter()
    syn = smartnoise_synth(df, data.domain.to_dict(), method, eps, 1e-9, seed, timeout=timeout)
    return syn[list(data.domain.attrs)].to_numpy(), time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.3, 1.0, 3.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--peer-epsilons", type=float, nargs="*", default=[1.0])
    ap.add_argument("--peer-seeds", type=int, nargs="*", default=[0])
    ap.add_argument("--peer-methods", nargs="*", default=["mst", "aim"])
    ap.add_argument("--peer-timeout", type=float, default=1800)
    ap.add_argument("--libraries", nargs="+", default=["privmarg", "smartnoise"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mechanisms.jsonl"))
    args = ap.parse_args()

    from privmarg import Dataset
    from privmarg.evaluation import workload_error
    from privmarg.core import all_kway

    dom, data = load()
    wl = all_kway(dom, 3)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done.add((r["library"], r["method"], r["epsilon"], r["seed"]))
    cells = [("privmarg", m, e, s) for e in args.epsilons for s in args.seeds for m in ("aim", "mst")]
    cells += [("smartnoise", m, e, s) for m in args.peer_methods for e in args.peer_epsilons for s in args.peer_seeds]
    for lib, method, eps, seed in cells:
        if lib not in args.libraries or (lib, method, eps, seed) in done:
            continue
        try:
            if lib == "privmarg":
                codes, secs = run_privmarg(method, data, eps, seed)
            else:
                codes, secs = run_peer(method, data, eps, seed, args.peer_timeout)
            err = workload_error(data, Dataset(codes, dom), wl)
            rec = {"library": lib, "method": method, "epsilon": eps, "seed": seed,
                   "workload_error": err, "seconds": secs}
        except Exception as e:  # a peer that fails or times out is recorded, not fatal
            rec = {"library": lib, "method": method, "epsilon": eps, "seed": seed, "error": f"{type(e).__name__}: {e}"[:300]}
        print(json.dumps(rec), flush=True)
        with open(out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    summarize(out)


def summarize(path):
    rows = [json.loads(l) for l in Path(path).read_text().splitlines()]
    df = pd.DataFrame([r for r in rows if "workload_error" in r])
    if df.empty:
        return
    g = df.groupby(["method", "epsilon", "library"]).agg(
        error=("workload_error", "mean"), error_sd=("workload_error", "std"),
        seconds=("seconds", "mean"), runs=("seed", "count")).reset_index()
    print("| method | ε | library | workload error (mean ± sd) | seconds | runs |")
    print("|---|---|---|---|---|---|")
    for _, r in g.iterrows():
        sd = "" if np.isnan(r.error_sd) else f" ± {r.error_sd:.4f}"
        print(f"| {r.method} | {r.epsilon:g} | {r.library} | {r.error:.4f}{sd} | {r.seconds:.1f} | {r.runs} |")
    for r in rows:
        if "error" in r:
            print(f"failed: {r['library']} {r['method']} ε={r['epsilon']} seed={r['seed']}: {r['error']}")


if __name__ == "__main__":
    main()
