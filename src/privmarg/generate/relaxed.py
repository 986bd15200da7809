"""Relaxed projection: RAP's and RAP++'s generator (Aydore et al. 2021; Vietri et al. 2022; SPEC §10.3).

The synthetic table is relaxed to ``D'``, an ``N' × Σk_i`` matrix whose row ``n`` holds one
probability vector per attribute (a block of ``k_i`` entries). A row stands for the product
distribution of its blocks, so the relaxed answer of a marginal query on ``r = (a, b, ...)`` is
``mean_n D'[n, a, ·] ⊗ D'[n, b, ·] ⊗ ...``: differentiable, and exact as an expectation. Adam
minimises the L2 distance between the measured answers (normalised by the record count and clipped
to their possible range) and these relaxed answers; after every step each block is put back on the
simplex by Euclidean projection (sparsemax). Records are drawn by randomized rounding: output rows
cycle through the relaxed rows (each used ``rows / N'`` times, RAP's oversampling) and each
attribute is drawn from the row's block.

What is left out: RAP++'s random half-space ("threshold") queries for numeric columns and their
sigmoid temperature schedule (our domains are discretized, and what we measure are marginals and
linear queries on them); RAP's non-L2 norms (L∞, LogExp) and L1 regulariser. Generation is
post-processing of released measurements: no privacy cost.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
import torch

from ..core import Domain, Measurement, StructuralZero
from .mixture import ProductMixture
from .state import domain_state, read_total, zeros_from_state, zeros_to_state
from .neural import torch_device
from .targets import resolve_total

__all__ = ["RelaxedProjection", "RelaxedModel", "simplex_project"]


class _Layout:
    """Where each attribute's block sits in the columns of ``D'``."""

    def __init__(self, domain: Domain):
        self.domain = domain
        self.sizes = np.asarray(domain.shape, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.width = int(self.sizes.sum())
        self.block = np.repeat(np.arange(len(self.sizes)), self.sizes)  # column -> attribute index
        self._tensors: dict = {}  # (what, device, dtype) -> tensor, made once, not per step

    def _tensor(self, key: tuple, make):
        """``make()`` as a tensor, made once per ``key`` (what, device, dtype), not per step."""
        cache = self.__dict__.setdefault("_tensors", {})  # layouts pickled before this cache
        if key not in cache:
            cache[key] = make()
        return cache[key]

    def indicator(self, device, dtype) -> torch.Tensor:
        """The (d × Σk) 0/1 matrix of which columns belong to each attribute."""
        def make():
            B = np.zeros((len(self.sizes), self.width))
            B[self.block, np.arange(self.width)] = 1.0
            return torch.as_tensor(B, device=device, dtype=dtype)
        return self._tensor(("B", str(device), dtype), make)

    def sizes_tensor(self, device, dtype) -> torch.Tensor:
        return self._tensor(("k", str(device), dtype), lambda: torch.as_tensor(self.sizes, device=device, dtype=dtype))

    def block_tensor(self, device) -> torch.Tensor:
        return self._tensor(("block", str(device)), lambda: torch.as_tensor(self.block, device=device))

    def single_columns(self, device) -> torch.Tensor | None:
        """Columns of 1-value attributes (None if there are none)."""
        def make():
            cols = np.flatnonzero(self.sizes[self.block] == 1)
            return torch.as_tensor(cols, device=device) if cols.size else None
        return self._tensor(("single", str(device)), make)  # read after every projection step

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_tensors"}  # no device tensors in pickles

    def cols(self, a: str) -> slice:
        j = self.domain.attrs.index(a)
        return slice(int(self.offsets[j]), int(self.offsets[j] + self.sizes[j]))


def simplex_project(X: torch.Tensor, layout: _Layout) -> torch.Tensor:
    """Euclidean projection of every attribute block of every row of ``X`` (``N' × Σk``) onto the
    probability simplex (sparsemax): ``max(x − τ, 0)`` with τ per block such that the block sums to 1.

    τ by Michelot's fixed point, all blocks of all rows at once: from the mean excess
    ``(Σx − 1)/k`` (a lower bound), ``τ ← (Σ_{x>τ} x − 1)/#{x>τ}`` only grows and stops when no
    block's support changes (at most k passes; a handful in practice, and the projected iterate of
    an Adam step is a few). Block sums are one product with the block-indicator matrix. Same result
    as the sort algorithm of Duchi et al. (2008), which sorted every block of every row each step
    and took most of RAP's time."""
    block = layout.block_tensor(X.device)  # column -> attribute
    count = layout.sizes_tensor(X.device, X.dtype).expand(X.shape[0], -1)  # support behind τ: all
    tau = (_block_sums(X, layout) - 1.0) / count
    for _ in range(int(layout.sizes.max()) + 1):  # each block's support shrinks at most k times
        T = tau.index_select(1, block)
        mask = (X > T).to(X.dtype)  # float masks: products with a bool tensor are ~20x slower on CPU
        new = _block_sums(mask, layout)
        if torch.equal(new, count):  # the support τ came from: τ is the fixed point
            break
        count = new
        tau = torch.maximum(tau, (_block_sums(X * mask, layout) - 1.0) / count)  # monotone under rounding too
    else:  # not reached in exact arithmetic; the last τ then still applies
        T = tau.index_select(1, block)
    out = (X - T).clamp_(min=0.0)
    single = layout.single_columns(X.device)
    if single is not None:
        out[:, single] = 1.0  # a 1-value block is 1 exactly (x − (x − 1) is not, in float32)
    return out


