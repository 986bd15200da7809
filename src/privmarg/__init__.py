"""privmarg: differentially private synthetic tables from noisy marginals."""

from .dataset import DataError, Dataset
from .domain import Domain
from .estimation import GraphicalModel, Measurement, StructuralZero, estimate, model_size_mb
from .mechanisms import AIM, JAM, MST, MWEM, Independent, PrivPGD, WithGenerator
from .preprocess import TableEncoder
from .privacy import Accountant, BudgetExceededError
from .schema import Schema
from . import datasets  # the bundled example tables: privmarg.datasets.load("adult")

__version__ = "0.1.0"

__all__ = [
    "AIM", "JAM", "MST", "MWEM", "Accountant", "BudgetExceededError", "DataError", "Dataset", "Domain",
    "GraphicalModel", "Independent", "PrivPGD", "Schema", "TableEncoder", "WithGenerator", "Measurement", "StructuralZero", "estimate", "model_size_mb",
]
