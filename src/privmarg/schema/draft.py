"""A *draft* schema read off a table: a starting point to edit, never something to release with.

Every bound and category list in the draft comes from the private data itself; using it unchanged
leaks those values (the min/max of a column, the rare categories present) outside any DP guarantee.
The draft is marked ``"draft": true``; ``privmarg synth`` and :meth:`Synthesizer.fit` refuse such a
schema unless told to accept it (``--allow-draft-schema`` / ``allow_draft_schema=True``). Numeric
columns get bounds only, so the default encoding applies (exact small integer ranges, PrivTree bins
otherwise; see :mod:`privmarg.schema.model`).

A column that holds numbers, dates or booleans apart from one text that usually means a missing value
(``N``, ``NA``, ``-``, ``?``, … :data:`~privmarg.schema.values.NULL_LOOKING`) is drafted as that type
with the text as its ``null`` marker; a text column keeps such a text as a category (noted). Whole
numbers 0 and 1 only are drafted as a boolean written ``0``/``1`` (no bounds to find, DP or not).

``dp=True`` (``privmarg schema draft --dp``) writes no bounds and no category lists at all: numeric
columns say ``"bounds": "dp"`` and categorical ones ``"values": "dp"`` (found by DP steps at fit
time, charged to the budget). Only the column types, the missing flags and missing-value texts, a
float's decimals and the identifier notes still come from the data; such a draft is marked
``"draft": true`` all the same.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd

from ..data import DataError
from .values import NULL_LOOKING

__all__ = ["DRAFT_WARNING", "DP_DRAFT_WARNING", "draft_schema"]

DRAFT_WARNING = (
    "this draft schema was read off the PRIVATE data: its min/max bounds and category lists are not "
    "differentially private. Replace them with public knowledge (documentation, data dictionaries, "
    "domain knowledge) and delete the \"draft\" key before any release."
)

DP_DRAFT_WARNING = (
    "this draft schema leaves bounds and category lists to DP steps (\"bounds\": \"dp\", \"values\": \"dp\"), "
    "but its column types, missing flags and missing-value texts, decimals and the boolean/datetime choices were "
    "read off the PRIVATE data. "
    "Check them against public knowledge (give public bounds or lists where you have them: they cost no "
    "budget) and delete the \"draft\" key before any release."
)

#: integer columns with at most this many distinct values are drafted as categorical
CATEGORICAL_MAX_DISTINCT = 16
#: categorical columns with at least this many values get ``merge_rare`` (SPEC §9 threshold)
MERGE_THRESHOLD = 100

_ID_NAME = re.compile(r"^(.*_)?[a-z]?id$|uuid|guid|serialno", re.IGNORECASE)
_TRUE = {"true", "t", "yes", "y"}
_FALSE = {"false", "f", "no", "n"}


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


def draft_schema(df: pd.DataFrame, *, dp: bool = False) -> tuple[dict, list[str]]:
    """Guess a schema dict from ``df``; returns ``(schema, notes)`` where notes flag columns to review.
    ``dp``: DP bounds and values instead of the data's (see the module docstring)."""
    if len(df.columns) == 0 or len(df) == 0:
        raise DataError("the table is empty")
    cols: dict[str, dict] = {}
    notes: list[str] = []
    n = len(df)
    markers: dict[str, str] = {}  # column -> its missing-value text
    for name in df.columns:
        marker, s, loose = _null_marker(df[name])
        if marker is not None:
            markers[str(name)] = marker
        nonnull = s.dropna()
        spec: dict[str, Any]
        if len(nonnull) == 0:
            spec = {"type": "categorical", "values": ["?"]}
            notes.append(f"column {name!r} holds only missing values: fill in its type by hand")
        elif pd.api.types.is_bool_dtype(nonnull):
            spec = {"type": "boolean"}
        elif pd.api.types.is_datetime64_any_dtype(nonnull):
            spec = _datetime_spec(nonnull)
        elif pd.api.types.is_numeric_dtype(nonnull):
            x = nonnull.to_numpy(dtype=float)
            finite = np.isfinite(x)
            if not finite.all():
                notes.append(f"column {name!r}: infinite values are not numbers a schema can bin; "
                             "they are left out of its bounds (the encoder refuses them)")
                x = x[finite]
            distinct = np.unique(x)
            integral = bool(np.all(x == np.round(x)))
            if len(x) == 0:
                spec = {"type": "categorical", "values": ["?"]}
                notes.append(f"column {name!r} holds no finite number: fill in its type by hand")
            # (numbers read from texts not written as plain whole numbers, "3.0" or " 12", match no
            # category or label: such a column is bounded instead, and read as numbers)
            elif integral and set(distinct) == {0.0, 1.0} and not loose:
                spec = {"type": "boolean", "labels": [0, 1]}  # a flag: written back as 0/1
            elif integral and len(distinct) <= CATEGORICAL_MAX_DISTINCT and not loose:
                spec = {"type": "categorical", "values": [int(v) for v in distinct]}
            elif integral:
                spec = {"type": "integer", "min": int(x.min()), "max": int(x.max())}
            else:
                spec = {"type": "float", "min": float(x.min()), "max": float(x.max())}
                places = next((d for d in range(1, 7) if np.allclose(x, np.round(x, d), rtol=0, atol=1e-9)), None)
                if places is not None:
                    spec["decimals"] = places  # written with as many places as the table has
        else:
            lowered = {str(v).strip().lower() for v in pd.unique(nonnull)}
            if lowered and lowered <= (_TRUE | _FALSE):
                spec = {"type": "boolean"}
                forms = sorted({str(v).strip() for v in pd.unique(nonnull)}, key=lambda v: v.lower() in _TRUE)
                if len(forms) == 2 and forms[0].lower() in _FALSE and forms[1].lower() in _TRUE:
                    spec["labels"] = forms  # written back the way the table writes them
            else:
                parsed = _try_datetime(nonnull)
                if parsed is not None:
                    spec = _datetime_spec(parsed)
                else:
                    values = sorted({_py(v) for v in pd.unique(nonnull)}, key=lambda v: str(v))
                    spec = {"type": "categorical", "values": values}
                    if len(values) >= MERGE_THRESHOLD:
                        spec["merge_rare"] = True
        if dp:
            spec = _dp_spec(spec)
            if spec["type"] == "datetime":
                notes.append(f"column {name!r}: datetime bounds have no DP step; these were read off the data: "
                             "replace them with public dates")
        if s.isna().any():
            spec["missing"] = True
        if marker is not None:
            spec["null"] = marker
        if _ID_NAME.search(str(name)) or (n >= 20 and _looks_like_key(nonnull)):
            notes.append(f"column {name!r} looks like an identifier: remove it from the schema and pass "
                         "--drop-unknown (identifiers must not be synthesised)")
        cols[str(name)] = spec
    notes += _marker_notes(df, cols, markers)
    return {"_warning": DP_DRAFT_WARNING if dp else DRAFT_WARNING, "draft": True, "columns": cols}, notes


