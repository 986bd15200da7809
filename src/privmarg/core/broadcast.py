"""Elementwise operations between a dense table and a smaller table broadcast against it.

numpy's ufunc loop runs its innermost loop along the last axis; when that axis is short (a binary
attribute last in canonical order) and the smaller operand is broadcast along some axis, the loop
overhead dominates, many times a pass over memory. Here adjacent axes with the same fate
(broadcast or not) are merged, and then either the smaller operand is expanded over the table's
last axes (a copy much smaller than the table, or one whose short last run moves as one wide item)
so that the operation itself has a long inner loop, or a short last run is peeled off into a few
slices, each of which has a long inner loop. Post-processing helper: no data, no privacy cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

# below this many cells numpy's own loop is as fast and has less Python overhead
SLICE_CELLS = 1 << 12
PEEL_RUN = 4  # a last run this short is peeled off into slices...
LONG_RUN = 16  # ...when the run before it, the slices' inner loop, is at least this long
EXPAND_RUN = 64  # the smaller operand is expanded over the last axes until they hold this many cells
# a last run of this many bytes is copied as one item (an unsigned integer or raw bytes: bits move as they are)
WIDE_ITEMS = {2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64), 16: np.dtype("V16")}


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


def _expansion(runs: list[list], itemsize: int) -> tuple[int, bool] | None:
    """(j, wide): expand the smaller operand over ``runs[j:]`` (at least EXPAND_RUN cells), copying
    its last run as wide items when ``wide``; None when the copy would cost more than it saves."""
    j, cells = len(runs), 1
    while j > 0 and cells < EXPAND_RUN:
        j -= 1
        cells *= runs[j][0]
    if cells < EXPAND_RUN or j == len(runs) - 1:
        return None
    n, kept = runs[-1]
    # the wide copy's inner loop is the broadcast run before the last one
    wide = kept and n * itemsize in WIDE_ITEMS and runs[-2][0] >= LONG_RUN
    copy_cells = cells * math.prod(m for m, k in runs[:j] if k)
    total = cells * math.prod(m for m, _ in runs[:j])
    # a copy with a short inner loop costs about as much a cell as the operation it replaces
    if not wide and 4 * copy_cells > total:
        return None
    return j, wide


def _copy_wide(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` (broadcast) with the last axis, kept in both, moved as one wide item."""
    w = WIDE_ITEMS[dst.shape[-1] * dst.itemsize]
    np.copyto(dst.view(w), src.view(w))


def apply_broadcast(ufunc: Callable | None, a: np.ndarray | None, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = ufunc(a, b)``, or ``out[...] = b`` when ``ufunc`` is None; ``a`` (``out`` itself, or
    another C-contiguous table of its shape) and ``out`` are full tables, ``b`` broadcasts against
    them (same number of axes or fewer, 1 on the broadcast ones). Equal to numpy's result bit for bit."""
    if b.ndim < out.ndim:
        b = b.reshape((1,) * (out.ndim - b.ndim) + b.shape)
    runs = _runs(out.shape, b.shape) if out.size >= SLICE_CELLS and out.flags.c_contiguous else []
    fast = len(runs) < 2 or runs[-1][0] >= LONG_RUN  # numpy's loop is long already
    if fast or (a is not None and (a.shape != out.shape or not a.flags.c_contiguous)) or b.dtype != out.dtype:
        return _numpy(ufunc, a, b, out)
    shape = tuple(n for n, _ in runs)
    bb = b.reshape(tuple(n if kept else 1 for n, kept in runs))
    plan = _expansion(runs, out.itemsize) if b.flags.c_contiguous else None
    if plan is not None:
        j, wide = plan
        if ufunc is None and wide:
            _copy_wide(out.reshape(shape), bb)
            return out
        if ufunc is not None:
            lead = shape[:j]
            blead = bb.shape[:j]
            bx = np.empty(blead + shape[j:], dtype=out.dtype)
            if wide:
                _copy_wide(bx, bb)
            else:
                np.copyto(bx, bb)
            inner = math.prod(shape[j:])
            ufunc(a.reshape(lead + (inner,)), bx.reshape(blead + (inner,)), out=out.reshape(lead + (inner,)))
            return out
    # strided slices each read every cache line of the table, so peeling pays only for a very short
    # last run in front of which a long one takes over the inner loop
    if not (runs[-1][0] <= PEEL_RUN and runs[-2][0] >= LONG_RUN):
        return _numpy(ufunc, a, b, out)
    o = out.reshape(shape)
    aa = None if a is None else a.reshape(shape)
    n, kept = runs[-1]
    for i in range(n):
        bi = i if kept else 0
        if ufunc is None:
            o[..., i] = bb[..., bi]
        else:
            ufunc(aa[..., i], bb[..., bi], out=o[..., i])
    return out


def _numpy(ufunc: Callable | None, a: np.ndarray | None, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    if ufunc is None:
        np.copyto(out, b)
    else:
        ufunc(a, b, out=out)
    return out
