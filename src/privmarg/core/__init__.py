"""Pure value types: domains, factors, measurements, workloads, structural zeros (no private data)."""

from .domain import Domain
from .factor import Factor
from .measurement import Measurement
from .workload import Workload, all_kway, downward_closure, parse_workload
from .zeros import StructuralZero, load_zeros

__all__ = ["Domain", "Factor", "Measurement", "StructuralZero", "Workload", "all_kway", "downward_closure",
           "load_zeros", "parse_workload"]
