"""Counting marginals of an integer-coded table by SQL: the part the DuckDB and Spark sources share.

A :class:`GroupingSetsSource` checks the table in one aggregate pass (missing values, non-integer
values, codes outside the domain: the in-memory path's errors) and answers a batch of cliques with
one ``GROUP BY GROUPING SETS`` query, splitting the result by the grouping bit mask. A backend
supplies the dialect (identifier quoting, the multi-argument grouping function) and runs queries.
Everything counted is private: release it only through a :class:`~privmarg.measure.MeasurementSession`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core import Domain
from .dataset import DataError

# the grouping function is a bit mask over its arguments: keep a batch's columns within a 64-bit integer
MAX_GROUPING_COLUMNS = 62


def as_domain(domain: Any) -> Domain:
    """A Domain from a Domain, a ``{column: size}`` dict or a domain file."""
    if isinstance(domain, Domain):
        return domain
    if isinstance(domain, Mapping):
        return Domain.from_dict(domain)
    if isinstance(domain, (str, Path)):
        return Domain.from_json(domain)
    raise TypeError("domain must be a Domain, a {column: size} dict or a domain file")


class GroupingSetsSource:
    """Base of the SQL sources. A subclass sets ``domain``, ``batch`` and the table's column types
    (:meth:`_set_columns`), and implements ``_ident``, ``_integer_typed``, ``_fetch_row`` and
    ``_fetch_columns``; ``_table`` names the table or view queried and ``_grouping`` the SQL
    function whose bit for an argument (first argument most significant) is 1 when it is aggregated
    away (DuckDB ``GROUPING``, Spark ``grouping_id``)."""

    domain: Domain
    batch: int
    _table: str
    _grouping: str = "GROUPING"
    _count: float | None = None
    counts_rows = True  # GROUP BY counts each row once (see MemorySource.counts_rows)

    # --------------------------------------------------------------------- the dialect
    def _ident(self, name: str) -> str:
        raise NotImplementedError

    def _integer_typed(self, a: str) -> bool:
        raise NotImplementedError

    def _fetch_row(self, sql: str) -> Sequence[Any]:
        """The one row of an aggregate query."""
        raise NotImplementedError

    def _fetch_columns(self, sql: str) -> Mapping[str, Any]:
        """A query's result as ``{column: array}`` (NULLs as masked values or NaN, any dtype)."""
        raise NotImplementedError

    def _group_by_sets(self, idents: str, sets: str) -> str:
        """The GROUP BY clause of grouping sets ``sets`` over the columns ``idents`` (in the order
        the grouping function is given them)."""
        return f"GROUP BY GROUPING SETS ({sets})"

    def _code_expr(self, a: str) -> str:
        # through DOUBLE, as validated: a text "2.0" is the code 2 (a direct cast may refuse it)
        return self._ident(a) if self._integer_typed(a) else f"CAST(CAST({self._ident(a)} AS DOUBLE) AS BIGINT)"

    # ----------------------------------------------------------------------- checking
    def _set_columns(self, types: Mapping[str, str], drop_unknown: bool) -> None:
        """Keep the domain's columns' types (``types``: every column of the table, in order)."""
        missing = [a for a in self.domain.attrs if a not in types]
        if missing:
            raise DataError(f"column(s) missing from the data: {missing}")
        extra = [c for c in types if c not in self.domain]
        if extra and not drop_unknown:
            raise DataError(f"column(s) not in the domain: {extra} (drop them or add them to the domain)")
        self._types = {a: str(types[a]) for a in self.domain.attrs}

    def _validate(self) -> None:
        """One pass: per column the missing values, non-integer values, smallest and largest code."""
        parts = ["count(*)"]
        for a in self.domain.attrs:
            c = self._ident(a)
            if self._integer_typed(a):
                parts += [f"count(*) FILTER (WHERE {c} IS NULL)", "0", f"min({c})", f"max({c})"]
                continue
            num = f"TRY_CAST({c} AS DOUBLE)"
            parts += [f"count(*) FILTER (WHERE {c} IS NULL)",
                      f"count(*) FILTER (WHERE {c} IS NOT NULL AND ({num} IS NULL OR {num} <> round({num})))",
                      f"min({num})", f"max({num})"]
        row = self._fetch_row(f"SELECT {', '.join(parts)} FROM {self._table}")
        rows = int(row[0])
        if rows == 0:
            raise DataError("the table is empty")
        stats = [row[1 + 4 * i: 5 + 4 * i] for i in range(len(self.domain))]
        for a, (nulls, nonint, _, hi) in zip(self.domain.attrs, stats):
            # a float NaN is no NULL; both engines order it above every number (and DuckDB's Parquet
            # statistics can fold isnan() to false), so it shows as the largest value
            if hi is not None and np.isnan(hi):
                raise DataError(f"column {a!r}: missing value(s) (NaN)")
            if nulls:
                raise DataError(f"column {a!r}: {int(nulls)} missing value(s) (NaN)")
            if nonint:
                raise DataError(f"column {a!r}: values must be integer codes, got {self._types[a]}")
        for a, k, (_, _, lo, hi) in zip(self.domain.attrs, self.domain.shape, stats):
            if lo < 0 or hi >= k:  # the count, not the values: they are private
                c = self._ident(a) if self._integer_typed(a) else f"TRY_CAST({self._ident(a)} AS DOUBLE)"
                n_bad = int(self._fetch_row(f"SELECT count(*) FROM {self._table} WHERE {c} < 0 OR {c} >= {k}")[0])
                raise DataError(f"column {a!r}: {n_bad} code(s) outside the domain 0..{k - 1}")
        self._count = float(rows)

    # ------------------------------------------------------------------------ counting
    def count(self) -> float:
        """The number of records N (private under add/remove)."""
        if self._count is None:
            self._count = float(self._fetch_row(f"SELECT count(*) FROM {self._table}")[0])
        return self._count

    def marginals(self, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Counts of each marginal, flat (float64), row-major over the clique's attributes in the
        order given; private. Cliques over the same attributes are counted once, and the distinct
        ones in batches of one ``GROUPING SETS`` query each (at most ``batch`` cliques a query)."""
        cliques = [tuple(c) for c in cliques]
        canon = {}
        for c in cliques:
            k = self.domain.canonical(c)
            if len(k) != len(c):
                raise ValueError(f"repeated attribute in {c}")
            canon[c] = k
        todo = list(dict.fromkeys(k for k in canon.values() if k))
        counted: dict[tuple[str, ...], np.ndarray] = {}
        for batch in self._batches(todo):
            counted.update(self._count_batch(batch))
        out = []
        for c in cliques:
            k = canon[c]
            if not k:
                out.append(np.array([self.count()]))
                continue
            arr = counted[k]
            if k != c:
                arr = np.ascontiguousarray(arr.reshape(self.domain.sizes(k)).transpose([k.index(a) for a in c]))
            out.append(arr.ravel())
        return out

    def _batches(self, cliques: list[tuple[str, ...]]):
        batch: list[tuple[str, ...]] = []
        cols: set[str] = set()
        for c in cliques:
            if batch and (len(batch) >= self.batch or len(cols | set(c)) > MAX_GROUPING_COLUMNS):
                yield batch
                batch, cols = [], set()
            batch.append(c)
            cols |= set(c)
        if batch:
            yield batch

    def _count_batch(self, batch: list[tuple[str, ...]]) -> dict[tuple[str, ...], np.ndarray]:
        cols = [a for a in self.domain.attrs if any(a in c for c in batch)]
        idents = ", ".join(self._ident(a) for a in cols)
        select = ", ".join(f"{self._code_expr(a)} AS {self._ident(a)}" for a in cols)
        if len(batch) == 1:
            sql = f"SELECT {idents}, count(*) AS n FROM (SELECT {select} FROM {self._table}) AS t GROUP BY {idents}"
        else:
            sets = ", ".join("(" + ", ".join(self._ident(a) for a in c) + ")" for c in batch)
            sql = (f"SELECT {idents}, {self._grouping}({idents}) AS gid, count(*) AS n "
                   f"FROM (SELECT {select} FROM {self._table}) AS t {self._group_by_sets(idents, sets)}")
        res = self._fetch_columns(sql)
        n = np.asarray(res["n"], dtype=np.float64)
        if len(batch) == 1:
            c = batch[0]
            return {c: self._bincount(c, {a: _codes(res[a]) for a in c}, n)}
        # rows of one grouping set together: sort by the grouping bit mask once, then slice
        gids = np.asarray(res["gid"], dtype=np.int64)
        order = np.argsort(gids, kind="stable")
        gids = gids[order]
        n = n[order]
        codes = {a: _codes(res[a])[order] for a in cols}
        del res, order
        m = len(cols)
        out = {}
        for c in batch:
            want = sum(1 << (m - 1 - i) for i, a in enumerate(cols) if a not in c)
            lo, hi = np.searchsorted(gids, [want, want + 1])
            out[c] = self._bincount(c, {a: codes[a][lo:hi] for a in c}, n[lo:hi])
        return out

    def _bincount(self, c: tuple[str, ...], codes: dict[str, np.ndarray], n: np.ndarray) -> np.ndarray:
        sizes = self.domain.sizes(c)
        idx = np.ravel_multi_index(tuple(codes[a] for a in c), sizes)
        return np.bincount(idx, weights=n, minlength=int(np.prod(sizes))).astype(np.float64)


def _codes(col: Any) -> np.ndarray:
    """A result column as int64 codes (the NULLs of other grouping sets set to 0)."""
    if isinstance(col, np.ma.MaskedArray):
        col = col.filled(0)
    col = np.asarray(col)
    if col.dtype.kind == "f":  # NULLs read as NaN
        col = np.nan_to_num(col, nan=0.0)
    return col.astype(np.int64)
