"""DP-MERF's generator (Harder, Adamczewski, Park 2021; SPEC §10.6): a network trained to match a
released mean embedding. Post-processing: it sees the noisy embedding and public facts only.

Records are integer codes, so the kernel is a Gaussian on their concatenated one-hot vectors
``e(x)`` (``‖e(x) − e(y)‖² = 2·Hamming(x, y)``: a kernel on categorical records), approximated with
``D`` random Fourier features ``φ(x) = √(2/D)·[cos(Wᵀe(x)), sin(Wᵀe(x))]``, ``W ~ N(0, ℓ⁻²)``
(``‖φ(x)‖ = 1``). :class:`~privmarg.select.dpmerf.MERFSelector` releases ``Σφ(x)`` and a count; this
module's :class:`MERFGenerator` trains an MLP from Gaussian noise to per-attribute logits, records
drawn as hard one-hots (straight-through Gumbel-softmax), to minimise ``‖μ̃ − mean φ(x̂)‖²``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Domain, Measurement
from .neural import NeuralModel, mlp, offsets, seeded, torch_device, torch_generator


def rff_angles(onehot: Any, W: Any) -> Any:
    """``e(x)ᵀW`` for one-hot (or relaxed one-hot) rows ``onehot`` (n × K) and frequencies ``W`` (K × D/2)."""
    return onehot @ W


def rff(angles: Any) -> Any:
    """Random Fourier features from angles (n × D/2): ``√(2/D)·[cos, sin]``, each row of norm 1."""
    import torch

    half = angles.shape[1]
    return torch.cat([angles.cos(), angles.sin()], dim=1) / half**0.5


def code_features(codes: np.ndarray, W: Any, domain: Domain) -> Any:
    """φ of integer records (n × d codes): ``Σ_i W[offset_i + x_i]`` (an embedding bag: memory
    n × D/2, not n × d × D/2) then cos/sin."""
    import torch
    import torch.nn.functional as F

    off = offsets(domain)
    idx = torch.as_tensor(np.asarray(codes, dtype=np.int64) + off[:-1], device=W.device)
    angles = F.embedding_bag(idx, W, mode="sum") if idx.shape[1] else W.new_zeros((len(idx), W.shape[1]))
    return rff(angles)


class _Blocks:
    """Per-attribute softmax over a concatenated logit vector, as one padded tensor op."""

    def __init__(self, domain: Domain, device: Any):
        import torch

        off = offsets(domain)
        kmax = int(max(domain.shape))
        d = len(domain)
        pos = np.full((d, kmax), -1, dtype=np.int64)
        for i, k in enumerate(domain.shape):
            pos[i, :k] = np.arange(off[i], off[i] + k)
        self.pos = torch.as_tensor(pos, device=device)
        self.valid = self.pos >= 0
        self.safe = self.pos.clamp_min(0)
        self.K = int(off[-1])
        # the flat layout (n × K, no padding): each column's attribute, each attribute's first column
        self.blk = torch.as_tensor(np.repeat(np.arange(d), domain.shape), device=device)
        self.start = torch.as_tensor(off[:-1], device=device)
        self.k = torch.as_tensor(np.asarray(domain.shape, dtype=np.int64), device=device)
        self.member = torch.nn.functional.one_hot(self.blk, d).float()  # K × d block indicator

    def padded(self, logits: Any) -> Any:
        """(n × K) → (n × d × kmax) with −inf padding."""
        x = logits[:, self.safe]
        return x.masked_fill(~self.valid, float("-inf"))

    def flat(self, padded: Any) -> Any:
        """(n × d × kmax) → (n × K) (padding dropped)."""
        return padded[:, self.valid]

    def seg_sum(self, x: Any) -> Any:
        """Per-attribute sums of a flat (n × K) tensor → (n × d) (a product with the K × d block
        indicator: on CPU far faster than a scatter)."""
        return x @ self.member.to(x.dtype)

    def spread(self, s: Any) -> Any:
        """(n × d) per-attribute values → (n × K), each repeated over its block's columns."""
        return s.index_select(1, self.blk)

    def seg_softmax(self, logits: Any) -> Any:
        """Softmax within each attribute's block of flat logits (n × K); differentiable."""
        import torch

        n = logits.shape[0]
        with torch.no_grad():  # each block shifted by its own maximum: every block sum is >= 1, so neither
            # exp nor the gradient of e/s (~1/s²) overflows (a row-wide shift left some block sums
            # denormal, and their gradients went to inf/NaN)
            shift = self.spread(logits.new_full((n, len(self.start)), float("-inf")).scatter_reduce(
                1, self.blk.expand(n, -1), logits, "amax"))
        e = (logits - shift).exp()
        s = self.seg_sum(e)
        return e / self.spread(s)

    def seg_sample(self, p: Any, gen: Any, normalised: bool = False) -> Any:
        """Codes (n × d): one draw per attribute from flat nonnegative weights ``p`` (n × K, each
        block with a positive sum; ``normalised``: each already sums to 1), by inverse CDF: d
        uniforms per row and one float32 cumsum (CDF error ~1e-6, far below the models' noise)."""
        import torch

        q = p if normalised else p / self.spread(self.seg_sum(p))
        c = q.cumsum(1)
        before = c.index_select(1, self.start) - q.index_select(1, self.start)
        span = c.index_select(1, self.start + self.k - 1) - before  # the block's total as summed
        u = torch.rand(before.shape, generator=gen, device=p.device, dtype=c.dtype)
        j = torch.searchsorted(c, before + u * span, right=True)
        return torch.minimum((j - self.start).clamp_min(0), self.k - 1)

    def uniform_codes(self, n: int, gen: Any) -> Any:
        """Codes (n × d), each attribute uniform over its values."""
        import torch

        u = torch.rand((n, len(self.k)), generator=gen, device=self.k.device, dtype=torch.float64)
        return torch.minimum((u * self.k).long(), self.k - 1)

    def gumbel(self, shape, gen: Any, device: Any) -> Any:
        import torch

        u = torch.rand(shape, generator=gen, device=device).clamp(1e-10, 1 - 1e-10)
        return -(-u.log()).log()

    def hard_sample(self, logits: Any, gen: Any, tau: float = 1.0) -> Any:
        """Straight-through Gumbel-softmax on flat logits (n × K): hard one-hots forward (the
        block's Gumbel-max), the softmax's gradients backward."""
        import torch

        n = logits.shape[0]
        scores = (logits + self.gumbel(logits.shape, gen, logits.device)) / tau
        y = self.seg_softmax(scores)
        with torch.no_grad():
            top = scores.new_full((n, len(self.start)), float("-inf")).scatter_reduce(
                1, self.blk.expand(n, -1), scores, "amax")
            hard = (scores == self.spread(top)).to(y.dtype)
        return hard - y.detach() + y


