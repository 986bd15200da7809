"""PrivPGD end to end (SPEC §8), and pairing any marginal selector with the PrivPGD generator.

* :class:`PrivPGD` — measure all k-way marginals (default 2-way) with the Gaussian mechanism,
  optionally release a constraint's statistic, then run
  :class:`~privmarg.generators.privpgd.PrivPGDGenerator`.
* :class:`WithGenerator` — fit a selector (AIM, MST, MWEM, ...) as usual, then regenerate the
  records from its ``measurements_`` with PrivPGD instead of sampling its graphical model
  (post-processing: no extra privacy cost). Example: ``WithGenerator(AIM(2.5, 1e-5,
  workload="all-2way"), PrivPGDGenerator())``.

torch is imported only when fitting, so importing this module does not need it.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dataset import Dataset
from ..domain import Domain
from ..estimation import Measurement, estimate_total
from ..privacy import marginal_l2
from .base import Mechanism


def _generator_cls():
    from ..generators.privpgd import PrivPGDGenerator

    return PrivPGDGenerator


def _gen_seed(rng: np.random.Generator) -> np.random.SeedSequence:
    """A generator seed drawn from the mechanism's sampling stream (data-independent)."""
    return np.random.SeedSequence(int(rng.integers(2**63)))


class _ParticleSampling:
    """Sampling from a fitted PrivPGD generator's particles (no graphical model)."""

    def _check_fitted(self):
        if not hasattr(self, "generator_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit(data, domain) first")

    def default_rows(self) -> int:
        self._check_fitted()
        return int(self.generator_.codes_.shape[0])

    def sample_codes(self, rows: int | None = None) -> np.ndarray:
        self._check_fitted()
        return self.generator_.sample_codes(rows, self.sample_rng_)


