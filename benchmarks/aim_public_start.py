"""AIM started from the public table's model (issue #42: "a public-data mode for AIM";
:mod:`privmarg.select.public_start`), against AIM without public data.

Variants (4th argument, comma-separated): ``aim`` (no public data), ``start`` (``public_start=True``:
always starts from the public tree model), ``auto`` (the default: by the budget rule), ``rawauto``
(``auto`` with the tree ranked by raw public mutual information, no allowance for chance), ``jam`` and
``jamstart`` (JAM, and JAM whose first model is the same public tree model: tried, not built).
Replace-one, δ = 1e-9, all 3-way workload; error: 3-way workload error against the private table.
One JSON line per (split, ε, seed) on stdout::

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python benchmarks/aim_public_start.py adult-025 1 0,1 aim,auto
"""

from __future__ import annotations

import json
import sys
import time

from jam import WORKLOAD, load


def main() -> None:
    from privmarg import AIM, JAM, Dataset
    from privmarg.core import parse_workload
    from privmarg.evaluation import workload_error
    from privmarg.select.jam import JAMSelector
    from privmarg.select import public_start as ps
    from privmarg.select.public_start import public_start

    chance = ps.chance_information

    class PublicStartJAM(JAMSelector):
        def initial(self, state):
            super().initial(state)
            pairs = [r for r in state.candidates if len(r) == 2]
            tree = ps.read_public_tree(state.ctx.public, state.domain, pairs)
            model, kept = public_start(self.loop, tree, state.domain, state.ctx.total, state.ctx.zeros)
            for m in kept:
                state.session.record(m)
            return model

    name, eps, seeds = sys.argv[1], float(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
    variants = sys.argv[4].split(",") if len(sys.argv) > 4 else ["aim", "start"]
    private, public = load(name)
    dom = private.domain
    wl = parse_workload(WORKLOAD, dom)
    for seed in seeds:
        out = {"dataset": name, "epsilon": eps, "seed": seed}
        for v in variants:
            t0 = time.process_time()
            if v in ("jam", "jamstart"):
                mech = JAM(eps, 1e-9, workload=WORKLOAD, seed=seed)
                if v == "jamstart":
                    old = mech.selector
                    mech.selector = PublicStartJAM(WORKLOAD, loop=old.loop, max_model_size=old.max_model_size,
                                                   precise_selector=old.precise_selector)
                mech.fit(private, public=public)
            else:
                start = {"aim": False, "start": True, "auto": None, "rawauto": None}[v]
                # rawauto: the tree by raw public mutual information, no allowance for chance
                ps.chance_information = (lambda shape, rows: 0.0) if v == "rawauto" else chance
                mech = AIM(eps, 1e-9, workload=WORKLOAD, seed=seed, neighbour="replace_one", public_start=start)
                mech.fit(private, public=public)
                out[v + "_started"] = mech.public_start_
            out[v] = workload_error(private, Dataset(mech.sample_codes(), dom), wl)
            out[v + "_cpu"] = round(time.process_time() - t0, 2)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
