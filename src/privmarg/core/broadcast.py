"""Elementwise operations between a dense table and a smaller table broadcast against it.

numpy's ufunc loop runs its innermost loop along the last axis; when that axis is short (a binary
attribute last in canonical order) and the smaller operand is broadcast along some axis, the loop
overhead dominates, several times a pass over memory. Here adjacent axes with the same fate
(broadcast or not) are merged, and a short last run is peeled off into a few slices, each of which
has a long inner loop. Post-processing helper: no data, no privacy cost.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# below this many cells numpy's own loop is as fast and has less Python overhead
SLICE_CELLS = 1 << 12
PEEL_RUN = 4  # a last run this short is peeled off into slices...
LONG_RUN = 16  # ...when the run before it, the slices' inner loop, is at least this long


def _runs(shape: tuple[int, ...], bshape: tuple[int, ...]) -> list[list]:
    runs: list[list] = []  # [length, broadcast?]
    for n, m in zip(shape, bshape):
        if n == 1:
            continue
        kept = m != 1
        if runs and runs[-1][1] == kept:
            runs[-1][0] *= n
        else:
            runs.append([n, kept])
    return runs


def apply_broadcast(ufunc: Callable | None, a: np.ndarray | None, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = ufunc(a, b)``, or ``out[...] = b`` when ``ufunc`` is None; ``a`` (``out`` itself, or
    another C-contiguous table of its shape) and ``out`` are full tables, ``b`` broadcasts against
    them (same number of axes or fewer, 1 on the broadcast ones). Equal to numpy's result bit for bit."""
    if b.ndim < out.ndim:
        b = b.reshape((1,) * (out.ndim - b.ndim) + b.shape)
    runs = _runs(out.shape, b.shape) if out.size >= SLICE_CELLS and out.flags.c_contiguous else []
    # strided slices each read every cache line of the table, so peeling pays only for a very short
    # last run in front of which a long one takes over the inner loop
    peel = len(runs) >= 2 and runs[-1][0] <= PEEL_RUN and runs[-2][0] >= LONG_RUN
    if not peel or (a is not None and (a.shape != out.shape or not a.flags.c_contiguous)):
        if ufunc is None:
            np.copyto(out, b)
        else:
            ufunc(a, b, out=out)
        return out
    shape = tuple(n for n, _ in runs)
    o = out.reshape(shape)
    bb = b.reshape(tuple(n if kept else 1 for n, kept in runs))
    aa = None if a is None else a.reshape(shape)
    n, kept = runs[-1]
    for i in range(n):
        bi = i if kept else 0
        if ufunc is None:
            o[..., i] = bb[..., bi]
        else:
            ufunc(aa[..., i], bb[..., bi], out=o[..., i])
    return out
