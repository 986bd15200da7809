"""Warm-started estimation, as AIM runs it every round: preconditioned steps vs plain mirror descent.

Problem: fire's 15 one-way marginals plus the first 20 of the two-way marginals AIM selected
(benchmarks/clique_maps.py), σ = 50, fitted for 250 iterations; then one more two-way marginal is
measured and the model refitted for 250 iterations from the previous potentials and step size,
once with ``method="precond"`` (the default) and once with ``method="md"``. Reports the loss after
50, 100 and 250 iterations, the belief-propagation passes (evaluations) and CPU seconds.

Run:  .venv/bin/python benchmarks/warm_start.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clique_maps import CLIQUES, fire_measurements  # noqa: E402


def main():
    from privmarg import estimate

    dom, data, ms = fire_measurements(CLIQUES[:21])
    prev = estimate(dom, ms[:-1], total=len(data), iters=250, tol=1e-4)
    print("| method | iterations | evaluations | CPU s | loss @50 | @100 | @250 |\n|---|---|---|---|---|---|---|")
    for method in ("precond", "md"):
        t = time.process_time()
        m = estimate(dom, ms, total=len(data), iters=250, tol=0, warm=prev.potentials, step=prev.step_size,
                     method=method)
        h = m.info.history
        print(f"| {method} | {m.info.iterations} | {m.info.evaluations} | {time.process_time() - t:.1f} | "
              f"{h[min(50, len(h) - 1)]:.1f} | {h[min(100, len(h) - 1)]:.1f} | {h[-1]:.1f} |")


if __name__ == "__main__":
    main()
