"""JAM beside the public-data baselines PMW^Pub and GEM^Pub, and AIM (no public data) — issue 19.

The JAM paper's comparison on the adult public splits (adult-public-split: one private table, four
public tables of growing bias, 025 … 100), all 3-way workload, δ = 1e-9, replace-one for every
method (as ``benchmarks/jam.py``), error = mean normalised L1 over the workload against the private
table. Each (seed, ε, split) runs its methods one after the other in this process, so they see the
same machine load; CPU seconds are the process's (fit + sample). AIM does not see the public table:
it runs once per (seed, ε). Resumable: a cell already in the output file is skipped.

Settings: JAM at its defaults with ``max_model_size=20`` (``--model-mb``) (as ``jam.py``/``jam_speed.py``); PMW^Pub
at its defaults (T = 5d rounds, 100 MW steps per refit); GEM^Pub with ``--gem-steps`` Adam steps per
round (default 30, the CPU time box of ``gsd_gem.py``; the preset's default is 200) after
``--gem-pretrain`` steps on the public data's workload marginals (default 1000; the preset's default
is ``steps``). On one CPU core a pretraining step over adult's 455 3-way marginals (2.6M cells) takes
about 0.5 s, so GEM^Pub at the preset's defaults does not fit in an hour (RESULTS).

Run:  taskset -c 0 .venv/bin/python benchmarks/public_baselines.py [--epsilons 0.1 1] [--seeds 0 1 2]
      .venv/bin/python benchmarks/public_baselines.py --table     # markdown summary of the file
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from jam import DATASETS, DELTA, WORKLOAD, load

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "public_baselines.jsonl"
METHODS = ["jam", "pmw-pub", "gem-pub", "aim"]


def _fit(method, private, public, eps, seed, gem_steps, model_mb=20.0):
    from privmarg import registry

    kw = {"seed": seed, "neighbour": "replace_one", "workload": WORKLOAD}
    if method in ("jam", "aim"):
        kw["max_model_size"] = model_mb
    if method == "gem-pub":
        kw["steps"], kw["pretrain_steps"] = gem_steps
    mech = registry.make_preset(method, eps, DELTA, **kw)
    return mech.fit(private) if method == "aim" else mech.fit(private, public=public)


def run(args):
    import privmarg
    from privmarg import Dataset
    from privmarg.core import parse_workload
    from privmarg.evaluation import workload_error

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {json.loads(line)["key"] for line in out.open() if line.strip()}
    data = {name: load(name) for name in args.datasets}
    for seed in args.seeds:
        for eps in args.epsilons:
            for i, name in enumerate(args.datasets):
                private, public = data[name]
                wl = parse_workload(WORKLOAD, private.domain)
                private_file = DATASETS[name][:2]
                for method in args.methods:
                    if method == "aim" and any(DATASETS[o][:2] == private_file for o in args.datasets[:i]):
                        continue  # the same private table as an earlier split's: AIM ran on it
                    split = ("none" if name.startswith("adult-") else name) if method == "aim" else name
                    key = f"{split}/{method}/eps={eps:g}/seed={seed}" + (
                        f"/steps={args.gem_steps}/pretrain={args.gem_pretrain}" if method == "gem-pub" else "")
                    if key in done:
                        continue
                    t0, w0 = time.process_time(), time.perf_counter()
                    mech = _fit(method, private, public, eps, seed, (args.gem_steps, args.gem_pretrain), args.model_mb)
                    syn = Dataset(mech.sample_codes(), private.domain)
                    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
                    rec = {"key": key, "dataset": name, "method": method, "epsilon": eps, "seed": seed,
                           "cpu_seconds": cpu, "wall_seconds": wall,
                           "workload_error": workload_error(private, syn, wl),
                           "public_only_error": workload_error(private, public, wl),
                           "rho_spent": mech.accountant_.rho_spent, "rho_total": mech.rho_total,
                           "gem_steps": args.gem_steps if method == "gem-pub" else None,
                           "gem_pretrain_steps": args.gem_pretrain if method == "gem-pub" else None,
                           "privmarg": privmarg.__version__}
                    print(json.dumps(rec), flush=True)
                    with out.open("a") as fh:
                        fh.write(json.dumps(rec) + "\n")
                    done.add(key)


def _group(dataset: str) -> str:
    """The private table a split uses: every adult split shares one."""
    return "adult" if dataset.startswith("adult-") else dataset


def table(path) -> str:
    recs = [json.loads(line) for line in Path(path).open() if line.strip()]
    err, cpu, pub = defaultdict(list), defaultdict(list), {}
    for r in recs:
        key = (_group(r["dataset"]), r["epsilon"], "aim") if r["method"] == "aim" else (
            r["dataset"], r["epsilon"], r["method"])
        err[key].append(r["workload_error"])
        cpu[key].append(r["cpu_seconds"])
        if r["method"] != "aim":
            pub[r["dataset"]] = r["public_only_error"]

    def cell(vals):
        if not vals:
            return ""
        if len(vals) == 1:
            return f"{vals[0]:.4f} (1)"
        return f"{np.mean(vals):.4f} ± {np.std(vals, ddof=1):.4f} ({len(vals)})"

    def verdict(jam, others):
        """JAM against the best of the others: "best" when lower by more than the two spreads' larger,
        "tie" within it, "behind" otherwise."""
        if len(jam) < 2 or not others:
            return ""
        name, vals = min(others, key=lambda kv: np.mean(kv[1]))
        gap = np.mean(vals) - np.mean(jam)
        spread = max(np.std(jam, ddof=1), np.std(vals, ddof=1) if len(vals) > 1 else 0.0)
        return ("best" if gap > spread else "tie" if gap >= -spread else "behind") + f" (vs {name}, {gap:+.4f})"

    rows = ["| split | ε | JAM | PMW^Pub | GEM^Pub | AIM (no public) | public only | JAM vs the best other | "
            "CPU s JAM / PMW^Pub / GEM^Pub / AIM |",
            "|---|---|---|---|---|---|---|---|---|"]
    for ds, eps in sorted({(d, e) for d, e, m in err if m != "aim"}):
        aim = (_group(ds), eps, "aim")
        secs = " / ".join(f"{np.mean(cpu[(ds, eps, m)]):.1f}" if cpu[(ds, eps, m)] else "–"
                          for m in ("jam", "pmw-pub", "gem-pub"))
        secs += " / " + (f"{np.mean(cpu[aim]):.1f}" if cpu[aim] else "–")
        others = [(n, v) for n, v in (("PMW^Pub", err[(ds, eps, "pmw-pub")]), ("GEM^Pub", err[(ds, eps, "gem-pub")]),
                                      ("AIM", err[aim]), ("public", [pub[ds]])) if v]
        rows.append(f"| {ds} | {eps:g} | {cell(err[(ds, eps, 'jam')])} | {cell(err[(ds, eps, 'pmw-pub')])} | "
                    f"{cell(err[(ds, eps, 'gem-pub')])} | {cell(err[aim])} | {pub[ds]:.4f} | "
                    f"{verdict(err[(ds, eps, 'jam')], others)} | {secs} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["adult-025", "adult-050", "adult-075", "adult-100", "gss"])
    ap.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--gem-steps", type=int, default=30)
    ap.add_argument("--gem-pretrain", type=int, default=1000, help="GEM^Pub's pretraining steps on the public marginals")
    ap.add_argument("--model-mb", type=float, default=20.0,
                    help="JAM's and AIM's max_model_size (MB; 20 in every table before session 28, the presets' default is 80)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--table", action="store_true", help="print the markdown summary of --out and exit")
    args = ap.parse_args()
    if args.table:
        print(table(args.out))
    else:
        run(args)


if __name__ == "__main__":
    main()
