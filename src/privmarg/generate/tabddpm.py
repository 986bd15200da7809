"""TabDDPM's model for integer-coded tables (Kotelnikov et al. 2023; SPEC §10.7): multinomial
diffusion (Hoogeboom et al. 2021) on every attribute, one MLP denoiser.

Forward process per attribute with ``k`` values: ``q(x_t | x_0) = Cat(ᾱ_t·x_0 + (1 − ᾱ_t)/k)``
(cosine schedule, ``timesteps`` steps). The network reads the one-hot ``x_t`` of all attributes and a
sinusoidal embedding of ``t`` and predicts ``x̂_0`` (a softmax per attribute); the reverse step is
the posterior ``q(x_{t−1} | x_t, x̂_0) ∝ (α_t·x_t + (1 − α_t)/k) ⊙ (ᾱ_{t−1}·x̂_0 + (1 − ᾱ_{t−1})/k)``.
The training loss of a record is ``KL(q(x_{t−1} | x_t, x_0) ‖ q(x_{t−1} | x_t, x̂_0))`` at a uniform
``t`` (at ``t = 1`` it is ``−log p(x_0 | x_1)``). Our tables are discretised codes, so the
Gaussian half of TabDDPM (numeric columns) is not needed.

Training reads private records, so it is not here: :class:`~privmarg.select.tabddpm.TabDDPMSelector`
trains the network with DP-SGD through the session. :class:`TrainedGenerator` hands that trained
model on (the Generator step is post-processing and has nothing left to fit).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Domain, Measurement
from .dpmerf import _Blocks
from .neural import NeuralModel, mlp, seeded, torch_device


class TabDDPMModel(NeuralModel):
    """Multinomial diffusion over ``domain``: the schedule, the denoiser ``net`` and its sampler."""

    kind = state_kind = "tabddpm"  # state_kind: in saved models

    def __init__(self, domain: Domain, total: float, *, timesteps: int = 50, hidden: Sequence[int] = (128, 128),
                 time_dim: int = 32, device: Any = None, init_seed: int = 0):
        import torch

        self.domain, self.total = domain, float(total)
        self.params = dict(timesteps=int(timesteps), hidden=[int(h) for h in hidden], time_dim=int(time_dim))
        self.device = torch_device(device)
        self.blocks = _Blocks(domain, self.device)
        K = self.blocks.K
        self.net = seeded(lambda: mlp(K + int(time_dim), self.params["hidden"], K, "SiLU"), init_seed).to(self.device)
        T = int(timesteps)
        s = 0.008
        f = np.cos((np.arange(T + 1) / T + s) / (1 + s) * math.pi / 2) ** 2
        abar = np.clip(f / f[0], 1e-6, 1.0)  # ᾱ_0 = 1 … ᾱ_T ≈ 0
        alpha = np.clip(abar[1:] / abar[:-1], 1e-6, 1.0)
        self.abar = torch.as_tensor(abar, dtype=torch.float32, device=self.device)
        self.alpha = torch.as_tensor(np.concatenate([[1.0], alpha]), dtype=torch.float32, device=self.device)
        k = torch.as_tensor(np.asarray(domain.shape, dtype=np.float32), device=self.device)
        self.inv_k = (1.0 / k)[None, :, None]  # (1, d, 1)

    # ------------------------------------------------------------------------- pieces
    def temb(self, t: Any) -> Any:
        """Sinusoidal embedding of integer steps ``t`` (n,) → (n, time_dim)."""
        import torch

        half = self.params["time_dim"] // 2
        freq = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
        a = t.float()[:, None] * freq[None, :]
        return torch.cat([a.sin(), a.cos()], dim=1)

    def onehot(self, codes: Any) -> Any:
        """Codes (n × d, torch) → padded one-hots (n × d × kmax)."""
        import torch

        kmax = self.blocks.pos.shape[1]
        return torch.nn.functional.one_hot(codes, kmax).float()

    def x0_probs(self, net: Any, xt: Any, t: Any) -> Any:
        """The denoiser's ``x̂_0`` (n × d × kmax, zero on padding) from padded one-hot ``x_t``."""
        import torch

        logits = net(torch.cat([self.blocks.flat(xt), self.temb(t)], dim=1))
        return torch.softmax(self.blocks.padded(logits), dim=-1)

    def _mix(self, p: Any, a: Any) -> Any:
        """``a·p + (1 − a)/k`` on valid entries (a: (n,), p padded)."""
        a = a[:, None, None]
        return (a * p + (1 - a) * self.inv_k) * self.blocks.valid[None].float()

    def q_t(self, x0: Any, t: Any) -> Any:
        return self._mix(x0, self.abar[t])

    def posterior(self, xt: Any, x0: Any, t: Any) -> Any:
        """``q(x_{t−1} | x_t, x_0)`` (``x_0`` one-hot or probabilities), normalised per attribute."""
        p = self._mix(xt, self.alpha[t]) * self._mix(x0, self.abar[t - 1])
        return p / p.sum(-1, keepdim=True).clamp_min(1e-30)

    def draw(self, probs: Any, gen: Any) -> Any:
        """Codes (n × d) drawn from per-attribute probabilities (Gumbel-max)."""
        import torch

        logp = probs.clamp_min(1e-30).log().masked_fill(~self.blocks.valid[None], float("-inf"))
        return (logp + self.blocks.gumbel(probs.shape, gen, probs.device)).argmax(-1)

    def loss(self, net: Any, codes: Any, gen: Any) -> Any:
        """Per-record training loss (n,): the KL at a uniform step ``t`` (see the module docstring)."""
        import torch

        n = codes.shape[0]
        T = self.params["timesteps"]
        t = torch.randint(1, T + 1, (n,), generator=gen, device=codes.device)
        x0 = self.onehot(codes)
        xt = self.onehot(self.draw(self.q_t(x0, t), gen))
        q = self.posterior(xt, x0, t)
        p = self.posterior(xt, self.x0_probs(net, xt, t), t)
        kl = q * (q.clamp_min(1e-30).log() - p.clamp_min(1e-30).log())
        return kl.sum(dim=(1, 2))

    def _sample(self, rows: int, gen: Any) -> np.ndarray:
        """The reverse diffusion in the flat layout (rows × K, no padding). The first layer of the
        denoiser on one-hot ``x_t`` is a sum of ``d`` weight columns (an embedding bag) plus the
        step's constant (its time embedding). The posterior ``∝ (α_t·[x_t] + (1 − α_t)/k) ⊙ m``,
        ``m = ᾱ_{t−1}·x̂_0 + (1 − ᾱ_{t−1})/k``, is drawn as the mixture it is: keep ``x_t`` with
        probability ``α_t·m[x_t] / (α_t·m[x_t] + (1 − α_t)/k)``, else draw from ``m`` (from ``x̂_0``
        with probability ``ᾱ_{t−1}``, else uniform): one categorical draw from ``x̂_0`` per step."""
        import torch
        import torch.nn.functional as F

        b, net, K = self.blocks, self.net, self.blocks.K
        first, rest = net[0], net[1:]
        wx = first.weight[:, :K].t().contiguous()  # K × h: one row per one-hot column
        inv_k = 1.0 / b.k.float()  # (d,)
        out = []
        for i in range(0, rows, 32768):  # chunks: a few flat (rows × K) float32 tensors
            n = min(rows - i, 32768)
            x = b.uniform_codes(n, gen)
            for step in range(self.params["timesteps"], 0, -1):
                t = torch.full((1,), step, device=self.device, dtype=torch.long)
                const = first.weight[:, K:] @ self.temb(t)[0] + first.bias  # (h,)
                idx = x + b.start
                x0 = b.seg_softmax(rest(F.embedding_bag(idx, wx, mode="sum") + const))
                a, ab = self.alpha[step], self.abar[step - 1]
                y = b.seg_sample(x0, gen, normalised=True)
                u = torch.rand((2, n, len(inv_k)), generator=gen, device=x.device)
                y = torch.where(u[0] < ab, y, b.uniform_codes(n, gen))
                stay = a * (ab * x0.gather(1, idx) + (1 - ab) * inv_k)
                x = torch.where(u[1] * (stay + (1 - a) * inv_k) < stay, x, y)
            out.append(x.cpu().numpy())
        return np.concatenate(out).astype(np.int64)


class TrainedGenerator:
    """The generator of a selector that trains its own model (DP-TabDDPM): returns the selection's
    model (``warm``) as is. Post-processing: no privacy cost."""

    name = "trained"

    def get_params(self) -> dict:
        return {}

    def model_size_mb(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> float | None:
        return None

    def generate(self, measurements: Sequence[Measurement], domain: Domain, *, zeros=(), warm: Any = None,
                 **kw: Any) -> Any:
        if warm is None:
            raise ValueError("this generator only passes on a model trained by its selector (the tabddpm preset)")
        warm.zeros = list(zeros)  # held at sampling time
        return warm
