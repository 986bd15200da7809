"""Structural zeros: value combinations that cannot occur (declared publicly, never learned)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .domain import Domain
from .factor import Factor


@dataclass(frozen=True, eq=False)
class StructuralZero:
    """Cells of the marginal on ``attrs`` that are impossible (``mask`` True = impossible)."""

    attrs: tuple[str, ...]
    mask: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "attrs", tuple(self.attrs))
        object.__setattr__(self, "mask", np.asarray(self.mask, dtype=bool))

    @classmethod
    def from_cells(cls, domain: Domain, attrs: Sequence[str], cells: Iterable[Sequence[int]]) -> "StructuralZero":
        """Forbid the listed value combinations (one tuple of codes per cell, in ``attrs`` order)."""
        attrs = tuple(attrs)
        mask = np.zeros(domain.sizes(attrs), dtype=bool)
        cells = np.asarray(list(cells), dtype=np.int64).reshape(-1, len(attrs))
        for j, a in enumerate(attrs):
            if cells.size and (cells[:, j].min() < 0 or cells[:, j].max() >= domain[a]):
                raise ValueError(f"structural zero on {attrs}: code outside the domain of {a!r}")
        mask[tuple(cells.T)] = True
        return cls(attrs, mask)

    @classmethod
    def from_allowed(cls, domain: Domain, attrs: Sequence[str], allowed: Iterable[Sequence[int]]) -> "StructuralZero":
        """Forbid every value combination except the listed ones."""
        z = cls.from_cells(domain, attrs, allowed)
        return cls(z.attrs, ~z.mask)

    @classmethod
    def from_predicate(cls, domain: Domain, attrs: Sequence[str], impossible) -> "StructuralZero":
        """Forbid the cells where ``impossible(*code_grids)`` is True (vectorised over the grid)."""
        attrs = tuple(attrs)
        grids = np.meshgrid(*[np.arange(domain[a]) for a in attrs], indexing="ij")
        return cls(attrs, np.broadcast_to(np.asarray(impossible(*grids), dtype=bool), grids[0].shape).copy())

    def factor(self, domain: Domain) -> Factor:
        """The mask as a boolean :class:`Factor` over ``attrs`` (True = impossible)."""
        return Factor.from_flat(domain, self.attrs, self.mask)

    @property
    def cells(self) -> int:
        return int(self.mask.sum())

    def violations(self, codes: np.ndarray, domain: Domain) -> int:
        """Number of records (rows of integer codes over ``domain``) that fall in a forbidden cell."""
        cols = [codes[:, domain.attrs.index(a)] for a in self.attrs]
        return int(self.mask.reshape(domain.sizes(self.attrs))[tuple(cols)].sum())


def load_zeros(spec, domain: Domain) -> list[StructuralZero]:
    """Structural zeros from a JSON file or list: ``[{"attrs": [...], "cells": [[...], ...]}``
    or ``{"attrs": [...], "allowed": [[...], ...]}``, ...]`` (codes in ``attrs`` order)."""
    if isinstance(spec, (str, Path)):
        with open(spec) as fh:
            spec = json.load(fh)
    out = []
    for item in spec:
        attrs = tuple(item["attrs"])
        domain.canonical(attrs)
        if "cells" in item:
            out.append(StructuralZero.from_cells(domain, attrs, item["cells"]))
        elif "allowed" in item:
            out.append(StructuralZero.from_allowed(domain, attrs, item["allowed"]))
        else:
            raise ValueError(f"structural zero on {attrs}: give 'cells' or 'allowed'")
    return out
