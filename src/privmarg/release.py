"""What a fitted synthesizer and a saved-then-loaded one share: sampling and reports.

Everything here is post-processing of what the fit released (the model, the encoder's public or DP
parameters, the ledger): no privacy cost, any number of calls. Sampling can be *conditional*: given
values for some columns (``conditions={"sex": 0}``, or a partial table whose given columns are
kept row by row), the other columns are drawn from the model's exact conditional distribution
(graphical models: the evidence is clamped in the junction tree; see
:meth:`~privmarg.generate.pgm.GraphicalModel.condition`), not by rejection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .core import query_groups
from .privacy import rho_by_phase
from .privacy.risk import risk_panel


_UNSET = object()
# bytes a sampled cell takes at its peak: the int64 codes, the model's draw and the decoded column
SAMPLE_BYTES_PER_CELL = 24


def check_sample_memory(rows: int, columns: int) -> None:
    """Refuse, before drawing, a sample whose table would not fit in the memory available (a
    ``MemoryError`` half-way is a traceback and a lost run); ``sample_to`` writes any size in chunks."""
    from .memory import available_memory

    need = rows * max(columns, 1) * SAMPLE_BYTES_PER_CELL
    avail = available_memory()
    if avail is not None and need > avail:
        raise ValueError(f"{rows:,} rows × {columns} columns need about {need / 2**30:,.1f} GiB to sample at once; "
                         f"{avail / 2**30:.1f} GiB is available: sample fewer rows, or write them in chunks "
                         "with sample_to(path, rows) (CLI: privmarg sample streams unconditioned rows)")


class Released:
    """Sampling and reports over ``model_`` (codes over ``domain_``), an optional ``encoder_``
    (raw schema), ``accountant_`` (the ledger), ``measurements_`` and ``public_rows_``."""

    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit(data, domain) first")

    def default_rows(self) -> int:
        """N under replace-one; else the model's own count (a noisy N, or PrivPGD's particles)."""
        self._check_fitted()
        own = getattr(self.model_, "default_rows", None)
        if own is not None:
            return int(own)
        return self.public_rows_ if self.public_rows_ is not None else max(1, int(self.model_.total))

    def _rng(self, seed: Any) -> np.random.Generator:
        if seed is None:
            return self.sample_rng_
        if isinstance(seed, np.random.Generator):
            return seed
        return np.random.default_rng(seed)

    # ---------------------------------------------------------------------------- sampling
    def sample_codes(self, rows: int | None = None, *, seed: Any = None, conditions: Any = None) -> np.ndarray:
        """Synthetic records as integer codes over the fitted domain (post-processing: free).

        ``seed``: draw with a fresh generator seeded so (the same rows for the same seed, also from
        a saved and reloaded model); default: the synthesizer's own generator. ``conditions``: see
        :meth:`sample`."""
        codes, _ = self._draw(rows, seed, conditions)
        return codes

    def sample(self, rows: int | None = None, *, midpoint: bool = False, seed: Any = None,
               conditions: Any = None) -> pd.DataFrame:
        """A synthetic table (post-processing: free): integer codes over the fitted domain, or, when
        fitted with a schema, the schema's columns and dtypes (numeric values drawn within their bin,
        or its midpoint with ``midpoint=True``).

        ``conditions``: ``{"column": value, ...}`` (every row has these values), or a DataFrame of
        some columns (one synthetic row per row: its given values kept, ``rows`` then defaults to its
        length). Values are raw values for a schema-fitted synthesizer (mapped to their bin or
        category), codes otherwise. The other columns are drawn from the model's conditional
        distribution given them: exact for graphical models; PrivPGD draws among its particles that
        carry the condition. A condition the model gives probability zero is a ``ValueError``."""
        self._check_fitted()
        rng = self._rng(seed)
        codes, exact = self._draw(rows, rng, conditions)
        if self.encoder_ is not None:
            return self.encoder_.decode(codes, rng, midpoint=midpoint, exact=exact)
        return pd.DataFrame(codes, columns=list(self.domain_.attrs))

    def sample_to(self, path: Any, rows: int | None = None, *, chunk_rows: int = 1_000_000,
                  midpoint: bool = False, seed: Any = None) -> int:
        """Write ``rows`` synthetic records (default :meth:`default_rows`) to a Parquet or CSV file,
        sampling at most ``chunk_rows`` records at a time, so memory holds one chunk
        (post-processing: free). Written atomically (the file appears whole or not at all); returns
        the number of rows written.

        Chunks are drawn one after another from one stream (``seed`` as in :meth:`sample`): the file
        holds what ``sample(chunk_rows)`` called repeatedly would give, hence the same rows as one
        ``sample(rows)`` when ``rows <= chunk_rows``. With several chunks the rows differ from a
        one-shot sample (each chunk is rounded to the model on its own) but follow the same model.
        """
        from .data.writer import write_table_chunks

        self._check_fitted()
        rows = self.default_rows() if rows is None else int(rows)
        if rows < 0:
            raise ValueError("rows must be >= 0")
        if int(chunk_rows) < 1:
            raise ValueError("chunk_rows must be at least 1")
        chunk_rows = int(chunk_rows)
        rng = self._rng(seed)
        kept = self.__dict__.get("last_sample_", _UNSET)  # a preset's record of its last sample stays

        def chunks():
            done = 0
            while True:
                n = min(chunk_rows, rows - done)
                yield self.sample(n, midpoint=midpoint, seed=rng)
                done += n
                if done >= rows:
                    return

        try:
            return write_table_chunks(chunks(), path, self.parquet_nulls())
        finally:
            if kept is _UNSET:
                self.__dict__.pop("last_sample_", None)
            else:
                self.last_sample_ = kept

    def parquet_nulls(self) -> dict | None:
        """The columns whose missing-value text a Parquet output stores as a missing value of their
        type (:meth:`~privmarg.preprocess.TableEncoder.parquet_nulls`); None for integer codes."""
        return self.encoder_.parquet_nulls() if self.encoder_ is not None else None

    def _draw(self, rows: int | None, seed: Any, conditions: Any) -> tuple[np.ndarray, dict | None]:
        self._check_fitted()
        rng = self._rng(seed)
        given, broadcast = _as_frame(conditions)
        if given is not None and not broadcast:
            if rows is not None and int(rows) != len(given):
                raise ValueError(f"rows={rows} but the conditions table has {len(given)} rows")
            rows = len(given)
        rows = self.default_rows() if rows is None else int(rows)
        if rows < 0:
            raise ValueError("rows must be >= 0")
        check_sample_memory(rows, len(self.domain_))
        if given is None:
            codes = self.model_.sample(rows, rng)
            self.last_sample_ = codes  # what error_bounds() bound by default
            return codes, None
        codes, exact = self._encode_given(given)
        cond = getattr(self.model_, "sample_conditional", None)
        if cond is None:
            raise ValueError(f"a {type(self.model_).__name__} model cannot sample conditionally")
        attrs = list(codes)
        if broadcast:
            evidence = {a: int(codes[a][0]) for a in attrs}
            out = cond(rows, rng, evidence)
            if exact is not None:
                exact = {a: np.repeat(v, rows) for a, v in exact.items()}
            return out, exact
        # rows grouped by their evidence pattern: one clamped model per distinct pattern
        pattern = np.column_stack([codes[a] for a in attrs])
        uniq, inv = np.unique(pattern, axis=0, return_inverse=True)
        inv = np.asarray(inv).reshape(-1)
        order = np.argsort(inv, kind="stable")
        bounds = np.searchsorted(inv[order], np.arange(len(uniq) + 1))
        out = np.empty((rows, len(self.domain_)), dtype=np.int64)
        for u in range(len(uniq)):
            idx = order[bounds[u]:bounds[u + 1]]
            out[idx] = cond(len(idx), rng, {a: int(v) for a, v in zip(attrs, uniq[u])})
        return out, exact

    def _encode_given(self, given: pd.DataFrame) -> tuple[dict[str, np.ndarray], dict | None]:
        if self.encoder_ is not None:
            return self.encoder_.encode_values(given)
        dom = self.domain_
        codes = {}
        for col in given.columns:
            name = str(col)
            if name not in dom:
                raise ValueError(f"condition on {name!r}: not a column of the model ({', '.join(dom.attrs)})")
            try:
                v = pd.to_numeric(given[col], errors="raise").to_numpy(dtype=float)
            except (ValueError, TypeError):
                raise ValueError(f"condition on {name!r}: codes must be integers") from None
            if not (np.isfinite(v).all() and (v == np.round(v)).all()):
                raise ValueError(f"condition on {name!r}: codes must be integers")
            v = v.astype(np.int64)
            if v.size and (v.min() < 0 or v.max() >= dom[name]):
                raise ValueError(f"condition on {name!r}: code outside 0..{dom[name] - 1}")
            codes[name] = v
        return codes, None

    # ------------------------------------------------------------------------------ bounds
    def error_bound(self, attrs, confidence: float = 0.95, synthetic=None):
        """Bound, with probability ``confidence``, on the L1 error ‖M(D)/N − M(D̂)/N̂‖₁ of the
        synthetic marginal on ``attrs`` (normalised real vs synthetic), where a released Gaussian
        measurement covers ``attrs`` (the inverse-variance combination of those measurements, as
        AIM's supported bound); otherwise ``l1_bound`` is None: nothing released bounds it.
        ``synthetic``: the table (codes or Dataset), default the last unconditioned ``sample()``,
        else the model's marginal. Post-processing: no privacy cost. AIM adds bounds for its
        workload's unmeasured marginals."""
        from .select.aim_bounds import measured_error_bound

        self._check_fitted()
        return measured_error_bound(self, attrs, confidence, synthetic)

    def error_bounds(self, confidence: float = 0.95, synthetic=None) -> list:
        """:meth:`error_bound` of every measured marginal (each clique a Gaussian measurement
        covers, once): the bounds a release can state. No privacy cost."""
        from .select.aim_bounds import BoundWork, measured_error_bound, released_table

        self._check_fitted()
        table, work = released_table(self, synthetic), BoundWork()
        cliques = dict.fromkeys(self.domain_.canonical(m.attrs) for m in self.measurements_ if m.attrs)
        bounds = (measured_error_bound(self, r, confidence, table, work) for r in cliques)
        return [b for b in bounds if b.l1_bound is not None]

    # --------------------------------------------------------------------------- reporting
    def privacy_report(self) -> dict:
        """Budget, neighbouring relation and every charge, enough to recompute each rho. ``epsilon``
        and ``delta`` are the target's when given as such (None when ``rho`` was given); with a delta,
        ``epsilon_spent`` converts what was actually spent. ``risk``: what the spent budget bounds
        for one person in the data (membership and attribute inference, any attacker; see
        :mod:`privmarg.privacy.risk`)."""
        self._check_fitted()
        out = self.accountant_.to_dict()
        out["noise"] = getattr(self, "noise", "continuous")  # the noise kind asked for
        out["preprocessing_charges"] = int(getattr(self, "preprocess_charges_", 0))
        out["rho_by_phase"] = rho_by_phase(out["ledger"], out["preprocessing_charges"])
        if out["delta"] is not None:
            out["epsilon_spent"] = self.accountant_.epsilon_spent(out["delta"]) if out["rho_spent"] > 0 else 0.0
        out["risk"] = risk_panel(self.accountant_).to_dict()
        return out

    def measurements_report(self) -> list[dict]:
        """Per measurement: its attributes, σ, source (and a grouped one's group count per column)."""
        out = []
        for m in self.measurements_:
            row = {"attrs": list(m.attrs), "sigma": None if m.sigma is None else float(m.sigma), "source": m.source}
            if m.sigma is None and "loss_sigma" in m.meta:
                row["loss_sigma"] = float(m.meta["loss_sigma"])
            maps = None if m.query is None else query_groups(m.query, self.domain_.sizes(m.attrs))
            if maps is not None:  # measured over grouped values: each column's group count
                row["groups"] = [int(x.max()) + 1 for x in maps]
            out.append(row)
        return out


def _as_frame(conditions: Any) -> tuple[pd.DataFrame | None, bool]:
    """(a table of given values, whether its single row applies to every sampled row)."""
    if conditions is None:
        return None, False
    if isinstance(conditions, pd.DataFrame):
        if conditions.shape[1] == 0:
            return None, False
        return conditions.reset_index(drop=True), False
    if isinstance(conditions, Mapping):
        if not conditions:
            return None, False
        for k, v in conditions.items():
            if isinstance(v, (list, tuple, np.ndarray, pd.Series, dict, set)):
                raise ValueError(f"condition on {k!r}: give one value (for values per row, pass a DataFrame)")
        return pd.DataFrame({str(k): [v] for k, v in conditions.items()}), True
    raise TypeError("conditions must be a dict {column: value} or a DataFrame of given columns")
