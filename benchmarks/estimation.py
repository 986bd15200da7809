"""Estimation engine benchmark: privmarg vs mbi on identical noisy measurements of adult.

Measurements: all 14 one-way marginals plus 12 fixed two- and three-way cliques, Gaussian noise
sigma=10, seed 0; total estimated from the measurements (add/remove setting). Both engines
minimise the same loss L = Σ ||M_r(p) − y_r||² / (2σ²); the loss of each engine's iterates is
recorded against wall time. The reference optimum L* is the lowest loss any run reached.

``--problem fire`` fits fire's 3.6 MB model of benchmarks/clique_maps.py instead (15 one-way and 28
two-way marginals, σ = 50, known total), ``--problem fire93`` its 93 MB model (two more pairs).
Versions (numpy, jax, jaxlib, mbi), the CPU affinity and the load average go into the results.

Run:  taskset -c 1 .venv/bin/python benchmarks/estimation.py [--seconds 60] [--problem adult]
      [--engines momentum md precond mbi] [--out benchmarks/results/estimation.json]
(mbi comes with `make bench-deps`; without it only privmarg rows are produced.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from _data import folder  # the bundled datasets, or ../shared/data for fire and salary

ROOT = Path(__file__).resolve().parents[1]
DATA = folder("adult")
sys.path.insert(0, str(Path(__file__).resolve().parent))

CLIQUES = [("age", "education-num"), ("education-num", "occupation"), ("occupation", "sex", "income>50K"),
           ("race", "native-country"), ("marital-status", "relationship", "sex"), ("workclass", "hours-per-week"),
           ("age", "marital-status", "income>50K"), ("capital-gain", "income>50K"), ("capital-loss", "income>50K"),
           ("fnlwgt", "age"), ("hours-per-week", "sex", "income>50K"), ("education-num", "workclass")]


def measurements(sigma=10.0, seed=0):
    from privmarg import Dataset, Domain, Measurement

    dom = Domain.from_json(DATA / "domain.json")
    data = Dataset.read(DATA / "adult.csv.gz", dom)
    rng = np.random.default_rng(seed)
    ms = [Measurement((a,), data.project([a]) + rng.normal(0, sigma, dom[a]), sigma) for a in dom.attrs]
    ms += [Measurement(c, data.project(c) + rng.normal(0, sigma, dom.size(c)), sigma) for c in CLIQUES]
    return dom, ms


def problem(name):
    """(domain, measurements, total or None) of a benchmark problem."""
    if name == "adult":
        return (*measurements(), None)
    from clique_maps import CLIQUES, EXTRA, fire_measurements

    dom, data, ms = fire_measurements(CLIQUES + (EXTRA if name == "fire93" else []))
    return dom, ms, float(len(data))


def machine_notes():
    import os
    import platform

    notes = {"numpy": np.__version__, "python": platform.python_version(),
             "cpu_affinity": sorted(os.sched_getaffinity(0)), "loadavg_at_start": os.getloadavg()}
    from importlib.metadata import PackageNotFoundError, version

    for mod in ("jax", "jaxlib", "mbi"):  # by metadata: importing mbi before x64 is set would warn
        try:
            notes[mod] = version(mod)
        except PackageNotFoundError:
            notes[mod] = None
    return notes


def run_privmarg(dom, ms, method, seconds, total=None):
    from privmarg import estimate

    trace = []
    t0 = time.perf_counter()

    class Stop(Exception):
        pass

    def cb(it, loss):
        trace.append((it, time.perf_counter() - t0, loss))

    # iteration cap chosen so the run ends near the time budget
    probe = estimate(dom, ms, iters=20, tol=0, method=method, total=total)
    per_iter = probe.info.seconds / 20
    t0 = time.perf_counter()
    estimate(dom, ms, iters=max(50, int(seconds / per_iter)), tol=0, method=method, callback=cb, total=total)
    return trace


def run_mbi(dom, ms, seconds, total=None):
    from peers import mbi_estimate

    meas = [(m.attrs, m.y, m.sigma) for m in ms]
    probe = mbi_estimate(dom.to_dict(), meas, total, 50, warmup=True)
    per_iter = probe["seconds"] / probe["iters"]
    r = mbi_estimate(dom.to_dict(), meas, total, max(50, int(seconds / per_iter)), warmup=True, trace=True)
    return [(it, s, loss) for it, s, loss in r["trace"]], r["compile_seconds"]


def time_to(trace, target):
    for it, s, loss in trace:
        if loss <= target:
            return s, it
    return None, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0, help="wall-time budget per engine run")
    ap.add_argument("--problem", default="adult", choices=["adult", "fire", "fire93"])
    ap.add_argument("--engines", nargs="+", default=["momentum", "md", "precond", "mbi"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "estimation.json"))
    args = ap.parse_args()
    dom, ms, total = problem(args.problem)
    runs = {}
    notes = machine_notes()
    notes["problem"] = args.problem
    for engine in args.engines:  # in the order given: alternate orders across runs to cancel drift
        if engine == "mbi":
            try:
                runs["mbi-2.0.0"], notes["mbi_compile_seconds"] = run_mbi(dom, ms, args.seconds, total)
                print(f"mbi: final loss {runs['mbi-2.0.0'][-1][2]:.1f}", flush=True)
            except ImportError as e:
                notes["mbi"] = f"skipped: {e}"
            continue
        runs[f"privmarg-{engine}"] = run_privmarg(dom, ms, engine, args.seconds, total)
        print(f"privmarg-{engine}: {len(runs[f'privmarg-{engine}'])} iterations, final loss "
              f"{runs[f'privmarg-{engine}'][-1][2]:.1f}", flush=True)
    best = min(loss for tr in runs.values() for _, _, loss in tr)
    rows = []
    for name, tr in runs.items():
        row = {"engine": name, "iterations": tr[-1][0], "seconds": round(tr[-1][1], 2), "final_loss": tr[-1][2],
               "loss_ratio_to_best": tr[-1][2] / best}
        for rel in (1e-2, 1e-3):
            s, it = time_to(tr, best * (1 + rel))
            row[f"seconds_to_within_{rel:g}"] = None if s is None else round(s, 2)
        for t in (5, 10, 30):
            row[f"loss_at_{t}s"] = min((loss for _, s, loss in tr if s <= t), default=None)
        rows.append(row)
    if "mbi-2.0.0" in runs:
        mbi_final = runs["mbi-2.0.0"][-1]
        for row in rows:
            s, _ = time_to(runs[row["engine"]], mbi_final[2])
            row["seconds_to_mbi_final_loss"] = None if s is None else round(s, 2)
            row["time_ratio_vs_mbi"] = None if s is None else round(s / mbi_final[1], 3)
    out = {"best_loss": best, "rows": rows, "notes": notes,
           "traces": {k: v[:: max(1, len(v) // 200)] for k, v in runs.items()}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    cols = ["engine", "iterations", "seconds", "final_loss", "seconds_to_within_0.01", "seconds_to_within_0.001",
            "loss_at_5s", "loss_at_10s", "loss_at_30s", "seconds_to_mbi_final_loss", "time_ratio_vs_mbi"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    print(f"best loss reached by any run: {best:.2f}")


def _fmt(v):
    if v is None:
        return "not reached"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)


if __name__ == "__main__":
    main()
