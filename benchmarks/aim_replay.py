"""AIM's refit chain replayed with each estimator step: the estimator's cost without path noise.

End-to-end AIM runs (benchmarks/aim_refit.py) differ in their selections once the models differ,
so their times mix estimator speed with model size. Here one AIM run (precond refits, seed 0)
fixes the measurement sequence; the chain of warm-started refits AIM made (one per round, ``iters``
iterations each, then the final fit) is replayed with ``method="precond"`` and ``method="md"``.
Reports CPU seconds of the whole chain, belief-propagation passes, and the loss of every refit
relative to the other method's (median and worst ratio), plus the final fit's loss.

Run:  .venv/bin/python benchmarks/aim_replay.py [--dataset adult] [--epsilon 1] [--rounds N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from aim_refit import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None, help="replay only the first N rounds")
    args = ap.parse_args()

    from privmarg import AIM, estimate

    data = load(args.dataset)
    dom = data.domain
    mech = AIM(args.epsilon, 1e-5, workload="all-2way", seed=args.seed, refit_method="precond").fit(data)
    ms = mech.measurements_
    total = None if mech.public_rows_ is None else float(mech.public_rows_)  # public N under replace-one
    d = len(dom)
    rounds = len(ms) - d if args.rounds is None else min(args.rounds, len(ms) - d)
    print(f"{args.dataset} ε={args.epsilon:g}: {len(ms) - d} rounds, replaying {rounds}; final model "
          f"{mech.model_.size_mb():.2f} MB")
    res = {}
    for method in ("precond", "md"):
        t = time.process_time()
        model = estimate(dom, ms[:d], total=total, iters=mech.iters, tol=mech.tol)
        losses, evals = [], 0
        for k in range(d + 1, d + rounds + 1):
            model = estimate(dom, ms[:k], total=total, iters=mech.iters, tol=mech.tol,
                             warm=model.potentials, step=model.step_size, method=method)
            losses.append(model.info.loss)
            evals += model.info.evaluations
        final = estimate(dom, ms[:d + rounds], total=total, iters=mech.final_iters, tol=mech.tol / 10,
                         warm=model.potentials, step=model.step_size, method=method)
        res[method] = {"cpu_s": time.process_time() - t, "evaluations": evals + final.info.evaluations,
                       "losses": np.array(losses), "final_loss": final.info.loss}
    ratio = res["md"]["losses"] / res["precond"]["losses"]
    print("| refit | CPU s | BP passes | final loss |\n|---|---|---|---|")
    for method, r in res.items():
        print(f"| {method} | {r['cpu_s']:.1f} | {r['evaluations']} | {r['final_loss']:.2f} |")
    print(f"per-round loss md / precond: median {np.median(ratio):.5f}, min {ratio.min():.5f}, "
          f"max {ratio.max():.5f}")


if __name__ == "__main__":
    main()
