"""A uniform mixture of product distributions: what relaxed projection (RAP) and GEM both fit.

Row ``n`` of ``P`` (``rows × Σk_i``) holds one probability vector per attribute (a block of ``k_i``
entries, attributes in domain order) and stands for the product distribution of its blocks; the
model is the uniform mixture over the rows, scaled to ``total`` records. Marginals are exact
expectations (:meth:`ProductMixture.project`); records pick a row, then draw one value per
attribute from its blocks. Post-processing only: no privacy cost.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..core import Domain, StructuralZero
from .targets import repair_zeros

__all__ = ["ProductMixture"]


def _draw_blocks(P: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One category per row of ``P`` (nonnegative weights, rows × k) by inverse CDF at ``u`` ∈ (0, 1]."""
    c = np.cumsum(P, axis=1)
    return np.minimum((c < u[:, None] * c[:, -1:]).sum(1), P.shape[1] - 1)


class ProductMixture:
    """``P`` (rows × Σk, float32, each block nonnegative) over ``domain``, standing for ``total``
    records, with structural ``zeros`` honoured when sampling. ``stratified``: output records cycle
    through the rows (each used ``n // rows`` times, the rest distinct random rows: RAP's
    oversampled randomized rounding); otherwise each record picks a row uniformly at random."""

    def __init__(self, domain: Domain, P: np.ndarray, total: float, zeros: Sequence[StructuralZero] = (),
                 stratified: bool = False):
        self.domain = domain
        self.P = np.asarray(P, dtype=np.float32)
        self.total = float(total)
        self.zeros = list(zeros)
        self.stratified = bool(stratified)
        ks = np.asarray(domain.shape, dtype=np.int64)
        ends = np.cumsum(ks)
        if self.P.ndim != 2 or self.P.shape[1] != int(ends[-1] if len(ends) else 0):
            raise ValueError(f"the mixture's rows must have {int(ks.sum())} columns, got shape {self.P.shape}")
        self._span = {a: (int(e - k), int(e)) for a, k, e in zip(domain.attrs, ks, ends)}
        self._cache: dict[tuple[str, ...], np.ndarray] = {}

    @property
    def n_rows(self) -> int:
        return int(self.P.shape[0])

    def block(self, a: str, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Attribute ``a``'s probabilities for ``rows`` (float64, negatives clipped to 0)."""
        s, e = self._span[a]
        return np.maximum(self.P[rows, s:e].astype(np.float64), 0.0)

    def project(self, attrs: Sequence[str]) -> np.ndarray:
        """Expected counts on ``attrs`` (flat, row-major in the order given):
        ``total · mean_n ⊗_{a∈attrs} P[n, a, ·]``, in row chunks of bounded memory. Free."""
        attrs = tuple(attrs)
        if not attrs:
            return np.array([self.total])
        hit = self._cache.get(attrs)
        if hit is not None:
            return hit.copy()
        n = self.n_rows
        size = self.domain.size(attrs[:-1]) if len(attrs) > 1 else 1
        step = max(1, int(2e7 // max(1, size)))
        out = np.zeros(self.domain.size(attrs))
        for s in range(0, n, step):
            rows = slice(s, min(n, s + step))
            M = self.block(attrs[0], rows)
            if len(attrs) == 1:
                out += M.sum(0)
                continue
            for a in attrs[1:-1]:
                M = (M[:, :, None] * self.block(a, rows)[:, None, :]).reshape(M.shape[0], -1)
            out += (M.T @ self.block(attrs[-1], rows)).ravel()
        out *= self.total / max(n, 1)
        if len(self._cache) < 4096:
            self._cache[attrs] = out
        return out.copy()

    def _pick(self, rows: int, rng: np.random.Generator, p: np.ndarray | None) -> np.ndarray:
        n = self.n_rows
        if p is not None:
            return rng.choice(n, rows, replace=True, p=p)
        if self.stratified:
            idx = np.concatenate([np.tile(np.arange(n), rows // n), rng.choice(n, rows % n, replace=False)])
            return rng.permutation(idx)
        return rng.integers(0, n, rows)

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` records as integer codes (rows × attributes, domain order). Free."""
        rows = int(rows)
        if rows < 0:
            raise ValueError("rows must be >= 0")
        return self._draw(self._pick(rows, rng, None), rng, {})

    def sample_conditional(self, rows: int, rng: np.random.Generator, evidence: dict) -> np.ndarray:
        """``rows`` records given ``evidence`` (attribute -> code), exact for the mixture: rows picked
        ∝ the probability each gives the evidence, the other attributes drawn from the picked row.
        Raises ``ValueError`` when the evidence has probability zero."""
        w = np.ones(self.n_rows)
        fixed = {}
        for a, v in evidence.items():
            if a not in self.domain:
                raise ValueError(f"unknown attribute {a!r} in the condition")
            fixed[a] = int(v)
            w *= self.block(a)[:, fixed[a]]
        if not w.sum() > 0:
            shown = ", ".join(f"{a}={v}" for a, v in evidence.items())
            raise ValueError(f"the condition {shown} has probability zero under the model")
        return self._draw(self._pick(int(rows), rng, w / w.sum()), rng, fixed)

    def _draw(self, idx: np.ndarray, rng: np.random.Generator, fixed: dict[str, int]) -> np.ndarray:
        dom = self.domain
        out = np.empty((idx.size, len(dom)), dtype=np.int64)
        for j, a in enumerate(dom.attrs):
            if a in fixed:
                out[:, j] = fixed[a]
                continue
            step = max(1, int(4e6 // dom[a]))  # bounded memory per chunk
            for s in range(0, idx.size, step):
                sl = slice(s, s + step)
                out[sl, j] = _draw_blocks(self.block(a, idx[sl]), 1.0 - rng.random(idx[sl].size))
        if self.zeros and idx.size:
            def weights(bad, attrs):
                # the row's own product distribution over the zero's cells; evidence stays certain
                w = np.ones((bad.size, 1))
                for a in attrs:
                    b = self.block(a, idx[bad])
                    if a in fixed:
                        b = np.zeros_like(b)
                        b[:, fixed[a]] = 1.0
                    w = (w[:, :, None] * b[:, None, :]).reshape(bad.size, -1)
                return w
            repair_zeros(out, dom, self.zeros, rng, weights)
        return out

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_cache"] = {}
        return state
