"""The one seam for private data: a :class:`MarginalSource` answers counting queries.

Everything a source returns is private: it may only be released through a
:class:`~privmarg.measure.MeasurementSession`, which charges the accountant first. Selectors,
generators, constraints and transforms that are part of a release read private data through a
session only, never rows. Implementations: :class:`MemorySource` (an in-memory table of codes),
:class:`PrecomputedSource` (a bag of exact marginals), :class:`MappedSource` (a source seen through
per-attribute value maps, e.g. MST's compression) and :class:`ColumnCounts` (raw columns, for DP
preprocessing before a table is encoded).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..core import Domain, Factor
from .dataset import Dataset

Clique = tuple[str, ...]


@runtime_checkable
class MarginalSource(Protocol):
    """Where private counts come from. ``domain``: the attributes and their sizes (public)."""

    domain: Domain

    def count(self) -> float:
        """The number of records N (private under add/remove)."""

    def marginals(self, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Counts of each marginal, flat, row-major over the clique's attributes in the order given."""


@runtime_checkable
class RecordSource(MarginalSource, Protocol):
    """A :class:`MarginalSource` that can also hand its rows to a session's charged sums over
    records (DP-MERF's mean embedding, DP-SGD). Without ``records`` a session rebuilds the rows from
    the full joint marginal."""

    def records(self) -> np.ndarray:
        """The rows as integer codes (rows × attributes, domain order)."""


