"""The papers' methods as ready-made synthesizers: a selector, a generator and their settings.

Each preset keeps the parameters of the method it names; ``generator=`` swaps the generator for any
other (``"pgm"``, ``"privpgd"`` or an instance), e.g. ``AIM(1.0, 1e-9, generator="privpgd")``.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from . import registry
from .generate.pgm import DTYPES, METHODS, PGM
from .select.aim import AIMSelector
from .select.aim_bounds import BoundWork, ErrorBound, aim_error_bound, released_table
from .select.aim_plan import Plan, plan_aim, surrogate_rows
from .select.base import check_positive
from .select.compress import Compressed
from .select.independent import IndependentSelector
from .select.jam import LOOP as JAM_LOOP
from .select.jam import PRECISE_FINAL_ITERS, JAMSelector
from .select.kway import GROUPED_NOISE_SHARE, KWaySelector
from .select.mst import MSTSelector
from .select.mwem import MWEMSelector
from .synth import Synthesizer


# A refit costs one belief-propagation pass per iteration, linear in the model's size: on fire's
# 20-80 MB models 250 iterations a round took 4-7 min a fit and gave no lower error than 50
# (benchmarks/RESULTS.md, "AIM on fire in minutes"); models up to 4 MB (adult) are unaffected.
AIM_WORK_MB = 100.0
# the fewest iterations a refit gets however large its model: a round's warm refit, and the final
# fit. On adult at ε = 10 (18-44 MB loop models) 10 and 50 instead of 20 and 100 halve the time
# at a 3-way error still below session 22's (benchmarks/history/wide-tables.md, session 26)
AIM_MIN_ITERS = 10
AIM_FINAL_MIN_ITERS = 50
#: JAM's final iterations when its measurements are noisy (the loop model plus a few in float64)
JAM_FINAL_ITERS = 5


def aim_loop(iters: int = 250, tol: float = 1e-4, refit_method: str = "momentum",
             work_mb: float | None = AIM_WORK_MB, fit_new: bool = True) -> PGM:
    """AIM's model in the loop: warm-started refits of at most ``iters`` iterations (fewer on large
    models: ``work_mb``), a new measurement explained first (``fit_new``)."""
    return PGM(iters=iters, tol=tol, method=refit_method, cold_method="precond" if refit_method == "md" else refit_method,
               work_mb=work_mb, min_iters=min(AIM_MIN_ITERS, iters), fit_new=fit_new)


def aim_final_fit(final_iters: int = 1000, tol: float = 1e-4, refit_method: str = "momentum",
                  work_mb: float | None = AIM_WORK_MB) -> PGM:
    """AIM's final fit: at most ``final_iters`` iterations, fewer on large models (``4 * work_mb``
    MB·iterations), never fewer than ``min(AIM_FINAL_MIN_ITERS, final_iters)``."""
    return PGM(iters=final_iters, tol=tol / 10, method=refit_method, work_mb=None if work_mb is None else 4 * work_mb,
               min_iters=min(AIM_FINAL_MIN_ITERS, final_iters))


class AIM(Synthesizer):
    """AIM (McKenna et al. 2022): :class:`~privmarg.select.aim.AIMSelector` + Private-PGM.

    ``workload`` ("all-3way", "all-2way:target=col", a JSON path or a list of cliques / (cliques,
    weight)); ``max_model_size`` in MB (2**20 bytes) of the final junction tree; ``rounds`` (T, sizing
    the initial split; default 16·d, fewer for workloads of over 1,000 marginals:
    :func:`~privmarg.select.aim.default_rounds`); ``alpha`` the share of each round for measurement; ``iters``
    mirror-descent iterations per round (warm started) and ``final_iters`` for the last fit;
    ``refit_method``: the estimator's step rule for every fit (``"momentum"``, the default;
    ``"md"``, plain mirror descent, whose cold first fit is preconditioned; or ``"precond"``).
    ``work_mb``: cap on a round's iterations × model size in MB, so that large models get fewer
    iterations per round (never fewer than ``min(10, iters)``); the final fit's cap is
    ``4 * work_mb`` (never below ``min(50, final_iters)``); ``None`` removes both caps. Models up to
    0.4 MB keep ``iters`` and ``final_iters`` (at the defaults). ``fit(data, public=table)``: a
    public table from a similar population; at small budgets AIM starts from its tree model
    (``public_start``: None by the budget, True always, False never; ``public_start_`` says whether it
    did, None without public data; :mod:`~privmarg.select.public_start`).

    Privacy: ``rho``-zCDP in total, spent exactly; each round charges one exponential mechanism
    (ε²/8) and one Gaussian marginal (Δ₂²/(2σ²)). ``error_bound`` costs nothing more.
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-3way",
                 max_model_size: float = 80.0, rounds: int | None = None, alpha: float = 0.9,
                 iters: int = 250, final_iters: int = 1000, tol: float = 1e-4, refit_method: str = "momentum",
                 work_mb: float | None = AIM_WORK_MB, fit_new: bool = True, public_start: bool | None = None,
                 generator: Any = None, **kw):
        if refit_method not in METHODS:
            raise ValueError(f"refit_method must be one of {METHODS}")
        self.workload, self.max_model_size, self.rounds, self.alpha = workload, check_positive("max_model_size", max_model_size), rounds, alpha
        self.iters, self.final_iters, self.tol, self.refit_method = iters, final_iters, tol, refit_method
        self.work_mb, self.fit_new, self.public_start = work_mb, fit_new, public_start
        sel = AIMSelector(workload, rounds=rounds, alpha=alpha, max_model_size=max_model_size,
                          loop=aim_loop(iters, tol, refit_method, work_mb, fit_new), public_start=public_start)
        gen = generator if generator is not None else aim_final_fit(final_iters, tol, refit_method, work_mb)
        super().__init__(sel, gen, epsilon=epsilon, delta=delta, **kw)

    def fit(self, *args, **kw) -> "AIM":
        super().fit(*args, **kw)
        x = self.selection_.extra
        self.weights_, self.workload_ = x["weights"], x["workload"]
        self.round_models_, self.rounds_ = x["round_models"], x["rounds"]
        self.public_start_: bool | None = x["public_start"]
        return self

    def plan(self, domain: Any, rows: int | None = None, *, simulate: bool = False, seed: int = 0) -> Plan:
        """Before spending: this AIM's noise and predicted workload error, from public inputs only
        (:func:`~privmarg.select.aim_plan.plan_aim`): ``domain`` a Domain, size dict or Schema,
        ``rows`` your estimate of the table's size N. Reads no data, spends no budget, needs no fit.

        ``simulate=True`` also runs this AIM (same settings, seeded) on a public surrogate table of
        ``rows`` records drawn from the domain alone (:func:`~privmarg.select.aim_plan.surrogate_rows`)
        and reports its measured workload error as ``simulated_error``: as slow as a fit."""
        from .core import Domain
        from .schema import as_schema

        if self.rho is not None or self.epsilon is None or self.delta is None:
            raise ValueError("plan needs epsilon and delta (this AIM was given rho)")
        if isinstance(domain, Mapping):
            domain = Domain.from_dict(domain)
        elif not isinstance(domain, Domain):
            domain = as_schema(domain)
        plan = plan_aim(domain, self.epsilon, self.delta, rows=rows, workload=self.workload, neighbour=self.neighbour,
                        alpha=self.alpha, rounds=self.rounds, preprocess_share=self.preprocess_share, seed=seed)
        if not simulate:
            return plan
        if not rows:
            raise ValueError("simulate=True needs rows (the table's size)")
        return simulate_plan(self, plan, seed)

    def error_bound(self, attrs, confidence: float = 0.95, synthetic=None) -> ErrorBound:
        """High-probability bound on the L1 error of the synthetic marginal on ``attrs`` (AIM §5).

        Bounds ‖M(D)/N − M(D̂)/N̂‖₁ (normalised real vs synthetic marginal) with probability at least
        ``confidence``, for any marginal in the downward closure of the workload. ``synthetic``: the
        synthetic table (integer codes or Dataset); defaults to the last ``sample()``, else the
        model's own marginal. Uses released quantities only: no privacy cost.
        """
        self._check_fitted()
        return aim_error_bound(self, attrs, confidence, synthetic)

    def error_bounds(self, confidence: float = 0.95, synthetic=None) -> list[ErrorBound]:
        """:meth:`error_bound` for every marginal of the workload (no privacy cost)."""
        self._check_fitted()
        table, work = released_table(self, synthetic), BoundWork()  # validated once, shared by all
        return [aim_error_bound(self, r, confidence, table, work) for r, _ in self.workload_]


