"""Readable names of a raw table's codes (category names, bin edges, "missing") for plots."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema.values import DATETIME_UNITS

MISSING = "missing"


def _num(v: float) -> str:
    """Short numbers for axis labels: 31250 -> 31.2k, 1.5e6 -> 1.5M, 0.25 -> 0.25."""
    a = abs(v)
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= size:
            return f"{v / size:.3g}{suffix}"
    return f"{v:.3g}"


def _unit(spec, v: int) -> str:
    """One whole unit of a lattice column (an integer, or a date/time)."""
    if spec.type == "datetime":
        fmt = "%Y-%m-%d" if spec.unit == "D" else "%Y-%m-%d %H:%M:%S"
        return pd.Timestamp(v * DATETIME_UNITS[spec.unit]).strftime(fmt)
    return str(v) if abs(v) < 10_000 else _num(v)


def _value(spec, v: float) -> str:
    """An atom (a value coded exactly): the value itself."""
    if spec.lattice:
        return _unit(spec, int(round(v)))
    return f"{v:.6g}"


def _bin_labels(spec, edges: np.ndarray, atoms: np.ndarray | None = None) -> list[str]:
    """Bin ranges (``[lo, hi)`` for floats, ``lo–hi`` for integers and dates; a one-value bin, as in an
    exact integer column, is its value). On a lattice, atoms at a bin's ends have codes of their own
    and are left out of its range (the decoder never draws them there)."""
    atoms = np.array([], dtype=float) if atoms is None else np.asarray(atoms, dtype=float)
    out = []
    last = len(edges) - 2
    for j in range(len(edges) - 1):
        lo, hi = float(edges[j]), float(edges[j + 1])
        if spec.lattice:  # bin j holds the whole units lo .. hi-1
            a, b = int(lo), int(hi) - 1
            if b > a:  # less the atoms at its ends, as the decoder does
                a2, b2 = a + int(a in atoms), b - int(b in atoms)
                if b2 >= a2:
                    a, b = a2, b2
            out.append(_unit(spec, a) if a == b else f"{_unit(spec, a)}–{_unit(spec, b)}")
        else:
            out.append(f"[{_num(lo)}, {_num(hi)}{']' if j == last else ')'}")
    return out


def code_labels(encoder) -> dict[str, list[str]]:
    """For a fitted :class:`~privmarg.preprocess.TableEncoder`: per column, a label per code in code
    order — category names (a merged group as ``"merged: a, b"``), bin ranges (``[lo, hi)`` for
    floats, ``lo–hi`` for integers and dates; uniform, PrivTree or adaptive bins alike), the value of
    a one-value bin (exact integer coding) or of an atom, and ``"missing"``. Reads only the encoder's public or
    released parameters."""
    out: dict[str, list[str]] = {}
    for name, c in encoder.codecs_.items():
        spec = c.spec
        if c.edges is not None:
            atoms = np.asarray(getattr(c, "atoms", ()), dtype=float)
            labels = _bin_labels(spec, np.asarray(c.edges, dtype=float), atoms)
            labels += [_value(spec, float(v)) for v in atoms]
        else:
            base = c.labels()
            labels = [str(base[i]) for i in c.kept]
            if len(c.group):
                labels.append("merged: " + ", ".join(str(base[i]) for i in c.group))
        if c.missing_code is not None:
            labels.append(MISSING)
        out[name] = labels
    return out
