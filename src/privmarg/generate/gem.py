"""GEM's generator network (Liu, Vietri, Wu 2021; SPEC §10.5), torch.

A residual MLP (CTGAN-style: each hidden layer's ReLU output is concatenated to its input) maps a
fixed batch of Gaussian latents to one softmax block per attribute. The network's relaxed answer to
a marginal cell is the mean over the batch of the product of the cell's softmax entries (a mixture
of product distributions, one per latent), so every measured marginal is differentiable in the
weights. Training: Adam with cosine-decayed learning rate on the mean absolute error between the
relaxed answers and the measured answers (normalised by N, clipped to [0, 1]), restricted each step
to the worst cells: those whose error is at least ``error_share`` × an exponential moving average
(``ema_beta``) of the maximum error, at most ``top_queries`` of them (GEM's rule; GEM keeps its EMA
across rounds, here it runs over steps, so a one-shot fit also keeps moving to the current worst
cells). ``warm=`` continues training an earlier model (same network, same latent batch): the model
in an adaptive loop. Sampling: a latent of the fixed batch, then one categorical draw per
attribute from its softmax: the model's own distribution (a mixture of ``batch_size`` product
distributions, what the relaxed answers average). Fresh latents were tried and rejected: the
network is fitted on the fixed batch only, and on noiseless 2-way marginals of a small table
(500 steps) records from fresh latents had mean 2-way TV 0.07–0.08 against 0.005–0.008 from the
fixed batch.

Post-processing only: no privacy cost. Reproducible: weights and latents come from seeded torch
generators; training is deterministic on CPU (CUDA kernels may differ in the last bits), and
sampling runs on CPU from the caller's numpy generator.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from ..core import Domain, Measurement, StructuralZero
from .mixture import ProductMixture
from .targets import marginal_targets, resolve_total
from .neural import torch_device
from .state import domain_state, read_total, zeros_from_state, zeros_to_state


def _seed_int(seed: Any) -> int:
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed if seed is not None else 0)
    return int(ss.generate_state(1, dtype=np.uint64)[0] % (2**63 - 1))


def init_params(dims: tuple[int, ...], out_dim: int, gen: torch.Generator) -> list[torch.Tensor]:
    """Weights and biases of the residual MLP, uniform ±1/√fan_in (torch's Linear default), drawn
    from ``gen``. ``dims`` = (latent, hidden₁, hidden₂, …)."""
    params, fan = [], dims[0]
    for h in list(dims[1:]) + [out_dim]:
        b = 1.0 / math.sqrt(fan)
        params += [torch.empty(h, fan).uniform_(-b, b, generator=gen), torch.empty(h).uniform_(-b, b, generator=gen)]
        fan += h
    return params


def forward(params: Sequence[torch.Tensor], z: torch.Tensor, spans: Sequence[tuple[int, int]]) -> torch.Tensor:
    """Softmax blocks (batch × Σk) of the network on latents ``z``."""
    x = z
    for i in range(0, len(params) - 2, 2):
        x = torch.cat([torch.relu(x @ params[i].T + params[i + 1]), x], dim=1)
    logits = x @ params[-2].T + params[-1]
    return torch.cat([torch.softmax(logits[:, s:e], dim=1) for s, e in spans], dim=1)


class _Answers:
    """Relaxed answers of the measured cells as one vector: 1-way cells gathered from the batch
    mean, 2-way cells from the Gram matrix SᵀS/B (all pairs in one product), larger cliques by a
    row-wise outer product and one matrix product each."""

    def __init__(self, domain: Domain, cliques: Sequence[tuple[str, ...]], starts: dict, device):
        self.one, self.two_i, self.two_j, self.more, order = [], [], [], [], []
        # per clique, for :meth:`cells`: first position in the measured order, block starts, shape
        self.offsets, self.block_starts, self.shapes = [], [], []
        self.width, self.device = sum(domain.shape), device
        pos = 0
        for c in cliques:
            n = domain.size(c)
            self.offsets.append(pos)
            self.block_starts.append(np.array([starts[a] for a in c], np.int64))
            self.shapes.append(tuple(domain.sizes(c)))
            if len(c) > 2:
                self.more.append([(starts[a], starts[a] + domain[a]) for a in c])
                order.append(("more", pos, n))
                pos += n
                continue
            grids = np.unravel_index(np.arange(n), domain.sizes(c))
            idx = [starts[a] + g for a, g in zip(c, grids)]
            if len(c) == 1:
                self.one.append(idx[0])
                order.append(("one", pos, n))
            else:
                self.two_i.append(idx[0])
                self.two_j.append(idx[1])
                order.append(("two", pos, n))
            pos += n
        self.offsets = np.array(self.offsets, np.int64)
        self.kmax = max((len(c) for c in cliques), default=1)
        cat = lambda xs: torch.as_tensor(np.concatenate(xs) if xs else np.zeros(0, np.int64), device=device)
        self.one_t, self.ti, self.tj = cat(self.one), cat(self.two_i), cat(self.two_j)
        # where each group's cells go in the measured order
        kinds = {"one": [], "two": [], "more": []}
        for kind, p, n in order:
            kinds[kind].append(np.arange(p, p + n))
        self.perm = torch.as_tensor(np.argsort(np.concatenate(
            [np.concatenate(kinds[k]) if kinds[k] else np.zeros(0, np.int64) for k in ("one", "two", "more")]),
            kind="stable"), device=device)

    def cells(self, S: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """The relaxed answers of the cells ``idx`` (positions in the measured order) alone: the batch
        mean of the product of each cell's softmax entries. Training's loss uses at most
        ``top_queries`` cells a step, so its gradient flows through these instead of every answer."""
        pos = idx.detach().cpu().numpy()
        ci = np.searchsorted(self.offsets, pos, side="right") - 1
        cols = np.full((len(pos), self.kmax), self.width, np.int64)  # padding: a column of ones
        for r, (c, p) in enumerate(zip(ci, pos)):
            codes = np.unravel_index(p - self.offsets[c], self.shapes[c])
            cols[r, :len(codes)] = self.block_starts[c] + np.asarray(codes, np.int64)
        S1 = torch.cat([S, torch.ones(S.shape[0], 1, dtype=S.dtype, device=S.device)], dim=1)
        return S1[:, torch.as_tensor(cols, device=S.device)].prod(dim=2).mean(dim=0)

    def __call__(self, S: torch.Tensor) -> torch.Tensor:
        parts = []
        if len(self.one_t):
            parts.append(S.mean(0)[self.one_t])
        if len(self.ti):
            parts.append((S.T @ S / S.shape[0])[self.ti, self.tj])
        B = S.shape[0]
        for spans in self.more:
            # the row-wise outer product of all blocks but the last, then one matrix product with the
            # last: what einsum("bi,bj,bk->ijk") computes, without its per-call path search (which
            # took as long as the product itself over hundreds of 3-way marginals a step)
            P = S[:, spans[0][0]:spans[0][1]]
            for s, e in spans[1:-1]:
                P = (P[:, :, None] * S[:, None, s:e]).reshape(B, -1)
            s, e = spans[-1]
            parts.append((P.T @ S[:, s:e]).reshape(-1) / B)
        return torch.cat(parts)[self.perm]


class GEMModel:
    """A trained generator network over ``domain`` standing for ``total`` records: ``params`` (CPU
    tensors), the fixed latent batch ``latent`` (what :meth:`project` averages over) and the EMA of
    the maximum error. Sampling is post-processing: no privacy cost."""

    def __init__(self, domain: Domain, total: float, params: list[torch.Tensor], latent: torch.Tensor,
                 zeros: Sequence[StructuralZero] = (), ema: float | None = None, info: dict | None = None):
        self.domain, self.total = domain, float(total)
        self.params = [p.detach().cpu().float() for p in params]
        self.latent = latent.detach().cpu().float()
        self.zeros = list(zeros)
        self.ema = ema
        self.fit_info = info or {}
        ks = list(domain.shape)
        ends = np.cumsum(ks)
        self.spans = [(int(e - k), int(e)) for k, e in zip(ks, ends)]
        self.starts = {a: s for a, (s, _) in zip(domain.attrs, self.spans)}
        self._mixture: ProductMixture | None = None

    state_kind: ClassVar[str] = "gem"  # in saved models (:mod:`privmarg.generate.state`)

    def to_state(self, key: str, arrays: dict, save) -> dict:
        """The saved form: the network's weights (its hidden sizes follow from them), the fixed
        latent batch, the structural zeros and the error EMA."""
        params = []
        for i, p in enumerate(self.params):
            arrays[f"{key}.params.{i}"] = p.numpy().astype(np.float32)
            params.append(f"{key}.params.{i}")
        arrays[f"{key}.latent"] = self.latent.numpy().astype(np.float32)
        return {"domain": domain_state(self.domain), "total": float(self.total), "params": params,
                "latent": f"{key}.latent", "zeros": zeros_to_state(self.zeros, key, arrays), "ema": self.ema}

    @classmethod
    def from_state(cls, state: dict, arrays: dict, domain: Domain, load) -> "GEMModel":
        params = [torch.as_tensor(np.asarray(arrays[k], dtype=np.float32)) for k in state["params"]]
        latent = torch.as_tensor(np.asarray(arrays[state["latent"]], dtype=np.float32))
        if len(params) < 2 or params[-1].shape != (sum(domain.shape),) or latent.ndim != 2 \
                or params[0].shape[1] != latent.shape[1]:
            raise ValueError("the GEM network does not fit the domain")
        return cls(domain, read_total(state), params, latent, zeros_from_state(state.get("zeros", []), arrays),
                   state.get("ema"))

    @property
    def hidden(self) -> tuple[int, ...]:
        return tuple(int(self.params[i].shape[0]) for i in range(0, len(self.params) - 2, 2))

    def probabilities(self, z: torch.Tensor | None = None) -> np.ndarray:
        """Softmax blocks (rows × Σk) for latents ``z`` (default: the fixed batch), on CPU."""
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # a few small products: extra threads only wait (see GEMGenerator)
        try:
            with torch.no_grad():
                return forward(self.params, self.latent if z is None else z, self.spans).numpy().astype(np.float64)
        finally:
            torch.set_num_threads(threads)

    @property
    def mixture(self) -> ProductMixture:
        """The model's distribution: the uniform mixture over the fixed latent batch of the
        network's softmax blocks (computed once)."""
        if self._mixture is None:
            self._mixture = ProductMixture(self.domain, self.probabilities(), self.total, self.zeros)
        return self._mixture

    def project(self, attrs: Sequence[str]) -> np.ndarray:
        """The relaxed marginal on ``attrs`` (order given) over the fixed latent batch, as counts."""
        return self.mixture.project(attrs)

    def sample(self, rows: int, rng: np.random.Generator) -> np.ndarray:
        """``rows`` records from the model's distribution: each picks a latent of the batch
        uniformly, then one value per attribute from that latent's softmax blocks (so the samples
        follow :meth:`project`); structural zeros are redrawn from the latent's probabilities
        restricted to the allowed cells."""
        return self.mixture.sample(rows, rng)

    def sample_conditional(self, rows: int, rng: np.random.Generator, evidence) -> np.ndarray:
        """``rows`` records given ``evidence`` (attribute -> code), exact for the mixture. Raises
        ``ValueError`` when the evidence has probability zero."""
        return self.mixture.sample_conditional(rows, rng, evidence)

    def size_mb(self) -> float:
        return (sum(p.numel() for p in self.params) + self.latent.numel()) * 4 / 2**20


class GEMGenerator:
    """GEM's generator network (see the module docstring).

    ``steps`` Adam steps per fit (SPEC: ≤ 500; default 200, a CPU profile), ``lr`` (SPEC 1e-3; default
    3e-3 for the fewer steps; cosine decay to 0 over the fit), ``batch_size`` of the fixed latent batch (SPEC 1024; default 512),
    ``latent_dim`` (SPEC Σk_i; default 64), ``hidden`` layer widths (SPEC [2·dim,
    2·dim]; default (256, 256)), ``top_queries`` (100), ``error_share`` (0.5), ``ema_beta`` (0.5),
    ``tol``: stop when the largest error falls below it; ``pretrain_steps`` for :meth:`pretrain`
    (None: ``steps``); ``cpu_threads``: torch threads while training on CPU (1; None keeps torch's
    setting: a small network ran 25× slower per step with 2 threads than with 1 on a busy 2-core
    machine); ``device`` (None: CUDA when present);
    ``seed`` (int or SeedSequence; ``generate`` passes the synthesizer's; None: 0, so refits in an
    adaptive loop are deterministic). :meth:`paper` gives SPEC §10.5's sizes (for a GPU).

    Post-processing only: no privacy cost.
    """

    name = "gem"

    def __init__(self, steps: int = 200, lr: float = 3e-3, batch_size: int = 512, latent_dim: int | None = 64,
                 hidden: Sequence[int] | None = (256, 256), top_queries: int = 100, error_share: float = 0.5,
                 ema_beta: float = 0.5, tol: float = 0.0, device: Any = None, seed: Any = None,
                 pretrain_steps: int | None = None, cpu_threads: int | None = 1):
        for k, v, lo in (("steps", steps, 0), ("batch_size", batch_size, 1), ("top_queries", top_queries, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{k} must be an integer >= {lo}, got {v!r}")
        if latent_dim is not None and (isinstance(latent_dim, bool) or not isinstance(latent_dim, int) or latent_dim < 1):
            raise ValueError(f"latent_dim must be an integer >= 1 or None, got {latent_dim!r}")
        if hidden is not None and any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in hidden):
            raise ValueError(f"hidden must be a sequence of integers >= 1 or None, got {hidden!r}")
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr}")
        if not 0 <= error_share <= 1 or not 0 <= ema_beta < 1 or not tol >= 0:
            raise ValueError("error_share must be in [0, 1], ema_beta in [0, 1), tol >= 0")
        self.steps, self.lr, self.batch_size, self.latent_dim = steps, float(lr), batch_size, latent_dim
        self.hidden = None if hidden is None else tuple(int(h) for h in hidden)
        self.top_queries, self.error_share, self.ema_beta, self.tol = top_queries, float(error_share), float(ema_beta), float(tol)
        self.device, self.seed = device, seed
        if pretrain_steps is not None and (isinstance(pretrain_steps, bool) or not isinstance(pretrain_steps, int)
                                           or pretrain_steps < 0):
            raise ValueError(f"pretrain_steps must be an integer >= 0 or None, got {pretrain_steps!r}")
        self.pretrain_steps = pretrain_steps
        if cpu_threads is not None and (isinstance(cpu_threads, bool) or not isinstance(cpu_threads, int)
                                        or cpu_threads < 1):
            raise ValueError(f"cpu_threads must be an integer >= 1 or None, got {cpu_threads!r}")
        self.cpu_threads = cpu_threads

    @classmethod
    def paper(cls, **changes) -> "GEMGenerator":
        """SPEC §10.5's sizes: latent Σk_i, hidden [2·dim, 2·dim], batch 1024, 500 steps, lr 1e-3."""
        return cls(**{**dict(steps=500, lr=1e-3, batch_size=1024, latent_dim=None, hidden=None), **changes})

    def get_params(self) -> dict:
        return {"steps": self.steps, "lr": self.lr, "batch_size": self.batch_size, "latent_dim": self.latent_dim,
                "hidden": None if self.hidden is None else list(self.hidden), "top_queries": self.top_queries,
                "error_share": self.error_share, "ema_beta": self.ema_beta, "tol": self.tol, "device": self.device,
                "pretrain_steps": self.pretrain_steps, "cpu_threads": self.cpu_threads}

    def new_model(self, domain: Domain, total: float, zeros: Sequence[StructuralZero] = (), seed: Any = None) -> GEMModel:
        """An untrained network with its fixed latent batch, both drawn from ``seed``."""
        g = torch.Generator().manual_seed(_seed_int(seed))
        D = int(sum(domain.shape))
        L = D if self.latent_dim is None else self.latent_dim
        hidden = self.hidden if self.hidden is not None else (2 * L, 2 * L)
        params = init_params((L,) + tuple(hidden), D, g)
        latent = torch.randn((self.batch_size, L), generator=g)
        return GEMModel(domain, total, params, latent, zeros)

    def generate(self, measurements: Sequence[Measurement], domain: Domain, *, zeros: Sequence[StructuralZero] = (),
                 total: float | None = None, warm: Any = None, seed: Any = None, progress=None, steps: int | None = None,
                 **extra: Any) -> GEMModel:
        """Train on the measurements, from ``warm`` (a :class:`GEMModel` over the same domain) or a
        fresh network; ``steps`` overrides the generator's. Post-processing: no privacy cost."""
        t0 = time.perf_counter()
        measurements = list(measurements)
        N = resolve_total(measurements, domain, total) if measurements or total is not None else (
            warm.total if isinstance(warm, GEMModel) else 1.0)
        seed = self.seed if seed is None else seed
        if isinstance(warm, GEMModel) and warm.domain == domain:
            model = GEMModel(domain, N, warm.params, warm.latent, zeros, warm.ema)
        else:
            model = self.new_model(domain, N, zeros, seed)
        targets = marginal_targets(measurements, domain)
        steps = self.steps if steps is None else int(steps)
        if not targets or steps == 0:
            model.fit_info = {"steps": 0, "seconds": time.perf_counter() - t0}
            return model
        device = torch_device(self.device)
        threads = torch.get_num_threads()
        if device.type == "cpu" and self.cpu_threads is not None:
            torch.set_num_threads(self.cpu_threads)
        try:
            return self._train(model, targets, steps, progress, t0, device)
        finally:
            torch.set_num_threads(threads)

    def _train(self, model: GEMModel, targets, steps: int, progress, t0: float, device) -> GEMModel:
        dom = model.domain
        answers = _Answers(dom, [t.attrs for t in targets], model.starts, device)
        target = torch.as_tensor(np.clip(np.concatenate([t.y for t in targets]) / model.total, 0.0, 1.0),
                                 dtype=torch.float32, device=device)
        params = [p.clone().to(device).requires_grad_(True) for p in model.params]
        z = model.latent.to(device)
        opt = torch.optim.Adam(params, lr=self.lr)
        ema = model.ema
        k = min(self.top_queries, target.numel())
        done = 0
        for done in range(1, steps + 1):
            S = forward(params, z, model.spans)
            with torch.no_grad():  # every answer, to find the worst cells; the gradient needs only those
                err = (answers(S) - target).abs()
            worst = float(err.max())
            if worst <= self.tol:
                break
            ema = worst if ema is None else self.ema_beta * ema + (1 - self.ema_beta) * worst
            top = torch.topk(err, k).indices
            top = top[err[top] >= self.error_share * ema]
            if top.numel() == 0:
                top = torch.topk(err, 1).indices
            opt.param_groups[0]["lr"] = 0.5 * self.lr * (1 + math.cos(math.pi * (done - 1) / steps))  # cosine decay
            opt.zero_grad(set_to_none=True)
            (answers.cells(S, top) - target[top]).abs().mean().backward()
            opt.step()
            if progress is not None and done % 50 == 0:
                progress(f"GEM step {done}/{steps}: max error {worst:.4g}")
        with torch.no_grad():
            final = (answers(forward(params, z, model.spans)) - target).abs()
        out = GEMModel(dom, model.total, params, model.latent, model.zeros, ema)
        out.fit_info = {"steps": done, "max_error": float(final.max()), "mean_error": float(final.mean()),
                        "seconds": time.perf_counter() - t0, "device": str(device)}
        return out

    def pretrain(self, public: Any, domain: Domain, cliques: Sequence[Sequence[str]], total: float,
                 zeros: Sequence[StructuralZero] = (), steps: int | None = None) -> GEMModel:
        """GEM^Pub's start: a fresh network trained ``steps`` (default the generator's) on the public
        data's marginals on ``cliques``, rescaled to ``total`` records. Free: public data."""
        steps = steps if steps is not None else self.pretrain_steps
        cliques = [tuple(c) for c in cliques]
        scale = float(total) / float(public.count())
        ms = [Measurement(c, y * scale, None, source="public", weight=1.0)
              for c, y in zip(cliques, public.marginals(cliques))]
        return self.generate(ms, domain, zeros=zeros, total=total, steps=steps)

    def model_size_mb(self, domain: Domain, cliques) -> None:
        return None  # a network: no model-size limit on what may be measured

    def __repr__(self) -> str:
        return f"GEMGenerator({', '.join(f'{k}={v!r}' for k, v in self.get_params().items())})"
