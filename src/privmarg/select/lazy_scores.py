"""Scores asked for only where they can win: the adaptive rounds' exponential mechanism, exactly.

A round of AIM or JAM scores every candidate ``r`` by its model error ``‖y_r − M_r(model)‖₁`` (the
private answer against the current model), and scoring is most of such a run's time. A score here
is ``offset + slope·error`` (:class:`ScoreTerms`); a candidate's error in the last round it was
computed, plus how far its marginal can have moved since (:func:`~privmarg.generate.pgm.drift.drift`,
from the models' potentials, per independent part of the model), bounds its error now
(:class:`ErrorBounds`). The exponential mechanism then asks only for the errors whose bound
leaves them a chance against the Gumbel noise already drawn
(:func:`~privmarg.privacy.primitives.exponential_mechanism_lazy`): the pick is the one that scoring
every candidate would give from the same draws, provided the bounds hold, so they are used only on
models whose arithmetic they cover (float64 tables summing to N: AIM's loop, and JAM's, fitted on
float32 tables and recomputed in float64; a model left in float32 scores every candidate,
:func:`~privmarg.generate.pgm.drift.boundable`). The errors are private,
like the scores; which ones were computed shows only in the run's time, never in what is released.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import Domain
from ..generate.pgm.drift import boundable, drift, key_marginals

Clique = tuple[str, ...]


@dataclass
class ScoreTerms:
    """A round's options and their scores as ``offset + slope·error`` of their candidate
    (``candidate[i]`` indexes the round's candidates; ``slope ≥ 0``), and the score sensitivity."""

    options: list
    candidate: np.ndarray
    offset: np.ndarray
    slope: np.ndarray
    sensitivity: float

    def __post_init__(self) -> None:
        self.candidate = np.asarray(self.candidate, dtype=np.intp)
        self.offset = np.asarray(self.offset, dtype=np.float64)
        self.slope = np.asarray(self.slope, dtype=np.float64)
        n = len(self.options)
        if not (self.candidate.shape == self.offset.shape == self.slope.shape == (n,)):
            raise ValueError("one candidate, offset and slope per option expected")
        if (self.slope < 0).any():
            raise ValueError("score slopes must be >= 0 (a score must grow with the error)")

    def scores(self, errors: np.ndarray) -> np.ndarray:
        """The options' scores given every candidate's error."""
        return self.offset + self.slope * np.asarray(errors, dtype=np.float64)[self.candidate]

    def upper(self, error_bounds: np.ndarray) -> np.ndarray:
        """Upper bounds on the options' scores given upper bounds on their candidates' errors
        (``inf``: none); a zero slope leaves the offset itself."""
        b = np.asarray(error_bounds, dtype=np.float64)[self.candidate]
        with np.errstate(invalid="ignore"):
            return np.where(self.slope == 0, self.offset, self.offset + self.slope * b)


class ErrorBounds:
    """Each candidate's last computed model error and how far the model has moved since: the
    error's upper bound now. A refit's move is bounded per candidate by the independent parts of
    the model its attributes touch (:class:`~privmarg.generate.pgm.drift.Drift`); :meth:`moved`
    after every refit (a move that cannot be bounded forgets every error). Arrays over the run's
    fixed candidate list, addressed by position."""

    def __init__(self, domain: Domain, candidates: Sequence[Clique]):
        self.domain, self.candidates = domain, candidates
        self._attrs: np.ndarray | None = None  # each candidate's attribute positions (made on the first move)
        self.errors = np.full(len(candidates), np.nan)
        self.move = np.zeros(len(candidates))  # counts the model moved since each error was computed
        self.marginals: dict[Clique, np.ndarray] | None = None  # the current model's, on its potentials' cliques

    def upper(self, at: np.ndarray, cap: float = np.inf) -> np.ndarray:
        """Upper bounds (counts) on the errors of the candidates at positions ``at``: the last error
        plus the move since, and at most ``cap`` (an error ``‖y − M(model)‖₁`` is at most the two
        tables' totals together)."""
        err = self.errors[at]
        return np.minimum(np.where(np.isnan(err), np.inf, err + self.move[at]), cap)

    def record(self, at: np.ndarray, errors: np.ndarray) -> None:
        """Keep the errors (counts) just computed for the candidates at positions ``at``."""
        self.errors[at] = errors
        self.move[at] = 0.0

    def moved(self, before: Any, after: Any, chosen: Clique | None, chosen_before: np.ndarray | None) -> None:
        """Account for a refit from ``before`` to ``after``; ``chosen_before``: ``before``'s marginal
        (counts) on the clique just chosen, the one new potential a round adds (any other new one is
        projected from ``before`` here)."""
        known, self.marginals = self.marginals, key_marginals(after) if after is not None else None
        if before is None or self.marginals is None or not boundable(before):
            self.forget()
            return
        if known is None:
            known = key_marginals(before) or {}
        known = dict(known)
        for r in self.marginals:
            if r not in known:
                if r == chosen and chosen_before is not None and before.total > 0:
                    known[r] = np.asarray(chosen_before, dtype=np.float64) / before.total
                else:
                    known[r] = np.asarray(before.project(r, cache=False), dtype=np.float64) / before.total
        d = drift(before, after, known, self.marginals)
        if d is None:
            self.forget()
        else:
            self.move += d.bound(self.attrs())

    def attrs(self) -> np.ndarray:
        """Each candidate's attribute positions in the domain (rows padded with −1)."""
        if self._attrs is None:
            where = {a: i for i, a in enumerate(self.domain.attrs)}
            width = max((len(r) for r in self.candidates), default=1)
            self._attrs = np.full((len(self.candidates), width), -1, dtype=np.int32)
            for i, r in enumerate(self.candidates):
                self._attrs[i, :len(r)] = [where[a] for a in r]
        return self._attrs

    def forget(self) -> None:
        """Drop every error (a refit whose move is not known)."""
        self.errors.fill(np.nan)
        self.move.fill(0.0)
