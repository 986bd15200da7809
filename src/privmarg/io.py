"""Atomic output: a file is either written whole or not at all, and a group of files (a synthetic
table and its report) is published together or not at all (:func:`publish`)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

Writer = Callable[[str], None]  # writes one file's content to the path it is given


def _makedirs(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; the folders created, outermost first."""
    missing = []
    p = folder
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        d.mkdir()
    return list(reversed(missing))


def _backup(path: Path) -> str | None:
    """A hidden copy (hard link where possible) of an existing file, to restore on rollback."""
    if not os.path.isfile(path):
        return None
    fd, bak = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".bak", dir=path.parent)
    os.close(fd)
    os.unlink(bak)
    try:
        os.link(path, bak)
    except OSError:
        shutil.copy2(path, bak)
    return bak


def umask_mode(directory: bool = False) -> int:
    """The mode a file (0o666) or folder (0o777) created now gets under the process umask: temporary
    files are created 0600, and a published output should follow the umask like any other file."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def publish(files: Sequence[tuple[str | Path, Writer]]) -> None:
    """Write every ``(path, writer)`` to a temporary file in its target folder, then rename them all
    into place. If any write or rename fails (or Ctrl-C), the renames already done are rolled back
    (a file that was there before is restored) and the temporary files and new folders removed:
    either all files are published or none, and nothing else changes."""
    files = [(Path(p), w) for p, w in files]
    created: list[Path] = []
    temps: list[str] = []
    done: list[tuple[Path, str | None]] = []
    try:
        for path, write in files:
            created += _makedirs(path.parent)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            temps.append(tmp)
            write(tmp)
            os.chmod(tmp, umask_mode())
        for (path, _), tmp in zip(files, temps):
            bak = _backup(path)
            try:
                os.replace(tmp, path)
            except BaseException:
                if bak is not None:
                    os.unlink(bak)
                raise
            done.append((path, bak))
    except BaseException:
        for path, bak in reversed(done):
            try:
                if bak is not None:
                    os.replace(bak, path)
                else:
                    os.unlink(path)
            except OSError:  # pragma: no cover - best effort
                pass
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        for d in reversed(created):
            try:
                d.rmdir()
            except OSError:  # pragma: no cover - not empty: someone else wrote there
                pass
        raise
    for _, bak in done:
        if bak is not None:
            try:
                os.unlink(bak)
            except OSError:  # pragma: no cover
                pass


def _atomic(path: Path, write: Writer) -> None:
    publish([(path, write)])


def table_writer(df: pd.DataFrame, path: str | Path) -> Writer:
    """The writer of ``df`` for ``path``'s format: CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``)."""
    name = Path(path).name.lower()
    if name.endswith((".parquet", ".pq")):
        return lambda tmp: df.to_parquet(tmp, index=False)
    if name.endswith((".csv", ".csv.gz", ".txt")):
        comp = "gzip" if name.endswith(".gz") else None
        return lambda tmp: df.to_csv(tmp, index=False, compression=comp)
    raise ValueError(f"{path}: output must end in .csv, .csv.gz or .parquet")


def text_writer(text: str) -> Writer:
    def w(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    return w


def json_writer(obj: Any) -> Writer:
    def w(tmp):
        with open(tmp, "w") as fh:
            json.dump(obj, fh, indent=2, default=json_default)
            fh.write("\n")

    return w


def write_table(df: pd.DataFrame, path: str | Path) -> None:
    """Write CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``) atomically."""
    _atomic(Path(path), table_writer(df, path))


def write_text(text: str, path: str | Path) -> None:
    _atomic(Path(path), text_writer(text))


def write_bytes(data: bytes, path: str | Path) -> None:
    def w(tmp):
        with open(tmp, "wb") as fh:
            fh.write(data)

    _atomic(Path(path), w)


def write_json(obj: Any, path: str | Path) -> None:
    _atomic(Path(path), json_writer(obj))


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
