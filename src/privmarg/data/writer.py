"""Streaming table output: a table written chunk by chunk, so memory holds one chunk at a time, and
atomically (the file appears whole or not at all; see :mod:`privmarg.io`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ..io import _atomic, parquet_ready


def write_table_chunks(chunks: Iterable[pd.DataFrame], path: str | Path, nulls: dict | None = None) -> int:
    """Write the DataFrames ``chunks`` one after another as one table: Parquet (``.parquet``,
    ``.pq``; one row group per chunk, pyarrow's ``ParquetWriter``) or CSV (``.csv``, ``.csv.gz``,
    ``.txt``; one header). Every chunk must have the first one's columns; Parquet column types follow
    the first chunk. Written to a temporary file beside ``path`` and renamed over it at the end, so
    an interrupted write leaves no partial file. Returns the number of rows written. ``nulls``: columns
    whose missing-value text Parquet stores as a missing value of the column's type
    (:func:`~privmarg.io.parquet_ready`, so every chunk gets the same column types)."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        kind = "parquet"
    elif name.endswith((".csv", ".csv.gz", ".txt")):
        kind = "csv"
    else:
        raise ValueError(f"{path}: output must end in .csv, .csv.gz or .parquet")
    rows = [0]

    def write(tmp: str) -> None:
        if kind == "parquet":
            _write_parquet((parquet_ready(df, nulls) for df in chunks), tmp, rows)
        else:
            _write_csv(chunks, tmp, rows, gzip=name.endswith(".gz"))

    _atomic(path, write)
    return rows[0]


def _check_columns(df: pd.DataFrame, columns: list | None) -> list:
    cols = list(df.columns)
    if columns is not None and cols != columns:
        raise ValueError(f"a chunk's columns {cols} differ from the first chunk's {columns}")
    return cols


def _write_parquet(chunks: Iterable[pd.DataFrame], tmp: str, rows: list[int]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer, columns, schema = None, None, None
    try:
        for df in chunks:
            columns = _check_columns(df, columns)
            table = pa.Table.from_pandas(df, preserve_index=False, schema=schema)
            if writer is None:
                schema = table.schema
                writer = pq.ParquetWriter(tmp, schema)
            writer.write_table(table)
            rows[0] += len(df)
        if writer is None:  # no chunk at all: an empty table without columns
            pq.write_table(pa.table({}), tmp)
    finally:
        if writer is not None:
            writer.close()


def _write_csv(chunks: Iterable[pd.DataFrame], tmp: str, rows: list[int], gzip: bool) -> None:
    import gzip as gz

    opener = (lambda p: gz.open(p, "wt", newline="")) if gzip else (lambda p: open(p, "w", newline=""))
    columns = None
    with opener(tmp) as fh:
        for df in chunks:
            first = columns is None
            columns = _check_columns(df, columns)
            df.to_csv(fh, index=False, header=first)
            rows[0] += len(df)
