"""Metrics comparing a real and a synthetic table over the same domain (SPEC §2, §11).

Every function takes two :class:`~privmarg.data.Dataset` objects on the same
:class:`~privmarg.core.Domain` (``real`` first) and returns a float (lower is better) unless stated.
The tables may have different numbers of rows: every statistic is computed on each table's own
empirical distribution (counts divided by the table's own size).

Geometry: where a metric needs coordinates it uses the PrivPGD embedding ``Emb(x)_i = (2x_i+1)/(2k_i)``
(0-based codes; the paper's ``(2x−1)/(2k)`` with 1-based codes), the centres of ``k_i`` equal bins of
``[0, 1]``.

Marginal counting is vectorised (one ``bincount`` per marginal, dense when the marginal is small and
over the joint support otherwise), so all 2-way marginals of a 20-column, 10⁶-row table take seconds.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

import numpy as np

from ..data import Dataset
from ..core import Domain
from ..core import Workload, all_kway

__all__ = [
    "embed",
    "marginal_distances",
    "workload_error",
    "tv_kway",
    "tv_per_marginal",
    "sw1_2way",
    "covariance_error",
    "counting_query_error",
    "thresholding_query_error",
    "range_query_error",
    "conditional_query_error",
    "CountingQueries",
    "ThresholdQueries",
]


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
def _check(real: Dataset, synthetic: Dataset) -> Domain:
    if real.domain != synthetic.domain:
        raise ValueError("real and synthetic tables must share a domain")
    if len(real) == 0 or len(synthetic) == 0:
        raise ValueError("both tables must be non-empty")
    return real.domain


def _columns(data: Dataset) -> list[np.ndarray]:
    """Contiguous int64 columns (column gathers on the row-major code matrix are strided)."""
    return [np.ascontiguousarray(data.codes[:, i]) for i in range(data.codes.shape[1])]


def embed(data: Dataset) -> np.ndarray:
    """The PrivPGD embedding of every record, ``(2x+1)/(2k)`` per attribute, shape (rows, d), in [0, 1]."""
    k = np.asarray(data.domain.shape, dtype=float)
    return (2.0 * data.codes + 1.0) / (2.0 * k)


class _Pair:
    """Empirical marginals of two tables on shared cliques (counting helper)."""

    def __init__(self, real: Dataset, synthetic: Dataset):
        self.domain = _check(real, synthetic)
        self.n, self.m = len(real), len(synthetic)
        self.rc, self.sc = _columns(real), _columns(synthetic)
        self.shape = self.domain.shape

    def _index(self, cols: list[np.ndarray], axes: Sequence[int]) -> np.ndarray:
        idx = cols[axes[0]].copy() if axes else np.zeros(len(cols[0]), dtype=np.int64)
        for a in axes[1:]:
            idx *= self.shape[a]
            idx += cols[a]
        return idx

    def marginals(self, axes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Normalised marginals (p real, q synthetic) on ``axes``, aligned cell by cell.

        Dense (row-major over ``axes``) when the marginal has at most ``max(2^20, 4(N+M))`` cells,
        otherwise restricted to the union of the two supports (same L1/TV, same ordering).
        """
        cells = math.prod(self.shape[a] for a in axes)
        ir, is_ = self._index(self.rc, axes), self._index(self.sc, axes)
        if cells <= max(1 << 20, 4 * (self.n + self.m)):
            p = np.bincount(ir, minlength=cells) / self.n
            q = np.bincount(is_, minlength=cells) / self.m
            return p, q
        support, inv = np.unique(np.concatenate([ir, is_]), return_inverse=True)
        p = np.bincount(inv[: self.n], minlength=len(support)) / self.n
        q = np.bincount(inv[self.n:], minlength=len(support)) / self.m
        return p, q

    def pair2d(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Dense normalised 2-way marginals on attributes (i, j) as (k_i, k_j) matrices."""
        ki, kj = self.shape[i], self.shape[j]
        p = np.bincount(self.rc[i] * kj + self.rc[j], minlength=ki * kj) / self.n
        q = np.bincount(self.sc[i] * kj + self.sc[j], minlength=ki * kj) / self.m
        return p.reshape(ki, kj), q.reshape(ki, kj)


def marginal_distances(real: Dataset, synthetic: Dataset, cliques: Iterable[Sequence[str]]) -> np.ndarray:
    """L1 distance ``‖p_r − q_r‖₁`` of the normalised marginals on each clique (array, in [0, 2]).

    TV is half of it. Attributes may be given in any order (the distance does not depend on it).
    """
    pair = _Pair(real, synthetic)
    dom = pair.domain
    out = []
    for c in cliques:
        axes = sorted(dom.axes(dom.canonical(c)))
        p, q = pair.marginals(axes)
        out.append(np.abs(p - q).sum())
    return np.asarray(out, dtype=float)


# ------------------------------------------------------------------------------------------
# marginal metrics
# ------------------------------------------------------------------------------------------
def workload_error(real: Dataset, synthetic: Dataset, workload: Workload) -> float:
    """AIM's workload error: weighted mean over the workload of ‖M_r(D)/N − M_r(D̂)/N̂‖₁.

    ``workload`` is a list of ``(attrs, weight)`` (see :mod:`privmarg.workload`). Each table is
    normalised by its own size (the synthetic one is rescaled to N rows), so the value lies in
    [0, 2·max weight]; with unit weights it is the mean L1 distance of normalised marginals (twice the
    mean total variation). This is AIM Def. 2, ``(1/(kN)) Σ c_i ‖M_{s_i}(D) − M_{s_i}(D̂)·N/N̂‖₁``.
    """
    _check(real, synthetic)
    workload = list(workload)
    if not workload:
        raise ValueError("the workload is empty")
    l1 = marginal_distances(real, synthetic, [r for r, _ in workload])
    w = np.asarray([float(c) for _, c in workload])
    return float(np.mean(w * l1))


def tv_per_marginal(real: Dataset, synthetic: Dataset, k: int = 2) -> dict[tuple[str, ...], float]:
    """Total variation ``½‖p − q‖₁`` (in [0, 1]) of every k-way marginal, keyed by attribute tuple."""
    dom = _check(real, synthetic)
    cliques = [c for c, _ in all_kway(dom, k)]
    tv = 0.5 * marginal_distances(real, synthetic, cliques)
    return dict(zip(cliques, tv.tolist()))


def tv_kway(real: Dataset, synthetic: Dataset, k: int = 2) -> float:
    """Average total variation over all k-way marginals, ``C(d,k)⁻¹ Σ_S ½‖ν_S[D] − ν_S[D̂]‖₁``.

    In [0, 1]; PrivPGD Eq. 11 for k = 2. (PrivPGD's reference code reports the L1 distance, i.e.
    twice this value.) With k > d, the single d-way marginal is used.
    """
    return float(np.mean(list(tv_per_marginal(real, synthetic, k).values())))


def _weighted_w1_same_support(z: np.ndarray, diff: np.ndarray) -> np.ndarray:
    """1-D W₁ between two discrete measures on the same points, for many projections at once.

    ``z`` (L, n): projected positions per direction; ``diff`` (n,): p − q. W₁ = Σ_j |CDF gap| · step.
    """
    order = np.argsort(z, axis=1, kind="stable")
    zs = np.take_along_axis(z, order, axis=1)
    cdf = np.cumsum(diff[order], axis=1)[:, :-1]
    return np.sum(np.abs(cdf) * np.diff(zs, axis=1), axis=1)


def sw1_2way(real: Dataset, synthetic: Dataset, directions: int = 100, seed: int | None = 0,
             per_marginal: bool = False):
    """Average sliced Wasserstein-1 distance over all 2-way marginals (PrivPGD Eq. 10).

    Each 2-way marginal is a weighted point cloud on the embedded grid ``Emb(Ω_i × Ω_j) ⊂ [0,1]²``;
    SW₁ is estimated with ``directions`` random unit directions (fresh per marginal, from ``seed``),
    each an exact weighted 1-D W₁ (as ``ot.wasserstein_1d`` with p = 1 in the reference evaluation).
    Units: distance in the unit square; 0 for identical marginals, at most ~1.
    With ``per_marginal`` returns ``(mean, {pair: value})``.
    """
    pair = _Pair(real, synthetic)
    dom = pair.domain
    d = len(dom)
    rng = np.random.default_rng(seed)
    vals: dict[tuple[str, ...], float] = {}
    pairs = list(itertools.combinations(range(d), 2)) if d >= 2 else [(0,)]
    for axes in pairs:
        p, q = pair.marginals(axes) if len(axes) == 1 else [x.ravel() for x in pair.pair2d(*axes)]
        keep = (p > 0) | (q > 0)
        cells = np.flatnonzero(keep)
        coords = np.unravel_index(cells, [dom.shape[a] for a in axes])
        X = np.stack([(2.0 * c + 1.0) / (2.0 * dom.shape[a]) for c, a in zip(coords, axes)], axis=1)
        theta = rng.normal(size=(directions, len(axes)))
        theta /= np.linalg.norm(theta, axis=1, keepdims=True) + 1e-12
        z = theta @ X.T  # (L, n)
        w = _weighted_w1_same_support(z, p[keep] - q[keep]) if len(cells) > 1 else np.zeros(directions)
        vals[tuple(dom.attrs[a] for a in axes)] = float(w.mean())
    mean = float(np.mean(list(vals.values())))
    return (mean, vals) if per_marginal else mean


# ------------------------------------------------------------------------------------------
# covariance
# ------------------------------------------------------------------------------------------
def _cov(x: np.ndarray) -> np.ndarray:
    xc = x - x.mean(axis=0)
    return xc.T @ xc / len(x)


def covariance_error(real: Dataset, synthetic: Dataset, denominator: str = "synthetic") -> float:
    """Relative covariance error ``‖Cov(Emb D) − Cov(Emb D̂)‖_F / ‖Cov(Emb D̂)‖_F`` (PrivPGD §4.1).

    Centred (population, 1/n) covariances of the embedded tables. The denominator is the synthetic
    covariance as the paper states; ``denominator="real"`` divides by the real one instead.
    Unitless; 0 for identical tables; ``inf`` when the denominator covariance is zero but not the
    numerator.
    """
    _check(real, synthetic)
    if denominator not in ("synthetic", "real"):
        raise ValueError("denominator must be 'synthetic' or 'real'")
    cr, cs = _cov(embed(real)), _cov(embed(synthetic))
    num = np.linalg.norm(cr - cs, "fro")
    den = np.linalg.norm(cs if denominator == "synthetic" else cr, "fro")
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return float(num / den)


# ------------------------------------------------------------------------------------------
# 3-sparse counting and thresholding queries (PrivPGD §4.1, SPEC §11.1)
# ------------------------------------------------------------------------------------------
def _relative_error(qr: np.ndarray, qs: np.ndarray) -> float:
    den = float(np.mean(qr))
    num = float(np.mean(np.abs(qs - qr)))
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return num / den


class CountingQueries:
    """3-sparse interval counting queries drawn on a real table (SPEC §11.1 generator).

    Query j: three distinct attributes ``a`` (uniform), each restricted to ``[l, u]`` with
    ``l ~ U{0..k−1}``, ``u ~ U{l..k−1}``; rejected unless its answer on ``real`` (the fraction of
    rows inside the box) is in ``[lo, hi]`` (default 5%–95%). Tables with fewer than 3 attributes use
    all of them. Raises if ``max_tries`` candidates do not yield ``queries`` accepted ones.
    """

    def __init__(self, real: Dataset, queries: int = 200, seed: int | None = 0, lo: float = 0.05,
                 hi: float = 0.95, max_tries: int | None = None):
        dom = real.domain
        rng = np.random.default_rng(seed)
        cols = _columns(real)
        d, s = len(dom), min(3, len(dom))
        self.attrs: list[tuple[int, ...]] = []
        self.bounds: list[tuple[tuple[int, int], ...]] = []
        answers = []
        max_tries = max_tries or 1000 * queries
        tries = 0
        while len(answers) < queries:
            tries += 1
            if tries > max_tries:
                raise RuntimeError(f"only {len(answers)} of {queries} counting queries with selectivity in "
                                   f"[{lo}, {hi}] after {max_tries} candidates")
            attrs = tuple(sorted(rng.choice(d, size=s, replace=False).tolist()))
            bounds = []
            for a in attrs:
                lo_a = int(rng.integers(0, dom.shape[a]))
                bounds.append((lo_a, int(rng.integers(lo_a, dom.shape[a]))))
            bounds = tuple(bounds)
            ans = self._answer(cols, attrs, bounds, len(real))
            if lo <= ans <= hi:
                self.attrs.append(attrs)
                self.bounds.append(bounds)
                answers.append(ans)
        self.real_answers = np.asarray(answers)
        self.tries = tries

    @classmethod
    def from_queries(cls, real: Dataset, attrs: Sequence[Sequence[int]],
                     bounds: Sequence[Sequence[tuple[int, int]]]) -> "CountingQueries":
        """A given query set: ``attrs[j]`` column indices, ``bounds[j]`` inclusive ``(l, u)`` per column."""
        self = cls.__new__(cls)
        self.attrs = [tuple(int(a) for a in at) for at in attrs]
        self.bounds = [tuple((int(l), int(u)) for l, u in b) for b in bounds]
        self.tries = len(self.attrs)
        self.real_answers = self.answer(real)
        return self

    @staticmethod
    def _answer(cols, attrs, bounds, n) -> float:
        mask = None
        for a, (l, u) in zip(attrs, bounds):
            m = (cols[a] >= l) & (cols[a] <= u)
            mask = m if mask is None else (mask & m)
        return float(np.count_nonzero(mask)) / n

    def answer(self, data: Dataset) -> np.ndarray:
        """Fraction of the rows of ``data`` inside each query box."""
        cols = _columns(data)
        return np.asarray([self._answer(cols, a, b, len(data)) for a, b in zip(self.attrs, self.bounds)])


def counting_query_error(real: Dataset, synthetic: Dataset, seed: int | None = 0, queries: int = 200,
                         query_set: CountingQueries | None = None) -> float:
    """Relative average error of 3-sparse counting queries (PrivPGD Eq. 9), unitless.

    ``(1/J Σ_j |q_j(D̂) − q_j(D)|) / (1/J Σ_j q_j(D))`` over ``J = queries`` interval queries drawn
    on ``real`` with 5%–95% selectivity (:class:`CountingQueries`). The same ``seed`` gives the same
    queries for every synthetic table; pass ``query_set`` to reuse a drawn set.
    """
    _check(real, synthetic)
    qs = query_set or CountingQueries(real, queries=queries, seed=seed)
    return _relative_error(qs.real_answers, qs.answer(synthetic))


class ThresholdQueries:
    """3-sparse linear thresholding queries ``q(D) = (1/n) Σ_i 1[⟨Emb(x_i), θ⟩ > t]`` (SPEC §11.1 [DEC]).

    ``θ``: three distinct attributes (uniform) with normalised Gaussian weights, zero elsewhere;
    ``t ~ U[min_{x∈D} ⟨Emb x, θ⟩, max_{x∈D} ⟨Emb x, θ⟩]`` on the real table.
    """

    def __init__(self, real: Dataset, queries: int = 200, seed: int | None = 0):
        dom = real.domain
        rng = np.random.default_rng(seed)
        cols = _columns(real)
        d, s = len(dom), min(3, len(dom))
        self.attrs, self.weights, self.thresholds, answers = [], [], [], []
        for _ in range(queries):
            attrs = tuple(sorted(rng.choice(d, size=s, replace=False).tolist()))
            w = rng.normal(size=s)
            w /= np.linalg.norm(w) + 1e-12
            proj = self._project(cols, attrs, w, dom)
            t = float(rng.uniform(proj.min(), proj.max()))
            self.attrs.append(attrs)
            self.weights.append(w)
            self.thresholds.append(t)
            answers.append(float(np.count_nonzero(proj > t)) / len(real))
        self.real_answers = np.asarray(answers)
        self.domain = dom

    @classmethod
    def from_queries(cls, real: Dataset, attrs: Sequence[Sequence[int]], weights: Sequence[Sequence[float]],
                     thresholds: Sequence[float]) -> "ThresholdQueries":
        """A given query set: column indices, their weights ``θ`` and thresholds ``t`` (embedding space)."""
        self = cls.__new__(cls)
        self.domain = real.domain
        self.attrs = [tuple(int(a) for a in at) for at in attrs]
        self.weights = [np.asarray(w, dtype=float) for w in weights]
        self.thresholds = [float(t) for t in thresholds]
        self.real_answers = self.answer(real)
        return self

    @staticmethod
    def _project(cols, attrs, w, dom) -> np.ndarray:
        out = np.zeros(len(cols[0]))
        for a, wa in zip(attrs, w):
            k = dom.shape[a]
            lut = wa * (2.0 * np.arange(k) + 1.0) / (2.0 * k)
            out += lut[cols[a]]
        return out

    def answer(self, data: Dataset) -> np.ndarray:
        """Fraction of the rows of ``data`` above each threshold."""
        cols = _columns(data)
        return np.asarray([np.count_nonzero(self._project(cols, a, w, self.domain) > t) / len(data)
                           for a, w, t in zip(self.attrs, self.weights, self.thresholds)])


def thresholding_query_error(real: Dataset, synthetic: Dataset, seed: int | None = 0, queries: int = 200,
                             query_set: ThresholdQueries | None = None) -> float:
    """Relative average error of 3-sparse linear thresholding queries (PrivPGD Eq. 9), unitless.

    Same relative form as :func:`counting_query_error`, over :class:`ThresholdQueries` drawn on ``real``.
    """
    _check(real, synthetic)
    qs = query_set or ThresholdQueries(real, queries=queries, seed=seed)
    return _relative_error(qs.real_answers, qs.answer(synthetic))


# ------------------------------------------------------------------------------------------
# benchmark-paper queries (Chen et al. §8.3, SPEC §11.2)
# ------------------------------------------------------------------------------------------
def range_query_error(real: Dataset, synthetic: Dataset, seed: int | None = 0, queries: int = 1000,
                      numeric: Iterable[str] = (), mode: str = "strict_3way") -> float:
    """Mean absolute error of 3-way range/point queries, as fractions of rows (Chen et al. §8.3).

    Each query picks 3 distinct attributes; a ``numeric`` attribute gets a range ``[a, b]`` with
    ``a, b`` uniform reals in the real table's observed code range (sorted), any other attribute a
    point query on a value drawn uniformly from those observed in ``real``. Error per query:
    ``|frac_real − frac_synthetic|`` (in [0, 1]); the result is their mean. ``real`` is the test
    split in the benchmark paper. ``mode="reference_quirk"`` reproduces the reference code, which
    also averages in the 1- and 2-condition prefixes of every query.
    """
    dom = _check(real, synthetic)
    if mode not in ("strict_3way", "reference_quirk"):
        raise ValueError("mode must be 'strict_3way' or 'reference_quirk'")
    numeric = set(dom.canonical(numeric))
    rng = np.random.default_rng(seed)
    rc, sc = _columns(real), _columns(synthetic)
    observed = [np.unique(c) for c in rc]
    d, s = len(dom), min(3, len(dom))
    errs = []
    for _ in range(queries):
        attrs = rng.choice(d, size=s, replace=False)
        mr = np.ones(len(real), dtype=bool)
        ms = np.ones(len(synthetic), dtype=bool)
        for step, a in enumerate(attrs):
            if dom.attrs[a] in numeric:
                lo, hi = float(observed[a][0]), float(observed[a][-1])
                x, y = sorted(rng.uniform(lo, hi, size=2))
                mr &= (rc[a] >= x) & (rc[a] <= y)
                ms &= (sc[a] >= x) & (sc[a] <= y)
            else:
                v = rng.choice(observed[a])
                mr &= rc[a] == v
                ms &= sc[a] == v
            if mode == "reference_quirk" or step == s - 1:
                errs.append(abs(np.count_nonzero(mr) / len(real) - np.count_nonzero(ms) / len(synthetic)))
    return float(np.mean(errs))


def conditional_query_error(real: Dataset, synthetic: Dataset, per_pair: bool = False):
    """Conditional (GroupBy) query error, in [0, 1] (Chen et al. §8.3; exact formula not published).

    For every ordered pair (key K, attribute A): group the rows by K and compare the frequency
    distribution of A inside each group, ``Σ_k P_real(K=k) · ½‖P_real(A|K=k) − P_syn(A|K=k)‖₁``;
    a key group present in the real table but empty in the synthetic one counts as TV 1 (the
    GroupBy answer is missing). Averaged over all ordered pairs. [DEC: SPEC §11.2 marks the formula
    as unrecoverable; this is the library's definition.] With ``per_pair`` returns
    ``(mean, {(K, A): value})``.
    """
    pair = _Pair(real, synthetic)
    dom = pair.domain
    vals: dict[tuple[str, str], float] = {}
    for i, j in itertools.combinations(range(len(dom)), 2):
        p, q = pair.pair2d(i, j)
        for key, P, Q, (ki, ai) in ((0, p, q, (i, j)), (1, p.T, q.T, (j, i))):
            pk, qk = P.sum(axis=1), Q.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                cp = P / pk[:, None]
                cq = Q / qk[:, None]
            tv = np.where(qk > 0, 0.5 * np.abs(np.nan_to_num(cp) - np.nan_to_num(cq)).sum(axis=1), 1.0)
            vals[(dom.attrs[ki], dom.attrs[ai])] = float(np.sum(pk * tv))
    if not vals:
        raise ValueError("conditional queries need at least two attributes")
    mean = float(np.mean(list(vals.values())))
    return (mean, vals) if per_pair else mean