class PrivPGD(_ParticleSampling, Mechanism):
    """PrivPGD (Donhauser et al. 2024): all ``degree``-way marginals + particle gradient descent.

    Privacy (SPEC §8.1): replace-one by default (``N`` public). The marginals ``𝒮`` are measured
    with one Gaussian mechanism each at ``σ = Δ₂(|𝒮|)/√(2ρ_m)`` (``Δ₂ = √(2|𝒮|)`` under replace-one,
    so ``σ = √(|𝒮|/ρ_m)``), spending ``ρ_m`` in total. With a ``constraint`` that needs the data
    (:class:`~privmarg.generators.constraints.ThresholdConstraint`), its statistic is released
    first at its own cost ``ρ_c`` (by default ``cdp_rho(0.5, 2e-6)``, the paper's split) and
    ``ρ_m = ρ − ρ_c``. Everything after the measurements is post-processing. Total: ``rho``-zCDP.

    Parameters: ``epsilon`` (2.5), ``delta`` (1e-5) or ``rho``; ``degree`` (2) or explicit
    ``cliques``; ``constraint`` and ``constraint_strength`` (λ); generator settings
    ``n_particles`` … ``device`` (None: the generator's default, its fast CPU profile, see
    :class:`~privmarg.generators.privpgd.PrivPGDGenerator`), or a configured ``generator``, e.g.
    ``PrivPGDGenerator.paper()`` for the paper's settings (its ``constraint_strength`` is overridden
    by the one given here when a constraint is passed).

    Sampling: ``sample()`` returns the ``n_particles`` finalised particles (SPEC §8.6; by default
    ``n_particles = N``, where the paper uses 100k regardless of ``N``); ``sample(rows)`` subsamples
    (or resamples) them.
    """

    default_neighbour = "replace_one"

    def __init__(self, epsilon: float | None = 2.5, delta: float | None = 1e-5, *, degree: int = 2,
                 cliques: Sequence[Sequence[str]] | None = None, constraint: Any = None,
                 constraint_strength: float = 1.0, generator: Any = None, n_particles: int | None = None,
                 epochs: int | None = None, batch_size: int | None = None, num_projections: int | None = None,
                 lr: float | None = None, scheduler_step: int | None = None, mask_rate: float | None = None,
                 proj_iters: int | None = None, proj_num_projections: int | None = None,
                 proj_lr: float | None = None, proj_resample: int | None = None, proj_stop_tol: float | None = None,
                 device: Any = None, **kw):
        super().__init__(epsilon, delta, **kw)
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
        self.degree = degree
        self.cliques = None if cliques is None else [tuple(c) for c in cliques]
        self.constraint = constraint
        self.constraint_strength = constraint_strength
        self.generator = generator
        # None = the generator's own default (one source of truth for the fast CPU profile)
        given = dict(n_particles=n_particles, epochs=epochs, batch_size=batch_size,
                     num_projections=num_projections, lr=lr, scheduler_step=scheduler_step, mask_rate=mask_rate,
                     proj_iters=proj_iters, proj_num_projections=proj_num_projections, proj_lr=proj_lr,
                     proj_resample=proj_resample, proj_stop_tol=proj_stop_tol, device=device)
        self.generator_params = {k: v for k, v in given.items() if v is not None}
        self.generator_params["constraint_strength"] = constraint_strength
        if generator is None:
            _generator_cls()(**self.generator_params)  # validate now (needs torch)

    def _cliques(self, dom: Domain) -> list[tuple[str, ...]]:
        if self.cliques is not None:
            out = [dom.canonical(c) for c in self.cliques]
            if not out or any(not c for c in out):
                raise ValueError("cliques must be non-empty attribute tuples")
            return list(dict.fromkeys(out))
        return list(itertools.combinations(dom.attrs, min(self.degree, len(dom))))

    def _fit(self, data: Dataset) -> None:
        dom = data.domain
        acc = self.accountant_
        rho = self.rho_available_  # the budget left after any DP preprocessing
        cliques = self._cliques(dom)
        self.cliques_ = cliques
        con = copy.copy(self.constraint)  # fitted state (the released estimate) stays with this fit
        self.constraint_ = con
        release = con is not None and getattr(con, "needs_release", False)
        rho_c = con.rho_cost() if release else 0.0
        rho_m = rho - rho_c
        if not rho_m > 0:
            raise ValueError(f"the constraint's cost rho={rho_c:.6g} leaves nothing of rho={rho:.6g} for the marginals")
        # 1) all marginals, each with the same sigma; total cost rho_m
        sigma = marginal_l2(self.neighbour, len(cliques)) / math.sqrt(2 * rho_m)
        self.sigma_ = sigma
        for c in cliques:
            self.measure(data, c, sigma, what=f"PrivPGD marginal {','.join(c)}")
        self._progress(self.rho_used_, rho, f"PrivPGD: {len(cliques)} marginals measured")
        total = self.total_
        if total is None:  # add/remove: N is private, estimate it from the released marginals
            total = estimate_total(self.measurements_, dom)
        # 2) the constraint's statistic (remaining budget)
        if release:
            con.release(data, acc, rho - self.rho_used_, self.noise_rng_, total)
            self._progress(self.rho_used_, rho, "PrivPGD: constraint statistic released")
        elif con is not None and hasattr(con, "resolve"):
            con.resolve(dom)
        # 3) generation (post-processing)
        if self.generator is not None:
            gen = self.generator.clone(seed=_gen_seed(self.sample_rng_))
            if con is not None:
                gen.constraint_strength = float(self.constraint_strength)
        else:
            gen = _generator_cls()(**self.generator_params, seed=_gen_seed(self.sample_rng_))
        epochs = gen.epochs

        def on_epoch(epoch, n, loss):
            self._progress(self.rho_used_, rho, f"PrivPGD epoch {epoch}/{n}: loss {loss:.4g}")

        gen.fit(self.measurements_, dom, zeros=self.zeros_, constraint=con, total=total, progress=on_epoch)
        self.generator_ = gen
        self._progress(self.rho_used_, rho, f"PrivPGD: done ({epochs} epochs)")



