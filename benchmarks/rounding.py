"""Records drawn from a fitted graphical model: leftovers balanced over groups vs independent per group.

The randomized rounding that turns a graphical model into records (``GraphicalModel.synthetic_data``)
hands each group's leftover records to values with probability equal to their fractional parts.
Until session 28 each group drew its leftovers independently (Gumbel top-k); now one systematic
draw runs over all groups with Kronecker-sequence starts (``_leftovers``). Both are exact per group;
they differ in how a value's leftovers spread over groups, i.e. in the sampling noise of marginals
that sum over groups. Each (table, method, ε, seed) fits one model and draws ``--draws`` tables of N
records with each rounding (the same models, the same seeds): the workload error (all 3-way, mean
normalised L1 against the private table) and its mean over the draws. One JSON line per cell::

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/rounding.py --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from jam import DELTA, WORKLOAD, load

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "rounding.jsonl"


def independent_leftovers(frac, extra, probs, rng):
    """The rounding before session 28: each group's leftovers drawn on their own (Gumbel top-k)."""
    with np.errstate(divide="ignore"):
        keys = np.log(frac + 1e-300 * (probs > 0)) - np.log(-np.log(rng.random(frac.shape)))
    rank = np.argsort(np.argsort(-keys, axis=1, kind="stable"), axis=1, kind="stable")
    return (rank < extra[:, None]).astype(np.int64)


def main() -> None:
    import privmarg
    from privmarg import AIM, MST, Dataset
    from privmarg.core import parse_workload
    from privmarg.data import MemorySource
    from privmarg.generate.pgm import graphical_model as gm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["adult-025", "gss"])
    ap.add_argument("--methods", nargs="+", default=["aim", "mst"])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--draws", type=int, default=4)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    balanced = gm._leftovers
    for name in args.datasets:
        private, _ = load(name)
        dom = private.domain
        wl = [r for r, _ in parse_workload(WORKLOAD, dom)]
        src = MemorySource(private)
        n = int(src.count())
        truth = [a / a.sum() for a in src.marginals(wl)]

        def error(codes):
            got = MemorySource(Dataset(codes, dom)).marginals(wl)
            return float(np.mean([np.abs(p - g / g.sum()).sum() for p, g in zip(truth, got)]))

        for method in args.methods:
            for eps in args.epsilons:
                for seed in args.seeds:
                    mech = {"aim": AIM, "mst": MST}[method](eps, DELTA, seed=seed).fit(private)
                    rec = {"dataset": name, "method": method, "epsilon": eps, "seed": seed, "rows": n,
                           "privmarg": privmarg.__version__}
                    for label, rule in (("independent", independent_leftovers), ("balanced", balanced)):
                        gm._leftovers = rule
                        t0 = time.process_time()
                        errs = [error(mech.model_.sample(n, np.random.default_rng(1000 + i))) for i in range(args.draws)]
                        rec[label] = {"mean": float(np.mean(errs)), "draws": errs,
                                      "cpu_seconds_per_draw": (time.process_time() - t0) / args.draws}
                    gm._leftovers = balanced
                    print(json.dumps(rec), flush=True)
                    with args.out.open("a") as fh:
                        fh.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
