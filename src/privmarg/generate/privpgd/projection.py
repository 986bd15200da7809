"""PrivPGD's projection of signed noisy marginals onto probability vectors by sliced W1 (SPEC §8.3),
their quantisation into particle counts (§8.4), and the (sparse) Adam step of the particles."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..neural import torch_device
from .geometry import grid_centres
from .sorting import _argsort


def _directions(shape: tuple[int, ...], gen: torch.Generator, device, dtype) -> torch.Tensor:
    """Random unit directions (Gaussian, normalised with ``+1e-9`` as the reference), last axis = dim."""
    th = torch.randn(shape, generator=gen, device=device, dtype=dtype)
    return th / (th.norm(dim=-1, keepdim=True) + 1e-9)


def _torch_seed(ss: np.random.SeedSequence) -> int:
    return int(ss.generate_state(1, dtype=np.uint64)[0] & np.uint64(2**63 - 1))


def sliced_w1(u: torch.Tensor, v: torch.Tensor, centres: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """Sliced W1 between (signed) measures ``u`` and ``v`` on the points ``centres`` (SPEC §8.3).

    ``u``, ``v``: ``(..., n)``; ``centres``: ``(..., n, r)``; ``directions``: ``(..., L, r)`` unit
    vectors. For each direction, with ``z = <c - 1/2, theta>`` sorted ascending,
    ``W1 = sum_j |U_j - V_j| (z_(j+1) - z_(j))`` (CDF identity, extended to signed measures); the
    result is the mean over directions, shape ``(...)``. Differentiable in ``u``.
    """
    z = torch.einsum("...nr,...lr->...ln", centres - 0.5, directions)
    idx = torch.argsort(z, dim=-1)
    zs = torch.gather(z, -1, idx)
    gaps = zs.diff(dim=-1)
    w = (u - v).unsqueeze(-2).expand(z.shape)
    c = torch.gather(w, -1, idx).cumsum(-1)[..., :-1]
    return (c.abs() * gaps).sum(-1).mean(-1)


def project_signed_measures(
    values: Sequence[np.ndarray],
    sizes: Sequence[Sequence[int]],
    valid: Sequence[np.ndarray | None] | None = None,
    *,
    iters: int = 1750,
    num_projections: int = 200,
    lr: float = 0.1,
    step: int = 100,
    gamma: float = 0.8,
    seed: int | np.random.SeedSequence | None = None,
    device: Any = None,
    tol: float = 2e-9,
    max_elements: int = 1 << 20,
    resample: int = 1,
    stop_tol: float = 0.0,
    check_every: int = 50,
    info: dict | None = None,
) -> list[np.ndarray]:
    """Project signed measures ``v`` (one per marginal) onto the simplex by minimising sliced W1.

    ``values[i]``: flat signed vector over the grid of a marginal with attribute ``sizes[i]``
    (normalised by the record count, so it sums to about 1); ``valid[i]``: optional boolean mask
    of cells allowed to carry mass (structural zeros are False). Returns probability vectors
    (float64, non-negative, summing to one, exactly zero off ``valid``).

    Batched: marginals are grouped by arity and padded to a common size (padding cells are
    copies of the first cell with zero mass in both measures, which leaves every W1 unchanged).
    ``tol``: a CDF gap ``|U_j - V_j| <= tol · n`` is treated as zero (subgradient 0 of ``|.|`` at 0),
    so a measure that is already a probability vector is a fixed point despite rounding and the
    ``1e-9`` of the log-initialisation (``n`` = cells of the marginal).
    """
    device = torch_device(device)
    dtype = torch.float64
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    gen = torch.Generator(device=device)
    gen.manual_seed(_torch_seed(ss))
    n_items = len(values)
    if valid is None:
        valid = [None] * n_items
    out: list[np.ndarray | None] = [None] * n_items
    # group by arity, order by size, and cut into padded chunks of bounded size
    order = sorted(range(n_items), key=lambda i: (len(sizes[i]), int(np.prod(sizes[i]))))
    chunks: list[list[int]] = []
    for _, grp in itertools.groupby(order, key=lambda i: len(sizes[i])):
        grp = list(grp)
        cur: list[int] = []
        for i in grp:
            n = int(np.prod(sizes[i]))
            L = 1 if len(sizes[i]) == 1 else num_projections
            n_max = max([n] + [int(np.prod(sizes[j])) for j in cur])
            too_big = (len(cur) + 1) * L * n_max > max_elements
            too_uneven = cur and n > 2 * int(np.prod(sizes[cur[0]])) + 16
            if cur and (too_big or too_uneven):
                chunks.append(cur)
                cur = []
            cur.append(i)
        if cur:
            chunks.append(cur)
    for chunk in chunks:
        res, done = _project_chunk([values[i] for i in chunk], [tuple(sizes[i]) for i in chunk],
                                   [valid[i] for i in chunk], iters=iters, num_projections=num_projections,
                                   lr=lr, step=step, gamma=gamma, gen=gen, device=device, dtype=dtype, tol=tol,
                                   resample=resample, stop_tol=stop_tol, check_every=check_every)
        for i, u in zip(chunk, res):
            out[i] = u
        if info is not None:
            info.setdefault("iters", []).append(done)
            info.setdefault("chunks", []).append(len(chunk))
    return out  # type: ignore[return-value]


def _initial_probability(v: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Clip negatives, zero the invalid cells, renormalise; uniform over valid cells if nothing is left."""
    u0 = np.where(ok, np.maximum(v, 0.0), 0.0)
    s = u0.sum()
    if s > 0:
        return u0 / s
    return ok / ok.sum()


