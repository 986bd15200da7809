"""Private data: integer-coded tables, reading files, and the :class:`MarginalSource` seam (in memory,
precomputed, or counted by SQL where the data lives: :class:`DuckDBSource` over a file, optional ``duckdb``
package; :class:`SparkSource` over a Spark DataFrame or path, optional ``pyspark`` package)."""

from .dataset import DataError, Dataset, read_table
from .duckdb_source import DuckDBSource
from .spark_source import SparkSource
from .source import (ColumnCounts, ColumnSource, MappedSource, MarginalSource, MemorySource, PrecomputedSource,
                     RecordSource)

__all__ = ["ColumnCounts", "ColumnSource", "DataError", "Dataset", "DuckDBSource", "MappedSource", "MarginalSource", "MemorySource",
           "PrecomputedSource", "RecordSource", "SparkSource", "read_table"]
