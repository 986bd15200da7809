"""The graphical-model generator (Private-PGM): mirror descent over a junction tree, then sampling."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core import Domain, Measurement, StructuralZero
from .estimate import DTYPES, METHODS, estimate
from .graphical_model import GraphicalModel
from .junction_tree import model_size_mb, model_sizes_mb

#: resident memory of a fit and its sampling per byte of the junction tree's clique tables: the
#: current marginals and a trial step's (reused buffers), one θ scratch table, the potentials' and
#: partial sums' tables, the process itself. Measured since the buffers are reused: a 645 MB tree's
#: fit peaked at 2.4 GB, a whole fire cell on a 1.29 GB tree (data, fit, sampling) at 4.4 GB (3.4×).
#: Before, when every evaluation allocated its tables afresh, 12 was needed (a 1.29 GB tree: 13.9 GB).
FIT_MEMORY_FACTOR = 5


class ModelTooLarge(ValueError):
    """The junction tree of the measured cliques would not fit in the memory available."""


def check_fit_memory(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """The junction tree's size in MB; raises :class:`ModelTooLarge` (before anything is allocated)
    when ``FIT_MEMORY_FACTOR`` times it exceeds the memory available. Post-processing of released
    cliques: no privacy cost."""
    from ...memory import available_memory

    size = model_size_mb(domain, cliques)
    need = size * FIT_MEMORY_FACTOR * 2**20
    avail = available_memory()
    if avail is not None and need > avail:
        big = max(cliques, key=domain.size, default=())
        raise ModelTooLarge(
            f"the graphical model of the {len(cliques)} measured marginals needs a junction tree of "
            f"{size:,.0f} MB (about {need / 2**30:.3g} GiB to fit; {avail / 2**30:.3g} GiB available); "
            f"largest marginal ({', '.join(big)}) has {domain.size(big):,} cells. Use a selector with a "
            "model-size limit (AIM, MST, JAM), a smaller workload, or a generator without a junction tree "
            "(gum, relaxed, genetic, privpgd)")
    return size


class PGM:
    """Fit a :class:`GraphicalModel` to the measurements with :func:`estimate`.

    ``iters``: cap on optimiser iterations; ``tol``: relative loss change over 10 iterations that
    stops it; ``method``: ``"momentum"``, ``"md"`` or ``"precond"`` (see :func:`estimate`), and ``cold_method`` the
    one for a fit that is not warm-started (default: ``method``). A ``warm`` model (a
    :class:`GraphicalModel` of an earlier fit) starts the fit from its potentials and step size.
    ``work_mb``: cap on iterations × model size (MB of the junction tree's clique tables), so that
    a large model gets fewer iterations, never fewer than ``min_iters`` (``None``: no cap); the
    cost of an iteration is one belief-propagation pass, linear in the model's size. A model whose
    fit would not fit in the memory available raises :class:`ModelTooLarge` before the fit starts.
    ``dtype``: precision of belief propagation's tables, ``"float64"`` or ``"float32"`` (about
    half the time and memory, ~1e-6 relative error in the marginals; see :func:`estimate`), and
    ``model_dtype`` the fitted model's tables when not ``dtype`` (None: ``dtype``; a float32 fit
    released in float64 costs one more float64 pass).
    ``fit_new``: a warm-started fit first moves each newly measured clique to its measurement by
    one proportional-fitting step (see :func:`estimate`). Post-processing: no privacy cost.
    """

    name = "pgm"

    def __init__(self, iters: int = 1000, tol: float = 1e-7, method: str = "momentum", cold_method: str | None = None,
                 work_mb: float | None = None, min_iters: int = 0, dtype: str = "float64", fit_new: bool = False,
                 model_dtype: str | None = None):
        for m in (method, cold_method or method):
            if m not in METHODS:
                raise ValueError(f"method must be one of {METHODS}")
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
        if model_dtype is not None and model_dtype not in DTYPES:
            raise ValueError(f"model_dtype must be one of {DTYPES}, got {model_dtype!r}")
        self.dtype = dtype
        self.model_dtype = model_dtype
        self.fit_new = bool(fit_new)
        if iters < 0:
            raise ValueError("iters must be >= 0")
        self.iters = int(iters)
        self.tol = float(tol)
        self.method = method
        self.cold_method = cold_method
        if work_mb is not None and not work_mb > 0:
            raise ValueError("work_mb must be positive (or None)")
        if min_iters < 0:
            raise ValueError("min_iters must be >= 0")
        self.work_mb = None if work_mb is None else float(work_mb)
        self.min_iters = int(min_iters)

    def get_params(self) -> dict:
        return {"iters": self.iters, "tol": self.tol, "method": self.method, "cold_method": self.cold_method,
                "work_mb": self.work_mb, "min_iters": self.min_iters, "dtype": self.dtype,
                "fit_new": self.fit_new, "model_dtype": self.model_dtype}

    def iterations_for(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> int:
        """The iteration cap of a fit over ``cliques``: ``iters``, lowered to ``work_mb / size``
        (never below ``min_iters``) when ``work_mb`` is set."""
        return self.iters if self.work_mb is None else self._capped(model_size_mb(domain, cliques))

    def _capped(self, size: float) -> int:
        if self.work_mb is None or size <= 0:
            return self.iters
        return min(self.iters, max(self.min_iters, int(self.work_mb / size)))

    def clone(self, **changes) -> "PGM":
        return PGM(**{**self.get_params(), **changes})

    def generate(self, measurements: Sequence[Measurement], domain: Domain, *,
                 zeros: Sequence[StructuralZero] = (), total: float | None = None, warm: Any = None,
                 seed: np.random.SeedSequence | None = None, progress=None, iters: int | None = None,
                 method: str | None = None, dtype: str | None = None, **extra: Any) -> GraphicalModel:
        """``iters``, ``method`` and ``dtype``: this fit's iteration cap, step rule and precision in
        place of the generator's own (a selection's hints, as JAM's for a converged final fit; a
        ``dtype`` given is also the model's); ``work_mb`` still lowers the cap for a large model."""
        if method is not None and method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}")
        kw = dict(method=method or self.cold_method or self.method)
        if isinstance(warm, GraphicalModel) and warm.domain == domain:
            kw = dict(warm=warm.potentials, step=warm.step_size, method=method or self.method,
                      precond_step=getattr(warm, "precond_step", None),  # models saved before it lack it
                      fit_new=self.fit_new)
        cliques = [m.attrs for m in measurements if m.attrs] + [z.attrs for z in zeros]
        size = check_fit_memory(domain, cliques)  # the tree's size, computed once
        cap = (self if iters is None else self.clone(iters=int(iters)))._capped(size)
        return estimate(domain, measurements, total=total, iters=cap, tol=self.tol, zeros=zeros,
                        dtype=dtype or self.dtype, model_dtype=None if dtype else self.model_dtype, **kw)

    def model_size_mb(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
        return model_size_mb(domain, cliques)

    def model_sizes_mb(self, domain: Domain, base: Sequence[Sequence[str]], extra: Sequence[Sequence[str]]) -> list[float]:
        """``model_size_mb(domain, base + [r])`` for each ``r`` in ``extra``."""
        return model_sizes_mb(domain, base, extra)
