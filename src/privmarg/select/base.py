"""What a selector is: it spends a budget through a session and leaves measurements behind.

A selector decides which marginals to measure and how much noise each gets; it reads private data
only through its :class:`~privmarg.measure.MeasurementSession` (scores go into a charged
selection, answers into a charged measurement). What it returns, a :class:`Selection`, is released
information only, which any :class:`~privmarg.generate.Generator` can turn into a model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..core import Domain, Measurement, StructuralZero
from ..data import MarginalSource
from ..measure import MeasurementSession

Clique = tuple[str, ...]


@dataclass
class Context:
    """What a selector may know besides the session: its budget ``rho`` (zCDP), the public record
    count ``total`` (None under add/remove), public structural ``zeros``, a ``public`` source (free
    to read: JAM's proxy data) and a ``progress(message)`` callback."""

    rho: float
    total: float | None = None
    zeros: list[StructuralZero] = field(default_factory=list)
    public: MarginalSource | None = None
    progress: Callable[[str], None] = lambda msg: None


@dataclass
class Selection:
    """A selector's output. ``measurements`` (over ``domain``) feed the generator; ``model`` is the
    model-in-the-loop's last fit (a warm start, or None); ``lift`` maps a model over ``domain`` to
    the data's domain (compression); ``released`` lists what was released, for reports;
    ``hints`` are keyword arguments for a generator that can use them (PrivPGD's released
    constraint); ``choose(session, model)``, when set, makes the release from the fitted model
    with a last private choice charged to the session (JAM's blend with the public records)."""

    measurements: list[Measurement]
    domain: Domain
    model: Any = None
    lift: Callable[[Any], Any] | None = None
    released: list[Measurement] | None = None
    extra: dict = field(default_factory=dict)
    hints: dict = field(default_factory=dict)
    choose: Callable[[Any, Any], Any] | None = None


@runtime_checkable
class Selector(Protocol):
    """``name``: registry name. ``supporting_cliques(domain)``: every marginal it may ever read
    (a precomputed source holding them can replace the data). ``run`` spends ``ctx.rho``."""

    name: str

    def supporting_cliques(self, domain: Domain) -> list[Clique]: ...

    def run(self, session: MeasurementSession, ctx: Context) -> Selection: ...


def check_fraction(name: str, x: float) -> float:
    if not 0 < x < 1:
        raise ValueError(f"{name} must be in (0, 1), got {x}")
    return float(x)


def check_positive(name: str, x: Any) -> float:
    """A positive cap (``inf``: none); NaN, which every comparison would let through, is refused."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive number, got {x!r}") from None
    if not v > 0:
        raise ValueError(f"{name} must be a positive number, got {x!r}")
    return v


def check_rounds(name: str, x: Any, allow_none: bool = True) -> int | None:
    if x is None and allow_none:
        return None
    if isinstance(x, bool) or not isinstance(x, int) or x < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {x!r}")
    return int(x)


def default_loop(**kw):
    """The default model in the loop: a graphical model (imported late: generate sits beside select)."""
    from ..generate.pgm import PGM

    return PGM(**{"iters": 1000, "tol": 1e-7, **kw})


def one_ways(domain: Domain) -> list[Clique]:
    return [(a,) for a in domain.attrs]


def measured_cliques(session: MeasurementSession, zeros: Sequence[StructuralZero]) -> list[Clique]:
    return [m.attrs for m in session.measurements] + [z.attrs for z in zeros]
