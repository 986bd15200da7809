"""Wide tables and large budgets (issue #47): one fit per process, CPU seconds, peak RSS, error.

Tables:
- ``caravan``: ISLP's ``Caravan`` (CoIL 2000 insurance survey, 5,822 rows, 86 integer-coded
  columns), in benchmarks/data/caravan with a domain of each column's documented code range;
- ``wide344``: four copies of Caravan side by side, each copy's rows in an independent random
  order (344 columns; built by :func:`wide_table`, seed 0): real dependence inside each block of
  86 columns, none across blocks;
- ``adult``: the bundled adult table; ``pums``: the bundled raw pums table through its schema.

Records CPU seconds of the fit (``time.process_time``), the process's peak RSS (VmHWM reset before
the fit), rounds, and the mean L1 error (normalised, 0–2) of the synthetic table on the workload's
3-way marginals (``--error-workload``; the 2-way for wide344). Appends one JSON line per fit to
benchmarks/results/wide.jsonl. Run one at a time, pinned to one idle core::

    PYTHONPATH=src taskset -c 1 .venv/bin/python benchmarks/wide.py caravan aim --epsilon 1 --seed 0 --label s22

``--summary`` prints a markdown table of the JSONL.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "wide.jsonl"
CARAVAN = HERE / "data" / "caravan"


def wide_table(copies: int = 4, seed: int = 0):
    """``copies`` blocks of Caravan's columns side by side (suffixes ``_1``.. ``_copies``), each
    block's rows independently permuted (seeded): (DataFrame, Domain)."""
    from privmarg import Domain

    df = pd.read_csv(CARAVAN / "caravan.csv.gz")
    dom = Domain.from_json(CARAVAN / "domain.json")
    rng = np.random.default_rng(seed)
    blocks, attrs, sizes = [], [], []
    for k in range(1, copies + 1):
        order = rng.permutation(len(df)) if k > 1 else np.arange(len(df))
        blocks.append(df.iloc[order].reset_index(drop=True).add_suffix(f"_{k}"))
        attrs += [f"{a}_{k}" for a in dom.attrs]
        sizes += list(dom.shape)
    return pd.concat(blocks, axis=1), Domain(attrs, sizes)


def load(name: str):
    """(data for fit, domain or schema, encoded Dataset for the error)."""
    import privmarg
    from privmarg import Dataset, Domain

    if name == "caravan":
        df = pd.read_csv(CARAVAN / "caravan.csv.gz")
        dom = Domain.from_json(CARAVAN / "domain.json")
        return df, dom, None
    if name == "wide344":
        df, dom = wide_table()
        return df, dom, None
    if name == "adult":
        df, dom = privmarg.datasets.load("adult")
        return Dataset(df[list(dom.attrs)].to_numpy(), dom), dom, None
    if name == "pums":
        raw, schema = privmarg.datasets.load("pums")
        return raw[list(schema.names)], schema, None  # the person id is not in the schema
    raise SystemExit(f"unknown table {name!r}")


def make(method: str, epsilon: float, seed: int, workload: str | None, rounds: int | None = None):
    import privmarg

    cls = {"aim": privmarg.AIM, "mst": privmarg.MST, "privbayes": privmarg.PrivBayes,
           "privmrf": privmarg.PrivMRF, "independent": privmarg.Independent}[method]
    kw = {"workload": workload} if workload and method == "aim" else {}
    if rounds is not None and method == "aim":
        kw["rounds"] = rounds
    return cls(epsilon, 1e-9, seed=seed, **kw)


def mean_error(truth, synthetic, k: int) -> float:
    """Mean normalised L1 error over every k-way marginal (0–2), each marginal one bincount."""
    import itertools

    t = np.asarray(truth.codes, dtype=np.int64)
    s = np.asarray(synthetic, dtype=np.int64)
    shape = truth.domain.shape
    errs = []
    for c in itertools.combinations(range(len(shape)), k):
        sz = [shape[i] for i in c]
        n = int(np.prod(sz))
        a = np.bincount(np.ravel_multi_index(t[:, c].T, sz), minlength=n) / len(t)
        b = np.bincount(np.ravel_multi_index(s[:, c].T, sz), minlength=n) / max(len(s), 1)
        errs.append(np.abs(a - b).sum())
    return float(np.mean(errs))


def run(args) -> dict:
    import privmarg
    from privmarg.memory import reset_peak, status_mb

    src = Path(privmarg.__file__).resolve().parent
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    data, dom, _ = load(args.table)
    mech = make(args.method, args.epsilon, args.seed, args.workload, args.rounds)
    lines: list[str] = []
    c0 = time.process_time()

    def progress(spent, total, msg):  # one line a round, as the CLI prints when piped
        lines.append(msg)
        if args.verbose:
            print(f"{time.process_time() - c0:8.1f} s {spent / total:6.1%} {msg}", file=sys.stderr, flush=True)

    load0 = os.getloadavg()
    exact = reset_peak()
    c0, t0 = time.process_time(), time.perf_counter()
    mech.fit(data, dom, progress=progress)
    c1, t1 = time.process_time(), time.perf_counter()
    peak = status_mb("VmHWM")
    codes = np.asarray(mech.sample_codes())
    truth = mech.encoder_.encode(data) if getattr(mech, "encoder_", None) is not None else (
        data if hasattr(data, "domain") else privmarg.Dataset.from_frame(data, dom))
    k = args.error_k
    rec = {
        "label": args.label, "table": args.table, "method": args.method, "epsilon": args.epsilon,
        "delta": 1e-9, "seed": args.seed, "workload": args.workload or "default",
        "columns": len(mech.domain_), "rows": int(len(codes)),
        "fit_cpu_seconds": c1 - c0, "fit_seconds": t1 - t0, "peak_rss_mb": peak,
        "rss_how": "VmHWM reset before the fit" if exact else "VmHWM (process lifetime)",
        "rounds": int(getattr(mech, "rounds_", 0) or 0), "rounds_T": args.rounds, "measurements": len(mech.measurements_),
        f"error_{k}way": mean_error(truth, codes, k),
        "git_commit": commit, "loadavg_before": load0, "loadavg_after": os.getloadavg(),
        "affinity": sorted(os.sched_getaffinity(0)), "numpy": np.__version__,
        "python": platform.python_version(), "host": platform.node(),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    with open(args.out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    return rec


def summary(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    print("| label | table | method | ε | seed | CPU s | peak MB | rounds | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        err = next((f"{k[6]}-way {v:.4f}" for k, v in r.items() if k.startswith("error_")), "")
        print(f"| {r['label']} | {r['table']} | {r['method']} | {r['epsilon']:g} | {r['seed']} | "
              f"{r['fit_cpu_seconds']:.1f} | {r['peak_rss_mb']:.0f} | {r['rounds']} | {err} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", nargs="?", choices=["caravan", "wide344", "adult", "pums"])
    ap.add_argument("method", nargs="?", choices=["aim", "mst", "privbayes", "privmrf", "independent"])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workload", default=None, help="AIM's workload (default: the preset's, all-3way)")
    ap.add_argument("--error-k", type=int, default=3, help="error on every k-way marginal (default 3)")
    ap.add_argument("--rounds", type=int, default=None, help="AIM's T (default: the preset's)")
    ap.add_argument("--label", default="run")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    if args.summary:
        summary(Path(args.out))
        return
    if args.table is None or args.method is None:
        ap.error("give TABLE and METHOD")
    print(json.dumps(run(args)))


if __name__ == "__main__":
    main()
