"""Post-processing speed: GUM's consistency step and RAP's relaxed projection (sessions 13, issue 19).

(a) ``make_consistent`` (PrivSyn's consistency, GUM's first step) on the Gaussian baseline's 364
noisy 3-way marginals of adult (20.9M cells; the overall sweep's cell: 80/20 split, replace-one,
δ = 1e-5, ε = 1, seed 0), ``--rounds`` rounds; (b) the RAP preset on the same training split at
ε = 1 with 2 of its 10 rounds (each round up to 1000 Adam steps with a simplex projection after
each); (c) GUM's record updates (``update_records``) in a Gaussian-baseline fit on fire (455 noisy
3-way marginals; the overall sweep's ε = 1, seed 0 cell) with ``--gum-iters`` of GUM's 50
iterations. CPU seconds of this process, one thread; a fingerprint of the output (sum of the consistent
marginals; RAP's 3-way workload error) shows whether results changed. Run the "before" with
``PYTHONPATH`` pointing at an older tree and ``--label``; records go to ``results/postproc_speed.jsonl``.

Run:  OMP_NUM_THREADS=1 taskset -c 1 ../.venv/bin/python postproc_speed.py --label after [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "postproc_speed.jsonl"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--parts", nargs="+", default=["consistency", "rap"])
    ap.add_argument("--gum-iters", type=int, default=4)
    args = ap.parse_args()

    import numpy as np
    import torch

    torch.set_num_threads(1)
    import privmarg
    import privmarg.generate.gum as gum
    from privmarg import Dataset, registry
    from privmarg.benchmark.config import load_config
    from privmarg.benchmark.methods import resolve
    from privmarg.benchmark.runner import load_cell_data
    from privmarg.core import all_kway
    from privmarg.evaluation import workload_error

    cfg = load_config(Path(__file__).resolve().parent / "overall.yaml")

    def cell(method, dataset="adult"):
        return next(c for c in cfg.cells() if c.method.name == method and c.dataset.name == dataset
                    and c.epsilon == 1.0 and c.seed == 0)

    rec = {"label": args.label, "privmarg": privmarg.__file__, "load_avg_1m": os.getloadavg()[0]}
    if "consistency" in args.parts:
        c = cell("gaussian")
        train, _ = load_cell_data(c)
        captured = {}
        real = gum.make_consistent

        class Captured(Exception):
            pass

        def capture(est, domain, total, zeros=(), iters=501, tol=1e-6):
            captured["args"] = (est, domain, total)
            raise Captured

        gum.make_consistent = capture
        try:
            resolve(c.method.method)(c.epsilon, c.delta, seed=c.seed, **c.method.params).fit(train)
        except Captured:
            pass
        gum.make_consistent = real
        est, domain, total = captured["args"]
        t0 = time.process_time()
        out = real(est, domain, total, (), iters=args.rounds)
        rec.update(consistency_cpu_s=time.process_time() - t0, consistency_rounds=args.rounds,
                   marginals=len(est), cells=int(sum(v[0].size for v in est.values())),
                   consistency_fingerprint=float(sum(float((v * v).sum()) for v in out.values())))
    if "rap" in args.parts:
        c = cell("rap")
        train, _ = load_cell_data(c)
        t0 = time.process_time()
        m = registry.preset_class("rap")(c.epsilon, c.delta, seed=c.seed, rounds=2,
                                         neighbour="replace_one").fit(train)
        codes = Dataset(np.asarray(m.sample_codes()), train.domain)
        rec.update(rap_cpu_s=time.process_time() - t0, rap_rounds=2,
                   rap_error_3way=float(workload_error(train, codes, all_kway(train.domain, 3))))
    if "gum" in args.parts:
        c = cell("gaussian", "fire")
        train, _ = load_cell_data(c)
        real_update, spent = gum.update_records, [0.0]

        def timed_update(*a, **k):
            t = time.process_time()
            real_update(*a, **k)
            spent[0] += time.process_time() - t

        gum.update_records = timed_update
        t0 = time.process_time()
        params = {k: v for k, v in c.method.params.items() if k != "generator"}
        m = resolve(c.method.method)(c.epsilon, c.delta, seed=c.seed, generator=gum.GUM(iters=args.gum_iters),
                                     **params).fit(train)
        gum.update_records = real_update
        recs = np.asarray(m.sample_codes())
        rec.update(gum_fit_cpu_s=time.process_time() - t0, gum_update_cpu_s=spent[0], gum_iters=args.gum_iters,
                   gum_records_fingerprint=int(np.sum(recs * np.arange(1, recs.shape[1] + 1))),
                   gum_error_3way=float(workload_error(train, Dataset(recs, train.domain),
                                                       all_kway(train.domain, 3))))
    rec["load_avg_1m_end"] = os.getloadavg()[0]
    print(json.dumps(rec))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("a") as f:
        f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