def simulate_plan(aim: "AIM", plan: Plan, seed: int = 0) -> Plan:
    """``plan`` with ``simulated_error``: a copy of ``aim``'s settings, at the budget the plan gives
    its selection, fitted to a public surrogate table of ``plan.rows`` records over ``plan.domain``,
    and the workload error of ``plan.rows`` sampled records against that table."""
    from .data import Dataset
    from .core import parse_workload
    from .evaluation.metrics import workload_error

    t0 = time.perf_counter()
    table = Dataset(surrogate_rows(plan.domain, int(plan.rows), seed), plan.domain)
    twin = type(aim)(None, None, rho=plan.rho_selection, workload=aim.workload, max_model_size=aim.max_model_size,
                     rounds=aim.rounds, alpha=aim.alpha, iters=aim.iters, final_iters=aim.final_iters, tol=aim.tol,
                     refit_method=aim.refit_method, work_mb=aim.work_mb, fit_new=aim.fit_new,
                     neighbour=aim.neighbour, seed=seed).fit(table)
    synthetic = Dataset(twin.sample_codes(int(plan.rows)), plan.domain)
    err = workload_error(table, synthetic, parse_workload(aim.workload, plan.domain))
    note = f"(the simulation took {time.perf_counter() - t0:.0f} s)"
    return dataclasses.replace(plan, simulated_error=err, notes=plan.notes + (note,))