@runtime_checkable
class ColumnSource(Protocol):
    """Raw columns of a table not yet encoded, for DP preprocessing (histograms, value discovery,
    PrivTree): what a session's preprocessing releases read. Not a :class:`MarginalSource`: it has no
    domain until the preprocessing has made one."""

    def count(self) -> float:
        """The number of records N (private under add/remove)."""

    def histogram(self, name: str, k: int) -> np.ndarray:
        """Counts of the codes ``0..k-1`` of column ``name``."""

    def value_counts(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The distinct values of column ``name`` and their counts."""

    def range_counter(self, name: str) -> Callable:
        """``count(left, right, closed)``: how many values of column ``name`` lie in the interval."""


class MemorySource:
    """A :class:`~privmarg.data.Dataset` held in memory: marginals by ``bincount`` over its codes."""

    #: every marginal counts each of the ``count()`` rows at most once (L1 norm ≤ count): a bound
    #: the adaptive rounds may use (sources of other tables, e.g. precomputed ones, say nothing)
    counts_rows = True

    def __init__(self, data: Dataset):
        self._data = data
        self.domain = data.domain

    def count(self) -> float:
        return float(len(self._data))

    def marginals(self, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
        return self._data.marginals(cliques)

    def records(self) -> np.ndarray:
        """The rows as integer codes (a copy). Public data: PMW^Pub reweights its records; private
        data: read only by a MeasurementSession's charged sums over records (DP-MERF, DP-SGD)."""
        return self._data.codes.copy()


class PrecomputedSource:
    """Exact marginals computed elsewhere (a database, another process): any clique that is a subset
    of a stored one is answered by summing it down. ``count`` defaults to a stored marginal's total."""

    def __init__(self, domain: Domain, marginals: Mapping[Sequence[str], np.ndarray], count: float | None = None):
        self.domain = domain
        self._factors = [Factor.from_flat(domain, tuple(c), np.asarray(v, dtype=float)) for c, v in marginals.items()]
        if not self._factors and count is None:
            raise ValueError("a precomputed source needs at least one marginal or the count")
        self._count = float(count) if count is not None else self._factors[0].total()

    @classmethod
    def from_source(cls, source: MarginalSource, cliques: Sequence[Sequence[str]]) -> "PrecomputedSource":
        """Precompute ``cliques`` (and the count) from another source."""
        cliques = list(dict.fromkeys(tuple(c) for c in cliques))
        return cls(source.domain, dict(zip(cliques, source.marginals(cliques))), source.count())

    def count(self) -> float:
        return self._count

    def marginals(self, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
        out = []
        for c in cliques:
            c = tuple(c)
            if not c:
                out.append(np.array([self._count]))
                continue
            s = set(c)
            best = min((f for f in self._factors if s <= set(f.attrs)), key=lambda f: f.values.size, default=None)
            if best is None:
                raise KeyError(f"the precomputed source holds no marginal covering {c}")
            out.append(best.project(c).flat.astype(float))
        return out


class MappedSource:
    """``source`` seen through per-attribute value maps (``maps[a][old_code] = new_code``) onto
    ``domain``: a mapped marginal is the original one summed over the values each new value merges."""

    def __init__(self, source: MarginalSource, domain: Domain, maps: Mapping[str, np.ndarray]):
        self._source = source
        self.domain = domain
        self._maps = {a: np.asarray(m, dtype=np.int64) for a, m in maps.items()}

    def count(self) -> float:
        return self._source.count()

    @property
    def counts_rows(self) -> bool:
        """As the source mapped (merging values keeps every row counted once)."""
        return bool(getattr(self._source, "counts_rows", False))

    def marginals(self, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
        cliques = [tuple(c) for c in cliques]
        out = []
        for c, y in zip(cliques, self._source.marginals(cliques)):
            arr = y.reshape(self._source.domain.sizes(c))
            for ax, a in enumerate(c):
                m = self._maps.get(a)
                if m is None:
                    continue
                moved = np.moveaxis(arr, ax, 0)
                summed = np.zeros((self.domain[a],) + moved.shape[1:])
                np.add.at(summed, m, moved)
                arr = np.moveaxis(summed, 0, ax)
            out.append(np.ascontiguousarray(arr).ravel())
        return out


class ColumnCounts:
    """Raw prepared columns of a table not yet encoded, for DP preprocessing (PrivTree, rare merging):
    a :class:`ColumnSource`.

    ``columns[name]``: category codes over a public list (``-1`` = missing) or numeric values (NaN
    = missing). Private: the counts are released only through a session.
    """

    def __init__(self, columns: Mapping[str, np.ndarray], rows: int):
        self._cols = dict(columns)
        self._sorted: dict[str, np.ndarray] = {}
        self._rows = int(rows)

    def count(self) -> float:
        return float(self._rows)

    def histogram(self, name: str, k: int) -> np.ndarray:
        """Counts of the codes ``0..k-1`` of column ``name`` (missing values not counted)."""
        codes = np.asarray(self._cols[name])
        return np.bincount(codes[codes >= 0], minlength=k).astype(float)

    def value_counts(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The distinct value keys of column ``name`` (strings; None = missing, not counted), sorted,
        and their counts (for a charged key discovery); a numeric column (floats, NaN = missing): its
        distinct numbers."""
        col = self._cols[name]
        if isinstance(col, np.ndarray) and col.dtype.kind == "f":
            keys, counts = np.unique(col[~np.isnan(col)], return_counts=True)
            return keys, counts.astype(float)
        x = np.asarray(col, dtype=object)
        x = x[x != None].astype(str)  # noqa: E711 (elementwise)
        keys, counts = np.unique(x, return_counts=True)
        return keys, counts.astype(float)

    def range_counter(self, name: str):
        """``count(left, right, closed)``: the number of values in ``[left, right)`` (``]`` if closed)."""
        xs = self._sorted.get(name)
        if xs is None:
            x = np.asarray(self._cols[name], dtype=float)
            xs = self._sorted[name] = np.sort(x[~np.isnan(x)])

        def count(left, right, closed: bool):  # scalars, or arrays of intervals (vectorized)
            a = np.searchsorted(xs, left, side="left")
            b = np.searchsorted(xs, right, side="right" if closed else "left")
            return int(b - a) if np.ndim(b) == 0 else (b - a).astype(np.int64)

        return count
