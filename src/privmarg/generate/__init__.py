"""Generators: released measurements in, a model that answers marginals and samples records out."""

from .base import Generator, Model
from .pgm import PGM, GraphicalModel

__all__ = ["PGM", "Generator", "GraphicalModel", "Model"]
