"""JAM-PGM vs AIM (no public data) vs the public data alone: workload error (issue #5).

Data (bundled, privmarg.datasets): adult-public-split (private with each of public-025/050/075/100)
and titanic (private, public). Workload: all 3-way marginals; δ = 1e-9;
both mechanisms under replace-one neighbours (JAM's relation; AIM with its replace-one
sensitivities, as in the JAM paper's comparison). Error: AIM's workload error, the mean over the
workload of ‖M_r(D)/N − M_r(D̂)/N̂‖₁ (privmarg.evaluation.workload_error). "public" is the public
table itself used as the synthetic data (no privacy cost, no randomness).

Each finished cell (dataset, method, epsilon, seed) is appended to a JSONL file at once, so an
interrupted run resumes where it stopped. At the end a markdown table (mean ± std over seeds) is
printed; ``--update-results`` also writes it into benchmarks/RESULTS.md (section "JAM-PGM").

Run:  nice .venv/bin/python benchmarks/jam.py [--datasets titanic adult-025 ...] [--epsilons 0.1 ...]
          [--seeds 0 1 2] [--methods jam aim] [--out benchmarks/results/jam.jsonl] [--update-results]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np

from _data import folder  # the bundled datasets, or ../shared/data for fire and salary

ROOT = Path(__file__).resolve().parents[1]
ADULT = folder("adult-public-split")
TITANIC = folder("titanic")
DATASETS = {
    **{f"adult-{p}": (ADULT, "private.csv.gz", f"public-{p}.csv.gz") for p in ("025", "050", "075", "100")},
    "titanic": (TITANIC, "private.csv.gz", "public.csv.gz"),
    # two decades of the GSS (benchmarks/gss_pair.py): 2010-2018 private, 2000-2008 public
    "gss": (ROOT / "benchmarks" / "data" / "gss", "private.csv.gz", "public.csv.gz"),
}
# not bundled (../shared/data): resolved when asked for, so the scripts run without them
EXTRA = {"fire": ("private.csv.gz", "public.csv"), "salary": ("private.csv.gz", "public.csv")}
EPSILONS = [0.1, 0.3, 1.0, 3.0]
METHODS = ["jam", "aim"]
DELTA = 1e-9
WORKLOAD = "all-3way"
SECTION = "## JAM-PGM: public + private data (issue #5)"


def load(name):
    from privmarg import Dataset, Domain

    path, priv, pub = DATASETS[name] if name in DATASETS else (folder(name), *EXTRA[name])
    dom = Domain.from_json(path / "domain.json")
    return Dataset.read(path / priv, dom), Dataset.read(path / pub, dom)


def run_cell(method, private, public, eps, seed, **kw):
    from privmarg import AIM, JAM, Dataset

    t0 = time.perf_counter()
    if method == "jam":
        mech = JAM(eps, DELTA, workload=WORKLOAD, seed=seed, **kw).fit(private, public=public)
        extra = {"public_marginals": len(mech.public_marginals_), "private_marginals": len(mech.private_marginals_),
                 "rho_used_share": mech.rho_used_ / mech.rho_total}
    elif method == "aim":
        mech = AIM(eps, DELTA, workload=WORKLOAD, seed=seed, neighbour="replace_one", **kw).fit(private)
        extra = {"private_marginals": len(mech.measurements_), "rounds": mech.rounds_}
    else:
        raise ValueError(method)
    syn = Dataset(mech.sample_codes(), private.domain)
    return syn, time.perf_counter() - t0, extra


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--epsilons", type=float, nargs="+", default=EPSILONS)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "jam.jsonl"))
    ap.add_argument("--iters", type=int, default=None, help="JAM's estimation iterations per round (default: JAM's; AIM always runs its defaults)")
    ap.add_argument("--max-model-size", type=float, default=80.0, help="model capacity in MB (default 80)")
    ap.add_argument("--update-results", action="store_true", help="write the table into benchmarks/RESULTS.md")
    args = ap.parse_args()

    from privmarg.evaluation import workload_error
    from privmarg.core import parse_workload

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                done.add((r["dataset"], r["method"], r["epsilon"], r["seed"]))

    def append(rec):
        print(json.dumps(rec), flush=True)
        with open(out, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    # AIM does not see the public table: the four adult splits share one private table, so AIM runs
    # once per (ε, seed) there and its record is reused for the other splits. Cells run seed by seed,
    # so an interrupted sweep still has the whole table for its first seeds.
    data = {name: load(name) for name in args.datasets}
    wls = {name: parse_workload(WORKLOAD, data[name][0].domain) for name in args.datasets}
    aim_cache: dict = {}
    if out.exists():  # resume: AIM records already on file serve the other splits too
        for line in out.read_text().splitlines():
            r = json.loads(line) if line.strip() else {}
            if r.get("method") == "aim" and r.get("dataset") in DATASETS and "shared_with" not in r:
                folder, priv, _ = DATASETS[r["dataset"]]
                aim_cache[(folder, priv, r["epsilon"], r["seed"])] = r
    for name in args.datasets:
        private, public = data[name]
        if (name, "public", None, None) not in done:
            append({"dataset": name, "method": "public", "epsilon": None, "seed": None,
                    "workload_error": workload_error(private, public, wls[name]), "seconds": 0.0,
                    "rows_private": len(private), "rows_public": len(public)})
    for seed in args.seeds:
        for eps in args.epsilons:
            for name in args.datasets:
                private, public = data[name]
                for method in args.methods:
                    if (name, method, eps, seed) in done:
                        continue
                    kw = {"max_model_size": args.max_model_size}
                    if args.iters is not None and method == "jam":  # AIM keeps its defaults
                        kw["iters"] = args.iters
                    key = (DATASETS[name][0], DATASETS[name][1], eps, seed)
                    if method == "aim" and key in aim_cache:
                        append({**aim_cache[key], "dataset": name, "shared_with": aim_cache[key]["dataset"]})
                        continue
                    syn, secs, extra = run_cell(method, private, public, eps, seed, **kw)
                    rec = {"dataset": name, "method": method, "epsilon": eps, "seed": seed,
                           "workload_error": workload_error(private, syn, wls[name]), "seconds": secs,
                           "iters": kw.get("iters", "default"), "max_model_size": args.max_model_size, **extra}
                    append(rec)
                    if method == "aim":
                        aim_cache[key] = rec
    table = summarize(out)
    print(table)
    if args.update_results:
        update_results(table)


def summarize(path) -> str:
    recs = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    public = {r["dataset"]: r["workload_error"] for r in recs if r["method"] == "public"}
    cells: dict = {}
    for r in recs:
        if r["method"] != "public":
            cells.setdefault((r["dataset"], r["epsilon"]), {}).setdefault(r["method"], []).append(r)
    lines = [
        "| dataset | ε | JAM | AIM (no public) | public only | JAM/AIM | JAM public picks | JAM s | AIM s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    order = {n: i for i, n in enumerate(DATASETS)}
    for (name, eps) in sorted(cells, key=lambda k: (order.get(k[0], 99), k[1])):
        c = cells[(name, eps)]

        def fmt(method):
            rs = c.get(method, [])
            if not rs:
                return "–", None
            e = np.array([r["workload_error"] for r in rs])
            return f"{e.mean():.4f} ± {e.std():.4f} ({len(e)})", e.mean()

        jam_s, jam_m = fmt("jam")
        aim_s, aim_m = fmt("aim")
        ratio = f"{jam_m / aim_m:.2f}" if jam_m is not None and aim_m else "–"
        picks = "–"
        if c.get("jam"):
            p = np.mean([r["public_marginals"] for r in c["jam"]])
            tot = np.mean([r["public_marginals"] + r["private_marginals"] for r in c["jam"]])
            picks = f"{p:.1f}/{tot:.0f}"
        secs = {m: (f"{np.mean([r['seconds'] for r in c[m]]):.0f}" if c.get(m) else "–") for m in ("jam", "aim")}
        pub = f"{public[name]:.4f}" if name in public else "–"
        lines.append(f"| {name} | {eps:g} | {jam_s} | {aim_s} | {pub} | {ratio} | {picks} | {secs['jam']} | {secs['aim']} |")
    return "\n".join(lines)


def update_results(table: str) -> None:
    path = ROOT / "benchmarks" / "RESULTS.md"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    body = (f"{SECTION}\n\nGenerated by `benchmarks/jam.py` (workload all 3-way, δ = 1e-9, replace-one for both "
            "mechanisms; JAM: T = 30 rounds, α = 0.2, equal weights; workload error = mean normalised L1 over "
            "the workload, mean ± std over seeds (count in parentheses); \"public only\" uses the public table "
            "as the synthetic data).\n\n" + table + "\n")
    pattern = re.compile(re.escape(SECTION) + r".*?(?=\n## |\Z)", re.S)
    text = pattern.sub(lambda _: body.rstrip("\n"), text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + body
    path.write_text(text.rstrip("\n") + "\n")


if __name__ == "__main__":
    main()
