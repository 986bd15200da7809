"""privmarg: differentially private synthetic tables from noisy marginals."""

from .dataset import DataError, Dataset
from .domain import Domain
from .estimation import GraphicalModel, Measurement, StructuralZero, estimate, model_size_mb

__version__ = "0.1.0"
