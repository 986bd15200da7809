"""How long each evaluation metric takes on a wide, tall table (issue #7: "all 2-way TV of a
20-column table in seconds, not minutes").

Tables: 20 columns with 2-50 values each (seed 0), a "real" table of --rows rows drawn from a random
product distribution with pairwise dependence (every column shifted by its left neighbour) and an
independently drawn "synthetic" table of the same size. Each metric runs once (CPU seconds, one
thread). ML efficacy is left out (model training, not metric computation, dominates it).

Run:  .venv/bin/python benchmarks/metrics_speed.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def table(rows: int, sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    codes = np.empty((rows, sizes.size), dtype=np.int64)
    codes[:, 0] = rng.integers(0, sizes[0], rows)
    for j in range(1, sizes.size):
        noise = rng.integers(0, sizes[j], rows)
        codes[:, j] = np.where(rng.random(rows) < 0.5, codes[:, j - 1] % sizes[j], noise)
    return codes


def main():
    from privmarg import Dataset, Domain
    from privmarg.evaluation import (conditional_query_error, counting_query_error, covariance_error,
                                     range_query_error, sw1_2way, thresholding_query_error, tv_kway)

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    sizes = rng.integers(2, 51, 20)
    dom = Domain([f"c{i}" for i in range(20)], sizes)
    real = Dataset(table(args.rows, sizes, rng), dom)
    synth = Dataset(table(args.rows, sizes, np.random.default_rng(1)), dom)
    metrics = {
        "tv_2way (190 marginals)": lambda: tv_kway(real, synth, 2),
        "tv_3way (1140 marginals)": lambda: tv_kway(real, synth, 3),
        "sw1_2way (190 marginals x 100 directions)": lambda: sw1_2way(real, synth),
        "covariance_error": lambda: covariance_error(real, synth),
        "counting_query_error (200 queries)": lambda: counting_query_error(real, synth),
        "thresholding_query_error (200 queries)": lambda: thresholding_query_error(real, synth),
        "range_query_error (1000 queries)": lambda: range_query_error(real, synth),
        "conditional_query_error": lambda: conditional_query_error(real, synth),
    }
    print(f"{args.rows:,} rows x 20 columns (sizes {sizes.min()}-{sizes.max()}), both tables")
    print("| metric | value | CPU s |\n|---|---|---|")
    for name, fn in metrics.items():
        t = time.process_time()
        v = fn()
        print(f"| {name} | {v:.4g} | {time.process_time() - t:.1f} |", flush=True)


if __name__ == "__main__":
    main()
