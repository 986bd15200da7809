"""Domain compression (MST's, SPEC §5 step 2) as a wrapper usable with any selector.

:class:`Compressed` measures every 1-way marginal first, merges each attribute's values whose noisy
count is below ``3σ`` into one value, and runs the inner selector on the compressed domain (its
private answers summed from the original ones, :class:`~privmarg.data.MappedSource`). The model
fitted on the compressed domain is lifted back: a merged value becomes a uniform draw among the
values it merged (:class:`DecompressedModel`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ..core import Domain, Measurement
from ..data import MappedSource
from ..generate.state import domain_state
from ..privacy import even_sigma, marginal_l2
from .base import Context, Selection, check_fraction, one_ways


class Compressed:
    """``inner`` run on a domain compressed with ``share`` of the budget (its 1-way marginals).

    Attributes named in a structural zero are never compressed (zeros are declared on original
    values). Privacy: ``share·ρ`` for the 1-way marginals (jointly, Δ₂ each), the rest is the inner
    selector's; compression itself reads only the released 1-way answers.
    """

    def __init__(self, inner: Any, share: float = 1 / 3):
        self.inner = inner
        self.share = check_fraction("share", share)
        self.name = f"compressed-{inner.name}"

    def supporting_cliques(self, domain: Domain) -> list[tuple[str, ...]]:
        return list(dict.fromkeys(one_ways(domain) + list(self.inner.supporting_cliques(domain))))

    def run(self, session, ctx: Context) -> Selection:
        dom = session.domain
        l2 = marginal_l2(session.neighbour)
        s1 = even_sigma(self.share * ctx.rho, len(dom), l2)
        ones = [session.measure((a,), s1, what=f"1-way {a} (compression)") for a in dom.attrs]
        keep = {a for z in ctx.zeros for a in z.attrs}
        maps, supports, shape, cones = {}, {}, [], []
        for a, m in zip(dom.attrs, ones):
            supp = m.y >= 3 * s1
            k = dom[a]
            if supp.all() or a in keep:
                shape.append(k)
                cones.append(m)
                continue
            n_s, merged = int(supp.sum()), k - int(supp.sum())
            mapping = np.full(k, n_s, dtype=np.int64)
            mapping[supp] = np.arange(n_s)
            maps[a], supports[a] = mapping, np.flatnonzero(supp)
            # the merged count, scaled so the derived answer keeps noise σ per cell
            y = np.append(m.y[supp], m.y[~supp].sum() / math.sqrt(merged))
            q = np.eye(n_s + 1)
            q[-1, -1] = 1 / math.sqrt(merged)
            shape.append(n_s + 1)
            cones.append(Measurement((a,), y, s1, query=q, meta={"derived": "compressed"}))
        cdom = Domain(dom.attrs, shape)
        inner_session = session.derived(MappedSource(session.source, cdom, maps) if maps else session.source)
        inner_session.rounds = session.rounds
        for m in cones:
            inner_session.record(m)
        ctx.progress("compression: 1-way marginals measured")
        # the public table seen on the compressed domain too (the maps come from released answers)
        public = MappedSource(ctx.public, cdom, maps) if maps and ctx.public is not None else ctx.public
        inner_ctx = Context(ctx.rho - session.rho_spent, ctx.total, ctx.zeros, public, ctx.progress)
        sel = self.inner.run(inner_session, inner_ctx)
        released = ones + [m for m in inner_session.measurements if m.meta.get("derived") != "compressed"]
        session.measurements[:] = released
        lift = functools.partial(DecompressedModel, domain=dom, supports=supports) if supports else None
        return Selection(sel.measurements, cdom, model=sel.model, lift=lift, released=released,
                         extra={**sel.extra, "supports": supports, "compressed_domain": cdom}, hints=sel.hints)


class DecompressedModel:
    """A model over a compressed domain seen on the original one: a merged value's mass is spread
    uniformly over the values it merged; sampled records draw uniformly among them. ``fixed``
    (attribute -> original code) is evidence a conditioned model holds: the attribute's mass and
    records sit on that value."""

    state_kind: ClassVar[str] = "decompressed"  # in saved models (:mod:`privmarg.generate.state`)

    def to_state(self, key: str, arrays: dict, save) -> dict:
        """The saved form: each compressed column's kept values, the evidence, the inner model."""
        supports = {}
        for a, s in self.supports.items():  # array names by column index: any column name is safe
            k = f"{key}.supports.{self.domain.attrs.index(a)}"
            arrays[k] = np.asarray(s, dtype=np.int64)
            supports[a] = k
        return {"domain": domain_state(self.domain), "supports": supports,
                "fixed": {a: int(v) for a, v in self.fixed.items()}, "inner": save(self.model, f"{key}.inner")}

    @classmethod
    def from_state(cls, state: dict, arrays: dict, domain: Domain, load) -> "DecompressedModel":
        supports = {a: np.asarray(arrays[k], dtype=np.int64) for a, k in state["supports"].items()}
        return cls(load(state["inner"]), domain, supports, state.get("fixed") or {})

    def __init__(self, model: Any, domain: Domain, supports: dict[str, np.ndarray],
                 fixed: Mapping[str, int] | None = None):
        self.model = model
        self.domain = domain
        self.supports = supports
        self.fixed = dict(fixed or {})
        self.total = model.total

    def __getattr__(self, name):  # info, cliques, default_rows, ... of the wrapped model
        if name in ("model", "fixed", "supports", "domain"):
            raise AttributeError(name)
        return getattr(self.model, name)

    def _expansion(self, a: str) -> np.ndarray:
        supp, k = self.supports[a], self.domain[a]
        E = np.zeros((k, len(supp) + 1))
        if a in self.fixed:  # conditioned: all of the attribute's mass is on the given value
            E[self.fixed[a], :] = 1.0
            return E
        rest = np.setdiff1d(np.arange(k), supp)
        E[supp, np.arange(len(supp))] = 1.0
        E[rest, len(supp)] = 1.0 / len(rest)
        return E

    def project(self, attrs) -> np.ndarray:
        attrs = tuple(attrs)
        arr = self.model.project(attrs).reshape(self.model.domain.sizes(attrs))
        for ax, a in enumerate(attrs):
            if a in self.supports:
                arr = np.moveaxis(np.tensordot(self._expansion(a), np.moveaxis(arr, ax, 0), axes=(1, 0)), 0, ax)
        return np.ascontiguousarray(arr).ravel()

    def _compressed_evidence(self, evidence: Mapping[str, int]) -> dict[str, int]:
        out = {}
        for a, v in evidence.items():
            v = int(v)
            if a not in self.domain:
                raise ValueError(f"unknown attribute {a!r} in the condition")
            if not 0 <= v < self.domain[a]:
                raise ValueError(f"condition {a}={v}: code outside 0..{self.domain[a] - 1}")
            supp = self.supports.get(a)
            if supp is None:
                out[a] = v
            else:
                hit = np.flatnonzero(supp == v)
                out[a] = int(hit[0]) if hit.size else len(supp)  # a merged value: its group's code
        return out

    def condition(self, evidence: Mapping[str, int]) -> "DecompressedModel":
        """The model given ``evidence`` (original codes): the inner model conditioned on the
        compressed codes; a merged value stands for its group (uniform within it), so fixing it
        exactly is the same conditional."""
        inner = self.model.condition(self._compressed_evidence(evidence))
        return DecompressedModel(inner, self.domain, self.supports, {**self.fixed, **{a: int(v) for a, v in evidence.items()}})

    def sample_conditional(self, rows: int, rng: np.random.Generator, evidence: Mapping[str, int]) -> np.ndarray:
        """Exact conditional records (see :meth:`condition`); every record carries the evidence."""
        codes = self.model.sample_conditional(rows, rng, self._compressed_evidence(evidence))
        return self._lift(codes, rng, {**self.fixed, **{a: int(v) for a, v in evidence.items()}})

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        return self._lift(self.model.sample(rows, rng), rng, self.fixed)

    def _lift(self, codes: np.ndarray, rng: np.random.Generator, fixed: Mapping[str, int]) -> np.ndarray:
        for j, a in enumerate(self.domain.attrs):
            supp = self.supports.get(a)
            if supp is None:
                continue
            if a in fixed:
                codes[:, j] = fixed[a]
                continue
            rest = np.setdiff1d(np.arange(self.domain[a]), supp)
            col = codes[:, j]
            other = col == len(supp)
            out = np.empty_like(col)
            out[~other] = supp[col[~other]]
            out[other] = rest[rng.integers(0, len(rest), other.sum())]
            codes[:, j] = out
        return codes
