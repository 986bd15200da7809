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

The parts live beside this module: :mod:`.codec` (a column's coding and the input's dtypes),
:mod:`.reading` (raw values checked and read), :mod:`.adaptive` (the default DP binning) and
:mod:`.decoding` (codes back to values).

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
from typing import Any

import numpy as np
import pandas as pd

from ..data import ColumnCounts, DataError, Dataset
from ..measure import MeasurementSession
from ..core import Domain, StructuralZero
from ..privacy import Accountant, BudgetExceededError
from ..schema import ColumnSpec, Schema, as_schema
from .adaptive import _adaptive_codec, _dense_atoms, _fewer_codes_hint
from .binning import bin_index, privtree_edges, resolution_bins, uniform_edges
from .bounds import dp_bounds
from .codec import ColumnCodec, _as_input, _checked_formats, _datetime_text, _jsonable, input_formats
from .decoding import _copula_positions, _decode_column
from .discovery import discover_values
from .merging import RARE_THRESHOLD, rare_categories
from .reading import _codes_from_keys, _prepare_column
from .rules import cut_codec, protected_values, rule_cuts, rule_zeros, violations

__all__ = ["ColumnCodec", "TableEncoder"]


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
        delta_col = 0.0
        if dp_cols:
            delta_col = self._check_dp_inputs(df, accountant, rho_budget, rng, disc)
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
                resolved[col.name], found[col.name] = self._discover(session, accountant, col, rho_col, delta_col,
                                                                     prepared)
            self.schema = Schema([resolved.get(c.name, c) for c in self.schema], source=self.schema.source,
                                 draft=self.schema.draft, rules=self.schema.rules)
            later = [c for c in self.schema if c.dp_step]  # a narrow integer range became exact: free
            rho_col = (rho_budget - (accountant.rho_spent - spent0)) / len(later) if later else 0.0
        if any(c.dp_step for c in self.schema):  # the DP steps read the prepared columns through a session
            session = MeasurementSession(ColumnCounts(prepared, len(df)), accountant, rng, cache=False,
                                         noise=noise)
        specs = {c.name: c for c in self.schema}
        protected = protected_values(self.schema.rules, specs)
        cuts, cut_atoms = rule_cuts(self.schema.rules, specs)
        codecs = [self._numeric_codec(session, col, rho_col, rho_m, delta_col) if col.numeric
                  else self._categorical_codec(session, col, rho_col, protected.get(col.name, ()))
                  for col in self.schema]
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
        rows_seen = [c.rows_estimate for c in codecs if hasattr(c, "rows_estimate")]
        if rows_seen:  # post-processing of DP outputs: free
            self._warn_fine_columns(codecs, max(rows_seen), rho_m)

    def _check_dp_inputs(self, df, accountant, rho_budget: float, rng, disc: list[ColumnSpec]) -> float:
        """Refuse a DP preprocessing that cannot run (before any charge); the δ each column that
        spends some (DP values, heavy float values) gets."""
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
        if n_values and not delta_left > 0:
            raise BudgetExceededError(
                "\"values\": \"dp\" (DP value discovery) spends part of delta, but the accountant has none "
                "reserved for it: give epsilon and delta (not rho), or list the values in the schema")
        return delta_left / n_delta if n_delta and delta_left > 0 else 0.0

    def _discover(self, session, accountant, col: ColumnSpec, rho: float, delta: float,
                  prepared: dict[str, np.ndarray]) -> tuple[ColumnSpec, dict]:
        """DP bounds or values of one column (charged): the column as if the schema had stated them,
        and what was released; ``prepared`` is updated to the resolved column."""
        before = accountant.rho_spent, accountant.delta_spent
        if col.dp_bounds:
            lo, hi, facts = dp_bounds(session, col, rho)
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
                    f"{facts['visible_rows']:.0f} rows to stand out of the noise (the column's noisy row "
                    f"count: {facts['rows']:.0f} ± {facts['rows_sd']:.0f}), so values spread thinly may lie "
                    f"outside the DP bounds [{spec.min}, {spec.max}] (clipped to them): give public bounds or "
                    "a larger budget")
        else:
            values, info = discover_values(session, col, rho, delta)
            if not values:
                self.warnings_.append(
                    f"column {col.name!r}: DP value discovery released no value (one needs a noisy count above "
                    f"about {info['threshold']:.0f} rows), so every row is coded and written as "
                    f"{col.other_label!r}: list the column's values in the schema (public knowledge costs no "
                    "budget) or give a larger budget")
            spec = col.with_values(values)
            prepared[col.name] = _codes_from_keys(spec, prepared[col.name])
            info = {"step": "values", "values": [_jsonable(v) for v in values], **info}
        info["rho"] = accountant.rho_spent - before[0]
        if accountant.delta_spent > before[1]:
            info["approx_delta"] = accountant.delta_spent - before[1]
        return spec, info

    def _numeric_codec(self, session, col: ColumnSpec, rho: float, rho_model: float, delta: float) -> ColumnCodec:
        """A numeric column's bins: adaptive (DP, :mod:`.adaptive`), PrivTree (DP) or uniform (free)."""
        atoms = np.asarray(col.atoms, dtype=float)
        if col.dp_step == "quantiles" or (col.dp_step == "privtree" and col.adaptive):
            delta = delta if col.heavy_threshold else 0.0
            if col.heavy_threshold and not delta > 0:
                self.warnings_.append(
                    f"column {col.name!r}: no heavy-value search (it spends part of delta, and none is "
                    "reserved: give epsilon and delta, not rho, or set \"heavy_values\": false)")
            return _adaptive_codec(session, col, rho, rho_model, len(self.schema), delta)
        if col.dp_step == "privtree":
            edges = privtree_edges(session, col.name, col, rho)
            return ColumnCodec(col, edges=edges, atoms=_dense_atoms(col, edges, atoms), rho=rho)
        return ColumnCodec(col, edges=uniform_edges(col), atoms=atoms)

    def _categorical_codec(self, session, col: ColumnSpec, rho: float, protected) -> ColumnCodec:
        """A categorical/boolean column's codes: every value its own, or rare ones merged (DP)."""
        k = col.base_size
        group = np.array([], dtype=np.int64)
        if col.dp_step == "merge":
            group = rare_categories(session, col.name, k, rho, threshold=self.rare_threshold,
                                    what=f"rare-category counts {col.name}")
            # a category a rule names keeps its own code (public: the rule), so the rule is decided
            group = np.setdiff1d(group, sorted(protected))
        in_group = np.zeros(k, dtype=bool)
        in_group[group] = True
        kept = np.flatnonzero(~in_group)
        base_to_code = np.full(k, len(kept), dtype=np.int64)
        base_to_code[kept] = np.arange(len(kept))
        return ColumnCodec(col, kept=kept, group=group, base_to_code=base_to_code, rho=rho if col.dp_step else 0.0)

    def _warn_fine_columns(self, codecs: list[ColumnCodec], rows: float, rho_model: float) -> None:
        """Warn about columns with more codes than a 2-way marginal resolves (post-processing: free)."""
        self.rows_estimate_ = rows
        self.resolution_bins_ = resolution_bins(rows, len(self.schema), rho_model)
        b = self.resolution_bins_
        for c in codecs:
            if c.n_main > 2 * b and not (c.spec.dp_step in ("privtree", "quantiles") and c.spec.adaptive):
                self.warnings_.append(
                    f"column {c.spec.name!r} has {c.n_main} codes, but with about {rows:.0f} "
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
            fmt = getattr(self, "formats_", {}).get(name)
            # missing values written as the input wrote them: the text a text column held, or NaT in
            # a column the input stored as datetimes (a table-wide null text cannot sit in one)
            if spec.null and not (fmt and "datetime_unit" in fmt):
                if spec.type == "datetime":  # text beside the marker, as a date column is written
                    col = _datetime_text(col, spec.unit)
                col = _as_input(col.astype(object).where(col.notna(), spec.null[0]), self.codecs_[name], fmt,
                                extra=(spec.null[0],))
            else:
                col = _as_input(col, self.codecs_[name], fmt)
            out[name] = col
        return pd.DataFrame(out)

    def parquet_nulls(self) -> dict[str, tuple[str, Any]]:
        """For each column whose decoded missing values are a text (its schema's ``null``), that text
        and the column's dtype: what a Parquet output stores instead, a missing value of that type
        (:func:`~privmarg.io.parquet_ready`). Public: the schema and the input's storage formats."""
        formats = getattr(self, "formats_", {})
        return {c.name: (c.null[0], c.dtype()) for c in self.schema
                if c.null and "datetime_unit" not in formats.get(c.name, {})}

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
