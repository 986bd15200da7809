"""Private data: integer-coded tables, reading files, and the :class:`MarginalSource` seam."""

from .dataset import DataError, Dataset, read_table
from .source import ColumnCounts, MappedSource, MarginalSource, MemorySource, PrecomputedSource

__all__ = ["ColumnCounts", "DataError", "Dataset", "MappedSource", "MarginalSource", "MemorySource",
           "PrecomputedSource", "read_table"]