class WithGenerator(_ParticleSampling, Mechanism):
    """A selector mechanism whose records come from the PrivPGD generator.

    ``selector`` (e.g. ``AIM(...)``, ``MST(...)``) is fitted as usual and spends the whole budget;
    its ``measurements_`` are then turned into records by ``generator`` (a
    :class:`~privmarg.generators.privpgd.PrivPGDGenerator`; default: its fast CPU profile). Privacy is
    exactly the selector's (the generator is post-processing); ``privacy_report()`` is its ledger.

    MST compresses rare values (``compress=True``): its 2-way answers live on the compressed
    domain. They are mapped back to the original domain before generation: the count of the
    merged value is split uniformly over the values it merged (the same uniform assumption MST's
    own sampler makes), the query of the compressed 1-way answers is undone, and MST's
    uncompressed 1-way answers (released before compression) are used for the 1-way marginals.
    So the default ``MST(...)`` works unchanged; ``MST(compress=False)`` needs no mapping at all.
    """

    def __init__(self, selector: Mechanism, generator: Any = None):
        if not isinstance(selector, Mechanism):
            raise TypeError("selector must be a privmarg Mechanism (e.g. AIM(...), MST(...))")
        self.selector = selector
        self.generator = generator if generator is not None else _generator_cls()()
        # privacy parameters are the selector's
        self.epsilon, self.delta, self.rho = selector.epsilon, selector.delta, selector.rho
        self.neighbour = selector.neighbour
        self.seed = selector.seed
        self.preprocess_share = getattr(selector, "preprocess_share", 0.1)
        self.rho_total = selector.rho_total

    def fit(self, data: Any, domain: Any = None, *, zeros=None, progress=None,
            drop_unknown: bool = False) -> "WithGenerator":
        """Fit the selector (whole budget), then generate from its measurements (free)."""
        import time

        t0 = time.perf_counter()
        sel = self.selector.fit(data, domain, zeros=zeros, progress=progress, drop_unknown=drop_unknown)
        for name in ("domain_", "accountant_", "log_", "zeros_", "public_rows_", "noise_rng_", "sample_rng_",
                     "schema_", "encoder_", "rho_preprocess_", "rho_available_"):
            if hasattr(sel, name):
                setattr(self, name, getattr(sel, name))
        self.measurements_ = selector_measurements(sel)
        self._progress = progress or (lambda spent, total, msg: None)
        total = sel.total_
        if total is None:  # add/remove: N is private, estimate it from the released marginals
            total = estimate_total(self.measurements_, self.domain_)
        gen = self.generator.clone(seed=_gen_seed(self.sample_rng_))
        used, avail = sel.rho_used_, sel.rho_available_

        def on_epoch(epoch, n, loss):
            self._progress(used, avail, f"PrivPGD epoch {epoch}/{n}: loss {loss:.4g}")

        gen.fit(self.measurements_, self.domain_, zeros=self.zeros_, total=total, progress=on_epoch)
        self.generator_ = gen
        self.fit_seconds_ = time.perf_counter() - t0
        return self


def selector_measurements(mech: Mechanism) -> list[Measurement]:
    """A fitted mechanism's measurements, all over its original domain (see :class:`WithGenerator`)."""
    supports = getattr(mech, "supports_", None) or {}
    if not supports:
        return list(mech.measurements_)
    dom, cdom = mech.domain_, mech.compressed_domain_
    compressed = {id(m) for m in mech.compressed_measurements_}
    out = []
    for m in mech.measurements_:
        if id(m) not in compressed or not any(a in supports for a in m.attrs):
            out.append(m)
            continue
        y = m.y if m.query is None else np.linalg.solve(m.query, m.y)
        arr = y.reshape(cdom.sizes(m.attrs))
        for ax, a in enumerate(m.attrs):
            supp = supports.get(a)
            if supp is None:
                continue
            k = dom[a]
            rest = np.setdiff1d(np.arange(k), supp)
            E = np.zeros((k, len(supp) + 1))
            E[supp, np.arange(len(supp))] = 1.0
            E[rest, len(supp)] = 1.0 / len(rest)
            arr = np.moveaxis(np.tensordot(E, np.moveaxis(arr, ax, 0), axes=(1, 0)), 0, ax)
        out.append(Measurement(m.attrs, arr.ravel(), m.sigma, source=m.source,
                               meta={**m.meta, "expanded_from_compressed": True}))
    return out
