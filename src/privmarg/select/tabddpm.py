"""DP-TabDDPM's training (SPEC §10.7): the multinomial-diffusion denoiser trained with DP-SGD.

Training reads private records, so it happens here, through the session: one charged
:meth:`~privmarg.measure.MeasurementSession.dp_sgd` phase, accounted in RDP and put on the run's
zCDP ledger as its zCDP equivalent (:mod:`privmarg.privacy.rdp`). Per-record gradients come from
Opacus: its ghost clipping (:class:`opacus.grad_sample.GradSampleModuleFastGradientClipping`) gives
every record's gradient norm without materialising the per-record gradients, and one more backward
pass gives their sum weighted per record. The session computes the clipping weights
``min(1, clip/‖g_i‖)`` from those norms, takes the weighted sum and adds the Gaussian noise (noise multiplier calibrated before the first step so that the run's (ε, δ) is
exactly met), and the optimiser (Adam) steps on the noisy mean. Batches: Poisson at rate
``q = B/Ñ`` under add/remove (``Ñ`` a released noisy count: the rate may not depend on the private
``N``), ``B`` records without replacement under replace-one. The number of steps is fixed before
training from public numbers (``epochs·Ñ/B``, at most ``max_steps``); ``time_limit`` may end
training earlier (the charge covers all steps; stopping early spends nothing more).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Domain
from ..privacy import gaussian_sigma
from .base import Context, Selection, check_fraction


class TabDDPMSelector:
    """Train a :class:`~privmarg.generate.tabddpm.TabDDPMModel` with DP-SGD.

    ``timesteps``, ``hidden``, ``time_dim``: the model; ``batch_size`` B (expected, under
    add/remove), ``epochs``, ``max_steps``, ``lr`` (Adam), ``clip`` C; ``count_share``: the share
    of the budget for the noisy count under add/remove; ``time_limit`` seconds; ``device`` None:
    CUDA when present.

    Privacy: ``ctx.rho`` in zCDP terms, spent exactly: the count (add/remove) is a Gaussian
    ``ρ_N``; the DP-SGD phase's zCDP equivalent is the rest (its noise multiplier is calibrated so).
    The run needs a ``delta`` (the RDP conversion is made at it)."""

    name = "tabddpm"
    reads_records = True  # through the session's charged sums; a row source, or the full joint marginal

    def __init__(self, timesteps: int = 50, hidden: Sequence[int] = (128, 128), time_dim: int = 32,
                 batch_size: int = 256, epochs: float = 10.0, max_steps: int = 2000, lr: float = 2e-3,
                 clip: float = 1.0, count_share: float = 0.05, time_limit: float | None = 300.0, device: Any = None):
        self.timesteps, self.hidden, self.time_dim = int(timesteps), tuple(int(h) for h in hidden), int(time_dim)
        self.batch_size, self.epochs, self.max_steps = int(batch_size), float(epochs), int(max_steps)
        self.lr, self.clip = float(lr), float(clip)
        self.count_share = check_fraction("count_share", count_share)
        self.time_limit, self.device = time_limit, device
        if self.batch_size < 1 or self.max_steps < 1 or not self.epochs > 0 or not self.clip > 0:
            raise ValueError("batch_size, max_steps, epochs and clip must be positive")

    def supporting_cliques(self, domain: Domain) -> list[tuple[str, ...]]:
        return [tuple(domain.attrs)]  # DP-SGD reads whole records (their full joint marginal)

    def run(self, session, ctx: Context) -> Selection:
        import torch
        from opacus.grad_sample import GradSampleModuleFastGradientClipping

        from ..generate.neural import torch_generator
        from ..generate.tabddpm import TabDDPMModel

        dom = session.domain
        rho = ctx.rho
        count = ctx.total
        if count is None:  # add/remove: N is private, so is any rate computed from it
            rho_n = self.count_share * rho
            m = session.measure((), gaussian_sigma(rho_n, 1.0), what="record count")
            count = max(1.0, float(m.y[0]))
            rho -= rho_n
        B = int(min(self.batch_size, max(1, math.floor(count))))
        steps = int(max(1, min(self.max_steps, math.ceil(self.epochs * count / B))))
        init_ss, noise_ss = session.public_seeds(2)  # network init and the diffusion's own (t, x_t) draws
        model = TabDDPMModel(dom, count, timesteps=self.timesteps, hidden=self.hidden, time_dim=self.time_dim,
                             device=self.device, init_seed=int(np.random.default_rng(init_ss).integers(2**62)))
        dev = model.device
        gen = torch_generator(np.random.default_rng(noise_ss), dev)
        params = [p for p in model.net.parameters() if p.requires_grad]
        sizes = [p.numel() for p in params]
        P = int(sum(sizes))
        gsm = GradSampleModuleFastGradientClipping(model.net, loss_reduction="sum", max_grad_norm=self.clip,
                                                   use_ghost_clipping=True)

        def grads(codes: np.ndarray) -> _GhostRows:
            x = torch.as_tensor(codes, dtype=torch.long, device=dev)
            gsm.enable_hooks()
            with warnings.catch_warnings():  # Opacus's hooks on a first layer whose input needs no gradient
                warnings.filterwarnings("ignore", message="Full backward hook is firing")
                losses = model.loss(gsm, x, gen)  # (n,): record i's loss depends on record i only
                losses.sum().backward(retain_graph=True)  # the hooks compute each record's gradient norm
            norms = gsm.get_norm_sample().detach()
            gsm.disable_hooks()
            for p in params:
                p.grad = None
            return _GhostRows(losses, params, norms)

        if session.neighbour == "add_remove":
            phase = session.dp_sgd(rho=rho, steps=steps, clip=self.clip, size=P, sample_rate=min(1.0, B / count),
                                   denominator=float(B), what=f"DP-SGD: {steps} steps of the TabDDPM denoiser")
        else:
            phase = session.dp_sgd(rho=rho, steps=steps, clip=self.clip, size=P, batch_size=B,
                                   what=f"DP-SGD: {steps} steps of the TabDDPM denoiser")
        opt = torch.optim.Adam(params, lr=self.lr)
        like = params[0].detach().reshape(-1)
        t0 = time.perf_counter()
        done = 0
        for done in range(1, steps + 1):
            noisy = phase.step(grads, like=like) / phase.denominator
            for p, g in zip(params, torch.split(noisy, sizes)):
                p.grad = g.reshape(p.shape).to(p.dtype)
            opt.step()
            if done % 200 == 0:
                ctx.progress(f"tabddpm: DP-SGD step {done}/{steps}")
            if self.time_limit is not None and time.perf_counter() - t0 > self.time_limit:
                break
        for p in params:
            p.grad = None
        gsm.disable_hooks()
        gsm.cleanup()  # hooks and per-record attributes off the network: the model keeps no trace of them
        model.net.eval()
        entry = session.accountant.ledger[-1].params
        ctx.progress(f"tabddpm: trained {done} of {steps} steps (noise multiplier {entry['noise_multiplier']:.3g})")
        return Selection(list(session.measurements), dom, model=model, released=list(session.measurements),
                         extra={"steps": steps, "steps_done": done, "batch_size": B,
                                "noise_multiplier": entry["noise_multiplier"], "count": count})


class _GhostRows:
    """The per-record gradients of ``losses`` (n,) w.r.t. ``params``, held implicitly: their L2
    ``norms`` (from Opacus's ghost clipping) and, on demand, their weighted sum ``Σ_i w_i·∇loss_i``
    (one backward pass of ``Σ_i w_i·loss_i``, the weights detached)."""

    def __init__(self, losses: Any, params: list, norms: Any):
        self.losses, self.params, self._norms = losses, params, norms

    def norms(self) -> Any:
        return self._norms

    def weighted_sum(self, w: Any) -> Any:
        import torch

        with warnings.catch_warnings():  # the (disabled) hooks are still registered: same warning
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            g = torch.autograd.grad((self.losses * w.detach()).sum(), self.params, retain_graph=True)
        return torch.cat([t.reshape(-1) for t in g])
