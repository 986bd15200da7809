"""GEM against Independent at the presets' defaults on the bundled adult table (issue #44).

``GEM(1.0, 1e-9, seed=s)`` and ``Independent(1.0, 1e-9, seed=s)``; error = mean normalised L1 over
every 3-way (and 2-way) marginal of the sampled table against the real one. One JSON line per fit
is appended to ``--out``; run one seed per process to use both cores::

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/gem_vs_independent.py --seeds 5
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _data import folder

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from privmarg import GEM, Dataset, Domain, Independent
    from privmarg.core import parse_workload
    from privmarg.evaluation import workload_error

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--methods", nargs="+", default=["independent", "gem"])
    ap.add_argument("--session", type=int, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "gem_vs_independent.jsonl")
    args = ap.parse_args()
    data = folder("adult")
    dom = Domain.from_json(data / "domain.json")
    real = Dataset.read(data / "adult.csv.gz", dom)
    w3, w2 = parse_workload("all-3way", dom), parse_workload("all-2way", dom)
    presets = {"gem": GEM, "independent": Independent}
    for seed in args.seeds:
        for method in args.methods:
            t0 = time.process_time()
            mech = presets[method](1.0, 1e-9, seed=seed).fit(real)
            syn = Dataset(mech.sample_codes(), dom)
            rec = {"method": method, "seed": seed, "cpu": time.process_time() - t0,
                   "err3": workload_error(real, syn, w3), "err2": workload_error(real, syn, w2),
                   "session": args.session}
            with args.out.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
