"""Discrete domains: attribute names and their numbers of values.

Every marginal in privmarg is laid out over its attributes in *canonical order* (the order of the
domain), row-major, so that data marginals and model marginals line up without bookkeeping.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from . import strict_json



class Domain:
    """An ordered set of attributes, attribute ``i`` taking values ``0 .. shape[i]-1``."""

    def __init__(self, attrs: Sequence[str], shape: Sequence[int]):
        attrs = tuple(str(a) for a in attrs)
        shape = tuple(int(s) for s in shape)
        if len(attrs) != len(shape):
            raise ValueError("attrs and shape must have the same length")
        if len(set(attrs)) != len(attrs):
            raise ValueError("attribute names must be unique")
        for a, s in zip(attrs, shape):
            if s < 1:
                raise ValueError(f"attribute {a!r} must have at least one value, got {s}")
        self.attrs = attrs
        self.shape = shape
        self._index = {a: i for i, a in enumerate(attrs)}

    # construction -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, sizes: Mapping[str, int]) -> "Domain":
        return cls(list(sizes.keys()), list(sizes.values()))

    @classmethod
    def from_json(cls, path: str | Path) -> "Domain":
        """Read a domain file of the form ``{"column": number_of_values, ...}``."""
        with open(path) as fh:
            sizes = strict_json.load(fh)
        if not isinstance(sizes, dict) or not sizes:
            raise ValueError(f"{path}: a domain file must be a non-empty JSON object of column sizes")
        for k, v in sizes.items():
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{path}: size of column {k!r} must be a positive integer, got {v!r}")
        return cls.from_dict(sizes)

    def to_dict(self) -> dict[str, int]:
        return dict(zip(self.attrs, self.shape))

    # queries -------------------------------------------------------------------------------
    def canonical(self, attrs: Iterable[str]) -> tuple[str, ...]:
        """The attributes in domain order, duplicates removed; unknown names are an error."""
        attrs = set(attrs)
        unknown = attrs - set(self.attrs)
        if unknown:
            raise KeyError(f"unknown attribute(s): {sorted(unknown)}")
        return tuple(a for a in self.attrs if a in attrs)

    def project(self, attrs: Iterable[str]) -> "Domain":
        attrs = self.canonical(attrs)
        return Domain(attrs, [self.shape[self._index[a]] for a in attrs])

    def axes(self, attrs: Iterable[str]) -> tuple[int, ...]:
        return tuple(self._index[a] for a in attrs)

    def size(self, attrs: Iterable[str] | None = None) -> int:
        """Number of cells of the marginal on ``attrs`` (whole domain if None)."""
        if attrs is None:
            return math.prod(self.shape)
        return math.prod(self.shape[self._index[a]] for a in attrs)

    def sizes(self, attrs: Iterable[str]) -> tuple[int, ...]:
        return tuple(self.shape[self._index[a]] for a in attrs)

    def __getitem__(self, attr: str) -> int:
        return self.shape[self._index[attr]]

    def __contains__(self, attr: object) -> bool:
        return attr in self._index

    def __iter__(self):
        return iter(self.attrs)

    def __len__(self) -> int:
        return len(self.attrs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Domain) and self.attrs == other.attrs and self.shape == other.shape

    def __hash__(self) -> int:
        return hash((self.attrs, self.shape))

    def __repr__(self) -> str:
        inner = ", ".join(f"{a}: {s}" for a, s in zip(self.attrs, self.shape))
        return f"Domain({inner})"
