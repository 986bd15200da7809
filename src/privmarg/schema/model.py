"""The public schema of a raw table: column types, bounds, category lists (issue #6, SPEC §9).

A schema is public knowledge. Nothing in it may be read off the private data: bounds, category lists
and the number of bins fix the encoding, so with only public steps (uniform binning, no merging) the
encoded domain depends on the schema alone.

File format (JSON or YAML)::

    {"columns": {
       "age":    {"type": "integer", "min": 0, "max": 100},
       "income": {"type": "float", "min": 0, "max": 500000, "binning": "privtree"},
       "sex":    {"type": "categorical", "values": ["F", "M"]},
       "job":    {"type": "categorical", "values": ["a", "b"], "merge_rare": true, "other": true},
       "opened": {"type": "datetime", "min": "2000-01-01", "max": "2024-12-31"},
       "owner":  {"type": "boolean"},
       "score":  {"type": "float", "min": 0, "max": 1, "missing": true}}}

Keys per column: ``type`` (categorical, integer, float, boolean, datetime); ``missing`` (nulls allowed,
kept as their own value); ``null`` (the text, or list of texts, that means a missing value in the
input, e.g. ``"N"``; implies ``missing``, and the first is written for a missing value on output; a
top-level ``null`` gives every column that text, and ``missing`` still says which columns allow it);
``description`` (free text). Categorical: ``values`` (the public list),
``other`` (values outside the list share one reserved value, decoded as ``other_label``, default
``"__other__"``; a whole number keeps an integer-coded column integer), ``merge_rare`` (DP rare-category merging). Boolean: ``labels``
(how the table writes false and true, e.g. ``[0, 1]`` or ``["no", "yes"]``: read as well as the usual
forms, and written back so). Float: ``decimals`` (synthetic values rounded to that many places,
inside their bins). Numeric and datetime: ``min``/``max``
(inclusive public bounds; values outside are clipped), ``binning`` (``exact``: one code per value,
integer and datetime columns only; ``uniform``: ``bins`` equal-width bins, free; ``privtree``: at most
``bins`` adaptive bins, DP; ``quantiles``: ``bins`` bins of about equal mass, DP quantiles of a
noisy histogram over a fine public grid, or as many as a 2-way marginal resolves when ``bins`` is
not given, see :func:`privmarg.preprocess.binning.quantile_grid`), ``bins`` and ``atoms`` (values
coded exactly, apart from any bin, e.g. a point mass at 0 or at a bound; integer and float columns).

Defaults (issue #15), all fixed by the schema alone: with neither ``binning`` nor ``bins``, an
integer/datetime column with at most :data:`EXACT_MAX_VALUES` values is kept ``exact``; any other
numeric column gets ``privtree`` bins (at most :data:`DEFAULT_ADAPTIVE_BINS`, so they adapt to the
number of rows and the budget: PrivTree's threshold θ is set so that a column gets about as many bins
as a 2-way marginal can resolve, see :func:`privmarg.preprocess.binning.resolution_bins`) and, for integer and float columns,
atoms at both bounds and at 0 when 0 lies strictly inside them (values clipped to a bound and
zero-inflated columns decode exactly instead of being smeared over a bin). Such adaptive integer and
float columns also look for *heavy values* (values holding many rows: a rounded grid, an imputed or
logged constant) by DP counts and code them as atoms too (at most :data:`HEAVY_MAX_ATOMS`): integers
of a range of at most :data:`HEAVY_FIXED_MAX_VALUES` values by noisy counts over the whole range
(zCDP), float columns and wider integer ranges by thresholded noisy counts of the values present
(approximate zCDP: it spends part of δ, so a run whose schema has such a column reserves δ for it);
``"heavy_values": false`` turns this off for a column. ``bins`` given without ``binning`` means
``uniform`` (the behaviour of earlier versions); ``privtree`` alone caps at
:data:`DEFAULT_ADAPTIVE_BINS`. Datetime also takes ``unit`` (``D`` default, ``h``, ``m``, ``s``):
values are whole units since the epoch. Top-level and column keys starting with ``_`` are
comments and ignored.

DP discovery (issue #15), opt-in per column, for facts nobody can state publicly: an integer or float
column may say ``"bounds": "dp"`` instead of ``min``/``max`` (DP bounds from a noisy histogram over a
public grid of signed powers of two, :mod:`privmarg.preprocess.bounds`; the column is then binned as
if those bounds had been given), and a categorical column ``"values": "dp"`` instead of a list (DP
discovery of its frequent values, :mod:`privmarg.privacy.discovery`: at most ``max_values`` of them,
default :data:`DEFAULT_MAX_VALUES`; every other value is coded as ``other``, so ``other`` is implied).
Both are charged to the run's budget; discovery also spends part of its δ. The encoding then depends
on the schema and those released values only. A top-level ``"draft": true`` marks a schema read off the data
(``privmarg schema draft``): :class:`Schema` keeps it in :attr:`Schema.draft` and releases refuse it
unless told otherwise.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .rules import Rule, check_rules, parse_rule
from .values import DATETIME_UNITS, timestamp_units, value_key

from ..data import DataError
from ..core import Domain, strict_json

__all__ = [
    "TYPES", "BINNINGS", "DEFAULT_BINS", "DEFAULT_ADAPTIVE_BINS", "EXACT_MAX_VALUES", "HEAVY_MAX_ATOMS",
    "MAX_COLUMN_VALUES", "MAX_MARGINAL_CELLS",
    "SchemaError", "ColumnSpec", "Schema", "load_schema", "as_schema", "value_key", "DEFAULT_MAX_VALUES",
]

TYPES = ("categorical", "integer", "float", "boolean", "datetime")
BINNINGS = ("uniform", "privtree", "exact", "quantiles")
#: uniform bins when ``binning: uniform`` is asked for without ``bins``
DEFAULT_BINS = 32
#: cap on the number of PrivTree bins when ``bins`` is not given (the tree stops earlier where data is thin)
DEFAULT_ADAPTIVE_BINS = 64
#: integer/datetime columns with at most this many values are kept exact by default
EXACT_MAX_VALUES = 64
#: most values one encoded column may have
MAX_COLUMN_VALUES = 10**7
#: most cells of any 2-way marginal over the encoded domain (float64: 8 bytes a cell; 2**27 = 1 GiB);
#: every mechanism materialises some 2-way marginals, so a larger pair cannot be fitted in memory
MAX_MARGINAL_CELLS = 2**27
DEFAULT_OTHER_LABEL = "__other__"
#: cap on the values DP discovery (``"values": "dp"``) keeps when ``max_values`` is not given
DEFAULT_MAX_VALUES = 100
#: integer columns with at most this many values look for heavy values by fixed-domain noisy counts
#: (no δ); wider integer columns and float columns by thresholded counts (approximate zCDP, δ)
HEAVY_FIXED_MAX_VALUES = 2**16
#: heavy values one column may code exactly (its bins give up at most ``ColumnSpec.heavy_in_bins``
#: codes to them; the rest are codes of their own): a value is found only when its row count is far
#: above the noise, so only large tables find many (a route distance, a flight time in whole minutes)
HEAVY_MAX_ATOMS = 256

_COMMON_KEYS = {"type", "missing", "description", "null"}
_KEYS = {
    "categorical": _COMMON_KEYS | {"values", "other", "other_label", "merge_rare", "max_values"},
    "boolean": _COMMON_KEYS | {"labels"},
    "integer": _COMMON_KEYS | {"min", "max", "bins", "binning", "atoms", "bounds", "heavy_values"},
    "float": _COMMON_KEYS | {"min", "max", "bins", "binning", "atoms", "bounds", "heavy_values", "decimals"},
    "datetime": _COMMON_KEYS | {"min", "max", "bins", "binning", "unit"},
}


class SchemaError(DataError):
    """A schema that cannot be used: the message names the column and the problem."""


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)) and math.isfinite(float(x))


@dataclass(frozen=True)
class ColumnSpec:
    """One column of a :class:`Schema` (validated; see the module docstring for the keys)."""

    name: str
    type: str
    missing: bool = False
    values: tuple = ()
    other: bool = False
    other_label: Any = DEFAULT_OTHER_LABEL  # a text, or a whole number for an integer-coded column
    merge_rare: bool = False
    min: Any = None  # as written (number or date string)
    max: Any = None
    bins: int = DEFAULT_BINS
    binning: str = "uniform"
    unit: str = "D"
    atoms: tuple = ()  # numeric values coded exactly (encoding axis), sorted
    adaptive: bool = False  # privtree without "bins": the tree's threshold is sized to rows and budget
    description: str = ""
    dp_bounds: bool = False  # "bounds": "dp": min/max come from a DP step (lo/hi NaN until resolved)
    dp_values: bool = False  # "values": "dp": the list comes from DP discovery (empty until resolved)
    max_values: int = DEFAULT_MAX_VALUES  # most values DP discovery keeps
    heavy_values: bool = True  # adaptive integer/float columns: values holding many rows become atoms (DP)
    given: tuple = ()  # dp_bounds: the binning keys as written, ((key, value), ...), applied once resolved
    null: tuple = ()  # texts that mean a missing value in the input ("N", "-99"); the first is written for one
    labels: tuple = ()  # boolean: how the table writes (false, true), e.g. (0, 1) or ("no", "yes")
    decimals: int | None = None  # float: decoded values rounded to this many places (inside their bins)
    # derived: numeric bounds on the encoding axis (integer units for integer/datetime columns)
    lo: float = field(default=math.nan, compare=False)
    hi: float = field(default=math.nan, compare=False)

    # ---------------------------------------------------------------- derived facts
    @property
    def numeric(self) -> bool:
        """Binned columns: integer, float, datetime."""
        return self.type in ("integer", "float", "datetime")

    @property
    def lattice(self) -> bool:
        """Numeric columns whose values are whole numbers (integer; datetime in whole units)."""
        return self.type in ("integer", "datetime")

    @property
    def dp_step(self) -> str | None:
        """The DP preprocessing step this column asks for: ``"privtree"``, ``"quantiles"``, ``"merge"`` or None."""
        if self.numeric and self.binning in ("privtree", "quantiles"):
            return self.binning
        if self.type == "categorical" and self.merge_rare:
            return "merge"
        return None

    @property
    def dp_discovery(self) -> str | None:
        """The DP step that finds what a public schema would state: ``"bounds"``, ``"values"`` or None."""
        return "bounds" if self.dp_bounds else "values" if self.dp_values else None

    @property
    def heavy_fixed(self) -> bool:
        """Heavy values by fixed-domain noisy counts of every integer of ``min..max`` (zCDP, no δ):
        adaptive integer columns of at most :data:`HEAVY_FIXED_MAX_VALUES` values."""
        return (self.heavy_values and self.type == "integer" and self.binning == "privtree" and self.adaptive
                and not self.dp_bounds and self.hi - self.lo + 1 <= HEAVY_FIXED_MAX_VALUES)

    @property
    def heavy_threshold(self) -> bool:
        """Heavy values by thresholded noisy counts of the values present (approximate zCDP: spends δ):
        adaptive float columns and wider integer columns; a ``"bounds": "dp"`` one counts too (its range
        is unknown before the run, so the δ is reserved for it)."""
        if not (self.heavy_values and self.type in ("integer", "float") and self.binning == "privtree"
                and self.adaptive):
            return False
        return self.dp_bounds or self.type == "float" or self.hi - self.lo + 1 > HEAVY_FIXED_MAX_VALUES

    @property
    def heavy_in_bins(self) -> int:
        """Codes the bins give up to heavy values, at most (see :data:`HEAVY_MAX_ATOMS`)."""
        return self.bins // 2

    @property
    def heavy_extra(self) -> int:
        """Codes heavy values may add beyond ``bins``: the part of :data:`HEAVY_MAX_ATOMS` the bins do not give up."""
        return max(0, HEAVY_MAX_ATOMS - self.heavy_in_bins) if self.heavy_fixed or self.heavy_threshold else 0

    @property
    def base_size(self) -> int:
        """Values before missing is added: an upper bound for DP steps (merging and PrivTree only shrink)."""
        if self.dp_bounds:  # exact (narrow integer range) or at most ``bins`` bins, plus atoms
            return max(EXACT_MAX_VALUES, self.bins) + max(3, len(self.atoms)) + self.heavy_extra
        if self.dp_values:
            return self.max_values + 1
        if self.type == "categorical":
            return len(self.values) + int(self.other)
        if self.type == "boolean":
            return 2
        if self.binning == "exact":
            return int(self.hi - self.lo + 1)
        if self.lattice and self.binning == "uniform":
            return int(min(self.bins, self.hi - self.lo + 1)) + len(self.atoms)
        return int(self.bins) + len(self.atoms) + self.heavy_extra

    @property
    def max_size(self) -> int:
        """Upper bound on the encoded column's number of values (missing included)."""
        return self.base_size + int(self.missing)

    def dtype(self):
        """The pandas dtype decoded columns get."""
        if self.type == "integer":
            return "Int64" if self.missing else "int64"
        if self.type == "float":
            return "float64"
        if self.type == "datetime":
            return "datetime64[ns]"
        if self.type == "boolean" and not self.labels:
            return "boolean" if self.missing else "bool"
        vals = list(self.labels if self.type == "boolean" else self.values)
        if self.other:  # decoded as a value of its own: a number keeps a numeric column numeric
            vals.append(self.other_label)
        if all(isinstance(v, (bool, np.bool_)) for v in vals):
            return "boolean" if self.missing else "bool"
        if all(isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in vals):
            return "Int64" if self.missing else "int64"
        if all(_is_number(v) for v in vals):
            return "float64"
        if all(isinstance(v, str) for v in vals):
            return string_dtype()
        return "object"

    def with_bounds(self, lo: float, hi: float) -> "ColumnSpec":
        """This ``"bounds": "dp"`` column with the released bounds filled in: parsed as if written
        with ``min``/``max`` (so the defaults apply: exact narrow integer ranges, else adaptive bins);
        atoms outside the bounds are dropped (values are clipped to the bounds)."""
        spec: dict[str, Any] = {"type": self.type, "missing": self.missing, "description": self.description,
                                "min": int(lo) if self.lattice else float(lo),
                                "max": int(hi) if self.lattice else float(hi)}
        for k, v in self.given:
            spec[k] = [a for a in v if lo <= a <= hi] if k == "atoms" else v
        if self.decimals is not None:
            spec["decimals"] = self.decimals
        return _parse_column(self.name, spec, list(self.null) or None)  # the marker, not its "missing"

    def with_values(self, values: Any) -> "ColumnSpec":
        """This ``"values": "dp"`` column with the released values as its list (and ``other``)."""
        return replace(self, values=tuple(values), dp_values=False, max_values=DEFAULT_MAX_VALUES)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"type": self.type}
        if self.dp_values:
            out.update(values="dp", other=True)
            if self.other_label != DEFAULT_OTHER_LABEL:
                out["other_label"] = self.other_label
            if self.max_values != DEFAULT_MAX_VALUES:
                out["max_values"] = self.max_values
        elif self.dp_bounds:
            out["bounds"] = "dp"
            out.update({k: list(v) if isinstance(v, tuple) else v for k, v in self.given})
        elif self.type == "categorical":
            out["values"] = list(self.values)
            if self.other:
                out["other"] = True
                if self.other_label != DEFAULT_OTHER_LABEL:
                    out["other_label"] = self.other_label
            if self.merge_rare:
                out["merge_rare"] = True
        elif self.numeric:
            out.update(min=self.min, max=self.max, binning=self.binning)
            if self.binning != "exact" and not self.adaptive:
                out["bins"] = self.bins
            if self.atoms:
                out["atoms"] = [int(a) if self.lattice else float(a) for a in self.atoms]
            if self.type == "datetime" and self.unit != "D":
                out["unit"] = self.unit
            if not self.heavy_values:
                out["heavy_values"] = False
        if self.missing:
            out["missing"] = True
        if self.labels:
            out["labels"] = list(self.labels)
        if self.decimals is not None:
            out["decimals"] = self.decimals
        if self.null and self.missing:  # (a table-wide marker on a column without nulls changes nothing)
            out["null"] = list(self.null)
        if self.description:
            out["description"] = self.description
        return out


