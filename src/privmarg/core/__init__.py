"""Pure value types: domains, factors, measurements, workloads, structural zeros (no private data)."""

from .domain import Domain
from .factor import Factor
from .measurement import Measurement, grouping_query, is_grouping, query_groups
from .workload import Workload, all_kway, downward_closure, parse_workload
from .zeros import StructuralZero, load_zeros

__all__ = ["Domain", "Factor", "Measurement", "StructuralZero", "Workload", "all_kway", "downward_closure",
           "grouping_query", "is_grouping", "load_zeros", "parse_workload", "query_groups"]
