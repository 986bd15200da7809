"""Domain-specific constraints for PrivPGD (SPEC §8.5, §8.7).

A constraint is a differentiable penalty ``R(Z) -> scalar tensor`` on the particles ``Z``
(``m × d``, columns in domain order, values in the embedding ``[0,1]``), added to the PrivPGD
objective as ``lambda · R(Z)``. Anything callable works with
:meth:`~privmarg.generate.privpgd.privpgd.PrivPGDGenerator.fit`. A constraint that needs a statistic of
the private data also has ``release(data, accountant, rho, rng, total)``: it must obtain that
statistic through a charged privacy primitive, and the :class:`~privmarg.presets.PrivPGD`
mechanism calls it with its own accountant, so the total stays within budget (composition).

Shipped example (paper App. B): protect a linear thresholding statistic,
:class:`ThresholdConstraint`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ...privacy import cdp_rho
from .privpgd import embed_codes, grid_centres

__all__ = ["PenaltyConstraint", "ThresholdConstraint", "smoothed_threshold"]


def smoothed_threshold(Z: torch.Tensor, theta: torch.Tensor, b: torch.Tensor | float, s: float = 5.0) -> torch.Tensor:
    """``s-thrsh(Z) = mean_i sigmoid(s(<theta, Z_i> - b))`` (App. B); ``theta`` ``(d,)`` or ``(q, d)``.

    Returns a scalar for a single ``theta``, else a vector of ``q`` statistics.
    """
    return torch.sigmoid(s * (Z @ theta.T - b)).mean(dim=0)


class PenaltyConstraint:
    """Wrap a user penalty ``R(Z)`` that needs no private data (nothing to release)."""

    def __init__(self, penalty: Callable[[torch.Tensor], torch.Tensor]):
        if not callable(penalty):
            raise TypeError("penalty must be callable")
        self._penalty = penalty

    def penalty(self, Z: torch.Tensor) -> torch.Tensor:
        return self._penalty(Z)

    __call__ = penalty


class ThresholdConstraint:
    """Push the linear thresholding statistic of the output away from its DP estimate (App. B).

    ``R(Z) = scale / (c + ||s-thrsh(Z) - ŝ||²)`` with ``scale = 0.01``, ``c = 1e-4``, ``s = 5``, where
    ``s-thrsh(Z) = mean_i sigmoid(s(<theta, Z_i> - b))`` in embedding space and ``ŝ`` is a DP
    estimate of ``s-thrsh(Emb(D))``. Minimising ``lambda·R`` moves the statistic away from ``ŝ``.

    ``theta``: ``d`` weights (or ``q × d`` for several statistics) over the domain's attributes in
    order, or a dict attribute → weight (others 0) resolved against the domain at release.
    ``estimate``: a known ``ŝ`` (e.g. public); then nothing is released. Otherwise
    :meth:`release` spends ``rho`` zCDP on the Gaussian mechanism applied to the sum
    ``sum_i sigmoid(...)`` (L2 sensitivity 1 under both neighbouring relations: every summand lies
    in (0, 1)), divided by the record count. Budget: by default the release is charged
    ``cdp_rho(epsilon, delta)`` with the paper's ``(0.5, 2e-6)``; the mechanism gives the rest of
    its zCDP budget to the marginals (more than the paper's ``(2.0, 8e-6)``, since zCDP composes
    more tightly than the paper's basic composition; total ``(2.5, 1e-5)``). Pass ``rho`` to set
    the zCDP cost directly.
    """

    def __init__(self, theta: Any, b: float, s: float = 5.0, *, estimate: float | np.ndarray | None = None,
                 epsilon: float = 0.5, delta: float = 2e-6, rho: float | None = None,
                 scale: float = 0.01, c: float = 1e-4):
        if s <= 0 or scale <= 0 or c <= 0:
            raise ValueError("s, scale and c must be positive")
        self.theta = theta
        self.b = float(b)
        self.s = float(s)
        self.scale = float(scale)
        self.c = float(c)
        self.epsilon = epsilon
        self.delta = delta
        self.rho = rho
        self.estimate = None if estimate is None else np.atleast_1d(np.asarray(estimate, dtype=float))
        self.estimate_ = self.estimate
        if not isinstance(theta, dict):
            self._theta_np = np.atleast_2d(np.asarray(theta, dtype=float))

    # -- budget / release ---------------------------------------------------------------------
    @property
    def needs_release(self) -> bool:
        """True unless a (public) ``estimate`` was given: then fitting must release ``ŝ``."""
        return self.estimate is None

    def rho_cost(self) -> float:
        """zCDP charged by :meth:`release`: ``rho`` if given, else ``cdp_rho(epsilon, delta)``."""
        if self.rho is not None:
            return float(self.rho)
        return cdp_rho(self.epsilon, self.delta)

    def resolve(self, domain) -> np.ndarray:
        """``theta`` as a ``q × d`` array over ``domain``'s attributes."""
        if isinstance(self.theta, dict):
            th = np.zeros(len(domain))
            for a, w in self.theta.items():
                th[domain.attrs.index(a)] = float(w)
            th = th[None, :]
        else:
            th = np.atleast_2d(np.asarray(self.theta, dtype=float))
        if th.shape[1] != len(domain):
            raise ValueError(f"theta has {th.shape[1]} weights, the domain {len(domain)} attributes")
        self._theta_np = th
        return th

    def statistic_of_codes(self, codes: np.ndarray, domain) -> np.ndarray:
        """Smoothed statistic of integer-coded records (their embedding); private if ``codes`` are."""
        th = self.resolve(domain)
        x = embed_codes(codes, domain.shape) @ th.T
        return (1.0 / (1.0 + np.exp(-self.s * (x - self.b)))).mean(axis=0)

    def exact_statistic_of_codes(self, codes: np.ndarray, domain) -> np.ndarray:
        """The unsmoothed ``mean_i 1[<theta, Emb(x_i)> > b]`` (for evaluation)."""
        th = self.resolve(domain)
        return (embed_codes(codes, domain.shape) @ th.T > self.b).mean(axis=0)

    def release(self, session, rho: float | None, total: float) -> np.ndarray:
        """DP estimate ``ŝ`` through ``session`` (a :class:`~privmarg.measure.MeasurementSession`):
        the Gaussian mechanism on the sum (sensitivity 1 per statistic), divided by ``total``.

        The sum is read off the private marginal on the attributes with a non-zero weight (every
        record of a cell contributes the same summand), so no row is touched.
        """
        rho = self.rho_cost() if rho is None else float(rho)
        dom = session.domain
        th = self.resolve(dom)
        support = tuple(a for j, a in enumerate(dom.attrs) if np.any(th[:, j] != 0))
        if dom.size(support) > 10**7:
            raise ValueError(f"the constraint's attributes {list(support)} span {dom.size(support)} cells: "
                             "too many to count (give weights on fewer attributes)")
        if support:
            (counts,) = session.answers([support])
            x = grid_centres(dom.sizes(support)) @ th[:, [dom.attrs.index(a) for a in support]].T
        else:
            counts, x = np.array([session.source.count()]), np.zeros((1, th.shape[0]))
        sums = counts @ (1.0 / (1.0 + np.exp(-self.s * (x - self.b))))  # private
        sigma = 1.0 / math.sqrt(2.0 * rho) * math.sqrt(th.shape[0])  # q statistics jointly: Δ₂ = √q
        noisy = session.gaussian(sums, sigma, math.sqrt(th.shape[0]),
                                 what="PrivPGD constraint: thresholding statistic")
        self.estimate_ = noisy / float(total)
        self.sigma_ = sigma / float(total)
        return self.estimate_

    # -- penalty ------------------------------------------------------------------------------
    def statistic(self, Z: torch.Tensor) -> torch.Tensor:
        th = torch.as_tensor(self._theta_np, dtype=Z.dtype, device=Z.device)
        return smoothed_threshold(Z, th, self.b, self.s)

    def penalty(self, Z: torch.Tensor) -> torch.Tensor:
        if self.estimate_ is None:
            raise RuntimeError("ThresholdConstraint has no estimate: call release(...) or pass estimate=")
        if not hasattr(self, "_theta_np"):
            raise RuntimeError("ThresholdConstraint: theta given as a dict; call resolve(domain) first")
        est = torch.as_tensor(self.estimate_, dtype=Z.dtype, device=Z.device)
        diff = self.statistic(Z) - est
        return self.scale / (self.c + diff.square().sum())

    __call__ = penalty
