"""Where AIM's 2-way TV on a raw table comes from (issue #15; the diagnosis in benchmarks/RESULTS.md).

Per table, with the split, seed and metric of ``raw_tables.py``: AIM's per-column 1-way TV and mean
pair TV against the shuffled baseline's, the pairs AIM loses most on, each numeric column's codes
(bins, atoms), and the *encoding floor*: the real training rows encoded by the fitted encoder and
decoded again (no synthesizer), scored with the same TV and classifier. Diagnostics on public data
only: the floor reads the real rows outside any privacy accounting.

    python benchmarks/raw_tables_diagnose.py fair [randhie ...]
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import raw_tables as R  # noqa: E402

from privmarg import AIM  # noqa: E402
from privmarg.schema import Schema  # noqa: E402


def tv_tables(real, other, schema):
    a, b = R._discrete(real, other, schema)
    k = max(a.max(), b.max()) + 1
    names = schema.names
    pair = {}
    for i, j in itertools.combinations(range(a.shape[1]), 2):
        p = np.bincount(a[:, i] * k + a[:, j], minlength=k * k) / len(a)
        q = np.bincount(b[:, i] * k + b[:, j], minlength=k * k) / len(b)
        pair[(names[i], names[j])] = 0.5 * np.abs(p - q).sum()
    one = {n: 0.5 * np.abs(np.bincount(a[:, i], minlength=k) / len(a) - np.bincount(b[:, i], minlength=k) / len(b)).sum()
           for i, n in enumerate(names)}
    return pair, one


def diagnose(name: str) -> None:
    df, spec = R.load(name)
    test_mask = np.random.default_rng(0).random(len(df)) < 0.3
    train, test = df[~test_mask].reset_index(drop=True), df[test_mask].reset_index(drop=True)
    schema = Schema.from_dict(spec)
    kw = {"workload": "all-2way"} if len(df) > 100_000 else {}
    m = AIM(epsilon=1.0, delta=1e-9, seed=0, **kw).fit(train, spec)
    syn = m.sample(len(train))
    pa, oa = tv_tables(train, syn, schema)
    ps, _ = tv_tables(train, R.shuffled(train, np.random.default_rng(1)), schema)
    print(f"== {name}: mean 2-way TV AIM {np.mean(list(pa.values())):.4f}, shuffled {np.mean(list(ps.values())):.4f}")
    for c in schema.names:
        mine = np.mean([v for k, v in pa.items() if c in k])
        base = np.mean([v for k, v in ps.items() if c in k])
        print(f"  {c:16s} 1-way {oa[c]:.3f}  mean pair {mine:.3f} (shuffled {base:.3f})")
    print("  worst pairs (AIM, shuffled):", [(k, round(float(pa[k]), 3), round(float(ps[k]), 3))
                                             for k in sorted(pa, key=lambda k: pa[k] - ps[k], reverse=True)[:5]])
    for c, r in m.encoder_.report()["columns"].items():
        if "edges" in r:
            print(f"  {c}: {r['size']} codes, {len(r['edges']) - 1} bins, atoms {r.get('atoms', [])[:12]}")
    enc = m.encoder_  # the encoding floor: the run's own encoder, real rows encoded and decoded
    dec = enc.decode(enc.encode(train).codes, np.random.default_rng(0))
    print(f"  encoding floor: TV {R.mean_tv2(train, dec, schema):.4f}, accuracy "
          f"{R.accuracy(dec, test, R.TARGETS[name], schema):.3f} (real {R.accuracy(train, test, R.TARGETS[name], schema):.3f})")


if __name__ == "__main__":
    for table in sys.argv[1:] or ["fair"]:
        diagnose(table)
