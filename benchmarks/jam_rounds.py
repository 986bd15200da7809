"""JAM with fewer rounds in its noisy regime: the paper's T = 30 against others (session 29), and
other model caps (session 34).

Sets the selector's ``PAPER_PLAN`` rounds (α stays 0.2) for each T given, and JAM's
``max_model_size`` for each cap given (MB, optional 6th argument, default 80), and fits JAM at its
defaults otherwise (replace-one, all 3-way workload, δ = 1e-9); the precise regime (AIM's selection)
is unchanged. One JSON line per (seed, ε, table, T, cap): the 3-way workload error of the sampled
table, CPU seconds (fit + sample), the public share of the release and the public/private picks.

Run:  OMP_NUM_THREADS=1 taskset -c 1 .venv/bin/python benchmarks/jam_rounds.py OUT.jsonl 30,15 \
          adult-025,adult-050,adult-075,adult-100,gss,titanic 0.1,0.3,1 5 [80,20]
"""

from __future__ import annotations

import json
import sys
import time

from jam import DELTA, WORKLOAD, load


def main() -> None:
    from privmarg import JAM, Dataset
    from privmarg.core import parse_workload
    from privmarg.evaluation import workload_error
    from privmarg.select import jam as jam_selector

    out_path, rounds, names, epsilons, seeds = sys.argv[1:6]
    rounds_list = [int(x) for x in rounds.split(",")]
    caps = [float(x) for x in sys.argv[6].split(",")] if len(sys.argv) > 6 else [80.0]
    data = {n: load(n) for n in names.split(",")}
    with open(out_path, "a") as out:
        for seed in range(int(seeds)):
            for eps in (float(x) for x in epsilons.split(",")):
                for name, (private, public) in data.items():
                    workload = parse_workload(WORKLOAD, private.domain)
                    for t, cap in ((t, cap) for t in rounds_list for cap in caps):
                        jam_selector.PAPER_PLAN = (t, 0.2)
                        t0 = time.process_time()
                        mech = JAM(eps, DELTA, workload=WORKLOAD, seed=seed, max_model_size=cap).fit(
                            private, public=public)
                        synth = Dataset(mech.sample_codes(), private.domain)
                        rec = {"dataset": name, "eps": eps, "seed": seed, "T": t, "cap": cap,
                               "err": workload_error(private, synth, workload), "cpu": time.process_time() - t0,
                               "precise": mech.selection_.extra.get("precise"),
                               "share": getattr(mech, "public_share_", None),
                               "pub": len(mech.public_marginals_), "priv": len(mech.private_marginals_)}
                        print(json.dumps(rec), flush=True)
                        out.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
