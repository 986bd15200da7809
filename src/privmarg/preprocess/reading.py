"""Raw column values → what the encoder codes: numbers (NaN for missing) or base codes (-1 for
missing), with every check a value must pass (one clear error naming the column and a count)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from ..data import DataError
from ..schema import ColumnSpec, value_key
from ..schema.values import DATETIME_UNITS, NULL_LOOKING
from .bounds import GRID_MAX_EXP
from .codec import _jsonable


_TRUE = {"true", "t", "yes", "y", "1"}


_FALSE = {"false", "f", "no", "n", "0"}


# ---------------------------------------------------------------------------------- columns
def _err(col: ColumnSpec, msg: str) -> DataError:
    return DataError(f"column {col.name!r}: {msg}")


def _show(v: Any) -> str:
    s = repr(_jsonable(v))
    return s if len(s) <= 60 else s[:57] + "..."


def _null_hint(bad: pd.Series) -> str:
    """A hint naming the schema's ``null`` key when the offending values are one text of
    :data:`NULL_LOOKING` (a missing-value marker the schema does not name)."""
    texts = pd.unique(bad.astype(str).str.strip())
    if len(texts) == 1 and texts[0].lower() in NULL_LOOKING:
        t = texts[0]
        return f"; if {t!r} means a missing value, add \"null\": {json.dumps(t)} to the schema (column or top level)"
    return ""


def _prepare_column(col: ColumnSpec, s: pd.Series, clipped: dict[str, int] | None = None) -> np.ndarray:
    if col.null:  # the schema's texts for a missing value
        s = s.mask(s.astype(str).str.strip().isin(col.null))
    null = s.isna().to_numpy()
    if null.any() and not col.missing:
        raise _err(col, f"{int(null.sum())} missing value(s), but the schema does not allow them "
                        "(set \"missing\": true)")
    vals = s[~null]
    if col.dp_bounds:  # no public bounds yet: onto the DP bounds grid's range only
        out = np.full(len(s), np.nan)
        lim = 2.0 ** GRID_MAX_EXP
        out[~null] = np.clip(_numeric_values(col, vals), -lim, lim)
        return out
    if col.dp_values:  # no public list yet: value keys (private), for DP discovery
        inv, uniq = pd.factorize(vals)
        table = np.array([value_key(_jsonable(u)) for u in uniq] + [None], dtype=object)
        out = np.full(len(s), None, dtype=object)
        out[~null] = table[inv]
        return out
    if col.numeric:
        x = _numeric_values(col, vals)
        out = np.full(len(s), np.nan)
        out[~null] = np.clip(x, col.lo, col.hi)  # out-of-bounds values are clipped to the public bounds
        if clipped is not None:
            n_out = int(((x < col.lo) | (x > col.hi)).sum())
            if n_out:
                clipped[col.name] = n_out
        return out
    base = _boolean_codes(col, vals) if col.type == "boolean" else _category_codes(col, vals)
    out = np.full(len(s), -1, dtype=np.int64)
    out[~null] = base
    return out


def _numeric_values(col: ColumnSpec, vals: pd.Series) -> np.ndarray:
    if col.type == "datetime":
        return _datetime_units(col, vals)
    if pd.api.types.is_bool_dtype(vals.dtype):
        raise _err(col, f"holds booleans, but the schema says {col.type}")
    if pd.api.types.is_datetime64_any_dtype(vals.dtype):
        raise _err(col, f"holds dates, but the schema says {col.type}")
    num = pd.to_numeric(vals, errors="coerce")
    bad = num.isna().to_numpy()
    if bad.any():
        raise _err(col, f"value {_show(vals[bad].iloc[0])} is not a number ({col.type} column; "
                        f"{int(bad.sum())} such value(s)){_null_hint(vals[bad])}")
    x = num.to_numpy(dtype=float)
    if col.type == "integer":
        frac = np.isfinite(x) & (x != np.round(x))
        if frac.any():
            raise _err(col, f"value {_show(x[frac][0])} is not a whole number (integer column; "
                            f"{int(frac.sum())} such value(s))")
    return x


def _datetime_units(col: ColumnSpec, vals: pd.Series) -> np.ndarray:
    if pd.api.types.is_datetime64_any_dtype(vals.dtype):
        t = vals
    elif pd.api.types.is_numeric_dtype(vals.dtype) or pd.api.types.is_bool_dtype(vals.dtype):
        raise _err(col, f"holds numbers ({vals.dtype}), but the schema says datetime")
    else:
        t = pd.to_datetime(vals, errors="coerce", format="mixed")
        bad = t.isna().to_numpy()
        if bad.any():
            raise _err(col, f"value {_show(vals[bad].iloc[0])} is not a date ({int(bad.sum())} such value(s))"
                            f"{_null_hint(vals[bad])}")
    if getattr(t.dt, "tz", None) is not None:
        t = t.dt.tz_convert("UTC").dt.tz_localize(None)
    ns = t.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return (ns // DATETIME_UNITS[col.unit]).astype(float)


def _boolean_codes(col: ColumnSpec, vals: pd.Series) -> np.ndarray:
    if pd.api.types.is_bool_dtype(vals.dtype):
        return vals.to_numpy(dtype=bool).astype(np.int64)
    inv, uniq = pd.factorize(vals)
    table = np.empty(len(uniq), dtype=np.int64)
    declared = {_loose_key(v): i for i, v in enumerate(col.labels)}
    for i, u in enumerate(uniq):
        key = str(_jsonable(u)).strip().lower()
        if _loose_key(_jsonable(u)) in declared:  # the schema's own labels first
            table[i] = declared[_loose_key(_jsonable(u))]
        elif isinstance(u, (bool, np.bool_)):
            table[i] = int(bool(u))
        elif isinstance(u, (int, float, np.integer, np.floating)) and float(u) in (0.0, 1.0):
            table[i] = int(float(u))
        elif key in _TRUE:
            table[i] = 1
        elif key in _FALSE:
            table[i] = 0
        else:
            raise _err(col, f"value {_show(u)} is not a boolean (use true/false, yes/no or 1/0)")
    return table[inv]


def _loose_key(v: Any) -> str:
    """Matching across types: ``1``, ``1.0`` and ``"1"`` all give ``"1"``."""
    k = value_key(v)
    return k.split(":", 1)[1]


def _category_codes(col: ColumnSpec, vals: pd.Series) -> np.ndarray:
    values = list(col.values)
    exact = {value_key(v): i for i, v in enumerate(values)}
    loose_keys = [_loose_key(v) for v in values]
    loose = {k: i for i, k in enumerate(loose_keys)} if len(set(loose_keys)) == len(loose_keys) else {}
    inv, uniq = pd.factorize(vals)
    table = np.empty(len(uniq), dtype=np.int64)
    unknown = []
    for i, u in enumerate(uniq):
        code = exact.get(value_key(u))
        if code is None:
            code = loose.get(_loose_key(u))
        if code is None:
            unknown.append(i)
            code = len(values)  # the reserved "other" value (only kept when the schema allows it)
        table[i] = code
    if unknown and not col.other:
        rows = int(np.isin(inv, unknown).sum())
        hint = _null_hint(pd.Series([uniq[i] for i in unknown], dtype=object))
        raise _err(col, f"value {_show(uniq[unknown[0]])} is not one of the schema's categories "
                        f"({len(unknown)} unknown value(s) in {rows} row(s); list them under \"values\" "
                        f"or set \"other\": true{hint})")
    return table[inv]


def _codes_from_keys(col: ColumnSpec, keys: np.ndarray) -> np.ndarray:
    """Base codes over ``col.values`` (+ other) of prepared value keys (None = missing: -1)."""
    keys = np.asarray(keys, dtype=object)
    out = np.full(len(keys), -1, dtype=np.int64)
    present = keys != None  # noqa: E711 (elementwise)
    uniq, inv = np.unique(keys[present].astype(str), return_inverse=True)
    index = {value_key(v): i for i, v in enumerate(col.values)}
    table = np.array([index.get(k, len(col.values)) for k in uniq], dtype=np.int64)
    out[present] = table[inv] if len(uniq) else np.array([], dtype=np.int64)
    return out
