"""How one column is coded (:class:`ColumnCodec`), and how the input stored it (pandas dtypes the
output reproduces: :func:`input_formats`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..schema import ColumnSpec, Schema


@dataclass
class ColumnCodec:
    """How one column is coded: bins (``edges``) or kept base values plus a merged group."""

    spec: ColumnSpec
    edges: np.ndarray | None = None  # numeric columns
    atoms: np.ndarray = field(default_factory=lambda: np.array([], dtype=float))  # numeric values coded exactly
    rho: float = 0.0  # zCDP this column's DP step was charged
    leaf_edges: np.ndarray | None = None  # adaptive columns: the PrivTree leaves inside the bins
    leaf_cum: np.ndarray | None = None  # bin index + cumulative noisy share of each leaf within its bin
    leaf_scale: np.ndarray | None = None  # decay length of each leaf's density (inf: uniform), signed by side
    kept: np.ndarray | None = None  # categorical/boolean: base codes kept as their own code, in order
    group: np.ndarray = field(default_factory=lambda: np.array([], dtype=np.int64))  # merged rare values
    base_to_code: np.ndarray | None = None
    found: dict | None = None  # "bounds": "dp" / "values": "dp": what the DP step released, and its cost

    @property
    def n_main(self) -> int:
        """Codes before the missing value."""
        if self.edges is not None:
            return len(self.edges) - 1 + len(self.atoms)
        return len(self.kept) + int(len(self.group) > 0)

    @property
    def missing_code(self) -> int | None:
        return self.n_main if self.spec.missing else None

    @property
    def size(self) -> int:
        return self.n_main + int(self.spec.missing)

    def labels(self) -> list:
        """Base values of a categorical/boolean column (index = base code)."""
        s = self.spec
        if s.type == "boolean":
            return list(s.labels) if s.labels else [False, True]
        return list(s.values) + ([s.other_label] if s.other else [])

    def report(self) -> dict:
        out: dict[str, Any] = {"type": self.spec.type, "size": self.size}
        if self.edges is not None:
            out["binning"] = self.spec.binning
            out["edges"] = [float(e) for e in self.edges]
            if len(self.atoms):
                out["atoms"] = [float(a) for a in self.atoms]
            if self.leaf_edges is not None:
                out["leaf_edges"] = [float(e) for e in self.leaf_edges]
        elif len(self.group):
            labels = self.labels()
            out["merged"] = [_jsonable(labels[i]) for i in self.group]
        if self.rho:
            out["rho"] = float(self.rho)
        if self.found:
            out["found"] = dict(self.found)
        return out


DATETIME_DTYPE_UNITS = ("s", "ms", "us", "ns")


def input_formats(schema: Schema, df: Any) -> dict[str, dict]:
    """How the input table stores each column, where the output should store it so too: a pandas
    categorical (with its ``ordered`` flag) for categorical columns, the datetime unit of datetime
    columns (and boolean ones the input stores as a categorical of its labels). Storage facts only,
    never values: a categorical's own category list can be read off the data, so the output's
    categories are the schema's public values."""
    out: dict[str, dict] = {}
    if not isinstance(df, pd.DataFrame) or not df.columns.is_unique:  # (the reading refuses repeated columns)
        return out
    for col in schema:
        if col.name not in df.columns:
            continue
        dtype = df[col.name].dtype
        if col.type in ("categorical", "boolean") and isinstance(dtype, pd.CategoricalDtype):
            out[col.name] = {"category": True, "ordered": bool(dtype.ordered)}
        elif col.type == "datetime" and pd.api.types.is_datetime64_dtype(dtype):
            unit = np.datetime_data(dtype)[0]
            if unit in DATETIME_DTYPE_UNITS:
                out[col.name] = {"datetime_unit": unit}
    return out


def _checked_formats(formats: Any, schema: Schema) -> dict[str, dict]:
    """A saved encoder's formats, refused unless well formed (saved models are untrusted input)."""
    if not isinstance(formats, dict):
        raise ValueError("encoder formats must be an object")
    out = {}
    for name, f in formats.items():
        ok = name in schema and isinstance(f, dict) and (
            (set(f) == {"category", "ordered"} and f["category"] is True and isinstance(f["ordered"], bool)
             and schema[name].type in ("categorical", "boolean"))
            or (set(f) == {"datetime_unit"} and f["datetime_unit"] in DATETIME_DTYPE_UNITS
                and schema[name].type == "datetime"))
        if not ok:
            raise ValueError(f"encoder format of column {name!r} is malformed")
        out[name] = dict(f)
    return out


def _as_input(col: pd.Series, codec: "ColumnCodec", fmt: dict | None, extra: tuple = ()) -> pd.Series:
    """A decoded column stored as the input stored it (see :func:`input_formats`); ``extra``:
    categories besides the schema's values (the text of a missing value). The categories' order is
    the schema's."""
    if not fmt:
        return col
    if "category" in fmt:
        cats = list(dict.fromkeys(list(codec.labels()) + list(extra)))
        return pd.Series(pd.Categorical(col, categories=cats, ordered=fmt["ordered"]))
    return col.astype(f"datetime64[{fmt['datetime_unit']}]")


def _datetime_text(col: pd.Series, unit: str) -> pd.Series:
    """Dates as text (``2024-03-01``; with the time of day for a column whose ``unit`` is finer than
    days), missing ones left missing: beside a missing-value text such as ``N`` the column holds text,
    and a timestamp object would be written with its midnight."""
    t = pd.Series(col)
    return t.dt.strftime("%Y-%m-%d" if unit == "D" else "%Y-%m-%d %H:%M:%S").where(t.notna())


def _jsonable(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v