class MST(Synthesizer):
    """MST (McKenna, Miklau, Sheldon 2021) with domain compression (SPEC §5).

    Budget in thirds: the 1-way marginals (jointly), the exponential-mechanism Kruskal selection of
    d−1 pairs, and the tree's 2-way marginals (jointly). ``compress`` merges rare values using the
    released 1-way answers (:class:`~privmarg.select.compress.Compressed`). Privacy: ``rho``-zCDP,
    spent exactly.
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, iters: int = 1000,
                 final_iters: int = 3000, tol: float = 1e-7, compress: bool = True, generator: Any = None, **kw):
        self.iters, self.final_iters, self.tol, self.compress = iters, final_iters, tol, compress
        sel = MSTSelector(loop=PGM(iters=iters, tol=tol))
        if compress:
            sel = Compressed(sel, share=1 / 3)
        gen = generator if generator is not None else PGM(iters=final_iters, tol=tol)
        super().__init__(sel, gen, epsilon=epsilon, delta=delta, **kw)

    def fit(self, *args, **kw) -> "MST":
        super().fit(*args, **kw)
        x = self.selection_.extra
        self.edges_ = x["edges"]
        self.supports_ = x.get("supports", {})
        self.compressed_domain_ = x.get("compressed_domain", self.domain_)
        return self


class MWEM(Synthesizer):
    """MWEM+PGM: ``rounds`` (default d) equal rounds, each an exponential-mechanism selection among
    the workload's cliques and a Gaussian measurement; models capped at ``max_model_size``·t/T MB.

    Privacy: ``rho``-zCDP spent exactly, ``rho/T`` per round (share ``alpha`` for measurement).
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-3way",
                 rounds: int | None = None, alpha: float = 0.9, max_model_size: float = 25.0,
                 iters: int = 1000, tol: float = 1e-6, generator: Any = None, **kw):
        self.workload, self.rounds, self.alpha, self.max_model_size = workload, rounds, alpha, check_positive("max_model_size", max_model_size)
        self.iters, self.tol = iters, tol
        loop = PGM(iters=iters, tol=tol)
        sel = MWEMSelector(workload, rounds=rounds, alpha=alpha, max_model_size=max_model_size, loop=loop)
        super().__init__(sel, generator if generator is not None else loop, epsilon=epsilon, delta=delta, **kw)


