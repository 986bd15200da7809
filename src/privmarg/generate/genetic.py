"""Private-GSD's generator (Liu, Vietri, Wu et al. 2023; SPEC §10.4): a genetic algorithm over records.

It minimises ``L(X) = Σ_r w̄_r ‖â_r − M_r(X)/n‖₂²`` over a table ``X`` of ``n = min(N, max_rows)``
records, where ``â_r`` are the measured marginals normalised by ``N`` and ``w̄_r`` the measurements'
loss weights divided by their mean (all 1 for equal noise, GSD's unweighted loss). Each generation
makes ``mutations`` candidates (the current table with one random cell overwritten by a uniform
random value) and ``crossovers`` candidates (the current table with one random row given one
column's value from a random row of a random elite table); the best candidate replaces the current
table when it lowers the loss. The ``elite`` best candidates of the generation form the elite
archive (each an elite table = the current table with one row changed).

Speed comes from incremental fitness: a candidate differs from the current table in one row, so
for every measured clique only two cells change (−1 for the old row's cell, +1 for the new one's).
The residuals ``R = n·â − M(X)`` are kept in one flat vector over all measured cells, each record's
cells in an ``n × K`` index table, and a whole generation's loss changes are one gather:
``ΔL = Σ_r w̄_r·[old ≠ new]·2(R[old] − R[new] + 1)/n²``. Accepting a candidate touches 2K cells.

GSD's numeric-noise crossover (Gaussian noise on real-valued columns, then clipping) has no
counterpart here: every column is discretised (codes), so crossovers only copy codes. Records
start from the measured 1-way marginals (uniform for unmeasured columns), GSD starts uniformly: a
better start, same optimum. Structural zeros: the start is repaired and a candidate that lands in
a forbidden cell is never accepted. Post-processing only: no privacy cost.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Domain, Measurement, StructuralZero
from .records import RecordsModel
from .targets import Target, cell_index, forbidden, marginal_targets, repair_zeros, resolve_total


class GSDState:
    """The current table, its residuals and the elite archive, for one fit (exposed for tests)."""

    def __init__(self, domain: Domain, targets: Sequence[Target], total: float, codes: np.ndarray,
                 zeros: Sequence[StructuralZero] = ()):
        self.domain, self.targets, self.total, self.zeros = domain, list(targets), float(total), list(zeros)
        self.shape = np.asarray(domain.shape, dtype=np.int64)  # per-attribute value counts, read every generation
        self.X = np.ascontiguousarray(codes, dtype=np.int64)
        self.n, d = self.X.shape
        K = len(self.targets)
        sizes = np.array([domain.size(t.attrs) for t in self.targets], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        # cell of record x in clique k = x @ strides[:, k] + offsets[k] (row-major strides, 0 outside)
        self.strides = np.zeros((d, K), dtype=np.int64)
        for k, t in enumerate(self.targets):
            sh = domain.sizes(t.attrs)
            st = np.cumprod((list(sh[1:]) + [1])[::-1])[::-1]
            for a, s in zip(t.attrs, st):
                self.strides[domain.attrs.index(a), k] = s
        w = np.array([t.weight for t in self.targets], dtype=float)
        self.w = w / w.mean() if w.mean() > 0 else np.ones(K)
        self.target = np.concatenate([t.y * (self.n / self.total) for t in self.targets])  # in rows
        self.cell_w = np.repeat(self.w, sizes)
        self.cells = self.X @ self.strides + self.offsets  # n × K
        counts = np.bincount(self.cells.ravel(), minlength=self.target.size).astype(float)
        self.R = self.target - counts
        self.elite_rows = self.X[:1].copy()  # elite tables: X with row elite_at[e] set to elite_rows[e]
        self.elite_at = np.zeros(1, dtype=np.int64)

    # ------------------------------------------------------------------------ fitness
    def loss(self) -> float:
        """Current loss from the kept residuals (units: squared fractions of the rows)."""
        return float((self.cell_w * self.R**2).sum() / self.n**2)

    def loss_of(self, codes: np.ndarray) -> float:
        """Loss of any table of ``n`` records, recomputed from scratch (the check on the increments)."""
        cells = np.asarray(codes, dtype=np.int64) @ self.strides + self.offsets
        R = self.target - np.bincount(cells.ravel(), minlength=self.target.size)
        return float((self.cell_w * R**2).sum() / self.n**2)

    def deltas(self, rows: np.ndarray, new: np.ndarray) -> np.ndarray:
        """Loss change of each candidate "row ``rows[p]`` becomes ``new[p]``" (vectorised; +inf for a
        candidate in a structural-zero cell)."""
        old = self.cells[rows]
        nw = new @ self.strides + self.offsets
        diff = old != nw
        dl = (self.w * diff * (2.0 * (self.R[old] - self.R[nw] + 1.0))).sum(axis=1) / self.n**2
        if self.zeros:
            dl[forbidden(new, self.domain, self.zeros)] = np.inf
        return dl

    def accept(self, row: int, new: np.ndarray) -> None:
        """Replace record ``row`` by ``new``, updating only the touched residual cells."""
        old = self.cells[row]
        nw = new @ self.strides + self.offsets
        ch = old != nw
        self.R[old[ch]] += 1.0  # cells are distinct within one side (one per clique, disjoint ranges)
        self.R[nw[ch]] -= 1.0
        self.cells[row] = nw
        self.X[row] = new

    # ---------------------------------------------------------------------- generation
    def candidates(self, rng: np.random.Generator, mutations: int, crossovers: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, new rows) of one generation: ``mutations`` random-cell overwrites, then
        ``crossovers`` copies of one column from a random row of a random elite table."""
        n, d = self.X.shape
        P = mutations + crossovers
        rows = rng.integers(0, n, P)
        cols = rng.integers(0, d, P)
        new = self.X[rows]
        k = self.shape
        vals = np.empty(P, dtype=np.int64)
        vals[:mutations] = (rng.random(mutations) * k[cols[:mutations]]).astype(np.int64)
        if crossovers:
            cc = cols[mutations:]
            e = rng.integers(0, len(self.elite_at), crossovers)
            donor = rng.integers(0, n, crossovers)
            vals[mutations:] = np.where(donor == self.elite_at[e], self.elite_rows[e, cc], self.X[donor, cc])
        new[np.arange(P), cols] = vals
        return rows, new

    def generation(self, rng: np.random.Generator, mutations: int, crossovers: int, elite: int) -> bool:
        """One generation; returns whether the current table improved."""
        rows, new = self.candidates(rng, mutations, crossovers)
        dl = self.deltas(rows, new)
        top = np.argsort(dl, kind="stable")[:elite]
        top = top[np.isfinite(dl[top])]
        if top.size:
            self.elite_at, self.elite_rows = rows[top].copy(), new[top].copy()
        b = int(np.argmin(dl))
        if dl[b] < 0:
            self.accept(int(rows[b]), new[b])
            return True
        return False


