"""The :class:`Synthesizer`: transforms + a selector + a generator, what a user fits and samples.

``fit`` spends the whole budget once: DP preprocessing of a raw table (its share of the budget),
then the selector's measurements through one :class:`~privmarg.measure.MeasurementSession`; the
generator turns them into a model (post-processing). ``sample`` is post-processing and may be
called any number of times. Randomness: one generator for privacy noise, an independent one for
everything else (generator seeds, records), both spawned from ``seed``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .core import Domain, Measurement, StructuralZero

log = logging.getLogger("privmarg")
from .core.zeros import check_zeros
from .data import DataError, Dataset, MarginalSource, MemorySource, read_table
from .measure import MeasurementSession
from .privacy import Accountant, cdp_rho, check_neighbour, check_noise, discovery_delta, noise_rngs, preprocess_budget
from .release import Released
from .select.base import Context, Selection

Progress = Callable[[float, float, str], None]  # (rho spent by the run, rho it plans with, message)


def as_dataset(data: Any, domain: Any = None, *, drop_unknown: bool = False) -> Dataset:
    """A Dataset, or a DataFrame / 2-d array of integer codes with a Domain, size dict or domain file."""
    if isinstance(data, Dataset):
        return data
    if domain is None:
        raise ValueError("a domain is needed to fit integer-coded data")
    if isinstance(domain, Mapping):
        domain = Domain.from_dict(domain)
    elif isinstance(domain, (str, Path)):
        domain = Domain.from_json(domain)
    if isinstance(data, (str, Path)):
        data = read_table(data)
    if isinstance(data, pd.DataFrame):
        return Dataset.from_frame(data, domain, drop_unknown=drop_unknown)
    return Dataset(np.asarray(data), domain)


def _is_source(obj: Any) -> bool:
    return isinstance(obj, MarginalSource) and not isinstance(obj, Dataset)


def _settle_with_public(schema, public):
    """(schema, public table, notes): a raw public table (read if a path) settles the schema's DP
    bounds and DP values for free (:func:`~privmarg.preprocess.public_schema.refine_with_public`)."""
    if schema is None or public is None or _is_source(public):
        return schema, public, []
    public = read_table(public) if isinstance(public, (str, Path)) else public
    if not isinstance(public, pd.DataFrame):
        return schema, public, []
    from .preprocess.public_schema import refine_with_public

    schema, notes = refine_with_public(schema, public)
    return schema, public, notes


class Synthesizer(Released):
    """``selector`` (what to measure) + ``generator`` (how to make records; default: a graphical
    model), under ``epsilon``/``delta`` (or ``rho`` zCDP directly) and ``neighbour``
    (``"add_remove"``: N private; ``"replace_one"``: N public). ``seed`` makes a run reproducible.

    Privacy: ``fit`` spends exactly the budget (a selector may leave some unspent only where its
    algorithm says so, e.g. JAM's public choices); ``privacy_report()`` lists every charge.

    ``noise``: ``"continuous"`` (default, the papers' float Gaussian) or ``"discrete"`` (the exact
    discrete Gaussian on integer counts and discrete Laplace in PrivTree, same zCDP cost; see
    :class:`~privmarg.measure.MeasurementSession` for what falls back to continuous noise).
    """

    default_neighbour = "add_remove"

    def __init__(self, selector: Any, generator: Any = None, *, epsilon: float | None = 1.0,
                 delta: float | None = 1e-9, rho: float | None = None, neighbour: str | None = None,
                 seed: int | None = None, preprocess_share: float = 0.1, noise: str = "continuous"):
        from .registry import make_generator

        self.selector = selector
        self.generator = make_generator(generator)
        self.epsilon = epsilon
        self.delta = delta
        self.rho = rho
        self.neighbour = check_neighbour(neighbour or self.default_neighbour)
        self.seed = seed
        self.noise = check_noise(noise)
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

    # ----------------------------------------------------------------------------- fitting
    def fit(self, data: Any, domain: Any = None, *, public: Any = None, zeros: list[StructuralZero] | None = None,
            progress: Progress | None = None, drop_unknown: bool = False,
            allow_draft_schema: bool = False) -> "Synthesizer":
        """Spend the whole budget on ``data``; returns ``self``. Once only: a second fit would be a
        second release, so it is refused (make a new synthesizer).

        ``data``: integer codes over ``domain`` (a Domain, size dict or domain file) as a Dataset,
        DataFrame, array or file; a :class:`~privmarg.data.MarginalSource` (its own domain); or a raw
        table (DataFrame or CSV/Parquet path) when ``domain`` is a schema (Schema, dict or file).
        ``public``: public records over the same domain/schema (for selectors that use them, JAM).
        ``drop_unknown`` drops data columns the schema/domain does not name (an error otherwise).
        ``zeros``: structural zeros over the codes; with a schema, also raw values
        (``[{"attrs": ["sex", "pregnant"], "cells": [["male", "yes"]]}]``, see
        :meth:`~privmarg.preprocess.TableEncoder.structural_zeros`), checked before any budget is spent.
        A schema marked ``"draft": true`` (read off the data) is refused unless ``allow_draft_schema``.
        """
        from .schema import as_schema

        if hasattr(self, "accountant_"):
            raise RuntimeError(f"this {type(self).__name__} has already spent its budget on a fit "
                               f"(rho={self.accountant_.rho_spent:.6g}); a second fit is a second release: "
                               "create a new one")
        t0 = time.perf_counter()
        rho_given = self.rho is not None
        schema, public, self.public_schema_notes_ = _settle_with_public(
            as_schema(domain) if domain is not None and not isinstance(domain, Domain) else None, public)
        delta_disc, self.rho_total = 0.0, self._calibrate()  # the target's, whatever an earlier failed fit set
        if schema is not None and schema.requires_delta and rho_given:
            raise ValueError("the schema asks for DP value discovery (\"values\": \"dp\"), which spends part of "
                             "delta: give epsilon and delta, not rho")
        if schema is not None and schema.needs_delta and not rho_given:
            # DP value discovery and heavy values of float columns spend part of delta (with rho given there
            # is no delta: heavy-value search is skipped, with a warning)
            delta_disc = discovery_delta(self.delta, True)
            self.rho_total = cdp_rho(self.epsilon, self.delta - delta_disc)
        accountant = Accountant(self.rho_total, self.neighbour, None if rho_given else self.epsilon,
                                None if rho_given else self.delta, delta_budget=delta_disc)
        noise_rng, sample_rng = noise_rngs(self.seed)
        self.schema_, self.encoder_ = schema, None
        if schema is not None:
            from .preprocess import TableEncoder

            if not allow_draft_schema:
                schema.check_not_draft()
            frame = read_table(data) if isinstance(data, (str, Path)) else data
            if not isinstance(frame, pd.DataFrame):
                raise DataError("with a schema, data must be a DataFrame or a CSV/Parquet file")
            self.encoder_ = TableEncoder(schema, drop_unknown=drop_unknown)
            raw_zeros = [z for z in (zeros or []) if not isinstance(z, StructuralZero)]
            if raw_zeros:
                self.encoder_.check_zeros(raw_zeros)  # before any budget is spent
            rho_pre = preprocess_budget(self.rho_total, self.preprocess_share, schema.needs_dp)
            source = MemorySource(self.encoder_.fit_encode(frame, accountant, rho_pre, noise_rng,
                                                           rho_model=self.rho_total - rho_pre,
                                                           noise=self.noise))
            self.schema_ = self.encoder_.schema  # with any DP bounds and values filled in (as a saved model's)
            if raw_zeros:
                zeros = ([z for z in zeros if isinstance(z, StructuralZero)]
                         + self.encoder_.structural_zeros(raw_zeros))
            if schema.rules:  # the schema's rules: records that break one are never generated
                zeros = list(zeros or []) + self.encoder_.rule_zeros()
        elif _is_source(data):
            source = data
        else:
            source = MemorySource(as_dataset(data, domain, drop_unknown=drop_unknown))
        pub = None if public is None else self._public_source(public, source.domain, drop_unknown)
        self.accountant_ = accountant
        self.sample_rng_ = sample_rng
        self.domain_ = source.domain
        self.zeros_ = list(zeros or [])
        check_zeros(self.zeros_, source.domain)  # zeros forbidding every record: before measuring
        self.rho_preprocess_ = accountant.rho_spent
        self.preprocess_charges_ = len(accountant.to_dict()["ledger"])  # the ledger's first charges
        self.rho_available_ = self.rho_total - self.rho_preprocess_
        # the record count is public only under replace-one
        self.public_rows_ = int(source.count()) if self.neighbour == "replace_one" else None
        session = MeasurementSession(source, accountant, noise_rng, noise=self.noise)
        user_report = progress or (lambda spent, total, msg: None)

        def report(spent: float, total: float, msg: str) -> None:
            # released quantities only (what was measured, the budget spent): safe to log
            log.info("%s (rho %.4g of %.4g spent)", msg, spent, total)
            user_report(spent, total, msg)
        ctx = Context(self.rho_available_, None if self.public_rows_ is None else float(self.public_rows_),
                      self.zeros_, pub, lambda msg: report(session.rho_spent, self.rho_available_, msg))
        selection: Selection = self.selector.run(session, ctx)
        self.selection_ = selection
        self.measurements_: list[Measurement] = list(selection.released or selection.measurements)
        self.log_ = session.rounds
        self.model_ = self._final_model(selection, session, ctx, sample_rng)
        self.fit_seconds_ = time.perf_counter() - t0
        report(session.rho_spent, self.rho_available_, "done")
        return self

    def _final_model(self, selection: Selection, session: MeasurementSession, ctx: Context,
                     sample_rng: np.random.Generator) -> Any:
        """The generator's fit to the selection's measurements, then the selection's last private
        choice (if any) and its lift to the data's domain."""
        seed = np.random.SeedSequence(int(sample_rng.integers(2**63)))  # data-independent
        drop = getattr(selection.model, "drop_marginals", None)
        if drop is not None:  # the final fit needs only its potentials: a model's size less at the peak
            drop()
        model = self.generator.generate(selection.measurements, selection.domain, zeros=self.zeros_,
                                        total=ctx.total, warm=selection.model, seed=seed, progress=ctx.progress,
                                        **selection.hints)
        if selection.choose is not None:  # a last private choice among releases built from the model
            model = selection.choose(session, model)
        return selection.lift(model) if selection.lift is not None else model

    def _public_source(self, public: Any, domain: Domain, drop_unknown: bool) -> MemorySource:
        if _is_source(public):
            return public
        if isinstance(public, (str, Path)):
            public = read_table(public)
        if self.encoder_ is not None and isinstance(public, pd.DataFrame):
            data = self.encoder_.encode(public)
        elif isinstance(public, pd.DataFrame):
            data = Dataset.from_frame(public, domain, drop_unknown=drop_unknown)
        else:
            data = as_dataset(public, domain)
        if tuple(data.domain.attrs) != tuple(domain.attrs) or tuple(data.domain.shape) != tuple(domain.shape):
            raise DataError("the public data must have the same domain as the private data")
        if len(data) == 0:
            raise DataError("the public data is empty")
        return MemorySource(data)

    @property
    def rho_used_(self) -> float:
        """Budget spent by selection (the accountant's, less preprocessing)."""
        return self.accountant_.rho_spent - self.rho_preprocess_

    # ------------------------------------------------------------------------ save / pickle
    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Save the fitted synthesizer to the directory ``path`` (see :mod:`privmarg.persist`): only
        what the fit released (model parameters, noisy measurements, the encoder's public or DP
        parameters, the privacy ledger), never data, exact counts or the seed. Written atomically;
        an existing ``path`` is replaced only with ``force=True``. Load with :func:`privmarg.load`."""
        from .persist import save

        return save(self, path, force=force)

    def __getstate__(self) -> dict:
        # pickling is a release too: no seed and no generator state (numpy pickles a generator with
        # its seed, from which the privacy noise could be replayed); sampling after unpickling uses
        # fresh entropy, or sample(seed=...). Nothing else holds private data after fit.
        state = self.__dict__.copy()
        state["seed"] = None
        state.pop("sample_rng_", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if "model_" in state:
            self.sample_rng_ = np.random.default_rng()