class Independent(Synthesizer):
    """All d one-way marginals with equal Gaussian noise; attributes sampled independently.

    Privacy: ``rho``-zCDP spent exactly: d Gaussian measurements of Δ₂²/(2σ²) each, σ = Δ₂·√(d/(2ρ)).
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, iters: int = 1000,
                 generator: Any = None, **kw):
        self.iters = iters
        super().__init__(IndependentSelector(), generator if generator is not None else PGM(iters=iters), epsilon=epsilon,
                         delta=delta, **kw)


class JAM(Synthesizer):
    """JAM-PGM (Fuentes et al., AISTATS 2024): adaptive joint selection of private and public marginals.

    ``fit(private, domain, public=table)``. Parameters: ``workload`` (default all 3-way); ``rounds``
    T and ``alpha``, the share of each round's budget for *selection* (None: by the budget — the
    paper's T = 30, α = 0.2; when a round measures a mean-sized workload marginal with less L1 noise
    than N (:func:`~privmarg.select.jam.precise_measurements`), AIM's selection and loop model instead,
    then AIM's final fit (momentum, up to 1,000 iterations, capped by model size as AIM's); setting ``rounds``, ``alpha`` or
    ``final_iters`` always runs JAM's rounds); ``max_model_size`` (MB);
    ``iters`` estimation iterations per round (5, warm started when ``warm_start``), with the
    preconditioned step (``refit_method``) on float32 tables (``refit_dtype``), the loop model's
    tables then recomputed in float64 (one more pass: scoring then skips the candidates that
    cannot win, :mod:`~privmarg.select.lazy_scores`); ``final_iters`` more after the last round,
    in the same precision, the released model's tables then recomputed in float64 (None: 5, or
    AIM's final fit, in float64, when the measurements are precise; 0 samples the last round's
    model, as the paper does). With noisy measurements, more iterations per round or at the
    end fit the noise: they did not lower the workload error on adult at ε ≤ 1 (benchmarks/RESULTS.md,
    "JAM speed (issue 18)", "Public data that never hurts"); ``weighting``
    (``"equal"``, ``"mle"``, ``"inv_sigma"``) of measurements in the loss; ``supersede``: a private
    measurement takes the public answers inside it out of the loss. Privacy: ``rho``-zCDP under
    replace-one neighbours (N is public and rescales the public answers).
    ``blend``: when the last round picks a public answer, the budget left over buys one last
    exponential-mechanism choice of the release among blends of the model with the public records,
    ``λ·model + (1 − λ)·public`` for λ in {0, ¼, ½, ¾, 1}, by workload error
    (:mod:`~privmarg.select.jam_blend`; with no budget left, or public data given as marginals, the
    model alone). ``public_share_`` is the released share of public records.
    ``public_marginals_`` / ``private_marginals_`` say which marginals came from where.
    """

    default_neighbour = "replace_one"

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-3way",
                 rounds: int | None = None, alpha: float | None = None, max_model_size: float = 80.0,
                 iters: int = JAM_LOOP["iters"], final_iters: int | None = None, tol: float = JAM_LOOP["tol"],
                 weighting: str = "equal", warm_start: bool = True, supersede: bool = True, blend: bool = True,
                 refit_method: str = JAM_LOOP["method"], refit_dtype: str = JAM_LOOP["dtype"], generator: Any = None, **kw):
        if refit_method not in METHODS:
            raise ValueError(f"refit_method must be one of {METHODS}")
        if refit_dtype not in DTYPES:
            raise ValueError(f"refit_dtype must be one of {DTYPES}")
        self.workload, self.rounds, self.alpha, self.max_model_size = workload, rounds, alpha, max_model_size
        self.iters, self.final_iters, self.tol, self.weighting, self.warm_start = (
            iters, final_iters, tol, weighting, warm_start)
        self.refit_method, self.refit_dtype, self.supersede, self.blend = refit_method, refit_dtype, supersede, blend
        # at a precise budget AIM's rounds (with AIM's loop model), unless the user set JAM's own plan
        aim = None if final_iters is not None else AIMSelector(workload, max_model_size=max_model_size,
                                                               loop=aim_loop())
        sel = JAMSelector(workload, rounds=rounds, alpha=alpha, max_model_size=max_model_size, weighting=weighting,
                          warm_start=warm_start, supersede=supersede, blend=blend,
                          precise_final_iters=PRECISE_FINAL_ITERS if aim is not None else None,
                          precise_selector=aim,
                          loop=PGM(iters=iters, tol=tol, method=refit_method, dtype=refit_dtype,
                                   model_dtype=JAM_LOOP["model_dtype"]))
        # the final fit keeps AIM's work cap and floor, so a precise budget's fit is AIM's exactly
        aim_final = aim_final_fit()
        gen = generator if generator is not None else PGM(
            iters=JAM_FINAL_ITERS if final_iters is None else final_iters, tol=tol / 10, method=refit_method,
            work_mb=aim_final.work_mb, min_iters=aim_final.min_iters, dtype=refit_dtype, model_dtype="float64")
        super().__init__(sel, gen, epsilon=epsilon, delta=delta, **kw)
        if self.neighbour != "replace_one":
            raise ValueError("JAM needs replace-one neighbours: the public answers are rescaled by the "
                             "record count N, which is private under add/remove")

    def fit(self, data, domain=None, *, public=None, **kw) -> "JAM":
        if public is None:
            raise ValueError("JAM needs public data: fit(private, domain, public=table)")
        super().fit(data, domain, public=public, **kw)
        self.rounds_ = len(self.log_)
        return self

    @property
    def public_share_(self) -> float:
        """The share of the released distribution that is the public records (``1 − λ`` of the
        blend the release step chose; 0 when the model is released alone)."""
        from .generate.blend import BlendedModel

        self._check_fitted()
        return 1.0 - self.model_.share if isinstance(self.model_, BlendedModel) else 0.0

    @property
    def public_marginals_(self) -> list[tuple[str, ...]]:
        """Marginals answered with the (rescaled) public data, in selection order."""
        self._check_fitted()
        return [m.attrs for m in self.measurements_ if m.source == "public"]

    @property
    def private_marginals_(self) -> list[tuple[str, ...]]:
        """Marginals measured on the private data with Gaussian noise, in selection order."""
        self._check_fitted()
        return [m.attrs for m in self.measurements_ if m.source == "private"]


class PrivPGD(Synthesizer):
    """PrivPGD (Donhauser et al. 2024): all ``degree``-way marginals + particle gradient descent.

    Privacy (SPEC §8.1): replace-one by default (``N`` public). The marginals are measured with one
    Gaussian mechanism each at the same σ, spending ``ρ_m``; with a ``constraint`` that needs the data
    (:class:`~privmarg.generate.privpgd.ThresholdConstraint`) its statistic is released at its own
    cost ``ρ_c`` and ``ρ_m = ρ − ρ_c``. Everything after the measurements is post-processing.

    ``grouped`` (the default): the 1-way marginals are measured too, and every wider marginal over
    its columns merged into groups of neighbouring codes, as many as keep such a marginal's
    expected L1 noise within ``group_noise_share``·N (a quarter)
    (:class:`~privmarg.select.kway.KWaySelector`); the particles fit the grouped
    marginals by their group and the 1-way marginals place them inside it.
    On adult at ε = 2.5 this puts PrivPGD ahead of AIM on 2-way SW1 and covariance, where the
    paper's fine all-2-way measurement is behind on both (benchmarks/RESULTS.md). ``grouped=False`` with
    ``generator=PrivPGDGenerator.paper()`` is the paper's method exactly.

    Parameters: ``degree`` (2) or explicit ``cliques``; ``constraint`` and ``constraint_strength``
    (λ); generator settings ``n_particles`` … ``device`` (None: the generator's defaults, its fast CPU
    profile), or a configured ``generator`` (e.g. ``PrivPGDGenerator.paper()``, or ``"pgm"``).
    ``sample()`` returns the finalised particles; ``sample(rows)`` subsamples or resamples them.
    """

    default_neighbour = "replace_one"

    def __init__(self, epsilon: float | None = 2.5, delta: float | None = 1e-5, *, degree: int = 2,
                 cliques: Sequence[Sequence[str]] | None = None, grouped: bool = True,
                 group_noise_share: float = GROUPED_NOISE_SHARE, constraint: Any = None,
                 constraint_strength: float = 1.0, generator: Any = None, n_particles: int | None = None,
                 epochs: int | None = None, batch_size: int | None = None, num_projections: int | None = None,
                 lr: float | None = None, scheduler_step: int | None = None, mask_rate: float | None = None,
                 proj_iters: int | None = None, proj_num_projections: int | None = None,
                 proj_lr: float | None = None, proj_resample: int | None = None, proj_stop_tol: float | None = None,
                 device: Any = None, **kw):
        from .generate.privpgd import PrivPGDGenerator

        self.degree, self.cliques, self.constraint, self.constraint_strength = degree, cliques, constraint, constraint_strength
        self.grouped, self.group_noise_share = grouped, group_noise_share
        given = dict(n_particles=n_particles, epochs=epochs, batch_size=batch_size, num_projections=num_projections,
                     lr=lr, scheduler_step=scheduler_step, mask_rate=mask_rate, proj_iters=proj_iters,
                     proj_num_projections=proj_num_projections, proj_lr=proj_lr, proj_resample=proj_resample,
                     proj_stop_tol=proj_stop_tol, device=device)
        self.generator_params = {k: v for k, v in given.items() if v is not None}
        self.generator_params["constraint_strength"] = constraint_strength
        if generator is None:
            generator = PrivPGDGenerator(**self.generator_params)
        elif isinstance(generator, PrivPGDGenerator) and constraint is not None:
            generator = generator.clone(constraint_strength=float(constraint_strength))
        # a fresh copy per synthesizer: the release fills in the constraint's estimate
        sel = KWaySelector(degree, cliques, constraint=copy.copy(constraint), grouped=grouped,
                           noise_share=group_noise_share)
        super().__init__(sel, generator, epsilon=epsilon, delta=delta, **kw)

    def fit(self, *args, **kw) -> "PrivPGD":
        super().fit(*args, **kw)
        self.cliques_ = self.selection_.extra["cliques"]
        self.sigma_ = self.selection_.extra["sigma"]
        self.constraint_ = self.selector.constraint
        self.generator_ = self.model_
        return self


class RAPpp(Synthesizer):
    """RAP++ (Vietri et al. 2022, the benchmark's marginal module; SPEC §10.3): adaptive rounds of
    Gumbel top-``top_q`` selection of workload marginals + relaxed projection, warm-started.

    ``workload`` (default all 2-way, the benchmark's), ``rounds`` T (default: the number of
    attributes), ``top_q`` marginals per round (1), ``penalty`` on marginal size in the score (1:
    the benchmark copy's ``n_q/N``; 0: none). Relaxed projection: ``n_prime`` rows, ``iters``
    Adam steps per stage, ``lr``, ``stages``, ``device`` (CUDA when present). The final fit
    continues from the last round's relaxed data.

    Privacy: exactly ``rho``-zCDP (add/remove by default), ``rho/T`` per round: half one Gumbel
    top-q selection, half the Gaussian on the ``q`` chosen marginals; answers are never re-noised.
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-2way",
                 rounds: int | None = None, top_q: int = 1, penalty: float = 1.0, n_prime: int = 1000,
                 iters: int = 1000, lr: float = 0.01, stages: int = 1, device: Any = None,
                 generator: Any = None, **kw):
        from .generate.relaxed import RelaxedProjection
        from .select.rap import RAPppSelector

        self.workload, self.rounds, self.top_q, self.penalty = workload, rounds, top_q, penalty
        self.n_prime, self.iters, self.lr, self.stages, self.device = n_prime, iters, lr, stages, device
        loop = RelaxedProjection(n_prime=n_prime, iters=iters, lr=lr, stages=stages, device=device)
        sel = RAPppSelector(workload, rounds=rounds, top_q=top_q, penalty=penalty, loop=loop)
        super().__init__(sel, generator if generator is not None else loop, epsilon=epsilon, delta=delta, **kw)


class RAP(Synthesizer):
    """RAP (Aydore et al. 2021): ``rounds`` adaptive rounds, each selecting the ``top_k`` worst
    counting queries (single cells of the workload's marginals) with Gumbel top-k and measuring
    them, then relaxed projection onto every answer so far (warm-started).

    Defaults are the reference code's: T = 10, K = 50, ``n_prime`` = 1000 relaxed rows, Adam
    ``lr`` = 1e-3 for up to ``iters`` = 1000 steps per round; replace-one neighbours (RAP's
    bounded DP: N public). ``workload`` defaults to all 2-way marginals (see
    :class:`~privmarg.select.rap.RAPSelector`). Under add/remove a ``count_share`` of the budget
    releases N first.

    Privacy: exactly ``rho``-zCDP; ``rho/T`` per round, half selection, half one Gaussian release
    of the chosen cells at their joint L2 sensitivity.
    """

    default_neighbour = "replace_one"

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-2way",
                 rounds: int = 10, top_k: int = 50, count_share: float = 0.01, n_prime: int = 1000,
                 iters: int = 1000, lr: float = 1e-3, stages: int = 1, device: Any = None,
                 generator: Any = None, **kw):
        from .generate.relaxed import RelaxedProjection
        from .select.rap import RAPSelector

        self.workload, self.rounds, self.top_k, self.count_share = workload, rounds, top_k, count_share
        self.n_prime, self.iters, self.lr, self.stages, self.device = n_prime, iters, lr, stages, device
        loop = RelaxedProjection(n_prime=n_prime, iters=iters, lr=lr, stages=stages, device=device)
        sel = RAPSelector(workload, rounds=rounds, top_k=top_k, count_share=count_share, loop=loop)
        super().__init__(sel, generator if generator is not None else loop, epsilon=epsilon, delta=delta, **kw)


