"""A generator written as a newcomer would add one (docs: one file + one registry line): each record
drawn column by column from the measured 1-way marginals, records in a structural zero redrawn.
Used by tests/test_contract.py to show such a generator keeps the shared contract."""

from __future__ import annotations

import numpy as np

from privmarg.generate.records import RecordsModel
from privmarg.generate.targets import forbidden


class OneWayGenerator:
    """Independent columns from the measured 1-way marginals (uniform where a column has none)."""

    name = "one-way"

    def generate(self, measurements, domain, *, zeros=(), total=None, warm=None, seed=None, progress=None, **extra):
        rng = np.random.default_rng(seed)
        n = int(round(total)) if total else 1000
        cols = []
        for a in domain.attrs:
            ys = [np.clip(m.y, 0, None) for m in measurements if m.attrs == (a,)]
            p = np.mean(ys, axis=0) if ys else np.ones(domain.size([a]))
            p = p / p.sum() if p.sum() > 0 else np.full(len(p), 1 / len(p))
            cols.append(rng.choice(len(p), size=n, p=p))
        codes = np.column_stack(cols)
        for _ in range(100):  # redraw records in a structural zero (the rest keep their values)
            bad = forbidden(codes, domain, zeros) if zeros else np.zeros(n, bool)
            if not bad.any():
                break
            codes[bad] = codes[rng.choice(np.flatnonzero(~bad), bad.sum())]
        return RecordsModel(domain, n, codes)