def _project_chunk(values, sizes, valid, *, iters, num_projections, lr, step, gamma, gen, device, dtype, tol,
                   resample, stop_tol, check_every):
    B = len(values)
    r = len(sizes[0])
    ns = [int(np.prod(s)) for s in sizes]
    n = max(ns)
    X = np.empty((B, n, r))
    V = np.zeros((B, n))
    OK = np.zeros((B, n), dtype=bool)
    U0 = np.zeros((B, n))
    for b, (v, sz, ok) in enumerate(zip(values, sizes, valid)):
        c = grid_centres(sz) - 0.5
        X[b, : ns[b]] = c
        X[b, ns[b]:] = c[0]  # padding: copies of the first cell, zero mass in both measures
        v = np.asarray(v, dtype=float).ravel()
        if v.size != ns[b]:
            raise ValueError(f"marginal values of size {v.size} do not match sizes {sz}")
        ok = np.ones(ns[b], dtype=bool) if ok is None else np.asarray(ok, dtype=bool).ravel()
        if not ok.any():
            raise ValueError("every cell of a marginal is a structural zero")
        V[b, : ns[b]] = np.where(ok, v, 0.0)  # mass on impossible cells is dropped from the target too
        OK[b, : ns[b]] = ok
        U0[b, : ns[b]] = _initial_probability(v, ok)
    if n == 1 or iters <= 0:
        return [U0[b, : ns[b]].copy() for b in range(B)], 0
    X_t = torch.as_tensor(X, dtype=dtype, device=device)
    V_t = torch.as_tensor(V, dtype=dtype, device=device)
    OK_t = torch.as_tensor(OK, device=device)
    eta = torch.log(torch.as_tensor(U0, dtype=dtype, device=device) + 1e-9)
    # Adam on eta (torch.optim.Adam's arithmetic, inlined: no autograd, no per-step allocations)
    b1, b2 = _BETAS
    m1 = torch.zeros_like(eta)
    m2 = torch.zeros_like(eta)
    neg_inf = torch.tensor(-math.inf, dtype=dtype, device=device)
    # in 1-D every unit direction is +1 or -1 (equally likely): use both, exactly, no sampling
    L = 2 if r == 1 else num_projections
    if resample == 0 and r > 2:
        resample = 1  # a fixed set covers a 2-D circle of directions well, not a sphere: fresh ones
    thr = tol * n
    buf = torch.zeros((B, L, n), dtype=dtype, device=device)  # buf[..., 0] stays 0
    ar = None
    last = None
    acc = torch.zeros((), dtype=dtype, device=device)
    done_iters = iters
    for it in range(iters):
        if it == 0 or (r > 1 and resample > 0 and it % resample == 0):
            if r == 1:
                z = torch.stack([X_t[..., 0], -X_t[..., 0]], dim=1)  # (B, 2, n)
            elif r == 2 and resample == 0:
                # fixed for the whole run: a fan of L equally spaced angles (random offset) on the circle,
                # a stratified quadrature of the SW integral (the whole circle: with signed measures of
                # unequal mass, theta and -theta do not give the same value)
                off = torch.rand((B, 1), generator=gen, device=device, dtype=dtype)
                ang = (torch.arange(L, device=device, dtype=dtype) + off) * (2 * math.pi / L)
                z = torch.einsum("bnr,blr->bln", X_t, torch.stack([ang.cos(), ang.sin()], dim=-1))
            else:
                z = torch.einsum("bnr,blr->bln", X_t, _directions((B, L, r), gen, device, dtype))
            idx = _argsort(z).to(device)
            gaps = torch.gather(z, -1, idx).diff(dim=-1)
            if ar is None:
                ar = torch.arange(n, device=device).expand(B, L, n)
            inv = torch.empty_like(idx).scatter_(-1, idx, ar)  # rank of every cell
        u = torch.softmax(torch.where(OK_t, eta, neg_inf), dim=-1)
        w = (u - V_t).unsqueeze(1).expand(B, L, n)
        c = torch.gather(w, -1, idx).cumsum_(-1)[..., :-1]  # CDF gaps U_j - V_j in sorted order
        s = buf[..., 1:]
        torch.sign(c, out=s)
        c.abs_()
        if stop_tol > 0:
            acc += torch.dot(c.reshape(-1), gaps.reshape(-1))  # sum of the items' objectives x L
        s.mul_(c > thr).mul_(gaps)
        # d loss / d w_sorted[k] = sum_{j >= k} s_j = const - sum_{j < k} s_j; the constant cancels in
        # the softmax's chain rule below (sum u = 1), so g(cell) = -sum_l (prefix sum at its rank) / L
        cs = buf.cumsum(-1)
        g = torch.gather(cs, -1, inv).sum(1).div_(-L)
        # chain rule through the softmax (masked cells have u = 0, so their gradient is 0)
        grad = u * (g - (u * g).sum(-1, keepdim=True))
        # Adam step (lr decays by gamma every `step` iterations, as StepLR)
        t = it + 1
        lr_t = lr * gamma ** (it // step)
        m1.mul_(b1).add_(grad, alpha=1 - b1)
        m2.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (m2 / (1 - b2**t)).sqrt_().add_(_ADAM_EPS)
        eta.addcdiv_(m1, denom, value=-lr_t / (1 - b1**t))
        if stop_tol > 0 and t % check_every == 0:
            # early stop: the window's mean objective improved by less than stop_tol (relative)
            obj = float(acc)
            acc.zero_()
            if last is not None and obj > last * (1 - stop_tol):
                done_iters = t
                break
            last = obj
    u = torch.softmax(torch.where(OK_t, eta, neg_inf), dim=-1).cpu().numpy()
    out = []
    for b in range(B):
        ub = np.where(OK[b, : ns[b]], u[b, : ns[b]], 0.0)
        out.append(ub / ub.sum())
    return out, done_iters


def quantise(u: np.ndarray, m: int, gen: torch.Generator | None = None) -> np.ndarray:
    """Counts per cell for ``m`` particles (§8.4): ``floor(m u_j)``, leftovers drawn ∝ ``u`` with replacement."""
    u = np.asarray(u, dtype=np.float64)
    u = u / u.sum()
    counts = np.floor(m * u).astype(np.int64)
    while counts.sum() > m:  # float rounding guard; practically never taken
        counts[np.argmax(counts)] -= 1
    left = int(m - counts.sum())
    if left > 0:
        idx = torch.multinomial(torch.as_tensor(u), left, replacement=True, generator=gen).numpy()
        counts += np.bincount(idx, minlength=u.size)
    return counts


_BETAS = (0.9, 0.999)


_ADAM_EPS = 1e-8


def sparse_adam_step(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                     step: int, lr: float, betas=_BETAS, eps: float = _ADAM_EPS) -> None:
    """In place: ``torch.optim.SparseAdam`` with the sparse gradient ``grad.to_sparse()``.

    Only the non-zero entries of ``grad`` update their moments and their value; ``step`` (>= 1) is
    the optimiser's global step count (bias corrections use it, as SparseAdam does). Dense masked
    arithmetic: no COO tensors are built.
    """
    b1, b2 = betas
    nz = grad != 0
    f1 = torch.where(nz, b1, 1.0).to(grad.dtype)
    f2 = torch.where(nz, b2, 1.0).to(grad.dtype)
    exp_avg.mul_(f1).add_(grad, alpha=1 - b1)
    exp_avg_sq.mul_(f2).addcmul_(grad, grad, value=1 - b2)
    step_size = lr * math.sqrt(1 - b2**step) / (1 - b1**step)
    upd = exp_avg / (exp_avg_sq.sqrt() + eps)
    param.sub_(upd * nz, alpha=step_size)