class GSD(Synthesizer):
    """Private-GSD (Liu, Vietri, Wu et al. 2023; SPEC §10.4): every ``degree``-way marginal measured
    once with the Gaussian mechanism (the ``kway`` selector), then the genetic algorithm
    (:class:`~privmarg.generate.genetic.GeneticGenerator`) fits ``min(N, max_rows)`` records to them;
    ``sample()`` resamples those records to N.

    Generator settings: ``generations`` (default 10·n), ``mutations`` and ``crossovers`` per
    generation (50, 50), ``elite`` (5), ``max_rows`` (10 000), ``check_every`` / ``tol`` (early
    stopping). Privacy: ``rho``-zCDP spent exactly, one Gaussian measurement per marginal at equal σ;
    the genetic algorithm is post-processing.
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, degree: int = 2,
                 generations: int | None = None, mutations: int = 50, crossovers: int = 50, elite: int = 5,
                 max_rows: int = 10_000, check_every: int = 2_000, tol: float = 1e-4, generator: Any = None, **kw):
        from .generate.genetic import GeneticGenerator

        self.degree, self.generations, self.mutations, self.crossovers, self.elite = (
            degree, generations, mutations, crossovers, elite)
        self.max_rows, self.check_every, self.tol = max_rows, check_every, tol
        gen = generator if generator is not None else GeneticGenerator(
            generations, mutations, crossovers, elite, max_rows, check_every, tol)
        super().__init__(KWaySelector(degree), gen, epsilon=epsilon, delta=delta, **kw)


def _gem_generator(steps, lr, batch_size, latent_dim, hidden, device, pretrain_steps=None):
    from .generate.gem import GEMGenerator  # torch: imported on use

    return GEMGenerator(steps=steps, lr=lr, batch_size=batch_size, latent_dim=latent_dim, hidden=hidden,
                        device=device, pretrain_steps=pretrain_steps)


class GEM(Synthesizer):
    """GEM (Liu, Vietri, Wu 2021; SPEC §10.5): ``rounds`` T (default ``5d``) rounds, each an
    exponential-mechanism choice of a ``workload`` marginal (default all 2-way) by its expected
    improvement against the generator network (error less the noise's expected L1 norm) and a Gaussian measurement of it (GEM's ``alpha`` = 0.5: half of
    each round's zCDP to each), with the network retrained ``steps`` Adam steps per round from where
    it was (:class:`~privmarg.select.gem.GEMSelector`,
    :class:`~privmarg.generate.gem.GEMGenerator`); the final fit continues ``steps`` more on all
    measurements. Network settings ``lr``, ``batch_size``, ``latent_dim``, ``hidden``, ``device``
    (None: CUDA when present). Privacy: ``rho``-zCDP spent exactly, ``ρ/T`` per round.
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-2way",
                 rounds: int | None = None, alpha: float = 0.5, steps: int = 200, lr: float = 3e-3,
                 batch_size: int = 512, latent_dim: int | None = 64, hidden=(256, 256), device: Any = None,
                 generator: Any = None, **kw):
        from .select.gem import GEMSelector

        self.workload, self.rounds, self.alpha, self.steps, self.lr = workload, rounds, alpha, steps, lr
        self.batch_size, self.latent_dim, self.hidden, self.device = batch_size, latent_dim, hidden, device
        loop = _gem_generator(steps, lr, batch_size, latent_dim, hidden, device)
        sel = GEMSelector(workload, rounds=rounds, alpha=alpha, loop=loop)
        super().__init__(sel, generator if generator is not None else loop, epsilon=epsilon, delta=delta, **kw)


