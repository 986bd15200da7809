"""Records drawn from a graphical model: the leftover draws of the randomized rounding."""

import numpy as np

from privmarg.generate.pgm.graphical_model import _fill_groups, _leftovers


def test_leftovers_are_exact_per_cell_and_per_group():
    rng = np.random.default_rng(0)
    G, k = 40, 5
    raw = rng.random((G, k)) * (rng.random((G, k)) < 0.8)
    raw[:, 0] += 1e-3  # no empty row
    extra = rng.integers(0, k, G)
    frac = raw / raw.sum(1, keepdims=True) * extra[:, None]
    ok = frac < 1  # a fractional part is below 1
    frac = np.where(ok, frac, 0.0)
    extra = np.floor(frac.sum(1) + 1e-9).astype(int)
    frac = frac / np.maximum(frac.sum(1, keepdims=True), 1e-300) * extra[:, None]
    probs = raw / raw.sum(1, keepdims=True)
    total = np.zeros((G, k))
    reps = 4000
    for _ in range(reps):
        picks = _leftovers(frac, extra, probs, rng)
        assert (picks.sum(1) == extra).all()  # each group gets exactly its leftovers
        assert picks.max() <= 1 and (picks[frac == 0] == 0).all()  # never a cell with no fraction
        total += picks
    # each cell is picked with probability its fractional part (unbiased rounding)
    assert np.abs(total / reps - frac).max() < 4 * np.sqrt(0.25 / reps) + 1e-9


def test_leftovers_spread_evenly_over_groups():
    """1,000 groups of one record each with the same probabilities: the value totals are within a
    few records of 1000·p (independent draws would be off by about √(1000·p·(1−p)) ≈ 15)."""
    p = np.array([0.3, 0.5, 0.2])
    for seed in range(20):
        rng = np.random.default_rng(seed)
        picks = _leftovers(np.tile(p, (1000, 1)), np.ones(1000, dtype=int), np.tile(p, (1000, 1)), rng)
        assert np.abs(picks.sum(0) - 1000 * p).max() <= 3


def test_fill_groups_matches_group_counts_and_never_fills_a_zero():
    rng = np.random.default_rng(3)
    counts = np.array([[2.0, 0.0, 1.0], [0.0, 5.0, 5.0], [1.0, 1.0, 1.0]])
    group = rng.integers(0, 3, 500)
    vals = _fill_groups(counts, group, rng, "round")
    for g in range(3):
        got = np.bincount(vals[group == g], minlength=3)
        want = counts[g] / counts[g].sum() * (group == g).sum()
        assert np.abs(got - want).max() < 1  # within rounding
        assert (got[counts[g] == 0] == 0).all()
