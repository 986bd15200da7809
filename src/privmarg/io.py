"""Atomic output: a file is either written whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd


def _atomic(path: Path, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_table(df: pd.DataFrame, path: str | Path) -> None:
    """Write CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``) atomically."""
    path = Path(path)
    name = path.name.lower()
    if name.endswith((".parquet", ".pq")):
        _atomic(path, lambda tmp: df.to_parquet(tmp, index=False))
    elif name.endswith((".csv", ".csv.gz", ".txt")):
        comp = "gzip" if name.endswith(".gz") else None
        _atomic(path, lambda tmp: df.to_csv(tmp, index=False, compression=comp))
    else:
        raise ValueError(f"{path}: output must end in .csv, .csv.gz or .parquet")


def write_text(text: str, path: str | Path) -> None:
    def w(tmp):
        with open(tmp, "w") as fh:
            fh.write(text)

    _atomic(Path(path), w)


def write_bytes(data: bytes, path: str | Path) -> None:
    def w(tmp):
        with open(tmp, "wb") as fh:
            fh.write(data)

    _atomic(Path(path), w)


def write_json(obj: Any, path: str | Path) -> None:
    def w(tmp):
        with open(tmp, "w") as fh:
            json.dump(obj, fh, indent=2, default=json_default)
            fh.write("\n")

    _atomic(Path(path), w)


def json_default(o):
    """``json.dump(default=...)`` for numpy scalars/arrays, sets and tuples."""
    import numpy as np

    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