def string_dtype():
    """pandas' string dtype with NaN as missing (``"str"`` in pandas ≥ 3); ``object`` before."""
    return "str" if int(pd.__version__.split(".")[0]) >= 3 else "object"


def _other_label(spec: Mapping, bad) -> Any:
    """What ``other`` values decode as: a text, or a whole number (an integer-coded column then stays
    integer, e.g. ``-1`` or ``99``)."""
    label = spec.get("other_label", DEFAULT_OTHER_LABEL)
    if isinstance(label, bool) or not isinstance(label, (str, numbers.Integral)):
        raise bad(f"\"other_label\" must be a text or a whole number, got {label!r}")
    return label


def _null_markers(value: Any, bad) -> tuple:
    """The ``null`` key: one text or a list of texts that mean "missing" in the input."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) and t.strip() for t in texts):
        raise bad(f"\"null\" must be a non-empty text or a list of them (e.g. \"N\"), got {value!r}")
    return tuple(dict.fromkeys(t.strip() for t in texts))


def _parse_column(name: str, spec: Any, table_null: Any = None) -> ColumnSpec:
    def bad(msg: str) -> SchemaError:
        return SchemaError(f"schema column {name!r}: {msg}")

    if not isinstance(spec, Mapping):
        raise bad("must be an object with a \"type\"")
    spec = {k: v for k, v in spec.items() if not str(k).startswith("_")}
    typ = spec.get("type")
    if typ not in TYPES:
        raise bad(f"type must be one of {', '.join(TYPES)}, got {typ!r}")
    unknown = sorted(set(spec) - _KEYS[typ])
    if unknown:
        raise bad(f"unknown key(s) {unknown} for a {typ} column")

    def flag(key: str) -> bool:
        v = spec.get(key, False)
        if not isinstance(v, bool):
            raise bad(f"{key!r} must be true or false, got {v!r}")
        return v

    kw: dict[str, Any] = {"name": name, "type": typ, "missing": flag("missing"),
                          "description": str(spec.get("description", ""))}
    if "null" in spec:  # on the column: its missing values are written so (and allowed)
        kw["null"] = _null_markers(spec["null"], bad)
        if spec.get("missing") is False:
            raise bad("\"null\" names the text of a missing value: it needs \"missing\" true (or left out)")
        kw["missing"] = True
    elif table_null is not None:  # the table's text for a missing value; "missing" still says if allowed
        kw["null"] = _null_markers(table_null, lambda m: SchemaError(f"schema: {m}"))
    if "decimals" in spec:
        dec = spec["decimals"]
        if not isinstance(dec, numbers.Integral) or isinstance(dec, bool) or not 0 <= dec <= 15:
            raise bad(f"\"decimals\" must be a whole number from 0 to 15, got {dec!r}")
        kw["decimals"] = int(dec)
    if "labels" in spec:
        lab = spec["labels"]
        if not (isinstance(lab, (list, tuple)) and len(lab) == 2 and lab[0] != lab[1]
                and all(isinstance(v, (str, numbers.Real)) and not isinstance(v, bool) for v in lab)):
            raise bad(f"\"labels\" must be two different texts or numbers, [false, true] (e.g. [0, 1] or "
                      f"[\"no\", \"yes\"]), got {lab!r}")
        kw["labels"] = tuple(lab)
    if "heavy_values" in spec:
        if not isinstance(spec["heavy_values"], bool):
            raise bad(f"'heavy_values' must be true or false, got {spec['heavy_values']!r}")
        kw["heavy_values"] = spec["heavy_values"]
    if "max_values" in spec and spec.get("values") != "dp":
        raise bad("\"max_values\" is for \"values\": \"dp\"")
    if typ == "categorical" and spec.get("values") == "dp":
        if spec.get("other", True) is not True:
            raise bad("\"values\": \"dp\" codes every value it does not find as \"other\": drop \"other\": false")
        if spec.get("merge_rare"):
            raise bad("\"values\": \"dp\" keeps only frequent values already: drop \"merge_rare\"")
        mv = spec.get("max_values", DEFAULT_MAX_VALUES)
        if not isinstance(mv, numbers.Integral) or isinstance(mv, bool) or mv < 1:
            raise bad(f"\"max_values\" must be a positive integer, got {mv!r}")
        label = _other_label(spec, bad)
        kw.update(other=True, other_label=label, dp_values=True, max_values=int(mv))
    elif typ == "categorical":
        values = spec.get("values")
        if not isinstance(values, (list, tuple)) or not values:
            raise bad("a categorical column needs a non-empty list of \"values\" (public knowledge)")
        for v in values:
            if v is None or (isinstance(v, float) and not math.isfinite(v)) or isinstance(v, (list, dict)):
                raise bad(f"category {v!r} is not allowed (use \"missing\": true for nulls)")
        keys = [value_key(v) for v in values]
        if len(set(keys)) != len(keys):
            dup = next(v for v, k in zip(values, keys) if keys.count(k) > 1)
            raise bad(f"category {dup!r} is listed twice")
        kw.update(values=tuple(values), other=flag("other"), merge_rare=flag("merge_rare"))
        label = _other_label(spec, bad)
        if "other_label" in spec and not kw["other"]:
            raise bad("\"other_label\" needs \"other\": true")
        if kw["other"] and value_key(label) in keys:
            raise bad(f"\"other_label\" {label!r} is also a listed category")
        kw["other_label"] = label
    elif "bounds" in spec:
        kw.update(_dp_bounds_keys(spec, typ, bad))
    elif typ in ("integer", "float", "datetime"):
        if "min" not in spec or "max" not in spec:
            raise bad("needs public bounds \"min\" and \"max\"")
        lo, hi = spec["min"], spec["max"]
        if typ == "datetime":
            unit = spec.get("unit", "D")
            if unit not in DATETIME_UNITS:
                raise bad(f"unit must be one of {', '.join(DATETIME_UNITS)}, got {unit!r}")
            kw["unit"] = unit
            try:
                t_lo, t_hi = pd.Timestamp(lo), pd.Timestamp(hi)
            except (ValueError, TypeError):
                raise bad(f"min/max must be dates such as \"2000-01-31\", got {lo!r}, {hi!r}") from None
            if pd.isna(t_lo) or pd.isna(t_hi):
                raise bad("min/max must be dates")
            step = DATETIME_UNITS[unit]
            num_lo, num_hi = timestamp_units(t_lo, step), timestamp_units(t_hi, step)
        else:
            if not _is_number(lo) or not _is_number(hi):
                raise bad(f"min and max must be finite numbers, got {lo!r}, {hi!r}")
            if typ == "integer" and not (float(lo).is_integer() and float(hi).is_integer()):
                raise bad(f"min and max of an integer column must be whole numbers, got {lo!r}, {hi!r}")
            num_lo, num_hi = float(lo), float(hi)
        if num_hi < num_lo or (typ == "float" and num_hi == num_lo):
            raise bad(f"min must be below max, got min={lo!r}, max={hi!r}")
        if max(abs(num_lo), abs(num_hi)) >= 2**52:
            raise bad("bounds too large to encode exactly")
        lattice = typ in ("integer", "datetime")
        n_values = num_hi - num_lo + 1 if lattice else math.inf
        binning = spec.get("binning")
        auto = binning is None
        if auto:  # the defaults (module docstring): exact small integer ranges, else adaptive bins
            if "bins" in spec:
                binning = "uniform"
            elif n_values <= EXACT_MAX_VALUES:
                binning = "exact"
            else:
                binning = "privtree"
        if binning not in BINNINGS:
            raise bad(f"binning must be one of {', '.join(BINNINGS)}, got {binning!r}")
        if binning == "exact" and not lattice:
            raise bad("exact binning is for integer and datetime columns (a float column needs bins)")
        bins = spec.get("bins", DEFAULT_ADAPTIVE_BINS if binning in ("privtree", "quantiles") else DEFAULT_BINS)
        if not isinstance(bins, numbers.Integral) or isinstance(bins, bool) or bins < 1:
            raise bad(f"bins must be a positive integer, got {bins!r}")
        if binning == "privtree" and bins < 2:
            raise bad("privtree binning needs bins >= 2 (bins caps the number of bins it may make)")
        if binning == "exact":
            if "bins" in spec:
                raise bad("exact binning takes no \"bins\" (one code per value)")
            bins = int(n_values)
        if "atoms" in spec:
            atoms = spec["atoms"]
            if typ == "datetime" or binning == "exact":
                raise bad("\"atoms\" are for binned integer and float columns")
            if not isinstance(atoms, (list, tuple)) or not all(_is_number(a) for a in atoms):
                raise bad(f"\"atoms\" must be a list of numbers, got {atoms!r}")
            for a in atoms:
                if not num_lo <= float(a) <= num_hi:
                    raise bad(f"atom {a!r} lies outside min..max")
                if lattice and not float(a).is_integer():
                    raise bad(f"atom {a!r} of an integer column must be a whole number")
            atoms = tuple(sorted({float(a) for a in atoms}))
        elif auto and binning == "privtree" and typ != "datetime":
            atoms = tuple(sorted({num_lo, num_hi} | ({0.0} if num_lo < 0 < num_hi else set())))
        else:
            atoms = ()
        if lattice and binning == "uniform" and n_values <= bins:
            atoms = ()  # one bin per value already
        kw.update(min=lo, max=hi, lo=num_lo, hi=num_hi, bins=int(bins), binning=binning, atoms=atoms,
                  adaptive=binning in ("privtree", "quantiles") and "bins" not in spec)
    col = ColumnSpec(**kw)
    if col.base_size > MAX_COLUMN_VALUES:
        raise bad(f"{col.base_size} values would exceed memory (at most {MAX_COLUMN_VALUES})")
    return col


def _dp_bounds_keys(spec: Mapping, typ: str, bad) -> dict:
    """ColumnSpec fields of a ``"bounds": "dp"`` column (checked now, applied by :meth:`ColumnSpec.with_bounds`)."""
    if spec["bounds"] != "dp":
        raise bad(f"\"bounds\" must be \"dp\" (DP bounds) or absent (then give min and max), got {spec['bounds']!r}")
    if "min" in spec or "max" in spec:
        raise bad("\"bounds\": \"dp\" replaces min and max: give one or the other")
    binning = spec.get("binning")
    if binning not in (None, "uniform", "privtree", "quantiles"):
        raise bad(f"with \"bounds\": \"dp\" binning must be uniform, privtree or quantiles (exact needs public "
                  f"bounds), got {binning!r}")
    bins = spec.get("bins", DEFAULT_ADAPTIVE_BINS if binning in (None, "privtree", "quantiles") and "bins" not in spec
                    else DEFAULT_BINS)
    if not isinstance(bins, numbers.Integral) or isinstance(bins, bool) or bins < 1:
        raise bad(f"bins must be a positive integer, got {bins!r}")
    eff = binning or ("uniform" if "bins" in spec else "privtree")
    if eff == "privtree" and bins < 2:
        raise bad("privtree binning needs bins >= 2 (bins caps the number of bins it may make)")
    given: list[tuple[str, Any]] = [(k, spec[k]) for k in ("binning", "bins", "heavy_values") if k in spec]
    atoms: tuple = ()
    if "atoms" in spec:
        atoms = spec["atoms"]
        if not isinstance(atoms, (list, tuple)) or not all(_is_number(a) for a in atoms):
            raise bad(f"\"atoms\" must be a list of numbers, got {atoms!r}")
        if typ == "integer" and not all(float(a).is_integer() for a in atoms):
            raise bad("atoms of an integer column must be whole numbers")
        atoms = tuple(sorted({float(a) for a in atoms}))
        given.append(("atoms", atoms))
    return dict(dp_bounds=True, binning=eff, bins=int(bins), atoms=atoms, given=tuple(given),
                adaptive=eff in ("privtree", "quantiles") and "bins" not in spec)


class Schema:
    """An ordered set of :class:`ColumnSpec` (public knowledge about a raw table)."""

    def __init__(self, columns: list[ColumnSpec] | tuple[ColumnSpec, ...], source: str | None = None,
                 draft: bool = False, rules: Sequence[Any] = ()):
        columns = tuple(columns)
        if not columns:
            raise SchemaError("the schema has no columns")
        names = [c.name for c in columns]
        if len(set(names)) != len(names):
            raise SchemaError("schema column names must be unique")
        self.columns = columns
        self.source = source
        #: read off the data by ``privmarg schema draft``: its bounds and lists are not public knowledge
        self.draft = bool(draft)
        self._by_name = {c.name: c for c in columns}
        self._check_memory()
        #: rules every record obeys (:mod:`privmarg.schema.rules`), public like the rest of the schema
        self.rules = tuple(r if isinstance(r, Rule) else parse_rule(r) for r in rules)
        try:
            check_rules(self.rules, self._by_name)
        except ValueError as e:
            raise SchemaError(f"{source + ': ' if source else ''}{e}") from None

    # construction ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, spec: Mapping, source: str | None = None) -> "Schema":
        where = f"{source}: " if source else ""
        if not isinstance(spec, Mapping) or not isinstance(spec.get("columns"), Mapping):
            raise SchemaError(f"{where}a schema must be an object with a \"columns\" object")
        extra = [k for k in spec if k not in ("columns", "description", "draft", "null", "rules")
                 and not str(k).startswith("_")]
        if extra:
            raise SchemaError(f"{where}unknown top-level key(s) {extra} (expected \"columns\")")
        draft = spec.get("draft", False)
        if not isinstance(draft, bool):
            raise SchemaError(f"{where}\"draft\" must be true or false, got {draft!r}")
        table_null = spec.get("null")
        cols = [_parse_column(str(n), s, table_null) for n, s in spec["columns"].items()]
        rules = spec.get("rules", [])
        if not isinstance(rules, (list, tuple)):
            raise SchemaError(f"{where}\"rules\" must be a list of texts such as \"if AGE < 15 then MARRIED == false\"")
        try:
            parsed = [parse_rule(r) for r in rules]
        except ValueError as e:
            raise SchemaError(f"{where}{e}") from None
        return cls(cols, source=source, draft=draft, rules=parsed)

    @classmethod
    def load(cls, path: str | Path) -> "Schema":
        """Read a schema from JSON or YAML (``.yaml``/``.yml``)."""
        return cls.from_dict(_read_spec(path), source=str(path))

    def to_dict(self) -> dict:
        """The schema with every default written out (reads back to an equal schema)."""
        out: dict[str, Any] = {"draft": True} if self.draft else {}
        out["columns"] = {c.name: c.to_dict() for c in self.columns}
        if self.rules:
            out["rules"] = [r.text for r in self.rules]
        return out

    def check_not_draft(self) -> None:
        """Raise :class:`SchemaError` if this schema is marked ``"draft": true`` (read off the data)."""
        if self.draft:
            where = f"{self.source}: " if self.source else ""
            raise SchemaError(
                f"{where}this schema is a draft (\"draft\": true): its bounds and category lists were read off "
                "the private data, so a release with it is not differentially private. Replace them with public "
                "knowledge and delete the \"draft\" key, or pass --allow-draft-schema "
                "(allow_draft_schema=True) to accept that leak")

    # queries --------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def needs_dp(self) -> bool:
        """Whether some column asks for a DP preprocessing step (PrivTree, rare merging, DP bounds or values)."""
        return any(c.dp_step or c.dp_discovery for c in self.columns)

    @property
    def needs_delta(self) -> bool:
        """Whether some column asks for DP value discovery or heavy values by thresholded counts
        (approximate zCDP: spends part of δ)."""
        return any(c.dp_values or c.heavy_threshold for c in self.columns)

    @property
    def requires_delta(self) -> bool:
        """Whether some column cannot do without δ (``"values": "dp"``); heavy-value search on float
        columns is skipped, with a warning, where no δ is reserved (a budget given as ``rho``)."""
        return any(c.dp_values for c in self.columns)

    def dtypes(self) -> dict[str, Any]:
        return {c.name: c.dtype() for c in self.columns}

    def public_encoding(self) -> "Schema":
        """This schema with its DP steps replaced by public ones (PrivTree, DP quantiles → uniform bins on the same
        bounds and bin count, no rare-category merging): an encoding fixed by the schema alone, for
        comparing tables (evaluation), never for a release. A column with DP bounds or values has no
        public encoding: :class:`SchemaError` (use the resolved schema of a run's report instead)."""
        dp = [c.name for c in self.columns if c.dp_discovery]
        if dp:
            raise SchemaError(f"column(s) {dp} take their bounds or values from a DP step, so the schema alone fixes "
                              "no encoding: give the resolved schema (a run report's preprocessing \"schema\")")
        spec = self.to_dict()
        for col in spec["columns"].values():
            col.pop("merge_rare", None)
            if col.get("binning") in ("privtree", "quantiles"):
                col["binning"] = "uniform"
        spec.pop("draft", None)
        return Schema.from_dict(spec, source=self.source)

    def max_domain(self) -> Domain:
        """The encoded domain's upper bound (exact when no DP step is asked for)."""
        return Domain(self.names, [c.max_size for c in self.columns])

    def __getitem__(self, name: str) -> ColumnSpec:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self):
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.columns == other.columns

    def __repr__(self) -> str:
        return f"Schema({', '.join(f'{c.name}: {c.type}' for c in self.columns)})"

    def _check_memory(self) -> None:
        sizes = sorted(((c.max_size, c.name) for c in self.columns), reverse=True)
        if len(sizes) >= 2:
            (k1, a), (k2, b) = sizes[0], sizes[1]
            if k1 * k2 > MAX_MARGINAL_CELLS:
                gib = k1 * k2 * 8 / 2**30
                raise SchemaError(
                    f"schema column {a!r}: domain too large: {k1} values, so its 2-way marginal with {b!r} "
                    f"({k2} values) would need {gib:.3g} GiB (limit {MAX_MARGINAL_CELLS * 8 / 2**30:.3g} GiB); "
                    "use fewer bins or categories")


