"""One column of a schema: its public facts (:class:`ColumnSpec`), the defaults that complete them and
the checks of a column's entry in a schema file (:func:`_parse_column`); the file format is
described in :mod:`privmarg.schema.model`."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..data import DataError
from .values import DATETIME_UNITS, timestamp_units, value_key


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

def _places(x: Any) -> int:
    """Decimal places of a bound as written (0 for whole numbers, 15 at most)."""
    if not _is_number(x) or float(x) == int(float(x)):
        return 0
    text = np.format_float_positional(float(x), trim="-")
    return min(15, len(text.split(".")[1])) if "." in text else 0


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
    def output_decimals(self) -> int | None:
        """Places a decoded float keeps: the declared ``decimals``; otherwise the places of the bounds
        as written, but at least enough for 1/10,000 of the range (bounds 0–500000: whole numbers;
        0–1: 4 places), so a synthetic value never shows more digits than the schema gives reason
        for. Public: the schema only. None for other columns and for bounds not yet known."""
        if self.type != "float":
            return None
        if self.decimals is not None:
            return self.decimals
        if not (math.isfinite(self.lo) and math.isfinite(self.hi)) or self.hi <= self.lo:
            return None
        written = max(_places(self.min), _places(self.max))
        return int(min(15, max(written, math.ceil(-math.log10((self.hi - self.lo) / 1e4)))))

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
        atoms outside the bounds are dropped (values are clipped to the bounds), and all of them where
        the range found is coded exactly (each value has its own code already)."""
        spec: dict[str, Any] = {"type": self.type, "missing": self.missing, "description": self.description,
                                "min": int(lo) if self.lattice else float(lo),
                                "max": int(hi) if self.lattice else float(hi)}
        for k, v in self.given:
            spec[k] = [a for a in v if lo <= a <= hi] if k == "atoms" else v
        if (self.lattice and "binning" not in spec and "bins" not in spec
                and spec["max"] - spec["min"] + 1 <= EXACT_MAX_VALUES):
            spec.pop("atoms", None)  # a narrow range found: one code per value, atoms included
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
        kw.update(_numeric_keys(spec, typ, bad))
    col = ColumnSpec(**kw)
    if col.base_size > MAX_COLUMN_VALUES:
        raise bad(f"{col.base_size} values would exceed memory (at most {MAX_COLUMN_VALUES})")
    return col

def _numeric_keys(spec: Mapping, typ: str, bad) -> dict:
    """ColumnSpec fields of an integer, float or datetime column with public ``min``/``max``: the
    bounds in the column's units, the binning (defaults: :mod:`privmarg.schema.model`'s docstring),
    bins and atoms."""
    out: dict[str, Any] = {}
    if "min" not in spec or "max" not in spec:
        raise bad("needs public bounds \"min\" and \"max\"")
    lo, hi = spec["min"], spec["max"]
    if typ == "datetime":
        unit = spec.get("unit", "D")
        if unit not in DATETIME_UNITS:
            raise bad(f"unit must be one of {', '.join(DATETIME_UNITS)}, got {unit!r}")
        out["unit"] = unit
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
    out.update(min=lo, max=hi, lo=num_lo, hi=num_hi, bins=int(bins), binning=binning, atoms=atoms,
              adaptive=binning in ("privtree", "quantiles") and "bins" not in spec)
    return out


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
