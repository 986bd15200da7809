"""Readable names of a raw table's codes (category names, bin edges, "missing") for plots."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema.model import DATETIME_UNITS

MISSING = "missing"


def _num(v: float) -> str:
    """Short numbers for axis labels: 31250 -> 31.2k, 1.5e6 -> 1.5M, 0.25 -> 0.25."""
    a = abs(v)
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= size:
            return f"{v / size:.3g}{suffix}"
    return f"{v:.3g}"


def _bin_labels(spec, edges: np.ndarray) -> list[str]:
    out = []
    last = len(edges) - 2
    for j in range(len(edges) - 1):
        lo, hi = float(edges[j]), float(edges[j + 1])
        if spec.lattice:  # bin j holds the whole units lo .. hi-1
            a, b = int(lo), int(hi) - 1
            if spec.type == "datetime":
                step = DATETIME_UNITS[spec.unit]
                fmt = "%Y-%m-%d" if spec.unit == "D" else "%Y-%m-%d %H:%M:%S"
                a_s, b_s = (pd.Timestamp(v * step).strftime(fmt) for v in (a, b))
            else:
                a_s, b_s = (str(v) if abs(v) < 10_000 else _num(v) for v in (a, b))
            out.append(a_s if a == b else f"{a_s}–{b_s}")
        else:
            out.append(f"[{_num(lo)}, {_num(hi)}{']' if j == last else ')'}")
    return out


def code_labels(encoder) -> dict[str, list[str]]:
    """For a fitted :class:`~privmarg.preprocess.TableEncoder`: per column, a label per code in code
    order — category names (a merged group as ``"merged: a, b"``), bin ranges (``[lo, hi)`` for
    floats, ``lo–hi`` for integers and dates) and ``"missing"``. Reads only the encoder's public or
    released parameters."""
    out: dict[str, list[str]] = {}
    for name, c in encoder.codecs_.items():
        spec = c.spec
        if c.edges is not None:
            labels = _bin_labels(spec, np.asarray(c.edges, dtype=float))
        else:
            base = c.labels()
            labels = [str(base[i]) for i in c.kept]
            if len(c.group):
                labels.append("merged: " + ", ".join(str(base[i]) for i in c.group))
        if c.missing_code is not None:
            labels.append(MISSING)
        out[name] = labels
    return out