class _PublicStart(Synthesizer):
    """Shared by PMW^Pub and GEM^Pub: ``fit(private, domain, public=table)``."""

    def fit(self, data, domain=None, *, public=None, **kw):
        if public is None:
            raise ValueError(f"{type(self).__name__} needs public data: fit(private, domain, public=table)")
        return super().fit(data, domain, public=public, **kw)


class PMWPub(_PublicStart):
    """PMW^Pub (Liu, Vietri, Steinke, Ullman, Wu 2021), JAM's public-data baseline: the synthetic
    distribution is a reweighting of the public records (starting from their frequencies). Rounds as
    GEM's (:class:`~privmarg.select.gem.PublicStartSelector`: ``rounds`` T, default ``5d``,
    ``alpha`` 0.5, over ``workload``, default all 3-way as in JAM's experiments); after each
    measurement ``iters`` multiplicative-weights steps refit the weights to every measurement so far
    (:class:`~privmarg.generate.pmw_pub.PublicReweighting`). ``fit(private, domain, public=table)``.
    Privacy: ``rho``-zCDP spent exactly, ``ρ/T`` per round; the public data is free. Samples are
    public records (drawn by their weights): a record the public data lacks never appears.
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-3way",
                 rounds: int | None = None, alpha: float = 0.5, iters: int = 100, eta: float = 1.0,
                 generator: Any = None, **kw):
        from .generate.pmw_pub import PublicReweighting
        from .select.gem import PublicStartSelector

        self.workload, self.rounds, self.alpha, self.iters, self.eta = workload, rounds, alpha, iters, eta
        loop = PublicReweighting(iters, eta)
        sel = PublicStartSelector(workload, rounds=rounds, alpha=alpha, loop=loop, label="PMW^Pub")
        super().__init__(sel, generator if generator is not None else loop, epsilon=epsilon, delta=delta, **kw)


class GEMPub(_PublicStart):
    """GEM^Pub (Liu, Vietri, Wu 2021), JAM's public-data baseline: GEM's generator network first
    trained ``pretrain_steps`` (default 1000; ``None``: ``steps``) on the public data's ``workload``
    marginals (rescaled to N), then GEM's private rounds (:class:`~privmarg.select.gem.PublicStartSelector`:
    ``rounds`` T, default ``5d``, ``alpha`` 0.5, workload default all 3-way as in JAM's experiments),
    continuing to train the same network. ``fit(private, domain, public=table)``. Privacy:
    ``rho``-zCDP spent exactly, ``ρ/T`` per round; the public data is free.
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-3way",
                 rounds: int | None = None, alpha: float = 0.5, steps: int = 200, pretrain_steps: int | None = 1000,
                 lr: float = 3e-3, batch_size: int = 512, latent_dim: int | None = 64, hidden=(256, 256),
                 device: Any = None, generator: Any = None, **kw):
        # the start is what GEM^Pub has over GEM: on adult's 455 3-way marginals 200 steps leave the
        # network at workload error 0.52, 1000 steps at 0.22 (the public table itself: 0.19)
        from .select.gem import PublicStartSelector

        self.workload, self.rounds, self.alpha, self.steps, self.pretrain_steps = (
            workload, rounds, alpha, steps, pretrain_steps)
        self.lr, self.batch_size, self.latent_dim, self.hidden, self.device = lr, batch_size, latent_dim, hidden, device
        loop = _gem_generator(steps, lr, batch_size, latent_dim, hidden, device, pretrain_steps)
        sel = PublicStartSelector(workload, rounds=rounds, alpha=alpha, loop=loop, label="GEM^Pub")
        super().__init__(sel, generator if generator is not None else loop, epsilon=epsilon, delta=delta, **kw)


