"""Raw tables ↔ integer codes: validation, binning, rare merging, decoding (issue #6, SPEC §9).

:class:`TableEncoder` turns a mixed-type DataFrame into a :class:`~privmarg.data.Dataset` over a
:class:`~privmarg.core.Domain` fixed by the public :class:`~privmarg.schema.Schema` and, only where
the schema asks for them, by DP preprocessing steps charged to the caller's accountant:

* numeric/datetime columns: one code per value (``exact``), uniform bins on the public bounds
  (free) or PrivTree bins (DP), plus the schema's *atoms* (values coded exactly, outside any bin);
* categorical columns: the public value list (+ a reserved "other" value when ``other: true``),
  optionally with DP rare-category merging;
* ``missing: true`` columns: nulls are one more value, the last code.
* ``"bounds": "dp"`` / ``"values": "dp"`` columns (:mod:`.bounds`, :mod:`.discovery`): DP bounds or
  values first, then the column as if the schema had stated them (:attr:`TableEncoder.schema`);
  ``binning: quantiles``: DP quantile bins from a fine public grid.

Codes of a column: its bins / kept values in order, then its atoms or the merged-rare group (if any),
then missing. Atoms are the schema's (or its defaults: bounds and 0) and, for adaptive integer
and float columns, the heavy values found with DP counts (fixed-domain counts for integer ranges;
thresholded counts, which spend part of δ, for float columns). Decoding returns atoms exactly, draws
other numeric values within their bin (in adaptive bins leaf by leaf in proportion to the noisy leaf
counts; positions within bins jointly from a Gaussian copula estimated from the codes; or the bin
midpoint), never yields an atom from an integer bin, rounds integers,
restores datetimes, categories and missing values, and draws merged rare categories uniformly from
their group.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from ..data import ColumnCounts, DataError, Dataset
from ..measure import MeasurementSession
from ..core import Domain, StructuralZero
from ..privacy import Accountant, BudgetExceededError, gaussian_sigma, marginal_l2
from ..schema import ColumnSpec, Schema, as_schema, value_key
from ..privacy.discovery import keys_at_risk, threshold_for
from ..schema.model import DATETIME_UNITS, HEAVY_FIXED_MAX_VALUES, HEAVY_MAX_ATOMS
from .binning import bin_index, merge_leaves, privtree_edges, quantile_grid, resolution_bins, uniform_edges
from .bounds import GRID_MAX_EXP, dp_bounds
from .discovery import discover_values
from .merging import RARE_THRESHOLD, rare_categories
from .rules import cut_codec, protected_values, rule_cuts, rule_zeros, violations

__all__ = ["ColumnCodec", "TableEncoder"]

#: integer columns with at most this many values (binned adaptively by default) look for heavy values
#: by fixed-domain counts; wider ones and float columns by thresholded counts (δ)
HEAVY_MAX_VALUES = HEAVY_FIXED_MAX_VALUES
#: expected number of values of a column that pass the heavy-value test by noise alone
HEAVY_FALSE_VALUES = 0.05
#: PrivTree's depth cap for the leaves of an adaptive column (they are merged into at most ``bins``
#: bins afterwards, so the cap on bins need not cap the leaves: dense data gets narrow leaves, and
#: decoding within a bin follows them; PrivTree's bias stops the tree where data is thin)
ADAPTIVE_LEAF_DEPTH = 16

_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


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
    if not isinstance(df, pd.DataFrame):
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


def _as_input(col: pd.Series, codec: "ColumnCodec", fmt: dict | None) -> pd.Series:
    """A decoded column stored as the input stored it (see :func:`input_formats`)."""
    if not fmt:
        return col
    if "category" in fmt:
        cats = codec.labels()
        return pd.Series(pd.Categorical(col, categories=cats, ordered=fmt["ordered"]))
    return col.astype(f"datetime64[{fmt['datetime_unit']}]")


def _jsonable(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


class TableEncoder:
    """Encode raw tables for a :class:`Schema`; decode synthetic codes back to its types.

    ``fit(df, accountant, rho_budget, rng)`` spends exactly ``rho_budget`` zCDP (split equally over
    the columns asking for PrivTree or rare merging; each column's share is in :meth:`report` and in
    the accountant's ledger) when the schema asks for a DP step, and nothing, without reading ``df``,
    otherwise: the encoding then depends on the schema alone. With PrivTree, an atom keeps a code of
    its own only where the tree split down to its finest width (dense data there).
    """

    def __init__(self, schema: Any, *, drop_unknown: bool = False, rare_threshold: float = RARE_THRESHOLD):
        s = as_schema(schema)
        if s is None:
            raise TypeError("TableEncoder needs a Schema, a schema dict or a schema file")
        #: the schema as given; :attr:`schema` is the same once fitted, with DP bounds and values filled in
        self.given_schema: Schema = s
        self.schema: Schema = s
        self.drop_unknown = bool(drop_unknown)
        self.rare_threshold = float(rare_threshold)

    # ------------------------------------------------------------------------------ fitting
    def fit(self, df: pd.DataFrame | None = None, accountant: Accountant | None = None, rho_budget: float = 0.0,
            rng: np.random.Generator | None = None, *, rho_model: float | None = None,
            noise: str = "continuous") -> "TableEncoder":
        """Fix the encoding: public steps from the schema; DP steps (if asked for) from ``df``, charged
        exactly ``rho_budget`` zCDP (less only when DP bounds make every later binning step free: the
        rest is left to the caller), and for ``"values": "dp"`` columns the δ the accountant has left in
        its ``delta_budget``, split equally over them. DP bounds and values come first (an equal share
        each); the rest is split equally over the binning and merging steps that remain. ``rho_model``:
        the zCDP the synthesizer will spend afterwards (default ``9·rho_budget``, the 10% preprocessing
        share), which sizes adaptive PrivTree bins. ``noise``: ``"continuous"`` or ``"discrete"`` noise
        for the DP steps (see MeasurementSession)."""
        self.schema = self.given_schema
        self.formats_ = input_formats(self.schema, df)
        self._fit(df, accountant, rho_budget, rng, rho_model=rho_model, noise=noise)
        return self

    def fit_encode(self, df: pd.DataFrame, accountant: Accountant | None = None, rho_budget: float = 0.0,
                   rng: np.random.Generator | None = None, *, rho_model: float | None = None,
                   noise: str = "continuous") -> Dataset:
        """:meth:`fit` then :meth:`encode` on the same table, validating it once (before any charge)."""
        self.schema = self.given_schema
        prepared = self._prepare(df)
        self.formats_ = input_formats(self.schema, df)
        self._fit(df, accountant, rho_budget, rng, prepared=prepared, rho_model=rho_model, noise=noise)
        return self._encode_prepared(prepared)

    def _fit(self, df, accountant, rho_budget, rng, prepared=None, rho_model=None,
             noise: str = "continuous") -> None:
        disc = [c for c in self.schema if c.dp_discovery]
        dp_cols = disc + [c for c in self.schema if c.dp_step]  # planned steps (a DP-bounds column may have two)
        self.warnings_: list[str] = []
        self.rows_estimate_ = None
        self.rho_spent_ = 0.0
        if dp_cols:
            if df is None:
                raise ValueError("the schema asks for DP preprocessing (privtree or quantile bins, merge_rare, DP "
                                 "bounds or values): fit needs the data, an accountant and a budget")
            if accountant is None or rng is None or not (rho_budget > 0 and math.isfinite(rho_budget)):
                raise ValueError("DP preprocessing (privtree or quantile bins, merge_rare, DP bounds or values) needs "
                                 f"an accountant, a generator and a positive budget, got rho_budget={rho_budget!r}")
            if not accountant.can_afford(rho_budget):
                raise BudgetExceededError(
                    f"preprocessing budget rho={rho_budget:.6g} exceeds what the accountant has left "
                    f"({accountant.rho_remaining:.6g})")
            n_values = sum(c.dp_values for c in disc)
            delta_left = accountant.delta_budget - accountant.delta_spent
            n_delta = sum(c.dp_values or c.heavy_threshold for c in self.schema)
            delta_col = delta_left / n_delta if n_delta and delta_left > 0 else 0.0
            if n_values and not delta_left > 0:
                raise BudgetExceededError(
                    "\"values\": \"dp\" (DP value discovery) spends part of delta, but the accountant has none "
                    "reserved for it: give epsilon and delta (not rho), or list the values in the schema")
            if prepared is None:
                prepared = self._prepare(df)  # every check before the first charge
        rho_col = rho_budget / len(dp_cols) if dp_cols else 0.0
        rho_m = 9.0 * rho_budget if rho_model is None else float(rho_model)
        spent0 = accountant.rho_spent if accountant is not None else 0.0
        session = None
        found: dict[str, dict] = {}
        if disc:  # first what a public schema would state: bounds, values (then the schema is complete)
            session = MeasurementSession(ColumnCounts(prepared, len(df)), accountant, rng, cache=False,
                                         noise=noise)
            resolved = {}
            for col in disc:
                before = accountant.rho_spent, accountant.delta_spent
                if col.dp_bounds:
                    lo, hi, facts = dp_bounds(session, col, rho_col)
                    spec = col.with_bounds(lo, hi)
                    prepared[col.name] = np.clip(prepared[col.name], spec.lo, spec.hi)  # as encode() clips
                    info: dict[str, Any] = {"step": "bounds", "bounds": [_jsonable(spec.min), _jsonable(spec.max)],
                                            "visible_rows": facts["visible_rows"]}
                    if not facts["ok"]:
                        self.warnings_.append(f"column {col.name!r}: no bucket of the DP bounds grid stood out of "
                                              "the noise (few rows or a small budget): its bounds are the busiest "
                                              "bucket's edges; give public bounds")
                    elif facts["visible_rows"] > 0.05 * facts["rows"]:
                        self.warnings_.append(
                            f"column {col.name!r}: a bucket of the DP bounds grid needs about "
                            f"{facts['visible_rows']:.0f} of about {facts['rows']:.0f} rows to stand out of the "
                            f"noise, so values spread thinly may lie outside the DP bounds [{spec.min}, {spec.max}] "
                            "(clipped to them): give public bounds or a larger budget")
                else:
                    values, info = discover_values(session, col, rho_col, delta_col)
                    spec = col.with_values(values)
                    prepared[col.name] = _codes_from_keys(spec, prepared[col.name])
                    info = {"step": "values", "values": [_jsonable(v) for v in values], **info}
                info["rho"] = accountant.rho_spent - before[0]
                if accountant.delta_spent > before[1]:
                    info["approx_delta"] = accountant.delta_spent - before[1]
                found[col.name], resolved[col.name] = info, spec
            self.schema = Schema([resolved.get(c.name, c) for c in self.schema], source=self.schema.source,
                                 draft=self.schema.draft, rules=self.schema.rules)
            later = [c for c in self.schema if c.dp_step]  # a narrow integer range became exact: free
            rho_col = (rho_budget - (accountant.rho_spent - spent0)) / len(later) if later else 0.0
        if any(c.dp_step for c in self.schema):  # the DP steps read the prepared columns through a session
            session = MeasurementSession(ColumnCounts(prepared, len(df)), accountant, rng, cache=False,
                                         noise=noise)
        rows_seen: list[float] = []
        codecs = []
        specs = {c.name: c for c in self.schema}
        protected = protected_values(self.schema.rules, specs)
        cuts, cut_atoms = rule_cuts(self.schema.rules, specs)
        for col in self.schema:
            if col.numeric:
                atoms = np.asarray(col.atoms, dtype=float)
                if col.dp_step == "quantiles" or (col.dp_step == "privtree" and col.adaptive):
                    delta = delta_col if col.heavy_threshold else 0.0
                    if col.heavy_threshold and not delta > 0:
                        self.warnings_.append(
                            f"column {col.name!r}: no heavy-value search (it spends part of delta, and none is "
                            "reserved: give epsilon and delta, not rho, or set \"heavy_values\": false)")
                    codec = _adaptive_codec(session, col, rho_col, rho_m, len(self.schema), delta)
                    rows_seen.append(codec.rows_estimate)
                    codecs.append(codec)
                elif col.dp_step == "privtree":
                    edges = privtree_edges(session, col.name, col, rho_col)
                    atoms = _dense_atoms(col, edges, atoms)
                    codecs.append(ColumnCodec(col, edges=edges, atoms=atoms, rho=rho_col))
                else:
                    codecs.append(ColumnCodec(col, edges=uniform_edges(col), atoms=atoms))
                continue
            k = col.base_size
            group = np.array([], dtype=np.int64)
            if col.dp_step == "merge":
                group = rare_categories(session, col.name, k, rho_col, threshold=self.rare_threshold,
                                        what=f"rare-category counts {col.name}")
                # a category a rule names keeps its own code (public: the rule), so the rule is decided
                group = np.setdiff1d(group, sorted(protected.get(col.name, ())))
            in_group = np.zeros(k, dtype=bool)
            in_group[group] = True
            kept = np.flatnonzero(~in_group)
            base_to_code = np.full(k, len(kept), dtype=np.int64)
            base_to_code[kept] = np.arange(len(kept))
            codecs.append(ColumnCodec(col, kept=kept, group=group, base_to_code=base_to_code,
                                      rho=rho_col if col.dp_step else 0.0))
        if accountant is not None:
            self.rho_spent_ = accountant.rho_spent - spent0
        # the rules' constants become bin edges (post-processing of public facts): every rule is then
        # decided on every cell (privmarg.preprocess.rules)
        codecs = [cut_codec(c, cuts[c.spec.name], cut_atoms.get(c.spec.name, ()))
                  if c.edges is not None and c.spec.name in cuts else c for c in codecs]
        self.codecs_ = {c.spec.name: c for c in codecs}
        for name, info in found.items():
            self.codecs_[name].found = info
            self.codecs_[name].rho += info["rho"]
        self.domain = Domain(self.schema.names, [c.size for c in codecs])
        if rows_seen:  # post-processing of DP outputs: free
            self.rows_estimate_ = max(rows_seen)
            self.resolution_bins_ = resolution_bins(self.rows_estimate_, len(self.schema), rho_m)
            b = self.resolution_bins_
            for c in codecs:
                if c.n_main > 2 * b and not (c.spec.dp_step in ("privtree", "quantiles") and c.spec.adaptive):
                    self.warnings_.append(
                        f"column {c.spec.name!r} has {c.n_main} codes, but with about {self.rows_estimate_:.0f} "
                        f"rows and this budget a 2-way marginal resolves about {b:.0f} per column: its "
                        f"marginals will be mostly noise ({_fewer_codes_hint(c.spec)})")

    def _check_fitted(self) -> None:
        if not hasattr(self, "codecs_"):
            raise RuntimeError("TableEncoder is not fitted: call fit() first")

    # ------------------------------------------------------------------------------ encoding
    def encode(self, df: pd.DataFrame, clipped: dict[str, int] | None = None) -> Dataset:
        """Validate ``df`` and return its codes (raises :class:`DataError` naming column and problem).

        ``clipped``: a dict that receives, per numeric column, how many values lay outside the
        schema's bounds and were clipped. That count reads the data: for the curator's own checks
        (``privmarg evaluate``), never for anything released."""
        self._check_fitted()
        return self._encode_prepared(self._prepare(df, clipped))

    def validate(self, df: pd.DataFrame) -> None:
        """Check ``df`` against the schema (columns, emptiness, types, nulls, categories); raises
        :class:`DataError` naming the column and the problem. Reads no more than :meth:`encode`."""
        self._prepare(df)

    def _encode_prepared(self, prepared: dict[str, np.ndarray]) -> Dataset:
        self._check_fitted()
        cols = [_column_codes(self.codecs_[name], prepared[name]) for name in self.schema.names]
        return Dataset(np.column_stack(cols), self.domain, validate=False)

    @staticmethod
    def _encode_prepared_column(c: ColumnCodec, v: np.ndarray) -> np.ndarray:
        """Codes of a numeric column's prepared values (NaN entries get an arbitrary code)."""
        miss = np.isnan(v)
        code = np.zeros(len(v), dtype=np.int64)
        code[~miss] = bin_index(v[~miss], c.edges)
        if len(c.atoms):
            k = np.searchsorted(c.atoms, v)
            hit = ~miss & (k < len(c.atoms))
            hit[hit] = c.atoms[k[hit]] == v[hit]
            code[hit] = len(c.edges) - 1 + k[hit]
        return code

    def encode_values(self, df: pd.DataFrame) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Codes of some columns' values (a partial table: conditions for sampling), checked like
        :meth:`encode` but values outside the schema's bounds are an error, not clipped. Returns
        ``(codes, exact)``: per column its codes, and the prepared values (numbers on the encoding
        axis, base category codes) that :meth:`decode` can put back exactly (``exact=``)."""
        self._check_fitted()
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
        df = df.rename(columns=str)
        unknown = [c for c in df.columns if c not in self.schema]
        if unknown:
            raise DataError(f"column(s) {unknown} are not in the schema")
        codes, exact = {}, {}
        for name in df.columns:
            spec = self.schema[name]
            clipped: dict[str, int] = {}
            v = _prepare_column(spec, df[name].reset_index(drop=True), clipped)
            if clipped:
                raise DataError(f"column {name!r}: value outside the schema's bounds [{spec.min}, {spec.max}]")
            codes[name] = _column_codes(self.codecs_[name], v)
            exact[name] = v
        return codes, exact

    def _prepare(self, df: pd.DataFrame, clipped: dict[str, int] | None = None) -> dict[str, np.ndarray]:
        """Check columns, emptiness and every value; numeric columns → clipped floats (NaN = missing),
        categorical/boolean → base codes (-1 = missing)."""
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"expected a pandas DataFrame, got {type(df).__name__}")
        names = self.schema.names
        cols = [str(c) for c in df.columns]
        if len(set(cols)) != len(cols):
            dup = sorted({c for c in cols if cols.count(c) > 1})
            raise DataError(f"column(s) {dup} appear more than once in the data")
        missing = [n for n in names if n not in cols]
        if missing:
            raise DataError(f"column(s) {missing} of the schema are missing from the data")
        extra = [c for c in cols if c not in self.schema]
        if extra and not self.drop_unknown:
            raise DataError(f"column(s) {extra} of the data are not in the schema (add them to the schema, "
                            "or drop them with --drop-unknown / drop_unknown=True)")
        if len(df) == 0:
            raise DataError("the table is empty (no rows)")
        df = df.rename(columns=str)
        return {n: _prepare_column(self.schema[n], df[n], clipped) for n in names}

    # ------------------------------------------------------------------------------ decoding
    def decode(self, codes: np.ndarray, rng: np.random.Generator | None = None, *,
               midpoint: bool = False, exact: dict[str, np.ndarray] | None = None,
               copula: bool = True) -> pd.DataFrame:
        """A DataFrame with the schema's columns and dtypes from integer codes over :attr:`domain`.

        Numeric values are drawn within their bin (``midpoint=True``: the bin midpoint), integers
        rounded, datetimes restored, merged rare categories drawn uniformly from their group. Where two
        or more numeric columns are binned, the positions within the bins are not independent
        (``copula=True``, the default): they follow a Gaussian copula whose correlations are estimated
        from ``codes`` themselves (:func:`_copula_positions`), so a monotone dependence between two
        columns survives inside wide bins; ``copula=False``: independent uniform positions. Either way
        every value lies in its row's code (post-processing of the codes alone: free).
        ``exact``: per column, values to put back as they are instead (from :meth:`encode_values`,
        one per row; they must lie in the rows' codes).
        """
        self._check_fitted()
        codes = np.asarray(codes)
        if codes.ndim != 2 or codes.shape[1] != len(self.domain):
            raise ValueError(f"expected codes of shape (rows, {len(self.domain)}), got {codes.shape}")
        if codes.shape[0]:
            lo, hi = codes.min(axis=0), codes.max(axis=0)
            for i, a in enumerate(self.domain.attrs):
                if lo[i] < 0 or hi[i] >= self.domain.shape[i]:
                    raise ValueError(f"column {a!r}: codes outside 0..{self.domain.shape[i] - 1}")
        rng = rng if rng is not None else np.random.default_rng()
        names = self.schema.names
        pos = {}
        if copula and not midpoint and codes.shape[0] > 1:
            pos = _copula_positions([self.codecs_[n] for n in names], codes.astype(np.int64), rng)
        out = {}
        for j, name in enumerate(names):
            col = _decode_column(self.codecs_[name], codes[:, j].astype(np.int64), rng, midpoint,
                                 None if exact is None else exact.get(name), pos.get(j))
            spec = self.codecs_[name].spec
            col = _as_input(col, self.codecs_[name], getattr(self, "formats_", {}).get(name))
            if spec.null:  # missing values written as the input wrote them
                col = col.astype(object).where(col.notna(), spec.null[0])
            out[name] = col
        return pd.DataFrame(out)

    # ------------------------------------------------------------------------------ saving
    def state(self) -> dict:
        """What a fitted encoder is, for saving: the (public) schema, and per column its bin edges and
        atoms (with the adaptive leaves, their cumulative noisy shares and decay lengths), or kept /
        merged categories, and the zCDP its DP step was charged (all public or DP outputs). Never the
        data. Floats are written as Python floats (``repr`` round-trips exactly; ``inf`` as JSON
        ``Infinity``)."""
        self._check_fitted()
        fl = lambda a: [float(e) for e in a]  # noqa: E731
        cols = {}
        for n, c in self.codecs_.items():
            if c.edges is not None:
                st: dict[str, Any] = {"edges": fl(c.edges)}
                if len(c.atoms):
                    st["atoms"] = fl(c.atoms)
                if c.leaf_edges is not None:
                    st["leaf_edges"] = fl(c.leaf_edges)
                    st["leaf_cum"] = fl(c.leaf_cum)
                    st["leaf_scale"] = fl(c.leaf_scale)
            else:
                st = {"kept": [int(i) for i in c.kept], "group": [int(i) for i in c.group]}
            if c.rho:
                st["rho"] = float(c.rho)
            if c.found:
                st["found"] = dict(c.found)
            cols[n] = st
        out = {"schema": self.given_schema.to_dict(), "drop_unknown": self.drop_unknown,
               "rare_threshold": self.rare_threshold, "rho_spent": float(self.rho_spent_), "columns": cols}
        if getattr(self, "rows_estimate_", None) is not None:
            out["rows_estimate"] = float(self.rows_estimate_)
            out["resolution_bins"] = float(self.resolution_bins_)
        if getattr(self, "warnings_", None):
            out["warnings"] = list(self.warnings_)
        if getattr(self, "formats_", None):
            out["formats"] = {k: dict(v) for k, v in self.formats_.items()}
        return out

    @classmethod
    def from_state(cls, state: dict) -> "TableEncoder":
        """The fitted encoder :meth:`state` describes (no data, no budget)."""
        enc = cls(Schema.from_dict(state["schema"]), drop_unknown=bool(state["drop_unknown"]),
                  rare_threshold=float(state["rare_threshold"]))
        enc.schema = Schema([_resolved(col, state["columns"][col.name].get("found")) for col in enc.schema],
                            source=enc.schema.source, draft=enc.schema.draft, rules=enc.schema.rules)
        arr = lambda st, k: None if k not in st else np.asarray(st[k], dtype=float)  # noqa: E731
        codecs = []
        for col in enc.schema:
            st = state["columns"][col.name]
            rho = float(st.get("rho", 0.0))
            if "edges" in st:
                atoms = arr(st, "atoms")
                codecs.append(ColumnCodec(col, edges=arr(st, "edges"), rho=rho,
                                          atoms=np.array([], dtype=float) if atoms is None else atoms,
                                          leaf_edges=arr(st, "leaf_edges"), leaf_cum=arr(st, "leaf_cum"),
                                          leaf_scale=arr(st, "leaf_scale")))
                continue
            kept = np.asarray(st["kept"], dtype=np.int64)
            group = np.asarray(st["group"], dtype=np.int64)
            base_to_code = np.full(col.base_size, len(kept), dtype=np.int64)
            base_to_code[kept] = np.arange(len(kept))
            codecs.append(ColumnCodec(col, kept=kept, group=group, base_to_code=base_to_code, rho=rho))
        for c in codecs:
            c.found = state["columns"][c.spec.name].get("found")
        enc.rho_spent_ = float(state["rho_spent"])
        enc.codecs_ = {c.spec.name: c for c in codecs}
        enc.domain = Domain(enc.schema.names, [c.size for c in codecs])
        enc.rows_estimate_ = state.get("rows_estimate")
        if enc.rows_estimate_ is not None:
            enc.resolution_bins_ = float(state["resolution_bins"])
        enc.warnings_ = list(state.get("warnings", []))
        enc.formats_ = _checked_formats(state.get("formats", {}), enc.schema)
        return enc

    # ------------------------------------------------------------------------------ structural zeros
    def check_zeros(self, spec: Any) -> list[tuple[tuple[str, ...], list[dict[str, np.ndarray]]]]:
        """Validate structural zeros written in raw values against the schema alone (no data read, free).

        ``spec``: ``[{"attrs": ["sex", "pregnant"], "cells": [["male", "yes"], ...]}, ...]``; a cell
        lists one raw value per attribute (``null`` = missing where the column allows it). Returns, per
        zero, its attributes and each cell's prepared values; raises :class:`DataError` naming the
        problem (unknown column, wrong arity, a value the schema does not allow)."""
        if isinstance(spec, Mapping):
            spec = [spec]
        if not isinstance(spec, (list, tuple)):
            raise DataError("structural zeros must be a list of {\"attrs\": [...], \"cells\": [[...], ...]}")
        out = []
        for i, item in enumerate(spec):
            where = f"structural zero #{i + 1}"
            if not isinstance(item, Mapping) or "attrs" not in item or "cells" not in item:
                raise DataError(f"{where}: needs \"attrs\" and \"cells\" (raw values; \"allowed\" is for "
                                "integer codes with --domain)")
            attrs = tuple(str(a) for a in item["attrs"])
            unknown = [a for a in attrs if a not in self.schema]
            if not attrs or unknown or len(set(attrs)) != len(attrs):
                raise DataError(f"{where}: attrs {list(attrs)} must name distinct schema columns"
                                + (f" ({unknown} not in the schema)" if unknown else ""))
            cells = item["cells"]
            if not isinstance(cells, (list, tuple)) or not cells or any(
                    not isinstance(c, (list, tuple)) or len(c) != len(attrs) for c in cells):
                raise DataError(f"{where}: \"cells\" must be a non-empty list of [{', '.join(attrs)}] values")
            values = {}
            for j, a in enumerate(attrs):
                col = self.schema[a]
                if col.dp_discovery:
                    raise DataError(f"{where}: column {a!r} takes its {col.dp_discovery} from a DP step, so its "
                                    "codes are not known before the run: structural zeros on it are not supported")
                raw = pd.Series([c[j] for c in cells], dtype=object)
                try:
                    v = _prepare_column(col, raw)
                except DataError as e:
                    raise DataError(f"{where}: {e}") from None
                if col.numeric:
                    x = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float) if col.type != "datetime" else v
                    outside = ~np.isnan(x) & ((x < col.lo) | (x > col.hi))
                    if outside.any():
                        raise DataError(f"{where}: column {a!r}: value {raw[outside].iloc[0]!r} lies outside "
                                        "the schema's bounds")
                elif col.type == "categorical" and col.other and np.any(v == len(col.values)):
                    raise DataError(f"{where}: column {a!r}: value {raw[v == len(col.values)].iloc[0]!r} is "
                                    "not one of the schema's categories")
                values[a] = v
            out.append((attrs, values))
        return out

    def structural_zeros(self, spec: Any) -> list[StructuralZero]:
        """Structural zeros written in raw values (see :meth:`check_zeros`) as masks over :attr:`domain`.

        Post-processing of the fitted encoding (free). A cell is forbidden only where each of its
        values has a code of its own: a category not merged into the rare group, an integer in a
        one-value bin (``exact`` columns) or an atom, a missing value. A cell whose value shares its
        code with possible values (inside a wider bin, or merged) cannot be forbidden without
        forbidding those too: it is left out and named in :attr:`zero_notes_`."""
        self._check_fitted()
        self.zero_notes_: list[str] = []
        zeros = []
        for attrs, values in self.check_zeros(spec):
            codes, exact = [], np.ones(len(next(iter(values.values()))), dtype=bool)
            for a in attrs:
                c, v = self.codecs_[a], values[a]
                if c.edges is not None:
                    miss = np.isnan(v)
                    code = self._encode_prepared_column(c, v)
                    n_bins = len(c.edges) - 1
                    jb = np.minimum(code, n_bins - 1)
                    unit = c.spec.lattice & (c.edges[jb + 1] - c.edges[jb] == 1)
                    exact &= miss | (code >= n_bins) | unit
                else:
                    miss = v < 0
                    code = np.where(miss, -1, c.base_to_code[np.maximum(v, 0)])
                    exact &= miss | ~np.isin(np.maximum(v, 0), c.group)
                if miss.any():
                    code = np.where(miss, c.missing_code if c.missing_code is not None else 0, code)
                codes.append(code)
            cells = np.column_stack(codes)
            for k in np.flatnonzero(~exact):
                self.zero_notes_.append(f"structural zero on {list(attrs)}: cell {k + 1} has a value without a "
                                        "code of its own (inside a bin or a merged group): left out")
            if exact.any():
                zeros.append(StructuralZero.from_cells(self.domain, attrs, cells[exact]))
        return zeros

    def rule_zeros(self) -> list[StructuralZero]:
        """The schema's rules as structural zeros over :attr:`domain` (post-processing of the fitted
        encoding and the public rules: free); cells a rule could not decide go to :attr:`zero_notes_`."""
        self._check_fitted()
        zeros, notes = rule_zeros(self.schema.rules, self.codecs_, self.domain)
        self.rule_notes_ = notes
        return zeros

    def rule_violations(self, df: pd.DataFrame) -> dict[str, int]:
        """For each of the schema's rules, how many records of ``df`` (raw values) break it."""
        prepared = self._prepare(df)
        return violations(self.schema.rules, prepared, {c.name: c for c in self.schema})

    def report(self) -> dict:
        """Per column: type, number of codes, bin edges and atoms or merged categories (all public or DP
        outputs), and the zCDP ``rho`` its DP step was charged (absent when free)."""
        self._check_fitted()
        out = {"rho_spent": float(self.rho_spent_), "columns": {n: c.report() for n, c in self.codecs_.items()}}
        if any(c.dp_discovery for c in self.given_schema):  # DP bounds/values filled in: a schema to evaluate with
            out["schema"] = self.schema.to_dict()
        if self.rows_estimate_ is not None:
            out["rows_estimate"] = float(self.rows_estimate_)
            out["resolution_bins"] = float(self.resolution_bins_)
        if self.warnings_:
            out["warnings"] = list(self.warnings_)
        return out


def _resolved(col: ColumnSpec, found: dict | None) -> ColumnSpec:
    """``col`` with what its DP discovery step released (saved in :meth:`TableEncoder.state`)."""
    if col.dp_bounds:
        return col.with_bounds(*found["bounds"])
    if col.dp_values:
        return col.with_values(found["values"])
    return col


def _adaptive_codec(session, col: ColumnSpec, rho: float, rho_model: float, columns: int,
                    delta: float = 0.0) -> ColumnCodec:
    """The default binning of a wide numeric column (issue #15); charges ``rho`` zCDP, in two halves,
    or in three thirds where it looks for heavy values (an integer column of at most
    :data:`HEAVY_MAX_VALUES` values; a float or wider integer column when ``delta`` > 0, which it then
    spends as the approximate δ of the thresholded counts; ``"heavy_values": false``: never).
    ``binning: quantiles`` skips steps 1 and 2 (a public fine grid, :func:`~.binning.quantile_grid`,
    instead of the PrivTree leaves; all its atoms kept) and spends the whole ``rho`` on step 3; it
    merges into ``bins`` bins when given.

    1. PrivTree (θ = 0, depth cap :data:`ADAPTIVE_LEAF_DEPTH`, not ``log2 bins``) splits the public range
       into leaves, finest where the data is dense (its bias stops it where data is thin); the schema's
       atoms whose leaf reached the width of ``log2 bins`` levels keep codes of their own.
    2. Integer columns: the noisy count of every value (:func:`_heavy_values`); float columns (and
       wider integer ranges): thresholded noisy counts of the values present
       (:func:`_threshold_heavy_values`). Values far above the noise (point masses: a common seat
       count, a delay of 0 minutes, a rounded grid, an imputed constant) become atoms too, at most
       :data:`~privmarg.schema.model.HEAVY_MAX_ATOMS` of them; the bins below shrink by as many, by
       ``ColumnSpec.heavy_in_bins`` at most (the schema's bound on codes, ``ColumnSpec.base_size``,
       counts the rest).
    3. The Gaussian mechanism (Δ₂ = 1 add/remove, √2 replace-one) releases the count of each leaf
       (atom values left out) and of each atom.
    4. Free post-processing: leaves are merged into about :func:`resolution_bins` bins (at most
       ``bins`` less the heavy atoms) of equal noisy mass (DP quantiles), so each 2-way marginal cell
       can hold more rows than noise; decoding draws a leaf within the bin in proportion to its noisy
       count, then a value within the leaf (never an atom of an integer column), so a wide tail bin
       does not spread its rows evenly up to the bound.
    """
    fixed = col.binning != "quantiles" and col.heavy_fixed
    heavy = fixed or (col.binning != "quantiles" and col.heavy_threshold and delta > 0)
    l2 = marginal_l2(session.neighbour)
    n_heavy = 0
    if col.binning == "quantiles":  # a public fine grid instead of the tree: the whole rho on its counts
        leaves, atoms, rho_counts = quantile_grid(col), np.asarray(col.atoms, dtype=float), rho
    else:
        part = rho / 3 if heavy else rho / 2
        leaves = privtree_edges(session, col.name, col, part, max_depth=ADAPTIVE_LEAF_DEPTH)
        atoms = _dense_atoms(col, leaves, np.asarray(col.atoms, dtype=float))
        if heavy:
            found = (_heavy_values(session, col, part, l2, HEAVY_MAX_ATOMS) if fixed
                     else _threshold_heavy_values(session, col, part, l2, HEAVY_MAX_ATOMS, delta))
            n_heavy = len(np.setdiff1d(found, atoms))
            atoms = np.union1d(atoms, found)
        rho_counts = rho - 2 * part if heavy else rho - part
    sigma = gaussian_sigma(rho_counts, l2)
    counts = session.range_histogram(col.name, leaves, atoms)
    noisy = session.gaussian(counts, sigma, l2, f"bin counts {col.name}", counts=True)
    leaf_w = np.maximum(noisy[:len(leaves) - 1], 0.0)
    if heavy and col.lattice and len(atoms):  # a leaf whose integers are all atoms holds no other value
        inside = np.searchsorted(atoms, leaves[1:], side="left") - np.searchsorted(atoms, leaves[:-1], side="left")
        leaf_w[np.diff(leaves) <= inside] = 0.0
    rows = float(np.maximum(noisy, 0.0).sum())
    target = resolution_bins(rows, columns, rho_model)
    if col.binning == "quantiles":  # bins when given; the cap on the grid's merged cells otherwise
        target = min(target, col.bins) if col.adaptive else col.bins
    else:
        target = min(target, col.bins - min(n_heavy, col.heavy_in_bins))
    group = merge_leaves(leaf_w, target)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    edges = np.r_[leaves[starts], leaves[-1]]
    tot = np.bincount(group, weights=leaf_w)
    share = np.where(tot[group] > 0, leaf_w / np.where(tot[group] > 0, tot[group], 1.0), 0.0)
    width = np.diff(leaves)
    wtot = np.bincount(group, weights=width)
    share = np.where(tot[group] > 0, share, width / wtot[group])  # no noisy mass: by width
    within = np.cumsum(share) - np.r_[0.0, np.cumsum(np.bincount(group, weights=share))][group]
    cum = group + np.minimum(within, 1.0)
    cum[np.r_[starts[1:] - 1, len(group) - 1]] = np.arange(len(starts)) + 1.0  # each bin's last leaf ends at j+1
    codec = ColumnCodec(col, edges=edges, atoms=atoms, rho=rho, leaf_edges=leaves, leaf_cum=cum,
                        leaf_scale=_leaf_decay(leaf_w, width))
    codec.rows_estimate = rows
    return codec


def _heavy_values(session, col: ColumnSpec, rho: float, l2: float, most: int) -> np.ndarray:
    """Integer values that hold many rows (point masses: a common seat count, a delay of 0 minutes),
    to be coded exactly as atoms instead of being smeared over a bin; charges ``rho`` zCDP.

    The Gaussian mechanism (Δ₂ = ``l2``) releases the count of every integer of the public range
    ``min..max`` (a fixed domain, so no δ is needed); a value is heavy when its noisy count exceeds
    ``z·σ`` with ``z`` the normal quantile at which :data:`HEAVY_FALSE_VALUES` values are expected to
    pass by noise alone (``Pr[N(0,1) > z] = HEAVY_FALSE_VALUES / values``: a false atom far in a tail
    would collect noise mass there). At most ``most``, the largest first. The selection is
    post-processing of the noisy counts: free."""
    values = np.arange(col.lo, col.hi + 2, dtype=float)  # one interval [v, v+1) per integer
    sigma = gaussian_sigma(rho, l2)
    counts = session.range_histogram(col.name, values, np.array([], dtype=float))
    noisy = session.gaussian(counts, sigma, l2, f"value counts {col.name}", counts=True)
    z = NormalDist().inv_cdf(1.0 - HEAVY_FALSE_VALUES / len(counts))
    hit = np.flatnonzero(noisy > z * sigma)
    hit = hit[np.argsort(-noisy[hit], kind="stable")[:most]]
    return np.sort(values[hit])


def _threshold_heavy_values(session, col: ColumnSpec, rho: float, l2: float, most: int,
                            delta: float) -> np.ndarray:
    """Values of a float (or wide integer) column that hold many rows, to be coded exactly as atoms;
    ``rho`` zCDP and ``delta`` approximate. No public list of the values exists, so the exact values
    present are released by thresholded Gaussian counts (:meth:`MeasurementSession.frequent_values`):
    σ = Δ₂/√(2ρ) (Δ₂ = ``l2``), ``τ = 1 + σ·Φ̄⁻¹(δ/keys_at_risk)`` (:func:`threshold_for`), so the
    ledger holds ``ρ`` and ``approx_delta = δ`` and both recompute. At most ``most``, the largest noisy
    counts first (free post-processing)."""
    sigma = gaussian_sigma(rho, l2)
    tau = threshold_for(sigma, delta, keys_at_risk(session.neighbour), discrete=session.noise == "discrete")
    keys, noisy = session.frequent_values(col.name, sigma, l2, tau, f"heavy values {col.name}")
    top = np.argsort(-noisy, kind="stable")[:most]
    return np.sort(np.asarray(keys, dtype=float)[top])


def _leaf_decay(counts: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Within-leaf shape for decoding (free post-processing of noisy leaf counts): a leaf less dense
    than its denser neighbour gets a density that starts at that neighbour's level at the shared edge
    and decays exponentially away from it, holding the leaf's count; others stay uniform. Returns the
    decay length (+: from the left edge, −: from the right edge; ``inf``: uniform)."""
    d = counts / width
    dl = np.r_[0.0, d[:-1]]
    dr = np.r_[d[1:], 0.0]
    head = np.maximum(dl, dr)
    sign = np.where(dl >= dr, 1.0, -1.0)
    decay = (head > d * (1 + 1e-9)) & (counts > 0)
    scale = np.full(len(counts), np.inf)
    if decay.any():
        c, w, h = counts[decay], width[decay], head[decay]
        lo, hi = np.log(w * 1e-6), np.log(w * 1e6)  # solve h·s·(1 − e^(−w/s)) = c for s (increasing in s)
        for _ in range(80):
            mid = (lo + hi) / 2
            sm = np.exp(mid)
            big = h * sm * (-np.expm1(-w / sm)) > c
            hi, lo = np.where(big, mid, hi), np.where(big, lo, mid)
        scale[decay] = np.exp((lo + hi) / 2)
    return sign * scale


def _dense_atoms(col: ColumnSpec, edges: np.ndarray, atoms: np.ndarray) -> np.ndarray:
    """The atoms PrivTree found dense: those whose leaf the tree split down to its finest width (its
    depth cap). An atom in a wider leaf holds few rows; a code of its own would only collect noise
    (mass the generator then puts exactly at a bound, an outlier). Post-processing of the tree: free."""
    if not len(atoms):
        return atoms
    depth = int(math.floor(math.log2(col.bins)))
    span = (col.hi + 1 - col.lo) if col.lattice else (col.hi - col.lo)
    finest = span / 2 ** depth
    if col.lattice:
        finest = max(1.0, math.ceil(finest))
    j = bin_index(atoms, edges)
    width = edges[j + 1] - edges[j]
    return atoms[width <= finest * (1 + 1e-9)]


# ---------------------------------------------------------------------------------- columns
def _err(col: ColumnSpec, msg: str) -> DataError:
    return DataError(f"column {col.name!r}: {msg}")


def _show(v: Any) -> str:
    s = repr(_jsonable(v))
    return s if len(s) <= 60 else s[:57] + "..."


def _fewer_codes_hint(spec: ColumnSpec) -> str:
    """What would give a column fewer codes, in the schema's own terms."""
    if spec.numeric and spec.binning != "exact" and "bins" in spec.to_dict():
        return "drop \"bins\" to let PrivTree size the bins, or give fewer"
    if spec.numeric:
        return "bin it: \"binning\": \"privtree\" lets the budget size the bins"
    return "list fewer categories, or set \"merge_rare\": true"


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
                        f"{int(bad.sum())} such value(s))")
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
            raise _err(col, f"value {_show(vals[bad].iloc[0])} is not a date ({int(bad.sum())} such value(s))")
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
        raise _err(col, f"value {_show(uniq[unknown[0]])} is not one of the schema's categories "
                        f"({len(unknown)} unknown value(s) in {rows} row(s); list them under \"values\" "
                        "or set \"other\": true)")
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


def _column_codes(c: ColumnCodec, v: np.ndarray) -> np.ndarray:
    """Codes of one prepared column (floats with NaN, or base codes with -1, for missing)."""
    if c.edges is not None:
        miss = np.isnan(v)
        code = TableEncoder._encode_prepared_column(c, v)
    else:
        miss = v < 0
        code = np.empty(len(v), dtype=np.int64)
        code[~miss] = c.base_to_code[v[~miss]]
    if miss.any():
        code[miss] = c.missing_code
    return code


def _free_integers(left: np.ndarray, right: np.ndarray, atoms: np.ndarray, u: np.ndarray | None) -> np.ndarray:
    """An integer of ``left .. right-1`` that is not an atom, per row: the ``floor(u·n)``-th of the
    ``n`` such integers (``u=None``: the middle one); where every integer is an atom, one of them."""
    a = np.asarray(atoms, dtype=float)
    width = right - left
    start = np.searchsorted(a, left, side="left")
    n = width - (np.searchsorted(a, right, side="left") - start)
    none = n <= 0
    m = np.where(none, width, n)
    r = np.floor((m - 1) / 2 + 0.5) if u is None else np.minimum(np.floor(u * m), m - 1)
    v = left + r
    if len(a) and not none.all():
        for _ in range(len(a) + 1):  # the r-th free integer: skip the atoms at or below it (monotone)
            nxt = np.where(none, v, left + r + np.searchsorted(a, v, side="right") - start)
            if np.array_equal(nxt, v):
                break
            v = nxt
    return v


def _code_order(c: ColumnCodec) -> np.ndarray:
    """The value order of a numeric column's main codes (bins by their left edge, atoms by value; an
    atom at a bin's left edge first): ``order[r]`` is the code at rank ``r``."""
    n_bins = len(c.edges) - 1
    key = np.r_[c.edges[:-1], c.atoms]
    atom_last = np.r_[np.ones(n_bins), np.zeros(len(c.atoms))]
    return np.lexsort((atom_last, key))


def _truncnorm(mu: np.ndarray, sd: float, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of ``N(mu, sd²)`` truncated to ``[a, b]`` (inverse CDF, on the side of the
    smaller tail so that far-tail intervals keep their precision)."""
    from scipy.special import ndtr, ndtri

    lo, hi = (a - mu) / sd, (b - mu) / sd
    flip = lo > 0  # both bounds in the upper tail: draw the mirror image
    lo, hi = np.where(flip, -hi, lo), np.where(flip, -lo, hi)
    p_lo, p_hi = ndtr(lo), ndtr(hi)
    x = ndtri(p_lo + rng.random(len(mu)) * (p_hi - p_lo))
    x = np.clip(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), lo, hi)
    x = np.clip(np.where(np.isfinite(x), x, np.where(np.isfinite(lo), lo, hi)), lo, hi)
    return mu + sd * np.where(flip, -x, x)


#: Gibbs sweeps per round and rounds (re-estimating the correlations) of :func:`_copula_positions`
COPULA_SWEEPS = 4
COPULA_ROUNDS = 3


def _copula_positions(codecs: list[ColumnCodec], codes: np.ndarray, rng: np.random.Generator) -> dict[int, np.ndarray]:
    """Within-bin positions in ``[0, 1)`` of the numeric columns, jointly drawn (free post-processing
    of the synthetic codes; nothing else is read).

    Each numeric column's codes, in value order, split ``[0, 1]`` into intervals of their share of the
    rows (its empirical CDF); a latent standard normal ``z`` per cell lies in the normal image of its
    row's interval (missing: unconstrained). The latent correlation matrix is estimated from the
    codes (the correlation of their normal scores), then refined: Gibbs sweeps draw each ``z`` from
    its conditional given the row's other columns, truncated to its interval, and the correlation is
    re-estimated from the draws (a stochastic EM for the latent Gaussian copula). A row's position in
    its bin is where ``Φ(z)`` falls inside its interval; the marginal of the codes is untouched.
    Returns ``{column index: positions}`` for columns with bins (none when fewer than two)."""
    from scipy.special import ndtr, ndtri

    cols = [j for j, c in enumerate(codecs) if c.edges is not None]
    if len(cols) < 2:
        return {}
    n = codes.shape[0]
    lo_p, hi_p, a, b = [], [], [], []
    for j in cols:
        c = codecs[j]
        code = codes[:, j]
        miss = code >= c.n_main
        order = _code_order(c)
        rank = np.empty(c.n_main, dtype=np.int64)
        rank[order] = np.arange(c.n_main)
        share = np.bincount(rank[np.where(miss, 0, code)][~miss], minlength=c.n_main) / max(int((~miss).sum()), 1)
        cum = np.r_[0.0, np.cumsum(share)]
        r = rank[np.where(miss, 0, code)]
        lo, hi = np.where(miss, 0.0, cum[r]), np.where(miss, 1.0, np.minimum(cum[r + 1], 1.0))
        lo_p.append(lo)
        hi_p.append(hi)
        a.append(ndtri(lo))
        b.append(ndtri(hi))
    lo_p, hi_p, a, b = (np.column_stack(x) for x in (lo_p, hi_p, a, b))
    z = np.nan_to_num(ndtri((lo_p + hi_p) / 2), nan=0.0)  # normal scores (missing: 0, the mean)
    m = len(cols)
    for _ in range(COPULA_ROUNDS):
        with np.errstate(invalid="ignore", divide="ignore"):  # a constant column: no correlation (0)
            corr = np.nan_to_num(np.corrcoef(z, rowvar=False), nan=0.0)
        np.fill_diagonal(corr, 1.0)
        w, v = np.linalg.eigh(corr)  # nearest positive definite, unit diagonal
        corr = (v * np.maximum(w, 1e-3)) @ v.T
        d = np.sqrt(np.diag(corr))
        prec = np.linalg.inv(corr / np.outer(d, d))
        for _ in range(COPULA_SWEEPS):
            for k in range(m):
                mu = -(z @ prec[k] - prec[k, k] * z[:, k]) / prec[k, k]
                z[:, k] = _truncnorm(mu, 1.0 / math.sqrt(prec[k, k]), a[:, k], b[:, k], rng)
    width = hi_p - lo_p
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(width > 0, (ndtr(z) - lo_p) / np.where(width > 0, width, 1.0), 0.5)
    u = np.clip(np.nan_to_num(u, nan=0.5), 0.0, np.nextafter(1.0, 0.0))
    return {j: u[:, i] for i, j in enumerate(cols)}


def _round_within(v: np.ndarray, left, right, decimals: int | None, where: np.ndarray) -> np.ndarray:
    """``v`` rounded to ``decimals`` places where ``where``, staying inside each row's bin
    ``[left, right)``: the nearest such decimal, else the next one inward, else ``v`` as it was (a bin
    narrower than the step holds no such decimal). ``None``: unchanged."""
    if decimals is None or not where.any():
        return v
    step = 10.0 ** -decimals
    left = np.broadcast_to(left, v.shape)
    right = np.broadcast_to(right, v.shape)
    inside = lambda r: (r >= left) & ((r < right) | (right <= left) | (r == v))  # noqa: E731
    r = np.round(v, decimals)
    bad = ~inside(r)
    up, down = np.ceil(v / step) * step, np.floor(v / step) * step
    r = np.where(bad & inside(up), up, r)
    bad = ~inside(r)
    r = np.where(bad & inside(down), down, r)
    r = np.where(inside(r), np.round(r, decimals), v)
    return np.where(where, r, v)


def _decode_column(c: ColumnCodec, code: np.ndarray, rng: np.random.Generator, midpoint: bool,
                   exact: np.ndarray | None = None, pos: np.ndarray | None = None) -> pd.Series:
    """One column's values from its codes; ``pos``: the rows' positions within their bins in
    ``[0, 1)`` (monotone: a larger position never gives a smaller value; default independent uniform)."""
    spec = c.spec
    n = len(code)
    miss = code == c.missing_code if c.missing_code is not None else np.zeros(n, dtype=bool)
    ok = ~miss
    j = code[ok]
    if c.edges is not None and not midpoint:
        pos = rng.random(len(j)) if pos is None else np.asarray(pos, dtype=float)[ok]
    if c.edges is not None:
        n_bins = len(c.edges) - 1
        is_atom = j >= n_bins
        jb = np.minimum(j, n_bins - 1)
        left, right = c.edges[jb], c.edges[jb + 1]
        if exact is not None:  # given values (conditions), kept as they are
            v = np.asarray(exact, dtype=float)[ok]
            if spec.lattice:
                v = np.round(v)
        if c.leaf_edges is not None and not midpoint and exact is None:  # a leaf in proportion to its noisy count
            leaf = np.searchsorted(c.leaf_cum, jb + pos, side="right")
            leaf = np.minimum(leaf, len(c.leaf_edges) - 2)
            left, right = c.leaf_edges[leaf], c.leaf_edges[leaf + 1]
            prev = np.where(leaf > 0, c.leaf_cum[np.maximum(leaf - 1, 0)], 0.0)
            span = c.leaf_cum[leaf] - prev  # the rest of the position places the value inside the leaf
            pos = np.clip((jb + pos - prev) / np.where(span > 0, span, 1.0), 0.0, np.nextafter(1.0, 0.0))
            if not spec.lattice:  # a draw from the leaf's (possibly decaying) density
                sc = c.leaf_scale[leaf]
                w = right - left
                u = pos
                a = np.abs(sc)
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    off = np.where(np.isfinite(a), -a * np.log1p(u * np.expm1(-w / a)), u * w)
                off = np.clip(np.nan_to_num(off, nan=0.0), 0.0, w)
                v = np.where(sc < 0, right - off, left + off)
                v = _round_within(v, left, right, spec.decimals, ~is_atom)
                v[is_atom] = c.atoms[j[is_atom] - n_bins]
                out = np.full(n, np.nan)
                out[ok] = np.clip(v, spec.lo, spec.hi)
                return pd.Series(out, dtype="float64")
        if spec.lattice:  # bin j holds the integers left .. right-1, less the atoms (codes of their own)
            if exact is None:
                v = _free_integers(left, right, c.atoms, None if midpoint else pos)
            if is_atom.any() and exact is None:
                v[is_atom] = c.atoms[j[is_atom] - n_bins]
            v = v.astype(np.int64)
            if spec.type == "integer":
                if spec.missing:
                    arr = pd.array(np.zeros(n, dtype=np.int64), dtype="Int64")
                    arr[ok] = v
                    arr[miss] = pd.NA
                    return pd.Series(arr)
                return pd.Series(v, dtype="int64")
            ns = np.full(n, np.datetime64("NaT"), dtype="datetime64[ns]")
            ns[ok] = (v * DATETIME_UNITS[spec.unit]).astype("datetime64[ns]")
            return pd.Series(ns, dtype="datetime64[ns]")
        if exact is None:
            v = (left + right) / 2 if midpoint else left + pos * (right - left)
            v = _round_within(v, left, right, spec.decimals, ~is_atom)
        if is_atom.any() and exact is None:
            v[is_atom] = c.atoms[j[is_atom] - n_bins]
        out = np.full(n, np.nan)
        out[ok] = np.clip(v, spec.lo, spec.hi)
        return pd.Series(out, dtype="float64")
    base = np.empty(len(j), dtype=np.int64)
    kept = j < len(c.kept)
    base[kept] = c.kept[j[kept]]
    grouped = ~kept
    if exact is not None:
        base = np.asarray(exact, dtype=np.int64)[ok]
    elif grouped.any():
        base[grouped] = c.group[rng.integers(0, len(c.group), int(grouped.sum()))]
    labels = np.empty(len(c.labels()), dtype=object)
    labels[:] = c.labels()
    obj = np.full(n, None, dtype=object)
    obj[ok] = labels[base]
    dtype = spec.dtype()
    if dtype in ("int64", "bool", "float64") and not miss.any():
        return pd.Series(obj.tolist(), dtype=dtype)
    return pd.Series(obj, dtype=dtype)
