"""Generators: turn noisy marginals into records without a graphical model.

Imported lazily so that ``privmarg`` works without torch; ``PrivPGDGenerator`` and the
constraints need ``pip install privmarg[torch]``.
"""

from __future__ import annotations

__all__ = ["PrivPGDGenerator", "ThresholdConstraint", "PenaltyConstraint", "smoothed_threshold"]

_WHERE = {
    "PrivPGDGenerator": ".privpgd",
    "ThresholdConstraint": ".constraints",
    "PenaltyConstraint": ".constraints",
    "smoothed_threshold": ".constraints",
}


def __getattr__(name: str):
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
