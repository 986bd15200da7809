"""``n`` rows drawn from weighted records: systematically, and balanced so that their low-order marginals
stay close to the weights'.

A systematic draw (:func:`systematic_draw`) takes each record ⌊n·p⌋ or ⌈n·p⌉ times; which records
get the extra copy is left to one uniform number, so a marginal over columns the records are not
sorted by carries the noise of a sample without replacement (a public table drawn down to the
private table's size: benchmarks/history/public-data.md).
:func:`balanced_draw` starts from that draw and swaps extra copies between records, one taken from
a record and given to another, while that lowers ``Σ (n·p(cell) − drawn(cell))²`` over the cells of
the table's 1-, 2- and 3-way marginals (as many as :data:`BALANCE_WORK` allows). Every record still
gets ⌊n·p⌋ or ⌈n·p⌉ copies. Draws of a few rows, or of many copies per record, stay systematic
(:data:`MIN_BALANCED_ROWS`, :data:`MAX_BALANCED_COPIES`). Post-processing of released or public
records: no privacy cost.
"""

from __future__ import annotations

import itertools

import numpy as np

#: record × marginal cells looked up per sweep of the search: the marginals balanced are the 1-way,
#: then 2-way, then 3-way ones (domain order) while records × marginals stays within it, and at
#: most MAX_BALANCED marginals (a few records of a wide table, as a conditional draw meets)
BALANCE_WORK = 4_000_000
MAX_BALANCED = 1024
#: draws of fewer rows stay systematic: a handful of rows (a conditional draw per evidence pattern)
#: gains little from balancing, and building the cells costs ~10 ms a call
MIN_BALANCED_ROWS = 200
#: draws of this many copies per record or more stay systematic too: the rounding of ⌊n·p⌋ or
#: ⌈n·p⌉ copies is then small against every cell's count (adult's public splits drawn up tenfold)
MAX_BALANCED_COPIES = 8
#: sweeps of the swap search at most (it stops earlier once a sweep finds no improving swap)
MAX_SWEEPS = 300
#: records per sweep in each of the search's two pools (those gaining most from one more copy, and
#: from one fewer)
SWAP_POOL = 64


