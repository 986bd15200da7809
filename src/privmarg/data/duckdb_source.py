"""A :class:`~privmarg.data.MarginalSource` over a Parquet or CSV file of integer codes, counted by
DuckDB: the table never enters Python whole, so a table far larger than memory can be fitted.

Everything it returns is private (counts of the records), like any source: release it only through
a :class:`~privmarg.measure.MeasurementSession`. Needs the optional ``duckdb`` package
(``pip install 'privmarg[duckdb]'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .dataset import DataError
from .grouping import GroupingSetsSource, as_domain

_VIEW = "privmarg_source"


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise ImportError("the DuckDB backend needs the duckdb package: pip install 'privmarg[duckdb]' "
                          "(or pip install duckdb)") from None
    return duckdb


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class DuckDBSource(GroupingSetsSource):
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

    _table = _VIEW

    def __init__(self, path: str | Path, domain: Any, *, drop_unknown: bool = False, validate: bool = True,
                 batch: int = 64, threads: int | None = None, memory_limit: str | None = None):
        duckdb = _duckdb()
        self.path = Path(path)
        if not self.path.exists():
            raise DataError(f"{self.path}: no such file")
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.domain = as_domain(domain)
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
        self._set_columns({row[0]: str(row[1]) for row in described}, drop_unknown)
        self._count: float | None = None
        if validate:
            self._validate()

    # ------------------------------------------------------------------------ the dialect
    def _ident(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def _integer_typed(self, a: str) -> bool:
        t = self._types[a].upper()
        return any(t.startswith(k) for k in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT",
                                             "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"))

    def _fetch_row(self, sql: str):
        return self._query(sql).fetchone()

    def _fetch_columns(self, sql: str):
        return self._query(sql).fetchnumpy()

    def _query(self, sql: str):
        return self._con.execute(sql)

    def close(self) -> None:
        """Close the DuckDB connection."""
        self._con.close()
