"""Two tables contracted as one batched matrix product, their axes' bookkeeping planned once.

Pure arithmetic on a model's tables: no privacy cost."""

from __future__ import annotations

import math

import numpy as np

from ...core import Domain
from ...core.sums import sum_out

#: contraction plans kept (each a few small tuples); the dict is emptied when full
CONTRACT_PLANS = 4096
_contract_plans: dict[tuple, tuple] = {}


def contract_pair(fa: tuple[str, ...], a: np.ndarray, fb: tuple[str, ...], b: np.ndarray, out: tuple[str, ...],
               domain: Domain) -> np.ndarray:
    """``Σ a·b`` over the attributes not in ``out`` (tables over ``fa``, ``fb``; result in ``out``'s
    order) as one batched matrix product: np.einsum spends more on parsing and path search than on
    the product for most of the tables a marginal query meets. Tables have their attributes' full
    sizes (no broadcast axes of size 1), as every table of a model does. The axes' bookkeeping is
    planned once per (attributes, sizes) and kept (:func:`_contract_plan`): scoring contracts
    the same few pairs of tables thousands of times, most of them small."""
    sa = a.shape if a.ndim == len(fa) else domain.sizes(fa)
    sb = b.shape if b.ndim == len(fb) else domain.sizes(fb)
    key = (fa, fb, out, sa, sb)
    plan = _contract_plans.get(key)
    if plan is None:
        if len(_contract_plans) >= CONTRACT_PLANS:
            _contract_plans.clear()
        plan = _contract_plans[key] = _contract_plan(fa, fb, out, dict(zip(fa, sa)) | dict(zip(fb, sb)))
    drop_a, drop_b, ta, tb, (nb, nl, ni, nr), shape_c, tc = plan
    a, b = a.reshape(sa), b.reshape(sb)
    if drop_a:  # what only one table holds and the result drops is summed out first
        a = sum_out(a, drop_a)
    if drop_b:
        b = sum_out(b, drop_b)
    a = a.transpose(ta).reshape(nb, nl, ni)
    b = b.transpose(tb).reshape(nb, ni, nr)
    # nothing summed: an outer product per batch cell (matmul would run nb 1-deep products)
    c = a * b.reshape(nb, 1, nr) if ni == 1 else np.matmul(a, b)
    return c.reshape(shape_c).transpose(tc)


def _contract_plan(fa: tuple[str, ...], fb: tuple[str, ...], out: tuple[str, ...], size: dict[str, int]) -> tuple:
    """:func:`contract_pair`'s bookkeeping: the axes each table sums out alone, the transposes to
    (batch, left, inner) and (batch, inner, right), those four sizes, the product's shape and its
    transpose to ``out``'s order."""
    keep, in_a, in_b = set(out), set(fa), set(fb)
    drop_a = tuple(i for i, x in enumerate(fa) if x not in keep and x not in in_b)
    drop_b = tuple(i for i, x in enumerate(fb) if x not in keep and x not in in_a)
    fa = tuple(x for x in fa if x in keep or x in in_b)
    fb = tuple(x for x in fb if x in keep or x in in_a)
    batch, inner, left = [], [], []
    for x in fa:
        (left if x not in in_b else batch if x in keep else inner).append(x)
    right = [x for x in fb if x not in in_a]
    ta = tuple(fa.index(x) for x in batch + left + inner)
    tb = tuple(fb.index(x) for x in batch + inner + right)
    dims = tuple(math.prod(size[x] for x in part) for part in (batch, left, inner, right))
    got = batch + left + right
    return drop_a, drop_b, ta, tb, dims, tuple(size[x] for x in got), tuple(got.index(x) for x in out)
