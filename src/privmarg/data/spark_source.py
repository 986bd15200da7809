"""A :class:`~privmarg.data.MarginalSource` over integer codes in Spark: a DataFrame, or a Parquet or
CSV path Spark reads (local, ``hdfs://``, ``s3a://``, ...), counted by Spark SQL where the data lives.
Only the counts come back to this process, never rows.

Everything it returns is private (counts of the records), like any source: release it only through
a :class:`~privmarg.measure.MeasurementSession`. Needs the optional ``pyspark`` package and a Java
runtime (``pip install 'privmarg[spark]'``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from .dataset import DataError
from .grouping import GroupingSetsSource, as_domain

_INTEGER_TYPES = ("tinyint", "smallint", "int", "bigint")
_views = itertools.count()


def _pyspark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise ImportError("the Spark backend needs the pyspark package and Java: pip install 'privmarg[spark]' "
                          "(or pip install pyspark)") from None


def spark_session(master: str | None = None, app_name: str = "privmarg"):
    """The active Spark session, or a new one. ``master``: a master URL (``local[4]``,
    ``spark://host:7077``, ``yarn``, ...); None keeps the session's own (what ``spark-submit
    --master`` set; ``local[*]`` for a plain ``python`` with pip's pyspark)."""
    _pyspark()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).config("spark.ui.showConsoleProgress", "false")
    if master:
        builder = builder.master(master)
    try:
        return builder.getOrCreate()
    except Exception as e:  # no Java, a bad master URL: one line, an OSError like a missing file
        raise OSError(f"cannot start Spark ({_first_line(e)}): it needs Java 17 or later (java on the PATH "
                      "or JAVA_HOME) and a reachable master") from None


class SparkSource(GroupingSetsSource):
    """Integer codes ``0 .. size-1`` in Spark, counted by Spark SQL.

    ``data``: a Spark DataFrame, or a path Spark can read: Parquet (a file or a folder of part
    files, the default) or CSV with a header (a name ending ``.csv``, optionally compressed, e.g.
    ``.csv.gz``). ``domain``: the public domain (Domain, ``{column: size}`` or a domain file); its
    columns are read, others refused unless ``drop_unknown``. ``spark``: the session to read a path
    with (default: :func:`spark_session` with ``master``). The table is checked on construction
    (one aggregate job): a missing value, a non-integer value or a code outside the domain raises
    the same :class:`~privmarg.data.DataError` as the in-memory path. ``marginals`` answers several
    cliques in one ``GROUP BY GROUPING SETS`` job (at most ``batch`` cliques per job). All counts are
    private (no privacy cost here: a session charges for what it releases); they reach this process
    only as counts per cell.
    """

    _grouping = "grouping_id"

    def __init__(self, data: Any, domain: Any, *, spark: Any = None, master: str | None = None,
                 drop_unknown: bool = False, validate: bool = True, batch: int = 64):
        _pyspark()
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        if batch < 1:
            raise ValueError("batch must be at least 1")
        self.domain = as_domain(domain)
        self.batch = int(batch)
        if isinstance(data, (str, Path)):
            text = str(data)
            if "://" not in text and not Path(text).exists():  # a URL is checked by Spark
                raise DataError(f"{text}: no such file")
            self._spark = spark if spark is not None else spark_session(master)
            try:
                df = self._read(text)
            except (PySparkException, Py4JJavaError) as e:
                raise DataError(f"{text}: cannot read the table ({_first_line(e)})") from None
        elif hasattr(data, "sparkSession") and hasattr(data, "dtypes"):
            df, self._spark = data, data.sparkSession
        else:
            raise TypeError("data must be a Spark DataFrame or a path (Parquet or CSV)")
        self._set_columns(dict(df.dtypes), drop_unknown)
        self._table = f"privmarg_source_{next(_views)}"
        df.select(*[df[a] for a in self.domain.attrs]).createOrReplaceTempView(self._table)
        self._count: float | None = None
        if validate:
            self._validate()

    def _read(self, path: str):
        name = path.lower().rstrip("/")
        if ".csv" in Path(name).name:
            return self._spark.read.csv(path, header=True, inferSchema=True)
        return self._spark.read.parquet(path)

    # ------------------------------------------------------------------------ the dialect
    def _ident(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def _group_by_sets(self, idents: str, sets: str) -> str:
        # grouping_id's arguments must be the grouping columns in order: name them first
        return f"GROUP BY {idents} GROUPING SETS ({sets})"

    def _integer_typed(self, a: str) -> bool:
        return self._types[a].lower() in _INTEGER_TYPES

    def _fetch_row(self, sql: str):
        return tuple(self._spark.sql(sql).collect()[0])

    def _fetch_columns(self, sql: str):
        import pyarrow.compute as pc

        table = self._spark.sql(sql).toArrow()
        # the NULLs of other grouping sets: 0 keeps the column integer (those rows are sliced away)
        return {name: pc.fill_null(table.column(name), 0).to_numpy() for name in table.column_names}

    def close(self) -> None:
        """Drop this source's temporary view (the Spark session stays: it may be shared)."""
        self._spark.catalog.dropTempView(self._table)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
