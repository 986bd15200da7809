"""Spark local mode vs in memory on fire, same seed: the same measurements, ledger and synthetic
sample (issue #18).

Writes fire's integer codes (``../shared/data/fire``, 304,249 rows × 15 columns) to a Parquet file,
then fits each method twice in this process, on a ``MemorySource`` and on a ``SparkSource`` over that
file (Spark ``local[N]``, one session for both fits), and compares SHA-1s of the measurements, the
privacy report (ledger) and a 100k-row synthetic sample drawn from each model. One JSON line per fit
in benchmarks/results/spark_fire.jsonl, with wall and CPU seconds (CPU of this Python process only:
Spark's JVM is another process) and the load average::

    PYTHONPATH=src nice -n 10 .venv/bin/python benchmarks/spark_fire.py --methods mst aim
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from duckdb_scale import _record, fit_record, load, make_method

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "spark_fire.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", nargs="+", choices=["mst", "aim"], default=["mst", "aim"])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workload", default="all-2way")
    ap.add_argument("--max-model-size", type=float, default=10.0)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--parquet", type=Path, default=Path("/tmp/fire_codes.parquet"))
    ap.add_argument("--sample-rows", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()

    from privmarg.data import MemorySource, SparkSource
    from privmarg.data.spark_source import spark_session

    data = load("fire")
    data.to_frame().to_parquet(a.parquet, index=False)
    t0 = time.perf_counter()
    spark = spark_session(a.master)
    spark.sparkContext.setLogLevel("ERROR")
    start_s = time.perf_counter() - t0
    for method in a.methods:
        common = {"dataset": "fire", "rows": len(data), "method": method, "epsilon": a.epsilon, "seed": a.seed,
                  "workload": a.workload if method == "aim" else None,
                  "max_model_size": a.max_model_size if method == "aim" else None, "iters": a.iters}
        hashes = {}
        for backend in ("memory", "spark"):
            t0 = time.perf_counter()
            src = MemorySource(data) if backend == "memory" else SparkSource(a.parquet, data.domain, spark=spark)
            validate_s = time.perf_counter() - t0
            mech = make_method(method, a.epsilon, a.seed, a.workload, a.max_model_size, a.iters)
            rec = fit_record(mech, src, a.sample_rows)
            hashes[backend] = (rec["measurements_sha1"], rec["ledger_sha1"], rec["sample_sha1"])
            _record({"step": "spark_fire", "backend": backend, **common,
                     "spark_master": a.master if backend == "spark" else None,
                     "spark_session_start_seconds": start_s if backend == "spark" else None,
                     "validate_seconds": validate_s, **rec,
                     "same_as_memory": hashes[backend] == hashes["memory"]}, a.out)


if __name__ == "__main__":
    main()
