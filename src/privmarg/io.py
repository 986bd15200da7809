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


class DirectoryWriter:
    """A writer whose output is a directory (a saved model): ``write(folder)`` fills an empty
    folder. :func:`publish` swaps it into place whole."""

    def __init__(self, write: Callable[[str], None]):
        self.write = write

    def __call__(self, folder: str) -> None:
        self.write(folder)


def _exchange(a: str, b: str) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``): no moment
    where neither is in place, also under SIGKILL. False where the system cannot."""
    global _RENAMEAT2
    if _RENAMEAT2 is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _RENAMEAT2 = libc.renameat2
            _RENAMEAT2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        except (OSError, AttributeError):
            _RENAMEAT2 = False
    if not _RENAMEAT2:
        return False
    import ctypes

    at_fdcwd, exchange = -100, 2
    if _RENAMEAT2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: not on this file system
        return False
    raise OSError(err, os.strerror(err), b)


_RENAMEAT2: Any = None


def _put_directory(tmp: str, path: Path) -> str | None:
    """Move the finished folder ``tmp`` to ``path``; an existing ``path`` ends up at the returned
    hidden name (to delete on success, or swap back on rollback)."""
    if not path.exists():
        os.replace(tmp, path)
        return None
    if _exchange(tmp, str(path)):
        return tmp  # the old folder now sits at tmp
    old = tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent)
    os.rmdir(old)
    os.replace(path, old)  # two steps where the system has no exchange
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old, path)
        raise
    return old


def _take_back_directory(path: Path, old: str | None) -> None:
    if old is None:
        shutil.rmtree(path)
    elif not _exchange(old, str(path)):
        shutil.rmtree(path)
        os.replace(old, path)
    else:
        shutil.rmtree(old)


def publish(files: Sequence[tuple[str | Path, Writer]]) -> None:
    """Write every ``(path, writer)`` to a temporary file (a folder for a :class:`DirectoryWriter`)
    beside its target, then move them all into place. If any write or move fails (or Ctrl-C), the
    moves already done are rolled back (what was there before is restored) and the temporaries and
    new folders removed: either all outputs are published or none, and nothing else changes. An
    existing folder is replaced by an atomic exchange where the system has one."""
    files = [(Path(p), w) for p, w in files]
    created: list[Path] = []
    temps: list[str] = []
    done: list[tuple[Path, str | None, bool]] = []
    try:
        for path, write in files:
            created += _makedirs(path.parent)
            if isinstance(write, DirectoryWriter):
                tmp = tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
                temps.append(tmp)
                write(tmp)
                os.chmod(tmp, umask_mode(directory=True))  # mkdtemp makes it 0700
                continue
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            temps.append(tmp)
            write(tmp)
            os.chmod(tmp, umask_mode())
        for (path, write), tmp in zip(files, temps):
            if isinstance(write, DirectoryWriter):
                done.append((path, _put_directory(tmp, path), True))
                continue
            bak = _backup(path)
            try:
                os.replace(tmp, path)
            except BaseException:
                if bak is not None:
                    os.unlink(bak)
                raise
            done.append((path, bak, False))
    except BaseException:
        for path, bak, is_dir in reversed(done):
            try:
                if is_dir:
                    _take_back_directory(path, bak)
                elif bak is not None:
                    os.replace(bak, path)
                else:
                    os.unlink(path)
            except OSError:  # pragma: no cover - best effort
                pass
        for tmp in temps:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
            elif os.path.exists(tmp):
                os.unlink(tmp)
        for d in reversed(created):
            try:
                d.rmdir()
            except OSError:  # pragma: no cover - not empty: someone else wrote there
                pass
        raise
    for _, bak, is_dir in done:
        if bak is not None:
            try:
                if is_dir:
                    shutil.rmtree(bak)
                else:
                    os.unlink(bak)
            except OSError:  # pragma: no cover
                pass


def _atomic(path: Path, write: Writer) -> None:
    publish([(path, write)])


def table_writer(df: pd.DataFrame, path: str | Path, nulls: dict | None = None) -> Writer:
    """The writer of ``df`` for ``path``'s format: CSV (``.csv``, ``.csv.gz``) or Parquet
    (``.parquet``; ``nulls``: see :func:`parquet_ready`)."""
    name = Path(path).name.lower()
    if name.endswith((".parquet", ".pq")):
        table = parquet_ready(df, nulls)
        return lambda tmp: table.to_parquet(tmp, index=False)
    if name.endswith((".csv", ".csv.gz", ".txt")):
        comp = "gzip" if name.endswith(".gz") else None
        return lambda tmp: df.to_csv(tmp, index=False, compression=comp)
    raise ValueError(f"{path}: output must end in .csv, .csv.gz or .parquet")


def parquet_ready(df: pd.DataFrame, nulls: dict | None) -> pd.DataFrame:
    """``df`` as Parquet can store it: each column of ``nulls`` (name → (the text its missing values
    are written as, the column's dtype); :meth:`~privmarg.preprocess.TableEncoder.parquet_nulls`)
    holding that text among numbers, booleans or dates becomes a column of its dtype with the text
    missing (a text column keeps the text); a column still mixing texts with other values is written
    as texts. Nothing else is touched."""
    out = df
    for name, (text, dtype) in (nulls or {}).items():
        if name not in df.columns or df[name].dtype != object or pd.api.types.is_string_dtype(dtype):
            continue
        col = df[name]
        try:
            typed = col.mask(col.eq(text)).astype(dtype)
        except (TypeError, ValueError):  # not values of that type after all: left for the writer
            continue
        if out is df:
            out = df.copy()
        out[name] = typed
    for name in out.columns:  # texts beside other values (a number label among found texts): as texts
        col = out[name]
        if col.dtype == object and pd.api.types.infer_dtype(col, skipna=True).startswith("mixed"):
            if out is df:
                out = df.copy()
            out[name] = col.where(col.isna(), col.astype(str))
    return out


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


def write_table(df: pd.DataFrame, path: str | Path, nulls: dict | None = None) -> None:
    """Write CSV (``.csv``, ``.csv.gz``) or Parquet (``.parquet``) atomically (``nulls``: see
    :func:`parquet_ready`)."""
    _atomic(Path(path), table_writer(df, path, nulls))


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