def _null_marker(s: pd.Series) -> tuple[str | None, pd.Series, bool]:
    """(the text standing for a missing value, the column with it as a null, whether numbers came from
    texts not written as plain whole numbers) when a text column holds numbers, dates or booleans
    apart from one text of :data:`NULL_LOOKING`; numbers come back as numbers. Else ``(None, s,
    False)``. A boolean form beside its opposite (``N`` beside ``Y``) is no marker; codes written with
    leading zeros (``01``) stay texts."""
    none = None, s, False
    if pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s) or pd.api.types.is_datetime64_any_dtype(s):
        return none
    stripped = s.astype(str).str.strip().where(s.notna())
    texts = pd.unique(stripped.dropna())
    lowered = {t.lower() for t in texts}
    found = [t for t in texts if t.lower() in NULL_LOOKING
             and not (t.lower() in _FALSE and lowered & _TRUE) and not (t.lower() in _TRUE and lowered & _FALSE)]
    if len(found) != 1:
        return none
    marker = found[0]
    is_marker = stripped.eq(marker)
    rest = s[~is_marker].dropna()
    if rest.empty:
        return none
    masked = s.mask(is_marker)
    raw = rest.astype(str)
    numbers = pd.to_numeric(raw, errors="coerce")
    if numbers.notna().all():
        if raw.str.strip().str.match(r"[-+]?0\d").any():
            return none  # codes such as 01 or 02134: their zeros are part of the value
        whole = np.isfinite(numbers) & (numbers == np.round(numbers))
        plain = raw[whole].eq(numbers[whole].map(lambda v: str(int(v)))).all()
        return marker, pd.to_numeric(masked, errors="coerce"), not plain
    forms = _TRUE | _FALSE
    if marker.lower() not in forms and {v.strip().lower() for v in pd.unique(raw)} <= forms:
        return marker, masked, False
    if _try_datetime(rest) is not None:
        return marker, masked, False
    return none


