"""AIM settings compared end to end on adult (ε = 1, δ = 1e-9, all-3way workload), one process per
fit, run in parallel (``--jobs``) on a machine with as many idle cores, one BLAS thread each.

Each fit records its 3-way workload error (``privmarg.evaluation.workload_error`` against the whole
table, the sweep's ``workload_error_3way``), CPU seconds, rounds and final loss, one JSON line per
fit in ``--out`` (resumes). Variants are AIM keyword arguments, e.g. ``md=refit_method:md``.

Run:  python benchmarks/aim_variants.py --seeds 0 1 2 --variants default= md=refit_method:md --jobs 6
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path


def _parse(spec: str):
    name, _, rest = spec.partition("=")
    kw = {}
    for part in filter(None, rest.split(",")):
        k, _, v = part.partition(":")
        for cast in (int, float):
            try:
                v = cast(v)
                break
            except ValueError:
                pass
        kw[k] = v
    return name, kw


def load(dataset: str, root: str | None):
    """Bundled ``dataset`` (privmarg.datasets), else ``<root>/<dataset>/{domain.json,private.csv.gz}``."""
    from privmarg import Dataset, Domain, datasets

    if dataset in datasets.names():
        df, dom = datasets.load(dataset)
        return Dataset.from_frame(df, dom)
    folder = Path(root or Path(__file__).resolve().parents[2] / "shared" / "data") / dataset
    dom = Domain.from_json(folder / "domain.json")
    return Dataset.read(folder / "private.csv.gz", dom)


def fit_one(name: str, kw: dict, seed: int, epsilon: float, dataset: str = "adult", root: str | None = None) -> dict:
    import numpy as np

    from privmarg import AIM, Dataset
    from privmarg.core import all_kway
    from privmarg.evaluation import workload_error

    data = load(dataset, root)
    dom = data.domain
    c0, t0 = time.process_time(), time.perf_counter()
    mech = AIM(epsilon, 1e-9, workload="all-3way", seed=seed, **kw).fit(data)
    c1, t1 = time.process_time(), time.perf_counter()
    synth = Dataset(np.asarray(mech.sample_codes()), dom)
    return {"dataset": dataset, "variant": name, "kwargs": kw, "seed": seed, "epsilon": epsilon,
            "workload_error_3way": workload_error(data, synth, all_kway(dom, 3)),
            "fit_seconds": t1 - t0, "fit_cpu_seconds": c1 - c0, "rounds": int(mech.rounds_),
            "final_loss": float(mech.model_.info.loss), "numpy": np.__version__,
            "python": platform.python_version(), "host": platform.node()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--variants", nargs="+", default=["default="])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--datasets", nargs="+", default=["adult"])
    ap.add_argument("--data-root", default=None, help="folder of non-bundled datasets (default ../shared/data)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "aim_variants.jsonl"))
    a = ap.parse_args()
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = "1"
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {(r.get("dataset", "adult"), r["variant"], r["seed"], r["epsilon"])
                for r in map(json.loads, out.read_text().splitlines())}
    todo = [(d, *_parse(s), seed) for d in a.datasets for seed in a.seeds for s in a.variants]
    todo = [t for t in todo if (t[0], t[1], t[3], a.epsilon) not in done]
    with ProcessPoolExecutor(a.jobs) as ex:
        futs = [ex.submit(fit_one, n, kw, s, a.epsilon, d, a.data_root) for d, n, kw, s in todo]
        for f in as_completed(futs):
            r = f.result()
            with open(out, "a") as fh:
                fh.write(json.dumps(r) + "\n")
            print(r["dataset"], r["variant"], r["seed"], round(r["workload_error_3way"], 4), round(r["fit_cpu_seconds"], 1), flush=True)


if __name__ == "__main__":
    main()
