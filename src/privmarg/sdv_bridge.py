"""A privmarg method where SDV expects a single-table synthesizer (SDV 2.x's interface).

:class:`PrivmargSynthesizer` takes SDV's metadata (a ``sdv.metadata.Metadata`` or its dict), fits
with ``fit(data)`` (a DataFrame, or SDV 2's ``{table_name: DataFrame}``) and samples with
``sample(num_rows)`` (``{table_name: DataFrame}``, as SDV 2 does); ``save``/``load`` keep a privmarg
saved model. SDV itself is not needed to run it (a metadata dict will do); ``pip install
'privmarg[sdv]'`` brings SDV and sdmetrics for users of both.

Privacy: SDV's auto-detected metadata holds ranges read off the data (``range_min``,
``range_max``, ``range_values``, ``decimal_places``). Those are not public, so by default they are
ignored: numeric columns get DP bounds and categorical columns DP value discovery, charged to the
budget (see :mod:`privmarg.schema`). ``public_ranges=True`` declares the metadata's ranges public
(written by hand from documentation, not detected); ``bounds``/``values`` give public ranges per
column. Key columns (sdtype ``id``, the primary and alternate keys) carry no statistics: they are
left out of the fit and numbered afresh in the output. Columns of personal sdtypes (email, phone
number, ...) cannot be synthesised from counts and are refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .core.strict_json import loads as strict_loads
from .io import DirectoryWriter, publish
from .schema import Schema

__all__ = ["PrivmargSynthesizer", "schema_from_sdv"]

BRIDGE_FILE = "sdv_bridge.json"
MAX_BRIDGE_BYTES = 16 * 2**20
_INTEGER_REPRESENTATIONS = ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64")


def _table_metadata(metadata: Any, table_name: str | None) -> tuple[str, dict]:
    """(table name, the table's metadata dict) from SDV metadata (object or dict; V2 multi-table
    form with ``"tables"``, or a single table's ``{"columns": ...}``)."""
    md = metadata.to_dict() if hasattr(metadata, "to_dict") else metadata
    if not isinstance(md, Mapping):
        raise ValueError("metadata must be an sdv Metadata or its dict")
    if "tables" in md:
        tables = md["tables"]
        if not isinstance(tables, Mapping) or not tables:
            raise ValueError("metadata has no tables")
        if table_name is None:
            if len(tables) != 1:
                raise ValueError(f"metadata has {len(tables)} tables: give table_name (one of {sorted(tables)})")
            table_name = next(iter(tables))
        if table_name not in tables:
            raise ValueError(f"metadata has no table {table_name!r} (it has {sorted(tables)})")
        table = tables[table_name]
    else:
        table, table_name = md, table_name or "table"
    if not isinstance(table.get("columns"), Mapping) or not table["columns"]:
        raise ValueError(f"metadata of table {table_name!r} has no columns")
    return str(table_name), dict(table)


DETECTED_KEYS = ("range_min", "range_max", "range_values", "decimal_places", "range_is_nullable", "order",
                 "order_by")  # what SDV's detection reads off the data


def public_metadata(metadata: Any, table_name: str, public_ranges: bool) -> dict:
    """The table's metadata as a release may carry it: without the fields SDV's detection reads off
    the data unless ``public_ranges`` declared them public."""
    _, table = _table_metadata(metadata, table_name)
    cols = {c: {k: v for k, v in (spec.items() if isinstance(spec, Mapping) else ())
                if public_ranges or k not in DETECTED_KEYS}
            for c, spec in table["columns"].items()}
    out = {k: v for k, v in table.items() if k in ("primary_key", "alternate_keys")}
    return {"tables": {table_name: {**out, "columns": cols}}}


def _key_columns(table: Mapping) -> list[str]:
    keys = [c for c, spec in table["columns"].items() if isinstance(spec, Mapping) and spec.get("sdtype") == "id"]
    for k in [table.get("primary_key")] + list(table.get("alternate_keys") or []):
        if isinstance(k, str) and k not in keys:
            keys.append(k)
    return keys


def _datetime_unit(fmt: str | None) -> str:
    """The schema unit a datetime format resolves: seconds without a format (SDV detects none for
    datetime64 columns, whose time of day must survive)."""
    if not fmt:
        return "s"
    for code, unit in (("%S", "s"), ("%T", "s"), ("%f", "s"), ("%M", "m"), ("%H", "h")):
        if code in fmt:
            return unit
    return "D"


def _iso_date(value: Any, fmt: str | None, col: str) -> str:
    """A date bound as ISO text, read with the column's own format (``02/01/2020`` is 2 January
    under ``%d/%m/%Y``), so the schema never guesses day or month first."""
    try:
        t = pd.to_datetime(value, format=fmt) if fmt and isinstance(value, str) else pd.Timestamp(value)
    except (ValueError, TypeError):
        raise ValueError(f"datetime column {col!r}: bound {value!r} does not match its format {fmt!r}") from None
    return t.strftime("%Y-%m-%d") if t == t.normalize() else t.isoformat()


def schema_from_sdv(metadata: Any, data: pd.DataFrame | None = None, *, table_name: str | None = None,
                    public_ranges: bool = False, bounds: Mapping[str, tuple] | None = None,
                    values: Mapping[str, list] | None = None) -> tuple[Schema, str, list[str]]:
    """(privmarg schema, table name, key columns) for SDV metadata. ``data`` only tells integer
    from float columns where the metadata has no ``computer_representation`` (its dtypes: the
    storage format, not a statistic). See the module docstring for what is public."""
    name, table = _table_metadata(metadata, table_name)
    keys = _key_columns(table)
    bounds, values = dict(bounds or {}), dict(values or {})
    unknown = sorted((set(bounds) | set(values)) - set(table["columns"]))
    if unknown:
        raise ValueError(f"bounds/values name columns the metadata does not have: {unknown}")
    cols: dict[str, dict] = {}
    refused = []
    for col, spec in table["columns"].items():
        if col in keys:
            continue
        spec = dict(spec) if isinstance(spec, Mapping) else {}
        sdtype = spec.get("sdtype")
        ranges = public_ranges
        nullable = bool(spec.get("range_is_nullable", True)) if ranges else True
        if sdtype == "numerical":
            rep = spec.get("computer_representation")
            if rep is not None:
                integer = rep in _INTEGER_REPRESENTATIONS
            else:
                integer = data is not None and col in data and pd.api.types.is_integer_dtype(data[col].dtype)
            out: dict[str, Any] = {"type": "integer" if integer else "float"}
            if col in bounds:
                out["min"], out["max"] = bounds[col]
            elif ranges and "range_min" in spec and "range_max" in spec:
                out["min"], out["max"] = spec["range_min"], spec["range_max"]
            else:
                out["bounds"] = "dp"
            if not integer and ranges and isinstance(spec.get("decimal_places"), int) and 0 <= spec["decimal_places"] <= 15:
                out["decimals"] = spec["decimal_places"]
        elif sdtype in ("categorical", "ordinal"):  # SDV 2 detects few-valued numbers as ordinal
            out = {"type": "categorical"}
            if col in values:
                out["values"] = list(values[col])
            elif ranges and spec.get("order"):
                out["values"] = list(spec["order"])
            elif ranges and spec.get("range_values"):
                out["values"] = [v for v in spec["range_values"] if v is not None and not (isinstance(v, float) and np.isnan(v))]
            else:
                out["values"] = "dp"
        elif sdtype == "boolean":
            out = {"type": "boolean"}
        elif sdtype == "datetime":
            fmt = spec.get("datetime_format")
            out = {"type": "datetime", "unit": _datetime_unit(fmt)}
            if col in bounds:
                out["min"], out["max"] = (_iso_date(b, fmt, col) for b in bounds[col])
            elif ranges and "range_min" in spec and "range_max" in spec:
                out["min"], out["max"] = _iso_date(spec["range_min"], fmt, col), _iso_date(spec["range_max"], fmt, col)
            else:
                raise ValueError(f"datetime column {col!r} needs public bounds: give bounds={{{col!r}: (first, last)}} "
                                 "or public_ranges=True with range_min/range_max in the metadata")
        else:
            refused.append(f"{col} ({sdtype})")
            continue
        out["missing"] = nullable
        cols[col] = out
    if refused:
        raise ValueError("privmarg synthesises from counts and cannot make up values of these columns: "
                         + ", ".join(refused) + "; drop them or mark them categorical in the metadata")
    if not cols:
        raise ValueError(f"table {name!r} has no column to synthesise (only keys)")
    return Schema.from_dict({"columns": cols}), name, keys


class PrivmargSynthesizer:
    """A privmarg preset behind SDV 2's single-table synthesizer interface.

    ``metadata``: SDV metadata (``sdv.metadata.Metadata`` or its dict) of one table (``table_name``
    when it has several). ``epsilon``/``delta``: the whole budget of the fit; ``method``: a privmarg
    preset (``"aim"``, ``"mst"``, ...), ``method_params`` passed to it. ``public_ranges``, ``bounds``,
    ``values``: what is public about the columns (module docstring). ``seed``: for tests only (a
    seed makes the noise replayable). Privacy: ``fit`` spends ``(epsilon, delta)`` once; sampling,
    saving and loading spend nothing.
    """

    def __init__(self, metadata: Any, *, epsilon: float = 1.0, delta: float = 1e-9, method: str = "aim",
                 table_name: str | None = None, public_ranges: bool = False, bounds: Mapping[str, tuple] | None = None,
                 values: Mapping[str, list] | None = None, seed: Any = None, **method_params: Any):
        from .registry import make_preset

        self.metadata = metadata
        self.table_name, table = _table_metadata(metadata, table_name)
        self._columns = list(table["columns"])
        self._keys = _key_columns(table)
        self._formats = {c: s["datetime_format"] for c, s in table["columns"].items()
                         if isinstance(s, Mapping) and s.get("sdtype") == "datetime" and s.get("datetime_format")}
        self.public_ranges, self.bounds, self.values = bool(public_ranges), bounds, values
        self.params = dict(epsilon=epsilon, delta=delta, method=method, **method_params)
        self._synth = make_preset(method, epsilon, delta, seed=seed, **method_params)
        self._key_dtypes: dict[str, str] = {}
        self._fitted = False

    # ------------------------------------------------------------------------ SDV's interface
    def get_metadata(self) -> Any:
        return self.metadata

    def get_parameters(self) -> dict:
        return dict(self.params, table_name=self.table_name, public_ranges=self.public_ranges)

    def fit(self, data: pd.DataFrame | Mapping[str, pd.DataFrame]) -> "PrivmargSynthesizer":
        """Spend the budget on ``data`` (a DataFrame, or ``{table_name: DataFrame}``)."""
        if isinstance(data, Mapping):
            if set(data) != {self.table_name}:
                raise ValueError(f"data must hold exactly the table {self.table_name!r}, got {sorted(data)}")
            data = data[self.table_name]
        if not isinstance(data, pd.DataFrame):
            raise ValueError("data must be a pandas DataFrame or {table_name: DataFrame}")
        missing = [c for c in self._columns if c not in data.columns]
        extra = [c for c in data.columns if c not in self._columns]
        if missing or extra:
            raise ValueError(f"data and metadata differ: missing columns {missing}, columns not in the metadata {extra}")
        schema, _, _ = schema_from_sdv(self.metadata, data, table_name=self.table_name,
                                       public_ranges=self.public_ranges, bounds=self.bounds, values=self.values)
        self._key_dtypes = {k: "int" if pd.api.types.is_integer_dtype(data[k].dtype) else "str" for k in self._keys}
        frame = data[list(schema.names)].copy()
        for col, fmt in self._formats.items():
            if col in frame:
                parsed = pd.to_datetime(frame[col], format=fmt, errors="coerce")
                bad = int((parsed.isna() & frame[col].notna()).sum())
                if bad:  # as a schema's own datetime reading: never turn a bad value into a missing one
                    raise ValueError(f"column {col!r}: {bad} value(s) do not match the datetime format {fmt!r}")
                frame[col] = parsed
        self._synth.fit(frame, schema)
        self._fitted = True
        return self

    def sample(self, num_rows: int, batch_size: int | None = None) -> dict[str, pd.DataFrame]:
        """``num_rows`` synthetic records as ``{table_name: DataFrame}`` (SDV 2's form), columns in
        the metadata's order, keys numbered 0, 1, ... . No privacy cost."""
        if not self._fitted:
            raise RuntimeError("fit the synthesizer before sampling")
        n = int(num_rows)
        if n < 0:
            raise ValueError(f"num_rows must be >= 0, got {num_rows}")
        out = self._synth.sample(n)
        for col, fmt in self._formats.items():
            if col in out:
                out[col] = pd.to_datetime(out[col]).dt.strftime(fmt)
        for k in self._keys:
            ids = np.arange(n)
            out[k] = ids if self._key_dtypes.get(k) == "int" else ids.astype(str)
        return {self.table_name: out[self._columns].reset_index(drop=True)}

    def privacy_report(self) -> dict:
        """The run's ledger (:meth:`privmarg.Synthesizer.privacy_report`)."""
        return self._synth.privacy_report()

    # ------------------------------------------------------------------------ persistence
    def save(self, filepath: str | Path, *, force: bool = False) -> Path:
        """Write a privmarg saved model (a folder) with this bridge's settings, all at once."""
        from .persist import check_target, model_writer

        if not self._fitted:
            raise RuntimeError("fit the synthesizer before saving")
        path = Path(filepath)
        check_target(path, force)
        inner = model_writer(self._synth)
        md = public_metadata(self.metadata, self.table_name, self.public_ranges)
        text = json.dumps({"table_name": self.table_name, "columns": self._columns, "keys": self._keys,
                           "key_dtypes": self._key_dtypes, "formats": self._formats, "metadata": md,
                           "parameters": self.get_parameters()}, indent=1, default=str) + "\n"

        def write(folder: str) -> None:
            inner(folder)
            (Path(folder) / BRIDGE_FILE).write_text(text)

        publish([(path, DirectoryWriter(write))])
        return path

    @classmethod
    def load(cls, filepath: str | Path) -> "PrivmargSynthesizer":
        """A saved bridge, ready to sample (untrusted input: the model is checked by
        :func:`privmarg.load`, the settings here)."""
        from .persist import load as load_model

        path = Path(filepath)
        saved = load_model(path)
        file = path / BRIDGE_FILE
        if not file.is_file() or file.stat().st_size > MAX_BRIDGE_BYTES:
            raise ValueError(f"{path}: not a saved PrivmargSynthesizer (no valid {BRIDGE_FILE})")
        try:
            info = strict_loads(file.read_text())
            name, columns, keys = info["table_name"], info["columns"], info["keys"]
            key_dtypes, formats, params = info["key_dtypes"], info["formats"], info.get("parameters", {})
            names = set(saved.schema_.names if saved.schema_ is not None else ())
            datetimes = {c.name for c in saved.schema_ if c.type == "datetime"} if saved.schema_ is not None else set()
            ok = (isinstance(name, str) and isinstance(columns, list) and isinstance(keys, list)
                  and isinstance(key_dtypes, dict) and isinstance(formats, dict) and isinstance(params, dict)
                  and all(isinstance(c, str) for c in columns + keys) and len(set(columns)) == len(columns)
                  and set(columns) == set(keys) | names and not set(keys) & names
                  and set(key_dtypes) == set(keys) and all(v in ("int", "str") for v in key_dtypes.values())
                  and set(formats) <= datetimes and all(isinstance(v, str) for v in formats.values())
                  and isinstance(info.get("metadata"), dict))
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, RecursionError) as e:
            raise ValueError(f"{path}: damaged {BRIDGE_FILE} ({type(e).__name__})") from None
        if not ok:
            raise ValueError(f"{path}: damaged {BRIDGE_FILE} (its columns, keys or formats do not match the saved model)")
        self = cls.__new__(cls)
        self.metadata, self.table_name, self._columns, self._keys = info["metadata"], name, columns, keys
        self._key_dtypes, self._formats = key_dtypes, formats
        self.public_ranges, self.bounds, self.values = bool(params.get("public_ranges")), None, None
        self.params = {k: v for k, v in params.items() if k not in ("table_name", "public_ranges")}
        self._synth, self._fitted = saved, True
        return self
