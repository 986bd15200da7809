"""PrivPGD: private particle gradient descent (Donhauser et al. 2024; SPEC §8).

A *generator*: it turns noisy marginals (any list of :class:`~privmarg.core.Measurement`)
into records. It never touches private data, so everything here is post-processing.

Pipeline (:meth:`PrivPGDGenerator.fit`):

1. **Embedding** (§8.2). Value ``x`` of an attribute with ``k`` values sits at the bin centre
   ``(2x+1)/(2k)`` of ``[0, 1]`` (the paper's ``(2x-1)/(2k)`` with 1-based ``x``).
2. **Projection** (§8.3). Each signed noisy marginal ``v = y/N`` becomes a probability vector ``u``
   on the grid of its cells, minimising a Monte-Carlo sliced W1 computed with the CDF identity
   (valid for signed measures): ``u = softmax(eta)``, ``eta`` initialised at ``log(u0 + 1e-9)`` with
   ``u0 = max(v, 0)/sum`` (clip and normalise), Adam + StepLR, fresh directions every iteration.
   Marginals are projected in padded batches grouped by arity and size. Structural zeros get
   weight exactly zero (their logits are masked out).
3. **Quantisation** (§8.4). ``m`` particles per marginal: ``floor(m u_j)`` copies of cell ``j``,
   leftovers drawn with replacement proportionally to ``u``. Stored as per-cell counts.
4. **Particle gradient descent** (§8.5). ``m`` particles ``Z`` in ``[0,1]^d`` (i.i.d. uniform),
   epochs over shuffled mini-batches of marginals; per marginal the squared sliced W2 to its
   quantised target with fresh directions, through the sort-based closed form (gradient
   ``2 (y_(k) - y'_(k)) theta`` at sorted rank ``k``, averaged over directions, times
   ``grad_scale`` = 100 as in the reference), plus ``lambda * grad_scale * grad R(Z)`` for a
   constraint ``R``. A uniformly random ``mask_rate`` share of the gradient entries is zeroed and
   the step is SparseAdam's (only non-zero entries update their moments and values); with
   ``mask_rate == 0`` the step is dense Adam. (The reference code never assigns the gradient
   when masking is off, so its particles do not move; here they do.) ``Z`` is clamped to
   ``[0,1]`` after each step; the learning rate decays by ``gamma`` every ``step`` epochs.
5. **Finalisation** (§8.6). Every coordinate goes to its nearest bin centre (lower on ties).

The stages live beside this module: :mod:`.geometry`, :mod:`.projection`, :mod:`.sorting`,
:mod:`.measurements`; this one holds the generator.

Hot loop: the argsort of ``B x L x m`` projections (its temporaries live in reused buffers,
:class:`_Workspace`). On CPU it sorts packed 32-bit keys (value
bucket | particle index) with numpy's SIMD sort, several times faster than ``torch.sort`` there;
on CUDA it is ``torch.argsort``. Targets need no big sort: the quantised target is a weighted grid,
so its sorted projection is the sorted projection of the (few) cells, each repeated by its count.
The projection step sorts its grid cells once per direction set (fixed by default).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from ...core import Domain, Measurement, StructuralZero
from ...core.measurement import estimate_total
from ..neural import torch_device
from ..state import SKIP, checked_codes, domain_state, plain, read_total
from .geometry import bin_centres, embed_codes, grid_centres, nearest_codes
from .grouped import Snap, consistent_mixed, grouped_centres, grouped_valid, place_in_groups, split_grouped
from .measurements import (_as_measurements, _marginal_weights, _merge_measurements, _one_way, _repair_zeros,
                           _valid_cells)
from .projection import (_ADAM_EPS, _BETAS, _directions, _torch_seed, project_signed_measures, quantise,
                         sliced_w1, sparse_adam_step)
from .sorting import _argsort, _argsort_bounded, _Workspace

__all__ = [
    "PrivPGDGenerator",
    "bin_centres",
    "embed_codes",
    "nearest_codes",
    "grid_centres",
    "sliced_w1",
    "project_signed_measures",
    "quantise",
    "sparse_adam_step",
]

Progress = Callable[[int, int, float], None]  # (epoch, epochs, loss)


# ----------------------------------------------------------------------------- the generator
class _Target:
    """One measured marginal after projection and quantisation."""

    __slots__ = ("attrs", "cols", "centres", "counts", "prob", "weight", "snapped")

    def __init__(self, attrs, cols, centres, counts, prob, weight=1.0, snapped=False):
        self.attrs = attrs
        self.cols = cols
        self.centres = centres
        self.counts = counts
        self.prob = prob
        self.weight = weight
        self.snapped = snapped  # over grouped values: read the particles snapped to their groups


@dataclass
class _Marginals:
    """The measurements as PrivPGD fits them: ``(clique, signed counts, σ)`` with each one's shape
    (fine marginals first, ``n_fine`` of them, then grouped ones over their group counts), the
    grouped attributes' code → group maps, the cells each may fill (None: all), and N."""

    items: list
    sizes: list
    n_fine: int
    maps: dict
    valid: list
    total: float


