"""The graphical-model engine: measurements in, a fitted model (marginals, records) out."""

from .estimate import FitInfo, StructuralZero, estimate, estimate_total, load_zeros, loss_of
from .graphical_model import GraphicalModel
from .junction_tree import JunctionTree, model_size_mb
from .measurement import Measurement

__all__ = [
    "FitInfo", "GraphicalModel", "JunctionTree", "Measurement", "StructuralZero",
    "estimate", "estimate_total", "load_zeros", "loss_of", "model_size_mb",
]
