"""Sums of dense tables over some of their axes, through BLAS.

numpy's ``sum(axis=...)`` runs its inner loop along the last axis; when that axis is short (a binary
attribute last in canonical order, common in clique tables) the loop overhead dominates, many times
a pass over memory (benchmarks/RESULTS.md, "JAM speed"). Here adjacent axes with the same fate are
merged (a free reshape), and each summed run is contracted with a vector of ones by a matrix-vector
product, so every pass streams memory. Post-processing helper: no data, no privacy cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# below this many cells numpy's own reduction is as fast and has less Python overhead
BLAS_SUM_CELLS = 1 << 12

# a summed run followed by a kept run of at most this many cells: summed by one product with stacked
# identities (k times the arithmetic, at BLAS speed) instead of a batch of tiny products
SHORT_KEPT = 8
# ... as long as the stacked identities (n·k·k cells, cached) stay this small; a longer summed run
# leaves few leading rows, where one vector-matrix product per row streams memory just as well
EYE_CELLS = 1 << 18

_ONES: dict[tuple[int, str], np.ndarray] = {}
_EYES: dict[tuple[int, int, str], np.ndarray] = {}
_BLAS_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))


def _ones(n: int, dtype: np.dtype) -> np.ndarray:
    v = _ONES.get((n, dtype.char))
    if v is None:
        v = _ONES[n, dtype.char] = np.ones(n, dtype=dtype)
        v.flags.writeable = False
    return v


def _stacked_eye(n: int, k: int, dtype: np.dtype) -> np.ndarray:
    key = (n, k, dtype.char)
    e = _EYES.get(key)
    if e is None:
        e = _EYES[key] = np.tile(np.eye(k, dtype=dtype), (n, 1))
        e.flags.writeable = False
    return e


def sum_out(a: np.ndarray, axes: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
    """``a.sum(axis=axes)`` (the kept axes in their order), equal to rounding; ``out`` as numpy's.
    float64 and float32 tables go through BLAS (the sum keeps the table's precision)."""
    axes = tuple(axes)
    if not axes:
        if out is None:
            return a
        np.copyto(out, a)
        return out
    if a.size < BLAS_SUM_CELLS or a.dtype not in _BLAS_DTYPES or not a.flags.c_contiguous:
        return np.sum(a, axis=axes, out=out)
    if len(axes) == a.ndim:  # a flat pass is numpy's fast case
        return np.sum(a, out=out)
    drop = set(axes)
    sizes: list[int] = []
    summed: list[bool] = []
    for i, n in enumerate(a.shape):
        s = i in drop
        if summed and summed[-1] == s:
            sizes[-1] *= n
        else:
            sizes.append(n)
            summed.append(s)
    b = a.reshape(sizes)
    eye_used = False
    # contract the rightmost summed run each step: it is either last or followed by one kept run
    while True in summed:
        if summed[-1]:
            # one matrix-vector product (a stack of them would be one tiny product per leading row)
            b = b.reshape(-1, sizes.pop()) @ _ones(b.shape[-1], a.dtype)
            summed.pop()
            b = b.reshape(sizes)
        else:
            k = sizes.pop()
            n = sizes.pop()
            if k <= SHORT_KEPT and n * k * k <= EYE_CELLS:
                # (…, n, k) → (…, k) as one matrix product with n stacked k×k identities: a batched
                # product would be one tiny n×k product per row of the leading axes
                b = b.reshape(-1, n * k) @ _stacked_eye(n, k, a.dtype)
                eye_used = True
            else:
                b = np.matmul(_ones(n, a.dtype), b)
            summed.pop()
            summed.pop()
            if summed:  # the run before is a kept one: merge it with the last
                sizes[-1] *= k
                b = b.reshape(sizes)
            else:
                sizes.append(k)
                summed.append(False)
    if eye_used and np.isnan(b).any():  # an infinity times the identities' zeros: numpy's sum
        return np.sum(a, axis=axes, out=out)
    kept = tuple(n for i, n in enumerate(a.shape) if i not in drop)
    b = b.reshape(kept)
    if out is None:
        return b
    np.copyto(out, b)
    return out
