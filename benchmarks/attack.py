"""The empirical membership attack against the provable bound (issue #45).

Adult split in halves (seeded): the run sees the first half; the attack's members are 5,000 of its
records, its non-members 5,000 of the other half and its reference the remaining held-out records
(:func:`privmarg.evaluation.attack.membership_attack`). Records the attack's AUC and TPR at
0.1/1/10% FPR, the run's provable AUC bound (``privacy_report()["risk"]["max_membership_auc"]``),
and the same attack against a release of the training half itself (no privacy). One JSON line per
run in --out::

    PYTHONPATH=src taskset -c 1 .venv/bin/python benchmarks/attack.py --epsilon 1 10 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> None:
    import privmarg
    from privmarg import Dataset
    from privmarg.evaluation.attack import membership_attack

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--methods", nargs="+", default=["aim", "mst"])
    ap.add_argument("--out", default=str(HERE / "results" / "attack.jsonl"))
    args = ap.parse_args()
    df, dom = privmarg.datasets.load("adult")
    codes = df[list(dom.attrs)].to_numpy()
    perm = np.random.default_rng(0).permutation(len(codes))
    train, hold = codes[perm[: len(codes) // 2]], codes[perm[len(codes) // 2:]]
    members, non_members, reference = (Dataset(train[:5000], dom), Dataset(hold[:5000], dom),
                                       Dataset(hold[5000:], dom))
    copy = membership_attack(members, non_members, Dataset(train, dom), reference)
    print(f"the training half itself: AUC {copy.auc:.3f}", flush=True)
    presets = {"aim": privmarg.AIM, "mst": privmarg.MST}
    with open(args.out, "a") as fh:
        for method in args.methods:
            for eps in args.epsilon:
                for seed in args.seeds:
                    t0 = time.process_time()
                    mech = presets[method](eps, 1e-9, seed=seed).fit(Dataset(train, dom))
                    syn = Dataset(np.asarray(mech.sample_codes()), dom)
                    res = membership_attack(members, non_members, syn, reference)
                    rec = {"method": method, "epsilon": eps, "delta": 1e-9, "seed": seed, **res.to_dict(),
                           "provable_max_auc": mech.privacy_report()["risk"]["max_membership_auc"],
                           "auc_training_table": copy.auc, "cpu_seconds": time.process_time() - t0,
                           "privmarg": privmarg.__version__}
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
                    print(f"{method} ε={eps:g} seed {seed}: AUC {res.auc:.3f} (bound {rec['provable_max_auc']:.3f}), "
                          f"TPR at 1% FPR {res.tpr_at_fpr[0.01]:.3f}", flush=True)


if __name__ == "__main__":
    main()