class DPMERF(Synthesizer):
    """DP-MERF (Harder et al. 2021; the benchmark's deep baseline, SPEC §10.6): one noisy mean
    embedding of the records in ``features`` random Fourier features, then a generator network
    trained to match it without further privacy cost.

    Privacy: ``rho``-zCDP spent exactly (:class:`~privmarg.select.dpmerf.MERFSelector`: a noisy
    count under add/remove, then the embedding sum). Generator settings: ``latent``, ``hidden``,
    ``iters``, ``batch_size``, ``lr``, ``time_limit`` (seconds; reaching it ends training early and
    makes the output machine-dependent), ``device`` (None: CUDA when present).
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, features: int = 1000,
                 bandwidth: float | None = None, count_share: float = 0.05, latent: int = 32,
                 hidden: Sequence[int] = (128, 128), iters: int = 2000, batch_size: int = 500, lr: float = 3e-3,
                 time_limit: float | None = 300.0, device: Any = None, generator: Any = None, **kw):
        from .generate.dpmerf import MERFGenerator
        from .select.dpmerf import MERFSelector

        self.features, self.bandwidth, self.count_share = features, bandwidth, count_share
        self.latent, self.hidden, self.iters, self.batch_size = latent, tuple(hidden), iters, batch_size
        self.lr, self.time_limit, self.device = lr, time_limit, device
        gen = generator if generator is not None else MERFGenerator(latent, hidden, iters, batch_size, lr, time_limit,
                                                                    device)
        super().__init__(MERFSelector(features, bandwidth, count_share), gen, epsilon=epsilon, delta=delta, **kw)


class TabDDPM(Synthesizer):
    """DP-TabDDPM (the benchmark's DP-SGD baseline, SPEC §10.7): multinomial diffusion over the
    coded table, its denoiser trained with DP-SGD (Opacus per-record gradients).

    Privacy: the DP-SGD phase is accounted in RDP (subsampled Gaussian, dp-accounting), composed
    with the run's zCDP charges and converted to (ε, δ) once; the noise multiplier is calibrated
    before training so that the run meets ``epsilon``/``delta`` exactly (needs both, not ``rho``).
    See :class:`~privmarg.select.tabddpm.TabDDPMSelector` for the settings and
    :mod:`privmarg.privacy.rdp` for the ledger entry.
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, timesteps: int = 50,
                 hidden: Sequence[int] = (128, 128), time_dim: int = 32, batch_size: int = 256, epochs: float = 10.0,
                 max_steps: int = 2000, lr: float = 2e-3, clip: float = 1.0, count_share: float = 0.05,
                 time_limit: float | None = 300.0, device: Any = None, generator: Any = None, **kw):
        from .generate.tabddpm import TrainedGenerator
        from .select.tabddpm import TabDDPMSelector

        self.timesteps, self.hidden, self.time_dim = timesteps, tuple(hidden), time_dim
        self.batch_size, self.epochs, self.max_steps, self.lr, self.clip = batch_size, epochs, max_steps, lr, clip
        self.count_share, self.time_limit, self.device = count_share, time_limit, device
        sel = TabDDPMSelector(timesteps, hidden, time_dim, batch_size, epochs, max_steps, lr, clip, count_share,
                              time_limit, device)
        if kw.get("rho") is not None:
            raise ValueError("TabDDPM accounts DP-SGD in RDP and converts at delta: give epsilon and delta, not rho")
        super().__init__(sel, generator if generator is not None else TrainedGenerator(), epsilon=epsilon,
                         delta=delta, **kw)