class PrivPGDGenerator:
    """Particle gradient descent generator (SPEC §8.2–8.6).

    Defaults are a fast CPU profile; :meth:`paper` (or ``**PrivPGDGenerator.PAPER``) gives the paper's
    settings. What differs, and why (adult, 48,842 rows, all 91 2-way marginals, ε = 2.5, 1 torch
    thread, 2-core machine under load average 4–8, so absolute times are inflated 2–3×):

    * ``n_particles=None``: ``m = N`` (the record count) instead of 100k — half the sort work, and
      output rows = input rows.
    * Projection: 32 directions fixed for the run (a stratified fan of angles for 2-way marginals;
      arity >= 3 re-draws every iteration), so cells are sorted once, not every iteration; early
      stop when the objective improves < 1% over 25 iterations; at most 200 iterations. Distance of
      the projected marginals to the true ones (mean over the 91): clip-and-normalise TV 0.150 /
      SW1 0.0495; 10 iterations of the paper's 200 fresh directions TV 0.091 / SW1 0.0150 (32 fixed:
      0.090 / 0.0146); 50 fixed TV 0.055 / SW1 0.0045; 150 fixed 0.049 / 0.0045; 400 fixed 0.049 /
      0.0047 (no gain: it only fits the noise). With early stopping chunks stop after 100–225
      iterations. Cost ≈ 1 min in all under load 8 vs ≈ 1750 × 3–6 s (1.5–3 h) for the paper's.
    * ``epochs=400`` with ``scheduler_step=20`` (session 33; before, 200 and 10): on grouped 2-way
      marginals (the PrivPGD preset's default) SW1 and covariance both improve on adult, at twice
      the time (benchmarks/history/methods.md, "PrivPGD on grouped 2-way marginals"). Below, the
      earlier measurements of the 200-epoch profile.
    * ``epochs=200`` with ``scheduler_step=10``: the paper's learning-rate decay (×0.75 twenty
      times) compressed 5×. Metrics (SW1 / TV / covariance error) of the particles on adult with the
      schedule of 200 epochs: epoch 25: 0.0060 / 0.214 / 0.167; 50: 0.0041 / 0.150 / 0.110; 75:
      0.0034 / 0.115 / 0.096, still improving. Compressing further hurts: 100 epochs with
      ``scheduler_step=5`` end at 0.0036 / 0.105 / 0.122 (lr too small too soon). AIM (all-2way,
      replace-one, seed 0): 0.0031 / 0.032 / 0.092.
    * ``mask_rate=0``: dense Adam. With only 200 epochs, masking 80% of the gradient entries leaves
      each coordinate 40 epochs' worth of updates; unmasked, adult ε = 2.5 seed 0 (3-seed benchmark,
      benchmarks/RESULTS.md) moved from SW1 0.00273 / TV 0.088 / covariance 0.090 / counting 0.016
      to 0.00248 / 0.084 / 0.088 / 0.011 in the same time. Starting from the projected 1-way
      marginals (``init="marginals"``) changed nothing further (0.00248 / 0.084 / 0.088).
    * ``weight_power=1`` and ``consistency=True`` (the paper: 0 and False): noisy marginals weighted
      by the inverse variance of their noise, and made to agree on shared attributes before the
      projection; together they lower PrivPGD's 2-way SW1, covariance and query errors on adult
      (benchmarks/history/methods.md). Both use only noise scales and measurements: no privacy cost.
    * Hot loop (one epoch at ``m = N``: ~19 steps × 5 marginals × 10 directions): 32-bit packed keys
      (value bucket | index, numpy SIMD sort; :func:`_argsort_bounded`) instead of exact 64-bit
      keys, targets expanded with ``np.repeat``; SW projection step without autograd or
      per-iteration sorts. One epoch at ``m = N``: 5.8–6.2 s → 4.4–5.1 s under load 8 (≈1.9 s
      before at load 3.4).

    Threads: with other jobs on the 2 cores, ``torch.set_num_threads(1)`` was ~3× faster than 2
    (OpenMP threads spin against the other load); use 2 only on idle cores.

    Parameters
    ----------
    n_particles: ``m``, particles = output rows (None: ``N``, the record count; paper 100 000).
    epochs: passes over the marginals (200; paper 1000); ``batch_size`` marginals per step (5; 0 = all).
    num_projections: directions per marginal per step for SW2² (10).
    lr, scheduler_step, scheduler_gamma: particle optimiser (0.1; ×0.75 every 10 epochs; paper every 50).
    mask_rate: share of gradient entries zeroed per step (0: dense Adam; paper 0.8 → SparseAdam).
    proj_iters, proj_num_projections, proj_lr, proj_scheduler_step, proj_scheduler_gamma:
        projection step (200 iterations, 32 directions, Adam 0.1, ×0.8 every 100; paper 1750 × 200).
    proj_resample: re-draw the projection directions every this many iterations (0: never, the
        default; paper 1: every iteration). proj_stop_tol: early stop when the mean objective over
        25 iterations improves by less than this share (0.01; 0: off, the paper).
    init: "uniform" (particles i.i.d. uniform, the paper) or "marginals" (each coordinate from its
        projected 1-way marginal, uniform within the bin).
    weight_power: weight of each marginal's SW2² gradient, ``(n_c σ_c² / N²)^(-weight_power)``
        normalised to mean 1 (``n_c`` cells, ``σ_c`` its noise; :func:`_marginal_weights`). 1 (the
        default): the inverse variance of the noise in a marginal's CDF; with all 2-way marginals
        measured at one σ, a 10,000-cell marginal's target is mostly noise while a 4-cell one is
        nearly exact. 0 (the paper, :meth:`paper`): all equal. Benchmarks: benchmarks/history/methods.md
        ("PrivPGD at ≤ 10 min on one core"). Uses only the noise scales and the public domain.
    consistency: before the projection, make the noisy marginals agree on every shared attribute
        (:func:`~.measurements._consistent`: each attribute's 1-way marginal is the inverse-variance average of
        what every measured marginal holding it implies, and each marginal is shifted evenly to
        it; PrivSyn's consistency step). True by default; False (the paper, :meth:`paper`): each
        marginal is projected alone. Post-processing of the measurements: no privacy cost.
    constraint_strength: ``lambda`` for a constraint passed to :meth:`fit` (1.0).
    grad_scale: the reference's gradient multiplier (100) for SW2 and the constraint alike.
    device: ``None``/"auto" (CUDA if available), "cpu", "cuda", ...; ``seed``: int or SeedSequence.

    Fitted attributes: ``particles_`` (m × d float32 tensor on CPU), ``codes_`` (m × d int64),
    ``cliques_``, ``projected_`` (clique → probability vector, row-major over the clique, or over
    its groups where it was measured grouped),
    ``history_`` (loss per epoch: sum over marginals of the last SW2² seen), ``timings_``,
    ``total_`` (the record count used to normalise), ``device_``.
    """

    PAPER = dict(n_particles=100_000, epochs=1000, scheduler_step=50, mask_rate=0.8, proj_iters=1750, proj_num_projections=200,
                 proj_resample=1, proj_stop_tol=0.0, init="uniform", weight_power=0.0, consistency=False)

    def __init__(self, n_particles: int | None = None, epochs: int = 400, batch_size: int = 5,
                 num_projections: int = 10, lr: float = 0.1, scheduler_step: int = 20,
                 scheduler_gamma: float = 0.75, mask_rate: float = 0.0, *, proj_iters: int = 200,
                 proj_num_projections: int = 32, proj_lr: float = 0.1, proj_scheduler_step: int = 100,
                 proj_scheduler_gamma: float = 0.8, proj_resample: int = 0, proj_stop_tol: float = 0.01,
                 init: str = "uniform", weight_power: float = 1.0, consistency: bool = True,
                 constraint_strength: float = 1.0, grad_scale: float = 100.0,
                 device: Any = None, seed: int | np.random.SeedSequence | None = None):
        def pos_int(name, x, allow_zero=False):
            if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < (0 if allow_zero else 1):
                raise ValueError(f"{name} must be an integer >= {0 if allow_zero else 1}, got {x!r}")
            return int(x)

        self.n_particles = None if n_particles is None else pos_int("n_particles", n_particles)
        self.epochs = pos_int("epochs", epochs, allow_zero=True)
        self.batch_size = pos_int("batch_size", batch_size, allow_zero=True)
        self.num_projections = pos_int("num_projections", num_projections)
        self.scheduler_step = pos_int("scheduler_step", scheduler_step)
        self.proj_iters = pos_int("proj_iters", proj_iters, allow_zero=True)
        self.proj_num_projections = pos_int("proj_num_projections", proj_num_projections)
        self.proj_scheduler_step = pos_int("proj_scheduler_step", proj_scheduler_step)
        self.proj_resample = pos_int("proj_resample", proj_resample, allow_zero=True)
        if not (proj_stop_tol >= 0 and math.isfinite(proj_stop_tol)):
            raise ValueError(f"proj_stop_tol must be >= 0 and finite, got {proj_stop_tol!r}")
        self.proj_stop_tol = float(proj_stop_tol)
        if init not in ("uniform", "marginals"):
            raise ValueError(f"init must be 'uniform' or 'marginals', got {init!r}")
        self.init = init
        if not (weight_power >= 0 and math.isfinite(weight_power)):
            raise ValueError(f"weight_power must be >= 0 and finite, got {weight_power!r}")
        self.weight_power = float(weight_power)
        self.consistency = bool(consistency)
        for name, x in [("lr", lr), ("proj_lr", proj_lr), ("scheduler_gamma", scheduler_gamma),
                        ("proj_scheduler_gamma", proj_scheduler_gamma), ("grad_scale", grad_scale)]:
            if not (x > 0 and math.isfinite(x)):
                raise ValueError(f"{name} must be positive and finite, got {x!r}")
        if not 0 <= mask_rate < 1:
            raise ValueError(f"mask_rate must be in [0, 1), got {mask_rate!r}")
        if not (constraint_strength >= 0 and math.isfinite(constraint_strength)):
            raise ValueError(f"constraint_strength must be >= 0 and finite, got {constraint_strength!r}")
        self.lr = float(lr)
        self.scheduler_gamma = float(scheduler_gamma)
        self.mask_rate = float(mask_rate)
        self.proj_lr = float(proj_lr)
        self.proj_scheduler_gamma = float(proj_scheduler_gamma)
        self.constraint_strength = float(constraint_strength)
        self.grad_scale = float(grad_scale)
        self.device = device
        self.seed = seed

    def get_params(self) -> dict:
        keys = ["n_particles", "epochs", "batch_size", "num_projections", "lr", "scheduler_step",
                "scheduler_gamma", "mask_rate", "proj_iters", "proj_num_projections", "proj_lr",
                "proj_scheduler_step", "proj_scheduler_gamma", "proj_resample", "proj_stop_tol", "init", "weight_power",
                "consistency", "constraint_strength", "grad_scale",
                "device", "seed"]
        return {k: getattr(self, k) for k in keys}

    @classmethod
    def paper(cls, **changes) -> "PrivPGDGenerator":
        """The paper's settings (:attr:`PAPER`: 100k particles, 1000 epochs, projection 1750 × 200 fresh
        directions, no early stopping), with ``changes`` on top."""
        return cls(**{**cls.PAPER, **changes})

    state_kind: ClassVar[str] = "particles"  # in saved models (:mod:`privmarg.generate.state`)

    def to_state(self, key: str, arrays: dict, save) -> dict:
        """The saved form of a fitted generator: its particles, their codes and its settings."""
        if not hasattr(self, "codes_"):
            raise TypeError("cannot save an unfitted PrivPGDGenerator")
        arrays[f"{key}.codes"] = np.asarray(self.codes_, dtype=np.int64)
        arrays[f"{key}.particles"] = np.asarray(self.particles_.numpy(), dtype=np.float32)
        params = {k: plain(v) for k, v in self.get_params().items() if k not in ("seed", "device")}
        return {"domain": domain_state(self.domain_), "total": float(self.total_), "codes": f"{key}.codes",
                "particles": f"{key}.particles", "params": {k: v for k, v in params.items() if v is not SKIP}}

    @classmethod
    def from_state(cls, state: dict, arrays: dict, domain: Domain, load) -> "PrivPGDGenerator":
        gen = cls(**state.get("params", {}))
        gen.domain_ = domain
        gen.total_ = read_total(state)
        gen.codes_ = checked_codes(arrays[state["codes"]], domain, "particles' codes")
        gen.particles_ = torch.as_tensor(np.asarray(arrays[state["particles"]], dtype=np.float32))
        gen.device_ = torch.device("cpu")
        return gen

    def clone(self, **changes) -> "PrivPGDGenerator":
        """An unfitted copy with some parameters changed."""
        p = self.get_params()
        p.update(changes)
        return PrivPGDGenerator(**p)

    # ------------------------------------------------------------------------- fitting
    def fit(self, measurements: Iterable[Measurement | tuple], domain: Domain, *,
            zeros: Iterable[StructuralZero] = (), constraint: Callable[[torch.Tensor], torch.Tensor] | None = None,
            total: float | None = None, init_codes: np.ndarray | None = None,
            progress: Progress | None = None) -> "PrivPGDGenerator":
        """Run projection, quantisation and particle gradient descent; returns ``self``.

        ``measurements``: noisy marginals (``Measurement`` or ``(attrs, y, sigma)``), any arity and
        attribute order; a linear ``query`` is undone first (solve / least squares); repeated
        cliques are merged by inverse-variance weighting. ``zeros``: structural zeros; each one
        masks the cells of every measured clique containing its attributes. ``constraint``: a
        differentiable penalty ``R(Z) -> scalar tensor`` on the ``m × d`` particles (columns in
        domain order, values in ``[0,1]``), weighted by ``constraint_strength``; objects with a
        ``penalty`` method are accepted too. ``total``: record count used to normalise (public
        ``N``); ``None`` estimates it from the measurements. ``init_codes``: start the particles at
        these embedded records instead of uniform noise (then ``m`` = their number).
        ``progress(epoch, epochs, loss)`` is called after every epoch.
        """
        t_start = time.perf_counter()
        if not isinstance(domain, Domain):
            domain = Domain.from_dict(domain)
        self.domain_ = domain
        device = torch_device(self.device)
        self.device_ = device
        if isinstance(self.seed, np.random.SeedSequence):  # a fresh copy: refitting repeats the run
            ss = np.random.SeedSequence(self.seed.entropy, spawn_key=self.seed.spawn_key,
                                        pool_size=self.seed.pool_size)
        else:
            ss = np.random.SeedSequence(self.seed)
        ss_proj, ss_quant, ss_opt, ss_order = ss.spawn(4)
        zeros = list(zeros)
        mg = self._marginals(measurements, domain, total, zeros)
        self.total_ = mg.total
        # 2) projection of each signed marginal onto the simplex
        t0 = time.perf_counter()
        proj_info: dict = {}
        probs = project_signed_measures(
            [y / self.total_ for _, y, _ in mg.items], mg.sizes, mg.valid,
            iters=self.proj_iters, num_projections=self.proj_num_projections, lr=self.proj_lr,
            step=self.proj_scheduler_step, gamma=self.proj_scheduler_gamma, seed=ss_proj, device=device,
            resample=self.proj_resample, stop_tol=self.proj_stop_tol, check_every=25, info=proj_info)
        t_proj = time.perf_counter() - t0
        cliques = [a for a, _, _ in mg.items]
        one_way = _one_way(domain, cliques[:mg.n_fine], probs[:mg.n_fine])  # what the fine marginals imply
        # 1) particles
        Z0 = self._initial(init_codes, domain, one_way, ss_opt)
        # 3) quantisation (counts per cell, m particles each)
        targets = self._targets(mg, probs, Z0.shape[0], domain, device, ss_quant)
        self.cliques_ = cliques
        self.projected_ = dict(zip(cliques, probs))
        # 4) particle gradient descent
        t0 = time.perf_counter()
        snap = Snap(domain, mg.maps, device, torch.float32) if mg.maps else None
        Z = self._descend(Z0.to(device), targets, constraint, ss_opt, ss_order, progress, snap)
        if mg.maps:  # inside its group a particle goes where the fine 1-way marginal puts it
            held = {b for c in cliques[:mg.n_fine] for b in c}
            Z = place_in_groups(Z, domain, mg.maps, {a: p for a, p in zip(domain.attrs, one_way) if a in held})
        t_opt = time.perf_counter() - t0
        # 5) finalisation
        self.particles_ = Z.detach().cpu()
        self.codes_ = _repair_zeros(nearest_codes(self.particles_, domain.shape), self.particles_.numpy(),
                                    domain, zeros)
        self.timings_ = {"projection": t_proj, "optimisation": t_opt, "total": time.perf_counter() - t_start}
        self.proj_iters_ = max(proj_info.get("iters", [0]))  # iterations run (early stopping may cut them)
        return self

    def _marginals(self, measurements, domain: Domain, total: float | None, zeros: list) -> _Marginals:
        """The measurements as signed targets: fine ones merged per clique, grouped ones kept over
        their groups (:func:`~.grouped.split_grouped`), N (given, or estimated), made consistent
        (``consistency``), and the cells each may fill (structural zeros)."""
        fine, grouped, maps = split_grouped(_as_measurements(measurements), domain)
        merged = _merge_measurements(fine, domain)
        items = merged + [(g.attrs, g.y, g.sigma) for g in grouped]
        sizes = [domain.sizes(a) for a, _, _ in merged] + [g.sizes for g in grouped]
        if not items:
            raise ValueError("PrivPGD needs at least one measurement with attributes")
        if total is None:
            total = estimate_total([Measurement(a, y, s) for a, y, s in items], domain)
        if not (total > 0 and math.isfinite(total)):
            raise ValueError(f"total must be positive, got {total}")
        if self.consistency:
            items = [(a, y, s) for (a, _, s), y in zip(items, consistent_mixed(items, sizes, domain, maps))]
        valid = [_valid_cells(domain, a, zeros) for a, _, _ in items]
        valid[len(merged):] = [grouped_valid(v, domain, g.attrs, g.sizes, maps) for v, g in zip(valid[len(merged):], grouped)]
        return _Marginals(items, sizes, len(merged), maps, valid, float(total))

    def _initial(self, init_codes, domain: Domain, one_way: list[np.ndarray], ss_opt) -> torch.Tensor:
        """The starting particles: ``init_codes`` embedded, or ``m`` uniform draws (``init="marginals"``:
        each coordinate from its projected 1-way marginal, uniform within the bin, so the particles
        start with every 1-way marginal right, and no ties)."""
        if init_codes is not None:
            init_codes = np.asarray(init_codes)
            if init_codes.ndim != 2 or init_codes.shape[1] != len(domain):
                raise ValueError(f"init_codes must have shape (rows, {len(domain)})")
            return torch.as_tensor(embed_codes(init_codes, domain.shape), dtype=torch.float32)
        g = torch.Generator().manual_seed(_torch_seed(ss_opt.spawn(1)[0]))
        m = self.n_particles if self.n_particles is not None else max(1, int(round(self.total_)))
        Z0 = torch.rand((m, len(domain)), generator=g, dtype=torch.float32)
        if self.init == "marginals":
            for j, (a, p1) in enumerate(zip(domain.attrs, one_way)):
                x = torch.multinomial(torch.as_tensor(p1), m, replacement=True, generator=g)
                Z0[:, j] = (x.to(torch.float32) + Z0[:, j]) / domain[a]
        return Z0

    def _targets(self, mg: _Marginals, probs, m: int, domain: Domain, device, ss_quant) -> list[_Target]:
        """Each projected marginal to fit quantised into ``m`` particles' counts per cell, at its
        cells' positions (a grouped marginal's at its groups'), with its weight (``weight_power``)."""
        gq = torch.Generator().manual_seed(_torch_seed(ss_quant))
        fitted = list(range(len(mg.items)))
        if mg.maps:
            # with grouped marginals a 1-way marginal of an attribute that a wider one holds is not
            # fitted: consistency has put it into the wider ones' margins, and it places the
            # particles inside their groups afterwards; fitted too, at the weight of its small noise,
            # it crowded the wider ones out (benchmarks/history/methods.md, session 33)
            wider = {b for a, _, _ in mg.items if len(a) > 1 for b in a}
            fitted = [i for i in fitted if not (len(mg.items[i][0]) == 1 and mg.items[i][0][0] in wider)]
        weights = _marginal_weights([mg.items[i][2] for i in fitted], [int(np.prod(mg.sizes[i])) for i in fitted],
                                    self.total_, self.weight_power)
        targets = []
        d = len(domain)
        for i, w in zip(fitted, weights):
            a, u = mg.items[i][0], probs[i]
            grouped = i >= mg.n_fine
            kept = [n == domain[b] for b, n in zip(a, mg.sizes[i])]  # axes over their own codes
            centres = grouped_centres(domain, a, kept, mg.maps) if grouped else grid_centres(domain.sizes(a))
            # a grouped axis reads the snapped copy of its column (column d + j, see _descend)
            cols = [j if keep or not grouped else d + j for j, keep in zip(domain.axes(a), kept)]
            targets.append(_Target(a, torch.as_tensor(cols, device=device),
                                   torch.as_tensor(centres, dtype=torch.float32, device=device),
                                   torch.as_tensor(quantise(u, m, gq), device=device), u, float(w), snapped=grouped))
        return targets

    def _descend(self, Z, targets, constraint, ss_opt, ss_order, progress, snap=None):
        device = Z.device
        m, d = Z.shape
        gen = torch.Generator(device=device)
        gen.manual_seed(_torch_seed(ss_opt))
        order_rng = np.random.default_rng(ss_order)
        L = self.num_projections
        scale = self.grad_scale
        penalty = None
        if constraint is not None and self.constraint_strength > 0:
            penalty = getattr(constraint, "penalty", constraint)
            if not callable(penalty):
                raise TypeError("constraint must be callable (Z -> scalar tensor) or have a penalty method")
        sparse = self.mask_rate > 0
        if sparse:
            exp_avg = torch.zeros_like(Z)
            exp_avg_sq = torch.zeros_like(Z)
        else:
            Z.requires_grad_(True)
            opt = torch.optim.Adam([Z], lr=self.lr, betas=_BETAS, eps=_ADAM_EPS)
        n_t = len(targets)
        bs = n_t if self.batch_size == 0 else self.batch_size
        ws = _Workspace()
        G = torch.zeros((m, d), dtype=Z.dtype, device=device)
        if snap is not None:  # the particles beside their snapped copy, and its gradient (see below)
            beside = torch.empty((m, 2 * d), dtype=Z.dtype, device=device)
            G2 = torch.zeros((m, 2 * d), dtype=Z.dtype, device=device)
        losses = np.zeros(n_t)
        self.history_ = []
        step = 0
        for epoch in range(self.epochs):
            lr = self.lr * self.scheduler_gamma ** (epoch // self.scheduler_step)
            if not sparse:
                for grp in opt.param_groups:
                    grp["lr"] = lr
            perm = order_rng.permutation(n_t)
            for start in range(0, n_t, bs):
                batch = perm[start:start + bs]
                with torch.no_grad():
                    G.zero_()
                if penalty is not None:
                    Zc = Z.detach().clone().requires_grad_(True)
                    (gr,) = torch.autograd.grad(penalty(Zc), Zc)
                    G += gr.to(Z.dtype) * (self.constraint_strength * scale)
                with torch.no_grad():
                    # batch the marginals of equal arity into one sort; grouped targets read the
                    # particles beside their snapped copy (columns d.. of a (m, 2d) layout), and the
                    # copy's gradient moves the particles themselves
                    by_r: dict[tuple[int, bool], list[int]] = {}
                    for i in batch:
                        by_r.setdefault((len(targets[i].attrs), targets[i].snapped), []).append(int(i))
                    for (_, snapped), idxs in by_r.items():
                        tgts = [targets[i] for i in idxs]
                        if snapped:
                            G2.zero_()
                            losses[idxs] = self._sw2_grad(snap.beside(Z.detach(), beside), tgts, G2,
                                                          gen, L, scale, ws)
                            G += G2[:, :d] + G2[:, d:]
                        else:
                            losses[idxs] = self._sw2_grad(Z.detach(), tgts, G, gen, L, scale, ws)
                    step += 1
                    if sparse:
                        keep = torch.rand((m, d), generator=gen, device=device) >= self.mask_rate
                        G.mul_(keep)
                        sparse_adam_step(Z, G, exp_avg, exp_avg_sq, step, lr)
                        Z.clamp_(0.0, 1.0)
                if not sparse:
                    Z.grad = G
                    opt.step()
                    with torch.no_grad():
                        Z.clamp_(0.0, 1.0)
            loss = float(losses.sum())
            self.history_.append(loss)
            if progress is not None:
                progress(epoch + 1, self.epochs, loss)
        return Z.detach()

    @staticmethod
    def _sw2_grad(Z, tgts, G, gen, L, scale, ws: _Workspace | None = None) -> np.ndarray:
        """Add ``scale * grad SW2²`` of each target (same arity) into ``G``; return their SW2² values."""
        B = len(tgts)
        r = len(tgts[0].attrs)
        m = Z.shape[0]
        cols = torch.cat([t.cols for t in tgts])
        ZS = Z[:, cols].reshape(m, B, r).permute(1, 0, 2)  # (B, m, r)
        theta = _directions((B, L, r), gen, Z.device, Z.dtype)
        px = torch.einsum("bmr,blr->blm", ZS, theta)  # (B, L, m)
        # particles lie in [0,1]^r, so <z, theta> lies in [sum min(theta, 0), sum max(theta, 0)]
        ix = _argsort_bounded(px, theta.clamp(max=0).sum(-1, keepdim=True), theta.clamp(min=0).sum(-1, keepdim=True),
                              ws if px.device.type == "cpu" else None)
        # the sorted target, scattered back to the particles holding each rank (1-D optimal coupling).
        # The target is a weighted grid: sort its (few) cells, repeat each by its count.
        cs, cnt = [], []
        for b, t in enumerate(tgts):
            pc = theta[b] @ t.centres.T  # (L, n)
            oc = _argsort(pc).to(pc.device)
            cs.append(torch.gather(pc, -1, oc).reshape(-1))
            cnt.append(t.counts[oc].reshape(-1))
        cs, cnt = torch.cat(cs), torch.cat(cnt)
        if cs.device.type == "cpu":  # numpy's repeat is 2-3x faster than torch's on CPU
            ys = torch.from_numpy(np.repeat(cs.numpy(), cnt.numpy())).reshape(B, L, m)
        else:
            ys = torch.repeat_interleave(cs, cnt, output_size=B * L * m).reshape(B, L, m)
        yb = torch.empty_like(px) if ws is None else ws.get("ys", px.shape, px.dtype, px.device)
        diff = px.sub_(yb.scatter_(-1, ix, ys))  # particle i: x_i - y'_(rank of x_i)
        loss = torch.mul(diff, diff, out=yb).mean(dim=(1, 2))
        grad = torch.bmm(diff.transpose(1, 2), theta).mul_(2.0 * scale / L)  # (B, m, r)
        w = [t.weight for t in tgts]
        if any(x != 1.0 for x in w):
            grad.mul_(torch.tensor(w, dtype=grad.dtype, device=grad.device).view(B, 1, 1))
        G.index_add_(1, cols, grad.permute(1, 0, 2).reshape(m, B * r))
        return loss.cpu().numpy()

    # ---------------------------------------------------------------- generator protocol
    name = "privpgd"

    def generate(self, measurements, domain: Domain, *, zeros=(), total: float | None = None, warm: Any = None,
                 seed: np.random.SeedSequence | None = None, progress=None, constraint: Any = None,
                 **extra: Any) -> "PrivPGDGenerator":
        """A fitted copy (the model): :meth:`fit` on a clone seeded with ``seed``. ``progress(msg)``
        is told each epoch. Post-processing: no privacy cost."""
        gen = self.clone(seed=seed) if seed is not None else self.clone()

        def on_epoch(epoch, n, loss):
            if progress is not None:
                progress(f"PrivPGD epoch {epoch}/{n}: loss {loss:.4g}")

        return gen.fit(measurements, domain, zeros=zeros, constraint=constraint, total=total, progress=on_epoch)

    def model_size_mb(self, domain: Domain, cliques) -> None:
        return None  # particles: no model-size limit on what may be measured

    @property
    def domain(self) -> Domain:
        self._check_fitted()
        return self.domain_

    @property
    def total(self) -> float:
        self._check_fitted()
        return self.total_

    @property
    def default_rows(self) -> int:
        """The number of particles: what :meth:`sample_codes` returns by default."""
        self._check_fitted()
        return int(self.codes_.shape[0])

    def project(self, attrs) -> np.ndarray:
        """Marginal counts of the finalised particles on ``attrs`` (order given), scaled to ``total``."""
        self._check_fitted()
        attrs = tuple(attrs)
        if not attrs:
            return np.array([self.total_])
        axes = [self.domain_.attrs.index(a) for a in attrs]
        sizes = self.domain_.sizes(attrs)
        idx = np.ravel_multi_index(tuple(self.codes_[:, i] for i in axes), sizes)
        counts = np.bincount(idx, minlength=int(np.prod(sizes))).astype(float)
        return counts * (self.total_ / max(1, self.codes_.shape[0]))

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        return self.sample_codes(rows, rng)

    def sample_conditional(self, rows: int, rng: np.random.Generator, evidence) -> np.ndarray:
        """``rows`` records given ``evidence`` (attribute -> code). Fallback for particles, which
        have no potentials to clamp: rejection from the finalised particles, i.e. draws among the
        particles that carry the evidence (all of them, in random order, then draws with
        replacement when ``rows`` is larger; without replacement when smaller). This is exact for
        the model's own distribution (the particles' histogram, what :meth:`project` answers),
        but it can only repeat matching particles: a rare condition has few distinct records.
        Raises ``ValueError`` when no particle matches."""
        self._check_fitted()
        ok = np.ones(self.codes_.shape[0], dtype=bool)
        for a, v in evidence.items():
            if a not in self.domain_:
                raise ValueError(f"unknown attribute {a!r} in the condition")
            ok &= self.codes_[:, self.domain_.attrs.index(a)] == int(v)
        idx = np.flatnonzero(ok)
        rows = int(rows)
        if rows == 0:
            return self.codes_[:0].copy()
        if idx.size == 0:
            shown = ", ".join(f"{a}={v}" for a, v in evidence.items())
            raise ValueError(f"the condition {shown} has probability zero under the model (no PrivPGD "
                             "particle carries it)")
        if rows <= idx.size:
            pick = rng.choice(idx, rows, replace=False)
        else:
            pick = np.concatenate([idx, idx[rng.integers(0, idx.size, rows - idx.size)]])
            rng.shuffle(pick)
        return self.codes_[pick].copy()

    def __getstate__(self):
        # a fitted model's seed was drawn from the run's generators: a release does not carry it
        state = self.__dict__.copy()
        if "codes_" in state:
            state["seed"] = None
        return state

    # ------------------------------------------------------------------------- sampling
    def _check_fitted(self):
        if not hasattr(self, "codes_"):
            raise RuntimeError("PrivPGDGenerator is not fitted: call fit(measurements, domain) first")

    def sample_codes(self, rows: int | None = None, rng: np.random.Generator | None = None) -> np.ndarray:
        """Records as integer codes: all ``m`` finalised particles when ``rows`` is None or ``m``;
        otherwise ``rows`` of them drawn without replacement (``rows < m``) or all of them plus
        draws with replacement (``rows > m``), in random order. Post-processing: free."""
        self._check_fitted()
        m = self.codes_.shape[0]
        if rows is None or int(rows) == m:
            return self.codes_.copy()
        rows = int(rows)
        if rows < 0:
            raise ValueError("rows must be >= 0")
        rng = np.random.default_rng() if rng is None else rng
        if rows < m:
            idx = rng.choice(m, rows, replace=False)
        else:
            idx = np.concatenate([np.arange(m), rng.integers(0, m, rows - m)])
            rng.shuffle(idx)
        return self.codes_[idx].copy()
