"""HMEQ through the bundled schema's defaults (issue #15): the MORTDUE-VALUE correlation in AIM's
synthetic data at epsilon = 1 over several seeds, Pearson and Spearman (the real table's Pearson is
printed first).

    python benchmarks/hmeq_correlation.py [SEED ...]
"""

import sys
import time

from privmarg import AIM, datasets


def corr(df, method="pearson"):
    return float(df[["MORTDUE", "VALUE"]].dropna().corr(method).iloc[0, 1])


if __name__ == "__main__":
    raw, schema = datasets.load("hmeq")
    print("real", round(corr(raw), 3), flush=True)
    for seed in [int(s) for s in sys.argv[1:]] or [0, 1, 2, 3, 4]:
        t0 = time.perf_counter()
        m = AIM(epsilon=1.0, delta=1e-9, seed=seed).fit(raw, schema)
        syn = m.sample()
        print("seed", seed, "corr", round(corr(syn), 3), "spearman", round(corr(syn, "spearman"), 3),
              "seconds", round(time.perf_counter() - t0, 1), flush=True)
