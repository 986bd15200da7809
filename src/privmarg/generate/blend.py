"""A fitted model blended with the public records: share ``λ`` of the model, ``1 − λ`` of the public table.

JAM's release when the exponential mechanism picks a blend (:mod:`privmarg.select.jam_blend`):
marginals are ``λ·M_r(model) + (1 − λ)·M_r(public)`` (both scaled to ``total``), and ``rows``
records are ``k`` of the model's and ``rows − k`` of the public records, ``k = ⌊λ·rows + U⌋``
(mean exactly ``λ·rows``), in random order. The public records are drawn systematically (each
⌊n·p⌋ or ⌈n·p⌉ times), so that part adds under one record of noise to any count. By convexity of
the L1 norm a blend's error on any marginal is at most ``λ`` times the model's plus ``1 − λ`` times
the public table's. Post-processing only: no privacy cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from ..core import Domain
from .records import RecordsModel
from .state import domain_state, read_total


class BlendedModel:
    """``share`` (λ ∈ [0, 1]) of ``model`` and ``1 − λ`` of ``public`` (a weighted
    :class:`~privmarg.generate.records.RecordsModel` of the public records), over one domain,
    standing for ``model.total`` records."""

    state_kind: ClassVar[str] = "blend"  # in saved models (:mod:`privmarg.generate.state`)

    def __init__(self, model: Any, public: RecordsModel, share: float):
        if isinstance(share, bool) or not isinstance(share, (int, float, np.floating)):
            raise ValueError(f"a blend's share of the model must be a number in [0, 1], got {share!r}")
        if isinstance(model, BlendedModel):
            raise ValueError("a blend's model part cannot itself be a blend")
        share = float(share)
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"a blend's share of the model must be in [0, 1], got {share!r}")
        if not isinstance(public, RecordsModel):
            raise ValueError("a blend's public part must be a table of records")
        if public.domain != model.domain:
            raise ValueError("a blend's two parts must have the same domain")
        self.domain: Domain = model.domain
        self.total = float(model.total)
        if public.total != self.total:  # both parts stand for the release's records
            public = RecordsModel(public.domain, self.total, public.codes_, public.weights)
        self.model, self.public, self.share = model, public, share

    def __getattr__(self, name):  # the fitted model's fit record (its fit is the release's), nothing else
        if name in ("info", "fit_info") and "model" in self.__dict__:
            return getattr(self.model, name)
        raise AttributeError(name)

    def to_state(self, key: str, arrays: dict, save) -> dict:
        """The saved form: the share and both parts."""
        return {"domain": domain_state(self.domain), "total": self.total, "share": self.share,
                "model": save(self.model, f"{key}.model"), "public": save(self.public, f"{key}.public")}

    @classmethod
    def from_state(cls, state: dict, arrays: dict, domain: Domain, load) -> "BlendedModel":
        read_total(state)
        return cls(load(state["model"]), load(state["public"]), state["share"])

    def project(self, attrs: Sequence[str]) -> np.ndarray:
        """``λ·M_r(model) + (1 − λ)·M_r(public)``, counts scaled to ``total``."""
        if self.share == 1.0:
            return self.model.project(attrs)
        pub = self.public.project(attrs)
        if self.share == 0.0:
            return pub
        return self.share * self.model.project(attrs) + (1.0 - self.share) * pub

    def _split(self, rows: int, share: float, rng: np.random.Generator) -> int:
        return min(rows, int(np.floor(share * rows + rng.random())))

    def _join(self, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.concatenate([a, b]) if len(b) else a
        return out[rng.permutation(len(out))] if len(a) and len(b) else out

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` records: about ``λ·rows`` of the model's, the rest public records."""
        rows = int(rows)
        k = self._split(rows, self.share, rng)
        part = self.model.sample(k, rng) if k else np.zeros((0, len(self.domain)), dtype=np.int64)
        return self._join(np.asarray(part, dtype=np.int64), self.public.sample(rows - k, rng)
                          if rows - k else np.zeros((0, len(self.domain)), dtype=np.int64), rng)

    def sample_conditional(self, rows: int, rng: np.random.Generator, evidence: Mapping[str, int]) -> np.ndarray:
        """``rows`` records given ``evidence``: each part's share re-weighted by how likely each
        makes the evidence (the blend's exact conditional), then each part sampled given it."""
        attrs = tuple(evidence)
        for a in attrs:
            if a not in self.domain:
                raise ValueError(f"unknown attribute {a!r} in the condition")
            if not 0 <= int(evidence[a]) < self.domain[a]:
                raise ValueError(f"the condition {a}={evidence[a]} is outside the column's codes 0..{self.domain[a] - 1}")
        cell = int(np.ravel_multi_index(tuple(int(evidence[a]) for a in attrs), self.domain.sizes(attrs)))
        pm = self.share * max(float(self.model.project(attrs)[cell]), 0.0) if self.share > 0 else 0.0
        pp = (1.0 - self.share) * max(float(self.public.project(attrs)[cell]), 0.0) if self.share < 1 else 0.0
        if pm + pp <= 0:
            shown = ", ".join(f"{a}={v}" for a, v in evidence.items())
            raise ValueError(f"the condition {shown} has probability zero under the model")
        rows = int(rows)
        k = self._split(rows, pm / (pm + pp), rng)
        empty = np.zeros((0, len(self.domain)), dtype=np.int64)
        cond = getattr(self.model, "sample_conditional", None)
        if k and cond is None:
            raise ValueError(f"a {type(self.model).__name__} model cannot sample conditionally")
        a = np.asarray(cond(k, rng, evidence), dtype=np.int64) if k else empty
        b = self.public.sample_conditional(rows - k, rng, evidence) if rows - k else empty
        return self._join(a, b, rng)

    def __repr__(self) -> str:
        return f"BlendedModel(share={self.share:g} of {type(self.model).__name__}, {len(self.public.codes_)} public records)"
