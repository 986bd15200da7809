"""Codes → raw values: a value within each row's bin (leaf by leaf in adaptive bins, positions from a
Gaussian copula of the codes), atoms exactly, integers rounded, datetimes and categories restored.
Post-processing of the codes alone: free."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..schema.values import DATETIME_UNITS
from .codec import ColumnCodec


def _free_integers(left: np.ndarray, right: np.ndarray, atoms: np.ndarray, u: np.ndarray | None) -> np.ndarray:
    """An integer of ``left .. right-1`` that is not an atom, per row: the ``floor(u·n)``-th of the
    ``n`` such integers (``u=None``: the middle one); where every integer is an atom, one of them."""
    a = np.asarray(atoms, dtype=float)
    width = right - left
    start = np.searchsorted(a, left, side="left")
    n = width - (np.searchsorted(a, right, side="left") - start)
    none = n <= 0
    m = np.where(none, width, n)
    r = np.floor((m - 1) / 2 + 0.5) if u is None else np.minimum(np.floor(u * m), m - 1)
    v = left + r
    if len(a) and not none.all():
        for _ in range(len(a) + 1):  # the r-th free integer: skip the atoms at or below it (monotone)
            nxt = np.where(none, v, left + r + np.searchsorted(a, v, side="right") - start)
            if np.array_equal(nxt, v):
                break
            v = nxt
    return v


def _code_order(c: ColumnCodec) -> np.ndarray:
    """The value order of a numeric column's main codes (bins by their left edge, atoms by value; an
    atom at a bin's left edge first): ``order[r]`` is the code at rank ``r``."""
    n_bins = len(c.edges) - 1
    key = np.r_[c.edges[:-1], c.atoms]
    atom_last = np.r_[np.ones(n_bins), np.zeros(len(c.atoms))]
    return np.lexsort((atom_last, key))


