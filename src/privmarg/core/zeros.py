"""Structural zeros: value combinations that cannot occur (declared publicly, never learned)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .domain import Domain
from .factor import Factor
from . import strict_json


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
    where = "structural zeros"
    if isinstance(spec, (str, Path)):
        where = f"structural zeros {spec}"
        try:
            with open(spec) as fh:
                spec = strict_json.load(fh)
        except ValueError as e:
            raise ValueError(f"{where}: not valid JSON: {e}") from None
    if not isinstance(spec, list):
        raise ValueError(f"{where}: must be a list of {{\"attrs\": [...], \"cells\" or \"allowed\": [[...], ...]}}")
    out = []
    for i, item in enumerate(spec):
        attrs = item.get("attrs") if isinstance(item, dict) else None
        if not isinstance(attrs, list) or not attrs or not all(isinstance(a, str) for a in attrs):
            raise ValueError(f"{where}, entry {i + 1}: expected {{\"attrs\": [names...], \"cells\" or "
                             "\"allowed\": [[codes...], ...]}")
        attrs = tuple(attrs)
        domain.canonical(attrs)
        cells = item.get("cells", item.get("allowed"))
        if not isinstance(cells, list) or not all(
                isinstance(c, list) and len(c) == len(attrs)
                and all(isinstance(v, int) and not isinstance(v, bool) for v in c) for c in cells):
            raise ValueError(f"{where}, entry {i + 1}: 'cells' or 'allowed' must be a list of "
                             f"{len(attrs)}-code lists of integers (codes in attrs order)")
        if "cells" in item:
            out.append(StructuralZero.from_cells(domain, attrs, item["cells"]))
        elif "allowed" in item:
            out.append(StructuralZero.from_allowed(domain, attrs, item["allowed"]))
        else:
            raise ValueError(f"structural zero on {attrs}: give 'cells' or 'allowed'")
    check_zeros(out, domain)
    return out


#: joint checks of connected structural zeros look at value combinations up to this many cells
JOINT_CHECK_CELLS = 2**22


def check_zeros(zeros: Sequence[StructuralZero], domain: Domain) -> None:
    """Raise ``ValueError`` when the structural zeros forbid every record: one zero forbids all of
    its cells, or zeros sharing attributes forbid every combination together (checked exactly
    when their attributes span at most :data:`JOINT_CHECK_CELLS` cells). Public: no data read."""
    for z in zeros:
        if z.mask.size and z.mask.all():
            raise ValueError(f"structural zeros on ({', '.join(z.attrs)}) forbid every cell: no record "
                             "could exist (list the impossible cells, or the allowed ones)")
    groups: list[tuple[set[str], list[StructuralZero]]] = []
    for z in zeros:  # connected components of zeros sharing attributes
        attrs, members = set(z.attrs), [z]
        for g in [g for g in groups if g[0] & attrs]:
            groups.remove(g)
            attrs |= g[0]
            members += g[1]
        groups.append((attrs, members))
    for attrs, members in groups:
        if len(members) < 2:
            continue
        names = domain.canonical(attrs)
        if domain.size(names) > JOINT_CHECK_CELLS:
            continue
        allowed = np.ones(domain.sizes(names), dtype=bool)
        for z in members:
            allowed &= ~z.factor(domain).expand(domain.project(names)).values.astype(bool)
        if not allowed.any():
            raise ValueError(f"structural zeros on ({', '.join(names)}) together forbid every combination "
                             "of values: no record could exist")
