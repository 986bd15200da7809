"""End-to-end mechanisms: data in, a fitted model and synthetic records out."""

from .aim import AIM
from .base import Mechanism
from .independent import Independent
from .mst import MST
from .mwem import MWEM

MECHANISMS = {"aim": AIM, "mst": MST, "mwem": MWEM, "independent": Independent}

__all__ = ["AIM", "MECHANISMS", "MST", "MWEM", "Independent", "Mechanism"]
