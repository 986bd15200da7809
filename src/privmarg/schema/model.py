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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core import Domain, strict_json
from .column import (BINNINGS, DEFAULT_ADAPTIVE_BINS, DEFAULT_BINS, DEFAULT_MAX_VALUES, EXACT_MAX_VALUES,
                     HEAVY_MAX_ATOMS, MAX_COLUMN_VALUES, MAX_MARGINAL_CELLS, TYPES, ColumnSpec, SchemaError,
                     _parse_column)
from .rules import Rule, check_rules, parse_rule
from .values import value_key

__all__ = [
    "TYPES", "BINNINGS", "DEFAULT_BINS", "DEFAULT_ADAPTIVE_BINS", "EXACT_MAX_VALUES", "HEAVY_MAX_ATOMS",
    "MAX_COLUMN_VALUES", "MAX_MARGINAL_CELLS",
    "SchemaError", "ColumnSpec", "Schema", "load_schema", "as_schema", "value_key", "DEFAULT_MAX_VALUES",
]


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