class _SelectorPreset(Synthesizer):
    """A preset that is one registry selector with a default generator: the keyword arguments the
    selector takes go to it, the rest (``generator``, ``seed``, ``neighbour``, ...) to
    :class:`~privmarg.synth.Synthesizer`. Privacy: the selector's."""

    selector_name: ClassVar[str] = ""
    generator_name: ClassVar[str] = "pgm"

    @classmethod
    def selector_class(cls) -> type:
        return registry.load(registry.entry("selector", cls.selector_name).target)

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, generator: Any = None, **kw):
        sel_cls = self.selector_class()
        names = set(inspect.signature(sel_cls).parameters)
        params = {k: kw.pop(k) for k in list(kw) if k in names}
        super().__init__(sel_cls(**params), generator if generator is not None else self.generator_name,
                         epsilon=epsilon, delta=delta, **kw)


class PrivBayes(_SelectorPreset):
    """PrivBayes (Zhang et al. 2017): a greedy degree-k Bayesian network chosen by the exponential
    mechanism, its conditionals measured (:class:`~privmarg.select.privbayes.PrivBayesSelector`,
    whose parameters it takes), + Private-PGM."""

    selector_name, generator_name = "privbayes", "pgm"


class PrivSyn(_SelectorPreset):
    """PrivSyn (Zhang et al. 2021): DenseMarg's noisy pairs, combined
    (:class:`~privmarg.select.privsyn.PrivSynSelector`, whose parameters it takes), fitted by GUM."""

    selector_name, generator_name = "privsyn", "gum"


class Gaussian(_SelectorPreset):
    """The Gaussian baseline: every workload marginal measured directly, ρ_i ∝ cells^(2/3)
    (:class:`~privmarg.select.gaussian.GaussianSelector`, whose parameters it takes), + GUM (a
    junction tree over every 3-way marginal is as large as the domain)."""

    selector_name, generator_name = "gaussian", "gum"


class PrivMRF(_SelectorPreset):
    """PrivMRF (Cai et al. 2021): a noisy attribute graph, a Bayesian-network start and noisy-score
    refinement (:class:`~privmarg.select.privmrf.PrivMRFSelector`, whose parameters it takes), +
    Private-PGM."""

    selector_name, generator_name = "privmrf", "pgm"
