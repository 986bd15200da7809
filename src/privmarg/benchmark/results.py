"""The results file: JSON Lines, one complete line per finished cell, appended durably.

Only the parent process writes. Each record is one ``write`` of a whole line followed by
``flush`` + ``fsync``, so a crash can at worst leave a partial *last* line; :func:`load_results`
drops such a tail (and :func:`repair` truncates it before new lines are appended), so no finished
cell is ever lost or merged with another.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ..io import json_default as _default






def _clean(o):
    """NaN/inf are not JSON: write them as strings "nan"/"inf"/"-inf"."""
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def dumps_line(record: dict) -> str:
    return json.dumps(_clean(record), default=_default, separators=(",", ":")) + "\n"


def repair(path: str | Path) -> int:
    """Truncate a partial last line (no newline: a writer died mid-line). Returns bytes dropped."""
    path = Path(path)
    if not path.exists():
        return 0
    with open(path, "rb+") as fh:
        data = fh.read()
        if not data or data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
        return len(data) - keep


def append_record(path: str | Path, record: dict) -> None:
    """Append one record as a complete line, durably (flush + fsync)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = dumps_line(record).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(line)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def load_results(path: str | Path) -> list[dict[str, Any]]:
    """Every complete, parseable record (a partial or corrupt line is skipped)."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break  # partial tail
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


def finished_keys(path: str | Path) -> set[str]:
    """Keys of the cells already finished (status ok)."""
    return {r["key"] for r in load_results(path) if r.get("status") == "ok" and "key" in r}
