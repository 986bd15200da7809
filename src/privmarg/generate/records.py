"""A model that is a table of synthetic records, optionally weighted (GSD's population, PMW^Pub's
reweighted public records)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from ..core import Domain, StructuralZero
from .state import domain_state, read_total
from .draws import balanced_draw
from .targets import cell_index, forbidden


class RecordsModel:
    """``codes`` (rows × attributes, domain order) standing for ``total`` records.

    Unweighted (``weights`` None): the records are the synthetic data; :meth:`sample` returns all of
    them in random order when asked for as many, a subsample without replacement when asked for
    fewer, and all of them plus draws with replacement when asked for more (GSD's "oversampled with
    replacement"). Weighted: a distribution over the records (probabilities, summing to 1), sampled
    with replacement by :func:`~privmarg.generate.draws.balanced_draw` (each record ⌊n·w⌋ or ⌈n·w⌉
    times, the drawn rows' low-order marginals kept close to the weights'). Post-processing only: no
    privacy cost."""

    state_kind: ClassVar[str] = "records"  # in saved models (:mod:`privmarg.generate.state`)

    def to_state(self, key: str, arrays: dict, save) -> dict:
        """The saved form: the records (and their weights)."""
        arrays[f"{key}.codes"] = np.asarray(self.codes_, dtype=np.int64)
        out = {"domain": domain_state(self.domain), "total": float(self.total), "codes": f"{key}.codes",
               "weights": None}
        if self.weights is not None:
            arrays[f"{key}.weights"] = np.asarray(self.weights, dtype=float)
            out["weights"] = f"{key}.weights"
        return out

    @classmethod
    def from_state(cls, state: dict, arrays: dict, domain: Domain, load) -> "RecordsModel":
        w = state.get("weights")
        return cls(domain, read_total(state), np.asarray(arrays[state["codes"]], dtype=np.int64),
                   None if w is None else np.asarray(arrays[w], dtype=float))

    def __init__(self, domain: Domain, total: float, codes: np.ndarray, weights: np.ndarray | None = None,
                 info: dict | None = None):
        codes = np.ascontiguousarray(codes, dtype=np.int64)
        if codes.ndim != 2 or codes.shape[1] != len(domain) or not len(codes):
            raise ValueError(f"codes must have shape (rows >= 1, {len(domain)})")
        if (codes < 0).any() or (codes >= np.asarray(domain.shape)).any():
            raise ValueError("codes outside the domain")
        if weights is not None:
            weights = np.asarray(weights, dtype=float)
            if weights.shape != (len(codes),) or (weights < 0).any() or not weights.sum() > 0:
                raise ValueError("weights must be one non-negative number per record, not all zero")
            weights = weights / weights.sum()
        self.domain, self.total, self.codes_, self.weights = domain, float(total), codes, weights
        self.fit_info = info or {}

    def project(self, attrs: Sequence[str]) -> np.ndarray:
        """Marginal counts on ``attrs`` (order given), scaled to ``total``."""
        attrs = tuple(attrs)
        if not attrs:
            return np.array([self.total])
        idx, size = cell_index(self.codes_, self.domain, attrs), self.domain.size(attrs)
        if self.weights is None:  # equal weights: plain counts (a weighted count is ~3x slower)
            return np.bincount(idx, minlength=size) * (self.total / len(self.codes_))
        return np.bincount(idx, weights=self.weights, minlength=size) * self.total

    def _pick(self, idx: np.ndarray, rows: int, rng: np.random.Generator) -> np.ndarray:
        if self.weights is not None:
            return idx[balanced_draw(self.codes_[idx], self.weights[idx], rows, self.domain.shape, rng)]
        if rows <= idx.size:
            return idx[rng.choice(idx.size, rows, replace=False)]
        out = np.concatenate([idx, idx[rng.integers(0, idx.size, rows - idx.size)]])
        rng.shuffle(out)
        return out

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` records (see the class docstring for how)."""
        return self.codes_[self._pick(np.arange(len(self.codes_)), int(rows), rng)].copy()

    def sample_conditional(self, rows: int, rng: np.random.Generator, evidence) -> np.ndarray:
        """``rows`` records among those carrying ``evidence`` (attribute -> code): exact for the
        model's own distribution, but only repeats matching records."""
        ok = np.ones(len(self.codes_), dtype=bool)
        for a, v in evidence.items():
            if a not in self.domain:
                raise ValueError(f"unknown attribute {a!r} in the condition")
            ok &= self.codes_[:, self.domain.attrs.index(a)] == int(v)
        if self.weights is not None:
            ok &= self.weights > 0
        idx = np.flatnonzero(ok)
        if int(rows) == 0:
            return self.codes_[:0].copy()
        if idx.size == 0:
            shown = ", ".join(f"{a}={v}" for a, v in evidence.items())
            raise ValueError(f"the condition {shown} has probability zero under the model (no record carries it)")
        return self.codes_[self._pick(idx, int(rows), rng)].copy()

    def size_mb(self) -> float:
        return self.codes_.nbytes / 2**20


def distinct_records(rows: np.ndarray, domain: Domain, total: float,
                     zeros: Sequence[StructuralZero] = ()) -> RecordsModel | None:
    """The distinct rows of ``rows`` (integer codes over ``domain``) weighted by their frequency,
    standing for ``total`` records, those in a structural-zero cell dropped; None when no row is
    left. For public data (PMW^Pub's start, JAM's blend): free."""
    rows = np.asarray(rows, dtype=np.int64)
    uniq, counts = np.unique(rows, axis=0, return_counts=True)
    w = counts.astype(float)
    if zeros:
        w[forbidden(uniq, domain, zeros)] = 0.0
    keep = w > 0
    if not keep.any():
        return None
    return RecordsModel(domain, total, uniq[keep], w[keep], info={"public_rows": int(len(rows))})


def public_records(public: Any, domain: Domain, total: float,
                   zeros: Sequence[StructuralZero] = ()) -> RecordsModel | None:
    """:func:`distinct_records` of a public source's rows; None when the source holds no records
    (precomputed marginals), none over ``domain``, or none outside the zeros. Free: public data."""
    if not hasattr(public, "records"):
        return None
    rows = np.asarray(public.records(), dtype=np.int64)
    if rows.ndim != 2 or rows.shape[1] != len(domain) or not len(rows):
        return None
    return distinct_records(rows, domain, total, zeros)
