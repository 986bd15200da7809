"""Selectors: which marginals to measure, and with how much noise (they spend the budget)."""

from .adaptive import AdaptiveSelector
from .aim import AIMSelector
from .base import Context, Selection, Selector
from .compress import Compressed
from .independent import IndependentSelector
from .jam import JAMSelector
from .kway import KWaySelector
from .mst import MSTSelector
from .mwem import MWEMSelector

__all__ = ["AIMSelector", "AdaptiveSelector", "Compressed", "Context", "IndependentSelector", "JAMSelector",
           "KWaySelector", "MSTSelector", "MWEMSelector", "Selection", "Selector"]
