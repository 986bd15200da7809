"""Where HMEQ's MORTDUE-VALUE correlation is lost (issue #15; the v3 diagnosis in benchmarks/RESULTS.md).

Per seed, AIM at epsilon = 1 through the bundled schema: the noise of every measurement holding both
columns, the synthetic rows that lie in (MORTDUE, VALUE) code cells empty in the real table, and the
Pearson correlation of the real rows' codes and the synthetic codes, each decoded at bin midpoints
and with the copula. Diagnostics on a bundled public table: the real rows are read outside any
privacy accounting.

    python benchmarks/hmeq_diagnose.py [SEED ...]
"""

import sys

import numpy as np

from privmarg import AIM, datasets


def corr(df) -> float:
    return float(df[["MORTDUE", "VALUE"]].dropna().corr().iloc[0, 1])


if __name__ == "__main__":
    raw, schema = datasets.load("hmeq")
    for seed in [int(s) for s in sys.argv[1:]] or [0, 1, 2, 3]:
        m = AIM(epsilon=1.0, delta=1e-9, seed=seed).fit(raw, schema)
        enc, names = m.encoder_, list(m.domain_.attrs)
        i, j = names.index("MORTDUE"), names.index("VALUE")
        a, b = m.domain_["MORTDUE"], m.domain_["VALUE"]
        real, syn = enc.encode(raw).codes, m.sample_codes(seed=seed)
        hr = np.bincount(real[:, i] * b + real[:, j], minlength=a * b)
        hs = np.bincount(syn[:, i] * b + syn[:, j], minlength=a * b)
        sig = [round(float(x.sigma), 1) for x in m.measurements_ if {"MORTDUE", "VALUE"} <= set(x.attrs)]
        rng = np.random.default_rng(seed)
        print(f"seed {seed}: sigma of measurements with both {sig}; {a}x{b} cells, {(hr == 0).sum()} empty in the "
              f"data holding {hs[hr == 0].sum()} of {hs.sum()} synthetic rows; codes at midpoints real "
              f"{corr(enc.decode(real, rng, midpoint=True)):.3f} synthetic {corr(enc.decode(syn, rng, midpoint=True)):.3f}; "
              f"with the copula real {corr(enc.decode(real, rng)):.3f} synthetic {corr(enc.decode(syn, rng)):.3f}",
              flush=True)
