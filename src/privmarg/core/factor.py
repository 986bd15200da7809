"""``Factor``: a table of numbers over some attributes, the one value type for marginals.

A marginal of a dataset, of a fitted model or a noisy measurement is a ``Factor``: ``values`` has
one axis per attribute of ``domain`` (in that order, which need not be the full domain's). Summing
out, reordering and broadcasting go through its methods, so no module reorders flat arrays by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .domain import Domain
from .sums import sum_out


class Factor:
    """``values[i_1, ..., i_k]`` for the attributes ``domain.attrs`` (any order), ``domain.shape`` cells."""

    __slots__ = ("domain", "values")

    def __init__(self, domain: Domain, values: np.ndarray):
        values = np.asarray(values)
        if values.size != domain.size():
            raise ValueError(f"factor over {domain.attrs}: expected {domain.size()} cells, got {values.size}")
        self.domain = domain
        self.values = values.reshape(domain.shape)

    @classmethod
    def from_flat(cls, domain: Domain, attrs: Sequence[str], flat: np.ndarray) -> "Factor":
        """A flat, row-major table laid out over ``attrs`` (their order) of the full ``domain``."""
        attrs = tuple(attrs)
        if len(set(attrs)) != len(attrs):
            raise ValueError(f"repeated attribute in {attrs}")
        unknown = [a for a in attrs if a not in domain]
        if unknown:
            raise KeyError(f"unknown attribute(s): {sorted(unknown)}")
        return cls(Domain(attrs, domain.sizes(attrs)), flat)

    @classmethod
    def zeros(cls, domain: Domain, attrs: Sequence[str], dtype=float) -> "Factor":
        attrs = tuple(attrs)
        return cls(Domain(attrs, domain.sizes(attrs)), np.zeros(domain.sizes(attrs), dtype=dtype))

    @property
    def attrs(self) -> tuple[str, ...]:
        return self.domain.attrs

    @property
    def flat(self) -> np.ndarray:
        """The values, flat and contiguous, row-major over :attr:`attrs`."""
        return np.ascontiguousarray(self.values).ravel()

    def total(self) -> float:
        return float(self.values.sum())

    def transpose(self, attrs: Sequence[str]) -> "Factor":
        """The same table with its axes in the order ``attrs`` (a permutation of :attr:`attrs`)."""
        attrs = tuple(attrs)
        if sorted(attrs) != sorted(self.attrs):
            raise ValueError(f"transpose: {attrs} is not a permutation of {self.attrs}")
        if attrs == self.attrs:
            return self
        perm = [self.attrs.index(a) for a in attrs]
        return Factor(Domain(attrs, self.domain.sizes(attrs)), np.ascontiguousarray(self.values.transpose(perm)))

    def project(self, attrs: Iterable[str]) -> "Factor":
        """Sum out every other attribute; axes in the order ``attrs``."""
        attrs = tuple(attrs)
        missing = [a for a in attrs if a not in self.domain]
        if missing:
            raise ValueError(f"cannot project a factor over {self.attrs} onto {attrs}")
        keep = set(attrs)
        drop = tuple(i for i, a in enumerate(self.attrs) if a not in keep)
        kept = tuple(a for a in self.attrs if a in keep)
        out = Factor(Domain(kept, self.domain.sizes(kept)), sum_out(self.values, drop))
        return out.transpose(attrs)

    def expand(self, domain: Domain) -> "Factor":
        """Broadcast (repeat) over the attributes of ``domain`` (a superset), in its order."""
        missing = [a for a in self.attrs if a not in domain]
        if missing:
            raise ValueError(f"cannot expand a factor over {self.attrs} to {domain.attrs}")
        own = self.transpose([a for a in domain.attrs if a in self.domain])
        shape = [domain[a] if a in self.domain else 1 for a in domain.attrs]
        return Factor(domain, np.broadcast_to(own.values.reshape(shape), domain.shape))

    def _binary(self, other, op) -> "Factor":
        if isinstance(other, Factor):
            if other.attrs == self.attrs:
                return Factor(self.domain, op(self.values, other.values))
            attrs = self.attrs + tuple(a for a in other.attrs if a not in self.domain)
            sizes = self.domain.sizes(self.attrs) + tuple(other.domain[a] for a in attrs[len(self.attrs):])
            dom = Domain(attrs, sizes)
            return Factor(dom, op(self.expand(dom).values, other.expand(dom).values))
        return Factor(self.domain, op(self.values, other))

    def __add__(self, other):
        return self._binary(other, np.add)

    def __sub__(self, other):
        return self._binary(other, np.subtract)

    def __mul__(self, other):
        return self._binary(other, np.multiply)

    def __truediv__(self, other):
        return self._binary(other, np.divide)

    __radd__ = __add__
    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"Factor({', '.join(f'{a}: {s}' for a, s in zip(self.attrs, self.domain.shape))})"
