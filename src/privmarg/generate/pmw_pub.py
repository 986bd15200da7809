"""PMW^Pub's model (Liu, Vietri, Steinke, Ullman, Wu 2021): a reweighting of the public records.

The synthetic distribution lives on the public records: ``A(x) = w_x`` over the distinct public
rows, starting from their public frequencies. Each fit runs multiplicative-weights updates
(exponentiated gradient) on ``L(w) = Σ_r w̄_r ‖A_r(w) − â_r‖₂²``, the squared error of the model's
normalised marginals against the measured ones (``â_r`` = noisy counts / N, clipped to [0, 1]);
``w̄_r`` the measurements' loss weights over their mean. An update is
``w_x ← w_x·exp(−η ∂L/∂w_x)``, renormalised; the step ``η`` grows by half after an improving step
and halves (the step retried) otherwise, so the loss never increases. A warm fit continues from
the last weights (the MW iterates of earlier rounds). Records the data cannot contain (structural
zeros) get weight 0. Post-processing only: no privacy cost (the public records are public).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Domain, Measurement, StructuralZero
from .records import RecordsModel, public_records
from .targets import marginal_targets, resolve_total


class PublicReweighting:
    """PMW^Pub's generator: ``iters`` multiplicative-weights steps per fit, first step ``eta``.
    It needs a start built from public records (:meth:`pretrain`, or ``warm`` a weighted
    :class:`~privmarg.generate.records.RecordsModel`): it cannot make records of its own.
    Post-processing only: no privacy cost."""

    name = "pmw-pub"

    def __init__(self, iters: int = 100, eta: float = 1.0):
        if isinstance(iters, bool) or not isinstance(iters, int) or iters < 0:
            raise ValueError(f"iters must be an integer >= 0, got {iters!r}")
        if not eta > 0:
            raise ValueError(f"eta must be positive, got {eta}")
        self.iters, self.eta = iters, float(eta)

    def get_params(self) -> dict:
        return {"iters": self.iters, "eta": self.eta}

    def pretrain(self, public: Any, domain: Domain, cliques: Sequence[Sequence[str]], total: float,
                 zeros: Sequence[StructuralZero] = ()) -> RecordsModel:
        """The start: the distinct public records weighted by their frequency (records in a
        structural-zero cell dropped), standing for ``total`` records. ``public`` is a source with
        ``records()`` (a table, not precomputed marginals). Free: public data."""
        if not hasattr(public, "records"):
            raise ValueError("PMW^Pub reweights public records: give the public data as a table, "
                             "not as precomputed marginals")
        start = public_records(public, domain, total, zeros)
        if start is None:
            raise ValueError("the public data must be a non-empty table over the domain with a record outside "
                             "the structural zeros: nothing to reweight")
        return start

    def generate(self, measurements: Sequence[Measurement], domain: Domain, *, zeros: Sequence[StructuralZero] = (),
                 total: float | None = None, warm: Any = None, seed: Any = None, progress=None,
                 start: Any = None, **extra: Any) -> RecordsModel:
        """Reweight ``warm``'s records to the measurements (deterministic; ``seed`` unused); when
        ``warm`` is not a weighted table of records (a selection whose loop is another model, JAM's),
        ``start``'s (a selection's hint: the public records)."""
        if not _weighted_records(warm, domain):
            warm = start
        if not _weighted_records(warm, domain):
            raise ValueError("PMW^Pub needs a start built from public records (PublicReweighting.pretrain)")
        t0 = time.perf_counter()
        measurements = list(measurements)
        targets = marginal_targets(measurements, domain)
        N = resolve_total(measurements, domain, total) if any(m.sigma is not None for m in measurements) \
            or total is not None else warm.total
        X = warm.codes_
        w = warm.weights.copy()
        if not targets or self.iters == 0:
            return RecordsModel(domain, N, X, w, info={"iters": 0})
        sizes = np.array([domain.size(t.attrs) for t in targets])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        cells = np.column_stack([np.ravel_multi_index(tuple(X[:, domain.attrs.index(a)] for a in t.attrs),
                                                      domain.sizes(t.attrs)) for t in targets]) + offsets
        wt = np.array([t.weight for t in targets], dtype=float)
        wt = wt / wt.mean() if wt.mean() > 0 else np.ones(len(targets))
        cell_w = np.repeat(wt, sizes)
        target = np.concatenate([t.y for t in targets]) / N  # unclipped: clipping biases empty cells up
        K = len(targets)

        def loss_grad(w, grad=True):
            r = np.bincount(cells.ravel(), weights=np.repeat(w, K), minlength=target.size) - target
            loss = float((cell_w * r**2).sum())
            return (loss, 2.0 * (cell_w * r)[cells].sum(axis=1)) if grad else (loss, None)

        eta = float(warm.fit_info.get("eta", self.eta))
        loss, g = loss_grad(w)
        first = loss
        for _ in range(self.iters):
            for _try in range(30):
                step = -eta * (g - g.min())  # shift: same update after renormalising, no overflow
                w_new = w * np.exp(step)
                w_new /= w_new.sum()
                new_loss, _ = loss_grad(w_new, grad=False)
                if new_loss <= loss:
                    break
                eta *= 0.5
            else:
                break
            w, eta = w_new, eta * 1.5
            loss, g = loss_grad(w)
        if progress is not None:
            progress(f"PMW^Pub: loss {first:.4g} -> {loss:.4g}")
        return RecordsModel(domain, N, X, w, info={"iters": self.iters, "loss": loss, "eta": eta,
                                                  "seconds": time.perf_counter() - t0})

    def model_size_mb(self, domain: Domain, cliques) -> None:
        return None  # weights over the public records: no model-size limit

    def __repr__(self) -> str:
        return f"PublicReweighting(iters={self.iters}, eta={self.eta})"


def _weighted_records(model: Any, domain: Domain) -> bool:
    """Whether ``model`` is a weighted table of records over ``domain`` (a start to reweight)."""
    return isinstance(model, RecordsModel) and model.weights is not None and model.domain == domain
