"""The measurement session: the only place where private answers meet noise.

A :class:`MeasurementSession` holds a :class:`~privmarg.data.MarginalSource`, the run's
:class:`~privmarg.privacy.Accountant` and its noise generator. Selectors read private answers
through :meth:`answers` only to compute scores that leave only through a charged selection
(:meth:`select`, :meth:`select_fitting`, :meth:`select_lazy`, :meth:`top_q`; the adaptive rounds
keep their candidates' errors between rounds, as upper bounds of later scores, and nowhere else);
every release (:meth:`measure`, :meth:`gaussian`, :meth:`privtree`)
is charged before noise is drawn, and the noise itself is drawn in :mod:`privmarg.privacy`.

Statistics that are not marginals (issue 20): :meth:`clipped_sum` releases a noisy sum of
per-record vectors (DP-MERF's mean embedding) and :meth:`dp_sgd` charges a DP-SGD phase and hands
out its noisy clipped gradient sums. Both read the records as a multiset in a canonical order
(sorted codes), so a source that holds the full joint marginal gives the same run as the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..core import Domain, Measurement, is_grouping
from ..data.source import ColumnSource, MarginalSource, RecordSource
from ..privacy import (
    Accountant,
    check_noise,
    discrete_gaussian_mechanism,
    exponential_mechanism,
    exponential_mechanism_fitting,
    exponential_mechanism_lazy,
    gaussian_mechanism,
    gumbel_top_q,
    marginal_l2,
)
from ..privacy.discovery import gaussian_threshold
from ..privacy.dpsgd import DPSGDPhase, clipped_sum, dp_sgd_phase
from ..privacy.privtree import privtree_split

Clique = tuple[str, ...]


ANSWER_BATCH = 512  # cliques asked of the source at once when filling the cache


def _compact(counts: np.ndarray) -> np.ndarray:
    """A cached answer, read-only: whole counts below 2²⁴ as float32 (exact; half the memory of a
    cache that holds every candidate's marginal, e.g. 161 MB for adult's 3-way closure), else float64."""
    a = np.asarray(counts, dtype=float)
    if a.size and np.abs(a).max() < 2**24 and np.array_equal(a, np.round(a)):
        a = a.astype(np.float32)
    a.flags.writeable = False
    return a


class MeasurementSession:
    """Private counts in, charged noisy releases out.

    ``source``: a :class:`~privmarg.data.MarginalSource` (or :class:`~privmarg.data.ColumnCounts`
    for preprocessing); ``accountant``: charged for everything released; ``rng``: the noise
    generator. ``measurements`` lists what was released (and public answers :meth:`record`-ed), in
    order; ``rounds`` is the selectors' round log.

    ``noise``: ``"continuous"`` (default) adds float Gaussian noise ``N(0, σ²)`` (and Laplace noise in
    PrivTree); ``"discrete"`` adds the exact discrete Gaussian ``N_Z(0, σ²)`` to integer-valued
    releases (marginal counts), with the same charge ``Δ₂²/(2σ²)`` (Canonne–Kamath–Steinke 2020,
    Thm 4), and the discrete Laplace in PrivTree. A release whose values are not all integers
    (weighted counts from a precomputed source, PrivPGD's smoothed constraint statistic) gets the
    continuous Gaussian at the same σ and cost; the ledger's ``mechanism`` says which one ran
    (``"discrete_gaussian"`` or ``"gaussian"``, with ``fallback="non-integer values"``).
    """

    def __init__(self, source: MarginalSource | ColumnSource, accountant: Accountant, rng: np.random.Generator, *,
                 cache: bool = True,
                 noise: str = "continuous"):
        self.source = source
        self.accountant = accountant
        self.rng = rng
        self.noise = check_noise(noise)
        self.measurements: list[Measurement] = []
        self.rounds: list[dict] = []
        self._cache: dict[Clique, np.ndarray] | None = {} if cache else None
        self._spent0 = accountant.rho_spent

    # -------------------------------------------------------------------------- facts
    @property
    def domain(self) -> Domain:
        return self.source.domain

    @property
    def neighbour(self) -> str:
        return self.accountant.neighbour

    @property
    def rho_spent(self) -> float:
        """zCDP charged through this session so far."""
        return self.accountant.rho_spent - self._spent0

    def derived(self, source: MarginalSource) -> "MeasurementSession":
        """A session over another view of the same private data (same accountant and noise)."""
        return MeasurementSession(source, self.accountant, self.rng, cache=self._cache is not None,
                                  noise=self.noise)

    # ------------------------------------------------------------------ private answers
    def answers(self, cliques: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Exact (private) marginals, flat over each clique's order given; for scoring only: a value
        computed from them may leave a selector only through :meth:`select` or :meth:`top_q`."""
        cliques = [tuple(c) for c in cliques]
        if self._cache is None:
            return self.source.marginals(cliques)
        todo = list(dict.fromkeys(c for c in cliques if c not in self._cache))
        for i in range(0, len(todo), ANSWER_BATCH):  # in batches: one batch at full precision at a time
            batch = todo[i:i + ANSWER_BATCH]
            self._cache.update((c, _compact(a)) for c, a in zip(batch, self.source.marginals(batch)))
        return [self._cache[c] for c in cliques]

    def forget(self, keep: Iterable[Sequence[str]] = ()) -> None:
        """Drop cached private answers (memory), all but those of the cliques in ``keep``."""
        if self._cache is not None:
            kept = {c: self._cache[c] for c in map(tuple, keep) if c in self._cache}
            self._cache.clear()
            self._cache.update(kept)

    def public_seeds(self, n: int) -> list[np.random.SeedSequence]:
        """``n`` seeds for public randomness (random starts, candidate draws, random features): children
        of the noise generator's seed sequence, so a seeded run repeats while the noise stream is
        neither consumed nor revealed by whatever that randomness releases."""
        ss = getattr(self.rng.bit_generator, "seed_seq", None)
        try:
            return ss.spawn(n)
        except AttributeError:  # a generator restored from a state has no seed sequence
            return np.random.SeedSequence().spawn(n)

    # ------------------------------------------------------------------------ releases
    def measure(self, clique: Sequence[str], sigma: float, what: str = "", *, weight: float | None = None,
                query: Any = None, **meta: Any) -> Measurement:
        """Release ``M_clique(D) + N(0, σ²)`` (or ``N_Z(0, σ²)``, see ``noise``) and keep it; charges
        ``Δ₂²/(2σ²)`` (Δ₂ = 1 or √2). ``weight``: its weight in a generator's loss (default ``1/(2σ²)``).
        ``query``: release ``Q·M_clique(D)`` instead, for a ``Q`` that sums cells into groups
        (:func:`~privmarg.core.measurement.grouping_query`): a record still moves one count, so Δ₂ and
        the charge are the marginal's. Any other query is refused (its sensitivity would differ)."""
        clique = tuple(clique)
        if query is not None and not is_grouping(query):
            raise ValueError(f"measurement on {clique}: a query must sum the cells into groups (0/1, each cell once)")
        (exact,) = self.answers([clique])
        if query is not None:
            exact = query @ exact
        y = self._gaussian(exact, sigma, marginal_l2(self.neighbour), what or f"marginal {','.join(clique)}",
                           counts=True)
        m = Measurement(clique, y, sigma, query=query, meta=meta, weight=weight)
        self.measurements.append(m)
        return m

    def gaussian(self, values: np.ndarray, sigma: float, l2_sensitivity: float, what: str, *, counts: bool = False,
                 **note: str) -> np.ndarray:
        """Release a private statistic ``values`` (computed from :meth:`answers` or :meth:`histogram`)
        with Gaussian noise; charges ``l2_sensitivity²/(2σ²)``. Not kept in :attr:`measurements`.
        ``counts``: the statistic is record counts (integers by construction), so ``noise="discrete"``
        applies; other statistics (scores) get continuous noise, marked in the ledger. The choice
        rests on what the statistic is, never on its values: integrality of the exact values would
        be an uncharged bit. ``note`` goes into the ledger entry (``phase="selection"`` counts it as
        selection in :func:`~privmarg.privacy.rho_by_phase`)."""
        return self._gaussian(values, sigma, l2_sensitivity, what, counts=counts, **note)

    def _gaussian(self, values: np.ndarray, sigma: float, l2_sensitivity: float, what: str, *, counts: bool,
                  **note: str) -> np.ndarray:
        if self.noise == "discrete":
            if counts:  # integral by construction; a source giving fractional counts is refused there
                return discrete_gaussian_mechanism(self.accountant, values, sigma, l2_sensitivity, self.rng,
                                                   what=what, **note)
            return gaussian_mechanism(self.accountant, values, sigma, l2_sensitivity, self.rng, what=what,
                                      fallback="non-integer values", **note)
        return gaussian_mechanism(self.accountant, values, sigma, l2_sensitivity, self.rng, what=what, **note)

    def select(self, scores: np.ndarray, epsilon: float, sensitivity: float, what: str = "") -> int:
        """Exponential mechanism over ``scores`` (higher is better); charges ``ε²/8``."""
        return exponential_mechanism(self.accountant, scores, epsilon, sensitivity, self.rng, what=what)

    def select_fitting(self, scores: np.ndarray, epsilon: float, sensitivity: float, fits: Callable[[int], bool],
                       what: str = "") -> int | None:
        """Exponential mechanism over the indices with ``fits(i)`` (a public rule), asking ``fits``
        in descending noisy score only until one fits; charges ``ε²/8``, or nothing when none fits
        (returns None)."""
        return exponential_mechanism_fitting(self.accountant, scores, epsilon, sensitivity, self.rng, fits, what=what)

    def select_lazy(self, upper: np.ndarray, exact: Callable[[np.ndarray], np.ndarray], epsilon: float,
                    sensitivity: float, fits: Callable[[int], bool], what: str = "") -> int | None:
        """:meth:`select_fitting` with the scores asked of ``exact`` only where their upper bounds
        leave them a chance (:func:`~privmarg.privacy.primitives.exponential_mechanism_lazy`): the
        same pick from the same draws, the same charge."""
        return exponential_mechanism_lazy(self.accountant, upper, exact, epsilon, sensitivity, self.rng, fits,
                                          what=what)

    def top_q(self, scores: np.ndarray, q: int, rho: float, sensitivity: float, what: str = "") -> np.ndarray:
        """Report-noisy-top-``q`` (Gumbel) over ``scores``; charges ``rho``."""
        return gumbel_top_q(self.accountant, scores, q, rho, sensitivity, self.rng, what=what)

    def record(self, measurement: Measurement) -> Measurement:
        """Keep an answer that costs nothing (a public proxy, a derived measurement)."""
        self.measurements.append(measurement)
        return measurement

    # ------------------------------------------------------- records: sums and DP-SGD
    def _records(self) -> np.ndarray:
        """The private records (codes, rows sorted): from the source's rows when it has them, else
        from the full joint marginal (a precomputed source holding it)."""
        if isinstance(self.source, RecordSource):
            codes = np.asarray(self.source.records(), dtype=np.int64)
            return codes[np.lexsort(codes.T[::-1])] if len(codes) else codes.reshape(0, len(self.domain))
        attrs = tuple(self.domain.attrs)
        (full,) = self.answers([attrs])
        counts = np.rint(full).astype(np.int64)
        cells = np.repeat(np.arange(counts.size), counts)  # row-major cell order = sorted codes
        return np.column_stack(np.unravel_index(cells, self.domain.shape)).astype(np.int64)

    def clipped_sum(self, features: Callable[[np.ndarray], Any], clip: float, sigma: float, what: str) -> np.ndarray:
        """Release the sum over records of ``features(records)`` rows clipped to L2 norm ``clip``,
        plus ``N(0, σ²)`` per coordinate; charges ``Δ²/(2σ²)`` (Δ = ``clip`` or ``2·clip``).
        ``features`` sees private records; only the noisy sum leaves."""
        return clipped_sum(self.accountant, self._records(), features, clip, sigma, self.rng, what)

    def dp_sgd(self, *, rho: float, steps: int, clip: float, size: int, what: str, sample_rate: float | None = None,
               batch_size: int | None = None, denominator: float | None = None) -> DPSGDPhase:
        """Charge a DP-SGD phase whose zCDP equivalent is ``rho`` (see :mod:`privmarg.privacy.rdp`;
        the run's last charge) and return it: ``phase.step(grads)`` gives a noisy sum of clipped
        per-record gradients, ``steps`` times. Poisson ``sample_rate`` and ``denominator`` under
        add/remove, ``batch_size`` under replace-one; ``size``: the gradient length."""
        return dp_sgd_phase(self.accountant, self._records(), self.rng, rho=rho, steps=steps, clip=clip, size=size,
                            what=what, sample_rate=sample_rate, batch_size=batch_size, denominator=denominator)

    # ------------------------------------------------------------------- preprocessing
    def histogram(self, column: str, k: int) -> np.ndarray:
        """Private counts of a raw column's codes ``0..k-1`` (for a charged :meth:`gaussian`)."""
        return self.source.histogram(column, k)

    def range_histogram(self, column: str, edges: np.ndarray, points: np.ndarray) -> np.ndarray:
        """Private counts of a raw numeric column: values in each interval ``[e_j, e_{j+1})`` (the last
        closed) that are not among ``points``, then the values equal to each point (for a charged
        :meth:`gaussian`)."""
        count: Callable = self.source.range_counter(column)
        last = len(edges) - 2
        edges = np.asarray(edges, dtype=float)
        bins = np.asarray(count(edges[:-1], edges[1:], False), dtype=float)  # half-open, vectorized
        bins[last] = count(edges[last], edges[last + 1], True)  # the last interval closed
        at = np.array([count(p, p, True) for p in points], dtype=float)
        if len(points):
            j = np.clip(np.searchsorted(edges, points, side="right") - 1, 0, last)
            np.subtract.at(bins, j, at)
        return np.concatenate([bins, at])

    def frequent_values(self, column: str, sigma: float, l2_sensitivity: float, threshold: float,
                        what: str) -> tuple[np.ndarray, np.ndarray]:
        """DP discovery of the values (keys) of a raw column that nobody lists publicly: the keys whose
        count plus ``N(0, σ²)`` exceeds ``threshold`` (rows), with those noisy counts; charges
        ``Δ₂²/(2σ²)`` zCDP and its δ (see :func:`privmarg.privacy.discovery.gaussian_threshold`)."""
        keys, counts = self.source.value_counts(column)
        kept, noisy = gaussian_threshold(self.accountant, counts, sigma, l2_sensitivity, threshold, self.rng, what,
                                         discrete=self.noise == "discrete")
        return keys[kept], noisy

    def privtree(self, column: str, lo: float, hi: float, *, lattice: bool, max_depth: int, rho: float,
                 what: str, threshold: float = 0.0) -> np.ndarray:
        """PrivTree leaf edges of a raw numeric column on the public range ``[lo, hi)``; charges ``rho``
        (``threshold``: PrivTree's θ in rows, public)."""
        count: Callable = self.source.range_counter(column)
        return privtree_split(self.accountant, count, lo, hi, lattice=lattice, max_depth=max_depth, rho=rho,
                              rng=self.rng, what=what, threshold=threshold, noise=self.noise)
