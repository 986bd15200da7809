"""A public table settles what a schema left to DP steps or left open: ``"values": "dp"`` takes the
public table's values, ``"bounds": "dp"`` its range, and a float column without ``"decimals"`` the
places its public values are written with. Reads the public table only: no privacy cost, and the
budget and δ those DP steps would have spent stay with the model."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ..schema import Schema
from .discovery import _order, key_value
from .reading import _prepare_column


def refine_with_public(schema: Schema, public: pd.DataFrame) -> tuple[Schema, list[str]]:
    """(the schema with its DP bounds and DP values taken from ``public``, one note per column so
    settled). A DP-values column keeps the public table's ``max_values`` most frequent values (the
    private data's other values become the column's other value, as after DP discovery); a DP-bounds
    column gets the public values' range (private values outside it are clipped, as to written
    bounds). Columns the public table lacks, or holds only missing values of, keep their DP step. A
    float column without ``"decimals"`` gets the places the public values are written with
    (:func:`written_places`), so decoded values read like the input."""
    cols, notes = [], []
    for col in schema:
        if col.name in public.columns and col.type == "float" and col.decimals is None:
            places = written_places(_prepare_column(col, public[col.name]))
            if places is not None:
                col = replace(col, decimals=places)
                notes.append(f"column {col.name!r}: values written with {places} decimal place(s), as in "
                             "the public table")
        if not (col.dp_values or col.dp_bounds) or col.name not in public.columns:
            cols.append(col)
            continue
        prepared = _prepare_column(col, public[col.name])
        if col.dp_bounds:
            x = prepared[~np.isnan(prepared)]
            if not x.size:
                cols.append(col)
                continue
            spec = col.with_bounds(float(x.min()), float(x.max()))
            notes.append(f"column {col.name!r}: bounds [{spec.min}, {spec.max}] from the public table (no DP step)")
        else:
            counts = pd.Series(prepared, dtype=object).dropna().value_counts(sort=False)  # value keys: text
            values = [key_value(k) for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
            values = [v for v in values if v is not None and not (col.other and v == col.other_label)]
            if not values:
                cols.append(col)
                continue
            spec = col.with_values(sorted(values[:col.max_values], key=_order))
            notes.append(f"column {col.name!r}: {len(spec.values)} value(s) from the public table (no DP step)")
        cols.append(spec)
    return Schema(cols, schema.source, draft=schema.draft, rules=schema.rules), notes


def written_places(values: np.ndarray, most: int = 15) -> int | None:
    """The fewest decimal places that write every finite value of ``values`` exactly (up to float
    noise), at most ``most``; None when there is no finite value."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if not x.size:
        return None
    for k in range(most + 1):
        scaled = x * 10.0**k
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 + 1e-12 * np.abs(scaled)):  # float noise of parsing
            return k
    return most
