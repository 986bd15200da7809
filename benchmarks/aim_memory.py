"""Peak memory of AIM on adult (issue #18): one fit + sample + error bounds, on the bundled table.

AIM(ε = 1, δ = 1e-9, workload = all-3way, seed) on ``privmarg.datasets.load("adult")``; records
peak RSS (VmHWM, reset before the fit) after the fit, after sampling and after the error bounds,
fit CPU/wall seconds, a hash of the selections, of the synthetic table and of every workload
marginal's error bound, so that two code versions can be checked for identical outputs. Appends one
JSON line to benchmarks/results/aim_memory.jsonl. Run one at a time on one core::

    PYTHONPATH=src taskset -c 1 .venv/bin/python benchmarks/aim_memory.py --seed 0 --label after

``--summary`` prints a markdown table of the JSONL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "aim_memory.jsonl"


from privmarg.memory import reset_peak as _reset_peak  # noqa: E402
from privmarg.memory import status_mb as _status  # noqa: E402


def run(seed: int, label: str, out: Path) -> dict:
    import privmarg
    from privmarg import AIM, Dataset

    src = Path(privmarg.__file__).resolve().parent
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "."],
                                capture_output=True, text=True).stdout.strip())
    df, dom = privmarg.datasets.load("adult")
    data = Dataset(df[list(dom.attrs)].to_numpy(), dom)
    del df
    load0 = os.getloadavg()
    exact = _reset_peak()
    rss0 = _status("VmRSS")
    c0, t0 = time.process_time(), time.perf_counter()
    mech = AIM(1.0, 1e-9, workload="all-3way", seed=seed).fit(data)
    t1, c1 = time.perf_counter(), time.process_time()
    peak_fit = _status("VmHWM")
    codes = np.asarray(mech.sample_codes())
    t2 = time.perf_counter()
    peak_sample = _status("VmHWM")
    bounds = mech.error_bounds()
    t3 = time.perf_counter()
    peak_all = _status("VmHWM")
    ms = list(mech.measurements_)
    sel = "|".join(",".join(m.attrs) for m in ms)
    bstr = json.dumps([b.to_dict() for b in bounds], sort_keys=True)
    rec = {
        "label": label, "seed": seed, "dataset": "adult (bundled)", "epsilon": 1.0, "delta": 1e-9,
        "workload": "all-3way", "fit_seconds": t1 - t0, "fit_cpu_seconds": c1 - c0,
        "sample_seconds": t2 - t1, "bounds_seconds": t3 - t2,
        "peak_rss_fit_mb": peak_fit, "peak_rss_sample_mb": peak_sample, "peak_rss_mb": peak_all,
        "rss_before_mb": rss0, "rss_how": "VmHWM reset before the fit" if exact else "VmHWM (process lifetime)",
        "rounds": int(mech.rounds_), "measurements": len(ms),
        "selected_sha1": hashlib.sha1(sel.encode()).hexdigest()[:12],
        "synthetic_sha1": hashlib.sha1(np.ascontiguousarray(codes, dtype=np.int64).tobytes()).hexdigest()[:12],
        "bounds_sha1": hashlib.sha1(bstr.encode()).hexdigest()[:12],
        "bounds_mean": float(np.mean([b.l1_bound for b in bounds])),
        "final_loss": float(mech.model_.info.loss),
        "workload_error_3way": _workload_error(data, codes),
        "git_commit": commit, "src_dirty": dirty, "privmarg_file": str(src),
        "loadavg_before": load0, "loadavg_after": os.getloadavg(),
        "affinity": sorted(os.sched_getaffinity(0)), "numpy": np.__version__,
        "python": platform.python_version(), "host": platform.node(),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    return rec


def _workload_error(data, codes) -> float:
    """AIM's workload error on all 3-way marginals against the whole table (the sweep's metric)."""
    from privmarg import Dataset
    from privmarg.core import all_kway
    from privmarg.evaluation import workload_error

    return workload_error(data, Dataset(codes, data.domain), all_kway(data.domain, 3))


def summary(path: Path) -> str:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    lines = ["| label | seed | peak RSS MB (fit / +sample / +bounds) | fit CPU s | fit wall s | selections | synthetic | bounds |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['label']} | {r['seed']} | {r['peak_rss_fit_mb']:.0f} / {r['peak_rss_sample_mb']:.0f} / "
                     f"{r['peak_rss_mb']:.0f} | {r['fit_cpu_seconds']:.1f} | {r['fit_seconds']:.1f} | "
                     f"{r['selected_sha1']} | {r['synthetic_sha1']} | {r['bounds_sha1']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", default="run")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--summary", action="store_true")
    a = ap.parse_args()
    if a.summary:
        print(summary(a.out))
    else:
        print(json.dumps(run(a.seed, a.label, a.out)))
