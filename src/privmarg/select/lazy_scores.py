"""Scores asked for only where they can win: the adaptive rounds' exponential mechanism, exactly.

A round of AIM or JAM scores every candidate ``r`` by its model error ``‖y_r − M_r(model)‖₁`` (the
private answer against the current model), and scoring is most of such a run's time. A score here
is ``offset + slope·error`` (:class:`ScoreTerms`); a candidate's error in the last round it was
computed, plus how far any marginal of the model can have moved since
(:func:`~privmarg.generate.pgm.drift.marginal_drift`, from the models' potentials), bounds its error
now (:class:`ErrorBounds`). The exponential mechanism then asks only for the errors whose bound
leaves them a chance against the Gumbel noise already drawn
(:func:`~privmarg.privacy.primitives.exponential_mechanism_lazy`): the pick is the one that scoring
every candidate would give from the same draws. The errors are private, like the scores; which
ones were computed shows only in the run's time, never in what is released.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..generate.pgm.drift import key_marginals, marginal_drift

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
    error's upper bound now. :meth:`moved` after every refit (an ``inf`` move forgets every error)."""

    def __init__(self) -> None:
        self.errors: dict[Clique, float] = {}
        self.since: dict[Clique, float] = {}  # the cumulative move when the error was computed
        self.total = 0.0  # cumulative move (counts)
        self.marginals: dict[Clique, np.ndarray] | None = None  # the current model's, on its potentials' cliques

    def upper(self, cands: list[Clique]) -> np.ndarray:
        err, since, total = self.errors, self.since, self.total
        return np.array([err[r] + (total - since[r]) if r in err else math.inf for r in cands], dtype=np.float64)

    def record(self, cands: list[Clique], errors: np.ndarray) -> None:
        for r, e in zip(cands, errors):
            self.errors[r] = float(e)
            self.since[r] = self.total

    def moved(self, before: Any, after: Any, chosen: Clique | None, chosen_before: np.ndarray | None) -> None:
        """Account for a refit from ``before`` to ``after``; ``chosen_before``: ``before``'s marginal
        (counts) on the clique just chosen, the one new potential a round adds (any other new one is
        projected from ``before`` here)."""
        known, self.marginals = self.marginals, key_marginals(after) if after is not None else None
        if before is None or self.marginals is None:
            self._forget()
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
        d = marginal_drift(before, after, known, self.marginals)
        if math.isfinite(d):
            self.total += d
        else:
            self._forget()

    def _forget(self) -> None:
        self.errors.clear()
        self.since.clear()
        self.total = 0.0
