"""Counting a large integer-coded table: DuckDB (``DuckDBSource``) vs in memory (issue #18).

``make``: fit MST (ε = 1, δ = 1e-9, seed 0) on the bundled adult and stream ``--rows`` synthetic
records to a Parquet file with ``Synthesizer.sample_to`` (chunks of 1M rows), recording that run's
peak RSS. ``count``: in a fresh process, answer every marginal of a workload's downward closure
(default all-2way) from that file with ``--backend duckdb`` (SQL, GROUPING SETS batches) or
``--backend memory`` (read the file with pandas, encode a Dataset, bincount), and record wall/CPU
seconds and peak RSS (VmHWM). One JSON line per run in benchmarks/results/duckdb_scale.jsonl; the
two backends' answers are compared through a SHA-1 of all counts. Run one at a time on one core::

    PYTHONPATH=src taskset -c 1 .venv/bin/python benchmarks/duckdb_scale.py make --rows 10000000 --path /tmp/big.parquet
    PYTHONPATH=src taskset -c 1 .venv/bin/python benchmarks/duckdb_scale.py count --backend duckdb --path /tmp/big.parquet
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "duckdb_scale.jsonl"


def _status(field: str) -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(field)


def _record(rec: dict, out: Path) -> None:
    rec.update(loadavg=os.getloadavg(), affinity=sorted(os.sched_getaffinity(0)), numpy=np.__version__,
               python=platform.python_version(), host=platform.node(),
               finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
    print(json.dumps(rec))


def make(rows: int, path: Path, out: Path) -> None:
    import privmarg
    from privmarg import MST, Dataset

    df, dom = privmarg.datasets.load("adult")
    mech = MST(1.0, 1e-9, seed=0).fit(Dataset(df[list(dom.attrs)].to_numpy(), dom))
    del df
    c0, t0 = time.process_time(), time.perf_counter()
    n = mech.sample_to(path, rows, chunk_rows=1_000_000)
    _record({"step": "make", "rows": n, "path": str(path), "file_mb": path.stat().st_size / 2**20,
             "write_seconds": time.perf_counter() - t0, "write_cpu_seconds": time.process_time() - c0,
             "peak_rss_mb": _status("VmHWM"), "how": "MST(eps=1) on adult, sample_to(chunk_rows=1e6)"}, out)


def count(backend: str, path: Path, workload: str, threads: int, out: Path) -> None:
    import privmarg
    from privmarg.core import Domain, downward_closure, parse_workload
    from privmarg.data import Dataset, DuckDBSource, MemorySource, read_table

    _, dom = privmarg.datasets.load("adult")
    dom = Domain.from_dict(dict(zip(dom.attrs, dom.shape)))
    cliques = list(downward_closure(parse_workload(workload, dom), dom))
    rss0 = _status("VmRSS")
    c0, t0 = time.process_time(), time.perf_counter()
    if backend == "duckdb":
        src = DuckDBSource(path, dom, threads=threads)
    else:
        src = MemorySource(Dataset.from_frame(read_table(path), dom))
    t1 = time.perf_counter()
    answers = src.marginals(cliques)
    n = src.count()
    t2, c2 = time.perf_counter(), time.process_time()
    h = hashlib.sha1()
    for a in answers:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    _record({"step": "count", "backend": backend, "path": str(path), "rows": int(n), "workload": workload,
             "marginals": len(cliques), "cells": int(sum(a.size for a in answers)),
             "load_or_validate_seconds": t1 - t0, "count_seconds": t2 - t1, "total_seconds": t2 - t0,
             "cpu_seconds": c2 - c0, "peak_rss_mb": _status("VmHWM"), "rss_before_mb": rss0,
             "duckdb_threads": threads if backend == "duckdb" else None,
             "answers_sha1": h.hexdigest()[:12]}, out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["make", "count"])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--path", type=Path, required=True)
    ap.add_argument("--backend", choices=["duckdb", "memory"], default="duckdb")
    ap.add_argument("--workload", default="all-2way")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    if a.step == "make":
        make(a.rows, a.path, a.out)
    else:
        count(a.backend, a.path, a.workload, a.threads, a.out)