def _start(targets: Sequence[Target], domain: Domain, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` records, each column drawn from its measured 1-way marginal (mean over the cliques that
    contain it; uniform when none does)."""
    acc: dict[str, list] = {a: [] for a in domain.attrs}
    for t in targets:
        arr = np.maximum(t.y, 0).reshape(domain.sizes(t.attrs))
        for ax, a in enumerate(t.attrs):
            p = arr.sum(axis=tuple(i for i in range(len(t.attrs)) if i != ax))
            if p.sum() > 0:
                acc[a].append(p / p.sum())
    cols = []
    for a in domain.attrs:
        p = np.mean(acc[a], axis=0) if acc[a] else np.full(domain[a], 1.0 / domain[a])
        c = np.cumsum(p / p.sum())
        cols.append(np.minimum(np.searchsorted(c, 1.0 - rng.random(n)), domain[a] - 1))
    return np.column_stack(cols).astype(np.int64)


class GeneticGenerator:
    """Private-GSD's genetic algorithm (see the module docstring).

    ``generations``: the most generations (default ``10·n``, SPEC §10.4; adult's n = 10 000 runs
    100 000, about 1–2 minutes on one core), ``mutations`` / ``crossovers`` per generation (50 / 50),
    ``elite`` archive size (5), ``max_rows`` (n = min(N, max_rows), 10 000). Early stopping: every
    ``check_every`` generations the fit stops when the loss fell by less than ``tol`` (relative)
    since the last check. ``warm``: a model of an earlier fit with the same number of records to
    continue from. ``seed``: int or SeedSequence (``generate`` passes the synthesizer's).

    Post-processing only: no privacy cost. The model is a :class:`~privmarg.generate.records.RecordsModel`
    of the ``n`` records; sampling more rows resamples them.
    """

    name = "genetic"

    def __init__(self, generations: int | None = None, mutations: int = 50, crossovers: int = 50, elite: int = 5,
                 max_rows: int = 10_000, check_every: int = 2_000, tol: float = 1e-4, seed: Any = None):
        for k, v, lo in (("mutations", mutations, 0), ("crossovers", crossovers, 0), ("elite", elite, 1),
                         ("max_rows", max_rows, 1), ("check_every", check_every, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{k} must be an integer >= {lo}, got {v!r}")
        if mutations + crossovers < 1:
            raise ValueError("mutations + crossovers must be at least 1")
        if generations is not None and (isinstance(generations, bool) or not isinstance(generations, int)
                                        or generations < 0):
            raise ValueError(f"generations must be an integer >= 0, got {generations!r}")
        if not tol >= 0:
            raise ValueError(f"tol must be >= 0, got {tol}")
        self.generations, self.mutations, self.crossovers, self.elite = generations, mutations, crossovers, elite
        self.max_rows, self.check_every, self.tol, self.seed = max_rows, check_every, float(tol), seed

    def get_params(self) -> dict:
        return {k: getattr(self, k) for k in ("generations", "mutations", "crossovers", "elite", "max_rows",
                                              "check_every", "tol")}

    def generate(self, measurements: Sequence[Measurement], domain: Domain, *, zeros: Sequence[StructuralZero] = (),
                 total: float | None = None, warm: Any = None, seed: Any = None, progress=None,
                 **extra: Any) -> RecordsModel:
        """Fit the records to the measurements (post-processing: no privacy cost)."""
        t0 = time.perf_counter()
        measurements = list(measurements)
        targets = marginal_targets(measurements, domain)
        N = resolve_total(measurements, domain, total)
        n = max(1, min(int(round(N)), self.max_rows))
        seed = self.seed if seed is None else seed
        rng = np.random.default_rng(seed if seed is not None else 0)  # no seed: deterministic (loop refits)
        zeros = list(zeros)
        if (isinstance(warm, RecordsModel) and warm.weights is None and warm.domain == domain
                and len(warm.codes_) == n):
            X = warm.codes_.copy()
        else:
            X = _start(targets, domain, n, rng)
        if zeros:
            repair_zeros(X, domain, zeros, rng)
        info = {"generations": 0, "accepted": 0, "rows": n}
        if not targets:
            return RecordsModel(domain, N, X, info=info | {"seconds": time.perf_counter() - t0})
        st = GSDState(domain, targets, N, X, zeros)
        G = 10 * n if self.generations is None else self.generations
        last = st.loss()
        info["initial_loss"] = last
        g = accepted = 0
        for g in range(1, G + 1):
            accepted += st.generation(rng, self.mutations, self.crossovers, self.elite)
            if g % self.check_every == 0:
                now = st.loss()
                if progress is not None:
                    progress(f"GSD generation {g}/{G}: loss {now:.4g}")
                if now <= 0 or last - now <= self.tol * last:
                    break
                last = now
        info.update(generations=g, accepted=int(accepted), loss=st.loss(), seconds=time.perf_counter() - t0)
        return RecordsModel(domain, N, st.X, info=info)

    def model_size_mb(self, domain: Domain, cliques) -> None:
        return None  # a table of records: no model-size limit on what may be measured

    def __repr__(self) -> str:
        return f"GeneticGenerator({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"
