"""A generator written as a newcomer would add one (docs: one file + one registry line): each record
drawn column by column from the measured 1-way marginals, records in a structural zero redrawn. Its
model is a new kind that saved models write and read through ``to_state`` / ``from_state`` (the
registry line names it). Used by tests/test_contract.py to show such a generator keeps the shared
contract and saves."""

from __future__ import annotations

import numpy as np

from privmarg.generate.state import domain_state, read_total, zeros_from_state, zeros_to_state
from privmarg.generate.targets import forbidden


class OneWayModel:
    """Independent columns: one probability vector per column, ``total`` records."""

    state_kind = "one-way"

    def __init__(self, domain, total, probs, zeros=()):
        self.domain, self.total, self.probs, self.zeros = domain, float(total), [np.asarray(p) for p in probs], list(zeros)

    def project(self, attrs):
        out = np.array([self.total])
        for a in attrs:
            out = np.multiply.outer(out, self.probs[self.domain.attrs.index(a)])
        return out.ravel()

    def sample(self, rows, rng):
        codes = np.column_stack([rng.choice(len(p), size=rows, p=p) for p in self.probs])
        for _ in range(100):  # redraw records in a structural zero (the rest keep their values)
            bad = forbidden(codes, self.domain, self.zeros) if self.zeros else np.zeros(rows, bool)
            if not bad.any():
                break
            codes[bad] = codes[rng.choice(np.flatnonzero(~bad), bad.sum())]
        return codes

    def to_state(self, key, arrays, save):
        for i, p in enumerate(self.probs):
            arrays[f"{key}.p.{i}"] = p
        return {"domain": domain_state(self.domain), "total": self.total,
                "probs": [f"{key}.p.{i}" for i in range(len(self.probs))],
                "zeros": zeros_to_state(self.zeros, key, arrays)}

    @classmethod
    def from_state(cls, state, arrays, domain, load):
        probs = [np.asarray(arrays[k], dtype=float) for k in state["probs"]]
        if [len(p) for p in probs] != list(domain.shape) or any((p < 0).any() for p in probs):
            raise ValueError("the column probabilities do not fit the domain")
        return cls(domain, read_total(state), probs, zeros_from_state(state.get("zeros", []), arrays))


class OneWayGenerator:
    """Independent columns from the measured 1-way marginals (uniform where a column has none)."""

    name = "one-way"

    def generate(self, measurements, domain, *, zeros=(), total=None, warm=None, seed=None, progress=None, **extra):
        probs = []
        for a in domain.attrs:
            ys = [np.clip(m.y, 0, None) for m in measurements if m.attrs == (a,)]
            p = np.mean(ys, axis=0) if ys else np.ones(domain.size([a]))
            probs.append(p / p.sum() if p.sum() > 0 else np.full(len(p), 1 / len(p)))
        return OneWayModel(domain, total if total else 1000, probs, zeros)
