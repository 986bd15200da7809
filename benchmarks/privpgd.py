"""PrivPGD vs AIM and MST on adult, in the PrivPGD paper's setting (Donhauser et al. 2024, §4).

Setting: all 2-way marginals, (ε, δ) = (2.5, 1e-5), replace-one neighbouring for every method
(the paper's AIM/MST baselines use the bounded relation too), AIM with the all-2way workload and an
80 MB model cap, MST as is (with its domain compression). PrivPGD with the generator's defaults (the
fast CPU profile: N particles, 400 epochs, projection with 32 fixed directions and early stopping;
see ``PrivPGDGenerator``), or with ``--paper`` the paper's hyperparameters (100k particles, 1000
epochs, batches of 5, 10 directions, 80% masking; projection 1750 iterations × 200 fresh
directions). ``--particles/--epochs/--proj-iters`` override single settings. Optionally
``aim+privpgd``: AIM's selected measurements turned into records by PrivPGD
(``AIM(..., generator=PrivPGDGenerator(...))``).

Metrics (privmarg.evaluation.metrics; same query sets for every method, metric seed 0): average
2-way SW1 and TV, covariance error, 3-sparse counting and thresholding query errors (relative, 200
queries each), plus wall time and peak memory. Every (method, seed) cell runs in a fresh
subprocess, so the peak resident set size (ru_maxrss, which also counts torch's allocations) is that
run's own; ``mem_delta_mb`` subtracts the RSS after imports and data loading. On CUDA the peak
allocated GPU memory is recorded too.

Cells are appended to a JSONL file as they finish; a rerun skips finished cells (resume).

Cost: the default profile takes a few minutes per run on adult on a 2-core CPU (one torch thread:
``--threads 1``, the default, is the fastest when other jobs share the cores). The paper's settings
(``--paper``) are GPU-sized: on a 2-core CPU expect roughly 1 h for the projection step and 1–2 h
for the 1000 epochs per run; a GPU takes minutes.

Run (full):   .venv/bin/python benchmarks/privpgd.py
Paper:        .venv/bin/python benchmarks/privpgd.py --paper --out benchmarks/results/privpgd_adult_paper.jsonl
Smoke:        .venv/bin/python benchmarks/privpgd.py --seeds 0 --epochs 2 --particles 5000 \\
                  --proj-iters 5 --aim-iters 50 --out /tmp/privpgd_smoke.jsonl
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _data import folder  # the bundled datasets, or ../shared/data for fire and salary

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("privpgd", "privpgd-fine", "aim", "mst", "aim+privpgd")
LEGACY = ("privpgd-mask0.8",)  # earlier default (80% gradient masking), kept in the results file
METRICS = ("sw1_2way", "tv_2way", "covariance_error", "counting_query_error", "thresholding_query_error")


def load(name: str = "adult"):
    """An integer-coded table with its domain file: bundled (adult, titanic) or ../shared/data/NAME."""
    from privmarg import Dataset, Domain

    data = folder(name)
    dom = Domain.from_json(data / "domain.json")
    for file in (f"{name}.csv.gz", "private.csv.gz", f"{name}.csv", "private.csv"):
        if (data / file).is_file():
            return Dataset.read(data / file, dom)
    raise SystemExit(f"{data}: no {name}.csv(.gz) or private.csv(.gz)")


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def generator_kwargs(args) -> dict:
    from privmarg.generate.privpgd.privpgd import PrivPGDGenerator

    kw = dict(PrivPGDGenerator.PAPER) if args.paper else {}
    for key, val in (("n_particles", args.particles), ("epochs", args.epochs), ("proj_iters", args.proj_iters)):
        if val is not None:
            kw[key] = val
    defaults = PrivPGDGenerator()
    for item in args.gen or []:
        key, val = item.split("=", 1)
        default = getattr(defaults, key)  # cast to the default's type (None defaults are integers)
        if isinstance(default, bool):  # bool("False") is True
            if val.lower() not in ("1", "0", "true", "false"):
                raise SystemExit(f"--gen {key}: give true/false or 1/0, not {val!r}")
            kw[key] = val.lower() in ("1", "true")
        else:
            kw[key] = int(val) if default is None else type(default)(val)
    return dict(kw, device=args.device)


def build(method: str, args):
    from privmarg import AIM, MST, PrivPGD
    from privmarg.generate.privpgd.privpgd import PrivPGDGenerator

    common = dict(neighbour="replace_one", seed=args.seed)
    eps, delta = args.epsilon, args.delta
    if args.defaults:  # what `privmarg synth --method M` runs: the preset's own defaults
        if method in ("privpgd", "privpgd-fine"):  # -fine: the measurement before grouping (session 33)
            gen = generator_kwargs(args)
            share = {} if args.group_share is None else {"group_noise_share": args.group_share}
            return PrivPGD(eps, delta, seed=args.seed, grouped=method == "privpgd", **share,
                           **({"generator": PrivPGDGenerator(**gen)} if args.gen else {}))
        if method == "aim+privpgd":  # AIM's own selection (replace-one, as PrivPGD's), PrivPGD's particles
            return AIM(eps, delta, seed=args.seed, neighbour="replace_one",
                       generator=PrivPGDGenerator(**generator_kwargs(args)))
        return {"aim": AIM, "mst": MST}[method](eps, delta, seed=args.seed)
    aim_kw = dict(workload="all-2way", max_model_size=80.0)
    if args.aim_iters is not None:
        aim_kw.update(iters=args.aim_iters, final_iters=args.aim_iters)
    if method == "privpgd":
        return PrivPGD(eps, delta, generator=PrivPGDGenerator(**generator_kwargs(args)), **common)
    if method == "aim":
        return AIM(eps, delta, **aim_kw, **common)
    if method == "mst":
        kw = {} if args.aim_iters is None else dict(iters=args.aim_iters, final_iters=args.aim_iters)
        return MST(eps, delta, **kw, **common)
    if method == "aim+privpgd":
        return AIM(eps, delta, **aim_kw, **common, generator=PrivPGDGenerator(**generator_kwargs(args)))
    raise ValueError(method)


def worker(args) -> dict:
    """One (method, seed) cell: fit, sample, evaluate; returns a JSON-able record."""
    import torch

    from privmarg import Dataset
    from privmarg.evaluation.metrics import (
        counting_query_error,
        covariance_error,
        sw1_2way,
        thresholding_query_error,
        tv_kway,
    )

    torch.set_num_threads(args.threads)
    real = load(args.dataset)
    base_rss = _rss_mb()
    cuda = args.device not in (None, "cpu") and torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    mech = build(args.method, args)
    t0, c0 = time.perf_counter(), time.process_time()
    mech.fit(real)
    codes = mech.sample_codes()
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - c0  # this process's CPU time: robust to a shared core
    peak = _rss_mb()
    synth = Dataset(codes, real.domain)
    rec = {
        "method": args.method, "seed": args.seed, "epsilon": args.epsilon, "delta": args.delta,
        "rows": int(len(codes)), "seconds": seconds, "cpu_seconds": cpu_seconds, "peak_rss_mb": peak, "mem_delta_mb": peak - base_rss,
        "rho_spent": float(mech.accountant_.rho_spent), "rho_total": float(mech.rho_total),
        "sw1_2way": sw1_2way(real, synth, seed=0),
        "tv_2way": tv_kway(real, synth, k=2),
        "covariance_error": covariance_error(real, synth),
        "counting_query_error": counting_query_error(real, synth, seed=0),
        "thresholding_query_error": thresholding_query_error(real, synth, seed=0),
    }
    if cuda:
        rec["gpu_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    gen = getattr(mech, "generator_", None)  # PrivPGD's fitted generator; with generator= it is the model
    if gen is None and hasattr(mech.model_, "timings_"):
        gen = mech.model_
    if gen is not None:
        rec["privpgd_timings"] = gen.timings_
        rec["privpgd_device"] = str(gen.device_)
        rec["privpgd_params"] = {k: v for k, v in gen.get_params().items() if k != "seed"}
    return rec


def summarise(rows: list[dict]) -> str:
    by = {}
    for r in rows:
        by.setdefault(r["method"], []).append(r)
    cols = METRICS + ("seconds", "peak_rss_mb")
    head = "| method | seeds | " + " | ".join(cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 2)]
    for m in METHODS + LEGACY:
        if m not in by:
            continue
        rs = by[m]
        cells = []
        for c in cols:
            v = np.array([r[c] for r in rs], dtype=float)
            cells.append(f"{v.mean():.4g} ± {v.std():.2g}" if len(v) > 1 else f"{v.mean():.4g}")
        lines.append(f"| {m} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", nargs="+", default=["privpgd", "aim", "mst"], choices=METHODS)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--epsilon", type=float, default=2.5)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--paper", action="store_true", help="PrivPGD with the paper's settings (GPU-sized)")
    ap.add_argument("--particles", type=int, default=None, help="default: the generator's (N)")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--proj-iters", type=int, default=None)
    ap.add_argument("--gen", nargs="*", metavar="KEY=VALUE",
                    help="other PrivPGDGenerator settings, e.g. mask_rate=0 init=marginals")
    ap.add_argument("--aim-iters", type=int, default=None, help="mirror-descent iterations (AIM/MST); default theirs")
    ap.add_argument("--device", default=None, help="PrivPGD device: cpu, cuda (default: auto)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for PrivPGD (1: robust under load)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "privpgd_adult.jsonl")
    ap.add_argument("--defaults", action="store_true",
                    help="each preset with its own defaults only (what `privmarg synth --method M` runs)")
    ap.add_argument("--group-share", type=float, default=None, help="PrivPGD's group_noise_share (default its own)")
    ap.add_argument("--dataset", default="adult", help="adult (default), titanic, or a folder of ../shared/data")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--method", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        print(json.dumps(worker(args)))
        return

    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    rows = []
    if args.out.exists():
        for line in args.out.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                rows.append(r)
                done.add((r["method"], r["seed"], r["epsilon"]))
    for seed in args.seeds:
        for method in args.methods:
            if (method, seed, args.epsilon) in done:
                print(f"skip {method} seed {seed} (done)", file=sys.stderr)
                continue
            cmd = [sys.executable, __file__, "--worker", "--dataset", args.dataset, "--method", method, "--seed", str(seed),
                   "--epsilon", str(args.epsilon), "--delta", str(args.delta), "--threads", str(args.threads)]
            for flag, val in (("--particles", args.particles), ("--epochs", args.epochs),
                              ("--proj-iters", args.proj_iters)):
                if val is not None:
                    cmd += [flag, str(val)]
            if args.paper:
                cmd.append("--paper")
            if args.defaults:
                cmd.append("--defaults")
            if args.gen:
                cmd += ["--gen", *args.gen]
            if args.aim_iters is not None:
                cmd += ["--aim-iters", str(args.aim_iters)]
            if args.group_share is not None:
                cmd += ["--group-share", str(args.group_share)]
            if args.device is not None:
                cmd += ["--device", args.device]
            print(f"run {method} seed {seed} ...", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                print(f"  FAILED ({res.returncode}):\n{res.stderr[-3000:]}", file=sys.stderr)
                continue
            rec = json.loads(res.stdout.strip().splitlines()[-1])
            rows.append(rec)
            with open(args.out, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(f"  done in {time.perf_counter() - t0:.1f}s: "
                  + ", ".join(f"{k}={rec[k]:.4g}" for k in METRICS), file=sys.stderr, flush=True)
    rows = [r for r in rows if r["epsilon"] == args.epsilon and r["seed"] in args.seeds]
    table = summarise(rows)
    print(table)
    args.out.with_suffix(".md").write_text(
        f"{args.dataset}, all 2-way, eps={args.epsilon}, delta={args.delta}, replace-one; mean ± std over seeds\n\n"
        + table + "\n")


if __name__ == "__main__":
    main()
