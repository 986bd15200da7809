"""Argsorts for PrivPGD's hot loop: packed 32-bit keys sorted by numpy on CPU (several times
faster than ``torch.sort`` there), ``torch.argsort`` on CUDA; reused buffers (:class:`_Workspace`)."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import torch

_POOL: Any = None  # the threads sorting on CPU, made on first use



def _keysort_rows(a: np.ndarray, out: np.ndarray) -> None:
    """Row-wise argsort of ``a`` (2-D) into ``out`` (int64) by sorting packed 64-bit keys.

    Key = order-preserving 32-bit image of the float32 value (high word) | column index (low
    word), so one SIMD integer sort yields the permutation; ties (and float64 values equal in
    float32) go by index. About 1.5–2× faster than ``np.argsort`` and 4–8× faster than
    ``torch.sort`` on CPU.
    """
    rows, n = a.shape
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.int32)
    keys = np.empty((rows, n), dtype=np.uint64)
    words = keys.view(np.uint32).reshape(rows, n, 2)  # little endian: [..., 0] low word, [..., 1] high
    # order-preserving image of the float: negatives flip all bits, positives flip the sign bit
    np.bitwise_xor(b, (b >> 31) | np.int32(-(2**31)), out=words[..., 1].view(np.int32))
    words[..., 0] = np.arange(n, dtype=np.uint32)
    keys.sort(axis=-1)
    out[...] = words[..., 0]


def _argsort(x: torch.Tensor) -> torch.Tensor:
    """Argsort along the last axis (int64): packed-key numpy sort on CPU, ``torch.argsort`` elsewhere.

    On CPU with ``torch.get_num_threads() > 1`` the rows are split over a thread pool (numpy
    releases the GIL while sorting).
    """
    if x.device.type != "cpu":
        return torch.argsort(x, dim=-1)
    global _POOL
    a = x.detach().numpy()
    n = a.shape[-1]
    if n >= 2**32 or sys.byteorder != "little":  # pragma: no cover - keys hold 32-bit indices
        return torch.from_numpy(np.argsort(a, axis=-1))
    rows = a.reshape(-1, n)
    out = np.empty(rows.shape, dtype=np.int64)
    threads = torch.get_num_threads()
    if threads > 1 and rows.size >= 1 << 20 and rows.shape[0] > 1:
        from concurrent.futures import ThreadPoolExecutor

        if _POOL is None or _POOL._max_workers != threads:
            _POOL = ThreadPoolExecutor(threads)
        bounds = np.linspace(0, rows.shape[0], min(threads, rows.shape[0]) + 1).astype(int)
        list(_POOL.map(lambda ij: _keysort_rows(rows[ij[0]:ij[1]], out[ij[0]:ij[1]]),
                       zip(bounds[:-1], bounds[1:])))
    else:
        _keysort_rows(rows, out)
    return torch.from_numpy(out.reshape(a.shape))


def _sort_rows(rows: np.ndarray) -> None:
    """In-place row-wise sort of a 2-D array, rows split over a thread pool when torch uses threads."""
    global _POOL
    threads = torch.get_num_threads()
    if threads > 1 and rows.size >= 1 << 20 and rows.shape[0] > 1:
        from concurrent.futures import ThreadPoolExecutor

        if _POOL is None or _POOL._max_workers != threads:
            _POOL = ThreadPoolExecutor(threads)
        bounds = np.linspace(0, rows.shape[0], min(threads, rows.shape[0]) + 1).astype(int)
        list(_POOL.map(lambda ij: rows[ij[0]:ij[1]].sort(axis=-1), zip(bounds[:-1], bounds[1:])))
    else:
        rows.sort(axis=-1)


class _Workspace:
    """Reusable buffers for the descent's per-step temporaries, one per (name, shape, dtype).

    A fresh multi-megabyte CPU tensor is a fresh ``mmap`` (glibc serves large blocks that way and
    unmaps them on free), so every step would page-fault its temporaries in again: on adult that
    was about a third of the rank computation. Buffers are only reused within one fit."""

    def __init__(self):
        self._bufs: dict = {}

    def get(self, name: str, shape, dtype, device, init=None) -> torch.Tensor:
        """The buffer (uninitialised when new, or filled by ``init(buffer)`` once when new)."""
        key = (name, tuple(shape), dtype, str(device))
        buf = self._bufs.get(key)
        if buf is None:
            buf = self._bufs[key] = torch.empty(shape, dtype=dtype, device=device)
            if init is not None:
                init(buf)
        return buf


def _argsort_bounded(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
                     ws: _Workspace | None = None) -> torch.Tensor:
    """Argsort along the last axis of ``x`` whose values lie in ``[lo, hi]`` (broadcast), up to order
    within buckets of width ``(hi - lo) / 2^(31 - ceil(log2 n))``.

    CPU: one 32-bit integer key per value, ``bucket << bits | index``, sorted by numpy's SIMD sort
    (about 3× faster than the exact 64-bit key sort of :func:`_argsort`); values in one bucket keep
    index order. For ``n = 50k`` particles a bucket is ``(hi - lo) / 32767``: far below the grid
    spacing of any marginal, so the transport plan (hence the gradient) moves only where two
    particles closer than that straddle a target cell boundary. Exact :func:`_argsort` when fewer
    than 12 value bits are left (``n > 2^19``) or off the CPU (``torch.argsort``).
    """
    n = x.shape[-1]
    ib = max(1, (n - 1).bit_length())
    vb = 31 - ib
    if x.device.type != "cpu" or vb < 12 or sys.byteorder != "little":
        return _argsort(x)
    top = float(2**vb - 1)
    if ws is None:
        keys = (x - lo).mul_(top / (hi - lo).clamp_min(1e-30)).clamp_(0.0, top).to(torch.int32)
        keys.bitwise_left_shift_(ib).bitwise_or_(torch.arange(n, dtype=torch.int32))
        _sort_rows(keys.numpy().reshape(-1, n))
        return keys.bitwise_and_((1 << ib) - 1).long()
    # the same arithmetic, in reused buffers
    kf = torch.sub(x, lo, out=ws.get("kf", x.shape, x.dtype, x.device))
    kf.mul_(top / (hi - lo).clamp_min(1e-30)).clamp_(0.0, top)
    keys = ws.get("keys", x.shape, torch.int32, x.device)
    keys.copy_(kf)  # float -> int32 truncates, as .to(torch.int32)
    ar = ws.get("arange", (n,), torch.int32, x.device, init=lambda t: torch.arange(n, dtype=torch.int32, out=t))
    keys.bitwise_left_shift_(ib).bitwise_or_(ar)
    _sort_rows(keys.numpy().reshape(-1, n))
    keys.bitwise_and_((1 << ib) - 1)
    return ws.get("ix", x.shape, torch.int64, x.device).copy_(keys)
