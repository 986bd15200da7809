"""Public schemas for raw tables (issue #6): types, bounds and category lists known without the data."""

from .draft import DRAFT_WARNING, draft_schema
from .model import (
    BINNINGS,
    DEFAULT_ADAPTIVE_BINS,
    DEFAULT_BINS,
    EXACT_MAX_VALUES,
    HEAVY_MAX_ATOMS,
    MAX_COLUMN_VALUES,
    MAX_MARGINAL_CELLS,
    TYPES,
    ColumnSpec,
    Schema,
    SchemaError,
    as_schema,
    load_schema,
    value_key,
)

__all__ = [
    "BINNINGS", "DEFAULT_ADAPTIVE_BINS", "DEFAULT_BINS", "DRAFT_WARNING", "EXACT_MAX_VALUES", "HEAVY_MAX_ATOMS",
    "MAX_COLUMN_VALUES", "MAX_MARGINAL_CELLS", "TYPES",
    "ColumnSpec", "Schema", "SchemaError", "as_schema", "draft_schema", "load_schema", "value_key",
]