class MERFModel(NeuralModel):
    """A trained DP-MERF generator: Gaussian noise → MLP → per-attribute categorical draws."""

    kind = state_kind = "dpmerf"  # state_kind: in saved models

    def __init__(self, domain: Domain, total: float, *, latent: int, hidden: Sequence[int], device: Any = None,
                 init_seed: int = 0):
        self.domain, self.total = domain, float(total)
        self.params = dict(latent=int(latent), hidden=[int(h) for h in hidden])
        self.device = torch_device(device)
        self.blocks = _Blocks(domain, self.device)
        self.net = seeded(lambda: mlp(int(latent), self.params["hidden"], self.blocks.K), init_seed).to(self.device)

    def logits(self, n: int, gen: Any) -> Any:
        import torch

        z = torch.randn((n, self.params["latent"]), generator=gen, device=self.device)
        return self.net(z)

    def _sample(self, rows: int, gen: Any) -> np.ndarray:
        b = self.blocks
        out = [b.seg_sample(b.seg_softmax(self.logits(min(rows - i, 32768), gen)), gen, normalised=True).cpu().numpy()
               for i in range(0, rows, 32768)]  # chunks: flat (rows × K) float tensors
        return np.concatenate(out).astype(np.int64)


class MERFGenerator:
    """Trains a :class:`MERFModel` to the released embedding (``generate(..., embedding=μ̃,
    frequencies=W)``, the hints of :class:`~privmarg.select.dpmerf.MERFSelector`).

    ``latent`` noise dimension, ``hidden`` layer widths, ``iters`` Adam steps of ``batch_size``
    generated records at learning rate ``lr``; ``time_limit`` seconds stops training early (then
    the output depends on the machine's speed, not only on the seed); ``device`` None: CUDA when
    present. Post-processing: no privacy cost."""

    name = "dpmerf"

    def __init__(self, latent: int = 32, hidden: Sequence[int] = (128, 128), iters: int = 2000, batch_size: int = 500,
                 lr: float = 3e-3, time_limit: float | None = 300.0, device: Any = None):
        self.latent, self.hidden, self.iters, self.batch_size = int(latent), tuple(int(h) for h in hidden), int(iters), int(batch_size)
        self.lr, self.time_limit, self.device = float(lr), time_limit, device

    def get_params(self) -> dict:
        return dict(latent=self.latent, hidden=list(self.hidden), iters=self.iters, batch_size=self.batch_size,
                    lr=self.lr, time_limit=self.time_limit, device=self.device)

    def model_size_mb(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> float | None:
        return None

    def generate(self, measurements: Sequence[Measurement], domain: Domain, *, zeros=(), total: float | None = None,
                 warm: Any = None, seed: np.random.SeedSequence | None = None, progress=None,
                 embedding: np.ndarray | None = None, frequencies: np.ndarray | None = None,
                 count: float | None = None, **extra: Any) -> MERFModel:
        import torch

        if embedding is None or frequencies is None:
            raise ValueError("the dpmerf generator needs a released embedding (use the DPMERF preset)")
        rng = np.random.default_rng(seed)
        model = MERFModel(domain, total if total is not None else count, latent=self.latent, hidden=self.hidden,
                          device=self.device, init_seed=int(rng.integers(2**62)))
        dev = model.device
        gen = torch_generator(rng, dev)
        W = torch.as_tensor(frequencies, dtype=torch.float32, device=dev)
        target = torch.as_tensor(embedding, dtype=torch.float32, device=dev)
        opt = torch.optim.Adam(model.net.parameters(), lr=self.lr)
        t0 = time.perf_counter()
        for it in range(self.iters):
            x = model.blocks.hard_sample(model.logits(self.batch_size, gen), gen)
            loss = ((rff(rff_angles(x, W)).mean(0) - target) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if progress is not None and (it + 1) % 500 == 0:
                progress(f"dpmerf: step {it + 1}/{self.iters}, loss {loss.item():.3g}")
            if self.time_limit is not None and time.perf_counter() - t0 > self.time_limit:
                break
        model.net.eval()
        model.zeros = list(zeros)
        return model
