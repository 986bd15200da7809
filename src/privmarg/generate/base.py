"""What a generator is: measurements in, a :class:`Model` that answers marginals and samples out.

Generators are post-processing: they see only released measurements (and public facts: the domain,
structural zeros, the record count when it is public), never the private data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..core import Domain, Measurement, StructuralZero

Progress = Callable[[str], None]


@runtime_checkable
class Model(Protocol):
    """A fitted synthetic-data model over ``domain`` with ``total`` records."""

    domain: Domain
    total: float

    def project(self, attrs: Sequence[str]) -> np.ndarray:
        """The model's marginal on ``attrs`` as counts (flat, row-major in the order given)."""

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` records as integer codes (rows × attributes, domain order)."""

    # to be saved (privmarg.persist), a model also has ``state_kind``, ``to_state`` and the
    # classmethod ``from_state`` of :class:`privmarg.generate.state.SavedState`, and a registry
    # line names its class under that kind


@runtime_checkable
class Generator(Protocol):
    """A recipe that fits a :class:`Model` to measurements. ``name`` is its registry name."""

    name: str

    def generate(self, measurements: Sequence[Measurement], domain: Domain, *,
                 zeros: Sequence[StructuralZero] = (), total: float | None = None, warm: Any = None,
                 seed: np.random.SeedSequence | None = None, progress: Progress | None = None,
                 **extra: Any) -> Model:
        """Fit a model; ``total`` is the public record count or None (estimate it); ``warm`` a model
        of an earlier fit to start from, if the generator can use it."""

    def model_size_mb(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> float | None:
        """Memory of a model over these cliques, or None when the generator has no such limit."""