def _read_spec(path: str | Path) -> Any:
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"{path}: no such schema file")
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:  # pragma: no cover - pyyaml is a common dependency
            raise SchemaError(f"{path}: reading YAML schemas needs pyyaml (pip install pyyaml), or use JSON") from None
        try:
            return yaml.load(text, Loader=_strict_yaml_loader(yaml))  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError as e:
            raise SchemaError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    try:
        return strict_json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{path}: not valid JSON: {e}") from None
    except ValueError as e:  # a repeated key
        raise SchemaError(f"{path}: {e}") from None


def _strict_yaml_loader(yaml):
    """yaml's SafeLoader refusing a key given twice in one mapping (it keeps the last silently)."""

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark)
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def load_schema(path: str | Path) -> Schema:
    return Schema.load(path)


def as_schema(obj: Any) -> Schema | None:
    """A :class:`Schema` from a Schema, a schema dict or a schema file path; None if ``obj`` is none of these.

    A dict is a schema when it has a ``"columns"`` object (a domain dict maps names to sizes); a path
    is a schema when its file holds such an object (a domain file ``{"col": size}`` does not).
    """
    if isinstance(obj, Schema):
        return obj
    if isinstance(obj, Mapping):
        return Schema.from_dict(obj) if isinstance(obj.get("columns"), Mapping) else None
    if isinstance(obj, (str, Path)):
        spec = _read_spec(obj)
        if isinstance(spec, Mapping) and isinstance(spec.get("columns"), Mapping):
            return Schema.from_dict(spec, source=str(obj))
    return None
