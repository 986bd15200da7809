"""The graphical-model engine: measurements in, a fitted model (marginals, records) out."""

from .estimate import DTYPES, METHODS, FitInfo, estimate, estimate_total, loss_of
from .generator import PGM
from .graphical_model import GraphicalModel
from .junction_tree import JunctionTree, model_size_mb

__all__ = ["DTYPES", "METHODS", "PGM", "FitInfo", "GraphicalModel", "JunctionTree", "estimate", "estimate_total",
           "loss_of", "model_size_mb"]
