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

``--dataset fire`` (``../shared/data/fire``) fits the generating MST on fire instead of adult. ``fit``:
fit a method (``--method aim|mst``, ε, seed, workload, model cap) on the file through a backend in
a fresh process, recording peak RSS (VmHWM), CPU seconds and SHA-1s of the measurements, the
privacy ledger and a fixed-size synthetic sample (same seed: equal hashes = the same release)::

    PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/duckdb_scale.py make --dataset fire --rows 50000000 --path /tmp/fire50m.parquet
    PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/duckdb_scale.py fit --backend duckdb --dataset fire --path /tmp/fire50m.parquet

The 1M-row sample compared with ``count`` (both backends) is the 50M file's first million rows:
``COPY (SELECT * FROM read_parquet('/tmp/fire50m.parquet') LIMIT 1000000) TO '/tmp/fire1m.parquet'``.
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


def load(name: str):
    """The private table ``name`` as a Dataset of codes (adult bundled, fire from ../shared/data)."""
    import privmarg
    from privmarg import Dataset
    from privmarg.core import Domain

    if name == "adult":
        df, dom = privmarg.datasets.load("adult")
        return Dataset(df[list(dom.attrs)].to_numpy(), Domain.from_dict(dict(zip(dom.attrs, dom.shape))))
    from _data import folder

    d = folder(name)
    return Dataset.read(d / "private.csv.gz", Domain.from_json(d / "domain.json"))


def make(rows: int, path: Path, out: Path, dataset: str = "adult") -> None:
    from privmarg import MST

    mech = MST(1.0, 1e-9, seed=0).fit(load(dataset))
    c0, t0 = time.process_time(), time.perf_counter()
    n = mech.sample_to(path, rows, chunk_rows=1_000_000)
    _record({"step": "make", "rows": n, "path": str(path), "file_mb": path.stat().st_size / 2**20,
             "write_seconds": time.perf_counter() - t0, "write_cpu_seconds": time.process_time() - c0,
             "peak_rss_mb": _status("VmHWM"), "how": f"MST(eps=1, seed=0) on {dataset}, sample_to(chunk_rows=1e6)"}, out)


def count(backend: str, path: Path, workload: str, threads: int, out: Path, dataset: str = "adult") -> None:
    from privmarg.core import downward_closure, parse_workload
    from privmarg.data import Dataset, DuckDBSource, MemorySource, read_table

    dom = load(dataset).domain
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
    _record({"step": "count", "dataset": dataset, "backend": backend, "path": str(path), "rows": int(n), "workload": workload,
             "marginals": len(cliques), "cells": int(sum(a.size for a in answers)),
             "load_or_validate_seconds": t1 - t0, "count_seconds": t2 - t1, "total_seconds": t2 - t0,
             "cpu_seconds": c2 - c0, "peak_rss_mb": _status("VmHWM"), "rss_before_mb": rss0,
             "duckdb_threads": threads if backend == "duckdb" else None,
             "answers_sha1": h.hexdigest()[:12]}, out)


def _sha(arrays) -> str:
    h = hashlib.sha1()
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return h.hexdigest()[:12]


def make_method(method: str, epsilon: float, seed: int, workload: str, max_model_size: float, iters: int | None):
    """The preset, as the CLI builds it (``iters``: per-round estimation iterations, None = default)."""
    from privmarg import AIM, MST

    kw = {} if iters is None else {"iters": iters}
    if method == "aim":
        return AIM(epsilon, 1e-9, workload=workload, seed=seed, max_model_size=max_model_size, **kw)
    return MST(epsilon, 1e-9, seed=seed, **kw)


def fit_record(mech, source, sample_rows: int) -> dict:
    """Fit ``mech`` on ``source``; wall/CPU seconds, peak RSS and hashes of what it releases."""
    import json as _json

    from privmarg.memory import peak_rss_mb, reset_peak, status_mb

    before = status_mb("VmHWM")  # loading/validating the source, kept before the mark is reset
    reset_peak()
    c0, t0 = time.process_time(), time.perf_counter()
    mech.fit(source)
    t1, c1 = time.perf_counter(), time.process_time()
    codes = mech.sample_codes(sample_rows)
    ledger = _json.dumps(mech.privacy_report(), sort_keys=True, default=str)
    return {"fit_seconds": t1 - t0, "fit_cpu_seconds_main_process": c1 - c0,
            "peak_rss_mb": status_mb("VmHWM"), "peak_rss_mb_before_fit": before,
            "peak_rss_mb_lifetime": peak_rss_mb(), "measurements": len(mech.measurements_),
            "cliques": [list(m.attrs) for m in mech.measurements_],
            "measurements_sha1": _sha(m.y for m in mech.measurements_),
            "ledger_sha1": hashlib.sha1(ledger.encode()).hexdigest()[:12],
            "rho_spent": mech.privacy_report()["rho_spent"],
            "sample_rows": sample_rows, "sample_sha1": _sha([codes])}


def fit(backend: str, path: Path, dataset: str, method: str, epsilon: float, seed: int, workload: str,
        max_model_size: float, iters: int | None, threads: int, sample_rows: int, out: Path) -> None:
    from privmarg.data import Dataset, DuckDBSource, read_table

    dom = load(dataset).domain
    rss0 = _status("VmRSS")
    t0 = time.perf_counter()
    if backend == "duckdb":
        src = DuckDBSource(path, dom, threads=threads)
    else:
        src = Dataset.from_frame(read_table(path), dom)
    load_s = time.perf_counter() - t0
    rec = fit_record(make_method(method, epsilon, seed, workload, max_model_size, iters), src, sample_rows)
    _record({"step": "fit", "dataset": dataset, "backend": backend, "path": str(path), "rows": int(src.count()
             if backend == "duckdb" else len(src)), "method": method, "epsilon": epsilon, "seed": seed,
             "workload": workload, "max_model_size": max_model_size, "iters": iters,
             "duckdb_threads": threads if backend == "duckdb" else None, "load_or_validate_seconds": load_s,
             "rss_before_mb": rss0, **rec}, out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["make", "count", "fit"])
    ap.add_argument("--dataset", choices=["adult", "fire"], default="adult")
    ap.add_argument("--method", choices=["aim", "mst"], default="aim")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-model-size", type=float, default=80.0)
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--sample-rows", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--path", type=Path, required=True)
    ap.add_argument("--backend", choices=["duckdb", "memory"], default="duckdb")
    ap.add_argument("--workload", default="all-2way")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    if a.step == "make":
        make(a.rows, a.path, a.out, a.dataset)
    elif a.step == "count":
        count(a.backend, a.path, a.workload, a.threads, a.out, a.dataset)
    else:
        fit(a.backend, a.path, a.dataset, a.method, a.epsilon, a.seed, a.workload, a.max_model_size, a.iters,
            a.threads, a.sample_rows, a.out)