def _block_sums(M: torch.Tensor, layout: _Layout) -> torch.Tensor:
    """Per row, the sum of each attribute's block (``N' × d``): one product with the block-indicator
    matrix on CPU; on CUDA an ``index_add_`` (exact float32 where a matmul may run in TF32)."""
    if M.is_cuda:
        out = torch.zeros((M.shape[0], len(layout.sizes)), device=M.device, dtype=M.dtype)
        return out.index_add_(1, layout.block_tensor(M.device), M)
    return (layout.indicator(M.device, M.dtype) @ M.t()).t()  # (d × Σk)(Σk × N'): on CPU ~3x faster than M @ Bᵀ as (N' × Σk)(Σk × d)


# ----------------------------------------------------------------------------- queries
class _Queries:
    """The fitted queries, in two shapes: full marginals (one matmul chain each, then an optional
    dense ``Q``) and selected cells (RAP's counting queries, structural zeros), answered by a
    gather over ``D'``'s columns: ``mean_n Π_j D'[n, col_j]``."""

    def __init__(self, layout: _Layout, device, dtype):
        self.layout, self.device, self.dtype = layout, device, dtype
        self.full: list[tuple[list[slice], torch.Tensor | None, torch.Tensor, float]] = []
        self.cells: dict[int, list] = {}  # arity -> [(cols (s, arity), target (s,), weight)]

    def add(self, attrs: Sequence[str], y: np.ndarray, query: np.ndarray | None, weight: float) -> None:
        if query is not None:
            query = query.toarray() if sp.issparse(query) else query
            sel = _selection_rows(query)
            if sel is not None:
                self._add_cells(attrs, sel, y, weight)
                return
            lo, hi = np.minimum(query.min(1), 0.0), np.maximum(query.max(1), 0.0)
            q = torch.as_tensor(query, device=self.device, dtype=self.dtype)
        else:
            lo, hi, q = 0.0, 1.0, None
        t = torch.as_tensor(np.clip(y, lo, hi), device=self.device, dtype=self.dtype)
        self.full.append(([self.layout.cols(a) for a in attrs], q, t, weight))

    def _add_cells(self, attrs, flat_cells: np.ndarray, y: np.ndarray, weight: float) -> None:
        codes = np.stack(np.unravel_index(flat_cells, self.layout.domain.sizes(attrs)), axis=1)
        offs = np.array([self.layout.cols(a).start for a in attrs])
        cols = torch.as_tensor(codes + offs[None, :], device=self.device)
        t = torch.as_tensor(np.clip(y, 0.0, 1.0), device=self.device, dtype=self.dtype)
        self.cells.setdefault(len(attrs), []).append((cols, t, weight))

    def finish(self) -> None:
        # one gather per arity: concatenate the selected-cell queries
        merged = {}
        for k, parts in self.cells.items():
            cols = torch.cat([c for c, _, _ in parts])
            t = torch.cat([t for _, t, _ in parts])
            w = torch.cat([torch.full_like(t, w) for _, t, w in parts])
            merged[k] = (cols, t, w)
        self.merged = merged

    def __len__(self) -> int:
        return len(self.full) + sum(len(v) for v in self.cells.values())

    def loss(self, X: torch.Tensor) -> torch.Tensor:
        """``sqrt(Σ_i w_i ‖a_i(D') − t_i‖²)``: RAP's L2 norm of the residuals (weighted)."""
        total = X.new_zeros(())
        for cols, q, t, w in self.full:
            a = relaxed_marginal(X, cols)
            if q is not None:
                a = q @ a
            total = total + w * (a - t).square().sum()
        for cols, t, w in self.merged.values():
            a = X[:, cols].prod(-1).mean(0)
            total = total + (w * (a - t).square()).sum()
        return total.clamp_min(1e-30).sqrt()