def _truncnorm(mu: np.ndarray, sd: float, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of ``N(mu, sd²)`` truncated to ``[a, b]`` (inverse CDF, on the side of the
    smaller tail so that far-tail intervals keep their precision)."""
    from scipy.special import ndtr, ndtri

    lo, hi = (a - mu) / sd, (b - mu) / sd
    flip = lo > 0  # both bounds in the upper tail: draw the mirror image
    lo, hi = np.where(flip, -hi, lo), np.where(flip, -lo, hi)
    p_lo, p_hi = ndtr(lo), ndtr(hi)
    x = ndtri(p_lo + rng.random(len(mu)) * (p_hi - p_lo))
    x = np.clip(np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0), lo, hi)
    x = np.clip(np.where(np.isfinite(x), x, np.where(np.isfinite(lo), lo, hi)), lo, hi)
    return mu + sd * np.where(flip, -x, x)


#: Gibbs sweeps per round and rounds (re-estimating the correlations) of :func:`_copula_positions`
COPULA_SWEEPS = 4


COPULA_ROUNDS = 3


def _copula_positions(codecs: list[ColumnCodec], codes: np.ndarray, rng: np.random.Generator) -> dict[int, np.ndarray]:
    """Within-bin positions in ``[0, 1)`` of the numeric columns, jointly drawn (free post-processing
    of the synthetic codes; nothing else is read).

    Each numeric column's codes, in value order, split ``[0, 1]`` into intervals of their share of the
    rows (its empirical CDF); a latent standard normal ``z`` per cell lies in the normal image of its
    row's interval (missing: unconstrained). The latent correlation matrix is estimated from the
    codes (the correlation of their normal scores), then refined: Gibbs sweeps draw each ``z`` from
    its conditional given the row's other columns, truncated to its interval, and the correlation is
    re-estimated from the draws (a stochastic EM for the latent Gaussian copula). A row's position in
    its bin is where ``Φ(z)`` falls inside its interval; the marginal of the codes is untouched.
    Returns ``{column index: positions}`` for columns with bins (none when fewer than two)."""
    from scipy.special import ndtr, ndtri

    cols = [j for j, c in enumerate(codecs) if c.edges is not None]
    if len(cols) < 2:
        return {}
    lo_p, hi_p, a, b = [], [], [], []
    for j in cols:
        c = codecs[j]
        code = codes[:, j]
        miss = code >= c.n_main
        order = _code_order(c)
        rank = np.empty(c.n_main, dtype=np.int64)
        rank[order] = np.arange(c.n_main)
        share = np.bincount(rank[np.where(miss, 0, code)][~miss], minlength=c.n_main) / max(int((~miss).sum()), 1)
        cum = np.r_[0.0, np.cumsum(share)]
        r = rank[np.where(miss, 0, code)]
        lo, hi = np.where(miss, 0.0, cum[r]), np.where(miss, 1.0, np.minimum(cum[r + 1], 1.0))
        lo_p.append(lo)
        hi_p.append(hi)
        a.append(ndtri(lo))
        b.append(ndtri(hi))
    lo_p, hi_p, a, b = (np.column_stack(x) for x in (lo_p, hi_p, a, b))
    z = np.nan_to_num(ndtri((lo_p + hi_p) / 2), nan=0.0)  # normal scores (missing: 0, the mean)
    m = len(cols)
    for _ in range(COPULA_ROUNDS):
        with np.errstate(invalid="ignore", divide="ignore"):  # a constant column: no correlation (0)
            corr = np.nan_to_num(np.corrcoef(z, rowvar=False), nan=0.0)
        np.fill_diagonal(corr, 1.0)
        w, v = np.linalg.eigh(corr)  # nearest positive definite, unit diagonal
        corr = (v * np.maximum(w, 1e-3)) @ v.T
        d = np.sqrt(np.diag(corr))
        prec = np.linalg.inv(corr / np.outer(d, d))
        for _ in range(COPULA_SWEEPS):
            for k in range(m):
                mu = -(z @ prec[k] - prec[k, k] * z[:, k]) / prec[k, k]
                z[:, k] = _truncnorm(mu, 1.0 / math.sqrt(prec[k, k]), a[:, k], b[:, k], rng)
    width = hi_p - lo_p
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(width > 0, (ndtr(z) - lo_p) / np.where(width > 0, width, 1.0), 0.5)
    u = np.clip(np.nan_to_num(u, nan=0.5), 0.0, np.nextafter(1.0, 0.0))
    return {j: u[:, i] for i, j in enumerate(cols)}


def _round_within(v: np.ndarray, left, right, decimals: int | None, where: np.ndarray,
                  atoms: np.ndarray = np.array([])) -> np.ndarray:
    """``v`` rounded to ``decimals`` places where ``where``, staying inside each row's bin
    ``[left, right)`` and off the column's ``atoms`` (values with codes of their own, which a rule
    may tell apart from the bin's): the nearest such decimal, else the next one inward, else ``v``
    as it was (a bin narrower than the step holds no such decimal). ``None``: unchanged."""
    if decimals is None or not where.any():
        return v
    step = 10.0 ** -decimals
    left = np.broadcast_to(left, v.shape)
    right = np.broadcast_to(right, v.shape)

    def inside(r):
        ok = (r >= left) & ((r < right) | (right <= left) | (r == v))
        return ok & ~np.isin(r, atoms) if len(atoms) else ok

    r = np.round(v, decimals)
    bad = ~inside(r)
    up, down = np.ceil(v / step) * step, np.floor(v / step) * step
    r = np.where(bad & inside(up), up, r)
    bad = ~inside(r)
    r = np.where(bad & inside(down), down, r)
    r = np.where(inside(r), np.round(r, decimals), v)
    return np.where(where, r, v)


def _decode_column(c: ColumnCodec, code: np.ndarray, rng: np.random.Generator, midpoint: bool,
                   exact: np.ndarray | None = None, pos: np.ndarray | None = None) -> pd.Series:
    """One column's values from its codes; ``pos``: the rows' positions within their bins in
    ``[0, 1)`` (monotone: a larger position never gives a smaller value; default independent uniform)."""
    spec = c.spec
    n = len(code)
    miss = code == c.missing_code if c.missing_code is not None else np.zeros(n, dtype=bool)
    ok = ~miss
    j = code[ok]
    if c.edges is not None and not midpoint:
        pos = rng.random(len(j)) if pos is None else np.asarray(pos, dtype=float)[ok]
    if c.edges is not None:
        n_bins = len(c.edges) - 1
        is_atom = j >= n_bins
        jb = np.minimum(j, n_bins - 1)
        left, right = c.edges[jb], c.edges[jb + 1]
        if exact is not None:  # given values (conditions), kept as they are
            v = np.asarray(exact, dtype=float)[ok]
            if spec.lattice:
                v = np.round(v)
        if c.leaf_edges is not None and not midpoint and exact is None:  # a leaf in proportion to its noisy count
            leaf = np.searchsorted(c.leaf_cum, jb + pos, side="right")
            leaf = np.minimum(leaf, len(c.leaf_edges) - 2)
            left, right = c.leaf_edges[leaf], c.leaf_edges[leaf + 1]
            prev = np.where(leaf > 0, c.leaf_cum[np.maximum(leaf - 1, 0)], 0.0)
            span = c.leaf_cum[leaf] - prev  # the rest of the position places the value inside the leaf
            pos = np.clip((jb + pos - prev) / np.where(span > 0, span, 1.0), 0.0, np.nextafter(1.0, 0.0))
            if not spec.lattice:  # a draw from the leaf's (possibly decaying) density
                sc = c.leaf_scale[leaf]
                w = right - left
                u = pos
                a = np.abs(sc)
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    off = np.where(np.isfinite(a), -a * np.log1p(u * np.expm1(-w / a)), u * w)
                off = np.clip(np.nan_to_num(off, nan=0.0), 0.0, w)
                v = np.where(sc < 0, right - off, left + off)
                v = _round_within(v, left, right, spec.output_decimals, ~is_atom, c.atoms)
                v[is_atom] = c.atoms[j[is_atom] - n_bins]
                out = np.full(n, np.nan)
                out[ok] = np.clip(v, spec.lo, spec.hi)
                return pd.Series(out, dtype="float64")
        if spec.lattice:  # bin j holds the integers left .. right-1, less the atoms (codes of their own)
            if exact is None:
                v = _free_integers(left, right, c.atoms, None if midpoint else pos)
            if is_atom.any() and exact is None:
                v[is_atom] = c.atoms[j[is_atom] - n_bins]
            v = v.astype(np.int64)
            if spec.type == "integer":
                if spec.missing:
                    arr = pd.array(np.zeros(n, dtype=np.int64), dtype="Int64")
                    arr[ok] = v
                    arr[miss] = pd.NA
                    return pd.Series(arr)
                return pd.Series(v, dtype="int64")
            ns = np.full(n, np.datetime64("NaT"), dtype="datetime64[ns]")
            ns[ok] = (v * DATETIME_UNITS[spec.unit]).astype("datetime64[ns]")
            return pd.Series(ns, dtype="datetime64[ns]")
        if exact is None:
            v = (left + right) / 2 if midpoint else left + pos * (right - left)
            v = _round_within(v, left, right, spec.output_decimals, ~is_atom, c.atoms)
        if is_atom.any() and exact is None:
            v[is_atom] = c.atoms[j[is_atom] - n_bins]
        out = np.full(n, np.nan)
        out[ok] = np.clip(v, spec.lo, spec.hi)
        return pd.Series(out, dtype="float64")
    base = np.empty(len(j), dtype=np.int64)
    kept = j < len(c.kept)
    base[kept] = c.kept[j[kept]]
    grouped = ~kept
    if exact is not None:
        base = np.asarray(exact, dtype=np.int64)[ok]
    elif grouped.any():
        base[grouped] = c.group[rng.integers(0, len(c.group), int(grouped.sum()))]
    labels = np.empty(len(c.labels()), dtype=object)
    labels[:] = c.labels()
    obj = np.full(n, None, dtype=object)
    obj[ok] = labels[base]
    dtype = spec.dtype()
    if dtype in ("int64", "bool", "float64") and not miss.any():
        return pd.Series(obj.tolist(), dtype=dtype)
    return pd.Series(obj, dtype=dtype)
