"""Private data: integer-coded tables, reading files, and the :class:`MarginalSource` seam (in memory,
precomputed, or counted by DuckDB over a file: :class:`DuckDBSource`, optional ``duckdb`` package)."""

from .dataset import DataError, Dataset, read_table
from .duckdb_source import DuckDBSource
from .source import ColumnCounts, MappedSource, MarginalSource, MemorySource, PrecomputedSource

__all__ = ["ColumnCounts", "DataError", "Dataset", "DuckDBSource", "MappedSource", "MarginalSource", "MemorySource",
           "PrecomputedSource", "read_table"]
