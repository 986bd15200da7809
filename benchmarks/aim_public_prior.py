"""AIM's measurements refitted with a fixed public prior (issue #42: "a public-data mode for AIM").

AIM runs as usual on the private table (replace-one, all 3-way workload). Its final model is then
refitted (1,000 momentum iterations) with extra, free measurements from the public table: the 1-way
marginals and the 2-way marginals of the public table's maximum spanning tree (by mutual
information), scaled to N, each left out where a private measurement already covers it. They get
the loss weight of a measurement with noise ``mult`` × AIM's median σ. Error: 3-way workload error
against the private table. One JSON line per (split, ε, seed) on stdout::

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/aim_public_prior.py adult-025 1 0,1
"""

from __future__ import annotations

import itertools
import json
import sys

import numpy as np
from scipy.sparse.csgraph import minimum_spanning_tree

from jam import WORKLOAD, load


# kept as session 30 ran it: the library's privmarg.select.public_start.mutual_information sums in
# another order, which flips the tie between education and education-num (one variable coded twice)
# and so the tree and the recorded numbers in their last digits
def mutual_information(table, a: str, b: str) -> float:
    dom = table.domain
    p = table.project([a, b]).astype(float).reshape(dom.size([a]), dom.size([b]))
    p /= p.sum()
    pa, pb = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.nansum(p * np.log(p / (pa * pb))))


def public_tree(public) -> list[tuple[str, str]]:
    attrs = list(public.domain.attrs)
    w = np.zeros((len(attrs), len(attrs)))
    for i, j in itertools.combinations(range(len(attrs)), 2):
        w[i, j] = -mutual_information(public, attrs[i], attrs[j]) - 1e-9  # maximum = minimum of −MI
    tree = minimum_spanning_tree(w).tocoo()
    return [(attrs[i], attrs[j]) for i, j in zip(tree.row, tree.col)]


def main() -> None:
    from privmarg import Dataset, registry
    from privmarg.core import Measurement, parse_workload
    from privmarg.evaluation import workload_error
    from privmarg.generate.pgm.estimate import estimate

    name, eps, seeds = sys.argv[1], float(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
    mults = [float(m) for m in sys.argv[4].split(",")] if len(sys.argv) > 4 else [0.3, 1.0, 3.0]
    private, public = load(name)
    dom, n = private.domain, len(private)
    wl = parse_workload(WORKLOAD, dom)
    edges, scale = public_tree(public), n / len(public)
    for seed in seeds:
        aim = registry.make_preset("aim", eps, 1e-9, seed=seed, neighbour="replace_one", workload=WORKLOAD).fit(private)
        out = {"dataset": name, "epsilon": eps, "seed": seed,
               "aim": workload_error(private, Dataset(aim.sample_codes(), dom), wl)}
        measured = [set(m.attrs) for m in aim.measurements_]
        sigma = float(np.median([m.sigma for m in aim.measurements_ if m.sigma]))
        free = [e for e in edges if not any(set(e) <= s for s in measured)]
        free += [(a,) for a in dom.attrs if not any({a} <= s for s in measured)]
        for mult in mults:
            prior = [Measurement(c, public.project(list(c)).astype(float) * scale, None, source="public",
                                 weight=1.0 / (2.0 * (mult * sigma) ** 2)) for c in free]
            model = estimate(dom, list(aim.measurements_) + prior, total=float(n), iters=1000, method="momentum")
            syn = Dataset(model.sample(n, np.random.default_rng(seed)), dom)
            out[f"prior_x{mult:g}"] = workload_error(private, syn, wl)
        out["public_marginals"] = len(free)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
