"""A :class:`~privmarg.data.MarginalSource` over a Parquet or CSV file of integer codes, counted by
DuckDB: the table never enters Python whole, so a table far larger than memory can be fitted.

Everything it returns is private (counts of the records), like any source: release it only through
a :class:`~privmarg.measure.MeasurementSession`. Needs the optional ``duckdb`` package
(``pip install 'privmarg[duckdb]'``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core import Domain
from .dataset import DataError

_VIEW = "privmarg_source"
# GROUPING(...) is a bit mask over its arguments: keep a batch's columns within a 64-bit integer
_MAX_GROUPING_COLUMNS = 62


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise ImportError("the DuckDB backend needs the duckdb package: pip install 'privmarg[duckdb]' "
                          "(or pip install duckdb)") from None
    return duckdb


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _as_domain(domain: Any) -> Domain:
    if isinstance(domain, Domain):
        return domain
    if isinstance(domain, Mapping):
        return Domain.from_dict(domain)
    if isinstance(domain, (str, Path)):
        return Domain.from_json(domain)
    raise TypeError("domain must be a Domain, a {column: size} dict or a domain file")


class DuckDBSource:
    """Integer codes ``0 .. size-1`` in a Parquet (``.parquet``, ``.pq``) or CSV file (optionally
    compressed), counted by SQL.

    ``domain``: the public domain (Domain, ``{column: size}`` or a domain file); its columns are read,
    others refused unless ``drop_unknown``. The file is checked on construction (one SQL pass): a
    missing value, a non-integer value or a code outside the domain raises the same
    :class:`~privmarg.data.DataError` as the in-memory path. ``marginals`` answers several cliques in
    one ``GROUP BY GROUPING SETS`` scan (at most ``batch`` cliques per query); ``threads`` and
    ``memory_limit`` (e.g. ``"2GB"``) are passed to DuckDB. All counts are private (no privacy cost
    here: a session charges for what it releases).
    """

    def __init__(self, path: str | Path, domain: Any, *, drop_unknown: bool = False, validate: bool = True,
                 batch: int = 64, threads: int | None = None, memory_limit: str | None = None):
        duckdb = _duckdb()
        self.path = Path(path)
        if not self.path.exists():
            raise DataError(f"{self.path}: no such file")
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.domain = _as_domain(domain)
        self.batch = int(batch)
        config = {}
        if threads is not None:
            config["threads"] = int(threads)
        if memory_limit is not None:
            config["memory_limit"] = str(memory_limit)
        self._con = duckdb.connect(":memory:", config=config)
        name = self.path.name.lower()
        reader = "read_parquet" if name.endswith((".parquet", ".pq")) else "read_csv"
        try:
            self._con.execute(f"CREATE VIEW {_VIEW} AS SELECT * FROM {reader}({_literal(str(self.path))})")
            described = self._con.execute(f"DESCRIBE {_VIEW}").fetchall()
        except duckdb.Error as e:
            raise DataError(f"{self.path}: cannot read the table ({str(e).splitlines()[0]})") from None
        types = {row[0]: str(row[1]) for row in described}
        missing = [a for a in self.domain.attrs if a not in types]
        if missing:
            raise DataError(f"column(s) missing from the data: {missing}")
        extra = [c for c in types if c not in self.domain]
        if extra and not drop_unknown:
            raise DataError(f"column(s) not in the domain: {extra} (drop them or add them to the domain)")
        self._types = {a: types[a] for a in self.domain.attrs}
        self._expr = {a: self._code_expr(a) for a in self.domain.attrs}
        self._count: float | None = None
        if validate:
            self._validate()

    # ----------------------------------------------------------------------- checking
    def _integer_typed(self, a: str) -> bool:
        t = self._types[a].upper()
        return any(t.startswith(k) for k in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
                                             "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"))

    def _code_expr(self, a: str) -> str:
        return _ident(a) if self._integer_typed(a) else f"CAST({_ident(a)} AS BIGINT)"

    def _validate(self) -> None:
        """One pass: per column the missing values, non-integer values, smallest and largest code."""
        parts = ["count(*)"]
        for a in self.domain.attrs:
            c = _ident(a)
            num = c if self._integer_typed(a) else f"TRY_CAST({c} AS DOUBLE)"
            parts += [f"count(*) FILTER (WHERE {c} IS NULL)",
                      "0" if self._integer_typed(a) else
                      f"count(*) FILTER (WHERE {c} IS NOT NULL AND ({num} IS NULL OR {num} <> round({num})))",
                      f"min({num})", f"max({num})"]
        row = self._con.execute(f"SELECT {', '.join(parts)} FROM {_VIEW}").fetchone()
        rows = int(row[0])
        if rows == 0:
            raise DataError("the table is empty")
        stats = [row[1 + 4 * i: 5 + 4 * i] for i in range(len(self.domain))]
        for a, (nulls, nonint, _, _) in zip(self.domain.attrs, stats):
            if nulls:
                raise DataError(f"column {a!r}: {int(nulls)} missing value(s) (NaN)")
            if nonint:
                raise DataError(f"column {a!r}: values must be integer codes, got {self._types[a]}")
        for a, k, (_, _, lo, hi) in zip(self.domain.attrs, self.domain.shape, stats):
            if lo < 0 or hi >= k:
                bad = lo if lo < 0 else hi
                raise DataError(f"column {a!r}: code {int(bad)} outside the domain 0..{k - 1}")
        self._count = float(rows)

    # ------------------------------------------------------------------------ counting
    def count(self) -> float:
        """The number of records N (private under add/remove)."""
        if self._count is None:
            self._count = float(self._con.execute(f"SELECT count(*) FROM {_VIEW}").fetchone()[0])
        return self._count

    def marginals(self, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Counts of each marginal, flat (float64), row-major over the clique's attributes in the
        order given; private. Cliques over the same attributes are counted once, and the distinct
        ones in batches of one ``GROUPING SETS`` query each."""
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
            if batch and (len(batch) >= self.batch or len(cols | set(c)) > _MAX_GROUPING_COLUMNS):
                yield batch
                batch, cols = [], set()
            batch.append(c)
            cols |= set(c)
        if batch:
            yield batch

    def _count_batch(self, batch: list[tuple[str, ...]]) -> dict[tuple[str, ...], np.ndarray]:
        cols = [a for a in self.domain.attrs if any(a in c for c in batch)]
        select = ", ".join(f"{self._expr[a]} AS {_ident(a)}" for a in cols)
        if len(batch) == 1:
            sql = f"SELECT {select}, count(*) AS n FROM {_VIEW} GROUP BY ALL"
        else:
            sets = ", ".join("(" + ", ".join(_ident(a) for a in c) + ")" for c in batch)
            gid = "GROUPING(" + ", ".join(_ident(a) for a in cols) + ")"
            sql = (f"SELECT {', '.join(_ident(a) for a in cols)}, {gid} AS gid, count(*) AS n "
                   f"FROM (SELECT {select} FROM {_VIEW}) GROUP BY GROUPING SETS ({sets})")
        res = self._query(sql).fetchnumpy()
        n = np.asarray(res["n"], dtype=np.float64)
        if len(batch) == 1:
            c = batch[0]
            return {c: self._bincount(c, {a: _codes(res[a]) for a in c}, n)}
        # rows of one grouping set together: sort by GROUPING's bit mask once, then slice
        gids = np.asarray(res["gid"], dtype=np.int64)
        order = np.argsort(gids, kind="stable")
        gids = gids[order]
        n = n[order]
        codes = {a: _codes(res[a])[order] for a in cols}
        del res, order
        m = len(cols)
        out = {}
        for c in batch:
            # GROUPING's bit for a column (first argument = most significant) is 1 when aggregated away
            want = sum(1 << (m - 1 - i) for i, a in enumerate(cols) if a not in c)
            lo, hi = np.searchsorted(gids, [want, want + 1])
            out[c] = self._bincount(c, {a: codes[a][lo:hi] for a in c}, n[lo:hi])
        return out

    def _bincount(self, c: tuple[str, ...], codes: dict[str, np.ndarray], n: np.ndarray) -> np.ndarray:
        sizes = self.domain.sizes(c)
        idx = np.ravel_multi_index(tuple(codes[a] for a in c), sizes)
        return np.bincount(idx, weights=n, minlength=int(np.prod(sizes))).astype(np.float64)

    def _query(self, sql: str):
        return self._con.execute(sql)

    def close(self) -> None:
        """Close the DuckDB connection."""
        self._con.close()


def _codes(col: Any) -> np.ndarray:
    """A result column as int64 codes (the NULLs of other grouping sets set to 0)."""
    if isinstance(col, np.ma.MaskedArray):
        col = col.filled(0)
    return np.asarray(col, dtype=np.int64)
