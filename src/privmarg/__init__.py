"""privmarg: differentially private synthetic tables from noisy marginals.

Select which marginals to measure (:mod:`privmarg.select`), measure them under one zCDP accountant
(:mod:`privmarg.measure`, :mod:`privmarg.privacy`), generate records from them
(:mod:`privmarg.generate`); :class:`Synthesizer` puts the three together and the presets (``AIM``,
``MST``, ...) are the papers' methods. :mod:`privmarg.registry` names them all.
"""

from ._version import __version__
from .core import Domain, Factor, Measurement, StructuralZero
from .data import DataError, Dataset, MarginalSource, MemorySource, PrecomputedSource
from .generate.pgm import PGM, GraphicalModel, estimate, model_size_mb
from .measure import MeasurementSession
from .preprocess import TableEncoder
from .presets import AIM, DPMERF, GEM, GSD, JAM, MST, MWEM, GEMPub, Independent, PMWPub, PrivPGD, TabDDPM
from .presets import RAP, Gaussian, PrivBayes, PrivMRF, PrivSyn, RAPpp
from .privacy import Accountant, BudgetExceededError
from .select.aim_plan import MarginalPlan, Plan, plan_aim
from .schema import Schema
from . import registry
from .synth import Synthesizer
from .persist import SavedSynthesizer, load
from . import datasets  # the bundled example tables: privmarg.datasets.load("adult")



def __getattr__(name: str):
    # torch-based generator and presets made from registry entries load on first use
    if name == "PrivPGDGenerator":
        from .generate.privpgd.privpgd import PrivPGDGenerator

        return PrivPGDGenerator
    raise AttributeError(f"module 'privmarg' has no attribute {name!r}")


__all__ = [
    "AIM", "DPMERF", "GEM", "GEMPub", "GSD", "JAM", "PMWPub", "MST", "MWEM", "PGM", "Accountant", "BudgetExceededError", "DataError", "Dataset", "Domain",
    "Factor", "GraphicalModel", "Independent", "MarginalPlan", "MarginalSource", "Measurement", "MeasurementSession",
    "MemorySource", "Plan", "PrecomputedSource", "PrivPGD", "PrivPGDGenerator", "Schema", "StructuralZero",
    "SavedSynthesizer", "Synthesizer", "TabDDPM", "TableEncoder", "datasets", "estimate", "load", "model_size_mb",
    "plan_aim",
    "registry",
    "RAP", "RAPpp",
    "PrivBayes", "PrivSyn", "Gaussian", "PrivMRF",
]
