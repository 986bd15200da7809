"""What every end-to-end mechanism shares: calibration, the accountant, measuring, sampling.

Conventions (scikit-learn style): parameters in ``__init__``, validated there; ``fit(data, domain)``
spends the whole budget once; ``sample(rows)`` is post-processing and may be called any number of
times. Randomness: one generator for privacy noise, an independent one for sampling records, both
spawned from ``seed``.

Raw tables: ``fit(dataframe, schema)`` (a :class:`~privmarg.schema.Schema`, a schema dict or file)
encodes the table with a :class:`~privmarg.preprocess.TableEncoder` first. When the schema asks for
a DP preprocessing step (PrivTree binning, rare merging), ``preprocess_share`` of the budget is
charged for it to the same accountant; the mechanism then plans with what is left,
``rho_available_`` (``rho_total`` otherwise), and ``sample()`` decodes to the schema's types.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..dataset import DataError, Dataset, read_table
from ..domain import Domain
from ..estimation import Measurement, StructuralZero
from ..privacy import Accountant, cdp_rho, check_neighbour, gaussian_mechanism, marginal_l2, noise_rngs

Progress = Callable[[float, float, str], None]  # (rho spent by the mechanism, rho it plans with, message)


def as_dataset(data: Any, domain: Any = None, *, drop_unknown: bool = False) -> Dataset:
    """Accept a Dataset, or a DataFrame / 2-d array of integer codes with a Domain or size dict."""
    if isinstance(data, Dataset):
        return data
    if domain is None:
        raise ValueError("a domain is needed to fit integer-coded data")
    if isinstance(domain, Mapping):
        domain = Domain.from_dict(domain)
    elif isinstance(domain, (str, Path)):
        domain = Domain.from_json(domain)
    if isinstance(data, pd.DataFrame):
        return Dataset.from_frame(data, domain, drop_unknown=drop_unknown)
    return Dataset(np.asarray(data), domain)


class Mechanism:
    """Base class: ``epsilon``/``delta`` (or ``rho`` directly) under ``neighbour``."""

    default_neighbour = "add_remove"

    def __init__(self, epsilon: float | None = 1.0, delta: float | None = 1e-9, *, rho: float | None = None,
                 neighbour: str | None = None, seed: int | None = None, preprocess_share: float = 0.1):
        self.epsilon = epsilon
        self.delta = delta
        self.rho = rho
        self.neighbour = check_neighbour(neighbour or self.default_neighbour)
        self.seed = seed
        if not 0 < preprocess_share < 1:
            raise ValueError(f"preprocess_share must be in (0, 1), got {preprocess_share}")
        self.preprocess_share = float(preprocess_share)
        self.rho_total = self._calibrate()

    def _calibrate(self) -> float:
        if self.rho is not None:
            if not (self.rho > 0 and math.isfinite(self.rho)):
                raise ValueError(f"rho must be positive and finite, got {self.rho}")
            return float(self.rho)
        if self.epsilon is None or not self.epsilon > 0 or not math.isfinite(self.epsilon):
            raise ValueError(f"epsilon must be positive and finite, got {self.epsilon}")
        if self.delta is None or not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {self.delta}")
        return cdp_rho(self.epsilon, self.delta)

    # fitting --------------------------------------------------------------------------------
    def fit(self, data: Any, domain: Any = None, *, zeros: list[StructuralZero] | None = None,
            progress: Progress | None = None, drop_unknown: bool = False) -> "Mechanism":
        """Spend the whole budget on ``data``; returns ``self``.

        ``data`` holds integer codes over ``domain`` (a Domain, size dict or domain file), or is a raw
        table (DataFrame or CSV/Parquet path) when ``domain`` is a schema (Schema, dict or file);
        ``drop_unknown`` drops data columns the schema does not name (an error otherwise).
        """
        from ..schema import as_schema

        schema = as_schema(domain) if domain is not None and not isinstance(domain, Domain) else None
        self.accountant_ = Accountant(self.rho_total, self.neighbour, self.epsilon, self.delta)
        self.noise_rng_, self.sample_rng_ = noise_rngs(self.seed)
        self.schema_, self.encoder_ = schema, None
        if schema is not None:
            from ..preprocess import TableEncoder

            frame = read_table(data) if isinstance(data, (str, Path)) else data
            if not isinstance(frame, pd.DataFrame):
                raise DataError("with a schema, data must be a DataFrame or a CSV/Parquet file")
            self.encoder_ = TableEncoder(schema, drop_unknown=drop_unknown)
            rho_pre = self.preprocess_share * self.rho_total if schema.needs_dp else 0.0
            dataset = self.encoder_.fit_encode(frame, self.accountant_, rho_pre, self.noise_rng_)
        else:
            dataset = as_dataset(data, domain, drop_unknown=drop_unknown)
        # the mechanism plans with the budget preprocessing left (all of it without DP preprocessing)
        self.rho_preprocess_ = self.accountant_.rho_spent
        self.rho_available_ = self.rho_total - self.rho_preprocess_
        self.domain_ = dataset.domain
        self.measurements_: list[Measurement] = []
        self.log_: list[dict] = []
        self.zeros_ = list(zeros or [])
        self._progress = progress or (lambda spent, total, msg: None)
        # the record count is public only under replace-one
        self.public_rows_ = len(dataset) if self.neighbour == "replace_one" else None
        t0 = time.perf_counter()
        self._fit(dataset)
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def _fit(self, data: Dataset) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def rho_used_(self) -> float:
        """Budget the mechanism itself has spent so far (the accountant's, less preprocessing)."""
        return self.accountant_.rho_spent - self.rho_preprocess_

    @property
    def total_(self) -> float | None:
        """Record count to use in estimation: public N under replace-one, else None (estimated)."""
        return None if self.public_rows_ is None else float(self.public_rows_)

    def measure(self, data: Dataset, attrs: tuple[str, ...], sigma: float, what: str = "") -> Measurement:
        """Release ``M_attrs(data) + N(0, sigma²)``; charges Δ₂²/(2σ²) (Δ₂ = 1 or √2)."""
        y = gaussian_mechanism(self.accountant_, data.project(attrs), sigma, marginal_l2(self.neighbour),
                               self.noise_rng_, what=what or f"marginal {','.join(attrs)}")
        m = Measurement(attrs, y, sigma)
        self.measurements_.append(m)
        return m

    # sampling ------------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit(data, domain) first")

    def default_rows(self) -> int:
        self._check_fitted()
        return self.public_rows_ if self.public_rows_ is not None else max(1, int(self.model_.total))

    def sample_codes(self, rows: int | None = None) -> np.ndarray:
        """Synthetic records as integer codes (post-processing: free)."""
        self._check_fitted()
        rows = self.default_rows() if rows is None else int(rows)
        return self.model_.synthetic_data(rows, self.sample_rng_)

    def sample(self, rows: int | None = None, *, midpoint: bool = False) -> pd.DataFrame:
        """A synthetic table (post-processing: free): integer codes over the fitted domain, or, when
        fitted with a schema, the schema's columns and dtypes (numeric values drawn within their bin,
        or its midpoint with ``midpoint=True``)."""
        codes = self.sample_codes(rows)
        if getattr(self, "encoder_", None) is not None:
            return self.encoder_.decode(codes, self.sample_rng_, midpoint=midpoint)
        return pd.DataFrame(codes, columns=list(self.domain_.attrs))

    # reporting -----------------------------------------------------------------------------
    def privacy_report(self) -> dict:
        """Budget, neighbouring relation and every charge, enough to recompute each rho."""
        self._check_fitted()
        return self.accountant_.to_dict()

    def measurements_report(self) -> list[dict]:
        return [{"attrs": list(m.attrs), "sigma": float(m.sigma), "source": m.source} for m in self.measurements_]
