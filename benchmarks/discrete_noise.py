"""What exact discrete Gaussian noise costs: sampler throughput, and AIM / MST fits on the bundled
adult table (ε = 1, δ = 1e-9, all-3way workload) with ``noise="continuous"`` and ``"discrete"``.

One process, one BLAS thread, runs interleaved (continuous, discrete, continuous, ...) so machine
load affects both alike; CPU seconds (``time.process_time``) are the figure to compare. Each fit
records its 3-way workload error, the cells noised and the fit time, one JSON line in ``--out``.

Run:  python benchmarks/discrete_noise.py --seeds 0 1 --out benchmarks/results/discrete_noise.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")


def throughput(n: int) -> list[dict]:
    import numpy as np

    from privmarg.privacy.discrete import discrete_gaussian, discrete_laplace

    out = []
    rng = np.random.default_rng(0)
    for sigma in (1.0, 10.0, 123.4, 1e4):
        for kind, draw, m in (
            ("continuous gaussian", lambda k: rng.normal(0.0, sigma, size=k), n),
            ("discrete gaussian", lambda k: discrete_gaussian(sigma, k, rng), n),
            ("discrete gaussian (scalar reference)", lambda k: discrete_gaussian(sigma, k, rng, method="reference"),
             n // 100),
        ):
            draw(1000)  # warm up
            c = time.process_time()
            draw(m)
            sec = time.process_time() - c
            out.append({"what": "throughput", "sampler": kind, "sigma": sigma, "draws": m, "cpu_seconds": sec,
                        "draws_per_second": m / sec})
    for scale in (1.0, 37.5):
        c = time.process_time()
        discrete_laplace(scale, n, rng)
        sec = time.process_time() - c
        out.append({"what": "throughput", "sampler": "discrete laplace", "scale": scale, "draws": n,
                    "cpu_seconds": sec, "draws_per_second": n / sec})
    return out


def fit_one(method: str, noise: str, seed: int, epsilon: float) -> dict:
    import numpy as np

    from privmarg import AIM, MST, Dataset, datasets
    from privmarg.core import all_kway
    from privmarg.evaluation import workload_error

    df, dom = datasets.load("adult")
    data = Dataset.from_frame(df, dom)
    cls = {"aim": AIM, "mst": MST}[method]
    kw = {"workload": "all-3way"} if method == "aim" else {}
    c0, t0 = time.process_time(), time.perf_counter()
    mech = cls(epsilon, 1e-9, seed=seed, noise=noise, **kw).fit(data)
    c1, t1 = time.process_time(), time.perf_counter()
    synth = Dataset(np.asarray(mech.sample_codes()), dom)
    ledger = mech.privacy_report()["ledger"]
    return {"what": "fit", "method": method, "noise": noise, "seed": seed, "epsilon": epsilon,
            "workload_error_3way": workload_error(data, synth, all_kway(dom, 3)),
            "fit_seconds": t1 - t0, "fit_cpu_seconds": c1 - c0,
            "cells_noised": int(sum(np.asarray(m.y).size for m in mech.measurements_ if m.sigma is not None)),
            "mechanisms": sorted({c["mechanism"] for c in ledger}),
            "rho_spent": mech.privacy_report()["rho_spent"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--methods", nargs="+", default=["mst", "aim"])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--draws", type=int, default=1_000_000)
    ap.add_argument("--out", default="benchmarks/results/discrete_noise.jsonl")
    args = ap.parse_args()
    host = {"python": platform.python_version(), "host": platform.node(), "cpus": os.cpu_count()}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a") as f:
        for r in throughput(args.draws):
            f.write(json.dumps({**r, **host}) + "\n")
            print(r, flush=True)
        for method in args.methods:
            for seed in args.seeds:
                for noise in ("continuous", "discrete"):
                    r = fit_one(method, noise, seed, args.epsilon)
                    f.write(json.dumps({**r, **host}) + "\n")
                    f.flush()
                    print(method, noise, seed, round(r["workload_error_3way"], 4), round(r["fit_cpu_seconds"], 1),
                          r["cells_noised"], flush=True)


if __name__ == "__main__":
    main()