def _selection_rows(query: np.ndarray) -> np.ndarray | None:
    """The cell each row of ``query`` selects, when every row is one 1 and zeros (else None)."""
    nz = query != 0
    if not (nz.sum(1) == 1).all():
        return None
    cells = nz.argmax(1)
    if not np.all(query[np.arange(query.shape[0]), cells] == 1.0):
        return None
    return cells


def relaxed_marginal(X: torch.Tensor, cols: Sequence[slice]) -> torch.Tensor:
    """Flat (row-major over ``cols``' attributes) mean over rows of the outer product of the blocks:
    the relaxed data's normalised marginal. The last block enters by a matmul, so memory is
    ``N' × (cells without the last attribute)``."""
    n = X.shape[0]
    if len(cols) == 1:
        return X[:, cols[0]].mean(0)
    M = X[:, cols[0]]
    for c in cols[1:-1]:
        M = (M.unsqueeze(2) * X[:, c].unsqueeze(1)).reshape(n, -1)
    return (M.T @ X[:, cols[-1]]).reshape(-1) / n


# ----------------------------------------------------------------------------- the model
class RelaxedModel(ProductMixture):
    """A fitted relaxed table: ``relaxed`` (``N' × Σk`` float32, each block on the simplex) over
    ``domain``, scaled to ``total`` records: a :class:`~privmarg.generate.mixture.ProductMixture`
    sampled by RAP's randomized rounding (output rows cycle through the relaxed rows). A record in a
    structural-zero cell has that zero's attributes redrawn from its row's product distribution
    restricted to the allowed cells. ``info``: loss, steps and seconds of the fit."""

    def __init__(self, domain: Domain, relaxed: np.ndarray, total: float,
                 zeros: Sequence[StructuralZero] = (), info: dict | None = None):
        super().__init__(domain, relaxed, total, zeros, stratified=True)
        self.info = info or {}
        self.layout = _Layout(domain)

    state_kind: ClassVar[str] = "relaxed"  # in saved models (:mod:`privmarg.generate.state`)

    def to_state(self, key: str, arrays: dict, save) -> dict:
        """The saved form: the N' × Σk probability rows and the structural zeros."""
        arrays[f"{key}.relaxed"] = np.asarray(self.relaxed, dtype=np.float32)
        return {"domain": domain_state(self.domain), "total": float(self.total), "relaxed": f"{key}.relaxed",
                "zeros": zeros_to_state(self.zeros, key, arrays)}

    @classmethod
    def from_state(cls, state: dict, arrays: dict, domain: Domain, load) -> "RelaxedModel":
        relaxed = np.asarray(arrays[state["relaxed"]], dtype=np.float32)
        if relaxed.ndim != 2 or not np.all(np.isfinite(relaxed)) or (relaxed < 0).any():
            raise ValueError("the relaxed data is not a matrix of probabilities")
        return cls(domain, relaxed, read_total(state), zeros_from_state(state.get("zeros", []), arrays))

    @property
    def relaxed(self) -> np.ndarray:
        return self.P

    @property
    def n_prime(self) -> int:
        return self.n_rows


