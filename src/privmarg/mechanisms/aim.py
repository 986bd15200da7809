"""AIM: adaptive, workload-aware selection of marginals + Private-PGM (SPEC §4)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..dataset import Dataset
from ..estimation import estimate, model_size_mb
from ..estimation.estimate import METHODS
from ..privacy import exponential_mechanism, marginal_l2, score_sensitivity
from ..workload import downward_closure, parse_workload
from .aim_bounds import ErrorBound, aim_error_bound
from .base import Mechanism

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


class AIM(Mechanism):
    """AIM (McKenna et al. 2022, Algorithm 4).

    Parameters: ``workload`` ("all-3way", "all-2way:target=col", a JSON path or a list of cliques /
    (cliques, weight)); ``max_model_size`` in MB (2**20 bytes) of the final junction tree; ``rounds``
    (T, sizing the initial split; default 16·d); ``alpha`` the share of each round for measurement;
    ``iters`` mirror-descent iterations per round (warm started) and ``final_iters`` for the last fit;
    ``refit_method``: the estimator's step for the warm-started refits (``"precond"``, the default,
    or ``"md"``, see :func:`privmarg.estimate`; the first, cold fit is always preconditioned). ``"md"``
    is about 30% cheaper per run, at losses from 3% lower to 6% higher (benchmarks/aim_replay.py).

    Privacy: ``rho``-zCDP in total (from ``epsilon``, ``delta``), spent exactly; each round charges
    one exponential mechanism (ε²/8) and one Gaussian marginal (Δ₂²/(2σ²)).
    """

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-3way",
                 max_model_size: float = 80.0, rounds: int | None = None, alpha: float = 0.9,
                 iters: int = 250, final_iters: int = 1000, tol: float = 1e-4,
                 refit_method: str = "precond", **kw):
        super().__init__(epsilon, delta, **kw)
        if not 0 < alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        if max_model_size <= 0:
            raise ValueError("max_model_size must be positive")
        self.workload = workload
        self.max_model_size = float(max_model_size)
        self.rounds = rounds
        self.alpha = alpha
        self.iters = iters
        self.final_iters = final_iters
        self.tol = tol
        if refit_method not in METHODS:
            raise ValueError(f"refit_method must be one of {METHODS}")
        self.refit_method = refit_method

    def _fit(self, data: Dataset) -> None:
        dom = data.domain
        acc = self.accountant_
        rho = self.rho_available_  # the budget left after any DP preprocessing
        workload = parse_workload(self.workload, dom)
        self.workload_ = workload
        weights = downward_closure(workload, dom)
        self.weights_ = weights
        cands = list(weights)
        round_models = {}  # p̂_{t-1} of each round, kept for the error bounds of unsupported marginals
        d = len(dom)
        T = self.rounds or 16 * d
        if T < d:
            raise ValueError(f"rounds must be at least the number of attributes ({d})")
        alpha = self.alpha
        d2 = marginal_l2(self.neighbour)  # σ scales with the L2 sensitivity
        answers = {r: data.project(r) for r in cands}  # private; only read inside charged primitives
        sigma = d2 * math.sqrt(T / (2 * alpha * rho))
        eps = math.sqrt(8 * (1 - alpha) * rho / T)
        zeros = self.zeros_
        oneway = [r for r in cands if len(r) == 1]
        for r in oneway:
            self.measure(data, r, sigma, what=f"AIM init 1-way {r[0]}")
        self._progress(self.rho_used_, rho, "AIM: 1-way marginals measured")
        model = estimate(dom, self.measurements_, total=self.total_, iters=self.iters, tol=self.tol, zeros=zeros)
        zero_cliques = [z.attrs for z in zeros]
        t = 0
        terminate = False
        while not terminate:
            t += 1
            remaining = rho - self.rho_used_
            round_cost = d2**2 / (2 * sigma**2) + eps**2 / 8
            if remaining < 2 * round_cost:
                if remaining <= 1e-12 * rho:
                    break
                sigma = d2 * math.sqrt(1 / (2 * alpha * remaining))
                eps = math.sqrt(8 * (1 - alpha) * remaining)
                terminate = True
            round_cost = d2**2 / (2 * sigma**2) + eps**2 / 8
            size_limit = self.max_model_size * (self.rho_used_ + round_cost) / rho
            measured = [m.attrs for m in self.measurements_] + zero_cliques
            cand_t = self._candidates(dom, cands, model, measured, size_limit)
            scores = np.array([
                weights[r] * (np.abs(answers[r] - model.project(r)).sum() - _SQRT_2_OVER_PI * sigma * dom.size(r))
                for r in cand_t
            ])
            sens = score_sensitivity(self.neighbour, max(weights[r] for r in cand_t))
            idx = exponential_mechanism(acc, scores, eps, sens, self.noise_rng_, what=f"AIM round {t} select")
            r_t = cand_t[idx]
            m = self.measure(data, r_t, sigma, what=f"AIM round {t} measure {','.join(r_t)}")
            before = model.project(r_t)
            round_models[t] = model
            model = estimate(dom, self.measurements_, total=self.total_, iters=self.iters, tol=self.tol,
                             warm=model.potentials, step=model.step_size, zeros=zeros, method=self.refit_method)
            self.log_.append({
                "round": t, "selected": list(r_t), "sigma": sigma, "epsilon": eps, "sensitivity": sens,
                "candidates": [list(c) for c in cand_t],
                "candidate_weights": [weights[c] for c in cand_t],
                "model_error_selected": float(np.abs(m.y - before).sum()),
                "model_size_mb": model.size_mb(),
                "estimation_iterations": model.info.iterations,
                "estimation_seconds": model.info.seconds,
            })
            self._progress(self.rho_used_, rho, f"AIM round {t}: measured {','.join(r_t)}")
            if np.abs(model.project(r_t) - before).sum() <= _SQRT_2_OVER_PI * sigma * dom.size(r_t):
                sigma /= 2
                eps *= 2
        self.model_ = estimate(dom, self.measurements_, total=self.total_, iters=self.final_iters,
                               tol=self.tol / 10, warm=model.potentials, step=model.step_size, zeros=zeros,
                               method=self.refit_method)
        self.rounds_ = t
        # keep only the models that some marginal's error bound needs (its last candidate round)
        last = {}
        for entry in self.log_:
            for c in entry["candidates"]:
                last[tuple(c)] = entry["round"]
        keep = set(last.values())
        self.round_models_ = {k: m for k, m in round_models.items() if k in keep}
        for m in self.round_models_.values():
            m.clear_cache()
        self.last_candidate_round_ = last
        self._progress(self.rho_used_, rho, "AIM: done")

    def _candidates(self, dom, cands: Sequence[tuple[str, ...]], model, measured, size_limit) -> list:
        """Candidates whose addition keeps the model within ``size_limit`` MB, plus free ones."""
        clique_sets = [set(c) for c in model.cliques]
        out = []
        for r in cands:
            rs = set(r)
            if any(rs <= c for c in clique_sets):
                out.append(r)
            elif model_size_mb(dom, measured + [r]) <= size_limit:
                out.append(r)
        return out

    def error_bound(self, attrs, confidence: float = 0.95, synthetic=None) -> ErrorBound:
        """High-probability bound on the L1 error of the synthetic marginal on ``attrs`` (AIM §5).

        Bounds ‖M(D)/N − M(D̂)/N̂‖₁ (normalised real vs synthetic marginal) with probability at least
        ``confidence``, for any marginal in the downward closure of the workload. ``synthetic``: the
        synthetic table (integer codes or Dataset); defaults to the last ``sample()``, else the
        model's own marginal. Uses released quantities only: no privacy cost.
        """
        self._check_fitted()
        return aim_error_bound(self, attrs, confidence, synthetic)

    def sample_codes(self, rows: int | None = None) -> np.ndarray:
        codes = super().sample_codes(rows)
        self.last_sample_ = codes  # what error_bound() bounds by default
        return codes

    def error_bounds(self, confidence: float = 0.95, synthetic=None) -> list[ErrorBound]:
        """:meth:`error_bound` for every marginal of the workload (no privacy cost)."""
        return [self.error_bound(r, confidence, synthetic) for r, _ in self.workload_]
