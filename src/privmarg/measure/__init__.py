"""Where private answers meet noise: :class:`MeasurementSession`."""

from .session import MeasurementSession

__all__ = ["MeasurementSession"]