# ----------------------------------------------------------------------------- the generator
class RelaxedProjection:
    """Relaxed-projection generator (RAP / RAP++; SPEC §10.3). Post-processing: no privacy cost.

    Parameters
    ----------
    n_prime: relaxed rows ``N'`` (1000, RAP's default).
    iters: Adam steps per stage at most (1000); ``stages``: stages, the learning rate halved at
        each (1; RAP++ uses 1 or 3); ``lr``: Adam's learning rate at the first stage (0.01).
    tol: a stage stops when the loss improved by less than this share over the last 5 steps
        (1e-4, RAP++'s rule); 0: never. The lowest-loss ``D'`` seen is kept (RAP++).
    weighting: ``"equal"`` (RAP/RAP++: one L2 norm over every measured answer) or ``"mle"``
        (each measurement's residual weighted by ``1/σ²``, relative to the least noisy one).
    init: ``"random"`` (uniform entries, each block normalised) or ``"uniform"`` (every block
        ``1/k``; identical rows stay identical under the symmetric gradient, so this can only fit
        independent attributes: a baseline).
    device: None/"auto" (CUDA when present, else CPU), "cpu", "cuda", ...; ``seed``: int or
        SeedSequence for the initial ``D'`` (``generate(seed=...)`` overrides it).

    ``generate(..., warm=model)`` continues from an earlier :class:`RelaxedModel` over the same
    domain and ``N'`` (RAP++'s rounds), with a fresh Adam state, as the reference does.
    Structural zeros become zero-answer counting queries on their cells (and are enforced again
    when sampling). Measured answers are normalised by the public record count, or by the count
    estimated from the measurements (SPEC §3.2), and clipped to their possible range.
    """

    name = "relaxed"

    def __init__(self, n_prime: int = 1000, iters: int = 1000, lr: float = 0.01, *, stages: int = 1,
                 tol: float = 1e-4, weighting: str = "equal", init: str = "random", device: Any = None,
                 seed: int | np.random.SeedSequence | None = None):
        for nm, x in (("n_prime", n_prime), ("iters", iters), ("stages", stages)):
            if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < (0 if nm == "iters" else 1):
                raise ValueError(f"{nm} must be an integer >= {0 if nm == 'iters' else 1}, got {x!r}")
        if not (lr > 0 and math.isfinite(lr)):
            raise ValueError(f"lr must be positive and finite, got {lr!r}")
        if not (tol >= 0 and math.isfinite(tol)):
            raise ValueError(f"tol must be >= 0 and finite, got {tol!r}")
        if weighting not in ("equal", "mle"):
            raise ValueError(f"weighting must be 'equal' or 'mle', got {weighting!r}")
        if init not in ("random", "uniform"):
            raise ValueError(f"init must be 'random' or 'uniform', got {init!r}")
        self.n_prime, self.iters, self.lr, self.stages = int(n_prime), int(iters), float(lr), int(stages)
        self.tol, self.weighting, self.init, self.device, self.seed = float(tol), weighting, init, device, seed

    def get_params(self) -> dict:
        return {k: getattr(self, k) for k in
                ("n_prime", "iters", "lr", "stages", "tol", "weighting", "init", "device", "seed")}

    def clone(self, **changes) -> "RelaxedProjection":
        return RelaxedProjection(**{**self.get_params(), **changes})

    def model_size_mb(self, domain: Domain, cliques) -> None:
        return None  # D' has a fixed size: no limit on what may be measured

    def _initial(self, layout: _Layout, seed) -> torch.Tensor:
        if self.init == "uniform":
            X = torch.as_tensor(1.0 / layout.sizes[layout.block], dtype=torch.float32).expand(self.n_prime, -1).clone()
            return X
        ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        g = torch.Generator().manual_seed(int(ss.generate_state(1, np.uint64)[0] % (2**63)))
        X = torch.rand((self.n_prime, layout.width), generator=g, dtype=torch.float32)
        sums = torch.zeros((self.n_prime, len(layout.sizes))).index_add_(1, torch.as_tensor(layout.block), X)
        return X / sums[:, torch.as_tensor(layout.block)]

    def generate(self, measurements: Sequence[Measurement], domain: Domain, *, zeros: Sequence[StructuralZero] = (),
                 total: float | None = None, warm: Any = None, seed: np.random.SeedSequence | None = None,
                 progress=None, **extra: Any) -> RelaxedModel:
        """Fit ``D'`` to ``measurements`` (any arity and attribute order, optional linear ``query``);
        returns a :class:`RelaxedModel`. ``total``: the public record count (None: estimated).
        Post-processing: no privacy cost."""
        t0 = time.perf_counter()
        if not isinstance(domain, Domain):
            domain = Domain.from_dict(domain)
        ms = [m if isinstance(m, Measurement) else Measurement(*m) for m in measurements]
        ms = [m for m in ms if m.attrs and m.weight > 0]  # weight 0: kept on the record, not fitted
        total = resolve_total(ms, domain, total)
        zeros = list(zeros)
        layout = _Layout(domain)
        device = torch_device(self.device)
        if isinstance(warm, RelaxedModel) and warm.domain == domain and warm.n_prime == self.n_prime:
            X0 = torch.as_tensor(warm.relaxed, dtype=torch.float32)
        else:
            X0 = self._initial(layout, seed if seed is not None else self.seed)
        Q = _Queries(layout, device, torch.float32)
        wmax = max((m.weight for m in ms), default=1.0) or 1.0
        for m in ms:
            if m.y.size and (m.query is None and m.y.size != domain.size(m.attrs)):
                raise ValueError(f"measurement on {m.attrs}: expected {domain.size(m.attrs)} cells, got {m.y.size}")
            w = 1.0 if self.weighting == "equal" else m.weight / wmax
            Q.add(m.attrs, m.y / total, m.query, w)
        for z in zeros:  # impossible cells: counting queries whose answer is 0
            cells = np.flatnonzero(z.mask.ravel())
            if cells.size:
                Q._add_cells(z.attrs, cells, np.zeros(cells.size), 1.0)
        Q.finish()
        X = X0.to(device)
        info = {"steps": 0, "loss": None, "device": str(device)}
        if len(Q) and self.iters > 0:
            X, info = self._fit(X, Q, layout, progress)
        info["seconds"] = time.perf_counter() - t0
        return RelaxedModel(domain, X.detach().cpu().numpy(), total, zeros, info)

    def _fit(self, X: torch.Tensor, Q: _Queries, layout: _Layout, progress) -> tuple[torch.Tensor, dict]:
        X = X.clone().requires_grad_(True)
        best, best_loss = X.detach().clone(), math.inf  # one buffer, overwritten in place
        steps = 0
        for stage in range(self.stages):
            opt = torch.optim.Adam([X], lr=self.lr / 2**stage, fused=True)  # a fresh Adam state per stage and per fit
            hist: list[float] = []
            for _ in range(self.iters):
                opt.zero_grad(set_to_none=True)
                loss = Q.loss(X)  # at the current (projected) D': also the early-stopping signal
                cur = float(loss.detach())
                if cur < best_loss:
                    best_loss = cur
                    best.copy_(X.detach())
                hist.append(cur)
                if cur <= 1e-12 or (self.tol > 0 and len(hist) > 5 and hist[-6] - cur < self.tol * hist[-6]):
                    break
                loss.backward()
                opt.step()
                steps += 1
                with torch.no_grad():
                    X.copy_(simplex_project(X, layout))
            if progress is not None:
                progress(f"relaxed projection stage {stage + 1}/{self.stages}: loss {best_loss:.4g} ({steps} steps)")
        with torch.no_grad():
            cur = float(Q.loss(X))
        if cur < best_loss:
            best_loss = cur
            best.copy_(X.detach())
        return best, {"steps": steps, "loss": best_loss}
