"""No-regression check for the redesign (issue #14): one AIM fit on adult, old or new code.

AIM(ε = 1, δ = 1e-9, workload = all-3way, seed) on the whole adult table (../shared/data/adult),
fit, sample (the default number of rows), then the 3-way workload error of the synthetic table
against the real one: ``privmarg.evaluation.workload_error(real, synth, all_kway(domain, 3))``, the
mean L1 distance of normalised 3-way marginals, exactly the sweep's ``workload_error_3way``
(``privmarg.evaluation.report``). Appends one JSON line to
benchmarks/results/redesign_regression.jsonl: label, seed, error, fit wall/CPU seconds, sample
seconds, peak RSS, the machine load (/proc/loadavg and ``uptime``) before and after the run, the
privmarg source it imported (path, git commit, dirty or not), numpy/python versions and the CPU
affinity.

The script runs against both APIs (the calls it makes exist in both): the old code by putting its
source first on the path, e.g.

    git -C /work/main worktree add /work/wt-before bc6831b
    PYTHONPATH=/work/wt-before/src taskset -c 1 .venv/bin/python benchmarks/redesign_regression.py \
        --seed 0 --label before
    taskset -c 1 .venv/bin/python benchmarks/redesign_regression.py --seed 0 --label after

Run before/after interleaved (before s0, after s0, before s1, ...) on the same core, one at a time:
the machine is shared, and interleaving spreads its load over both sides alike.
``--summary`` prints the markdown table of the JSONL instead of running a fit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from privmarg.benchmark.runner import _reset_peak, _rss_mb  # in the old and the new code (now from privmarg.memory)

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[1] / "shared" / "data" / "adult"
OUT = HERE / "results" / "redesign_regression.jsonl"


def _load() -> dict:
    try:
        la = Path("/proc/loadavg").read_text().split()
    except OSError:
        la = []
    up = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"loadavg": [float(x) for x in la[:3]], "uptime": up}


def _git(src: Path) -> dict:
    def g(*a):
        r = subprocess.run(["git", "-C", str(src), *a], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None

    dirty = g("status", "--porcelain", "--", ".")
    return {"commit": g("rev-parse", "HEAD"), "subject": g("log", "-1", "--format=%s"),
            "src_dirty": None if dirty is None else bool(dirty)}


def run(seed: int, label: str, out: Path, epsilon: float, delta: float) -> dict:
    import numpy as np

    import privmarg
    from privmarg import AIM, Dataset, Domain
    from privmarg.evaluation import workload_error

    try:  # new layout (privmarg.core), else the old one (privmarg.workload)
        from privmarg.core import all_kway
    except ImportError:
        from privmarg.workload import all_kway

    src = Path(privmarg.__file__).resolve().parent
    load0 = _load()
    dom = Domain.from_json(DATA / "domain.json")
    data = Dataset.read(DATA / "adult.csv", dom)
    exact = _reset_peak()
    rss0 = _rss_mb("VmRSS")
    c0, t0 = time.process_time(), time.perf_counter()
    mech = AIM(epsilon, delta, workload="all-3way", seed=seed).fit(data)
    t1, c1 = time.perf_counter(), time.process_time()
    codes = np.asarray(mech.sample_codes())
    t2 = time.perf_counter()
    peak = _rss_mb("VmHWM") if exact else None
    if peak is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    synth = Dataset(codes, dom)
    err = workload_error(data, synth, all_kway(dom, 3))
    load1 = _load()
    # the fit's path, sample-free: same selections and the same final loss mean the same model
    ms = list(mech.measurements_)
    sel = "|".join(",".join(m.attrs) for m in ms)
    info = mech.model_.info
    rec = {
        "label": label, "seed": seed, "epsilon": epsilon, "delta": delta, "workload": "all-3way",
        "dataset": "adult", "rows_real": len(data), "rows_synthetic": len(synth),
        "workload_error_3way": err,
        "fit_seconds": t1 - t0, "fit_cpu_seconds": c1 - c0, "sample_seconds": t2 - t1,
        "peak_rss_mb": peak, "rss_before_mb": rss0,
        "rounds": int(mech.rounds_), "measurements": len(ms),
        "selected_sha1": hashlib.sha1(sel.encode()).hexdigest()[:12],
        "sigma_sum": float(sum(m.sigma for m in ms)), "final_loss": float(info.loss),
        "final_iterations": int(info.iterations), "model_size_mb": float(mech.model_.size_mb()),
        "rss_how": "VmHWM reset before the fit" if exact else "ru_maxrss (process lifetime)",
        "load_before": load0, "load_after": load1,
        "privmarg_file": str(src / "__init__.py"), **{f"git_{k}": v for k, v in _git(src).items()},
        "numpy": np.__version__, "python": platform.python_version(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "threads_env": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
        "host": platform.node(), "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return rec


def summary(path: Path) -> str:
    import statistics as st

    rows = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    by = {(r["label"], r["seed"]): r for r in rows}
    labels = sorted({r["label"] for r in rows}, key=lambda s: (s != "before", s != "after", s))
    seeds = sorted({r["seed"] for r in rows})
    head = "| seed | " + " | ".join(f"{l} error | {l} fit s (CPU s) | {l} load 1-min (before→after)" for l in labels) + " |"
    lines = [head, "|" + "---|" * (1 + 3 * len(labels))]
    for s in seeds:
        cells = []
        for l in labels:
            r = by.get((l, s))
            if r is None:
                cells += ["", "", ""]
                continue
            cells += [f"{r['workload_error_3way']:.4f}", f"{r['fit_seconds']:.1f} ({r['fit_cpu_seconds']:.1f})",
                      f"{r['load_before']['loadavg'][0]:.2f}→{r['load_after']['loadavg'][0]:.2f}"]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    cells = []
    for l in labels:
        rs = [r for r in rows if r["label"] == l]
        e = [r["workload_error_3way"] for r in rs]
        cells += [f"**{st.mean(e):.4f}**" + (f" ± {st.stdev(e):.4f}" if len(e) > 1 else ""),
                  f"**{st.mean(r['fit_seconds'] for r in rs):.1f}** ({st.mean(r['fit_cpu_seconds'] for r in rs):.1f})", ""]
    lines.append("| mean | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", default="after", help="e.g. before / after")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--summary", action="store_true", help="print the markdown table of --out and exit")
    args = ap.parse_args()
    if args.summary:
        print(summary(args.out))
        return
    rec = run(args.seed, args.label, args.out, args.epsilon, args.delta)
    print(json.dumps({k: rec[k] for k in ("label", "seed", "workload_error_3way", "fit_seconds", "fit_cpu_seconds",
                                          "peak_rss_mb", "rounds", "selected_sha1", "final_loss", "git_commit",
                                          "git_src_dirty")}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
