"""PrivPGD's covariance: how much noise its even all-2-way measurement puts into the covariance that
the 2-way targets imply, measured fine or on coarsened columns (issue #44). No particles are fitted:
this sizes a lead, it is not a method.

Adult (48,842 rows), ε = 2.5, δ = 1e-5 as PrivPGD's benchmark, replace-one (Δ₂ = √2), ρ split evenly
over the 91 pairs. For each pair the 2-way marginal is counted with each column of more than
``bins`` values merged into ``bins`` contiguous groups, Gaussian noise of PrivPGD's σ is added,
and the pair's covariance is read off the noisy marginal (the groups at the mean of their codes'
embedding centres ``(2x+1)/(2k)``; ``--clip``: negative counts clipped first, as a crude
projection). Prints the relative Frobenius error of the off-diagonal covariance against the
table's own (the metric's numerator; the diagonal left exact), 5 noise draws; ``--no-noise``
gives the bias of the grouping alone.

    .venv/bin/python benchmarks/privpgd_coarse_targets.py [--clip] [--no-noise]
"""

from __future__ import annotations

import argparse
import itertools
import json

import numpy as np

from privmarg import Dataset, Domain, datasets
from privmarg.privacy.conversions import cdp_rho


def groups(k: int, bins: int) -> np.ndarray:
    """Code → group for ``k`` codes merged into at most ``bins`` contiguous groups."""
    return np.minimum((np.arange(k) * bins) // k, bins - 1) if k > bins else np.arange(k)


def pair_covariance(codes: np.ndarray, k: np.ndarray, i: int, j: int, bins: int, sigma: float,
                    rng: np.random.Generator, clip: bool) -> float:
    gi, gj = groups(int(k[i]), bins), groups(int(k[j]), bins)
    counts = np.zeros((gi.max() + 1, gj.max() + 1))
    np.add.at(counts, (gi[codes[:, i]], gj[codes[:, j]]), 1)
    counts += rng.normal(0.0, sigma, counts.shape) if sigma else 0.0
    p = np.clip(counts, 0, None) if clip else counts
    p = p / p.sum()
    ci = np.array([((2 * np.flatnonzero(gi == b) + 1) / (2 * k[i])).mean() for b in range(p.shape[0])])
    cj = np.array([((2 * np.flatnonzero(gj == b) + 1) / (2 * k[j])).mean() for b in range(p.shape[1])])
    return float((p * np.outer(ci - p.sum(1) @ ci, cj - p.sum(0) @ cj)).sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clip", action="store_true")
    ap.add_argument("--no-noise", action="store_true")
    args = ap.parse_args()
    folder = datasets.path("adult")
    sizes = json.loads((folder / "domain.json").read_text())
    data = Dataset.read(folder / "adult.csv.gz", Domain(list(sizes), list(sizes.values())))
    codes, k = np.asarray(data.codes), np.asarray(data.domain.shape)
    emb = (2 * codes + 1) / (2 * k)
    centred = emb - emb.mean(0)
    true = centred.T @ centred / len(emb)
    pairs = list(itertools.combinations(range(codes.shape[1]), 2))
    sigma = 0.0 if args.no_noise else float(np.sqrt(len(pairs) / cdp_rho(2.5, 1e-5)))
    print(f"sigma {sigma:.2f} per cell, {len(pairs)} pairs")
    for bins in (1000, 16, 8, 4):
        errs = []
        for seed in range(5):
            rng = np.random.default_rng(seed)
            est = true.copy()
            for i, j in pairs:
                est[i, j] = est[j, i] = pair_covariance(codes, k, i, j, bins, sigma, rng, args.clip)
            errs.append(np.linalg.norm(true - est) / np.linalg.norm(true))
        label = "fine" if bins == 1000 else f"{bins} groups"
        print(f"{label}: {np.mean(errs):.4f} ± {np.std(errs):.4f}")


if __name__ == "__main__":
    main()
