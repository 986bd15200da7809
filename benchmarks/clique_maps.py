"""Estimation cost on a large junction tree: CSR vs dense clique maps (the potentials -> clique
log-potentials and clique marginals -> measured marginals steps of every evaluation).

Measurements: fire's 15 one-way marginals plus the 28 two-way marginals AIM (all-2way workload,
ε = 1, seed 1, replace-one) had selected after 28 rounds, noise σ = 50, seed 0: a 3.6 MB junction
tree, the size where AIM on fire spends most of its time. Each setting fits the same problem for
a fixed number of iterations (tol = 0), alternating settings to cancel drift in machine load;
the losses must agree. CPU seconds (process time) are reported.

``--extra 2`` adds two more two-way marginals (Call Type x Station Area, Neighbourhoods x Call Type),
which fuse the tree into 5.3M- and 4.8M-cell cliques: a 93 MB model, the size AIM's 80 MB cap allows
late in a run on fire (use ``--iters 8`` there).

Run:  .venv/bin/python benchmarks/clique_maps.py [--iters 40] [--reps 3] [--extra 0|1|2]
"""

from __future__ import annotations

import argparse
import importlib
import json
import time

import numpy as np

from _data import folder  # the bundled datasets, or ../shared/data for fire and salary

DATA = folder("fire")  # not bundled: ../shared/data/fire

CLIQUES = [
    ("Battalion", "Fire Prevention District"), ("Neighborhooods - Analysis Boundaries", "Supervisor District"),
    ("Fire Prevention District", "Zipcode of Incident"), ("Battalion", "Station Area"),
    ("Fire Prevention District", "Neighborhooods - Analysis Boundaries"), ("Original Priority", "Priority"),
    ("Final Priority", "Priority"), ("Call Type", "Call Type Group"), ("ALS Unit", "Unit Type"),
    ("Neighborhooods - Analysis Boundaries", "Zipcode of Incident"), ("Call Final Disposition", "Call Type Group"),
    ("Station Area", "Zipcode of Incident"), ("Call Type Group", "Priority"), ("Call Type Group", "Unit Type"),
    ("Station Area", "Supervisor District"), ("Battalion", "Supervisor District"), ("ALS Unit", "Station Area"),
    ("Original Priority", "Unit Type"), ("Call Type Group", "Supervisor District"),
    ("Fire Prevention District", "Unit Type"), ("ALS Unit", "Call Type"), ("ALS Unit", "Fire Prevention District"),
    ("Fire Prevention District", "Supervisor District"), ("Supervisor District", "Zipcode of Incident"),
    ("Call Type Group", "Station Area"), ("Call Final Disposition", "Priority"), ("Station Area", "Unit Type"),
    ("Call Type", "Unit Type"),
]
EXTRA = [("Call Type", "Station Area"), ("Neighborhooods - Analysis Boundaries", "Call Type")]


def fire_measurements(cliques, sigma=50.0, seed=0):
    """(domain, data, measurements): fire's one-way marginals, then ``cliques``, with N(0, σ²) noise."""
    from privmarg import Dataset, Domain, Measurement

    dom = Domain.from_json(DATA / "domain.json")
    data = Dataset.read(DATA / "private.csv.gz", dom)
    rng = np.random.default_rng(seed)
    ms = [Measurement((a,), data.project([a]) + rng.normal(0, sigma, dom[a]), sigma) for a in dom.attrs]
    ms += [Measurement(c, data.project(c) + rng.normal(0, sigma, dom.size(c)), sigma) for c in cliques]
    return dom, data, ms


def main():
    from privmarg import model_size_mb

    est = importlib.import_module("privmarg.generate.pgm.estimate")
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--extra", type=int, default=0, choices=[0, 1, 2])
    args = ap.parse_args()
    dom, data, ms = fire_measurements(CLIQUES + EXTRA[:args.extra])
    settings = {"csr (all cliques)": 10**12, f"dense for cliques >= {est.DENSE_CLIQUE_CELLS} cells": est.DENSE_CLIQUE_CELLS}
    default = est.DENSE_CLIQUE_CELLS
    out: dict[str, list] = {k: [] for k in settings}
    for _ in range(args.reps):
        for name, cells in settings.items():
            est.DENSE_CLIQUE_CELLS = cells
            t = time.process_time()
            m = est.estimate(dom, ms, total=len(data), iters=args.iters, tol=0)
            out[name].append({"cpu_s": time.process_time() - t, "evaluations": m.info.evaluations,
                              "loss": m.info.loss})
    est.DENSE_CLIQUE_CELLS = default
    losses = {round(r["loss"], 6) for v in out.values() for r in v}
    print(f"model {model_size_mb(dom, [m.attrs for m in ms]):.2f} MB, {args.iters} iterations, losses {sorted(losses)}")
    for name, rows in out.items():
        cpu = [r["cpu_s"] for r in rows]
        print(f"{name:40s} cpu s per fit: median {np.median(cpu):.2f} (runs {', '.join(f'{c:.2f}' for c in cpu)}), "
              f"{rows[0]['evaluations']} evaluations")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
