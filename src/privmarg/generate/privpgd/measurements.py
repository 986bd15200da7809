"""PrivPGD's targets from the released measurements: merged per clique, made consistent on shared
margins, weighted by their noise; and records moved out of structural zeros. Post-processing."""

from __future__ import annotations

import math

import numpy as np

from ...core import Domain, Measurement, StructuralZero
from ..targets import marginal_targets
from .grouped import consistent_mixed


def _repair_zeros(codes: np.ndarray, Z: np.ndarray, domain: Domain, zeros: list[StructuralZero]) -> np.ndarray:
    """Move records that landed in a structural-zero cell to the allowed cell of that zero's
    attributes nearest to their particle (squared distance in the embedded space). The projection
    gives those cells no mass, but rounding particles to the grid can still land there."""
    if not zeros:
        return codes
    codes = codes.copy()
    for _ in range(3):  # zeros on overlapping attributes: a repair can break another; repeat
        clean = True
        for z in zeros:
            idx = [domain.attrs.index(a) for a in z.attrs]
            mask = z.mask.reshape(domain.sizes(z.attrs))
            bad = np.flatnonzero(mask[tuple(codes[:, i] for i in idx)])
            if bad.size == 0:
                continue
            clean = False
            allowed = np.argwhere(~mask)  # (cells, len(attrs)) of codes
            if allowed.size == 0:
                raise ValueError(f"structural zeros on {z.attrs} forbid every cell")
            sizes = np.array([domain[a] for a in z.attrs])
            centres = (2 * allowed + 1) / (2 * sizes)  # the (2x-1)/(2k) embedding, 0-based codes
            pos = Z[np.ix_(bad, idx)]
            d2 = ((pos[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
            codes[np.ix_(bad, idx)] = allowed[d2.argmin(axis=1)]
        if clean:
            break
    return codes


def _consistent(merged, domain: Domain) -> list[tuple[tuple[str, ...], np.ndarray, float]]:
    """The measurements made to agree on their totals and on every shared attribute (least squares
    under their noise, PrivSyn's consistency step).

    First every marginal's total becomes the inverse-variance average of the totals (a marginal of
    ``n`` cells with noise ``σ`` per cell has a total of variance ``n σ²``), spread evenly over its
    cells. Then, per attribute ``a`` of ``k`` values, each marginal ``c`` holding it implies a 1-way
    marginal with per-cell variance ``σ_c² n_c / k``; their inverse-variance average replaces each,
    the difference spread evenly over the ``n_c / k`` cells behind each value. With equal totals,
    shifting one attribute's margin leaves every other attribute's margin as it was, so one pass
    over the attributes makes all of them agree. Returns ``(attrs, y, σ)`` as given (σ unchanged).
    The fine case of :func:`~.grouped.consistent_mixed`."""
    ys = consistent_mixed(list(merged), [domain.sizes(a) for a, _, _ in merged], domain, {})
    return [(a, y, s) for (a, _, s), y in zip(merged, ys)]


def _marginal_weights(sigmas, cells, total: float, power: float) -> np.ndarray:
    """Per marginal: ``(n_c σ_c² / N²)^(-power)``, normalised to mean 1 (``power = 0``: all 1, the paper).

    ``n_c σ_c² / N²`` is the variance of the noise in the marginal's CDF along a direction (the sum of
    up to ``n_c`` cells' noise, normalised by ``N``): a large marginal measured with the same σ tells
    the particles less per cell. Uses only the noise scales and the public domain (no data)."""
    if power == 0:
        return np.ones(len(cells))
    v = np.array([n * s * s for n, s in zip(cells, sigmas)], dtype=float) / total**2
    v = np.maximum(v, 1e-300)
    w = v ** (-power)
    return w / w.mean()


def _one_way(domain: Domain, cliques, probs) -> list[np.ndarray]:
    """Per attribute: the mean of the 1-way marginals implied by the projected cliques containing it
    (uniform when none does)."""
    acc = {a: [] for a in domain.attrs}
    for c, u in zip(cliques, probs):
        arr = np.asarray(u).reshape(domain.sizes(c))
        for ax, a in enumerate(c):
            acc[a].append(arr.sum(axis=tuple(i for i in range(len(c)) if i != ax)))
    out = []
    for a in domain.attrs:
        p = np.mean(acc[a], axis=0) if acc[a] else np.ones(domain[a])
        out.append(np.maximum(p, 0) / np.maximum(p, 0).sum())
    return out


def _as_measurements(measurements) -> list[Measurement]:
    """:class:`Measurement` objects (tuples ``(attrs, y, sigma)`` accepted), no attribute repeated."""
    ms = [m if isinstance(m, Measurement) else Measurement(*m) for m in measurements]
    for m in ms:
        if len(set(m.attrs)) != len(m.attrs):
            raise ValueError(f"measurement on {m.attrs}: repeated attribute")
    return ms


def _merge_measurements(measurements, domain: Domain) -> list[tuple[tuple[str, ...], np.ndarray, float]]:
    """:func:`~privmarg.generate.targets.marginal_targets` (repeated cliques merged by their weights,
    those of loss weight 0 left out) with each merged weight as a noise level ``1/√(2w)``, for
    estimating N when it is not public."""
    return [(t.attrs, t.y, 1.0 / math.sqrt(2.0 * t.weight)) for t in marginal_targets(_as_measurements(measurements), domain)]


def _valid_cells(domain: Domain, attrs: tuple[str, ...], zeros: list[StructuralZero]) -> np.ndarray | None:
    """Mask of cells of the (canonical) clique ``attrs`` not declared impossible by any zero inside it."""
    ok = None
    target = domain.project(attrs)
    for z in zeros:
        if not set(z.attrs) <= set(attrs):
            continue
        full = z.factor(domain).expand(target).flat
        ok = ~full if ok is None else ok & ~full
    return ok
