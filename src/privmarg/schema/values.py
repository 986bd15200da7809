"""Raw values as the schema compares them: category keys and datetime units (shared by the schema
and its rules)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import pandas as pd

#: texts that often stand for a missing value in exported tables (compared stripped, lower case)
NULL_LOOKING = frozenset({"n", "na", "n/a", "nan", "null", "none", "nil", ".", "-", "--", "?", "missing", "#n/a",
                          "(null)"})

#: nanoseconds in one unit of a datetime column (values are whole units since the epoch)
DATETIME_UNITS = {"D": 86_400 * 10**9, "h": 3_600 * 10**9, "m": 60 * 10**9, "s": 10**9}


def value_key(v: Any) -> str:
    """Matching key of a category value: ``1``, ``1.0`` and ``np.int64(1)`` match; strings match exactly."""
    if isinstance(v, (bool, np.bool_)):
        return f"bool:{bool(v)}"
    if isinstance(v, numbers.Integral):
        return f"num:{int(v)}"
    if isinstance(v, numbers.Real):
        f = float(v)
        if math.isfinite(f) and f.is_integer():
            return f"num:{int(f)}"
        return f"num:{f!r}"
    return f"str:{v}"


def timestamp_units(t: pd.Timestamp, step_ns: int) -> float:
    if t.tzinfo is not None:
        t = t.tz_convert("UTC").tz_localize(None)
    return float(t.as_unit("ns").value // step_ns)
