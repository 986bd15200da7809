"""Charged releases of sums over records: a clipped sum (DP-MERF's embedding) and DP-SGD steps.

Both bound each record's contribution by clipping its vector to L2 norm ``clip`` here, whatever the
caller's feature or gradient function returns, so the sensitivity the charge assumes holds by
construction: ``clip`` under add/remove, ``2·clip`` under replace-one (:func:`~.rdp.sgm_l2`).

:func:`clipped_sum` is one Gaussian release (zCDP ``Δ²/(2σ²)``, mechanism ``"gaussian"``).
:func:`dp_sgd_phase` charges a whole DP-SGD phase *before* its first step (mechanism
``"subsampled_gaussian"``, accounted in RDP: see :mod:`.rdp`) and returns a :class:`DPSGDPhase`
that draws the batches (Poisson at rate ``q`` under add/remove; ``B`` records without replacement
under replace-one), clips, sums and adds ``N(0, (z·Δ)²)`` noise, at most ``steps`` times.
Vectors are numpy arrays or torch tensors (then noise is drawn by numpy and moved to the tensor's
device and dtype), or an object holding the per-record vectors implicitly (their norms, and sums
weighted per record: Opacus's ghost clipping, which never materialises the n × P matrix); see
:func:`clipped_row_sum`. Noise comes from the run's noise generator only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .accountant import Accountant
from .rdp import SGM, calibrate_noise_multiplier, orders_for, rho_equivalent, sgm_l2

__all__ = ["clip_rows", "clipped_row_sum", "clipped_sum", "dp_sgd_phase", "DPSGDPhase"]


def clip_rows(x: Any, clip: float) -> Any:
    """Rows of ``x`` (n × D, numpy or torch) scaled to L2 norm at most ``clip``."""
    if hasattr(x, "detach"):  # torch
        norms = x.norm(dim=1, keepdim=True)
        return x * (clip / norms.clamp_min(1e-12)).clamp(max=1.0)
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x * np.minimum(1.0, clip / np.maximum(norms, 1e-12))


def clipped_row_sum(x: Any, clip: float) -> Any:
    """``Σ_i clip(row_i)``: of a matrix of per-record rows (numpy or torch, via :func:`clip_rows`), or
    of per-record vectors held implicitly by an object with ``norms()`` (each row's L2 norm, n) and
    ``weighted_sum(w)`` (``Σ_i w_i·row_i``), such as Opacus's ghost clipping
    (:mod:`privmarg.select.tabddpm`): the weights ``min(1, clip/‖row_i‖)`` are computed here, so the
    clipping that bounds each record's contribution stays in this module."""
    if hasattr(x, "norms") and hasattr(x, "weighted_sum"):
        return x.weighted_sum((clip / x.norms().clamp_min(1e-12)).clamp(max=1.0))
    return clip_rows(x, clip).sum(0)


def _noise_like(total: Any, sigma: float, rng: np.random.Generator) -> Any:
    if hasattr(total, "detach"):
        import torch

        z = rng.standard_normal(tuple(total.shape)) * sigma
        return torch.as_tensor(z, dtype=total.dtype, device=total.device)
    return rng.standard_normal(np.shape(total)) * sigma


def clipped_sum(accountant: Accountant, records: np.ndarray, features: Callable[[np.ndarray], Any], clip: float,
                sigma: float, rng: np.random.Generator, what: str, *, chunk: int = 8192) -> np.ndarray:
    """Release ``Σ_records clip(features(record)) + N(0, σ² I)`` (float64); charges
    ``Δ²/(2σ²)`` zCDP with ``Δ = clip`` (add/remove) or ``2·clip`` (replace-one). ``features`` maps
    an (n × d) block of records to an (n × D) block; it is called on chunks of ``chunk`` records."""
    l2 = sgm_l2(accountant.neighbour, clip)
    total = None
    for i in range(0, max(len(records), 1), chunk):
        block = clip_rows(features(records[i:i + chunk]), clip)
        s = block.sum(0)
        s = s.detach().cpu().double().numpy() if hasattr(s, "detach") else np.asarray(s, dtype=np.float64)
        total = s if total is None else total + s
    rho = l2 * l2 / (2.0 * sigma * sigma)
    accountant.charge(rho, what, "gaussian", sigma=float(sigma), l2_sensitivity=float(l2), clip=float(clip))
    return total + rng.normal(0.0, float(sigma), size=total.shape)


class DPSGDPhase:
    """The batches and noisy gradient sums of one charged DP-SGD phase (made by :func:`dp_sgd_phase`).

    ``step(grads)`` draws a batch, calls ``grads(batch_records)`` (→ per-record vectors, n × P, or
    an object with ``norms()`` and ``weighted_sum(w)``, see :func:`clipped_row_sum`),
    clips each to ``clip``, sums and adds ``N(0, sigma²)`` per coordinate; it returns the noisy
    sum (size P). ``denominator``: the public batch size to divide by (``q·Ñ`` or ``B``).
    ``steps_left``: steps still covered by the charge (a step beyond them is refused).
    The ``grads`` function sees the batch's private records; only the clipped, noised sum leaves."""

    def __init__(self, records: np.ndarray, rng: np.random.Generator, *, steps: int, clip: float, sigma: float,
                 sample_rate: float | None, batch_size: int | None, denominator: float, size: int):
        self._records = records
        self._rng = rng
        self.steps_left = int(steps)
        self.clip, self.sigma = float(clip), float(sigma)
        self.sample_rate, self.batch_size = sample_rate, batch_size
        self.denominator = float(denominator)
        self.size = int(size)

    def step(self, grads: Callable[[np.ndarray], Any], like: Any = None) -> Any:
        """One noisy sum of clipped per-record vectors (numpy, or torch like ``like`` when the batch
        is empty)."""
        if self.steps_left <= 0:
            raise RuntimeError("this DP-SGD phase has used every step it was charged for")
        self.steps_left -= 1
        n = len(self._records)
        if self.sample_rate is not None:  # Poisson sampling (add/remove)
            idx = np.flatnonzero(self._rng.random(n) < self.sample_rate)
        else:  # B records without replacement (replace-one)
            idx = np.sort(self._rng.choice(n, size=self.batch_size, replace=False))
        if len(idx):
            total = clipped_row_sum(grads(self._records[idx]), self.clip)
        elif like is not None:
            total = like.new_zeros(self.size)
        else:
            total = np.zeros(self.size)
        return total + _noise_like(total, self.sigma, self._rng)


def dp_sgd_phase(accountant: Accountant, records: np.ndarray, rng: np.random.Generator, *, rho: float, steps: int,
                 clip: float, size: int, what: str, sample_rate: float | None = None,
                 batch_size: int | None = None, denominator: float | None = None) -> DPSGDPhase:
    """Charge a DP-SGD phase of ``steps`` steps, calibrated so that its zCDP equivalent after the
    charges already made is ``rho`` (at most), then return its :class:`DPSGDPhase`. Under add/remove
    pass the Poisson ``sample_rate`` (set from public or released numbers only) and ``denominator``
    (the expected batch size, e.g. ``q·Ñ``); under replace-one ``batch_size`` (``N`` is public).
    ``size``: the length P of the summed vectors. The accountant must have a ``delta`` (its
    conversion part: less any δ reserved for approximate-zCDP steps)."""
    delta = accountant.conversion_delta
    if delta is None:
        raise ValueError("DP-SGD is accounted in RDP and converted at the run's delta: give epsilon and delta, "
                         "not rho")
    nb = accountant.neighbour
    n = len(records)
    if nb == "add_remove":
        batch_size, population = None, None
        if denominator is None:
            raise ValueError("add/remove DP-SGD needs the public denominator (q times a released count)")
    else:
        sample_rate, population = None, n
        batch_size = int(min(max(int(batch_size or 1), 1), n))
        denominator = float(batch_size)
    rho_before = accountant.rho_spent
    z = calibrate_noise_multiplier(rho, rho_before, delta, nb, steps, sample_rate=sample_rate,
                                   batch_size=batch_size, population=population)
    l2 = sgm_l2(nb, clip)
    params = dict(noise_multiplier=z, steps=int(steps), neighbour=nb, delta=float(delta),
                  rho_before=float(rho_before), clip=float(clip), l2_sensitivity=l2, sigma=z * l2,
                  orders=list(orders_for(nb)))
    if nb == "add_remove":
        params["sample_rate"] = float(sample_rate)
    else:
        params.update(batch_size=int(batch_size), population=int(population))
    accountant.charge(rho_equivalent(params), what, SGM, **params)
    return DPSGDPhase(records, rng, steps=steps, clip=clip, sigma=z * l2, sample_rate=sample_rate,
                      batch_size=batch_size, denominator=denominator, size=size)
