"""DP-MERF's one release (SPEC §10.6): a noisy sum of random Fourier features of the records.

Not a marginal, so it goes through the session's charged :meth:`~privmarg.measure.MeasurementSession.clipped_sum`
(each record's feature vector has norm 1 and is clipped to it anyway, so the sum's L2 sensitivity
is 1 under add/remove and 2 under replace-one). The frequencies ``W`` are public randomness. Under
add/remove the record count is private: a noisy count (a 0-way marginal) is released too and the
mean embedding is ``Σφ̃ / Ñ``; under replace-one ``N`` is public and the whole budget goes to the
embedding. The embedding is a function of the records as a multiset, i.e. of the full joint
marginal, which is what :meth:`MERFSelector.supporting_cliques` names.
"""

from __future__ import annotations

import math

import numpy as np

from ..core import Domain
from ..privacy import gaussian_sigma
from ..privacy.rdp import sgm_l2
from .base import Context, Selection, check_fraction


class MERFSelector:
    """Release the records' mean embedding in ``features`` random Fourier features of bandwidth
    ``bandwidth`` (ℓ, on one-hot records; default ``√(d/4)``).

    Privacy: exactly ``ctx.rho`` zCDP: under add/remove ``count_share·ρ`` for the count (σ = 1/√(2ρ_N))
    and the rest for the embedding sum (σ = 1/√(2ρ_E)); under replace-one all of it for the sum
    (σ = 2/√(2ρ))."""

    name = "dpmerf"
    reads_records = True  # through the session's charged sums; a row source, or the full joint marginal

    def __init__(self, features: int = 1000, bandwidth: float | None = None, count_share: float = 0.05):
        if features < 2 or features % 2:
            raise ValueError(f"features must be an even number >= 2, got {features}")
        self.features = int(features)
        self.bandwidth = bandwidth
        self.count_share = check_fraction("count_share", count_share)

    def supporting_cliques(self, domain: Domain) -> list[tuple[str, ...]]:
        return [tuple(domain.attrs)]  # a function of the whole records (their full joint marginal)

    def run(self, session, ctx: Context) -> Selection:
        import torch

        from ..generate.dpmerf import code_features

        dom = session.domain
        rho = ctx.rho
        count = ctx.total
        if count is None:  # add/remove: N is private
            rho_n = self.count_share * rho
            m = session.measure((), gaussian_sigma(rho_n, 1.0), what="record count")
            count = max(1.0, float(m.y[0]))
            rho -= rho_n
        ell = self.bandwidth if self.bandwidth is not None else math.sqrt(len(dom) / 4.0)
        K = int(sum(dom.shape))
        W = np.random.default_rng(session.public_seeds(1)[0]).normal(0.0, 1.0 / ell, size=(K, self.features // 2))
        Wt = torch.as_tensor(W, dtype=torch.float64)
        sigma = gaussian_sigma(rho, sgm_l2(session.neighbour, 1.0))
        total = session.clipped_sum(lambda codes: code_features(codes, Wt, dom), 1.0, sigma,
                                    what=f"mean embedding ({self.features} random Fourier features)")
        ctx.progress("released the mean embedding")
        return Selection(list(session.measurements), dom, released=list(session.measurements),
                         extra={"sigma": sigma, "count": count},
                         hints={"embedding": total / count, "frequencies": W, "count": count})