def systematic_draw(weights: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
    """``rows`` indices into ``weights`` (non-negative, not all zero) by systematic sampling, in random
    order: index ``i`` appears ⌊n·p_i⌋ or ⌈n·p_i⌉ times with mean exactly ``n·p_i`` (p = weights
    normalised), from one uniform draw. Independent draws would add multinomial noise of about
    √(n·p_i) records to every count; this adds less than one."""
    p = np.asarray(weights, dtype=float)
    cum = np.cumsum(p / p.sum())
    cum[np.flatnonzero(p > 0)[-1]:] = 1.0  # rounding dust never lands on trailing zero weights
    points = (rng.random() + np.arange(rows)) / max(rows, 1)
    out = np.searchsorted(cum, points, side="right")
    out = np.minimum(out, len(p) - 1)
    rng.shuffle(out)
    return out


def balancing_marginals(columns: int, records: int) -> list[tuple[int, ...]]:
    """The column tuples balanced for ``records`` records over ``columns`` columns: every 1-way,
    then 2-way, then 3-way marginal while ``records × count ≤ BALANCE_WORK`` and ``count ≤
    MAX_BALANCED``."""
    out: list[tuple[int, ...]] = []
    for k in (1, 2, 3):
        for cols in itertools.combinations(range(columns), k):
            if (len(out) + 1) * records > BALANCE_WORK or len(out) >= MAX_BALANCED:
                return out
            out.append(cols)
    return out


def _cells(codes: np.ndarray, marginals: list[tuple[int, ...]], sizes: tuple[int, ...]) -> np.ndarray:
    """(records × marginals) ids of each record's cell in each marginal, numbered densely over the
    cells the records occupy (a 3-way marginal of wide columns has more cells than records)."""
    out = np.empty((len(codes), len(marginals)), dtype=np.int64)
    offset = 0
    for j, cols in enumerate(marginals):
        flat = np.ravel_multi_index(tuple(codes[:, c] for c in cols), tuple(sizes[c] for c in cols))
        _, dense = np.unique(flat, return_inverse=True)
        out[:, j] = dense.ravel() + offset
        offset += int(dense.max()) + 1
    return out


def swap_search(cells: np.ndarray, target: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``counts`` (copies per record, each ⌊target⌋ or ⌈target⌉) changed by swaps of one copy
    between two records while each lowers ``Σ (missing per cell)²`` over ``cells``
    (records × marginals cell ids); returns the new counts (same total, same bounds).

    Each sweep ranks all records once, then swaps within the :data:`SWAP_POOL` records that gain
    most from one more copy and those that gain most from one fewer, their gains kept current
    after every swap (the 1-way cells move with each one); a swap that would not lower the sum,
    cells the two records share included, takes its record out of the pool."""
    counts = counts.astype(np.int64).copy()
    lo, hi = np.floor(target), np.ceil(target)
    m = cells.shape[1]
    missing = np.bincount(cells.ravel(), weights=np.repeat(target - counts, m), minlength=int(cells.max()) + 1)
    k = min(SWAP_POOL, len(counts))
    for _ in range(MAX_SWEEPS):
        s = missing[cells].sum(axis=1)
        takers = _pool(2.0 * s - m, counts >= hi, k)  # one more copy lowers the sum by 2s − m
        givers = _pool(-2.0 * s - m, counts <= lo, k)  # one fewer by −2s − m
        if not (len(takers) and len(givers)) or not _swaps(cells, missing, counts, lo, hi, takers, givers):
            break
    return counts


def _pool(gain: np.ndarray, full: np.ndarray, k: int) -> np.ndarray:
    """The (up to) ``k`` records of largest ``gain`` among those not ``full``."""
    gain = np.where(full, -np.inf, gain)
    top = np.argpartition(-gain, k - 1)[:k]
    return top[np.isfinite(gain[top])]


def _swaps(cells, missing, counts, lo, hi, takers, givers) -> int:
    """Swaps within the pools (see :func:`swap_search`), ``missing`` and ``counts`` updated in
    place; returns how many were made."""
    m = cells.shape[1]
    live_t, live_g = np.ones(len(takers), bool), np.ones(len(givers), bool)
    made = 0
    for _ in range(len(takers) + len(givers)):
        take = 2.0 * missing[cells[takers]].sum(axis=1) - m
        give = -2.0 * missing[cells[givers]].sum(axis=1) - m
        take[~live_t | (counts[takers] >= hi[takers])] = -np.inf
        give[~live_g | (counts[givers] <= lo[givers])] = -np.inf
        i, j = int(np.argmax(take)), int(np.argmax(give))
        if not take[i] + give[j] > 0:
            break
        a, d = takers[i], givers[j]
        if a == d:
            live_g[j] = False
            continue
        ids, where = np.unique(np.concatenate([cells[a], cells[d]]), return_inverse=True)
        step = np.bincount(where, weights=np.repeat([-1.0, 1.0], m))
        before = missing[ids]
        if (before ** 2).sum() - ((before + step) ** 2).sum() <= 1e-9:
            live_t[i] = False
            continue
        missing[ids] = before + step
        counts[a] += 1
        counts[d] -= 1
        made += 1
    return made


def balanced_draw(codes: np.ndarray, weights: np.ndarray, rows: int, sizes: tuple[int, ...],
                  rng: np.random.Generator) -> np.ndarray:
    """``rows`` indices into ``codes`` (records × columns over a domain of ``sizes``), record ``i``
    ⌊n·p_i⌋ or ⌈n·p_i⌉ times (p = ``weights`` normalised), in random order: a systematic draw
    improved by :func:`swap_search` over :func:`balancing_marginals` (from
    :data:`MIN_BALANCED_ROWS` rows on, and below :data:`MAX_BALANCED_COPIES` copies per record)."""
    p = np.asarray(weights, dtype=float)
    p = p / p.sum()
    counts = np.bincount(systematic_draw(p, rows, rng), minlength=len(p))
    if MIN_BALANCED_ROWS <= rows < MAX_BALANCED_COPIES * len(codes) and len(codes) > 1:
        marginals = balancing_marginals(codes.shape[1], len(codes))
        if marginals:
            counts = swap_search(_cells(codes, marginals, sizes), rows * p, counts)
    out = np.repeat(np.arange(len(p)), counts)
    rng.shuffle(out)
    return out
