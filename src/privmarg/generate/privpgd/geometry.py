"""PrivPGD's embedding of codes in [0, 1]^d: bin centres, and codes back from positions (SPEC §8.2, §8.6)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def bin_centres(k: int) -> np.ndarray:
    """Centres ``(2x+1)/(2k)``, ``x = 0..k-1``, of ``k`` equal bins of ``[0, 1]``."""
    return (2.0 * np.arange(k) + 1.0) / (2.0 * k)


def embed_codes(codes: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Embed integer codes (rows x attributes) into ``[0,1]^d`` (SPEC §8.2)."""
    codes = np.asarray(codes)
    k = np.asarray(shape, dtype=float)
    return (2.0 * codes + 1.0) / (2.0 * k)


def nearest_codes(Z: np.ndarray | torch.Tensor, shape: Sequence[int]) -> np.ndarray:
    """Finalisation (§8.6): each coordinate to its nearest bin centre, the lower one on ties.

    Centre ``j`` is nearest on ``(j/k, (j+1)/k)``; the boundary ``(j+1)/k`` is a tie and goes to ``j``,
    i.e. ``code = clip(ceil(k z) - 1, 0, k-1)``.
    """
    if isinstance(Z, torch.Tensor):
        Z = Z.detach().to("cpu", torch.float64).numpy()
    Z = np.asarray(Z, dtype=np.float64)
    k = np.asarray(shape, dtype=np.float64)
    codes = np.ceil(Z * k) - 1.0
    return np.clip(codes, 0, k - 1).astype(np.int64)


def grid_centres(sizes: Sequence[int]) -> np.ndarray:
    """Embedded cells of a marginal over attributes of these sizes: ``(prod sizes) x r``, row-major."""
    axes = [bin_centres(k) for k in sizes]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([a.ravel() for a in mesh], axis=-1)
