"""Utility metrics of synthetic tables."""

from .metrics import workload_error

__all__ = ["workload_error"]