def _marker_notes(df: pd.DataFrame, cols: dict[str, dict], markers: dict[str, str]) -> list[str]:
    """One note per missing-value text read as such: the columns it was read in, and the text
    columns that hold it as a category (a null there too, or a real value: the draft cannot tell)."""
    notes = []
    for marker in sorted(set(markers.values())):
        read = [c for c, m in markers.items() if m == marker]
        kept = [str(c) for c in df.columns if str(c) not in markers and cols[str(c)]["type"] == "categorical"
                and df[c].dropna().astype(str).str.strip().eq(marker).any()]
        text = json.dumps(marker)
        note = (f"{text} was read as a missing value (\"null\": {text}) in {len(read)} column(s) that "
                f"otherwise hold numbers, dates or booleans: {_names(read)}")
        if kept:
            note += (f"; {len(kept)} text column(s) keep {text} as a category: {_names(kept)} (add "
                     f"\"null\": {text} and \"missing\": true to those where it means missing)")
        notes.append(note)
    return notes


def _names(cols: list[str], shown: int = 6) -> str:
    more = f" and {len(cols) - shown} more" if len(cols) > shown else ""
    return ", ".join(repr(c) for c in cols[:shown]) + more


def _dp_spec(spec: dict) -> dict:
    """A drafted column with its bounds or list left to a DP step (datetimes keep theirs: no DP bounds;
    floats keep their decimals)."""
    if spec["type"] in ("integer", "float"):
        # the places a float is written with are its format, as the column's type is: kept
        return {"type": spec["type"], "bounds": "dp", **({"decimals": spec["decimals"]} if "decimals" in spec else {})}
    if spec["type"] == "categorical" and spec["values"] != ["?"]:
        if all(isinstance(v, int) and not isinstance(v, bool) for v in spec["values"]):
            return {"type": "integer", "bounds": "dp"}  # a few whole numbers: exact codes once bounded
        return {"type": "categorical", "values": "dp"}
    return spec


def _looks_like_key(s: pd.Series) -> bool:
    """All values distinct *and* key-like: strings, or whole numbers packed into a range not much wider
    than the number of rows (a counter). Continuous columns whose values merely differ are not keys."""
    if len(s) == 0 or s.nunique() != len(s):
        return False
    if pd.api.types.is_bool_dtype(s) or pd.api.types.is_datetime64_any_dtype(s):
        return False
    if pd.api.types.is_numeric_dtype(s):
        x = s.to_numpy(dtype=float)
        if not np.all(x == np.round(x)):
            return False  # distinct measurements (amounts, ratios), not identifiers
        return float(x.max() - x.min() + 1) <= 2 * len(x)
    return True


def _try_datetime(s: pd.Series) -> pd.Series | None:
    sample = s.astype(str).head(200)
    if not sample.str.contains(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4}", regex=True).all():
        return None
    try:
        parsed = pd.to_datetime(s, errors="coerce", format="mixed")
    except (ValueError, TypeError):
        return None
    return None if parsed.isna().any() else parsed


def _datetime_spec(s: pd.Series) -> dict:
    lo, hi = s.min(), s.max()
    whole_days = bool((s.dt.normalize() == s).all())
    fmt = "%Y-%m-%d" if whole_days else "%Y-%m-%dT%H:%M:%S"
    spec = {"type": "datetime", "min": lo.strftime(fmt), "max": hi.strftime(fmt)}
    if not whole_days:
        spec["unit"] = "s"
    return spec
