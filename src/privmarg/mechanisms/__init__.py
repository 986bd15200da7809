"""End-to-end mechanisms: data in, a fitted model and synthetic records out."""

from .aim import AIM
from .base import Mechanism
from .independent import Independent
from .jam import JAM
from .mst import MST
from .mwem import MWEM
from .privpgd import PrivPGD, WithGenerator

MECHANISMS = {"aim": AIM, "mst": MST, "mwem": MWEM, "independent": Independent, "privpgd": PrivPGD,
              "jam": JAM}

__all__ = ["AIM", "JAM", "MECHANISMS", "MST", "MWEM", "Independent", "Mechanism", "PrivPGD", "WithGenerator"]
