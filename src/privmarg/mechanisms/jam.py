"""JAM-PGM: joint adaptive measurements with public data + Private-PGM (SPEC §7).

Each round the exponential mechanism chooses, over the joint candidate set ``W⁺ × {private,
public}``, both a marginal and *how* to answer it: a Gaussian measurement of the private data
(unbiased, noisy, costs budget) or the public proxy ``(N/N_pub)·M_r(D_pub)`` (biased, free). When
the public proxy is chosen the round's measurement budget is not spent and rolls forward to later
rounds ("frugal budgeting").
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..dataset import DataError, Dataset, read_table
from ..estimation import Measurement, estimate, model_size_mb
from ..privacy import exponential_epsilon, exponential_mechanism, gaussian_sigma, marginal_l2, score_sensitivity
from ..workload import downward_closure, parse_workload
from .base import Mechanism, as_dataset

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
WEIGHTINGS = ("equal", "mle", "inv_sigma")


class JAM(Mechanism):
    """JAM-PGM (Fuentes et al., AISTATS 2024): adaptive joint selection of private and public marginals.

    Parameters: ``workload`` (as for AIM; default all 3-way marginals); ``rounds`` T (a fixed number
    of selections, default 30); ``alpha`` the share of each round's budget spent on *selection*
    (default 0.2; the rest is for the Gaussian measurement); ``max_model_size`` in MB (2**20 bytes);
    ``iters`` estimation iterations per round (default 50, warm started when ``warm_start``) and
    ``final_iters`` for the last fit (default 300). The paper refits from scratch with 1000 iterations
    every round; warm starts make 50 enough: on titanic at ε = 1 (seed 0) 50/300 picked the same
    30 marginals as 250/1000 with workload error 0.456 vs 0.463, in 152 s instead of 653 s (the public
    3-way proxies grow the model to 12 MB there; measured before the engine's log-step clip, which
    made every fit here converge much further); ``weighting`` of measurements in the Private-PGM loss:
    ``"equal"`` (the paper: every measurement weight 1, because the public proxy's error is private),
    or ``"mle"`` / ``"inv_sigma"``: private measurements weighted by their noise σ, and each public one
    as if it had the noise σ_t a private measurement would have had in the round that chose it (the
    exponential mechanism preferred the proxy over that measurement; no extra privacy cost).

    Privacy: ``rho``-zCDP under replace-one neighbours (the record count N is public; it rescales the
    public answers). Round ``t`` has budget ``ρ_t = (ρ − ρ_used)/(T − t)``; selection always charges
    ``alpha·ρ_t`` (exponential mechanism, score sensitivity 4); a private choice also charges
    ``(1 − alpha)·ρ_t`` (Gaussian, Δ₂ = √2); a public choice charges nothing more. Hence
    ``ρ_used ≤ ρ`` on every path; budget left after the last round (public choices) is unspent.

    ``fit(private, domain, public=table)``: ``public`` holds records over the same domain (Dataset,
    DataFrame, integer array or CSV/Parquet path; raw values when fitted with a schema).
    After fitting, ``public_marginals_`` / ``private_marginals_`` list the marginals answered from each
    source, and ``log_`` has one entry per round (selection, source, σ_t, ε_t, budget).
    """

    default_neighbour = "replace_one"

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, workload="all-3way",
                 rounds: int = 30, alpha: float = 0.2, max_model_size: float = 80.0, iters: int = 50,
                 final_iters: int = 300, tol: float = 1e-4, weighting: str = "equal", warm_start: bool = True,
                 **kw):
        super().__init__(epsilon, delta, **kw)
        if self.neighbour != "replace_one":
            raise ValueError("JAM needs replace-one neighbours: the public answers are rescaled by the "
                             "record count N, which is private under add/remove")
        if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
            raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
        if not 0 < alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        if max_model_size <= 0:
            raise ValueError("max_model_size must be positive")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
        self.workload = workload
        self.rounds = int(rounds)
        self.alpha = float(alpha)
        self.max_model_size = float(max_model_size)
        self.iters = iters
        self.final_iters = final_iters
        self.tol = tol
        self.weighting = weighting
        self.warm_start = bool(warm_start)

    # fitting --------------------------------------------------------------------------------
    def fit(self, data: Any, domain: Any = None, *, public: Any = None, **kw) -> "JAM":
        """Spend the budget on ``data`` (private), using ``public`` (same domain) for free proxies."""
        if public is None:
            raise ValueError("JAM needs public data: fit(private, domain, public=table)")
        self._public_input = public
        self._public_drop_unknown = bool(kw.get("drop_unknown", False))
        try:
            return super().fit(data, domain, **kw)
        finally:
            del self._public_input, self._public_drop_unknown

    def _public_dataset(self, dom) -> Dataset:
        pub = self._public_input
        if isinstance(pub, (str, Path)):
            pub = read_table(pub)
        if getattr(self, "encoder_", None) is not None and isinstance(pub, pd.DataFrame):
            pub = self.encoder_.encode(pub)
        elif isinstance(pub, pd.DataFrame):
            pub = Dataset.from_frame(pub, dom, drop_unknown=self._public_drop_unknown)
        pub = as_dataset(pub, dom)
        if tuple(pub.domain.attrs) != tuple(dom.attrs) or tuple(pub.domain.shape) != tuple(dom.shape):
            raise DataError("the public data must have the same domain as the private data")
        if len(pub) == 0:
            raise DataError("the public data is empty")
        return pub

    def _fit(self, data: Dataset) -> None:
        dom = data.domain
        acc = self.accountant_
        rho = self.rho_available_  # the budget left after any DP preprocessing
        public = self._public_dataset(dom)
        self.public_rows_input_ = len(public)
        workload = parse_workload(self.workload, dom)
        self.workload_ = workload
        cands = list(downward_closure(workload, dom))
        self.candidates_ = cands
        T, alpha = self.rounds, self.alpha
        n = float(len(data))  # public under replace-one
        d2 = marginal_l2(self.neighbour)  # √2
        # EM sensitivity: the public score ‖M_r(D) − M_r(p̂)‖₁ − ‖M_r(D) − a_r‖₁ is a difference of two
        # terms that each move by 2 under replace-one, possibly in opposite directions (private: 2)
        sens = 2 * score_sensitivity(self.neighbour)
        scale = n / len(public)
        proxy = {r: scale * public.project(r) for r in cands}  # public: free
        answers = {r: data.project(r) for r in cands}  # private; only read inside charged primitives
        pub_err = {r: float(np.abs(answers[r] - proxy[r]).sum()) for r in cands}  # private, ditto
        zeros = self.zeros_
        zero_cliques = [z.attrs for z in zeros]
        fit_kw = dict(total=n, tol=self.tol, zeros=zeros, weighting=self.weighting)
        model = None
        pub_done: set[tuple[str, ...]] = set()
        for t in range(T):
            rho_t = max(0.0, rho - self.rho_used_) / (T - t)
            if rho_t <= 1e-12 * rho:
                break
            rho_sel, rho_meas = alpha * rho_t, (1 - alpha) * rho_t
            eps = exponential_epsilon(rho_sel)
            sigma = gaussian_sigma(rho_meas, d2)
            size_limit = self.max_model_size * max(1.0 / T, self.rho_used_ / rho)
            measured = [m.attrs for m in self.measurements_] + zero_cliques
            cand_t = self._candidates(dom, cands, model, measured, size_limit)
            pub_t = [r for r in cand_t if r not in pub_done]  # a repeated proxy adds no information
            if model is None:
                err = {r: 0.0 for r in cand_t}
            else:
                err = {r: float(np.abs(answers[r] - model.project(r)).sum()) for r in cand_t}
            scores = np.array([err[r] - _SQRT_2_OVER_PI * sigma * dom.size(r) for r in cand_t]
                              + [err[r] - pub_err[r] for r in pub_t])
            idx = exponential_mechanism(acc, scores, eps, sens, self.noise_rng_, what=f"JAM round {t + 1} select")
            source = "private" if idx < len(cand_t) else "public"
            r_t = cand_t[idx] if source == "private" else pub_t[idx - len(cand_t)]
            if source == "private":
                self.measure(data, r_t, sigma, what=f"JAM round {t + 1} measure {','.join(r_t)}")
            else:
                pub_done.add(r_t)
                self.measurements_.append(Measurement(r_t, proxy[r_t], sigma, source="public",
                                                      meta={"round": t + 1, "rows": len(public)}))
            warm = dict(warm=model.potentials, step=model.step_size) if model is not None and self.warm_start else {}
            model = estimate(dom, self.measurements_, iters=self.iters, **fit_kw, **warm)
            self.log_.append({
                "round": t + 1, "selected": list(r_t), "source": source, "sigma": sigma, "epsilon": eps,
                "sensitivity": sens, "rho_round": rho_t, "rho_select": rho_sel,
                "rho_measure": rho_meas if source == "private" else 0.0, "rho_used": self.rho_used_,
                "size_limit_mb": size_limit, "candidates": [list(c) for c in cand_t],
                "public_candidates": len(pub_t), "model_size_mb": model.size_mb(),
                "estimation_iterations": model.info.iterations, "estimation_seconds": model.info.seconds,
            })
            self._progress(self.rho_used_, rho, f"JAM round {t + 1}: {source} {','.join(r_t)}")
        if model is None:  # no round could run (budget exhausted by preprocessing)
            model = estimate(dom, [], total=n, zeros=zeros)
        warm = dict(warm=model.potentials, step=model.step_size) if self.measurements_ else {}
        self.model_ = estimate(dom, self.measurements_, iters=self.final_iters,
                               **{**fit_kw, "tol": self.tol / 10}, **warm)
        self.rounds_ = len(self.log_)
        self._progress(self.rho_used_, rho, "JAM: done")

    def _candidates(self, dom, cands, model, measured, size_limit) -> list:
        """Candidates whose addition keeps the model within ``size_limit`` MB, plus free ones."""
        clique_sets = [set(c) for c in model.cliques] if model is not None else []
        out = []
        for r in cands:
            rs = set(r)
            if any(rs <= c for c in clique_sets) or model_size_mb(dom, measured + [r]) <= size_limit:
                out.append(r)
        return out

    # reporting -----------------------------------------------------------------------------
    @property
    def public_marginals_(self) -> list[tuple[str, ...]]:
        """Marginals answered with the (rescaled) public data, in selection order."""
        self._check_fitted()
        return [m.attrs for m in self.measurements_ if m.source == "public"]

    @property
    def private_marginals_(self) -> list[tuple[str, ...]]:
        """Marginals measured on the private data with Gaussian noise, in selection order."""
        self._check_fitted()
        return [m.attrs for m in self.measurements_ if m.source == "private"]

    def measurements_report(self) -> list[dict]:
        out = super().measurements_report()
        for row, m in zip(out, self.measurements_):
            if m.source == "public":
                row["sigma"] = None  # not a noise level: the proxy is exact on the public data
                row["loss_sigma"] = float(m.sigma)
        return out
